"""Arrays inside kernels: N-d and negative indices, slices as views,
attributes, iteration, strided arguments and ``len``, against NumPy."""

import numba
import numpy as np

import numba_vulkan as nv
from tests.helpers import assert_valid_spirv, compiled_kernels


@nv.jit
def index_forms(a, out):
    i = nv.global_id(0)
    if i < a.shape[0]:
        row = a[i]
        out[i, 0] = a[i, -1]
        out[i, 1] = a[-1 - i, 0]
        out[i, 2] = row[-2]
        out[i, 3] = a.shape[1] * 100 + a.size + a.ndim + len(a) + len(row)
        tail = a[i, 1:]
        out[i, 4] = tail[0] + tail.shape[0]
        every_other = a[i, ::2]
        out[i, 5] = every_other[every_other.shape[0] - 1]
        backwards = a[i, ::-1]
        out[i, 6] = backwards[1]
        block = a[max(i - 1, 0):i + 2, 1:3]
        out[i, 7] = block[block.shape[0] - 1, 1] * 1000 + block.size


@nv.jit
def iterate(a, out):
    i = nv.global_id(0)
    if i < a.shape[0]:
        total = 0.0
        for v in a[i]:
            total += v
        count = 0
        for row in a[:i + 1]:
            count += row.shape[0]
        weighted = 0.0
        for k, v in enumerate(a[i, ::3]):
            weighted += k * v
        out[i, 0] = total
        out[i, 1] = count
        out[i, 2] = weighted


@numba.njit
def column_sum(a, j):
    """Called from a kernel with a view; strided reads."""
    s = 0.0
    for r in range(a.shape[0]):
        s += a[r, j]
    return s


@nv.jit
def strided(a, out):
    j = nv.global_id(0)
    if j < out.shape[0]:
        out[j] = column_sum(a[::2], j) - column_sum(a[1::2], j)


@nv.jit
def write_through_views(a):
    i = nv.global_id(0)
    if i < a.shape[0]:
        view = a[i, ::-2]
        for k in range(view.shape[0]):
            view[k] = i * 10 + k
        a[i, 1::2][0] = -1


def _expected_index_forms(a):
    n, m = a.shape
    out = np.zeros((n, 8))
    for i in range(n):
        out[i, 0] = a[i, -1]
        out[i, 1] = a[-1 - i, 0]
        out[i, 2] = a[i][-2]
        out[i, 3] = m * 100 + a.size + a.ndim + len(a) + len(a[i])
        out[i, 4] = a[i, 1:][0] + (m - 1)
        out[i, 5] = a[i, ::2][-1]
        out[i, 6] = a[i, ::-1][1]
        block = a[max(i - 1, 0):i + 2, 1:3]
        out[i, 7] = block[-1, 1] * 1000 + block.size
    return out


def test_indices_slices_and_attributes(rng):
    a = rng.integers(0, 100, (9, 7)).astype(np.float64)
    out = np.zeros((9, 8))
    index_forms.forall(9)(a, out)
    np.testing.assert_array_equal(out, _expected_index_forms(a))
    # The same kernel on a strided view: one more compile, 'A' layout.
    base = rng.integers(0, 100, (20, 16)).astype(np.float64)
    view = base[1::2, ::2]
    out = np.zeros((10, 8))
    index_forms.forall(10)(view, out)
    np.testing.assert_array_equal(out, _expected_index_forms(view))
    for compiled in compiled_kernels(index_forms):
        assert_valid_spirv(compiled)


def test_iteration(rng):
    a = rng.random((6, 10))
    out = np.zeros((6, 3))
    iterate.forall(6)(a, out)
    np.testing.assert_allclose(out[:, 0], a.sum(axis=1))
    np.testing.assert_array_equal(out[:, 1], 10 * np.arange(1, 7))
    np.testing.assert_allclose(out[:, 2], [(np.arange(4) * a[i, ::3]).sum() for i in range(6)])


def test_strided_views_in_device_functions(rng):
    a = rng.random((12, 5))
    out = np.zeros(5)
    strided.forall(5)(a, out)
    np.testing.assert_allclose(out, a[::2].sum(axis=0) - a[1::2].sum(axis=0))


def test_writes_through_views(rng):
    a = np.zeros((4, 7), np.int64)
    write_through_views.forall(4)(a)
    expected = np.zeros((4, 7), np.int64)
    for i in range(4):
        expected[i, ::-2] = i * 10 + np.arange(4)
        expected[i, 1] = -1
    np.testing.assert_array_equal(a, expected)
