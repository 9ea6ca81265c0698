"""float32 division and square roots are correctly rounded on fused-fma targets
without float64 division (legalize.exact_float32's fused_fma path).

Lavapipe computes GLSL's Fma as a multiply and an add, so here the path runs
with the fma emulation legalize uses for such drivers, and with the
driver's approximations pushed off by up to 3 ulps (what Vulkan allows) to
exercise the corrections a GPU's approximations need. On a device whose
target has fused_fma (an NVIDIA, AMD, Intel or Apple GPU) the native test
runs the module as compiled for it.
"""

import math

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan import config
from numba_vulkan.codegen import legalize
from numba_vulkan.runtime.device import DeviceInfo, current_device
from numba_vulkan.target import TargetDescription


def _divide(a, b, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = a[i] / b[i]


def _root(a, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = math.sqrt(a[i])


SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.0, 3.0, 0.5, 1e38, 3.4e38,
                    1.2e-38, 1e-45, 7.0], np.float32)


def _dividends(rng):
    n = 1 << 17
    a = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    b = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    # Significands alone, where the corrections decide every last bit.
    x = rng.uniform(1, 2, n).astype(np.float32)
    y = rng.uniform(1, 2, n).astype(np.float32)
    # Quotients near and below the smallest normal number.
    c = (rng.uniform(1, 2, 4096) * 2.0 ** -120).astype(np.float32)
    d = (rng.uniform(1, 2, 4096) * 2.0 ** rng.integers(5, 30, 4096)).astype(np.float32)
    pairs_a = np.repeat(SPECIAL, SPECIAL.size)
    pairs_b = np.tile(SPECIAL, SPECIAL.size)
    return np.concatenate([a, x, c, pairs_a]), np.concatenate([b, y, d, pairs_b])


def _roots():
    # Every fourth float of [1, 4) (all significands and both exponent
    # parities), random bit patterns and the special values.
    every = np.arange(0x3F800000, 0x40800000, 4, dtype=np.uint32).view(np.float32)
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 1 << 32, 1 << 17, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([every, bits.view(np.float32), SPECIAL])


def _same(expected, got):
    same = (expected.view(np.uint32) == got.view(np.uint32)) | (np.isnan(expected) & np.isnan(got))
    return np.nonzero(~same)[0]


def _launch(kernel, *arrays):
    out = np.zeros_like(arrays[0])
    kernel[(out.size + 255) // 256, 256](*arrays, out)
    return out


@pytest.fixture
def fused(monkeypatch):
    """Compile for this device as if its Fma were fused, with the fma emulated."""
    device = current_device()
    monkeypatch.setattr(device, "target", device.target.with_features(fused_fma=True))
    emulating = legalize.legalize
    monkeypatch.setattr(legalize, "legalize", lambda text, fused_fma=False: emulating(text))
    with config.overriding(NUMBA_VULKAN_CACHE="0"):
        yield


@pytest.mark.parametrize("error", [0, 3, -3])
def test_division_is_correctly_rounded(fused, monkeypatch, error):
    monkeypatch.setattr(legalize, "APPROXIMATION_ERROR", error)
    a, b = _dividends(np.random.default_rng(4))
    with np.errstate(all="ignore"):
        expected = a / b
    wrong = _same(expected, _launch(nv.jit(_divide), a, b))
    assert wrong.size == 0, [(a[k], b[k]) for k in wrong[:5]]


@pytest.mark.parametrize("error", [0, 3, -3])
def test_square_roots_are_correctly_rounded(fused, monkeypatch, error):
    monkeypatch.setattr(legalize, "APPROXIMATION_ERROR", error)
    x = _roots()
    with np.errstate(all="ignore"):
        expected = np.sqrt(x)
    wrong = _same(expected, _launch(nv.jit(_root), x))
    assert wrong.size == 0, [x[k] for k in wrong[:5]]


def test_the_fused_path_uses_no_float64_division():
    sig = "void(float32[::1], float32[::1], float32[::1])"
    with config.overriding(NUMBA_VULKAN_CACHE="0"):
        fused = nv.jit(_divide).compile(sig, target=TargetDescription(fused_fma=True)).llvm_ir
        plain = nv.jit(_divide).compile(sig, target=TargetDescription()).llvm_ir
    assert "fdiv float" in fused and "fdiv double" not in fused and "@llvm.fma.f32" in fused
    assert "fdiv double" in plain


@pytest.mark.skipif(not current_device().target.fused_fma,
                    reason="the device's target has no fused fma (lavapipe)")
def test_natively_on_a_fused_fma_device():
    a, b = _dividends(np.random.default_rng(4))
    x = _roots()
    with config.overriding(NUMBA_VULKAN_CACHE="0"), np.errstate(all="ignore"):
        assert _same(a / b, _launch(nv.jit(_divide), a, b)).size == 0
        assert _same(np.sqrt(x), _launch(nv.jit(_root), x)).size == 0


def _info(vendor, device_type):
    return DeviceInfo(index=0, name="gpu", vendor_id=vendor, device_id=1, driver_version=1,
                      api_version=(1, 3, 0), device_type=device_type,
                      features=frozenset({"float64", "int64"}), subgroup_size=32,
                      max_workgroup_size=(1024, 1024, 64), max_workgroup_invocations=1024,
                      max_workgroup_count=(65535,) * 3, max_shared_memory=49152,
                      max_push_constants=256, max_storage_buffers=64)


def test_gpus_of_the_known_vendors_have_fused_fma_targets():
    assert _info(0x10DE, "discrete").target().fused_fma
    assert _info(0x1002, "integrated").target().fused_fma
    assert not _info(0x10DE, "cpu").target().fused_fma
    assert not _info(0x13B5, "integrated").target().fused_fma
    target = _info(0x8086, "discrete").target()
    assert TargetDescription.from_key(target.key()) == target
    assert "fused_fma" in target.key()
