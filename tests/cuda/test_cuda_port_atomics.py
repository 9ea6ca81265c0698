"""numba.cuda's atomics: index tuples of mixed integer types, each cast to
intp; a float index is a TypeError."""

import numpy as np
import pytest
from numba import uint64

from numba_vulkan import cuda
from numba_vulkan.base.errors import CompilerError

WIDE = False


@cuda.jit
def count_mixed(a):
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    idx = (tx, uint64(ty))
    if WIDE:
        # A dead branch, pruned: idx stays (int64, uint64).
        idx = (uint64(tx), ty)
    cuda.atomic.add(a, idx, 1)
    cuda.atomic.max(a, (ty, uint64(tx) % uint64(2)), 0)


def test_mixed_integer_index_tuple():
    a = np.zeros((4, 2), np.int32)
    count_mixed[1, (4, 2)](a)
    np.testing.assert_array_equal(a, 1)


@cuda.jit
def float_index(a):
    cuda.atomic.add(a, 1.0, 1)


def test_float_index_is_a_type_error():
    with pytest.raises(TypeError, match=r"index must be an int.*not float64") as info:
        float_index[1, 1](np.zeros(3, np.int32))
    assert isinstance(info.value, CompilerError)
    assert "test_cuda_port_atomics.py" in str(info.value)
