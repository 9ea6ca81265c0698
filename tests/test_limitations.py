"""Known gaps (docs/limitations.md), each reproduced by an xfail test."""

import numpy as np
import pytest

import numba_vulkan as nv


@nv.jit
def _fill(out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = 1


@pytest.mark.xfail(strict=True, raises=nv.LaunchError,
                   reason="shapes travel as 32-bit integers")
def test_arrays_beyond_int32_elements():
    class Huge:
        dtype = np.dtype(np.uint8)
        shape = (2 ** 31 + 8,)
        strides = (1,)
    from numba_vulkan.runtime.pipeline import Pipeline
    k = _fill.compile("void(uint8[::1])")
    from numba_vulkan.runtime.device import current_device
    p = Pipeline(current_device(), k.spirv, k.params, k.push_size)
    p.pack((1, 1, 1), [[Huge.shape[0], 1, 0]])
