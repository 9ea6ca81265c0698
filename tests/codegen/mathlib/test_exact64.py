"""The library's correctly rounded float64 square root
(``codegen/mathlib/exact64.py``), which targets with a fused ``Fma`` use.

lavapipe's ``Fma`` rounds twice, so its kernels keep the driver's ``Sqrt``;
here the library's path is forced onto it to check the algorithm. Its
emulated fma is exact where the root's residuals need it, and its
``InverseSqrt`` is close to exact, so the seed is also run off by the 2 ULP
Vulkan allows the driver's (NVIDIA's is within that) in either direction.
References are exact: integer square roots of the scaled inputs.
"""

import math

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.base import config
from numba_vulkan.base.target import TargetDescription
from numba_vulkan.codegen import exact, pipeline
from numba_vulkan.codegen.mathlib import dsl, library
from tests.helpers import assert_valid_spirv

SIG = "void(float64[::1], float64[::1])"


def _root(a, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = math.sqrt(a[i])


def _library_path(job):
    return "float64" not in job.target.narrowed and exact.rounds_correctly(job.fastmath)


@pytest.fixture
def float64_path(cache_dir, monkeypatch):
    """Kernels compiled from here on take the library's root on lavapipe."""
    monkeypatch.setattr(pipeline, "_float64_operations", _library_path)


@pytest.fixture(params=[0, -2, 2], ids=["seed", "seed-2ulp", "seed+2ulp"])
def seed_error(request, monkeypatch):
    """The driver's reciprocal square root ``request.param`` ULP off."""
    offset = request.param
    if offset:
        exact_rsqrt = dsl.Function.approximate_rsqrt

        def off(m, x):
            return m.from_bits(m.bits(exact_rsqrt(m, x)) + offset, dsl.F32)
        monkeypatch.setattr(dsl.Function, "approximate_rsqrt", off)
    library.module.cache_clear()
    yield offset
    library.module.cache_clear()


def exact_sqrt(x):
    """The correctly rounded square root of the positive float ``x``."""
    n, d = x.as_integer_ratio()
    shift = 2 * 60 + (d.bit_length() - 1) % 2  # x = n * 2**shift / d * 2**-shift
    r = math.isqrt(n << shift)
    denominator = 1 << ((d.bit_length() - 1 + shift) // 2)
    # r has 60 bits and more beyond the 53 kept: r + 1/2 rounds as the root does.
    return r / denominator if r * r == n << shift else (2 * r + 1) / (2 * denominator)


def _run(x):
    out = np.zeros_like(x)
    kernel = nv.jit(_root)
    kernel[(x.size + 1023) // 1024, 1024](x, out)
    # The library's root ran, not lavapipe's own.
    assert "@llvm.spv.rsqrt.f32" in kernel.compile(SIG).llvm_ir
    return out


def _check(x, out, want):
    ok = (out.view(np.int64) == want.view(np.int64)) | (np.isnan(out) & np.isnan(want))
    assert ok.all(), [(a.hex(), b.hex(), c.hex()) for a, b, c in
                      zip(x[~ok][:5], out[~ok][:5], want[~ok][:5])]


def _near_midpoints(rng, n):
    """Inputs whose roots are closest to halfway between two floats: the
    squares of midpoints rounded, and their neighbours (their roots come
    within 2**-54 ULP of the midpoint), and squares of floats."""
    s = rng.integers(1 << 52, 1 << 53, n).tolist()
    q = rng.integers(-500, 450, n).tolist()
    squares = [float((2 * a + 1) ** 2) * 2.0 ** (2 * e - 2) for a, e in zip(s, q)]
    exact_squares = [float(a >> 27) ** 2 * 2.0 ** (2 * e) for a, e in zip(s, q)]
    x = np.array(squares + exact_squares)
    return np.concatenate([x, np.nextafter(x, 0), np.nextafter(x, np.inf)])


def _binade_ends():
    powers = np.ldexp(1.0, np.arange(-1022, 1024))
    return np.concatenate([powers, np.nextafter(powers, 0), np.nextafter(powers, np.inf)])


def test_random_and_hard_inputs(float64_path, seed_error):
    rng = np.random.default_rng(3 + seed_error)
    # Every exponent of the library's path and beyond (the driver's).
    x = np.ldexp(rng.uniform(1, 2, 1 << 15), rng.integers(-1022, 1024, 1 << 15))
    x = np.concatenate([x, _near_midpoints(rng, 1 << 13), _binade_ends()])
    out = _run(x)
    _check(x, out, np.array([exact_sqrt(float(v)) for v in x]))


SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, -1.0, -5e-324, -1e300, 5e-324, 1e-310,
           2.2250738585072014e-308, 1.7976931348623157e308, 2.0 ** -900, 2.0 ** 1020, 1.0,
           4.0, 2.0, 0.25, 9.0, 1e-300, 1e300]


def test_special_values_and_the_fast_range_ends(float64_path):
    x = np.array(SPECIAL + [np.nextafter(2.0 ** -900, 0), np.nextafter(2.0 ** 1020, 0)])
    out = _run(x)
    with np.errstate(invalid="ignore"):
        want = np.array([math.copysign(0.0, v) if v == 0 else
                         math.nan if v < 0 or v != v else
                         math.inf if v == math.inf else exact_sqrt(v) for v in x.tolist()])
    _check(x, out, want)


def test_a_fused_target_takes_the_library_root_and_others_the_drivers(cache_dir):
    kernel = nv.jit(_root)
    fast = nv.jit(fastmath=True)(_root)
    with config.overriding(NUMBA_VULKAN_CACHE="0"):
        fused = kernel.compile(SIG, target=TargetDescription(fused_fma=True))
        plain = kernel.compile(SIG, target=TargetDescription())
        approximate = fast.compile(SIG, target=TargetDescription(fused_fma=True))
    assert_valid_spirv(fused)
    # The library's root, and the driver's only on its branch for rare operands.
    assert "@llvm.spv.rsqrt.f32" in fused.llvm_ir and "br i1" in fused.llvm_ir
    assert "InverseSqrt" in fused.disassemble() and "Sqrt" in fused.disassemble()
    for other in (plain, approximate):
        assert "@llvm.spv.rsqrt.f32" not in other.llvm_ir
        assert "@llvm.sqrt.f64" in other.llvm_ir
