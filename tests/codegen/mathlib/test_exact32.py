"""The library's correctly rounded float32 division and square root
(``codegen/mathlib/exact32.py``), which targets with a fused ``Fma`` use.

lavapipe's ``Fma`` rounds twice, so its kernels keep the float64 path; here
the float32 path is forced onto it to check the algorithm (lavapipe's
emulated fma is exact where the square root needs it; the quotient's last
correction may be an ULP off there, as the H200 run is not:
``benchmarks/results/mathlib_h200.log``).
"""

import math
import re

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.base import config
from numba_vulkan.base.target import TargetDescription
from numba_vulkan.codegen import pipeline
from tests.helpers import assert_valid_spirv


def _divide(a, b, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = a[i] / b[i]


def _root(a, b, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = math.sqrt(a[i])


SIG = "void(float32[::1], float32[::1], float32[::1])"


@pytest.fixture
def float32_path(cache_dir, monkeypatch):
    """Kernels compiled from here on take the float32 path on lavapipe."""
    monkeypatch.setattr(pipeline, "_float32_operations", pipeline._exact_float32)


def _bits_equal(got, want):
    return (got.view(np.int32) == want.view(np.int32)) | (np.isnan(got) & np.isnan(want))


def _run(function, a, b):
    out = np.zeros_like(a)
    kernel = nv.jit(function)
    kernel[(a.size + 1023) // 1024, 1024](a, b, out)
    # The float32 path ran, not lavapipe's own float64 one.
    assert "@llvm.fma.f32" in kernel.compile(SIG).llvm_ir
    return out


SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.0, 2.0 ** -100, 2.0 ** 100,
                    2.0 ** -101, 2.0 ** 101, 2.0 ** -60, 2.0 ** 60, 2.0 ** -61, 2.0 ** 61,
                    1e-30, 3e30, 3.4028235e38, 1.1754944e-38], np.float32)


def test_sqrt_is_correctly_rounded_over_two_binades(float32_path):
    # Every float32 in [1, 4): both parities of the exponent, every significand.
    x = np.arange(0x3F800000, 0x40800000, dtype=np.int32).view(np.float32)
    out = _run(_root, x, x)
    want = np.sqrt(x.astype(np.float64)).astype(np.float32)
    assert np.array_equal(out, want)


def _fma32(a, b, c):
    """float32 ``a * b + c`` rounded once, exactly: the float64 sum of the
    exact product and ``c``, its rounding error (two-sum), and the error's
    sign where the float64 sum fell on a float32 midpoint."""
    product, c = a.astype(np.float64) * b.astype(np.float64), c.astype(np.float64)
    total = product + c
    back = total - product
    error = (product - (total - back)) + (c - back)
    near = total.astype(np.float32)
    other = np.nextafter(near, np.where(total > near, np.float32(np.inf), np.float32(-np.inf)))
    tie = (total == (near.astype(np.float64) + other) / 2) & (error != 0)
    return np.where(tie, np.where(error > 0, np.maximum(near, other), np.minimum(near, other)),
                    near)


def _root_from(x, r, short=False):
    """The library's float32 root sequence (``exact32.sqrt``, or with
    ``short`` ``exact32.sqrt_nvidia``) on the reciprocal root ``r``, in
    exact float32 arithmetic."""
    s = (x.astype(np.float64) * r).astype(np.float32)
    h = np.float32(0.5) * r
    if not short:
        e = _fma32(-s, h, np.full_like(x, 0.5))
        s, h = _fma32(s, e, s), _fma32(h, e, h)
    return _fma32(_fma32(-s, s, x), h, s)


@pytest.mark.parametrize("ulps", [0, 1, -1, 2, -2, 3, -3, 8, -8, 64, -64])
def test_sqrt_sequence_rounds_correctly_whatever_the_drivers_reciprocal_root(ulps):
    # Vulkan bounds InverseSqrt to 2 ULP; the sequence is checked with r
    # that far off and beyond, on every 7th float32 of [1, 4) (the pattern
    # repeats every two binades).
    x = np.arange(0x3F800000, 0x40800000, 7, dtype=np.int32).view(np.float32)
    nearest = (1.0 / np.sqrt(x.astype(np.float64))).astype(np.float32)
    r = (nearest.view(np.int32) + ulps).view(np.float32)
    want = np.sqrt(x.astype(np.float64)).astype(np.float32)
    got = _root_from(x, r)
    assert np.array_equal(got, want), x[got != want][:5]


def test_the_short_sequence_needs_a_close_reciprocal_root():
    # NVIDIA's sequence (numba-cuda's): right with the correctly rounded r
    # on every input of [1, 4), wrong on some with r 1 ULP off, which
    # Vulkan allows: other devices take the longer one.
    x = np.arange(0x3F800000, 0x40800000, dtype=np.int32).view(np.float32)
    nearest = (1.0 / np.sqrt(x.astype(np.float64))).astype(np.float32)
    want = np.sqrt(x.astype(np.float64)).astype(np.float32)
    assert np.array_equal(_root_from(x, nearest, short=True), want)
    high = (nearest.view(np.int32) + 1).view(np.float32)
    assert not np.array_equal(_root_from(x, high, short=True), want)


def test_sqrt_special_and_scaled_inputs(float32_path):
    rng = np.random.default_rng(7)
    x = np.concatenate([SPECIAL, -SPECIAL, (2.0 ** rng.uniform(-120, 127, 1 << 16)).astype(np.float32)])
    out = _run(_root, x, x)
    with np.errstate(invalid="ignore"):
        want = np.sqrt(x.astype(np.float64)).astype(np.float32)
    assert _bits_equal(out, want).all(), x[~_bits_equal(out, want)]


def test_division_special_values_and_signs(float32_path):
    a, b = (v.ravel() for v in np.meshgrid(np.concatenate([SPECIAL, -SPECIAL]),
                                           np.concatenate([SPECIAL, -SPECIAL])))
    out = _run(_divide, a, b)
    with np.errstate(all="ignore"):
        want = (a.astype(np.float64) / b.astype(np.float64)).astype(np.float32)
    ok = _bits_equal(out, want)
    assert ok.all(), list(zip(a[~ok][:5], b[~ok][:5], out[~ok][:5], want[~ok][:5]))


def test_division_of_ordinary_operands(float32_path):
    rng = np.random.default_rng(11)
    n = 1 << 18
    a = (rng.uniform(-8, 8, n) * 2.0 ** rng.integers(-20, 20, n)).astype(np.float32)
    b = (rng.uniform(0.5, 8, n) * 2.0 ** rng.integers(-20, 20, n)).astype(np.float32)
    out = _run(_divide, a, b)
    want = (a.astype(np.float64) / b.astype(np.float64)).astype(np.float32)
    assert np.array_equal(out, want)


def test_a_fused_target_divides_in_float32_and_others_in_float64(cache_dir):
    kernel = nv.jit(_divide)
    with config.overriding(NUMBA_VULKAN_CACHE="0"):
        fused = kernel.compile(SIG, target=TargetDescription(fused_fma=True))
        plain = kernel.compile(SIG, target=TargetDescription())
    assert_valid_spirv(fused)
    # The float32 path, and float64 only on its branch for rare operands.
    assert "@llvm.fma.f32" in fused.llvm_ir and "br i1" in fused.llvm_ir
    assert "@llvm.fma.f32" not in plain.llvm_ir and "fdiv double" in plain.llvm_ir
    with config.overriding(NUMBA_VULKAN_CACHE="0"):
        root = nv.jit(_root).compile(SIG, target=TargetDescription(fused_fma=True))
    assert_valid_spirv(root)
    # One driver operation: its reciprocal root.
    assert "@llvm.spv.rsqrt.f32" in root.llvm_ir and "@llvm.sqrt.f32" not in root.llvm_ir
    with config.overriding(NUMBA_VULKAN_CACHE="0"):
        short = nv.jit(_root).compile(SIG, target=TargetDescription(fused_fma=True,
                                                                    nvidia_rsqrt=True))
    assert_valid_spirv(short)
    # The short sequence: two fmas where the other takes five.
    fmas = [len(re.findall(r"= (?:tail )?call [^@]*@llvm\.fma\.f32\(", compiled.llvm_ir))
            for compiled in (root, short)]
    assert fmas == [5, 2], fmas
