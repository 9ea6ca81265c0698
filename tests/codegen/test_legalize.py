"""Ordinary code that LLVM's SPIR-V backend aborted on or rejected compiles
and gives numba.njit's results: remainders by constants (integer operations
on constants), a math function reached both as a C call and as an LLVM
intrinsic, and private arrays filled, copied and shifted in loops."""

import math

import llvmlite.binding as llvm
import numba
import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.codegen import legalize, optimize
from tests.helpers import assert_valid_spirv, compiled_kernels, rewritten

INTEGERS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@nv.jit
def histogram(data, bins):
    i = nv.global_id(0)
    if i < data.shape[0]:
        nv.atomic.add(bins, data[i] % 16, 1)


@numba.njit
def _remainders(data):
    out = np.empty(data.shape[0], np.int64)
    for i in range(data.shape[0]):
        out[i] = data[i] % 16
    return out


@pytest.mark.parametrize("dtype", INTEGERS, ids=lambda d: d.__name__)
def test_histogram_of_remainders(dtype):
    # int32 data made `ashr i32 16, 31` (the remainder's sign workaround on
    # a constant divisor), on which the backend aborted.
    data = (np.arange(500) * 37 - 9000).astype(dtype)
    bins = np.zeros(16, np.int32)
    histogram.forall(data.size)(data, bins)
    expected = np.bincount(_remainders(data), minlength=16)
    np.testing.assert_array_equal(bins, expected)


@nv.jit
def every_atomic(data, results):
    i = nv.global_id(0)
    if i < data.shape[0]:
        j = data[i] % 16
        nv.atomic.add(results[0], j, 1)
        nv.atomic.sub(results[1], j, 2)
        nv.atomic.max(results[2], j, i)
        nv.atomic.min(results[3], j, -i)
        nv.atomic.or_(results[4], j, 1 << (i % 8))
        nv.atomic.xor(results[5], j, i)
        nv.atomic.and_(results[6], (data[i] // 16) % 16, ~(1 << (i % 8)))


@numba.njit
def _every_atomic(data, results):
    for i in range(data.shape[0]):
        j = data[i] % 16
        results[0, j] += 1
        results[1, j] -= 2
        results[2, j] = max(results[2, j], i)
        results[3, j] = min(results[3, j], -i)
        results[4, j] |= 1 << (i % 8)
        results[5, j] ^= i
        k = (data[i] // 16) % 16
        results[6, k] &= ~(1 << (i % 8))


@pytest.mark.parametrize("dtype", [np.int32, np.uint32], ids=lambda d: d.__name__)
def test_every_atomic_at_a_remainder(dtype):
    data = (np.arange(400) * 53 - 7000).astype(dtype)
    results = np.zeros((7, 16), np.int32)
    results[6] = -1
    expected = results.copy()
    _every_atomic(data, expected)
    every_atomic.forall(data.size)(data, results)
    np.testing.assert_array_equal(results, expected)


_OPS = ["add", "sub", "mul", "udiv", "sdiv", "urem", "srem", "shl", "lshr", "ashr", "and",
        "or", "xor"]
_CASTS = ["zext", "sext", "trunc"]
_MINMAX = ["smax", "smin", "umax", "umin"]


def _constant_cases(rng):
    """(expression, type) pairs of integer operations on constants: random
    operands of every width, with the edge values that matter most."""
    cases = []
    for bits in (1, 8, 16, 32, 64):
        edges = [0, 1, -1, (1 << (bits - 1)) - 1, -(1 << (bits - 1)), bits, bits - 1]
        values = edges + [int(v) for v in rng.integers(-(1 << (bits - 1)), 1 << (bits - 1),
                                                       12, dtype=np.int64, endpoint=False)]
        values = [v if bits > 1 else v & 1 for v in values]
        ty = f"i{bits}"
        for op in _OPS + _MINMAX:
            for k in range(len(values)):
                a, b = values[k], values[(k * 7 + 3) % len(values)]
                if op in _MINMAX:
                    cases.append((f"call {ty} @llvm.{op}.{ty}({ty} {a}, {ty} {b})", ty))
                else:
                    cases.append((f"{op} {ty} {a}, {b}", ty))
        for op in _CASTS:
            for wider in (8, 16, 32, 64):
                if wider > bits:
                    src, dst = (ty, f"i{wider}") if op != "trunc" else (f"i{wider}", ty)
                    for a in values[:8]:
                        cases.append((f"{op} {src} {a} to {dst}", dst))
    return cases


def test_folded_constants_match_llvm(rng):
    cases = _constant_cases(rng)
    functions = []
    for k, (expression, ty) in enumerate(cases):
        functions.append(f"define {ty} @f{k}() {{\n  %r = {expression}\n  ret {ty} %r\n}}")
    declared = sorted({f"declare {ty} @llvm.{op}.{ty}({ty}, {ty})"
                       for expression, ty in cases for op in _MINMAX
                       if f"@llvm.{op}." in expression})
    text = "\n".join(functions + declared) + "\n"
    ours = rewritten(legalize.fold_constants, text)
    # LLVM folds the same operations with InstCombine: its value, or poison.
    module = llvm.parse_assembly(text)
    pb = llvm.create_pass_builder(optimize.target_machine("spirv1.6-unknown-vulkan1.3-compute"),
                                  llvm.create_pipeline_tuning_options())
    pm = llvm.create_new_module_pass_manager()
    pm.add_instruction_combine_pass()
    pm.run(module, pb)
    llvm_values = {fn.name: str(fn).split("ret ")[1].split()[1]
                   for fn in module.functions if not fn.is_declaration}
    our_values = {}
    for chunk in ours.split("define ")[1:]:
        name = chunk.split("@")[1].split("(")[0]
        body = chunk.split("{", 1)[1]
        our_values[name] = body.split("ret ")[1].split()[1] if "%r =" not in body else None
    compared = 0
    for k, (expression, _) in enumerate(cases):
        expected, got = llvm_values[f"f{k}"], our_values[f"f{k}"]
        if got is None:
            # Left alone: poison, or undefined behaviour LLVM may fold anyhow.
            assert expected == "poison" or _undefined(expression), expression
        else:
            assert got == expected, expression
            compared += 1
    assert compared > 1000


def _undefined(expression):
    op, ty, a, b = expression.replace(",", "").split()
    bits = int(ty[1:])
    a, b = int(a) % (1 << bits), int(b) % (1 << bits)
    if op in ("udiv", "sdiv", "urem", "srem") and b == 0:
        return True
    minimum = 1 << (bits - 1)
    return op in ("sdiv", "srem") and a == minimum and b == (1 << bits) - 1


def test_operations_on_constants_left_by_rewrites_are_folded():
    text = ("define i32 @main(i32 %x) {\n"
            "entry:\n"
            "  %a = ashr i32 16, 31\n"
            "  %b = xor i32 16, %a\n"
            "  %c = sub i32 %b, %a\n"
            "  %d = trunc i64 4294967312 to i32\n"
            "  %e = add i32 %d, %x\n"
            "  br label %next\n"
            "next:\n"
            "  %f = phi i32 [ %c, %entry ]\n"
            "  %g = add i32 %e, %f\n"
            "  ret i32 %g\n"
            "}\n")
    folded = rewritten(legalize.fold_constants, text)
    assert "ashr" not in folded and "xor" not in folded and "trunc" not in folded
    assert "%e = add i32 16, %x" in folded and "[ 16, %entry ]" in folded


# A math function reached two ways in one kernel -------------------------------

def _pairs_kernel(first, second):
    source = f"""
def kernel(x, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        v = x[i]
        out[i, 0] = {first[0]}
        out[i, 1] = {second[0]}
        out[i, 2] = {first[1]}
        out[i, 3] = {second[1]}
        out[i, 4] = {first[2]}
        out[i, 5] = {second[2]}
"""
    scope = {"nv": nv, "np": np, "math": math}
    exec(source, scope)
    return scope["kernel"]


#: Numba lowers the first of each pair to a C call (``floor``, ``ceilf``...)
#: and the second to an LLVM intrinsic (``llvm.floor.f64``...); both
#: became one function and the module declared it twice.
_C_CALLS = ("math.floor(v)", "math.ceil(v)", "math.trunc(v)")
_INTRINSICS = ("np.floor(v)", "np.ceil(v)", "np.trunc(v)")


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("c_first", [True, False], ids=["c_call_first", "intrinsic_first"])
def test_c_call_and_intrinsic_of_one_function(dtype, c_first):
    first, second = (_C_CALLS, _INTRINSICS) if c_first else (_INTRINSICS, _C_CALLS)
    kernel = _pairs_kernel(first, second)
    x = np.array([-2.5, -1.0, -0.5, 0.0, 0.5, 1.5, 2.0, 7.75, -7.75, 1e6 + 0.5], dtype)
    out = np.zeros((x.size, 6))
    nv.jit(kernel).forall(x.size)(x, out)
    expected = np.zeros_like(out)
    numba.njit(_reference(first, second))(x, expected)
    np.testing.assert_array_equal(out, expected)


def _reference(first, second):
    scope = {"np": np, "math": math}
    exec(f"""
def reference(x, out):
    for i in range(x.shape[0]):
        v = x[i]
        out[i, 0] = {first[0]}
        out[i, 1] = {second[0]}
        out[i, 2] = {first[1]}
        out[i, 3] = {second[1]}
        out[i, 4] = {first[2]}
        out[i, 5] = {second[2]}
""", scope)
    return scope["reference"]


@nv.jit
def floor_division_and_floor(x, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        out[i] = x[i] // 3.0 + np.floor(x[i])


def test_floor_division_beside_np_floor():
    x = np.linspace(-10.0, 10.0, 41)
    out = np.zeros_like(x)
    floor_division_and_floor.forall(x.size)(x, out)
    np.testing.assert_array_equal(out, x // 3.0 + np.floor(x))


@numba.njit
def _remainders_and_powers(x, y, out):
    for i in range(x.shape[0]):
        out[i, 0] = x[i] % y[i]
        out[i, 1] = np.fmod(x[i], y[i])
        out[i, 2] = math.floor(x[i]) + np.floor(y[i])
        out[i, 3] = abs(x[i]) ** y[i] + math.pow(abs(y[i]), x[i])


@nv.jit
def remainders_and_powers(x, y, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        out[i, 0] = x[i] % y[i]
        out[i, 1] = np.fmod(x[i], y[i])
        out[i, 2] = math.floor(x[i]) + np.floor(y[i])
        out[i, 3] = abs(x[i]) ** y[i] + math.pow(abs(y[i]), x[i])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
def test_library_functions_reached_two_ways_in_one_kernel(dtype):
    # frem and np.fmod both become libclc's fmod, ** and math.pow its pow.
    x = np.array([-7.5, -3.0, -0.25, 0.5, 2.0, 5.75, 9.0, 1e3], dtype)
    y = np.array([2.0, -1.5, 0.75, 3.0, -2.5, 1.25, 4.0, 0.5], dtype)
    out = np.zeros((x.size, 4))
    remainders_and_powers.forall(x.size)(x, y, out)
    expected = np.zeros_like(out)
    _remainders_and_powers(x, y, expected)
    np.testing.assert_array_equal(out[:, :3], expected[:, :3])
    np.testing.assert_allclose(out[:, 3], expected[:, 3], rtol=4e-7 if dtype == np.float32 else 1e-15)


# Private arrays filled and copied in loops ---------------------------------------

@nv.jit
def private_fill_and_sum(x, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        a = nv.local.array(1000, np.float32)
        for k in range(1000):
            a[k] = 0
        for k in range(1000):
            a[k] += x[i] * k
        s = 0.0
        for k in range(1000):
            s += a[k]
        out[i] = s


@numba.njit
def _private_fill_and_sum(x, out):
    for i in range(x.shape[0]):
        a = np.empty(1000, np.float32)
        for k in range(1000):
            a[k] = 0
        for k in range(1000):
            a[k] += x[i] * k
        s = 0.0
        for k in range(1000):
            s += a[k]
        out[i] = s


def test_thousand_element_private_array_filled_in_a_loop():
    # Both the loop storing zeros and the zeros Numba stored into every new
    # array became an llvm.memset of the whole array.
    x = np.linspace(-4.0, 4.0, 32).astype(np.float32)
    out = np.zeros_like(x)
    private_fill_and_sum.forall(x.size)(x, out)
    expected = np.zeros_like(x)
    _private_fill_and_sum(x, expected)
    np.testing.assert_array_equal(out, expected)
    for kernel in compiled_kernels(private_fill_and_sum):
        assert "llvm.mem" not in kernel.llvm_ir
        assert_valid_spirv(kernel)


_COPIES = """
def kernel(x, out{extra}):
    i = {index}
    if i < x.shape[0]:
        a = LOCAL(300, DTYPE)
        b = LOCAL(300, DTYPE)
        for k in range(300):
            a[k] = FILL
        s = 0
        for k in range(300):
            s += a[k] * (k % 5)
        for k in range(300):
            b[k] = a[k]
        for k in range(300):
            a[k] = x[(i + k) % x.shape[0]]
        for k in range(299):
            a[k] = a[k + 1]
        for k in range(299, 0, -1):
            b[k] = b[k - 1]
        for k in range(300):
            s += a[k] * (k % 7) + b[k] * (k % 3)
        out[i] = s
"""


def _copies(dtype, fill, device):
    scope = {"nv": nv, "np": np, "DTYPE": dtype,
             "LOCAL": nv.local.array if device else np.empty}
    source = _COPIES.replace("FILL", fill).format(
        extra="" if device else ", i0", index="nv.global_id(0)" if device else "i0")
    exec(source, scope)
    return scope["kernel"]


_FILLS = ["0", "-1", "7", "x[i]"]


@pytest.mark.parametrize("dtype, fill", [
    (dtype, _FILLS[k % len(_FILLS)])
    for k, dtype in enumerate(INTEGERS + [np.float32, np.float64])],
    ids=lambda v: getattr(v, "__name__", v))
def test_private_arrays_filled_copied_and_shifted(dtype, fill):
    # Loops that fill, copy and shift: memset, memcpy and memmove idioms.
    x = (np.arange(24) % 11 - 3).astype(dtype)
    out = np.zeros(x.size)
    kernel = nv.jit(_copies(dtype, fill, device=True))
    kernel.forall(x.size)(x, out)
    expected = np.zeros_like(out)
    reference = numba.njit(_copies(dtype, fill, device=False))
    for i in range(x.size):
        reference(x, expected, i)
    np.testing.assert_array_equal(out, expected)
    for compiled in compiled_kernels(kernel):
        assert "llvm.mem" not in compiled.llvm_ir


def _rotations(x, k, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        v = x[i]
        # Constant amounts (0, 1, 13, 63: LLVM makes funnel shifts of these)
        # and one read from memory.
        out[i, 0] = (v << np.uint64(13)) | (v >> np.uint64(51))
        out[i, 1] = (v << np.uint64(63)) | (v >> np.uint64(1))
        out[i, 2] = (v >> np.uint64(13)) | (v << np.uint64(51))
        s = k[i] & np.uint64(63)
        out[i, 3] = (v << s) | (v >> ((np.uint64(64) - s) & np.uint64(63)))


def test_rotations_by_constant_and_variable_amounts():
    rng = np.random.default_rng(23)
    x = rng.integers(0, 2 ** 64, 4096, dtype=np.uint64)
    k = rng.integers(0, 2 ** 64, 4096, dtype=np.uint64)
    k[:64] = np.arange(64)
    out = np.zeros((4096, 4), np.uint64)
    kernel = nv.jit(_rotations)
    kernel[4, 1024](x, k, out)
    want = np.zeros_like(out)
    want[:, 0] = (x << np.uint64(13)) | (x >> np.uint64(51))
    want[:, 1] = (x << np.uint64(63)) | (x >> np.uint64(1))
    want[:, 2] = (x >> np.uint64(13)) | (x << np.uint64(51))
    s = k & np.uint64(63)
    want[:, 3] = (x << s) | (x >> ((np.uint64(64) - s) & np.uint64(63)))
    np.testing.assert_array_equal(out, want)
    compiled = kernel.compile("void(uint64[::1], uint64[::1], uint64[:, ::1])")
    # Each constant rotation became a 32-bit funnel shift per half (two
    # 32-bit right shifts), the variable one the general expansion.
    assert compiled.llvm_ir.count("lshr i32") == 3 * 2, compiled.llvm_ir
    assert_valid_spirv(compiled)
