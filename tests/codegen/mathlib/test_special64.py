"""float64 erf (codegen/mathlib/special64.py) and tanh (hyperbolic.py) on
the device, against mpmath and the special values of Python's math."""

import math

import numpy as np
import pytest

from numba_vulkan.codegen import mathlib
from tests.codegen.mathlib import accuracy

pytest.importorskip("mpmath")

SPECIALS = np.array([0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324,
                     2.2250738585072014e-308, 1e-300, 1.7976931348623157e308,
                     -1.7976931348623157e308])


def _worst(name, x):
    got = accuracy.run(name, np.float64, [x])
    errors = accuracy.errors(name, np.float64, [x], got)
    k = int(np.argmax(errors))
    return float(errors[k]), float(x[k]), float(got[k])


def _inputs(seed, *ranges):
    """Uniform inputs in each ``(lo, hi, n)`` range, both signs."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.uniform(lo, hi, n) for lo, hi, n in ranges])
    return x * rng.choice([-1.0, 1.0], x.size)


def _assert_specials(name):
    got = accuracy.run(name, np.float64, [SPECIALS])
    want = np.array([getattr(math, name)(v) for v in SPECIALS])
    assert np.array_equal(got, want, equal_nan=True), (got, want)
    assert (np.signbit(got) == np.signbit(want))[~np.isnan(want)].all()


def test_the_library_defines_them():
    assert mathlib.provides("_Z3erfd") and mathlib.provides("_Z4tanhd")


@pytest.mark.parametrize("name", ["erf", "tanh"])
def test_special_values(name):
    _assert_specials(name)


def test_erf_within_one_ulp():
    # Both sides of the polynomial's end at 0.85, the exponential's range
    # and its end at 5.93, and tiny arguments.
    x = _inputs(11, (0, 0.85, 2000), (0.8, 0.9, 1000), (0.85, 6.0, 3000), (5.8, 6.1, 300))
    x = np.concatenate([x, 2.0 ** np.random.default_rng(12).uniform(-1074, 0, 500)])
    error, where, got = _worst("erf", x)
    assert error <= 1.0, (error, where, got)


def test_tanh_within_bound():
    # Both sides of the polynomial's end at 0.55 (codegen/mathlib/hyperbolic.py).
    x = _inputs(13, (0, 0.6, 2000), (0.5, 0.6, 1000), (0.6, 3.0, 2000), (3.0, 20.0, 1000))
    x = np.concatenate([x, 2.0 ** np.random.default_rng(14).uniform(-1074, 0, 500)])
    error, where, got = _worst("tanh", x)
    assert error <= 2.0, (error, where, got)
