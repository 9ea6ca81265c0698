"""Round float64 values to integers with integer operations.

LLVM's SPIR-V backend turns ``llvm.trunc``, ``llvm.floor``, ``llvm.rint``
and their kin into GLSL.std.450's ``Trunc``, ``Floor``, ``RoundEven``, ...
Vulkan requires those to be exact, but lavapipe computes them for float64
vectors wider than the host's rounding instructions (eight doubles without
AVX-512: an AMD EPYC, most x86 CPUs) with a float32 recipe: values of
magnitude 2**24 or more are returned unchanged and ``RoundEven`` adds
0.49999997 and truncates (1.5 gives 1). libclc's ``sin``, ``tan`` and
``fmod`` round float64 values in their argument reduction, so they failed
there too (``sin(1e9)`` gave -0.7071). No driver is trusted with them: this
pass rewrites every float64 rounding call of the final IR into operations on
the value's bits, which every device computes alike, and exact float
additions of 0 or 1.

It runs on the final IR, after :mod:`numba_vulkan.codegen.legalize`, whose
rewrites of float selects must not see these expansions, and only for
targets with int64: a device with float64 but without int64 (not lavapipe)
keeps its own rounding instructions.
"""

from numba_vulkan.codegen import legalize

_OPS = ("floor", "ceil", "trunc", "rint", "nearbyint", "roundeven", "round")
_CALLEES = {f"@llvm.{op}.f64": op for op in _OPS}

_SIGN = -(1 << 63)
_MANTISSA = (1 << 52) - 1
_ONE = 0x3FF0000000000000
_HALF = 0x3FE0000000000000


def _expand(op, x, result, stem):
    emit = legalize.Emitter(stem)
    bits = emit(f"bitcast double {x} to i64")
    biased = emit(f"and i64 {emit(f'lshr i64 {bits}, 52')}, 2047")
    exponent = emit(f"sub i64 {biased}, 1023")
    below_one = emit(f"icmp slt i64 {exponent}, 0")
    # Exponents of 52 and more (integers, infinities, NaNs) clear no bits.
    clamped = emit(f"select i1 {emit(f'icmp sgt i64 {exponent}, 52')}, i64 52, i64 {exponent}")
    clamped = emit(f"select i1 {below_one}, i64 0, i64 {clamped}")
    fraction = emit(f"lshr i64 {_MANTISSA}, {clamped}")
    whole = emit(f"and i64 {bits}, {emit(f'xor i64 {fraction}, -1')}")
    t_bits = emit(f"select i1 {below_one}, i64 {emit(f'and i64 {bits}, {_SIGN}')}, i64 {whole}")
    if op == "trunc":
        emit(f"bitcast i64 {t_bits} to double", result)
        return emit.lines
    t = emit(f"bitcast i64 {t_bits} to double")
    inexact = emit(f"icmp ne i64 {t_bits}, {bits}")
    negative = emit(f"icmp slt i64 {bits}, 0")
    if op in ("floor", "ceil"):
        moves = emit(f"xor i1 {negative}, {'true' if op == 'ceil' else 'false'}")
        step = emit(f"and i1 {inexact}, {moves}")
    else:
        # The part cut off, x - t, is exact; compare its magnitude with 1/2.
        cut = emit(f"bitcast double {emit(f'fsub double {x}, {t}')} to i64")
        cut = emit(f"and i64 {cut}, {-_SIGN - 1}")
        above = emit(f"icmp ugt i64 {cut}, {_HALF}")
        half = emit(f"icmp eq i64 {cut}, {_HALF}")
        if op == "round":
            step = emit(f"or i1 {above}, {half}")
        else:
            # Ties go to the even neighbour: away from zero when t is odd.
            # The bit of t worth 1 sits 52 - e places up (the implicit one
            # for e = 0); below 1, t is 0.
            unit = emit(f"lshr i64 {emit(f'or i64 {t_bits}, {1 << 52}')}, "
                        f"{emit(f'sub i64 52, {clamped}')}")
            odd = emit(f"icmp ne i64 {emit(f'and i64 {unit}, 1')}, 0")
            odd = emit(f"and i1 {odd}, {emit(f'xor i1 {below_one}, true')}")
            step = emit(f"or i1 {above}, {emit(f'and i1 {half}, {odd}')}")
        # Infinities make x - t a NaN; they take no step.
        step = emit(f"and i1 {step}, {inexact}")
    # Every step adds 1 with the sign of x, exactly: |t| < 2**52 there. No
    # step adds a zero of that sign, which keeps a zero t's sign.
    one = emit(f"select i1 {negative}, i64 {_ONE | _SIGN}, i64 {_ONE}")
    zero = emit(f"select i1 {negative}, i64 {_SIGN}, i64 0")
    increment = emit(f"bitcast i64 {emit(f'select i1 {step}, i64 {one}, i64 {zero}')} to double")
    emit(f"fadd double {t}, {increment}", result)
    return emit.lines


def exact_rounding(module):
    """Compute every float64 rounding intrinsic call of the IR model
    ``module`` on bits, in place."""
    counter = 0

    def rewrite(inst, function):
        nonlocal counter
        op = _CALLEES.get(inst.callee) if inst.opcode == "call" else None
        if op is None or inst.name is None or len(inst.operands) != 1:
            return None
        counter += 1
        return _expand(op, str(inst.operands[0].value), inst.name, f"%nv.round.{counter}")

    legalize.splice(module, rewrite)
