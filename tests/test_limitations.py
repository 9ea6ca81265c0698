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


@pytest.mark.xfail(strict=True, reason="the compiler does not narrow 64-bit types yet")
def test_aot_narrow_profile_builds(tmp_path):
    from numba_vulkan.aot import build
    (tmp_path / "narrow_kernels.py").write_text(
        "import numba_vulkan as nv\n\n@nv.jit\ndef twice(x):\n    i = nv.global_id(0)\n"
        "    if i < x.shape[0]:\n        x[i] *= 2.0\n")
    (tmp_path / "kernels.yaml").write_text(
        "version: 1\nprofiles:\n  - name: narrow\n    narrow: true\nkernels:\n"
        "  - function: narrow_kernels:twice\n    signatures: ['void(float64[::1])']\n")
    result = build.build(str(tmp_path / "kernels.yaml"))
    assert not result.failures, result.failures[0].message
