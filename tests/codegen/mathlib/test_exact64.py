"""The library's correctly rounded float64 square root
(``codegen/mathlib/exact64.py``), which targets with a fused ``Fma`` use.

Its rounding is right wherever the root is farther than ``2**-50.3`` ULP
from a midpoint between two floats (the module's error bound); the inputs
nearer one are few, and :func:`hard_cases` lists them all (to ``2**-43``
ULP). ``test_every_hard_case_on_the_host`` runs the library's own IR on
them with LLVM's JIT, whose ``fma`` and ``sqrt`` round correctly, with every
seed within the 2 ULP Vulkan allows the driver's ``InverseSqrt`` (of ``x``
converted to float32).

lavapipe's ``Fma`` rounds twice, so its kernels keep the driver's ``Sqrt``;
the other tests force the library's path onto it to check the compiled
kernel, also with its seed 2 ULP off either way. References are exact:
integer square roots of the scaled inputs.
"""

import ctypes
import math
import re

import llvmlite.binding as llvm
import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.base import config
from numba_vulkan.base.target import TargetDescription
from numba_vulkan.codegen import exact, pipeline
from numba_vulkan.codegen.mathlib import dsl, exact64, library
from tests.helpers import assert_valid_spirv

SIG = "void(float64[::1], float64[::1])"


def _root(a, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = math.sqrt(a[i])


def exact_sqrt(x):
    """The correctly rounded square root of the positive float ``x``."""
    n, d = x.as_integer_ratio()
    shift = 2 * 60 + (d.bit_length() - 1) % 2  # x = (n << shift) / (d << shift)
    r = math.isqrt(n << shift)
    denominator = 1 << ((d.bit_length() - 1 + shift) // 2)
    # r has 60 bits and more beyond the 53 kept: r + 1/2 rounds as the root does.
    return r / denominator if r * r == n << shift else (2 * r + 1) / (2 * denominator)


def _odd_square_roots(c, k):
    """The odd ``n`` modulo ``2**k`` with ``n**2 = c`` (``c = 1`` modulo 8)."""
    n = 1
    for j in range(3, k):  # n**2 = c modulo 2**j: lift to 2**(j + 1)
        if (n * n - c) % (1 << (j + 1)):
            n += 1 << (j - 1)
    mod = 1 << k
    return {n % mod, -n % mod, (n + mod // 2) % mod, (mod // 2 - n) % mod}


def hard_cases(k_max=4096):
    """Every ``x`` in ``[1, 4)`` whose square root is within ``k_max * 2**-55``
    ULP of a midpoint ``n 2**-53`` (``n`` odd): ``x 2**106 = n**2 + K`` with
    ``|K| <= k_max``, a multiple of ``2**54`` (``x < 2``) or ``2**55``."""
    out = []
    for k in range(-k_max, k_max + 1):
        if -k % 8 != 1:  # odd squares are 1 modulo 8
            continue
        for bits, low, high in ((54, 1, 2), (55, 2, 4)):
            for n in _odd_square_roots(-k % (1 << bits), bits):
                x = (n * n + k) / 2 ** 106
                if 1 << 53 <= n < 1 << 54 and low <= x < high:
                    assert x * 2 ** 106 == n * n + k
                    out.append(x)
    return sorted(out)


def test_hard_cases_are_near_midpoints():
    for x in hard_cases(64):
        scaled = int(x * 2 ** 106)
        n = math.isqrt(scaled)
        n += scaled - n * n > n  # the integer nearest sqrt(scaled)
        assert n % 2 == 1 and abs(scaled - n * n) <= 64, x.hex()
    assert len(hard_cases()) == 1458


@pytest.fixture(scope="module")
def host_sqrt():
    """``(sqrt, offset)``: the library's float64 square root compiled for the
    host, its seed the float32 nearest ``1/sqrt(f)`` (``f`` the float32 of
    ``x``) plus ``offset.value`` ULP."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    text, _ = library.module(frozenset({exact64.SQRT}))
    text = re.sub(r"declare float @llvm\.spv\.rsqrt\.f32\(.*\)\n", "", text)
    text = text.replace("@llvm.spv.rsqrt.f32", "@seed") + """
@offset = global i32 0
define float @seed(float %f) {
  %wide = fpext float %f to double
  %root = call double @llvm.sqrt.f64(double %wide)
  %reciprocal = fdiv double 1.0, %root
  %nearest = fptrunc double %reciprocal to float
  %bits = bitcast float %nearest to i32
  %offset = load i32, ptr @offset
  %off = add i32 %bits, %offset
  %seed = bitcast i32 %off to float
  ret float %seed
}
"""
    module = llvm.parse_assembly(text)
    module.verify()
    machine = llvm.Target.from_default_triple().create_target_machine(opt=0)
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    address = engine.get_function_address(library.symbol(exact64.SQRT))
    sqrt = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(address)
    offset = ctypes.c_int32.from_address(engine.get_global_value_address("offset"))
    yield sqrt, offset
    del engine


def test_every_hard_case_on_the_host(host_sqrt):
    sqrt, offset = host_sqrt
    # Each step scales by 4**k exactly: [1, 4) stands for every binade of
    # the fast path, 2**-120 .. 2**120 (its ends here).
    x = [v * 4.0 ** k for v in hard_cases() for k in (0, -60, 59)]
    want = [exact_sqrt(v) for v in x]
    # The host's seed is the nearest float32: these cover every one within
    # 2 ULP (4 steps below a power of two).
    for off in range(-6, 7):
        offset.value = off
        wrong = [v.hex() for v, w in zip(x, want) if sqrt(v) != w]
        assert not wrong, (off, wrong[:5])


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


def _binade_ends():
    powers = np.ldexp(1.0, np.arange(-1022, 1024))
    return np.concatenate([powers, np.nextafter(powers, 0), np.nextafter(powers, np.inf)])


def test_random_and_hard_inputs(float64_path, seed_error):
    rng = np.random.default_rng(3 + seed_error)
    # Every exponent of the library's path, and beyond (the driver's).
    x = np.ldexp(rng.uniform(1, 2, 1 << 15),
                 np.concatenate([rng.integers(-120, 120, 1 << 14),
                                 rng.integers(-1022, 1024, 1 << 14)]))
    hard = np.array(hard_cases())
    hard = np.ldexp(hard, 2 * rng.integers(-60, 60, hard.size))
    x = np.concatenate([x, hard, _binade_ends()])
    out = _run(x)
    _check(x, out, np.array([exact_sqrt(float(v)) for v in x]))


SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, -1.0, -5e-324, -1e300, 5e-324, 1e-310,
           2.2250738585072014e-308, 1.7976931348623157e308, 2.0 ** -120, 2.0 ** 120, 1.0,
           4.0, 2.0, 0.25, 9.0, 1e-300, 1e300, 1e-38, 1e38]


def test_special_values_and_the_fast_range_ends(float64_path):
    x = np.array(SPECIAL + [np.nextafter(2.0 ** -120, 0), np.nextafter(2.0 ** 120, 0)])
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
    # The seed: x converted to float32 (one conversion).
    assert fused.disassemble().count("OpFConvert") == 1
    for other in (plain, approximate):
        assert "@llvm.spv.rsqrt.f32" not in other.llvm_ir
        assert "@llvm.sqrt.f64" in other.llvm_ir


@pytest.mark.parametrize("variant", ["sqrt64_convert", "sqrt64_integer", "driver_sqrt64"])
def test_the_benchmark_variants(float64_path, variant):
    # benchmarks/bench_variants.py's other seeds, and the driver's root.
    from benchmarks import bench_variants
    rng = np.random.default_rng(5)
    x = np.concatenate([np.array(hard_cases()) * 4.0 ** rng.integers(-60, 60),
                        np.ldexp(rng.uniform(1, 2, 4096), rng.integers(-1022, 1024, 4096))])
    kernel = nv.jit(_root)
    out = np.zeros_like(x)
    with bench_variants.active(variant):
        kernel[(x.size + 1023) // 1024, 1024](x, out)
        fused = kernel.compile(SIG, target=TargetDescription(fused_fma=True))
    _check(x, out, np.array([exact_sqrt(float(v)) for v in x]))
    assert_valid_spirv(fused)
    assert ("InverseSqrt" in fused.disassemble()) == variant.startswith("sqrt64_")
    assert ("OpFConvert" in fused.disassemble()) == (variant == "sqrt64_convert")
