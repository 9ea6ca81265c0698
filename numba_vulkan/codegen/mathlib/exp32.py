"""float32 exponentials, logarithms and powers, computed in float32.

Polynomial coefficients come from ``scripts/fit_poly.py`` (the command that
gives each is beside it); the worst errors measured are in
``tests/codegen/mathlib/test_exp32.py``.

``pow`` needs ``log2 |x|`` far beyond float32's precision: ``y log2 |x|``
reaches 150 in magnitude before the result overflows, so a relative error
``e`` in the logarithm moves the result by ``150 e ln2`` relative. It keeps
the logarithm as a sum of two floats good to about 2**-35.5 (products split
exactly by fma, sums by Fast2Sum), the product with ``y`` likewise, and
adds the low part to the exponential's reduced argument, which is exact
until then (0.92 ULP worst on lavapipe, against 1.31 for a factor
``1 + lo ln2`` on the result, which rounds twice).
"""

from numba_vulkan.codegen.mathlib.common import (SHIFTER, fast_two_sum, integer_to_float,
                                                 log_specials, power_of_two, round_multiple,
                                                 scale)
from numba_vulkan.codegen.mathlib.dsl import F32
from numba_vulkan.codegen.mathlib.library import define

INF = float("inf")
NAN = float("nan")
TINY = 1.1754943508222875e-38  # the least normal float32, 2**-126

#: ln 2 as a float32 (0x3f317218) and the float32 nearest the rest.
LN2_HI = 0.693147182464599609375
LN2_LO = -1.9046542121259336e-09
LOG2E = 1.44269502162933349609375
LOG2E_LO = 1.925963033500011e-08
#: log10(e) and log10(2), each as a float32 and the float32 nearest the rest.
LOG10E = 0.4342944920063019
LOG10E_LO = -1.0103049952192578e-08
LOG10_2 = 0.3010300099849701
LOG10_2_LO = -1.432098883924482e-08

#: (exp(r) - 1 - r) / r**2 on |r| <= ln2/2: fit_poly.py --function
#: "(exp(x) - 1 - x) / x**2" --interval -0.3466 0.3466 --degree 4
EXP_Q = (0.5, 0.16666579246520996, 0.04166673496365547, 0.008362950757145882,
         0.0013908393448218703)

#: (2**r - 1) / r on |r| <= 1/2: fit_poly.py --function "(2**x - 1)/x"
#: --interval -0.5 0.5 --degree 5
EXP2_Q = (0.6931471824645996, 0.24022650718688965, 0.055503685027360916,
          0.009618166834115982, 0.0013386884238570929, 0.00015416050155181438)

#: (2 atanh(s) - 2s) / s as a polynomial in z = s**2, |s| <= 3 - 2 sqrt(2):
#: fit_poly.py --function "(2*atanh(sqrt(x)) - 2*sqrt(x))/(sqrt(x)*x)"
#: --interval 0 0.02944 --degree 3
LOG_R = (0.6666666865348816, 0.39998799562454224, 0.28674784302711487, 0.204630047082901)

#: log2((1+q)/(1-q)) = q (C1 + C3 z + z**2 P(z)), z = q**2, |q| <= 3 - 2 sqrt(2):
#: C1 = 2/ln2 and C3 = 2/(3 ln2) each as a float32 and the rest, and P from
#: fit_poly.py --function "(2*atanh(sqrt(x))/(sqrt(x)*log(2)) - 2/log(2)
#: - 2*x/(3*log(2)))/x**2" --interval 0 0.02944 --degree 3
LOG2_C1 = (2.885390043258667, 3.851926067000022e-08)
LOG2_C3 = (0.9617967009544373, -7.028461812552678e-09)
LOG2_P = (0.5770780444145203, 0.41218137741088867, 0.3221065104007721, 0.23505902290344238)


def exp_reduced(m, x):
    """``(r, k)`` with ``x = k ln2 + r``, ``|r| <= ln2/2``, ``k`` an int32
    (for ``|x| <= 104``)."""
    kf, k = round_multiple(m, x, LOG2E)
    r = m.fma(-kf, LN2_HI, x)
    return m.fma(-kf, LN2_LO, r), k


def exp2_kernel(m, r):
    """``2**r`` for ``|r| <= 1/2``, within about 0.3 ULP before its rounding."""
    return m.fma(r, m.poly(r, EXP2_Q), 1.0)


def expm1_kernel(m, r):
    """``exp(r) - 1`` for ``|r| <= ln2/2``."""
    return m.fma(r * r, m.poly(r, EXP_Q), r)


@define("exp", "float")
def exp(m, x):
    clamped = m.minimum(m.maximum(x, -104.0), 104.0)
    r, k = exp_reduced(m, clamped)
    p = expm1_kernel(m, r) + 1.0
    return m.select(m.isnan(x), x, scale(m, p, k))


@define("exp2", "float")
def exp2(m, x):
    clamped = m.minimum(m.maximum(x, -151.0), 129.0)
    nf, n = round_multiple(m, clamped, 1.0)
    p = exp2_kernel(m, clamped - nf)
    return m.select(m.isnan(x), x, scale(m, p, n))


@define("expm1", "float")
def expm1(m, x):
    # 2**k (u + 1) - 1 as 2 (2**(k-1) u + (2**(k-1) - 1/2)): one rounding,
    # exact 2**(k-1) - 1/2 for -25 <= k <= 24, and 2**(k-1) normal up to
    # k = 128 (the doubling overflows as the sum would).
    clamped = m.minimum(m.maximum(x, -40.0), 89.0)
    r, k = exp_reduced(m, clamped)
    u = expm1_kernel(m, r)
    half_scale = power_of_two(m, k - 1, F32)
    y = 2.0 * m.fma(half_scale, u, half_scale - 0.5)
    # Below 2**-24 the result is x rounded (which also keeps -0 and
    # subnormals exact).
    return m.select(m.either(m.fabs(x) < 5.9604644775390625e-08, m.isnan(x)), x, y)


def _reduce(m, x, subnormal):
    """``(k, mant)``: ``x = 2**k mant`` with ``sqrt(1/2) <= mant < sqrt(2)``,
    ``k`` an int32, for finite ``x > 0`` (normal unless ``subnormal``)."""
    if subnormal:
        tiny = x < TINY
        x = m.select(tiny, x * 8388608.0, x)
    bits = m.bits(x) - 0x3F3504F3
    k = bits >> 23
    if subnormal:
        k = k - m.select(tiny, m.int(23), m.int(0))
    return k, m.from_bits((bits & 0x7FFFFF) + 0x3F3504F3)


def log_parts(m, x, subnormal=True):
    """``(kf, f, w)`` with ``log(x) = kf ln2 + f + w`` for finite ``x > 0``:
    ``kf`` an integral float, ``f`` exact, ``|w|`` below ``f``'s magnitude
    (``subnormal``: also for subnormal ``x``)."""
    k, mant = _reduce(m, x, subnormal)
    f = mant - 1.0
    s = m.approximate_divide(f, f + 2.0)
    z = s * s
    r = z * m.poly(z, LOG_R)
    half_f2 = 0.5 * f * f
    kf = integer_to_float(m, k, F32)
    return kf, f, m.fma(s, half_f2 + r, -half_f2)


@define("log", "float")
def log(m, x):
    kf, f, w = log_parts(m, x)
    y = m.fma(kf, LN2_HI, m.fma(kf, LN2_LO, w + f))
    return log_specials(m, x, y)


@define("log2", "float")
def log2(m, x):
    kf, f, w = log_parts(m, x)
    hi = f * LOG2E
    lo = m.fma(w, LOG2E, m.fma(f, LOG2E_LO, m.fma(f, LOG2E, -hi)))
    s, e = fast_two_sum(m, kf, hi)
    return log_specials(m, x, s + (e + lo))


@define("log10", "float")
def log10(m, x):
    kf, f, w = log_parts(m, x)
    k_hi = kf * LOG10_2
    k_lo = m.fma(kf, LOG10_2_LO, m.fma(kf, LOG10_2, -k_hi))
    f_hi = f * LOG10E
    f_lo = m.fma(w, LOG10E, m.fma(f, LOG10E_LO, m.fma(f, LOG10E, -f_hi)))
    s, e = fast_two_sum(m, k_hi, f_hi)
    return log_specials(m, x, s + (e + (k_lo + f_lo)))


@define("log1p", "float")
def log1p(m, x):
    # log(1 + x) = log(u) + c/u to float32 precision, with u = 1 + x rounded
    # and c its rounding error (exact, or negligible beyond 2**24).
    u = 1.0 + x
    c = x - (u - 1.0)
    kf, f, w = log_parts(m, u, subnormal=False)
    t = f + (w + m.approximate_divide(c, u))
    y = m.fma(kf, LN2_HI, m.fma(kf, LN2_LO, t))
    y = log_specials(m, u, y)
    # Below 2**-24 the result is x rounded (which keeps -0 too).
    return m.select(m.fabs(x) < 5.9604644775390625e-08, x, y)


def log2_pair(m, x, subnormal=True):
    """``(hi, lo)``: ``log2(x)`` as an unevaluated sum, within about
    2**-35.5 of it relative (2**-35.6 the worst measured on lavapipe), for
    finite ``x > 0`` (normal unless ``subnormal``).

    ``x = 2**k m`` with ``sqrt(1/2) <= m < sqrt(2)``, and ``log2(m)`` from
    ``q = (m - 1) / (m + 1)``: ``m + 1`` is kept exactly as two floats,
    the quotient as two (the driver's reciprocal, corrected by the exact
    remainder), and the series ``q (C1 + z (C3 + z P(z)))`` in ``z = q**2``
    carries the rounding errors of its last two steps and of ``z``; what
    is left is ``P``'s (about 2**-36.5 each)."""
    k, mant = _reduce(m, x, subnormal)
    num = mant - 1.0
    den, den_lo = fast_two_sum(m, m.value(1.0), mant)
    reciprocal = m.approximate_divide(1.0, den)
    q = num * reciprocal
    remainder = m.fma(-q, den_lo, m.fma(-q, den, num))
    q_lo = remainder * reciprocal
    z = q * q
    z_lo = m.fma(q + q, q_lo, m.fma(q, q, -z))
    p = m.poly(z, LOG2_P)
    c1, c1_lo = LOG2_C1
    c3, c3_lo = LOG2_C3
    a = m.fma(z, p, c3)
    a_lo = m.fma(z_lo, p, m.fma(z, p, c3 - a) + c3_lo)
    b = m.fma(z, a, c1)
    b_lo = m.fma(z, a, c1 - b) + m.fma(z_lo, a, m.fma(z, a_lo, c1_lo))
    hi = q * b
    lo = m.fma(q_lo, b, m.fma(q, b_lo, m.fma(q, b, -hi)))
    s, e = fast_two_sum(m, integer_to_float(m, k, F32), hi)
    return s, e + lo


def add_exponent(m, p, shifted):
    """``p 2**k`` for the integer ``k`` rounded by ``shifted = v + SHIFTER``,
    where the result is normal: ``k``'s bits shifted to the exponent field
    are ``shifted``'s (the shifter's own bits shift out)."""
    return m.from_bits(m.bits(p) + (m.bits(shifted) << 23))


def exp2_pair(m, t, t_lo):
    """``2**(t + t_lo)`` for ``|t_lo|`` within a few ULP of ``t``: 0 below
    2**-150 and infinity beyond 2**128 (also for infinite ``t``)."""
    shifted = t + SHIFTER[F32]
    nf = shifted - SHIFTER[F32]
    p = exp2_kernel(m, (t - nf) + t_lo)

    def extremes():
        # Subnormal results, overflow, and t whose t_lo is NaN or whose n
        # is garbage: the two-factor scale, and the limits.
        _, n = round_multiple(m, t, 1.0)
        r = scale(m, p, n)
        r = m.select(t > 128.0, INF, r)
        return m.select(t < -150.0, 0.0, r)
    # Normal results take two integer operations instead of the scale's
    # eight operations and the limits' four: on the H200 this branch took
    # pow from 0.72 to 0.56 times numba-cuda's time. (In exp the same
    # branch was slower: 1.26 -> 1.34.)
    return m.branch(m.fabs(t) < 125.0, lambda: add_exponent(m, p, shifted), extremes)


def pow_general(m, x, y):
    """``pow`` for any ``x`` and ``y``."""
    ax = m.fabs(x)
    hi, lo = log2_pair(m, ax)
    # log2 of 0, infinity and NaN, so that y * log2|x| takes the results
    # of C99's pow for them (NaN where y is 0, which is 1 below). A device
    # that flushes subnormals (NVIDIA's) flushes the scaled subnormal x that
    # log2_pair takes but may compare x itself unflushed: x is zero here
    # where its scaled value is.
    zero = (ax * 8388608.0).eq(0.0)
    usual = ~zero & (ax < INF)
    hi = m.select(usual, hi, m.select(zero, -INF, ax))
    t = y * hi
    r = exp2_pair(m, t, m.fma(y, lo, m.fma(y, hi, -t)))
    integral = y.eq(m.trunc(y))
    half = y * 0.5
    odd = integral & m.trunc(half).ne(half)
    r = m.select(odd & (m.bits(x) < 0), -r, r)
    r = m.select((x < 0.0) & (x > -INF) & ~integral, NAN, r)
    one = m.either(y.eq(0.0), x.eq(1.0), ax.eq(1.0) & m.fabs(y).eq(INF))
    return m.select(one, 1.0, r)


def pow_positive(m, x, y):
    """``pow`` for normal ``x > 0`` and finite ``y``."""
    hi, lo = log2_pair(m, x, subnormal=False)
    t = y * hi
    return exp2_pair(m, t, m.fma(y, lo, m.fma(y, hi, -t)))


@define("pow", "float", arity=2)
def pow_(m, x, y):
    # Most arguments skip the special cases' selects and the subnormal
    # scaling: on the H200 this branch took pow from 0.85 to 0.72 times
    # numba-cuda's time.
    ordinary = (x >= TINY) & (x < INF) & (m.fabs(y) < INF)
    return m.branch(ordinary, lambda: pow_positive(m, x, y), lambda: pow_general(m, x, y))
