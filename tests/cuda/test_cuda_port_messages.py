"""What numba.cuda code that cannot compile is told: sizes of shared
arrays, NumPy's linear algebra."""

import numpy as np
import pytest

from numba_vulkan import cuda
from numba_vulkan.base.errors import CompilerError, UnsupportedError

TILE = 8


def test_shared_array_sized_by_an_argument():
    @cuda.jit
    def sized(a, n):
        s = cuda.shared.array(n, cuda.float32)
        a[0] = s[0]

    with pytest.raises(CompilerError, match=r"not a compile-time constant.*shared\.array\(0, "
                                            r"dtype\).*dynamic shared memory"):
        sized[1, 1](np.zeros(1, np.float32), 4)


def test_computed_shape():
    @cuda.jit
    def tile(a):
        s = cuda.shared.array((TILE + 2, TILE + 2), cuda.float32)
        s[0, 0] = 1
        a[0] = s[0, 0]

    with pytest.raises(CompilerError, match=r"not a compile-time constant.*TILE2 = TILE \+ 2"):
        tile[1, 1](np.zeros(1, np.float32))


def test_linalg_in_a_kernel():
    @cuda.jit
    def norm(a, out):
        out[0] = np.linalg.norm(a)

    with pytest.raises(UnsupportedError, match="linear algebra.*not supported in kernels") as e:
        norm[1, 1](np.ones(3), np.zeros(1))
    assert "scipy" not in str(e.value)
