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


def exp_finite(m, x):
    """exp(x) for ``|x| <= 104`` (no NaN)."""
    r, k = exp_reduced(m, x)
    return scale(m, m.fma(r * r, m.poly(r, EXP_Q), r) + 1.0, k)


@define("exp", "float")
def exp(m, x):
    y = exp_finite(m, m.minimum(m.maximum(x, -104.0), 104.0))
    return m.select(m.isnan(x), x, y)


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


#: ln 2 with trailing zeros (15 significant bits: times an exponent of at most
#: 9 bits it is exact) and the float32 nearest the rest, for pow's logarithm.
LN2_SHORT = (0.693145751953125, 1.428606765330187e-06)
#: 2/3 as a float32 and the float32 nearest the rest.
TWO_THIRDS = (0.6666666865348816, -1.9868215517249155e-08)

#: (2 atanh(s) - 2s - 2s**3/3) / s**5 as a polynomial in z = s**2:
#: fit_poly.py --function "(2*atanh(sqrt(x)) - 2*sqrt(x) - 2*x*sqrt(x)/3)/(x*x*sqrt(x))"
#: --interval 0 0.02944 --degree 3
LOG_TAIL = (0.4000000059604645, 0.2857113182544708, 0.22240766882896423, 0.18306949734687805)


def _fast_two_sum(m, a, b):
    """``(s, e)`` with ``s + e = a + b`` exactly, for ``|a| >= |b|`` (or a = 0)."""
    total = a + b
    return total, b - (total - a)


def log_pair(m, x):
    """``(hi, lo)``: ln(x) as an unevaluated sum of two float32 values, to
    about 2**-40 of the result, for a finite positive ``x``.

    As :func:`log`, with each step's rounding error carried: ``s = f/(2+f)``
    as a sum of two (the divisor's and the quotient's errors recovered with
    fma), ``2s + 2s**3/3`` in pairs, and only the small tail ``s**5 R(s**2)``
    in plain float32.
    """
    tiny = x < 1.1754943508222875e-38
    scaled = m.select(tiny, x * 8388608.0, x)
    bits = m.bits(scaled) - 0x3F3504F3
    e = (bits >> 23) - m.select(tiny, m.int(23), m.int(0))
    f = m.from_bits((bits & 0x7FFFFF) + 0x3F3504F3) - 1.0
    d_hi, d_lo = _fast_two_sum(m, m.value(2.0), f)
    inverse = m.approximate_divide(1.0, d_hi)
    inverse = m.fma(m.fma(-d_hi, inverse, 1.0), inverse, inverse)
    s_hi = f * inverse
    s_lo = (m.fma(-s_hi, d_hi, f) - s_hi * d_lo) * inverse
    z_hi = s_hi * s_hi
    z_lo = m.fma(s_hi, s_hi, -z_hi)
    cube = s_hi * z_hi
    cube_lo = m.fma(s_hi, z_hi, -cube) + (s_hi * z_lo + 3.0 * z_hi * s_lo)
    third = cube * TWO_THIRDS[0]
    third_lo = m.fma(cube, TWO_THIRDS[0], -third) + (cube * TWO_THIRDS[1] + cube_lo * TWO_THIRDS[0])
    tail = cube * z_hi * m.poly(z_hi, LOG_TAIL)
    a_hi, a_lo = _fast_two_sum(m, 2.0 * s_hi, third)
    low = a_lo + (2.0 * s_lo + third_lo + tail)
    ef = integer_to_float(m, e, F32)
    hi, lo = _fast_two_sum(m, ef * LN2_SHORT[0], a_hi)
    lo = lo + (low + ef * LN2_SHORT[1])
    return _fast_two_sum(m, hi, lo)


def _odd_integer(m, y):
    half = 0.5 * y
    return m.trunc(y).eq(y) & m.trunc(half).ne(half)


@define("pow", "float", 2)
def pow(m, x, y):
    ax = m.fabs(x)
    finite = (ax > 0.0) & (ax < INF) & (m.fabs(y) < INF)
    # The magnitude for finite nonzero x and finite y: exp(y ln|x|) with the
    # product in two parts, its low part added to the reduced argument.
    safe = m.select(finite, ax, 1.0)
    l_hi, l_lo = log_pair(m, safe)
    w = y * l_hi
    w_lo = m.fma(y, l_hi, -w) + y * l_lo
    clamped = m.minimum(m.maximum(w, -104.0), 89.0)
    r, k = exp_reduced(m, clamped)
    r = r + m.select(clamped.eq(w), w_lo, 0.0)
    magnitude = scale(m, m.fma(r * r, m.poly(r, EXP_Q), r) + 1.0, k)
    # Zero or infinite x, or infinite y: 0 or inf, by whether |x| > 1 and
    # y > 0 agree (|x| = 1 with y infinite is 1).
    limit = m.select((ax > 1.0).eq(y > 0.0), INF, 0.0)
    limit = m.select(ax.eq(1.0), 1.0, limit)
    magnitude = m.select(finite, magnitude, limit)
    negative = m.bits(x) < 0
    odd = _odd_integer(m, y)
    z = m.select(negative & odd, -magnitude, magnitude)
    # A finite negative x to a finite power that is not an integer.
    z = m.select(negative & (ax > 0.0) & (ax < INF) & m.trunc(y).ne(y) & (m.fabs(y) < INF),
                 NAN, z)
    z = m.select(m.either(m.isnan(x), m.isnan(y)), NAN, z)
    # pow(x, 0) is 1 for every x, pow(1, y) for every y, NaNs included.
    return m.select(m.either(y.eq(0.0), x.eq(1.0)), 1.0, z)
