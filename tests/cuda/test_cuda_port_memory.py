"""numba.cuda's device memory as kernels see it: device arrays captured
from globals and closures, 0-d arrays, ``.flags``, host-side reductions."""

import numpy as np
import pytest

from numba_vulkan import cuda

TABLE = cuda.to_device(np.arange(8, dtype=np.float32) * 10)
COUNTS = cuda.to_device(np.zeros(4, np.int32))


@cuda.jit
def lookup(idx, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = TABLE[idx[i]]
        cuda.atomic.add(COUNTS, idx[i] % 4, 1)


def test_device_arrays_captured_from_globals():
    idx = np.array([3, 0, 7, 5], np.int64)
    out = np.zeros(4, np.float32)
    lookup[1, 4](idx, out)
    np.testing.assert_array_equal(out, idx * 10)
    # Written through the global: the host sees it, as with numba.cuda.
    np.testing.assert_array_equal(COUNTS.copy_to_host(), [1, 1, 0, 2])
    # The array the name holds at each launch is the one read.
    TABLE.copy_to_device(np.arange(8, dtype=np.float32))
    lookup[1, 4](idx, out)
    np.testing.assert_array_equal(out, idx)


def test_device_arrays_captured_from_a_closure():
    def make(scale):
        weights = cuda.to_device(np.full(4, scale, np.float64))

        @cuda.jit
        def apply(a):
            i = cuda.grid(1)
            if i < a.size:
                a[i] *= weights[i]
        return apply

    a = np.ones(4)
    make(3.0)[1, 4](a)
    np.testing.assert_array_equal(a, 3)


@cuda.jit
def zero_d(a, b):
    b[()] = a.item() * 2


def test_0d_arrays_as_arguments():
    a, b = np.full((), 3, np.float32), np.zeros((), np.float32)
    zero_d[1, 1](a, b)
    assert b[()] == 6
    d, e = cuda.to_device(np.full((), 5.0)), cuda.device_array(())
    zero_d[1, 1](d, e)
    assert d.copy_to_host().shape == () and e.copy_to_host()[()] == 10


def test_flags():
    d = cuda.to_device(np.zeros((2, 3)))
    assert d.flags["C_CONTIGUOUS"] and not d.flags["F_CONTIGUOUS"]
    assert d.T.flags["F_CONTIGUOUS"] and not d.T.flags["C_CONTIGUOUS"]


class _ArrayLike:
    """Has ``__array__`` and nothing else of an array."""

    def __init__(self, data):
        self.data = data

    def __array__(self, dtype=None, copy=None):
        return self.data


@cuda.jit
def twice(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] *= 2


def test_objects_with_only_array_interface_at_launch():
    data = np.arange(4, dtype=np.float32)
    twice[1, 4](_ArrayLike(data))
    np.testing.assert_array_equal(data, np.arange(4) * 2)
    np.testing.assert_array_equal(cuda.to_device(_ArrayLike(data)).copy_to_host(), data)


def test_numpy_type_names_in_the_native_namespace():
    import numba_vulkan as nv
    assert nv.float32 is np.float32 and nv.int64 is np.int64 and nv.uint8 is np.uint8
