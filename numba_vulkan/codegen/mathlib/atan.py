"""float64 arctangents (float32's are in ``trig32.py``).

``atan2(y, x)`` divides the smaller magnitude by the larger, and above
tan(pi/8) first maps the quotient to ``(t - 1) / (t + 1)`` by dividing
``num - den`` by ``num + den`` instead, adding pi/4; the quotient is kept as
a sum of two (a reciprocal within half an ULP, and the division's exact
residual); then an odd minimax polynomial on ``[-tan(pi/8), tan(pi/8)]``
and the octant's fix-ups, with pi/4, pi/2 and pi in two parts.
``atan(x)`` is ``atan2(x, 1)``.
"""

from numba_vulkan.codegen.mathlib.common import reciprocal
from numba_vulkan.codegen.mathlib.library import define

NAN = float("nan")

#: (atan(t) - t) / t**3 as a polynomial in t**2, |t| <= tan(pi/8): fit_poly.py
#: --function "(atan(sqrt(x)) - sqrt(x))/(x*sqrt(x))" --interval 0 0.171573
#: --degree 10 --type float64.
POLY = {
    "double": (-0.3333333333333333, 0.19999999999996212, -0.14285714284765294,
               0.11111111021482112, -0.09090904789162972, 0.07692187429855293,
               -0.06664564288345992, 0.05858561830361941, -0.050874173038365035,
               0.03928390975696225, -0.0192361580153895),
}
#: Powers of two (2**k, 2**-k) num and den are scaled by when den is beyond them.
SCALE = {"double": 500}
#: tan(pi/8), then pi/4, pi/2 and pi as (value of the width, the rest).
TAN_PI_8 = {"double": 0.41421356237309503}
QUARTER_PI = {"double": (0.7853981633974483, 3.061616997868383e-17)}
HALF_PI = {"double": (1.5707963267948966, 6.123233995736766e-17)}
PI = {"double": (3.141592653589793, 1.2246467991473532e-16)}


def atan2(m, y, x, ty):
    ax, ay = m.fabs(x), m.fabs(y)
    swap = ay > ax
    num = m.select(swap, ax, ay)
    den = m.select(swap, ay, ax)
    # Both scaled by a power of two so that the reciprocal of den is normal.
    k = SCALE[ty]
    scale = m.select(den < 2.0 ** -k, 2.0 ** k, m.select(den > 2.0 ** k, 2.0 ** -k, 1.0))
    num = num * scale
    den = den * scale
    big = num > TAN_PI_8[ty] * den
    # num - den and num + den as exact sums of two (Fast2Sum: den >= num),
    # and the quotient with the rest of its division, so that rounding the
    # operands and the quotient costs the result nothing.
    difference = num - den
    total = num + den
    n_hi = m.select(big, difference, num)
    n_lo = m.select(big, num - (difference + den), 0.0)
    d_hi = m.select(big, total, den)
    d_lo = m.select(big, num - (total - den), 0.0)
    finite = d_hi < float("inf")
    # Over an infinite denominator the quotient is an exact 0.
    inverse = m.select(finite, reciprocal(m, m.select(finite, d_hi, 1.0)), 0.0)
    t = n_hi * inverse
    t_lo = (m.fma(-t, d_hi, n_hi) + (n_lo - t * d_lo)) * inverse
    t_lo = m.select(finite, t_lo, 0.0)
    z = t * t
    a = m.fma(t * z, m.poly(z, POLY[ty]), t_lo) + t
    a = m.select(big, (a + QUARTER_PI[ty][1]) + QUARTER_PI[ty][0], a)
    a = m.select(swap, (HALF_PI[ty][0] - a) + HALF_PI[ty][1], a)
    negative = m.bits(x) < 0
    a = m.select(negative, (PI[ty][0] - a) + PI[ty][1], a)
    # 0/0 and inf/inf (den is the larger magnitude, num the smaller; a
    # device flushing subnormals sees a zero in a subnormal den): the
    # octant's own angle.
    a = m.select(den.eq(0.0), m.select(negative, PI[ty][0], 0.0), a)
    infinities = num.eq(float("inf"))
    corner = m.select(negative, 3.0 * QUARTER_PI[ty][0], QUARTER_PI[ty][0])
    a = m.select(infinities, corner, a)
    return m.select(m.either(m.isnan(x), m.isnan(y)), NAN, m.copysign(a, y))


@define("atan2", "double", 2)
def atan2_double(m, y, x):
    return atan2(m, y, x, "double")


@define("atan", "double")
def atan_double(m, x):
    return atan2(m, x, m.value(1.0), "double")
