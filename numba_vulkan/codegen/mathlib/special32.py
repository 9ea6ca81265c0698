"""float32 error functions and hyperbolic functions, computed in float32.

Polynomial coefficients come from ``scripts/fit_poly.py`` (the command that
gives each is beside it); the worst errors measured are in
``tests/codegen/mathlib/test_special32.py``.
"""

from numba_vulkan.codegen.mathlib.common import power_of_two, round_multiple, scale
from numba_vulkan.codegen.mathlib.exp32 import EXP_Q, LOG2E, exp_reduced
from numba_vulkan.codegen.mathlib.library import define

#: erf(x) / x - 1 as a polynomial in s = x**2, |x| <= 0.875:
#: fit_poly.py --function "erf(sqrt(x))/sqrt(x) - 1" --interval 0 0.765625
#: --degree 5 --absolute
ERF_SMALL = (0.12837915122509003, -0.3761250078678131, 0.11281853169202805,
             -0.02676566317677498, 0.0049880086444318295, -0.0005944862496107817)

#: Where erf leaves the odd polynomial for 1 - 2**P(|x|).
ERF_SPLIT = 0.875

#: Beyond it float32's erf is 1 (erfc(x) < 2**-25 from 3.9192).
ERF_ONE = 4.0

#: log2(erfc(x)) on [0.875, 4]: fit_poly.py --function "log(erfc(x), 2)"
#: --interval 0.875 4 --degree 8 --absolute
ERF_LOG2 = (0.0004246211319696158, -1.6304354667663574, -0.9117758274078369,
            -0.15858924388885498, 0.0379946194589138, -0.006824546959251165,
            0.0008522715070284903, -6.543998460983858e-05, 2.3123423034121515e-06)

#: 2**f on |f| <= 1/2: fit_poly.py --function "2**x" --interval -0.5 0.5 --degree 6
EXP2 = (1.0, 0.6931471824645996, 0.24022649228572845, 0.05550362169742584,
        0.009618381038308144, 0.0013389821397140622, 0.00015352012997027487)

#: Where erfc leaves 1 - erf(x) (erf(0.47) < 1/2, so the subtraction loses
#: nothing) for exp(-x**2) * N(v) / (x + 1).
ERFC_SPLIT = 0.47

#: Beyond it erfc's float32 value is 0 (below half the least subnormal from 10.0542).
ERFC_ZERO = 10.1

#: ln 2 split for exact products: LN2_SHORT has 16 significant bits, so
#: k * LN2_SHORT is exact for |k| < 2**8 and x - k * LN2_SHORT is exact where
#: k is x / ln 2 rounded (Sterbenz); LN2_REST is ln 2 - LN2_SHORT.
LN2_SHORT = 0.693145751953125
LN2_REST = 1.4286068203094173e-06

#: (x + 1) * erfc(x) * exp(x**2) for x in [0.47, 10.1] as a polynomial in
#: z = 1/(x + 1) - 0.385: fit_poly.py --function
#: "(1/(x+0.385))*erfc(1/(x+0.385) - 1)*exp((1/(x+0.385) - 1)**2)"
#: --interval -0.295 0.2955 --degree 10
ERFC_N = (0.795691728591919, 0.5561383962631226, -0.3073957860469818, -0.33262044191360474,
          0.5340091586112976, -0.06820134073495865, -0.6880263090133667, 0.9813636541366577,
          -0.10919661819934845, -1.5457565784454346, 1.7260631322860718)
ERFC_CENTRE = 0.385


def _erf_small(m, a):
    """erf(a) for 0 <= a <= ERF_SPLIT."""
    return m.fma(a, m.poly(a * a, ERF_SMALL), a)


def _exp2(m, t):
    """``(p, k)``: 2**t = p * 2**k, p in [2**-0.5, 2**0.5], for |t| < 2**22."""
    kf, k = round_multiple(m, t, 1.0)
    return m.poly(t - kf, EXP2), k


def _erfc_large(m, a):
    """erfc(a) for ERFC_SPLIT <= a <= ERFC_ZERO, to float32's relative
    accuracy, as exp(-a**2) * N / (a + 1).

    Every part is kept exact or unrounded where its error would reach the
    result whole: a**2 as a sum of two floats, exp's reduced argument from
    an exact product and difference, a + 1 as a sum of two, the quotient
    as the driver's reciprocal's product corrected by its residual, and
    exp(r) - 1 applied to it without rounding exp(r) first.
    """
    hi = a * a
    lo = m.fma(a, a, -hi)
    kf, k = round_multiple(m, -hi, LOG2E)
    r_hi = m.fma(-kf, LN2_SHORT, -hi)
    r_lo = m.fma(-kf, LN2_REST, -lo)
    r = r_hi + r_lo
    d = a + 1.0
    d_lo = a - (d - 1.0)
    y = m.approximate_divide(1.0, d)
    v = m.fma(y, m.fma(-d_lo, y, m.fma(-d, y, 1.0)), y)
    z = v - ERFC_CENTRE
    tail = z * m.poly(z, ERFC_N[1:])
    quotient = (tail + ERFC_N[0]) * v
    residual = m.fma(-d_lo, quotient, m.fma(-d, quotient, ERFC_N[0]) + tail)
    correction = v * residual
    # quotient + correction times exp(r) = 1 + r_hi + r_lo + r**2 Q(r),
    # less quotient, summed from the smallest terms.
    rest = m.fma(r * r * m.poly(r, EXP_Q), quotient, m.fma(correction, r, correction))
    rest = m.fma(r_hi, quotient, m.fma(r_lo, quotient, rest))
    return scale(m, rest + quotient, k)


@define("erf", "float")
def erf(m, x):
    # A NaN fails every comparison, takes the polynomial and stays NaN (so
    # here and below); clamps keep the other side finite.
    a = m.fabs(x)
    p, k = _exp2(m, m.poly(m.minimum(a, ERF_ONE), ERF_LOG2))
    large = m.fma(-p, power_of_two(m, k, p.type), 1.0)
    return m.copysign(m.select(a >= ERF_SPLIT, large, _erf_small(m, a)), x)


@define("erfc", "float")
def erfc(m, x):
    a = m.fabs(x)
    large = _erfc_large(m, m.minimum(a, ERFC_ZERO))
    large = m.select(x < 0.0, 2.0 - large, large)
    return m.select(a >= ERFC_SPLIT, large, 1.0 - m.fma(x, m.poly(x * x, ERF_SMALL), x))


#: (tanh(x)/x - 1) / x**2 as a polynomial in x**2, |x| <= 0.55: fit_poly.py
#: --function "(tanh(sqrt(x))/sqrt(x) - 1)/x" --interval 0 0.3025 --degree 4
TANH_SMALL = (-0.3333333134651184, 0.13333037495613098, -0.05389508977532387,
              0.021222170442342758, -0.006446138024330139)
TANH_SPLIT = 0.55

#: Beyond it float32's tanh is 1 (1 - tanh(x) < 2**-25 from 9.0109).
TANH_ONE = 9.1

#: log2(e) as a float32 and the float32 nearest the rest.
LOG2E_REST = 1.925963033500011e-08


@define("tanh", "float")
def tanh(m, x):
    a = m.fabs(x)
    s = a * a
    small = m.fma(a * s, m.poly(s, TANH_SMALL), a)
    # 1 - 2 / (exp(2a) + 1), exp(2a) = 2**k (1 + f P(f)), f = 2a log2(e) - k
    # from an exact product; the quotient's error is at most half the
    # result's ULP where it is largest (a = 0.55) and shrinks beyond.
    clamped = m.minimum(a, TANH_ONE)
    kf, k = round_multiple(m, clamped, 2.0 * LOG2E)
    f = m.fma(clamped, 2.0 * LOG2E_REST, m.fma(clamped, 2.0 * LOG2E, -kf))
    two_k = power_of_two(m, k, x.type)
    d = m.fma(two_k, f * m.poly(f, EXP2[1:]), two_k + 1.0)
    y = m.approximate_divide(1.0, d)
    y = m.fma(y, m.fma(-d, y, 1.0), y)
    large = m.fma(-2.0, y, 1.0)
    return m.copysign(m.select(a >= TANH_SPLIT, large, small), x)


#: (sinh(x)/x - 1) / x**2 as a polynomial in x**2, |x| <= 1: fit_poly.py
#: --function "(sinh(sqrt(x))/sqrt(x) - 1)/x" --interval 0 1 --degree 4
SINH_SMALL = (0.1666666716337204, 0.008333161473274231, 0.00019933561270590872,
              1.207925606649951e-06, 8.247317282439326e-07)
SINH_SPLIT = 1.0

#: Beyond it float32's sinh and cosh overflow (from 89.4159).
HYPERBOLIC_INF = 90.0


def _half_exponentials(m, a, minus):
    """``(exp(a) - exp(-a)) / 2`` with ``minus`` (for a >= SINH_SPLIT), else
    ``(exp(a) + exp(-a)) / 2``, for 0 <= a <= HYPERBOLIC_INF, as
    ``2**(k-1) (p -+ 2**-2k / p)`` with ``exp(a) = p 2**k``. The reciprocal
    is the driver's refined by one Newton step: it adds, or takes at most
    half of p away, so its error reaches the result at most doubled and
    well under an ULP; from k = 16 on it is below p's last bit."""
    r, k = exp_reduced(m, a)
    p = m.fma(r * r, m.poly(r, EXP_Q), r) + 1.0
    y = m.approximate_divide(1.0, p)
    y = m.fma(y, m.fma(-p, y, 1.0), y)
    small_k = m.select(k < 16, k, 16)
    y = -y if minus else y
    return scale(m, m.fma(y, power_of_two(m, -(small_k + small_k), p.type), p), k - 1)


@define("sinh", "float")
def sinh(m, x):
    a = m.fabs(x)
    s = a * a
    small = m.fma(a * s, m.poly(s, SINH_SMALL), a)
    large = _half_exponentials(m, m.minimum(a, HYPERBOLIC_INF), True)
    return m.copysign(m.select(a >= SINH_SPLIT, large, small), x)


@define("cosh", "float")
def cosh(m, x):
    a = m.fabs(x)
    y = _half_exponentials(m, m.minimum(a, HYPERBOLIC_INF), False)
    return m.select(m.isnan(x), x, y)
