"""Integer division and remainder by a constant as multiplies and shifts
(codegen/divconst.py): the plans exhaustively on narrow widths, the emitted IR
run on the host against NumPy for many divisors, and kernels on the device."""

import ctypes

import llvmlite.binding as llvm
import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.codegen import divconst
from numba_vulkan.llvmir import ir
from numba_vulkan.spirv import binary as spirv
from numba_vulkan.spirv import opcodes
from tests.helpers import assert_valid_spirv, compiled_kernels, rewritten


def _truncating(n, d):
    """LLVM's ``sdiv`` (of Python ints or int64 arrays): the quotient rounded towards zero."""
    q = abs(n) // abs(d)
    return np.where((n < 0) == (d < 0), q, -q) if isinstance(n, np.ndarray) else (
        q if (n < 0) == (d < 0) else -q)


def _planned_unsigned(n, d, bits):
    plan = divconst.unsigned_plan(d, bits)
    if plan[0] == "shift":
        return n >> plan[1]
    if plan[0] == "compare":
        return (n >= d).astype(n.dtype)
    if plan[0] == "magic":
        _, z, m, s = plan
        return (((n >> z) * m) >> bits) >> s
    _, m, s = plan
    t = (n * m) >> bits
    return (t + ((n - t) >> 1)) >> s


def _planned_signed(n, d, bits):
    plan = divconst.signed_plan(d, bits)
    if plan[0] == "shift":
        k = plan[1]
        q = (n + np.where(n < 0, (1 << k) - 1, 0)) >> k
    else:
        _, m, s = plan
        q = ((n * m) >> (bits + s)) + (n < 0)
    return -q if d < 0 else q


@pytest.mark.parametrize("bits", [8, 12])
def test_every_plan_of_a_narrow_width_divides_every_dividend(bits):
    # The derivations do not depend on the width: all divisors, all dividends
    # (the products fit in int64 at these widths).
    top = 1 << bits
    dividends = np.arange(top, dtype=np.int64)
    for d in range(2, top):
        np.testing.assert_array_equal(_planned_unsigned(dividends, d, bits), dividends // d,
                                      err_msg=f"udiv by {d}")
    signed = dividends - top // 2
    for d in range(-top // 2, top // 2):
        if abs(d) > 1:
            np.testing.assert_array_equal(_planned_signed(signed, d, bits),
                                          _truncating(signed, d), err_msg=f"sdiv by {d}")


def test_plans_of_common_divisors():
    assert divconst.unsigned_plan(9, 64)[0] == "magic"
    assert divconst.unsigned_plan(7, 32)[0] == "add"          # needs a 33-bit multiplier
    assert divconst.unsigned_plan(14, 32)[:2] == ("magic", 1)  # 7 after a shift by one
    assert divconst.unsigned_plan(2 ** 63 + 5, 64) == ("compare",)
    assert divconst.signed_plan(-8, 64) == ("shift", 3)
    assert divconst.signed_plan(-(2 ** 63), 64) == ("shift", 63)


_DTYPES = {8: (np.int8, np.uint8), 16: (np.int16, np.uint16), 32: (np.int32, np.uint32),
           64: (np.int64, np.uint64)}


def _divisors(bits, rng):
    """Small divisors, powers of two and their neighbours, primes, the ends of
    the range and random ones of every length; each also negated."""
    top = 1 << bits
    values = set(range(2, 40)) | {100, 1000, 641, 1000000007, 6700417, 274177, 2 ** 32 + 1,
                                  2 ** 32 - 1, 3 * 2 ** 20, 10 ** 18}
    for k in range(1, bits):
        values |= {2 ** k - 1, 2 ** k, 2 ** k + 1}
    values |= {int(x) for x in rng.integers(2, 2 ** 62, 12) >> rng.integers(0, 62, 12)}
    unsigned = sorted(v for v in values if 1 < v < top) + [top - 1, top - 3, top // 2 + 1]
    signed = sorted(v for v in values if 1 < v < top // 2) + [top // 2 - 1]
    signed = signed + [-v for v in signed] + [-top // 2]
    return unsigned, signed


def _dividends(dtype, divisors, rng):
    info = np.iinfo(dtype)
    edges = [0, 1, -1, 2, -2, info.min, info.max, info.min + 1, info.max - 1]
    lengths = rng.integers(1, info.bits + 1, 600)
    random = [int(x) & ((1 << int(b)) - 1) for x, b in
              zip(rng.integers(0, 2 ** 63, 600, dtype=np.uint64), lengths)]
    random += [-x for x in random[::2]]
    near = []
    for d in divisors:
        k = int(rng.integers(0, max(2, (info.max // abs(d)))))
        for multiple in (k * d, -k * d, d, -d):
            near += [multiple - 1, multiple, multiple + 1]
    values = [v for v in edges + random + near if info.min <= v <= info.max]
    return np.array(values, dtype=dtype)


def _loop(name, ty, opcode, divisor):
    return f"""define void @{name}(ptr %src, ptr %dst, i64 %count) {{
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %p = getelementptr {ty}, ptr %src, i64 %i
  %n = load {ty}, ptr %p
  %q = {opcode} {ty} %n, {divisor}
  %o = getelementptr {ty}, ptr %dst, i64 %i
  store {ty} %q, ptr %o
  %next = add i64 %i, 1
  %more = icmp ult i64 %next, %count
  br i1 %more, label %loop, label %exit
exit:
  ret void
}}
"""


def _reference(opcode, n, d, dtype):
    if opcode[0] == "u":
        return n // dtype(d) if opcode == "udiv" else n % dtype(d)
    d = dtype(d)
    with np.errstate(over="ignore"):
        floor = n // d
        q = floor + ((n % d != 0) & ((n < 0) != (d < 0))).astype(dtype)
        return q if opcode == "sdiv" else n - q * d


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
def test_rewritten_ir_matches_numpy_on_the_host(bits):
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    rng = np.random.default_rng(bits)
    ty = f"i{bits}"
    unsigned, signed = _divisors(bits, rng)
    cases = [(op, d) for op in ("udiv", "urem") for d in unsigned]
    cases += [(op, d) for op in ("sdiv", "srem") for d in signed]
    text = "".join(_loop(f"f{k}", ty, op, d if op[0] == "s" else divconst._printed(d, bits))
                   for k, (op, d) in enumerate(cases))
    out = rewritten(divconst.rewrite, text)
    assert not any(f" {op} " in out for op in ("udiv", "urem", "sdiv", "srem"))
    module = llvm.parse_assembly(out)
    module.verify()
    # Unoptimised: the host's code generator must not fold the sequences it checks.
    machine = llvm.Target.from_default_triple().create_target_machine(opt=0)
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    kind = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
    sdtype, udtype = _DTYPES[bits]
    inputs = {"s": _dividends(sdtype, signed, rng),
              "u": _dividends(sdtype, unsigned, rng).view(udtype)}
    for k, (op, d) in enumerate(cases):
        n = inputs[op[0]]
        got = np.empty_like(n)
        kind(engine.get_function_address(f"f{k}"))(n.ctypes.data, got.ctypes.data, n.size)
        want = _reference(op, n, d, n.dtype.type)
        bad = np.flatnonzero(got != want)
        assert not bad.size, f"{op} {ty} by {d}: {n[bad[:3]]} gave {got[bad[:3]]}"


def test_divisions_by_variables_and_vectors_are_kept():
    text = """define i64 @f(i64 %n, i64 %d, <2 x i32> %v) {
  %a = sdiv i64 %n, %d
  %b = udiv i64 %n, 1
  %c = sdiv i64 %n, -1
  %w = udiv <2 x i32> %v, <i32 3, i32 3>
  ret i64 %a
}
"""
    assert rewritten(divconst.rewrite, text) == str(ir.parse(text))


DIVISORS = (3, 7, 9, 10, 12, 641, -3, -7, -9, -16, 1000000007)


def _division_kernel(divisors, dtype):
    # Divisors of x's type: Numba divides uint64 by an int64 in float64.
    name = np.dtype(dtype).name
    rows = "\n".join(f"        q[{k}, i] = x[i] // np.{name}({d})\n"
                     f"        r[{k}, i] = x[i] % np.{name}({d})" for k, d in enumerate(divisors))
    source = f"def divide(x, q, r):\n    i = nv.global_id(0)\n    if i < x.shape[0]:\n{rows}\n"
    scope = {"nv": nv, "np": np}
    exec(compile(source, "<divide>", "exec"), scope)
    return nv.jit(scope["divide"])


_DIVISION_OPCODES = {opcodes.OpSDiv, opcodes.OpUDiv, opcodes.OpSRem, opcodes.OpUMod,
                     opcodes.OpSMod}


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint64, np.int16])
def test_kernels_divide_by_constants_as_python_does(dtype, rng):
    # Python's // and % floor: Numba's sdiv and srem with a fix-up, kept exact.
    divisors = [d for d in DIVISORS if np.iinfo(dtype).min <= d <= np.iinfo(dtype).max
                and (d > 0 or np.iinfo(dtype).min < 0)]
    kernel = _division_kernel(divisors, dtype)
    x = _dividends(dtype, [abs(d) for d in divisors], rng)
    q = np.zeros((len(divisors), x.size), dtype)
    r = np.zeros_like(q)
    kernel.forall(x.size)(x, q, r)
    for k, d in enumerate(divisors):
        np.testing.assert_array_equal(q[k], x // dtype(d), err_msg=f"// {d}")
        np.testing.assert_array_equal(r[k], x % dtype(d), err_msg=f"% {d}")
    for compiled in compiled_kernels(kernel):
        assert_valid_spirv(compiled)
        used = {spirv.opcode(inst) for inst in spirv.parse(compiled.spirv)[1]}
        assert not used & _DIVISION_OPCODES


def test_a_truncated_64_bit_dividend_is_extended_from_32_bits():
    # LLVM's SPIR-V backend folds zext(trunc i64 to i16) into a mask of the
    # i64 value typed i32 (spirv-val rejects it; the language fuzzer found it).
    text = """define i16 @f(i64 %y) {
  %n = trunc i64 %y to i16
  %r = urem i16 %n, 7
  %s = sdiv i16 %n, -7
  %t = add i16 %r, %s
  ret i16 %t
}
"""
    out = rewritten(divconst.rewrite, text)
    assert "zext i16" not in out and "sext i16" not in out
    assert "trunc i64 %y to i32" in out
    llvm.parse_assembly(out).verify()


@nv.jit
def _narrowed(x, table, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        # LLVM narrows each to an i16 or i8 division of a truncated int64.
        out[i] = (table[min(max(x[i], 0), 1000) % 7] + table[(x[i] & 255) // 9]
                  + table[-(min(max(x[i], -500), 500) // -13) + 40])


def test_narrowed_divisions_of_int64_values_compile_and_divide():
    x = np.arange(-3000, 3000, 7, dtype=np.int64)
    table = np.arange(128, dtype=np.float64) ** 2
    out = np.zeros(x.size)
    _narrowed.forall(x.size)(x, table, out)
    np.testing.assert_array_equal(
        out, table[np.clip(x, 0, 1000) % 7] + table[(x & 255) // 9]
        + table[-(np.clip(x, -500, 500) // -13) + 40])
    for compiled in compiled_kernels(_narrowed):
        assert_valid_spirv(compiled)
