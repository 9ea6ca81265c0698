"""The library's float64 exponentials, logarithms and pow on the device.

Errors in ULPs of mpmath's exact value (``accuracy``); the worst measured
on lavapipe over 4,000 random and edge inputs a function (``python -m
tests.codegen.mathlib.accuracy exp_f64 ... --n 256000``) were: exp 0.90,
exp2 0.78, expm1 0.88, log 0.50, log2 0.49, log10 0.50, log1p 0.50; pow
0.73 over 71,000 (``pow_f64 --n 4194304 --seed 2``, a subnormal result),
0.69 on its hard cases below. The bound tested is 1 ULP (the
documentation promises 2).
"""

import math

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.base import config
from numba_vulkan.codegen import mathlib
from tests.codegen.mathlib import accuracy
from tests.helpers import assert_valid_spirv

mp = pytest.importorskip("mpmath")

NAMES = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "pow")

#: Inputs where each function's reduction or special handling changes.
HARD = {
    "exp": [709.782712893384, 709.7827128933841, -708.3964185322641, -708.4, -744.44,
            -745.1332191019411, -745.1332191019412, -745.0, 1e-300, -1e-300, 0.34657359,
            -0.34657359, 0.3465736, 1.0397207708399179, 700.0],
    "exp2": [1023.9999999999999, 1024.0, -1022.0, -1022.5, -1074.0, -1074.5, -1075.0,
             -1073.9, 0.5, -0.5, 1e-17, 1023.5],
    "expm1": [1e-17, -1e-17, 1e-300, 5e-324, 0.3465, -0.3466, 0.3467, -0.35, 0.35, 0.7,
              -0.7, 1.0397, 709.78, 709.79, -37.0, -38.0, 36.0, 37.5],
    "log": [1.0 - 2.0 ** -53, 1.0 + 2.0 ** -52, 0.7071067811865475, 0.7071067811865476,
            1.414213562373095, 1.4142135623730951, 5e-324, 1e-310, 2.2250738585072014e-308,
            1.7976931348623157e308, 0.5, 2.0, 0.35355339059327373],
    "log1p": [-0.2928932188134524, -0.2928932188134525, 0.41421356237309503,
              0.41421356237309515, 1e-300, -1e-300, 5e-324, 2.0 ** 53, 2.0 ** 53 + 2.0,
              1e308, -0.9999999999999999, 3e-17, -3e-17],
}
HARD["log2"] = HARD["log10"] = HARD["log"]

#: (x, y) where pow's result is subnormal, near overflow, or needs every bit
#: of ln x (large y, x near 1 or at the ends of the reduction's range).
POW_HARD = [(2.0, -1074.0), (2.0, -1074.5), (2.0, 1023.9999999999), (0.5, 1074.0),
            (1.0000000000000002, 3e18), (0.9999999999999999, 6e18), (1.0 + 2e-16, 1e17),
            (10.0, 308.25), (10.0, -323.5), (10.0, -307.9), (1.5, 1750.0), (0.75, 2500.0),
            (7.0, 364.0), (7.0, -382.5), (0.3, 588.0), (3.0, -678.0), (-3.0, 645.0),
            (-3.0, -677.0), (-0.5, 1073.0), (1e-300, 1.02), (5e-324, 0.5), (5e-324, -0.25),
            (1.7976931348623157e308, 0.9999), (1.3, 2707.0), (123.456, 147.0),
            (0.709, 1953.0), (-0.709, 1953.0), (-0.709, 1952.0), (0.7071067811865476, -2000.0),
            (0.7071067811865475, 2150.0), (1.4142135623730951, 1500.0), (1.414, 2000.0),
            (1.415024399624732, -2032.7795143433716), (2.0, 0.5), (0.5, 0.5), (2.0, -0.5),
            (-1e300, -1.0), (1e300, -1.0), (3.0, 2.0), (-3.0, 3.0), (-1.0000000000000002, 2e17),
            (-0.9999999999999999, 3e18 + 1024.0)]


def _log2(x):
    """log2(x) from mpmath, so that the inputs built on it are the same on
    every host."""
    with mp.workdps(30):
        return np.array([float(mp.log(mp.mpf(float(v)), 2)) for v in x])


def _pow_hard(n, seed):
    """``n`` pairs of each kind pow finds hard, seeded: ``|x|`` at the
    reduction's ends (near sqrt(1/2) and sqrt(2) times a power of two),
    near a power of two and near 1, each with ``|y log2 x|`` in [500, 1075]
    (results near overflow, near underflow and subnormal); any ``x`` with
    results at the ends of the range; negative ``x`` with integral ``y``
    (squares, cubes, large odd and even powers)."""
    rng = np.random.default_rng(seed)

    def signs():
        return rng.choice([-1.0, 1.0], n)

    def large():
        return signs() * rng.uniform(500.0, 1075.0, n)

    def powers_of_two(lo, hi):
        return 2.0 ** rng.integers(lo, hi, n).astype(float)

    ends = rng.choice([0.7071067811865476, 1.4142135623730951], n) * (
        1.0 + signs() * np.where(rng.random(n) < 0.5, rng.integers(0, 8, n) * 2.0 ** -53,
                                 2.0 ** rng.uniform(-52, -8, n)))
    ends *= np.where(rng.random(n) < 0.75, 1.0, powers_of_two(-1060, 1023))
    twos = powers_of_two(-1022, 1024) * (1.0 + signs() * 2.0 ** rng.uniform(-53, -20, n))
    ones = 1.0 + signs() * np.where(rng.random(n) < 0.5, 1.0 / powers_of_two(1, 53),
                                    2.0 ** rng.uniform(-53, -1, n))
    ones[ones == 1.0] = 1.0 + 2.0 ** -52
    anywhere = 2.0 ** rng.uniform(-1074, 1024, n)
    extreme = np.where(rng.random(n) < 0.5, rng.uniform(1000, 1024.5, n),
                       rng.uniform(-1076, -1000, n))
    x = np.concatenate([ends, twos, ones, anywhere])
    y = np.concatenate([large(), large(), large(), extreme]) / _log2(x)
    # Negative x, integral y: squares and cubes, then large powers.
    base = signs() * 2.0 ** rng.uniform(-300, 300, n)
    small = rng.choice([2.0, 3.0, -2.0, -3.0, 4.0, 5.0, -5.0], n)
    odd = -2.0 ** rng.uniform(-12, 12, n)
    many = np.round(rng.uniform(-1075, 1024, n) / _log2(-odd))
    hard_x, hard_y = (np.array(c) for c in zip(*POW_HARD))
    return np.concatenate([x, base, odd, hard_x]), np.concatenate([y, small, many, hard_y])


@pytest.mark.parametrize("name", NAMES)
def test_library_defines_it(name):
    arity = 2 if name == "pow" else 1
    assert mathlib.provides(f"_Z{len(name)}{name}{'d' * arity}")


@pytest.mark.parametrize("name", NAMES)
def test_within_one_ulp(name):
    columns = accuracy.inputs(name, np.float64, 3000, seed=7)
    if name == "pow":
        x, y = _pow_hard(400, seed=11)
        columns = [np.concatenate([columns[0], x]), np.concatenate([columns[1], y])]
    else:
        hard = np.array(HARD[name])
        columns = [np.concatenate([columns[0], hard, -hard])]
    got = accuracy.run(name, np.float64, columns)
    errors = accuracy.errors(name, np.float64, columns, got, digits=50)
    k = int(np.argmax(errors))
    assert errors[k] <= 1.0, (name, [float(c[k]) for c in columns], float(got[k]), errors[k])


def test_exp_range_ends():
    x = np.array([709.782712893384, 709.7827128933841, 709.79, -745.1332191019411,
                  -745.1332191019412, -745.14, 1000.0, -1000.0, math.inf, -math.inf])
    got = accuracy.run("exp", np.float64, [x])
    want = [1.7976931348622732e308, math.inf, math.inf, 5e-324, 0.0, 0.0, math.inf, 0.0,
            math.inf, 0.0]
    np.testing.assert_array_equal(got, want)


def _same(got, want):
    """Equal as bits where NumPy's result is NaN (any NaN), infinite or zero;
    within an ULP of it elsewhere."""
    ordinary = np.isfinite(want) & (want != 0)
    with np.errstate(all="ignore"):
        close = np.abs(got - want) <= np.spacing(np.abs(want))
    return np.where(ordinary, close & (np.sign(got) == np.sign(want)),
                    (np.isnan(got) & np.isnan(want)) | (got.view(np.int64) == want.view(np.int64)))


def test_pow_special_values_as_numpy():
    """C99's special cases (as NumPy's ``np.power`` gives them): zeros,
    infinities and NaN of either argument, negative x with integral and
    other y, x = 1 with NaN y, y = 0 with NaN x, -1 to infinite powers,
    signed zeros and infinities from odd powers, overflow and underflow."""
    edges = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5, 0.25, 4.0,
                      -1.5, 7.0, -7.0, math.inf, -math.inf, math.nan, -math.nan, 5e-324, -5e-324,
                      1e-310, 2.2250738585072014e-308, -2.2250738585072014e-308, 1e-300, -1e-200,
                      1e300, -1e300, 1.7976931348623157e308, -1.7976931348623157e308, 2.0 ** 53,
                      -(2.0 ** 53) - 2, 2.0 ** 53 + 1, -(2.0 ** 53) + 1, 2.0 ** 64, 1e20, -1e20,
                      1024.0, -1075.0, 0.9999999999999999, 1.0000000000000002,
                      -0.9999999999999999, -1.0000000000000002])
    x, y = (a.ravel() for a in np.meshgrid(edges, edges))
    got = accuracy.run("pow", np.float64, [x, y])
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    bad = ~_same(got, want)
    assert not bad.any(), list(zip(x[bad], y[bad], got[bad], want[bad]))[:10]
    # Bit for bit where NumPy's result is NaN, infinite or zero, or the
    # exact power is a float64.
    with mp.workdps(50):
        exact = [not (math.isfinite(w) and w != 0) or
                 mp.power(mp.mpf(float(a)), mp.mpf(float(b))) == w for a, b, w in zip(x, y, want)]
    same = (got.view(np.int64) == want.view(np.int64)) | (np.isnan(got) & np.isnan(want))
    wrong = np.array(exact) & ~same
    assert not wrong.any(), list(zip(x[wrong], y[wrong], got[wrong], want[wrong]))[:10]


def test_pow_is_the_library_s_and_valid_spirv():
    """``math.pow``, ``**`` and ``np.power`` of float64 take the library's
    pow (not libclc's), and spirv-val accepts the module for a GPU's target
    (native fma) and for the device's."""
    def kernel(x, y, out):
        i = nv.global_id(0)
        if i < out.shape[0]:
            out[i] = math.pow(x[i], y[i]) + x[i] ** y[i] + np.power(x[i], y[i])
    sig = "void(float64[::1], float64[::1], float64[::1])"
    gpu = nv.TargetDescription(vulkan=(1, 3), fused_fma=True)
    with config.overriding(NUMBA_VULKAN_CACHE="0"):
        for target in (gpu, None):
            compiled = nv.jit(kernel).compile(sig, target=target)
            assert_valid_spirv(compiled)
            # The library's function, inlined (its blocks keep its name).
            assert mathlib.symbol("_Z3powdd") in compiled.llvm_ir
            assert "@_Z3powdd" not in compiled.llvm_ir
    assert mathlib.module(frozenset({"_Z3powdd"}))[1] == frozenset()


@pytest.mark.parametrize("name", ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p"])
def test_special_values_as_numpy(name):
    x = np.array([0.0, -0.0, math.inf, -math.inf, math.nan, -1.0, 1.0, -5e-324, 5e-324])
    got = accuracy.run(name, np.float64, [x])
    with np.errstate(all="ignore"):
        want = accuracy.FUNCTIONS[name][1](x)
    bad = ~_same(got, want)
    assert not bad.any(), list(zip(x[bad], got[bad], want[bad]))
