"""The library's float64 exponentials and logarithms on the device.

Errors in ULPs of mpmath's exact value (``accuracy``); the worst measured
on lavapipe over 4,000 random and edge inputs a function (``python -m
tests.codegen.mathlib.accuracy exp_f64 ... --n 256000``) were: exp 0.90,
exp2 0.78, expm1 0.88, log 0.50, log2 0.49, log10 0.50, log1p 0.50. The
bound tested is 1 ULP (the documentation promises 2); these
tests pass on the H200 too.
"""

import math

import numpy as np
import pytest

from numba_vulkan.codegen import mathlib
from tests.codegen.mathlib import accuracy

NAMES = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p")

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

@pytest.mark.parametrize("name", NAMES)
def test_library_defines_it(name):
    assert mathlib.provides(f"_Z{len(name)}{name}d")


@pytest.mark.parametrize("name", NAMES)
def test_within_one_ulp(name):
    columns = accuracy.inputs(name, np.float64, 3000, seed=7)
    hard = np.array(HARD[name])
    columns = [np.concatenate([columns[0], hard, -hard])]
    got = accuracy.run(name, np.float64, columns)
    errors = accuracy.errors(name, np.float64, columns, got)
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


@pytest.mark.parametrize("name", ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p"])
def test_special_values_as_numpy(name):
    x = np.array([0.0, -0.0, math.inf, -math.inf, math.nan, -1.0, 1.0, -5e-324, 5e-324])
    got = accuracy.run(name, np.float64, [x])
    with np.errstate(all="ignore"):
        want = accuracy.FUNCTIONS[name][1](x)
    bad = ~_same(got, want)
    assert not bad.any(), list(zip(x[bad], got[bad], want[bad]))
