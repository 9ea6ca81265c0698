"""float64 exponentials and logarithms, computed in float64.

No tables and no float64 division: the one quotient the logarithms need,
``u = 2f / (2 + f)``, is a reciprocal seeded by a quadratic and refined by
Newton steps (fma only), with the rounding error of ``u`` recovered exactly
from ``u * (2 + f) = 2f``. Drivers divide float64 with a correctly rounded
sequence and a slow path, which costs more than the whole seed.

``log2`` and ``log10`` take the logarithm in double-double (``hi + lo``).
float64 ``pow`` stays libclc's: a pow built on that logarithm was 178 ULP
off for large ``y`` (``0.709 ** 1953``), the pair's low part not carrying
enough.

Polynomial coefficients come from ``scripts/fit_poly.py`` (the command that
gives each is beside it); the worst errors measured are in
``tests/codegen/mathlib/test_exp64.py``.
"""

from numba_vulkan.codegen.mathlib.common import (fast_two_sum, integer_to_float, log_specials,
                                                 power_of_two, round_multiple, scale)
from numba_vulkan.codegen.mathlib.dsl import F64, I32, I64
from numba_vulkan.codegen.mathlib.library import define

INF = float("inf")
NAN = float("nan")

#: Constants as the float64 nearest and the float64 nearest the rest.
LN2, LN2_LO = 0.6931471805599453, 2.3190468138462996e-17
LOG2E, LOG2E_LO = 1.4426950408889634, 2.0355273740931033e-17
LOG10_2, LOG10_2_LO = 0.3010299956639812, -2.8037281277851704e-18
#: log2(e) / 12, the leading coefficient of log2(1 + f) / u - log2(e).
LOG2_Q0, LOG2_Q0_LO = 0.12022458674074694, 6.322202081015738e-18
#: ln 2 with 32 trailing zero bits, so that ``k * LN2_SHORT`` is exact.
LN2_SHORT, LN2_SHORT_LO = 0.6931471803691238, 1.9082149292705877e-10

SMALLEST_NORMAL = 2.2250738585072014e-308
#: The bits of sqrt(1/2): mantissas are reduced to [sqrt(1/2), sqrt(2)).
SQRT_HALF_BITS = 0x3FE6A09E667F3BCD
MANTISSA = (1 << 52) - 1

#: (exp(r) - 1 - r) / r**2 on |r| <= ln2/2: fit_poly.py --function
#: "(exp(x) - 1 - x) / x**2" --interval -0.3466 0.3466 --degree 9 --type float64
EXP_Q = (0.5000000000000001, 0.16666666666666688, 0.041666666666625954, 0.008333333333333614,
         0.0013888888916362202, 0.00019841269824266898, 2.48015224073348e-05,
         2.7557326711539344e-06, 2.761964149440578e-07, 2.5075598577538552e-08)

#: 1 / (2 + f) on the reduced range of f, within 2**-13: fit_poly.py --function
#: "1/(2+x)" --interval -0.29290 0.41422 --degree 3 --type float64
RECIPROCAL_SEED = (0.49995511568385104, -0.25035756328902453, 0.12816512769709476,
                   -0.05740061477957898)

#: (log(1 + f) - u) / u**3 as a polynomial in w = u**2, u = 2f / (2 + f):
#: fit_poly.py --function "(2*atanh(sqrt(x)/2) - sqrt(x))/(x*sqrt(x))"
#: --interval 0 0.11776 --degree 6 --type float64
LOG_P = (0.08333333333333337, 0.012499999999968637, 0.0022321428614086388,
         0.00043402756093156, 8.878364449249875e-05, 1.8715426740132387e-05,
         4.460753528781996e-06)

#: (log2(1 + f) / u - log2(e) - LOG2_Q0 w) / w**2, w = u**2: fit_poly.py --function
#: "((2*atanh(sqrt(x)/2) - sqrt(x))/(x*sqrt(x)) - mpf(1)/12)/(x*log(2))"
#: --interval 0 0.11776 --degree 6 --type float64
LOG2_Q = (0.018033688011112055, 0.0032203014305455307, 0.0006261697239897517,
          0.00012808010038678334, 2.709557463562249e-05, 5.8494612991791415e-06,
          1.4214490020130919e-06)


def _clamp(m, x, lo, hi):
    return m.minimum(m.maximum(x, lo), hi)


def _exp_tail(m, rh, rl, k):
    """``exp(rh + rl) * 2**k`` for ``|rh| <= ln2/2`` and ``|rl| <= 2**-50 |rh|``."""
    p = m.fma(rh * rh, m.poly(rh, EXP_Q), rl) + rh
    return scale(m, p + 1.0, k)


def _exp2_tail(m, rh, rl, k):
    """``2**(rh + rl) * 2**k`` for ``|rh| <= 1/2`` (``rl`` None for 0): ``rh + rl`` times ln2 in
    double-double, then :func:`_exp_tail`."""
    th = rh * LN2
    tl = m.fma(rh, LN2_LO, m.fma(rh, LN2, -th))
    if rl is not None:
        tl = m.fma(rl, LN2, tl)
    return _exp_tail(m, th, tl, k)


def exp_parts(m, x):
    """``(s, kf, k)`` with ``exp(x) = (1 + s) * 2**k``, ``|s| <= 0.42``, ``k``
    an int64 (``kf`` as a float), for ``|x| <= 746``: ``1 + s`` and the
    scaling are left to callers that can add them with less rounding."""
    kf, k = round_multiple(m, x, LOG2E)
    # Exact: x and k ln2 agree to within ln2/2, on a grid of 2**-54.
    r = m.fma(-kf, LN2, x)
    r = m.fma(-kf, LN2_LO, r)
    return m.fma(r * r, m.poly(r, EXP_Q), r), kf, k


def _exp_reduced(m, x):
    """``(exp(r), kf, k)`` with ``x = k ln2 + r``, ``|r| <= ln2/2``."""
    s, kf, k = exp_parts(m, x)
    return s + 1.0, kf, k


def _power_of_two_fast(m, k):
    """``2**k`` for an integer ``k`` with ``2**k`` normal: the exponent is
    built in the high 32 bits alone (one 32-bit add and shift; the low word
    is zero)."""
    high = (m.trunc_int(k, I32) + 1023) << 20
    return m.from_bits(m.extend(high, I64) << 32)


@define("exp", "double")
def exp(m, x):
    def ordinary():
        p, _, k = _exp_reduced(m, x)
        return p * _power_of_two_fast(m, k)

    def ends():
        # Subnormal and infinite results, NaN: 2**k in two factors.
        p, _, k = _exp_reduced(m, _clamp(m, x, -746.0, 710.0))
        return m.select(m.isnan(x), x, scale(m, p, k))

    return m.branch(m.fabs(x) < 708.0, ordinary, ends)


@define("exp2", "double")
def exp2(m, x):
    clamped = _clamp(m, x, -1080.0, 1030.0)
    kf, k = round_multiple(m, clamped, 1.0)
    y = _exp2_tail(m, clamped - kf, None, k)
    return m.select(m.isnan(x), x, y)


@define("expm1", "double")
def expm1(m, x):
    # expm1(-40) rounds to -1; 710 overflows.
    clamped = _clamp(m, x, -40.0, 710.0)
    kf, k = round_multiple(m, clamped, LOG2E)
    hi = m.fma(-kf, LN2, clamped)
    lo = kf * -LN2_LO
    # r + rl = hi + lo: exp(r + rl) - 1 = p(r) + rl (1 + r), and the r rl
    # term matters where k is large.
    r = hi + lo
    rl = (hi - r) + lo
    s = m.fma(r * r, m.poly(r, EXP_Q), rl)
    ph, pl = fast_two_sum(m, r, s)
    # 2**k (1 + p) - 1 with 2**k normal: k = 1024 (and near it) as
    # 2 * (2**(k-1) (1 + p) - 1), where the -1 is lost anyway.
    big = k > 960
    t = power_of_two(m, k - m.select(big, m.int(1), m.int(0)), F64)
    y = m.fma(t, pl, m.fma(t, ph, t - 1.0)) * m.select(big, 2.0, 1.0)
    return m.select(m.either(x.eq(0.0), m.isnan(x)), x, y)


def _reduce(m, x):
    """``(f, k, kf)``: ``x = 2**k (1 + f)`` with ``1 + f`` in [sqrt(1/2), sqrt(2)),
    for positive finite ``x`` (subnormals too), ``k`` as an integer and a
    float; ``f`` is exact."""
    tiny = x < SMALLEST_NORMAL
    scaled = m.select(tiny, x * 18014398509481984.0, x)
    bits = m.bits(scaled) - SQRT_HALF_BITS
    k = (bits >> 52) - m.select(tiny, m.int(54), m.int(0))
    f = m.from_bits((bits & MANTISSA) + SQRT_HALF_BITS) - 1.0
    return f, k, integer_to_float(m, k, F64)


def _ratio(m, f, fl=None):
    """``(uh, ul)``: ``u = 2f / (2 + f)`` as ``uh + ul`` (relative error
    below 2**-70), ``f`` plus ``fl`` when given (``|fl| <= 2**-52 |f|``).
    ``uh`` is within 2**-51 of ``u``, so that terms of ``u**3`` may be
    computed from it alone."""
    d = f + 2.0
    r = m.poly(f, RECIPROCAL_SEED)
    for _ in range(2):
        r = m.fma(r, m.fma(-d, r, 1.0), r)
    uh = (f + f) * r
    # u (2 + f) = 2f: the residual 2 (f - uh) - uh f, with f - uh exact
    # (they are within a factor of 1.21).
    t = f - uh
    e = m.fma(-uh, f, t + t)
    if fl is not None:
        e = m.fma(fl, 2.0 - uh, e)
    return uh, e * r


@define("log", "double")
def log(m, x):
    f, _, kf = _reduce(m, x)
    uh, ul = _ratio(m, f)
    w = uh * uh
    c = m.fma(uh * w, m.poly(w, LOG_P), ul)
    # k ln2 + uh summed exactly (k LN2_SHORT is exact), the rest added once.
    a = kf * LN2_SHORT
    s, e = fast_two_sum(m, a, uh)
    y = s + (e + m.fma(kf, LN2_SHORT_LO, c))
    return log_specials(m, x, y)


def _log2_parts(m, f, kf, fl=None):
    """``(hi, lo)``: ``kf + log2(1 + f (+ fl))`` in double-double."""
    uh, ul = _ratio(m, f, fl)
    wh = uh * uh
    wl = m.fma(uh + uh, ul, m.fma(uh, uh, -wh))
    # log2(1 + f) = u (log2(e) + T), T = w (Q0 + w Q(w)): T's first term
    # in double-double, then log2(e) + T, then the product by u.
    th = LOG2_Q0 * wh
    tl = m.fma(wh * wh, m.poly(wh, LOG2_Q),
               m.fma(LOG2_Q0, wl, m.fma(LOG2_Q0_LO, wh, m.fma(LOG2_Q0, wh, -th))))
    sh, se = fast_two_sum(m, LOG2E, th)
    sl = se + (tl + LOG2E_LO)
    lh = uh * sh
    ll = m.fma(uh, sl, m.fma(ul, sh, m.fma(uh, sh, -lh)))
    hi, e = fast_two_sum(m, kf, lh)
    return hi, e + ll


@define("log2", "double")
def log2(m, x):
    f, _, kf = _reduce(m, x)
    hi, lo = _log2_parts(m, f, kf)
    return log_specials(m, x, hi + lo)


@define("log10", "double")
def log10(m, x):
    f, _, kf = _reduce(m, x)
    hi, lo = _log2_parts(m, f, kf)
    y = m.fma(hi, LOG10_2, m.fma(hi, LOG10_2_LO, lo * LOG10_2))
    return log_specials(m, x, y)


@define("log1p", "double")
def log1p(m, x):
    u = x + 1.0
    # u + lo = 1 + x exactly (Knuth's two-sum).
    v = u - x
    lo = (x - (u - v)) + (1.0 - v)
    fu, k, ku = _reduce(m, u)
    # Where 1 + x reduces with k = 0, x itself is f, exactly.
    near = ~m.either(x < -0.2928932188134524, x > 0.41421356237309503)
    f = m.select(near, x, fu)
    kf = m.select(near, 0.0, ku)
    # lo / 2**k, the part of f that 1 + x lost (2**-k kept normal: past
    # 2**1000, lo is far below f's last bit).
    fl = m.select(near, 0.0, lo * power_of_two(m, -m.select(k > 1000, m.int(1000), k), F64))
    uh, ul = _ratio(m, f, fl)
    w = uh * uh
    c = m.fma(uh * w, m.poly(w, LOG_P), ul)
    a = kf * LN2_SHORT
    s, e = fast_two_sum(m, a, uh)
    y = s + (e + m.fma(kf, LN2_SHORT_LO, c))
    y = m.select(u.eq(INF), INF, y)
    y = m.select(x.eq(-1.0), -INF, y)
    y = m.select(m.either(x < -1.0, m.isnan(x)), NAN, y)
    return m.select(x.eq(0.0), x, y)
