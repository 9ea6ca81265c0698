"""GPU targets of the vendors whose Fma rounds once keep llvm.fma native (target.fused_fma)."""

import math
import re

import numba_vulkan as nv
from numba_vulkan.base import config
from numba_vulkan.base.target import TargetDescription

from tests.helpers import device_info


def _info(vendor, device_type):
    return device_info("gpu", vendor, device_type)


def test_gpus_of_the_known_vendors_have_fused_fma_targets():
    assert _info(0x10DE, "discrete").target().fused_fma
    assert _info(0x1002, "integrated").target().fused_fma
    assert not _info(0x10DE, "cpu").target().fused_fma
    assert not _info(0x13B5, "integrated").target().fused_fma
    target = _info(0x8086, "discrete").target()
    assert "fused_fma" in target.key()
    assert TargetDescription.from_key(target.key()) == target


def test_only_nvidia_gpus_have_nvidias_reciprocal_root():
    nvidia = _info(0x10DE, "discrete").target()
    assert nvidia.nvidia_rsqrt and "nvidia_rsqrt" in nvidia.key()
    assert TargetDescription.from_key(nvidia.key()) == nvidia
    for vendor, kind in ((0x1002, "discrete"), (0x8086, "integrated"), (0x10DE, "cpu")):
        assert not _info(vendor, kind).target().nvidia_rsqrt


def _math(a, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = math.exp(a[i]) + math.sin(a[i]) + math.log(a[i])


def test_a_fused_target_keeps_libclcs_fmas_and_another_emulates_them():
    sig = "void(float32[::1], float32[::1])"
    with config.overriding(NUMBA_VULKAN_CACHE="0"):
        fused = nv.jit(_math).compile(sig, target=TargetDescription(fused_fma=True)).llvm_ir
        plain = nv.jit(_math).compile(sig, target=TargetDescription()).llvm_ir
    call = re.compile(r"call (noundef )?float @llvm\.fma\.f32\(")
    assert call.search(fused)
    assert not call.search(plain)
