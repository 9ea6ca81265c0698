"""Expand LLVM operations that the SPIR-V backend cannot lower for Vulkan,
or that Vulkan drivers may compute less exactly than the CPU.

libclc's math and LLVM's optimiser use a few operations that LLVM 22's
SPIR-V backend either cannot select for a shader (``llvm.ctlz``,
``llvm.copysign.f64``, ``llvm.maximumnum``) or turns into instructions that
only OpenCL kernels may use (``fcmp ord`` and ``fcmp uno`` become
``OpOrdered`` / ``OpUnordered``, which need the ``Kernel`` capability).
Vulkan also allows bit counting on 32-bit integers only, and the backend
cannot load a float from an integer array (or the reverse), which LLVM's
optimiser produces from a load followed by a bitcast. This pass rewrites
each such instruction of the final IR into plain integer and float
operations with the same result. ``llvm.fma`` becomes an emulation that
keeps the product exact (Vulkan lets ``Fma`` round twice), and
``llvm.fmuladd`` a multiply and an add. A select between two floats by a
comparison of the same two (Python's ``max`` and ``min``) selects their
bits instead, so that no driver makes it a min/max instruction with other
rules for NaN and -0. It runs after the last optimisation, so LLVM cannot
fold the expansions back. :func:`exact_float32` makes float32 division and
square roots correctly rounded; :func:`negated_selects` keeps the backend
from reading a sign restored by a select as GLSL's ``FaceForward``.
"""

import re
import struct

from numba_vulkan.codegen.libclc_link import OWN
from numba_vulkan.llvmir import ir

_FLOAT_BITS = {"half": 16, "float": 32, "double": 64}


class Emitter:
    """Builds the replacement lines of one instruction with fresh names."""

    def __init__(self, stem):
        self.stem = stem
        self.counter = 0
        self.lines = []

    def __call__(self, expression, name=None):
        if name is None:
            self.counter += 1
            name = f"{self.stem}.{self.counter}"
        self.lines.append(f"{name} = {expression}")
        return name

    # Bit counts ------------------------------------------------------------

    def ctpop(self, bits, x):
        if bits == 32:
            return self(f"call i32 @llvm.ctpop.i32(i32 {x})")
        if bits < 32:
            return self(f"call i32 @llvm.ctpop.i32(i32 {self(f'zext i{bits} {x} to i32')})")
        lo, hi = self.halves(x)
        return self(f"add i32 {self.ctpop(32, lo)}, {self.ctpop(32, hi)}")

    def halves(self, x):
        lo = self(f"trunc i64 {x} to i32")
        hi = self(f"trunc i64 {self(f'lshr i64 {x}, 32')} to i32")
        return lo, hi

    def ctlz32(self, x):
        for shift in (1, 2, 4, 8, 16):
            x = self(f"or i32 {x}, {self(f'lshr i32 {x}, {shift}')}")
        return self.ctpop(32, self(f"xor i32 {x}, -1"))

    def ctlz(self, bits, x):
        """Leading zeros of an i``bits`` value, as an i32 (``bits`` for zero)."""
        if bits == 32:
            return self.ctlz32(x)
        if bits < 32:
            count = self.ctlz32(self(f"zext i{bits} {x} to i32"))
            return self(f"sub i32 {count}, {32 - bits}")
        lo, hi = self.halves(x)
        high_zero = self(f"icmp eq i32 {hi}, 0")
        low = self(f"add i32 {self.ctlz32(lo)}, 32")
        return self(f"select i1 {high_zero}, i32 {low}, i32 {self.ctlz32(hi)}")

    def cttz(self, bits, x):
        """Trailing zeros of an i``bits`` value, as an i32 (``bits`` for zero)."""
        below = self(f"and i{bits} {self(f'xor i{bits} {x}, -1')}, "
                     f"{self(f'add i{bits} {x}, -1')}")
        return self.ctpop(bits, below)

    def widen(self, bits, value32, result):
        if bits == 32:
            return self(f"add i32 {value32}, 0", result)
        op = "zext" if bits > 32 else "trunc"
        return self(f"{op} i32 {value32} to i{bits}", result)


def _is_nan_constant(operand):
    """Whether a constant operand is a NaN (LLVM prints NaNs in hex)."""
    if not operand.startswith("0x"):
        return False
    digits = operand[2:]
    if digits[:1] in "KLMH":  # x87, fp128, ppc128 and half spellings
        return False
    bits = int(digits, 16)
    return (bits >> 52) & 0x7FF == 0x7FF and bits & ((1 << 52) - 1) != 0


def _expand_fcmp(inst, stem):
    # Constant operands are decided here: the backend cannot select a
    # comparison of two constants.
    emit = Emitter(stem)
    ty, result = inst.operands[0].type, inst.name
    ordered = inst.flags[-1] == "ord"
    tests, known_nan = [], False
    for operand in (str(o.value) for o in inst.operands):
        if operand.startswith("%"):
            tests.append(emit(f"fcmp {'oeq' if ordered else 'une'} {ty} {operand}, {operand}"))
        else:
            known_nan = known_nan or _is_nan_constant(operand)
    if known_nan or not tests:
        answer = ("false" if ordered else "true") if known_nan else ("true" if ordered else "false")
        emit(f"select i1 {answer}, i1 true, i1 false", result)
    elif len(tests) == 1:
        emit(f"select i1 {tests[0]}, i1 true, i1 false", result)
    else:
        emit(f"{'and' if ordered else 'or'} i1 {tests[0]}, {tests[1]}", result)
    return emit.lines


#: The intrinsics :func:`_expand_call` rewrites, by the name after ``llvm.``.
_CALLS = ("ctlz", "cttz", "ctpop", "copysign", "maximumnum", "minimumnum", "fma", "fmuladd",
          "sadd.sat", "ssub.sat", "uadd.sat", "usub.sat", "fshl", "fshr")


def _intrinsic(inst):
    """Which of :data:`_CALLS` ``inst`` calls, or None."""
    if inst.opcode != "call" or inst.name is None or not inst.callee.startswith("@llvm."):
        return None
    name = inst.callee[len("@llvm."):]
    return next((op for op in _CALLS if name.startswith(op + ".")), None)


def _expand_call(inst, op, stem):
    ret, result = inst.type, inst.name
    args = [str(o.value) for o in inst.operands]
    emit = Emitter(stem)
    bits = _width(ret)
    if op in ("fshl", "fshr") and bits is not None:
        return _expand_funnel_shift(emit, op, bits, args, result)
    if op.endswith(".sat") and bits is not None:
        return _expand_saturating(emit, op[:4], bits, args, result)
    if op in ("ctlz", "cttz", "ctpop"):
        if bits is None or (op == "ctpop" and bits <= 32):
            return None
        count = getattr(emit, op)(bits, args[0])
        emit.widen(bits, count, result)
        return emit.lines
    if ret not in _FLOAT_BITS or ret == "half":
        return None
    if op == "fma":
        return _expand_fma(emit, ret, args, result)
    if op == "fmuladd":
        # Either rounding is allowed; GLSL's Fma on lavapipe is worse than both.
        emit(f"fadd {ret} {emit(f'fmul {ret} {args[0]}, {args[1]}')}, {args[2]}", result)
        return emit.lines
    width = _FLOAT_BITS[ret]
    ity = f"i{width}"
    a = emit(f"bitcast {ret} {args[0]} to {ity}")
    b = emit(f"bitcast {ret} {args[1]} to {ity}")
    if op == "copysign":
        sign = 1 << (width - 1)
        magnitude = emit(f"and {ity} {a}, {sign - 1}")
        signbit = emit(f"and {ity} {b}, {-sign}")
        bits_out = emit(f"or {ity} {magnitude}, {signbit}")
        emit(f"bitcast {ity} {bits_out} to {ret}", result)
        return emit.lines
    # maximumnum / minimumnum: a NaN operand yields the other one, and +0 is
    # larger than -0 (so equal operands combine their bits with and / or).
    x, y = args
    greater = "ogt" if op == "maximumnum" else "olt"
    smaller = "olt" if op == "maximumnum" else "ogt"
    combine = "and" if op == "maximumnum" else "or"
    equal = emit(f"bitcast {ity} {emit(f'{combine} {ity} {a}, {b}')} to {ret}")
    pick_y = emit(f"select i1 {emit(f'fcmp {smaller} {ret} {x}, {y}')}, {ret} {y}, "
                  f"{ret} {equal}")
    pick_x = emit(f"select i1 {emit(f'fcmp {greater} {ret} {x}, {y}')}, {ret} {x}, "
                  f"{ret} {pick_y}")
    y_nan = emit(f"select i1 {emit(f'fcmp une {ret} {y}, {y}')}, {ret} {x}, {ret} {pick_x}")
    emit(f"select i1 {emit(f'fcmp une {ret} {x}, {x}')}, {ret} {y}, {ret} {y_nan}", result)
    return emit.lines


_MANGLED = {"i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "f16": "half",
            "f32": "float", "f64": "double"}
_GETPOINTER = "@llvm.spv.resource.getpointer.p11.tspirv.VulkanBuffer_a0"


def _innermost_element(ty):
    """The scalar element of a (nested) array type such as ``[4 x [2 x float]]``,
    or None."""
    if not ty or not ty.startswith("["):
        return None
    while ty.startswith("["):
        count, x, ty = ty[1:-1].partition(" x ")
        if not (x and count.isdigit()):
            return None
    return ty if ty.replace("_", "").isalnum() else None


def _element_types(function):
    """The element type of each pointer made from a buffer handle or a global
    array element, by value name."""
    found = {}
    for inst in function.instructions():
        if inst.name is None:
            continue
        if inst.opcode == "call":
            mangled = inst.callee[len(_GETPOINTER):].partition("_")[0]
            if inst.callee.startswith(_GETPOINTER) and mangled in _MANGLED:
                found[inst.name] = _MANGLED[mangled]
        elif inst.opcode == "getelementptr" and "inbounds" in inst.flags:
            element = _innermost_element(inst.type)
            if element is not None:
                found[inst.name] = element
    return found


def _retype_access(inst, elements, stem):
    """A load or store of another type than its element's, as an access of the
    element type and a bitcast (the backend cannot cast the pointer)."""
    if inst.opcode not in ("load", "store") or "atomic" in inst.flags:
        return None
    pointer = inst.operands[-1]
    elem = elements.get(pointer.value)
    ty = inst.type if inst.opcode == "load" else inst.operands[0].type
    if elem is None or elem == ty:
        return None
    vol = "volatile " if "volatile" in inst.flags else ""
    where = f"{pointer}{inst.tail}"
    if inst.opcode == "load":
        return [f"{stem} = load {vol}{elem}, {where}",
                f"{inst.name} = bitcast {elem} {stem} to {ty}"]
    return [f"{stem} = bitcast {ty} {inst.operands[0].value} to {elem}",
            f"store {vol}{elem} {stem}, {where}"]


def _hex(value):
    return "0x" + struct.pack(">d", value).hex().upper()


def _expand_fma(emit, ty, args, result):
    """``a * b + c`` with the product kept exact, from multiplies and adds.

    Vulkan lets a driver compute GLSL's ``Fma`` as a multiply and an add
    (lavapipe does), which breaks libclc: it relies on ``fma(a, b, -a*b)``
    being the exact rounding error of a product. Dekker's product (operands
    split in halves, scaled down first when large) gives the product as an
    exact sum ``p + e``; Knuth's two-sum adds ``c``. The result is exact
    whenever ``a * b + c`` is representable and otherwise within an ulp of
    it. Every operation here must keep its rounding: the module marks float
    arithmetic NoContraction.
    """
    a, b, c = args
    bits = 12 if ty == "float" else 27
    emax = 127 if ty == "float" else 1023
    big = _hex(2.0 ** (emax - bits - 2))
    down, up = _hex(2.0 ** -(bits + 2)), _hex(2.0 ** (bits + 2))
    split = _hex(2.0 ** bits + 1)

    def fabs(x):
        return emit(f"call {ty} @llvm.fabs.{'f32' if ty == 'float' else 'f64'}({ty} {x})")

    def scaled(x):
        large = emit(f"fcmp ogt {ty} {fabs(x)}, {big}")
        return large, emit(f"select i1 {large}, {ty} {emit(f'fmul {ty} {x}, {down}')}, "
                           f"{ty} {x}")

    def halves(x):
        t = emit(f"fmul {ty} {x}, {split}")
        hi = emit(f"fsub {ty} {t}, {emit(f'fsub {ty} {t}, {x}')}")
        return hi, emit(f"fsub {ty} {x}, {hi}")

    p = emit(f"fmul {ty} {a}, {b}")
    a_large, a1 = scaled(a)
    b_large, b1 = scaled(b)
    p1 = emit(f"fmul {ty} {a1}, {b1}")
    ah, al = halves(a1)
    bh, bl = halves(b1)
    e = emit(f"fsub {ty} {emit(f'fmul {ty} {ah}, {bh}')}, {p1}")
    e = emit(f"fadd {ty} {e}, {emit(f'fmul {ty} {ah}, {bl}')}")
    e = emit(f"fadd {ty} {e}, {emit(f'fmul {ty} {al}, {bh}')}")
    e = emit(f"fadd {ty} {e}, {emit(f'fmul {ty} {al}, {bl}')}")
    for large in (a_large, b_large):
        e = emit(f"select i1 {large}, {ty} {emit(f'fmul {ty} {e}, {up}')}, {ty} {e}")
    s = emit(f"fadd {ty} {p}, {c}")
    bv = emit(f"fsub {ty} {s}, {p}")
    se = emit(f"fsub {ty} {p}, {emit(f'fsub {ty} {s}, {bv}')}")
    se = emit(f"fadd {ty} {se}, {emit(f'fsub {ty} {c}, {bv}')}")
    r = emit(f"fadd {ty} {s}, {emit(f'fadd {ty} {se}, {e}')}")
    # Infinite or NaN operands and sums take the plain IEEE result; so does
    # an exactly zero product, whose sum with c has the right sign of zero.
    inf = _hex(float("inf"))
    finite = emit(f"and i1 {emit(f'fcmp olt {ty} {fabs(p)}, {inf}')}, "
                  f"{emit(f'fcmp olt {ty} {fabs(s)}, {inf}')}")
    exact = emit(f"and i1 {finite}, {emit(f'fcmp one {ty} {p}, 0.0')}")
    emit(f"select i1 {exact}, {ty} {r}, {ty} {s}", result)
    return emit.lines


def _expand_funnel_shift(emit, op, bits, args, result):
    # The concatenation hi:lo shifted by s = c mod bits; shifting by one and
    # then by bits - 1 - s keeps every shift amount below the width.
    ity, (hi, lo, amount) = f"i{bits}", args
    if amount.lstrip("-").isdigit():
        return _rotate_by_constant(emit, op, bits, args, result)
    s = emit(f"and {ity} {amount}, {bits - 1}")
    rest = emit(f"sub {ity} {bits - 1}, {s}")
    if op == "fshl":
        main = emit(f"shl {ity} {hi}, {s}")
        other = emit(f"lshr {ity} {emit(f'lshr {ity} {lo}, 1')}, {rest}")
    else:
        main = emit(f"lshr {ity} {lo}, {s}")
        other = emit(f"shl {ity} {emit(f'shl {ity} {hi}, 1')}, {rest}")
    emit(f"or {ity} {main}, {other}", result)
    return emit.lines


def _rotate_by_constant(emit, op, bits, args, result):
    """A funnel shift by a constant (random number generators and hashes
    are full of them) as shifts by constants: two and an or, or, for a
    64-bit rotation, that in each 32-bit half, the form of a 32-bit funnel
    shift that GPU compilers make one instruction of (numba.cuda.random's
    generator: 2 % faster on an H200 than the 64-bit shifts)."""
    ity, (hi, lo, amount) = f"i{bits}", args
    left = int(amount) % bits if op == "fshl" else (bits - int(amount) % bits) % bits
    if left == 0:
        emit(f"or {ity} {hi if op == 'fshl' else lo}, 0", result)
        return emit.lines

    def funnel(width, a, b, s):
        return emit(f"or i{width} {emit(f'shl i{width} {a}, {s}')}, "
                    f"{emit(f'lshr i{width} {b}, {width - s}')}")
    if bits != 64 or hi != lo or left == 32:
        emit(f"or {ity} {emit(f'shl {ity} {hi}, {left}')}, "
             f"{emit(f'lshr {ity} {lo}, {bits - left}')}", result)
        return emit.lines
    low = emit(f"trunc i64 {hi} to i32")
    high = emit(f"trunc i64 {emit(f'lshr i64 {hi}, 32')} to i32")
    if left > 32:
        low, high, left = high, low, left - 32
    top = emit(f"shl i64 {emit(f'zext i32 {funnel(32, high, low, left)} to i64')}, 32")
    emit(f"or i64 {top}, {emit(f'zext i32 {funnel(32, low, high, left)} to i64')}", result)
    return emit.lines


def _expand_saturating(emit, op, bits, args, result):
    ity, (a, b) = f"i{bits}", args
    value = emit(f"{op[1:]} {ity} {a}, {b}")
    if op[0] == "u":
        if op == "uadd":
            overflow = emit(f"icmp ult {ity} {value}, {a}")
            emit(f"select i1 {overflow}, {ity} -1, {ity} {value}", result)
        else:
            overflow = emit(f"icmp ult {ity} {a}, {b}")
            emit(f"select i1 {overflow}, {ity} 0, {ity} {value}", result)
        return emit.lines
    # Signed: the sum overflowed if it has a sign neither operand (add) or
    # not the minuend's (sub) has; it then saturates towards the minuend's sign.
    a_sign = emit(f"xor {ity} {a}, {value}")
    other = emit(f"xor {ity} {b}, {value}") if op == "sadd" else emit(f"xor {ity} {a}, {b}")
    overflow = emit(f"icmp slt {ity} {emit(f'and {ity} {a_sign}, {other}')}, 0")
    limit = emit(f"xor {ity} {emit(f'ashr {ity} {a}, {bits - 1}')}, {(1 << (bits - 1)) - 1}")
    emit(f"select i1 {overflow}, {ity} {limit}, {ity} {value}", result)
    return emit.lines


def _float_bits(ty, literal):
    """The bit pattern, as a signed integer, of a float constant as LLVM prints it."""
    if literal.startswith("0x"):
        value = struct.unpack(">d", bytes.fromhex(literal[2:]))[0]
    else:
        value = float(literal)
    if ty == "float":
        return struct.unpack("<i", struct.pack("<f", value))[0]
    return struct.unpack("<q", struct.pack("<d", value))[0]


def _is_float_constant(value):
    return isinstance(value, str) and value[:1] in "-+0123456789.eEx"


def _constant_select(inst):
    """Whether ``inst`` selects between two float constants."""
    return (inst.opcode == "select" and inst.name is not None and len(inst.operands) == 3
            and inst.operands[0].type == "i1" and inst.operands[1].type in ("float", "double")
            and all(_is_float_constant(o.value) for o in inst.operands[1:]))


def _expand_select(inst, stem):
    # The backend's combiner rewrites a select between K and -K (by a
    # product's sign, into FaceForward) into something its pre-legalizer
    # then trips over; an integer select of the bit patterns sidesteps
    # every float combine.
    emit = Emitter(stem)
    ty = inst.operands[1].type
    ity = "i32" if ty == "float" else "i64"
    a, b = (_float_bits(ty, o.value) for o in inst.operands[1:])
    bits = emit(f"select i1 {inst.operands[0].value}, {ity} {a}, {ity} {b}")
    emit(f"bitcast {ity} {bits} to {ty}", inst.name)
    return emit.lines


def _compared(function):
    """The two operands of each float comparison, by its name."""
    return {inst.name: {str(o.value) for o in inst.operands}
            for inst in function.instructions()
            if inst.opcode == "fcmp" and inst.name is not None
            and inst.operands[0].type in ("float", "double")}


def _pick(inst, compared):
    """Whether ``inst`` selects one of two floats by a comparison of the two."""
    if inst.opcode != "select" or inst.name is None or len(inst.operands) != 3:
        return False
    cond, a, b = inst.operands
    return (cond.type == "i1" and a.type in ("float", "double") and b.type == a.type
            and all(isinstance(o.value, str) and o.value.startswith("%") for o in inst.operands)
            and compared.get(cond.value) == {a.value, b.value})


def _expand_pick(inst, stem):
    # ``c ? x : y`` with c comparing x and y is Python's max or min: a
    # driver may turn it into its min/max instruction, which returns the
    # other operand of a NaN and orders -0 below +0 (NVIDIA does). Selecting
    # the bits keeps the operand Python picks.
    emit = Emitter(stem)
    cond, x, y = inst.operands
    ity = "i32" if x.type == "float" else "i64"
    a = emit(f"bitcast {x.type} {x.value} to {ity}")
    b = emit(f"bitcast {x.type} {y.value} to {ity}")
    bits = emit(f"select i1 {cond.value}, {ity} {a}, {ity} {b}")
    emit(f"bitcast {ity} {bits} to {x.type}", inst.name)
    return emit.lines


def unmark(module):
    """Remove the marks of libclc's own float32 divisions from the IR model ``module``."""
    for function in module.functions:
        for inst in function.instructions():
            if OWN in inst.tail:
                inst.tail = re.sub(rf", {re.escape(OWN)} !(?:\d+|\{{\}})", "", inst.tail)


def splice(module, rewrite):
    """Replace each instruction of ``module``'s functions for which
    ``rewrite(inst, function)`` gives lines of IR by those lines; return
    whether any was replaced."""
    changed = False
    for function in module.functions:
        for block in function.blocks or ():
            out = []
            for inst in block.instructions:
                lines = rewrite(inst, function)
                if lines is None:
                    out.append(inst)
                else:
                    out.extend(ir.instruction(line) for line in lines)
                    changed = True
            block.instructions = out
    return changed


def _declare(module, name, declaration):
    if not any(f.name == name for f in module.functions):
        module.items.append(ir.parse(declaration).items[0])


def exact_float32(module, libclc=False):
    """Divide and take square roots of float32 values of the IR model
    ``module`` in float64, in place; those libclc's float32 functions do
    themselves (marked by :func:`numba_vulkan.codegen.libclc_link.mark_own_divisions`)
    only with ``libclc``.

    Vulkan only asks for float32 division within 2.5 ULP (NVIDIA's is
    that, and gives 0 for divisors beyond 2**126) and for square roots
    within 3. Computed in float64 and rounded once to float32 both are
    correctly rounded, as on the CPU (the double rounding is harmless with
    53 >= 2 * 24 + 2 bits). For targets that have float64 and kernels
    without ``fastmath``.

    On an H200 that costs an n-body step (a division and a root per pair)
    25.0 ms against 10.6 with the driver's own float32 operations, and
    numba-cuda's 13.9. A float32 alternative was measured and dropped: the
    driver's quotient and root corrected with fused-fma remainders, exponents
    and subnormal results handled with integer arithmetic, took 29.5 ms
    (``benchmarks/bench_variants.py``). NVIDIA's own correctly rounded
    division checks its fast path in one instruction that SPIR-V cannot ask
    for. A second one, without the integer work (the driver's reciprocal and
    reciprocal root refined by one fma, an exact residual test against a
    power-of-two threshold, and a branch to float64 where it fails), took
    23.9 ms against 24.4 and gave wrong results on the H200 for operands near
    the ends of the float32 range (subnormal quotients as zero, finite ones
    as infinities), where it passed a C model of the driver's errors; it
    was reverted.
    """
    counter = 0

    def rewrite(inst, function):
        nonlocal counter
        sqrt = inst.opcode == "call" and inst.callee == "@llvm.sqrt.f32"
        if inst.name is None or not (sqrt or inst.opcode == "fdiv") or \
                (inst.type if sqrt else inst.operands[0].type) != "float":
            return None
        if not libclc and OWN in inst.tail:
            return None
        counter += 1
        emit = Emitter(f"%nv.exact.{counter}")
        wide = [emit(f"fpext float {o.value} to double") for o in inst.operands]
        if sqrt:
            wide = emit(f"call double @llvm.sqrt.f64(double {wide[0]})")
        else:
            wide = emit(f"fdiv double {wide[0]}, {wide[1]}")
        emit(f"fptrunc double {wide} to float", inst.name)
        return emit.lines

    if splice(module, rewrite):
        _declare(module, "@llvm.sqrt.f64", "declare double @llvm.sqrt.f64(double)")


_BINARY = frozenset("add sub mul udiv sdiv urem srem shl lshr ashr and or xor".split())
_MINMAX = frozenset("smax smin umax umin".split())
_EXTENSIONS = frozenset(("zext", "sext", "trunc"))


def _literal(value, bits):
    """The unsigned value of an integer literal of width ``bits``, or None."""
    if value in ("true", "false"):
        return int(value == "true")
    if not isinstance(value, str) or not value.removeprefix("-").isdigit():
        return None
    return int(value) % (1 << bits)


def _signed(value, bits):
    return value - (1 << bits) if value >> (bits - 1) else value


def _width(ty):
    if ty and ty[0] == "i" and ty[1:].isdigit():
        return int(ty[1:])
    return None


def _folded(inst):
    """The value of an integer operation on constants as an LLVM literal,
    or None: not such an operation, or its result is poison (a division by
    zero, an overlong shift)."""
    if inst.opcode in _EXTENSIONS:
        source, bits = _width(inst.operands[0].type), _width(inst.type)
        if source is None or bits is None:
            return None
        a = _literal(inst.operands[0].value, source)
        if a is None:
            return None
        return _printed(_signed(a, source) if inst.opcode == "sext" else a, bits)
    if inst.opcode in _BINARY:
        op = inst.opcode
    elif inst.opcode == "call" and inst.callee.startswith("@llvm.") and \
            inst.callee.split(".")[1] in _MINMAX:
        op = inst.callee.split(".")[1]
    else:
        return None
    if len(inst.operands) != 2:
        return None
    bits = _width(inst.operands[0].type)
    if bits is None:
        return None
    a, b = (_literal(o.value, bits) for o in inst.operands)
    if a is None or b is None:
        return None
    sa, sb = _signed(a, bits), _signed(b, bits)
    if op in ("udiv", "sdiv", "urem", "srem") and (b == 0 or (
            op[0] == "s" and sa == -(1 << (bits - 1)) and sb == -1)):
        return None
    if op in ("shl", "lshr", "ashr") and b >= bits:
        return None
    # LLVM's signed division truncates towards zero, Python's floors.
    quotient = (abs(sa) // abs(sb)) * (1 if (sa < 0) == (sb < 0) else -1) if sb else 0
    value = {
        "add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
        "udiv": lambda: a // b, "sdiv": lambda: quotient, "urem": lambda: a % b,
        "srem": lambda: sa - quotient * sb, "shl": lambda: a << b, "lshr": lambda: a >> b,
        "ashr": lambda: sa >> b, "and": lambda: a & b, "or": lambda: a | b,
        "xor": lambda: a ^ b, "smax": lambda: max(sa, sb), "smin": lambda: min(sa, sb),
        "umax": lambda: max(a, b), "umin": lambda: min(a, b),
    }[op]()
    return _printed(value, bits)


def _printed(value, bits):
    value %= 1 << bits
    if bits == 1:
        return "true" if value else "false"
    return str(_signed(value, bits))


def fold_constants(module):
    """Replace integer operations on constants of the IR model ``module`` by
    their values, in place.

    The passes after the last optimisation build some (a remainder by a
    constant, a narrowed copy of a constant), and LLVM 22's SPIR-V backend
    aborts with ``Unexpected integer constant pattern`` on a 32-bit one
    whose value is zero, such as ``ashr i32 16, 31``. Folding repeats until
    none is left, since replacing a value by a constant may make another.
    """
    for function in module.functions:
        while function.blocks is not None:
            values = {}
            for block in function.blocks:
                kept = []
                for inst in block.instructions:
                    value = _folded(inst) if inst.name else None
                    if value is None:
                        kept.append(inst)
                    else:
                        values[inst.name] = value
                block.instructions = kept
            if not values:
                break
            for inst in function.instructions():
                for holder, value in inst.values():
                    if isinstance(value, str) and value in values:
                        holder.value = values[value]


def legalize(module, fused_fma=False):
    """Rewrite the instructions of the IR model ``module`` that the backend
    cannot lower for Vulkan, in place (``llvm.fma`` is kept where the
    target's ``Fma`` is ``fused_fma``)."""
    counter = 0
    found = {}

    def rewrite(inst, function):
        nonlocal counter
        if function.name not in found:
            found[function.name] = (_compared(function), _element_types(function))
        compared, elements = found[function.name]
        stem = f"%nv.legal.{counter + 1}"
        if _pick(inst, compared):
            lines = _expand_pick(inst, stem)
        elif inst.opcode in ("load", "store"):
            lines = _retype_access(inst, elements, stem)
        elif inst.opcode == "fcmp" and inst.name is not None and \
                inst.flags[-1:] in (["ord"], ["uno"]) and inst.operands[0].type in _FLOAT_BITS:
            lines = _expand_fcmp(inst, stem)
        elif _constant_select(inst):
            lines = _expand_select(inst, stem)
        elif _intrinsic(inst) is not None and not (fused_fma and _intrinsic(inst) == "fma"):
            lines = _expand_call(inst, _intrinsic(inst), stem)
        else:
            lines = None
        if lines is not None:
            counter += 1
        return lines

    if splice(module, rewrite) and any(
            inst.opcode == "call" and inst.callee == "@llvm.ctpop.i32"
            for function in module.functions for inst in function.instructions()):
        _declare(module, "@llvm.ctpop.i32", "declare i32 @llvm.ctpop.i32(i32)")


#: The comparisons LLVM 22's SPIR-V backend reads as "dot product below
#: zero", each with its negation.
_FACING = {"olt": "uge", "ult": "oge", "ogt": "ule", "ugt": "ole"}


def _float_value(literal):
    """The value of a float constant as LLVM prints it, or None for anything else."""
    if not isinstance(literal, str) or not _is_float_constant(literal):
        return None
    if literal.startswith("0xH"):
        return struct.unpack(">e", bytes.fromhex(literal[3:]))[0]
    if literal.startswith("0x"):
        digits = literal[2:]
        if len(digits) != 16:
            return None
        return struct.unpack(">d", bytes.fromhex(digits))[0]
    try:
        return float(literal)
    except ValueError:
        return None


def _negation_of(inst):
    """The value that ``inst`` negates, in a form the backend reads as
    negation (``fneg x``, ``fsub ±0, x``, ``x * -1``), or None."""
    if inst is None:
        return None
    values = [o.value for o in inst.operands]
    if inst.opcode == "fneg":
        return values[0]
    if inst.opcode == "fsub" and _float_value(values[0]) == 0.0:
        return values[1]
    if inst.opcode == "fmul":
        for k in (0, 1):
            if _float_value(values[k]) == -1.0:
                return values[1 - k]
    return None


def _facing_select(inst, defs):
    """The comparison of ``inst`` if it has the backend's ``FaceForward``
    shape: a float select between a value and its negation by a product
    compared below (or above) zero."""
    if inst.opcode != "select" or inst.name is None or len(inst.operands) != 3:
        return None
    cond, a, b = inst.operands
    if cond.type != "i1" or a.type not in _FLOAT_BITS:
        return None
    if _negation_of(defs.get(a.value)) != b.value and _negation_of(defs.get(b.value)) != a.value:
        return None
    compare = defs.get(cond.value)
    if compare is None or compare.opcode != "fcmp" or not compare.flags \
            or compare.flags[-1] not in _FACING:
        return None
    left, right = (o.value for o in compare.operands)
    if _float_value(left) == 0.0:
        product = defs.get(right)
    elif _float_value(right) == 0.0:
        product = defs.get(left)
    else:
        return None
    return compare if product is not None and product.opcode == "fmul" else None


def negated_selects(module):
    """Invert the comparison of each select of the IR model ``module``
    between a float and its negation by the sign of a product, swapping the
    select's operands, in place.

    LLVM 22's SPIR-V backend turns ``p < 0 ? -x : x``, ``p`` a product,
    into GLSL's ``FaceForward(x, ...)``, which is ``p < 0 ? x : -x``: the
    wrong sign, and crashes (a segfault or a failed assertion) on some
    such selects, one whose product has other uses among them. libclc's ``erf``
    restores its argument's sign this way, and fast-math turns a division
    by a constant into such a product. ``p >= 0 (or unordered) ? x : -x``
    is the same select, and the backend leaves it alone. A comparison the
    select alone reads is inverted where it stands; another gets an
    inverted copy.
    """
    for function in module.functions:
        if function.blocks is None:
            continue
        defs = {inst.name: inst for inst in function.instructions() if inst.name}
        uses = {}
        for inst in function.instructions():
            for _, value in inst.values():
                if isinstance(value, str) and value.startswith("%"):
                    uses[value] = uses.get(value, 0) + 1
        counter = 0
        for block in function.blocks:
            out = []
            for inst in block.instructions:
                compare = _facing_select(inst, defs)
                if compare is not None:
                    inverse = _FACING[compare.flags[-1]]
                    if uses.get(compare.name) == 1:
                        compare.flags[-1] = inverse
                    else:
                        counter += 1
                        copy = ir.instruction(str(compare))
                        copy.name, copy.flags[-1] = f"%nv.facing.{counter}", inverse
                        out.append(copy)
                        uses[compare.name] -= 1
                        inst.operands[0].value = copy.name
                    inst.operands[1], inst.operands[2] = inst.operands[2], inst.operands[1]
                out.append(inst)
            block.instructions = out
