"""float32 sine and cosine, computed in float32."""

from numba_vulkan.codegen.mathlib.common import round_multiple
from numba_vulkan.codegen.mathlib.dsl import I32
from numba_vulkan.codegen.mathlib.library import define

NAN = float("nan")

TWO_OVER_PI = 0.6366197466850281
#: pi/2 in three float32 parts: each a float32, the sum pi/2 to 3 * 24 bits.
HALF_PI = (1.5707963705062866, -4.371138828673793e-08, -1.7151245100058819e-15)

#: Beyond this the three-part reduction is not exact enough: libclc's own
#: functions (a full Payne-Hanek reduction) take the rare arguments.
REDUCTION_LIMIT = 65536.0

#: (sin(r) - r) / r**3 as a polynomial in r**2, |r| <= pi/4: fit_poly.py
#: --function "(sin(sqrt(x)) - sqrt(x))/(x*sqrt(x))" --interval 0 0.61685 --degree 3
SIN = (-0.1666666716337204, 0.008333489298820496, -0.00019911771232727915,
       3.523951818351634e-06)
#: (cos(r) - 1 + r**2/2) / r**4 as a polynomial in r**2: fit_poly.py
#: --function "(cos(sqrt(x)) - 1 + x/2)/(x*x)" --interval 0 0.61685 --degree 3
COS = (0.0416666679084301, -0.0013889281544834375, 2.498045978427399e-05,
       -4.73810644052719e-07)


def reduced(m, x):
    """``(r, q)``: ``x = q pi/2 + r`` with ``|r| <= pi/4``, ``q`` an int32,
    for ``|x| <= REDUCTION_LIMIT``."""
    kf, q = round_multiple(m, x, TWO_OVER_PI)
    r = m.fma(-kf, HALF_PI[0], x)
    r = m.fma(-kf, HALF_PI[1], r)
    return m.fma(-kf, HALF_PI[2], r), q


def kernels(m, r):
    """``(sin r, cos r)`` for ``|r| <= pi/4``."""
    t = r * r
    sin = m.fma(r * t, m.poly(t, SIN), r)
    cos = m.fma(t * t, m.poly(t, COS), m.fma(t, -0.5, 1.0))
    return sin, cos


def _sine_or_cosine(m, x, quarter_turns, libclc):
    """sin(x) (``quarter_turns`` 0) or cos(x) (1: sin(x + pi/2))."""
    def quick():
        r, q = reduced(m, x)
        q = q + quarter_turns
        sin, cos = kernels(m, r)
        y = m.select((q & 1).eq(0), sin, cos)
        y = m.select((q & 2).eq(0), y, -y)
        if quarter_turns == 0:
            # The reduction's later steps lose the sign of a zero.
            y = m.select(x.eq(0.0), x, y)
        return m.select(m.fabs(x) < float("inf"), y, NAN)

    return m.branch(m.either(m.fabs(x) <= REDUCTION_LIMIT, m.isnan(x)), quick,
                    lambda: m.call(libclc, x))


@define("sin", "float")
def sin(m, x):
    return _sine_or_cosine(m, x, 0, "_Z3sinf")


@define("cos", "float")
def cos(m, x):
    return _sine_or_cosine(m, x, 1, "_Z3cosf")
