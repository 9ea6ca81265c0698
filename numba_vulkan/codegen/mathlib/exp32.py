"""float32 exponentials and logarithms, computed in float32.

Polynomial coefficients come from ``scripts/fit_poly.py`` (the command that
gives each is beside it); the worst errors measured are in
``tests/codegen/test_mathlib.py``.
"""

from numba_vulkan.codegen.mathlib.common import integer_to_float, power_of_two, round_multiple, scale
from numba_vulkan.codegen.mathlib.dsl import F32
from numba_vulkan.codegen.mathlib.library import define

INF = float("inf")
NAN = float("nan")

#: ln 2 as a float32 (0x3f317218) and the float32 nearest the rest.
LN2_HI = 0.693147182464599609375
LN2_LO = -1.9046542121259336e-09
LOG2E = 1.44269502162933349609375

#: (exp(r) - 1 - r) / r**2 on |r| <= ln2/2: fit_poly.py --function
#: "(exp(x) - 1 - x) / x**2" --interval -0.3466 0.3466 --degree 4
EXP_Q = (0.5, 0.16666579246520996, 0.04166673496365547, 0.008362950757145882,
         0.0013908393448218703)

#: (2 atanh(s) - 2s) / s as a polynomial in z = s**2, |s| <= 3 - 2 sqrt(2):
#: fit_poly.py --function "(2*atanh(sqrt(x)) - 2*sqrt(x))/(sqrt(x)*x)"
#: --interval 0 0.02944 --degree 3
LOG_R = (0.6666666865348816, 0.39998799562454224, 0.28674784302711487, 0.204630047082901)


def exp_reduced(m, x):
    """``(r, k)`` with ``x = k ln2 + r``, ``|r| <= ln2/2``, ``k`` an int32
    (for ``|x| <= 104``)."""
    kf, k = round_multiple(m, x, LOG2E)
    r = m.fma(-kf, LN2_HI, x)
    return m.fma(-kf, LN2_LO, r), k


@define("exp", "float")
def exp(m, x):
    clamped = m.minimum(m.maximum(x, -104.0), 104.0)
    r, k = exp_reduced(m, clamped)
    p = m.fma(r * r, m.poly(r, EXP_Q), r) + 1.0
    return m.select(m.isnan(x), x, scale(m, p, k))


def expm1_bounded(m, x):
    """``exp(x) - 1`` for ``-104 <= x <= 60`` (no NaN): ``2**k (expm1(r) + 1) - 1``
    as one fma, which keeps the relative accuracy of ``expm1(r)`` when
    ``k`` is 0 and loses nothing to cancellation otherwise."""
    r, k = exp_reduced(m, x)
    small = m.fma(r * r, m.poly(r, EXP_Q), r)
    t = power_of_two(m, m.maximum_int(k, -30), F32)
    return m.fma(t, small, t - 1.0)


@define("expm1", "float")
def expm1(m, x):
    near = expm1_bounded(m, m.minimum(m.maximum(x, -104.0), 60.0))
    # Beyond 60 the 1 is below half an ULP: exp(x) rounded once.
    far = exp(m, x)
    y = m.select(x > 60.0, far, near)
    # The sign of expm1 is x's, zeros' included.
    return m.select(m.isnan(x), x, m.copysign(y, x))


@define("log", "float")
def log(m, x):
    tiny = x < 1.1754943508222875e-38
    scaled = m.select(tiny, x * 8388608.0, x)
    bits = m.bits(scaled) - 0x3F3504F3
    k = (bits >> 23) - m.select(tiny, m.int(23), m.int(0))
    f = m.from_bits((bits & 0x7FFFFF) + 0x3F3504F3) - 1.0
    s = m.approximate_divide(f, f + 2.0)
    z = s * s
    r = z * m.poly(z, LOG_R)
    half_f2 = 0.5 * f * f
    kf = integer_to_float(m, k, F32)
    t = m.fma(s, half_f2 + r, -half_f2) + f
    y = m.fma(kf, LN2_HI, m.fma(kf, LN2_LO, t))
    y = m.select(x.eq(INF), INF, y)
    y = m.select(x.eq(0.0), -INF, y)
    return m.select(m.either(x < 0.0, m.isnan(x)), NAN, y)
