"""Functions called from kernels: ``@nv.jit`` device functions (scalars and
tuples out, arrays in and written), ``@numba.njit`` functions recompiled
for Vulkan, and ``@overload`` implementations for the Vulkan target."""

import numba
import numpy as np
from numba.extending import overload

import numba_vulkan as nv
from tests.helpers import assert_valid_spirv, compiled_kernels


@nv.jit
def floor_divmod(a, b):
    return a // b, a % b


@nv.jit
def row_range(row):
    lo = row[0]
    hi = row[0]
    for v in row:
        lo = min(lo, v)
        hi = max(hi, v)
    return lo, hi


@nv.jit
def scale_in_place(row, factor):
    for k in range(row.shape[0]):
        row[k] *= factor


@nv.jit
def spread(lo, hi):
    """A device function calling a device function."""
    return hi - lo, floor_divmod(int(hi * 100), 3)[1]


@numba.njit
def polynomial(x):
    acc = 0.0
    for c in (1.0, -2.0, 0.5):
        acc = acc * x + c
    return acc


def clamp01(x):
    """A Python function given a Vulkan implementation with @overload."""
    return min(max(x, 0.0), 1.0)


@overload(clamp01, target="vulkan")
def _clamp01_vulkan(x):
    def impl(x):
        return min(max(x, 0.0), 1.0)
    return impl


def twice(x):
    return 2 * x


@overload(twice)
def _twice_generic(x):
    def impl(x):
        return x + x
    return impl


@nv.jit
def use_functions(a, ints, out):
    i = nv.global_id(0)
    if i < a.shape[0]:
        q, r = floor_divmod(ints[i], 7)
        lo, hi = row_range(a[i])
        width, rest = spread(lo, hi)
        scale_in_place(a[i], 2.0)
        out[i, 0] = q
        out[i, 1] = r
        out[i, 2] = lo
        out[i, 3] = hi
        out[i, 4] = width + rest
        out[i, 5] = polynomial(a[i, 1])
        out[i, 6] = clamp01(a[i, 0] - 0.5)
        out[i, 7] = twice(ints[i])


def test_device_njit_and_overloaded_functions(rng):
    a = rng.random((60, 6))
    ints = rng.integers(-100, 100, 60).astype(np.int64)
    before = a.copy()
    out = np.zeros((60, 8))
    use_functions.forall(60)(a, ints, out)
    lo, hi = before.min(axis=1), before.max(axis=1)
    np.testing.assert_array_equal(out[:, 0], ints // 7)
    np.testing.assert_array_equal(out[:, 1], ints % 7)
    np.testing.assert_array_equal(out[:, 2], lo)
    np.testing.assert_array_equal(out[:, 3], hi)
    np.testing.assert_allclose(out[:, 4], hi - lo + (hi * 100).astype(np.int64) % 3)
    np.testing.assert_array_equal(a, 2 * before)
    np.testing.assert_allclose(out[:, 5], [polynomial(v) for v in a[:, 1]])
    np.testing.assert_array_equal(out[:, 6], np.clip(a[:, 0] - 0.5, 0, 1))
    np.testing.assert_array_equal(out[:, 7], 2 * ints)
    (compiled,) = compiled_kernels(use_functions)
    assert_valid_spirv(compiled)


def test_device_function_is_not_callable_from_python():
    import pytest
    with pytest.raises(nv.LaunchError, match="launch it with"):
        floor_divmod(7, 2)


def test_a_cached_kernel_is_callable_as_a_device_function():
    @nv.jit(cache=True)
    def twice(v):
        return 2 * v

    @nv.jit
    def caller(a):
        i = nv.global_id(0)
        if i < a.shape[0]:
            a[i] = twice(a[i])

    a = np.arange(4, dtype=np.float32)
    caller.forall(4)(a)
    np.testing.assert_array_equal(a, 2 * np.arange(4, dtype=np.float32))
