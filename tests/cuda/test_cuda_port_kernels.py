"""numba.cuda kernels using Numba's language features: ``literal_unroll``."""

import numpy as np
from numba import literal_unroll

from numba_vulkan import cuda


@cuda.jit
def unrolled(out, scale):
    items = (1, 2.5, np.int32(3))
    total = 0.0
    for v in literal_unroll(items):
        total += v * scale
    out[0] = total


def test_literal_unroll():
    out = np.zeros(1)
    unrolled[1, 1](out, 2.0)
    assert out[0] == 13.0
