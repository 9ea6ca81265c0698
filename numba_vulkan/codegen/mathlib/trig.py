"""float64 sine and cosine (float32's are in ``trig32.py``).

The quadrant ``q = round(x * 2/pi)`` comes from the shifter constant, the
reduced argument ``r = x - q pi/2`` from a three-part Cody-Waite reduction
with fma (pi/2 as three float64 values), then minimax kernels for sin
and cos on ``[-pi/4, pi/4]`` (both computed: straight-line code), picked and
signed by q's low bits. Arguments too large for the three-part reduction
take a branch to libclc's own function, which does a full Payne-Hanek
reduction.
"""

from dataclasses import dataclass

from numba_vulkan.codegen.mathlib.common import round_multiple
from numba_vulkan.codegen.mathlib.library import define

NAN = float("nan")


@dataclass(frozen=True)
class Constants:
    """The constants of a width."""

    two_over_pi: float
    #: pi/2 in three parts of the width.
    half_pi: tuple
    #: Largest |x| the three-part reduction serves.
    limit: float
    #: (sin(r) - r) / r**3 as a polynomial in r**2.
    sin: tuple
    #: (cos(r) - 1 + r**2/2) / r**4 as a polynomial in r**2.
    cos: tuple


#: sin: fit_poly.py --function "(sin(sqrt(x)) - sqrt(x))/(x*sqrt(x))"
#: --interval 0 0.61685 --degree 6 --type float64; cos: --function
#: "(cos(sqrt(x)) - 1 + x/2)/(x*x)", the same interval and degree.
FLOAT64 = Constants(
    two_over_pi=0.6366197723675814,
    half_pi=(1.5707963267948966, 6.123233995736766e-17, -1.4973849048591698e-33),
    limit=1048576.0,
    sin=(-0.16666666666666666, 0.008333333333332206, -0.00019841269838999319,
         2.7557317576553045e-06, -2.5051574328582587e-08, 1.5979820373810847e-10,
         -3.244346304354305e-13),
    cos=(0.041666666666666664, -0.0013888888888886068, 2.4801587295906092e-05,
         -2.755731510166888e-07, 2.087542125797528e-09, -1.1272900027995534e-11,
         -6.156649549414336e-14))


def reduced(m, x, c):
    """``(r, q)``: ``x = q pi/2 + r`` with ``|r| <= pi/4``, ``q`` an integer of
    the width, for ``|x| <= c.limit``."""
    kf, q = round_multiple(m, x, c.two_over_pi)
    r = m.fma(-kf, c.half_pi[0], x)
    r = m.fma(-kf, c.half_pi[1], r)
    return m.fma(-kf, c.half_pi[2], r), q


def kernels(m, r, c):
    """``(sin r, cos r)`` for ``|r| <= pi/4``."""
    t = r * r
    sin = m.fma(r * t, m.poly(t, c.sin), r)
    cos = m.fma(t * t, m.poly(t, c.cos), m.fma(t, -0.5, 1.0))
    return sin, cos


def sine_or_cosine(m, x, quarter_turns, libclc, c):
    """sin(x) (``quarter_turns`` 0) or cos(x) (1: sin(x + pi/2)); ``libclc``
    names libclc's function for the large arguments."""
    def quick():
        r, q = reduced(m, x, c)
        q = q + quarter_turns
        sin, cos = kernels(m, r, c)
        y = m.select((q & 1).eq(0), sin, cos)
        y = m.select((q & 2).eq(0), y, -y)
        if quarter_turns == 0:
            # The reduction's later steps lose the sign of a zero.
            y = m.select(x.eq(0.0), x, y)
        return m.select(m.fabs(x) < float("inf"), y, NAN)

    return m.branch(m.either(m.fabs(x) <= c.limit, m.isnan(x)), quick,
                    lambda: m.call(libclc, x))


@define("sin", "double")
def sin(m, x):
    return sine_or_cosine(m, x, 0, "_Z3sind", FLOAT64)


@define("cos", "double")
def cos(m, x):
    return sine_or_cosine(m, x, 1, "_Z3cosd", FLOAT64)
