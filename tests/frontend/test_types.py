"""Scalar types in kernels: every integer width, bool, float32/float64 and
complex64/complex128, their arithmetic and casts, against ``numba.njit``.

Results must be bit for bit those of the CPU: Python's semantics for ``//``,
``%`` and ``**`` with negative operands, wrapping integer overflow, and float
arithmetic rounded exactly as written (no fused multiply-add unless
``fastmath=True``).
"""

import cmath

import numba
import numpy as np
import pytest

import numba_vulkan as nv
from tests.helpers import assert_valid_spirv, compiled_kernels

INTEGERS = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
FLOATS = ["float32", "float64"]
COMPLEX = ["complex64", "complex128"]


def _pair(kernel_body, name):
    """A kernel running ``kernel_body(..., i)`` per invocation, and the same
    body as a loop compiled for the CPU."""
    body = numba.njit(kernel_body, error_model="numpy")

    def kernel(a, b, out):
        i = nv.global_id(0)
        if i < a.shape[0]:
            body(a, b, out, i)

    def cpu(a, b, out):
        for i in range(a.shape[0]):
            body(a, b, out, i)

    kernel.__name__ = cpu.__name__ = name
    return nv.jit(kernel), numba.njit(cpu, error_model="numpy")


def _integer_ops(a, b, out, i):
    x, y = a[i], b[i]
    out[i, 0] = x + y
    out[i, 1] = x - y
    out[i, 2] = x * y
    out[i, 3] = x // y
    out[i, 4] = x % y
    out[i, 5] = x & y
    out[i, 6] = x | y
    out[i, 7] = x ^ y
    out[i, 8] = -x
    out[i, 9] = abs(x)
    out[i, 10] = min(x, y)
    out[i, 11] = max(x, y)
    out[i, 12] = x << (y & 7)
    out[i, 13] = x >> (y & 7)
    out[i, 14] = ~x
    out[i, 15] = (x == y) + 2 * (x < y) + 4 * (x >= y) + 8 * (x != y)
    out[i, 16] = x ** (y & 3)
    # Constant divisors take other code paths in drivers (NVIDIA's signed
    # remainder by a constant was wrong for negative dividends).
    out[i, 17] = x // 7
    out[i, 18] = x % 5
    out[i, 19] = x // -7
    out[i, 20] = x % -5


integer_kernel, integer_cpu = _pair(_integer_ops, "integer_ops")


@pytest.mark.parametrize("dtype", INTEGERS)
def test_integer_arithmetic(dtype, rng):
    info = np.iinfo(dtype)
    n = 600
    a = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    # Small operands of every sign, where // and % differ from C's, and the
    # extremes (MIN // -1 overflows the same way on both sides).
    low = -9 if info.min < 0 else 0
    a[:100] = rng.integers(low, 10, 100)
    b[:100] = rng.integers(low, 10, 100)
    a[100:104] = [info.min, info.max, info.min, info.max]
    b[100:104] = [1, 1, info.max, info.min]
    b[b == 0] = 3
    if info.min < 0:
        keep = ~((a == info.min) & (b == -1))
        a, b = a[keep], b[keep]
    out = np.zeros((a.size, 21), dtype)
    ref = np.zeros_like(out)
    integer_kernel.forall(a.size)(a, b, out)
    integer_cpu(a, b, ref)
    bad = np.argwhere(out != ref)
    assert not bad.size, (f"{dtype}: column {bad[0][1]} for {a[bad[0][0]]!r}, {b[bad[0][0]]!r}: "
                          f"{out[tuple(bad[0])]!r} on the device, {ref[tuple(bad[0])]!r} on the CPU")


def _float_ops(a, b, out, i):
    x, y = a[i], b[i]
    out[i, 0] = x + y
    out[i, 1] = x - y
    out[i, 2] = x * y
    out[i, 3] = x / y
    out[i, 4] = x // y
    out[i, 5] = x % y
    out[i, 6] = x ** 3
    out[i, 7] = x * y + a[i + 1 if i + 1 < a.shape[0] else 0]
    out[i, 8] = x * x - y * y
    out[i, 9] = (x + y) + x * 0.1
    out[i, 10] = -x
    out[i, 11] = y ** 2
    out[i, 12] = (x < y) + 2.0 * (x == y) + 4.0 * (x != x)


float_kernel, float_cpu = _pair(_float_ops, "float_ops")


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_arithmetic_is_exact(dtype, rng):
    n = 2000
    a = (rng.standard_normal(n) * 10.0 ** rng.integers(-5, 6, n)).astype(dtype)
    b = (rng.standard_normal(n) * 10.0 ** rng.integers(-5, 6, n)).astype(dtype)
    a[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -3.0, 7.5]
    b[:8] = [-0.0, 2.0, 3.0, np.inf, 1.0, np.nan, 2.0, -2.0]
    out = np.zeros((n, 13), dtype)
    ref = np.zeros_like(out)
    float_kernel.forall(n)(a, b, out)
    float_cpu(a, b, ref)
    same = (out == ref) | (np.isnan(out) & np.isnan(ref))
    bad = np.argwhere(~same)
    assert not bad.size, (f"{dtype}: column {bad[0][1]} for {a[bad[0][0]]!r}, {b[bad[0][0]]!r}: "
                          f"{out[tuple(bad[0])]!r} on the device, {ref[tuple(bad[0])]!r} on the CPU")
    for compiled in compiled_kernels(float_kernel):
        assert "NoContraction" in compiled.disassemble()


@nv.jit(fastmath=True)
def _fast_fma(a, b, c, out):
    i = nv.global_id(0)
    if i < a.shape[0]:
        out[i] = a[i] * b[i] + c[i]


def test_fastmath_allows_contraction(rng):
    a, b, c = (rng.random(500).astype(np.float32) for _ in range(3))
    out = np.zeros_like(a)
    _fast_fma.forall(a.size)(a, b, c, out)
    np.testing.assert_allclose(out, a * b + c, rtol=1e-6)
    (compiled,) = compiled_kernels(_fast_fma)
    assert "NoContraction" not in compiled.disassemble()


_CAST_TYPES = ["bool", *INTEGERS, *FLOATS]


def _cast_source():
    lines = ["def casts(a, out):", "    i = nv.global_id(0)", "    if i < a.shape[0]:"]
    for k, name in enumerate(_CAST_TYPES):
        target = "np.bool_" if name == "bool" else f"np.{name}"
        lines.append(f"        out[i, {k}] = np.float64({target}(a[i]))")
    return "\n".join(lines)


def _cast_kernels():
    namespace = {"np": np, "nv": nv}
    exec(compile(_cast_source(), "<casts>", "exec"), namespace)
    cpu_source = _cast_source().replace("    i = nv.global_id(0)\n    if i < a.shape[0]:",
                                        "    for i in range(a.shape[0]):")
    cpu_namespace = {"np": np}
    exec(compile(cpu_source, "<casts_cpu>", "exec"), cpu_namespace)
    return nv.jit(namespace["casts"]), numba.njit(cpu_namespace["casts"])


@pytest.mark.parametrize("source", _CAST_TYPES)
def test_casts(source, rng):
    kernel, cpu = _cast_kernels_cached()
    if source == "bool":
        a = rng.integers(0, 2, 300).astype(bool)
    elif source in FLOATS:
        # Values every integer type holds, so that no conversion is undefined.
        a = rng.uniform(0, 127, 300).astype(source)
        a[:4] = [0.0, -0.0, 1.5, 126.99]
    else:
        info = np.iinfo(source)
        a = rng.integers(info.min, info.max, 300, dtype=source, endpoint=True)
        a[:4] = [0, 1, info.min, info.max]
    out = np.zeros((a.size, len(_CAST_TYPES)))
    ref = np.zeros_like(out)
    kernel.forall(a.size)(a, out)
    cpu(a, ref)
    bad = np.argwhere(out != ref)
    assert not bad.size, (f"{source} {a[bad[0][0]]!r} to {_CAST_TYPES[bad[0][1]]}: "
                          f"{out[tuple(bad[0])]!r} on the device, {ref[tuple(bad[0])]!r} on the CPU")


_cast_cache = []


def _cast_kernels_cached():
    if not _cast_cache:
        _cast_cache.append(_cast_kernels())
    return _cast_cache[0]


def _bool_ops(a, b, out, i):
    x, y = a[i], b[i]
    out[i, 0] = x and y
    out[i, 1] = x or y
    out[i, 2] = x ^ y
    out[i, 3] = not x
    out[i, 4] = x == y
    out[i, 5] = x + y > 1


bool_kernel, bool_cpu = _pair(_bool_ops, "bool_ops")


def test_bool_arrays_and_logic(rng):
    a = rng.integers(0, 2, 100).astype(bool)
    b = rng.integers(0, 2, 100).astype(bool)
    out = np.zeros((100, 6), bool)
    ref = np.zeros_like(out)
    bool_kernel.forall(100)(a, b, out)
    bool_cpu(a, b, ref)
    np.testing.assert_array_equal(out, ref)


def _complex_ops(a, b, out, i):
    x, y = a[i], b[i]
    out[i, 0] = x + y
    out[i, 1] = x - y
    out[i, 2] = x * y
    out[i, 3] = x / y
    out[i, 4] = -x
    out[i, 5] = x.conjugate()
    out[i, 6] = x * 2.5 - 1.0
    out[i, 7] = complex(x.imag, x.real)
    out[i, 8] = abs(x)
    out[i, 9] = x ** 2
    out[i, 10] = x ** y
    out[i, 11] = (x == y) + 2 * (x != y)


complex_kernel, complex_cpu = _pair(_complex_ops, "complex_ops")


@pytest.mark.parametrize("dtype", COMPLEX)
def test_complex_arithmetic(dtype, rng):
    n = 400
    a = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)
    b = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)
    a[:4] = [0, 1j, -2.5, 3 - 4j]
    b[:4] = [1 + 1j, 1j, 2, -0.5]
    out = np.zeros((n, 12), dtype)
    ref = np.zeros_like(out)
    dout = nv.device_array(out.shape, dtype)
    complex_kernel.forall(n)(nv.to_device(a), nv.to_device(b), dout)
    out = dout.copy_to_host()
    complex_cpu(a, b, ref)
    exact = [0, 1, 2, 3, 4, 5, 6, 7, 9, 11]
    np.testing.assert_array_equal(out[:, exact], ref[:, exact])
    # abs and ** call math functions: within a few ULPs.
    part = np.finfo(np.dtype(dtype).char.lower()).eps
    for column in (8, 10):
        scale = np.maximum(np.abs(ref[:, column]), np.finfo(part.dtype).tiny)
        error = np.abs(out[:, column] - ref[:, column]) / scale
        assert np.nanmax(error) <= 64 * part, f"column {column}: {np.nanmax(error)}"
    for compiled in compiled_kernels(complex_kernel):
        assert_valid_spirv(compiled)


@nv.jit
def _complex_scalar(z, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = z * (i + 1) + z.conjugate()


@pytest.mark.parametrize("dtype", COMPLEX)
def test_complex_scalar_argument(dtype):
    z = np.dtype(dtype).type(1.5 - 2.25j)
    out = np.zeros(10, dtype)
    _complex_scalar.forall(10)(z, out)
    np.testing.assert_array_equal(out, z * np.arange(1, 11) + np.conj(z))
    if dtype == "complex128":
        _complex_scalar.forall(10)(complex(0.5, 4.0), out)
        np.testing.assert_array_equal(out, (0.5 + 4j) * np.arange(1, 11) + (0.5 - 4j))


def _cmath_ops(a, b, out, i):
    z = a[i]
    out[i, 0] = cmath.exp(z)
    out[i, 1] = cmath.log(z)
    out[i, 2] = cmath.sqrt(z)
    out[i, 3] = cmath.sin(z)
    out[i, 4] = cmath.acos(z)
    out[i, 5] = cmath.tanh(z)
    out[i, 6] = cmath.phase(z) + 1j * abs(z)
    out[i, 7] = cmath.rect(z.real, z.imag) + b[i]


cmath_kernel, cmath_cpu = _pair(_cmath_ops, "cmath_ops")


@pytest.mark.parametrize("dtype", COMPLEX)
def test_cmath_functions(dtype, rng):
    n = 300
    a = (rng.standard_normal(n) * 3 + 3j * rng.standard_normal(n)).astype(dtype)
    b = np.zeros(n, dtype)
    out = np.zeros((n, 8), dtype)
    ref = np.zeros_like(out)
    cmath_kernel.forall(n)(a, b, out)
    cmath_cpu(a, b, ref)
    eps = np.finfo(np.float32 if dtype == "complex64" else np.float64).eps
    error = np.abs(out - ref) / np.maximum(np.abs(ref), 1)
    assert error.max() <= 16 * eps, np.unravel_index(np.argmax(error), error.shape)


def test_builtin_classes_resolve_to_the_types_numba_gives_them():
    # The typing context resolves builtin classes (``bool`` of every branch)
    # without Numba's typeof; the result must be what Numba's path gives.
    from numba.core import typing
    from numba_vulkan.frontend.compile import contexts
    context, _ = contexts()

    def resolved(resolve, cls):
        try:
            return resolve(cls)
        except Exception as exc:  # both paths must fail alike
            return type(exc)

    for cls in (bool, int, float, complex, range, slice, tuple, list, dict, object):
        ours = resolved(context.resolve_value_type, cls)
        numba_s = resolved(lambda c: typing.Context.resolve_value_type(context, c), cls)
        assert ours == numba_s, cls
    assert isinstance(context.resolve_value_type(bool), numba.core.types.Function)
