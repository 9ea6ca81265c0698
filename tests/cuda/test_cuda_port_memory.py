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
