"""float64 exponentials, logarithms and pow, computed in float64.

No tables and no float64 division: the one quotient the logarithms need,
``u = 2f / (2 + f)``, is a reciprocal seeded by a quadratic and refined by
Newton steps (fma only), with the rounding error of ``u`` recovered exactly
from ``u * (2 + f) = 2f``. Drivers divide float64 with a correctly rounded
sequence and a slow path, which costs more than the whole seed.

``log2`` and ``log10`` take the logarithm in double-double (``hi + lo``),
within about 2**-61 relative: enough for them, not for ``pow``, whose
``y ln x`` reaches 745, so that a relative error ``e`` of the logarithm
moves the result by ``745 e``, ``2**-61`` by 3 ULP. ``pow`` takes
``ln |x|`` as a pair of its own (:func:`_log_pair`, 2**-64.4 at worst, at
the ends of the reduction's range: the terms of the series down to
``u**5/80`` carry their rounding errors), the product by ``y`` split by
fma, and an exponential of the pair whose reduced argument is exact and
whose first three terms are summed exactly (:func:`_exp_pair`, within
2**-58 before its last rounding): 0.73 ULP the worst measured on
lavapipe, 0.85 on a subnormal result in a search of the reduction's ends.

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

#: (exp(r) - 1 - r - r**2/2) / r**3 on |r| <= ln2/2 (within 2**-64 absolute
#: after the product): fit_poly.py --function "exp(x) - 1 - x - x**2/2"
#: --interval -0.3466 0.3466 --degree 12 --powers 3 4 5 6 7 8 9 10 11 12 --type float64
#: --absolute
EXP_P3 = (0.16666666666666682, 0.041666666666666706, 0.008333333333317573,
          0.0013888888888861502, 0.00019841269895385028, 2.4801587372491572e-05,
          2.755723564716118e-06, 2.755723243638226e-07, 2.5111813547666665e-08,
          2.0927566419879413e-09)

#: 1/12 as the float64 nearest and the float64 nearest the rest.
C1, C1_LO = 0.08333333333333333, 4.625929269271485e-18

#: (ln(1 + f) - u - C1 u**3) / u**5 as a polynomial in w = u**2: fit_poly.py --function
#: "((2*atanh(sqrt(x)/2) - sqrt(x))/(x*sqrt(x)) - mpf(1)/12)/x"
#: --interval 0 0.11776 --degree 7 --type float64
LOG_PAIR_P = (0.0125, 0.0022321428571423184, 0.0004340277778506677, 8.877840544683303e-05,
              1.8780132045043126e-05, 4.068080644821871e-06, 9.017406397197254e-07,
              2.0245828352124978e-07)


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


def _reduce(m, x, subnormal=True):
    """``(f, k, kf)``: ``x = 2**k (1 + f)`` with ``1 + f`` in [sqrt(1/2), sqrt(2)),
    for positive finite ``x`` (subnormals too unless not ``subnormal``),
    ``k`` as an integer and a float; ``f`` is exact."""
    if subnormal:
        tiny = x < SMALLEST_NORMAL
        x = m.select(tiny, x * 18014398509481984.0, x)
    bits = m.bits(x) - SQRT_HALF_BITS
    k = bits >> 52
    if subnormal:
        k = k - m.select(tiny, m.int(54), m.int(0))
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


def _log_pair(m, f, kf):
    """``(hi, lo)``: ``kf ln2 + ln(1 + f)`` in double-double, within 2**-64.4
    of it relative (the worst measured, at the ends of ``f``'s range; for
    pow, whose ``y ln x`` reaches 745). ``lo`` may exceed ``hi``'s last
    bit (by ``kf``'s product with ln2's rest, up to 2**-22).

    ``ln(1 + f) = u + u**3 (C1 + w P(w))`` with ``u = 2f / (2 + f)`` and
    ``w = u**2``: ``u`` and ``u**3`` are carried as pairs, ``1/12`` as a
    pair, so that only ``u**5``'s term and beyond are computed in plain
    float64."""
    uh, ul = _ratio(m, f)
    wh = uh * uh
    wl = m.fma(uh + uh, ul, m.fma(uh, uh, -wh))
    th = uh * wh
    tl = m.fma(ul, wh, m.fma(uh, wl, m.fma(uh, wh, -th)))
    b = m.fma(wh, m.poly(wh, LOG_PAIR_P), m.fma(wl, LOG_PAIR_P[0], C1_LO))
    vh = th * C1
    vb = m.fma(th, b, tl * b)
    vl = m.fma(tl, C1, m.fma(th, C1, -vh))
    # u**3 (C1 + b) = vh + vb + vl, |vb| below 2**-14 and |vl| below 2**-58.
    sh, se = fast_two_sum(m, vh, vb)
    ah, ae = fast_two_sum(m, uh, sh)
    a = kf * LN2_SHORT
    hi, he = fast_two_sum(m, a, ah)
    return hi, he + (ae + (se + (vl + m.fma(kf, LN2_SHORT_LO, ul))))


def _exp_pair(m, zh, zl, subnormal_results):
    """``exp(zh + zl)`` for ``|zl| <= 2**-30 |zh|`` (as ``y ln x`` makes them;
    any ``zl`` where the result over- or underflows), within about 2**-58
    before the last rounding: ``zh`` reduced exactly by ``k ln2`` (the product's low part
    to ``zl``), then ``exp(r) = 1 + r + r**2/2 + r**3 P(r)`` with its first
    three terms summed exactly. ``subnormal_results``: for every ``zh``
    (infinite too); else only for ``|zh| < 708``."""
    zc = _clamp(m, zh, -1000.0, 1000.0) if subnormal_results else zh
    kf, k = round_multiple(m, zc, LOG2E)
    # Exact: zc and k ln2 agree to within ln2/2, on a grid of 2**-53.
    r = m.fma(-kf, LN2, zc)
    rh, rl = fast_two_sum(m, r, m.fma(-kf, LN2_LO, zl))
    h = rh * rh
    ph, pe = fast_two_sum(m, m.value(1.0), rh)
    qh, qe = fast_two_sum(m, ph, h * 0.5)
    # The rest: r**2/2's rounding, rl exp(r) and r**3 P(r).
    low = m.fma(h * rh, m.poly(rh, EXP_P3), m.fma(m.fma(rh, rh, -h), 0.5, rl * qh))
    p = qh + (qe + (pe + low))
    if not subnormal_results:
        # 2**k normal and p 2**k too: k added to the exponent's bits.
        return m.from_bits(m.bits(p) + (k << 52))
    y = scale(m, p, k)
    # Beyond 1000 the low part (and so p) means nothing.
    y = m.select(zh > 710.0, INF, y)
    return m.select(zh < -746.0, 0.0, y)


def _is_odd_integer(m, y):
    half = y * 0.5
    return m.trunc(y).eq(y) & m.trunc(half).ne(half)


def _pow_ordinary(m, x, y):
    """``pow`` for normal ``x > 0`` and finite ``y``: results that are normal
    by a margin (``|y ln x| < 708``) take 2**k by an integer add to the
    exponent's bits, the others the two-factor scale and the limits."""
    f, _, kf = _reduce(m, x, subnormal=False)
    lh, ll = _log_pair(m, f, kf)
    zh = y * lh
    zl = m.fma(y, ll, m.fma(y, lh, -zh))
    return m.branch(m.fabs(zh) < 708.0, lambda: _exp_pair(m, zh, zl, False),
                    lambda: _exp_pair(m, zh, zl, True))


def _pow_general(m, x, y):
    """``pow`` for any ``x`` and ``y``: C99's special cases by selects."""
    ax = m.fabs(x)
    f, _, kf = _reduce(m, ax)
    lh, ll = _log_pair(m, f, kf)
    zh = y * lh
    zl = m.fma(y, ll, m.fma(y, lh, -zh))
    out = _exp_pair(m, zh, zl, True)
    ax_zero, ax_inf = ax.eq(0.0), ax.eq(INF)
    # |x| = 0 or inf: 0 or inf by the sign of y (and which one x is).
    out = m.select(ax_zero | ax_inf, m.select((y < 0.0) ^ ax_inf, INF, 0.0), out)
    # y = +-inf: 1 at |x| = 1, else inf where |x| > 1 matches y > 0.
    y_edge = m.select((ax > 1.0) ^ (y < 0.0), INF, 0.0)
    out = m.select(m.fabs(y).eq(INF), m.select(ax.eq(1.0), 1.0, y_edge), out)
    # The sign bit, so that -0 counts as negative.
    out = m.select((m.bits(x) < 0) & _is_odd_integer(m, y), -out, out)
    negative_base = (x < 0.0) & ~ax_inf & m.trunc(y).ne(y)
    out = m.select(m.either(negative_base, m.isnan(x), m.isnan(y)), NAN, out)
    return m.select(y.eq(0.0) | x.eq(1.0), 1.0, out)


@define("pow", "double", 2)
def pow_(m, x, y):
    # As float32 pow: most arguments skip the special cases' selects and the
    # subnormal scaling of x.
    ordinary = (x >= SMALLEST_NORMAL) & (x < INF) & (m.fabs(y) < INF)
    return m.branch(ordinary, lambda: _pow_ordinary(m, x, y), lambda: _pow_general(m, x, y))
