"""The library's correctly rounded float64 square root and division
(``codegen/mathlib/exact64.py``), which targets with a fused ``Fma`` use.

The root's rounding is right wherever it is farther than ``2**-50.3`` ULP
from a midpoint between two floats (the module's error bound); the inputs
nearer one are few, and :func:`hard_cases` lists them all (to ``2**-43``
ULP). ``test_every_hard_case_on_the_host`` runs the library's own IR on
them with LLVM's JIT, whose ``fma`` and ``sqrt`` round correctly, with every
seed within the 2 ULP Vulkan allows the driver's ``InverseSqrt`` (of ``x``
converted to float32). The quotient is checked the same way (below).

lavapipe's ``Fma`` rounds twice, so its kernels keep the driver's ``Sqrt``
and ``OpFDiv``; the other tests force the library's path onto it to check
the compiled kernel, also with its seed 2 ULP off either way. References
are exact: integer square roots of the scaled inputs, integer quotients.
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
from numba_vulkan.codegen import legalize, pipeline
from numba_vulkan.codegen.mathlib import dsl, exact64, library
from numba_vulkan.llvmir import ir as llvmir
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


def _seed(root):
    """IR of ``@seed``, the host's stand-in for the driver's float32
    reciprocal root (``root``) or reciprocal: the float32 nearest the exact
    value, moved ``@offset`` steps."""
    operand = "%root" if root else "%wide"
    take_root = "  %root = call double @llvm.sqrt.f64(double %wide)\n" if root else ""
    return f"""
@offset = global i32 0
define float @seed(float %f) {{
  %wide = fpext float %f to double
{take_root}  %reciprocal = fdiv double 1.0, {operand}
  %nearest = fptrunc double %reciprocal to float
  %bits = bitcast float %nearest to i32
  %offset = load i32, ptr @offset
  %off = add i32 %bits, %offset
  %seed = bitcast i32 %off to float
  ret float %seed
}}
"""


@pytest.fixture(scope="module")
def host_sqrt():
    """``(sqrt, offset)``: the library's float64 square root compiled for the
    host, its seed the float32 nearest ``1/sqrt(f)`` (``f`` the float32 of
    ``x``) plus ``offset.value`` ULP."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    text, _ = library.module(frozenset({exact64.SQRT}))
    text = re.sub(r"declare float @llvm\.spv\.rsqrt\.f32\(.*\)\n", "", text)
    text = text.replace("@llvm.spv.rsqrt.f32", "@seed") + _seed(root=True)
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
    return "float64" not in job.target.narrowed


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


def test_a_fused_target_takes_the_library_root_fastmath_too_and_others_the_drivers(cache_dir):
    kernel = nv.jit(_root)
    fast = nv.jit(fastmath=True)(_root)
    with config.overriding(NUMBA_VULKAN_CACHE="0"):
        fused = kernel.compile(SIG, target=TargetDescription(fused_fma=True))
        plain = kernel.compile(SIG, target=TargetDescription())
        approximate = fast.compile(SIG, target=TargetDescription(fused_fma=True))
    # The library's root (with fastmath too: it is faster than the
    # driver's), and the driver's only on its branch for rare operands.
    for library in (fused, approximate):
        assert_valid_spirv(library)
        assert "@llvm.spv.rsqrt.f32" in library.llvm_ir and "br i1" in library.llvm_ir
        assert "InverseSqrt" in library.disassemble() and "Sqrt" in library.disassemble()
        # The seed: x converted to float32 (one conversion).
        assert library.disassemble().count("OpFConvert") == 1
    assert "@llvm.spv.rsqrt.f32" not in plain.llvm_ir
    assert "@llvm.sqrt.f64" in plain.llvm_ir


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


# --- division ----------------------------------------------------------------------------------
#
# ``exact64.divide`` is correctly rounded by Markstein's theorems wherever its
# seed check passes (the module's argument); these tests run its IR on the host
# (LLVM's JIT: fma rounds once) on the quotients nearest midpoints, the divisors
# whose reciprocals are nearest midpoints, and random pairs, with every seed the
# driver may give, against exact references; then the compiled kernel on
# lavapipe (its fma emulated) with its seed off as far as Vulkan allows.

DIV_SIG = "void(float64[::1], float64[::1], float64[::1])"


def _divide(a, b, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = a[i] / b[i]


def exact_divide(a, b):
    """``a / b`` correctly rounded, for finite ``a`` and finite nonzero ``b``
    (Python's integer division rounds correctly)."""
    n1, d1 = a.as_integer_ratio()
    n2, d2 = b.as_integer_ratio()
    sign = math.copysign(1.0, a) * math.copysign(1.0, b)
    try:
        return math.copysign((abs(n1) * d2) / (d1 * abs(n2)), sign)
    except OverflowError:
        return math.copysign(math.inf, sign)


def _check_divisions(a, b, out, want):
    ok = (out.view(np.int64) == want.view(np.int64)) | (np.isnan(out) & np.isnan(want))
    assert ok.all(), [(x.hex(), y.hex(), o.hex(), w.hex()) for x, y, o, w in
                      zip(a[~ok][:5], b[~ok][:5], out[~ok][:5], want[~ok][:5])]


def quotient_near_midpoint(rng, b, d):
    """An ``A`` in ``[2**52, 2**53)`` whose quotient by the odd ``b`` is
    ``d / (2 b)`` ULP from a midpoint between two floats (``d`` odd), or None:
    ``2**k A = b (2 Q + 1) + d`` with ``2 Q + 1`` in ``[2**53, 2**54)``, solved
    modulo ``2**k`` (``b`` is invertible) for a random ``k`` that can fit."""
    k = b.bit_length() + int(rng.integers(0, 2))
    mod = 1 << k
    n = -d * pow(b, -1, mod) % mod
    if mod < 1 << 54:  # n + j mod in [2**53, 2**54) for a random j
        low, high = -(-((1 << 53) - n) // mod), ((1 << 54) - 1 - n) // mod
        n += int(rng.integers(low, high + 1)) * mod
    a, rest = divmod(b * n + d, mod)
    if rest == 0 and 1 << 52 <= a < 1 << 53 and 1 << 53 <= n < 1 << 54:
        return a
    return None


def quotients_near_midpoints(rng, count, d_max=64):
    """``(A, B)`` integer pairs, ``A`` in ``[2**52, 2**53)`` and ``B`` odd of 8
    to 53 bits, whose quotient is within ``d_max / (2 B)`` ULP of a midpoint;
    half of them the nearest (53-bit ``B``, ``d = -+1``), and a quarter of
    those with the divisors of :func:`divisors_near_reciprocal_midpoints`."""
    out = []
    divisors = divisors_near_reciprocal_midpoints(rng, count // 4 + 1)
    while len(out) < count:
        if len(out) % 2 == 0:
            length = int(rng.integers(8, 54))
            b = int(rng.integers(1 << (length - 1), 1 << length)) | 1
            d = 2 * int(rng.integers(-d_max // 2, d_max // 2)) + 1
        else:
            b = divisors[len(out) // 4] if len(out) % 4 == 1 else \
                int(rng.integers(1 << 52, 1 << 53)) | 1
            d = int(rng.choice([-1, 1]))
        a = quotient_near_midpoint(rng, b, d)
        if a is not None:
            out.append((a, b))
    return out


def divisors_near_reciprocal_midpoints(rng, count):
    """Odd ``B`` in the top ``2**-5`` of ``[2**52, 2**53)`` whose reciprocal
    is within ``2**-5`` ULP below a midpoint: there ``y`` before Markstein's
    step may be the neighbour above, and a quotient nearest a midpoint then
    needs that step (the sequence without it fails on some)."""
    out = []
    while len(out) < count:
        b = int(rng.integers((1 << 53) - (1 << 48), 1 << 53)) | 1
        if 0.5 - 2.0 ** -5 < (1 << 105) % b / b < 0.5:
            out.append(b)
    return out


#: The prime factors of 2**105 -+ 1 and 2**106 -+ 1: their divisors ``B`` in
#: ``[2**52, 2**53)`` (2**53 - 1 among them) are the significands whose
#: reciprocals lie nearest midpoints, ``1 / (2 B)`` ULP away.
_FACTORS = {2 ** 105 - 1: [7, 7, 31, 71, 127, 151, 337, 29191, 106681, 122921, 152041],
            2 ** 105 + 1: [3, 3, 11, 43, 211, 281, 331, 5419, 86171, 664441, 1564921],
            2 ** 106 - 1: [3, 107, 6361, 69431, 20394401, 28059810762433],
            2 ** 106 + 1: [5, 15358129, 586477649, 1801439824104653]}


def reciprocals_near_midpoints():
    out = set()
    for n, primes in _FACTORS.items():
        assert math.prod(primes) == n
        divisors = {1}
        for p in primes:
            divisors |= {d * p for d in divisors}
        out |= {d for d in divisors if 1 << 52 <= d < 1 << 53}
    return sorted(out)


def test_hard_divisions_are_near_midpoints():
    rng = np.random.default_rng(0)
    for a, b in quotients_near_midpoints(rng, 200, d_max=8):
        x, y = a / 2 ** 52, b / 2 ** (b.bit_length() - 1)
        assert x == a / 2 ** 52 and y * 2 ** (b.bit_length() - 1) == b
        q = exact_divide(x, y)
        # 2 (x / y) / ulp(q) is an odd integer but for at most 8 / b.
        ulp = math.ulp(q)
        n1, d1 = x.as_integer_ratio()
        n2, d2 = y.as_integer_ratio()
        u1, u2 = ulp.as_integer_ratio()
        twice = 2 * n1 * d2 * u2, d1 * n2 * u1  # 2 x / (y ulp) as a fraction
        nearest = (2 * twice[0] + twice[1]) // (2 * twice[1])
        assert nearest % 2 == 1 and abs(twice[0] - nearest * twice[1]) * b <= 8 * twice[1]
    assert len(reciprocals_near_midpoints()) == 64


def _special_divisors():
    """Significands in ``[1, 2)`` that stress the reciprocal: all ones, just
    above and below 1, and those whose reciprocals lie nearest midpoints."""
    ones = [2.0 - k * 2.0 ** -52 for k in range(1, 65)]
    above = [1.0 + k * 2.0 ** -52 for k in range(0, 65)]
    scaled = [b / 2.0 ** 52 for b in reciprocals_near_midpoints()]
    return ones + above + scaled + [1.5, 1.25, 1.75, 1.0 + 2.0 ** -26, 2.0 - 2.0 ** -26]


def _host_division_cases(rng, count=20000):
    """``(a, b)`` arrays on the fast path's whole range: ``count`` quotients
    nearest midpoints and the special divisors, each with random and special
    numerators, signs, and exponents (quotients to ``2**-820 .. 2**1010``)."""
    pairs = [(a / 2 ** 52, b / 2 ** (b.bit_length() - 1))
             for a, b in quotients_near_midpoints(rng, count)]
    special_a = [1.0, 2.0 - 2.0 ** -52, 1.0 + 2.0 ** -52, 1.5]
    for b in _special_divisors():
        pairs += [(a, b) for a in special_a + list(rng.uniform(1, 2, 24))]
        pairs.append((b, b))
    a, b = np.array(pairs).T
    n = a.size
    eb = rng.integers(-126, 126, n)
    # a's exponent within -960 .. 1020.
    eq = rng.integers(np.maximum(-820, -960 - eb), np.minimum(1010, 1020 - eb) + 1)
    sign_a, sign_b = rng.choice([-1.0, 1.0], (2, n))
    return sign_a * np.ldexp(a, eq + eb), sign_b * np.ldexp(b, eb)


def _host_division(emulated_fma=False):
    """``(divide, offset, engine)``: ``divide(a, b) -> (quotients, slow)``, the
    library's float64 division compiled for the host over arrays, its seed the
    float32 nearest ``1 / f`` (``f`` the float32 of ``|b|``) plus
    ``offset.value`` ULP; ``slow`` counts the quotients that took the driver's
    division. With ``emulated_fma``, its fma emulated as on lavapipe
    (``codegen/legalize.py``)."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    text, _ = library.module(frozenset({exact64.DIVIDE}))
    text, seeds = re.subn(r"fdiv float 0x3ff0000000000000, (%[\w.]+), !nv\.libclc\.own !\d+",
                          r"call float @seed(float \1)", text)
    text, slow = re.subn(r"= fdiv double (%[\w.]+), (%[\w.]+)",
                         r"= call double @slow(double \1, double \2)", text)
    assert seeds == 1 and slow == 1
    text += _seed(root=False) + f"""
@slow_count = global i64 0
define double @slow(double %a, double %b) {{
  %q = fdiv double %a, %b
  %n = load i64, ptr @slow_count
  %n1 = add i64 %n, 1
  store i64 %n1, ptr @slow_count
  ret double %q
}}
define void @run(ptr %pa, ptr %pb, ptr %po, i64 %n) {{
entry:
  %empty = icmp eq i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %ea = getelementptr double, ptr %pa, i64 %i
  %a = load double, ptr %ea
  %eb = getelementptr double, ptr %pb, i64 %i
  %b = load double, ptr %eb
  %q = call double @{library.symbol(exact64.DIVIDE)}(double %a, double %b)
  %eo = getelementptr double, ptr %po, i64 %i
  store double %q, ptr %eo
  %next = add i64 %i, 1
  %more = icmp ult i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""
    if emulated_fma:
        model = llvmir.parse(text)
        legalize.legalize(model)
        text = str(model)
        assert "call double @llvm.fma" not in text
    module = llvm.parse_assembly(text)
    module.verify()
    machine = llvm.Target.from_default_triple().create_target_machine(opt=0)
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    run = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                           ctypes.c_int64)(engine.get_function_address("run"))
    offset = ctypes.c_int32.from_address(engine.get_global_value_address("offset"))
    count = ctypes.c_int64.from_address(engine.get_global_value_address("slow_count"))

    def divide(a, b):
        a, b = np.ascontiguousarray(a, np.float64), np.ascontiguousarray(b, np.float64)
        out = np.empty_like(a)
        count.value = 0
        run(a.ctypes.data, b.ctypes.data, out.ctypes.data, a.size)
        return out, count.value
    return divide, offset, engine


@pytest.fixture(scope="module")
def host_divide():
    """``(divide, offset)`` of :func:`_host_division`."""
    divide, offset, engine = _host_division()
    yield divide, offset
    del engine


def test_hard_divisions_on_the_host(host_divide):
    divide, offset = host_divide
    a, b = _host_division_cases(np.random.default_rng(1))
    want = np.array([exact_divide(x, y) for x, y in zip(a.tolist(), b.tolist())])
    # Seeds up to 7 steps off (Vulkan's 2.5 ULP is 5 below a power of two)
    # take the fast path; those farther off may take the driver's.
    for off in (-64, -16, -9, -8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 64):
        offset.value = off
        out, slow = divide(a, b)
        _check_divisions(a, b, out, want)
        assert slow == 0 or abs(off) > 7, off


def test_random_divisions_on_the_host(host_divide):
    divide, offset = host_divide
    rng = np.random.default_rng(2)
    n = 1 << 20
    # Log-uniform over every finite exponent: most on the fast path, the
    # rest (and where either check fails) on the driver's.
    a = rng.choice([-1.0, 1.0], n) * np.ldexp(rng.uniform(1, 2, n), rng.integers(-1022, 1024, n))
    b = rng.choice([-1.0, 1.0], n) * np.ldexp(rng.uniform(1, 2, n),
                                               np.where(rng.integers(0, 4, n) > 0,
                                                        rng.integers(-126, 127, n),
                                                        rng.integers(-1022, 1024, n)))
    want = np.array([exact_divide(x, y) for x, y in zip(a.tolist(), b.tolist())])
    for off in range(-2, 3):
        offset.value = off
        out, slow = divide(a, b)
        _check_divisions(a, b, out, want)
        assert slow < n // 2, slow


@pytest.fixture(params=[0, -2, 2], ids=["seed", "seed-2ulp", "seed+2ulp"])
def reciprocal_error(request, monkeypatch):
    """The driver's float32 reciprocal ``request.param`` ULP off."""
    offset = request.param
    if offset:
        driver_divide = dsl.Function.approximate_divide

        def off(m, a, b):
            q = driver_divide(m, a, b)
            return m.from_bits(m.bits(q) + offset, dsl.F32) if q.type == dsl.F32 else q
        monkeypatch.setattr(dsl.Function, "approximate_divide", off)
    library.module.cache_clear()
    yield offset
    library.module.cache_clear()


def _run_divide(a, b, function=_divide):
    out = np.zeros_like(a)
    kernel = nv.jit(function)
    kernel[(a.size + 1023) // 1024, 1024](a, b, out)
    # The library's division ran, not lavapipe's own: its float32 seed.
    assert "fdiv float" in kernel.compile(DIV_SIG).llvm_ir
    return out


def test_divisions_on_lavapipe(float64_path, reciprocal_error):
    rng = np.random.default_rng(7 + reciprocal_error)
    n = 1 << 14
    # Log-uniform: divisors mostly on the fast path's range, some beyond.
    a = rng.choice([-1.0, 1.0], n) * np.ldexp(rng.uniform(1, 2, n), rng.integers(-1022, 1024, n))
    b = rng.choice([-1.0, 1.0], n) * np.ldexp(
        rng.uniform(1, 2, n), np.where(rng.integers(0, 4, n) > 0, rng.integers(-130, 130, n),
                                       rng.integers(-1022, 1024, n)))
    out = _run_divide(a, b)
    _check_divisions(a, b, out, np.array([exact_divide(x, y) for x, y in
                                          zip(a.tolist(), b.tolist())]))


def test_hard_divisions_on_lavapipe(float64_path):
    # lavapipe's emulated fma is exact where the residuals need it, but its
    # own rounding may be an ULP off where the exact result lies nearest a
    # midpoint, which is where these quotients' last corrections lie: the
    # kernel gives what the library's IR gives on the host with the same
    # emulation (within an ULP of exact), and the host with a true fma
    # rounds every one correctly (test_hard_divisions_on_the_host).
    from numba_vulkan.runtime.device import current_device
    if current_device().info.target().fused_fma:
        pytest.skip("the device's fma rounds once: its quotients are the host's true-fma ones")
    a, b = _host_division_cases(np.random.default_rng(10))
    keep = np.random.default_rng(11).permutation(a.size)[:1 << 13]
    a, b = a[keep], b[keep]
    out = _run_divide(a, b)
    divide, offset, engine = _host_division(emulated_fma=True)
    emulated, slow = divide(a, b)
    del engine
    _check_divisions(a, b, out, emulated)
    want = np.array([exact_divide(x, y) for x, y in zip(a.tolist(), b.tolist())])
    assert (np.abs(emulated.view(np.int64) - want.view(np.int64)) <= 1).all() and slow == 0


#: Signed zeros, infinities, NaNs, subnormals, the fast path's ends, and
#: ordinary numbers: their every quotient, bit for bit.
DIV_SPECIAL = [0.0, math.inf, math.nan, 1.0, 3.0, 1.5, 5e-324, 1e-310, 2.0 ** -1022,
               2.0 ** -830, 2.0 ** 1017, 2.0 ** -128, 2.0 ** -126, 2.0 ** 126, 2.0 ** 127,
               1e-300, 1e300, 1e-30, 1e30]
DIV_SPECIAL += [v * (1 + 2.0 ** -52) for v in DIV_SPECIAL[3:]]


def _special_pairs(values):
    values = np.array(values)
    values = np.concatenate([values, -values])
    return (v.ravel() for v in np.meshgrid(values, values))


def test_division_special_values_on_the_host(host_divide):
    divide, offset = host_divide
    offset.value = 0
    # The largest floats and the significands of all ones too.
    extremes = [1.7976931348623157e308, 8.98846567431158e307, 2.0 - 2.0 ** -52,
                2.0 ** 126 * (1 - 2.0 ** -53), 2.0 ** -830 * (1 - 2.0 ** -53)]
    a, b = _special_pairs(DIV_SPECIAL + extremes)
    out, slow = divide(a, b)
    with np.errstate(all="ignore"):
        _check_divisions(a, b, out, a / b)


def test_division_special_values(float64_path):
    # Not the largest numerators nor divisors of all ones: lavapipe's fma
    # emulation overflows in fma(-b, q, a) for a near the largest float, and
    # rounds twice in the steps that quotients by them need exact (the host
    # test has them).
    a, b = _special_pairs(DIV_SPECIAL + [1.7976931348623157e308])
    keep = np.abs(a) < 1e308
    a, b = a[keep], b[keep]
    out = _run_divide(a, b)
    with np.errstate(all="ignore"):
        _check_divisions(a, b, out, a / b)


def _reciprocal(a, b, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = 1.0 / b[i]


def _by_constant(a, b, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = a[i] / 3.0


def test_reciprocals_on_lavapipe(float64_path):
    rng = np.random.default_rng(8)
    b = rng.choice([-1.0, 1.0], 4096) * np.ldexp(rng.uniform(1, 2, 4096),
                                                 rng.integers(-140, 140, 4096))
    out = _run_divide(np.ones_like(b), b, _reciprocal)
    _check_divisions(b, b, out, 1.0 / b)


def test_a_fused_target_takes_the_library_division_and_others_the_drivers(cache_dir):
    def compiled(function, fastmath=False, **target):
        with config.overriding(NUMBA_VULKAN_CACHE="0"):
            return nv.jit(fastmath=fastmath)(function).compile(
                DIV_SIG, target=TargetDescription(**target))
    for fused in (compiled(_divide, fused_fma=True), compiled(_divide, True, fused_fma=True)):
        assert_valid_spirv(fused)
        # The seed: one conversion and the driver's float32 reciprocal; the
        # driver's float64 division only on the branch for rare operands.
        text = fused.disassemble()
        assert text.count("OpFConvert") == 1 and text.count("OpFDiv %float") == 1
        assert text.count("OpFDiv %double") == 1 and "br i1" in fused.llvm_ir
    for other in (compiled(_divide, fused_fma=False), compiled(_by_constant, fused_fma=True)):
        assert "fdiv float" not in other.llvm_ir
        assert re.search(r"fdiv (?:[a-z]+ )*double", other.llvm_ir)
    reciprocal = compiled(_reciprocal, fused_fma=True)
    assert_valid_spirv(reciprocal)
    assert "fdiv float" in reciprocal.llvm_ir


def test_the_division_benchmark_variant(float64_path):
    # benchmarks/bench_variants.py's driver_div64: the driver's division.
    from benchmarks import bench_variants
    rng = np.random.default_rng(9)
    a, b = np.ldexp(rng.uniform(-2, 2, (2, 4096)), rng.integers(-200, 200, (2, 4096)))
    kernel = nv.jit(_divide)
    out = np.zeros_like(a)
    with bench_variants.active("driver_div64"):
        kernel[(a.size + 1023) // 1024, 1024](a, b, out)
        fused = kernel.compile(DIV_SIG, target=TargetDescription(fused_fma=True))
    _check_divisions(a, b, out, a / b)
    assert_valid_spirv(fused)
    assert "fdiv float" not in fused.llvm_ir and "OpFDiv %double" in fused.disassemble()


def _sweep(argv=None):
    """The division's host check at scale, offline: ``python -m
    tests.codegen.mathlib.test_exact64 [--pairs N] [--hard N] [--seed S]``
    runs the library's IR (true fma) on ``N`` random pairs and ``N`` hard
    ones, in chunks, with seeds 5 steps either side of the nearest float32,
    against exact quotients."""
    import argparse
    import time
    parser = argparse.ArgumentParser(description=_sweep.__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=10 ** 7)
    parser.add_argument("--hard", type=int, default=10 ** 6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    divide, offset, engine = _host_division()
    rng = np.random.default_rng(args.seed)
    start, checked, chunk = time.time(), 0, 1 << 18
    for kind, total in (("hard", args.hard), ("random", args.pairs)):
        done = 0
        while done < total:
            n = min(chunk, total - done)
            if kind == "hard":
                a, b = _host_division_cases(rng, count=n)
            else:
                a = rng.choice([-1.0, 1.0], n) * np.ldexp(rng.uniform(1, 2, n),
                                                          rng.integers(-1022, 1024, n))
                b = rng.choice([-1.0, 1.0], n) * np.ldexp(rng.uniform(1, 2, n),
                                                          rng.integers(-130, 130, n))
            want = np.array([exact_divide(x, y) for x, y in zip(a.tolist(), b.tolist())])
            for off in range(-5, 6):
                offset.value = off
                out, slow = divide(a, b)
                wrong = out != want
                if wrong.any():
                    raise SystemExit(f"{kind} seed {off:+d}: " + ", ".join(
                        f"{x.hex()} / {y.hex()}" for x, y in zip(a[wrong][:5], b[wrong][:5])))
            done += n
            checked += a.size
            print(f"{kind}: {done} pairs, seeds -5..+5, all correctly rounded "
                  f"({time.time() - start:.0f} s)", flush=True)
    del engine


if __name__ == "__main__":
    _sweep()
