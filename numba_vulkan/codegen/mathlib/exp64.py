"""float64 exponential and logarithm, computed in float64.

The float32 functions' algorithms (``exp32.py``) with float64 constants and
longer polynomials.
"""

from numba_vulkan.codegen.mathlib.common import integer_to_float, round_multiple, scale
from numba_vulkan.codegen.mathlib.dsl import F64
from numba_vulkan.codegen.mathlib.library import define

INF = float("inf")
NAN = float("nan")

#: ln 2 as a float64 and the float64 nearest the rest.
LN2_HI = 0.6931471805599453
LN2_LO = 2.3190468138462996e-17
LOG2E = 1.4426950408889634

#: (exp(r) - 1 - r) / r**2 on |r| <= ln2/2: fit_poly.py --function
#: "(exp(x) - 1 - x) / x**2" --interval -0.3466 0.3466 --degree 10 --type float64
EXP_Q = (0.5, 0.1666666666666667, 0.041666666666666685, 0.008333333333325855,
         0.0013888888888869452, 0.00019841269875402892, 2.480158735583686e-05,
         2.7557254980051043e-06, 2.7557250661344483e-07, 2.510530928512589e-08,
         2.0920295124508095e-09)

#: (2 atanh(s) - 2s) / s as a polynomial in z = s**2, |s| <= 3 - 2 sqrt(2):
#: fit_poly.py --function "(2*atanh(sqrt(x)) - 2*sqrt(x))/(sqrt(x)*x)"
#: --interval 0 0.02944 --degree 7 --type float64
LOG_R = (0.6666666666666666, 0.4000000000001361, 0.28571428563251333, 0.22222224038544966,
         0.18181627347360638, 0.15394967384911978, 0.1304617413465828, 0.1530363428134253)

#: sqrt(1/2)'s bits: the reduced argument is in [sqrt(1/2), sqrt(2)).
_ROOT_HALF_BITS = 0x3FE6A09E667F3BCD
_MANTISSA = (1 << 52) - 1


def exp_finite(m, x):
    """exp(x) for ``-746 <= x <= 710`` (no NaN)."""
    kf, k = round_multiple(m, x, LOG2E)
    r = m.fma(-kf, LN2_HI, x)
    r = m.fma(-kf, LN2_LO, r)
    return scale(m, m.fma(r * r, m.poly(r, EXP_Q), r) + 1.0, k)


@define("exp", "double")
def exp(m, x):
    y = exp_finite(m, m.minimum(m.maximum(x, -746.0), 710.0))
    return m.select(m.isnan(x), x, y)


@define("log", "double")
def log(m, x):
    tiny = x < 2.2250738585072014e-308
    scaled = m.select(tiny, x * 18014398509481984.0, x)
    bits = m.bits(scaled) - _ROOT_HALF_BITS
    k = (bits >> 52) - m.select(tiny, m.int(54), m.int(0))
    f = m.from_bits((bits & _MANTISSA) + _ROOT_HALF_BITS) - 1.0
    # The quotient's error is damped by s * (f**2/2 + r), a few percent of
    # the result at most.
    s = m.divide(f, f + 2.0)
    z = s * s
    r = z * m.poly(z, LOG_R)
    half_f2 = 0.5 * f * f
    t = m.fma(s, half_f2 + r, -half_f2) + f
    kf = integer_to_float(m, k, F64)
    y = m.fma(kf, LN2_HI, m.fma(kf, LN2_LO, t))
    y = m.select(x.eq(INF), INF, y)
    y = m.select(x.eq(0.0), -INF, y)
    return m.select(m.either(x < 0.0, m.isnan(x)), NAN, y)
