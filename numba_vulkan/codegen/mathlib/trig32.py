"""float32 circular functions and their inverses, computed in float32.

``sin``, ``cos`` and ``tan`` reduce ``x`` by the nearest multiple of pi/2
with a three-part Cody-Waite constant and fma, for ``|x|`` below
:data:`REDUCTION_LIMIT`; larger arguments (rare in kernels) take libclc's
own function, which reduces by Payne-Hanek's method, on a branch. ``atan``
and ``atan2`` reduce to ``atan(q)``, ``0 <= q <= 1``.

Polynomial coefficients come from ``scripts/fit_poly.py`` (the command that
gives each is beside it); the worst errors measured are in
``tests/codegen/mathlib/test_trig32.py``.
"""

from numba_vulkan.codegen.mathlib.common import reciprocal, round_multiple
from numba_vulkan.codegen.mathlib.library import define

INF = float("inf")

TWO_OVER_PI = 0.6366197466850281
#: pi/2 as the float32 nearest it and the float32 nearest each remainder.
#: With fma, ``x - k P1`` is exact for ``|k| < 2**23``, and the reduced
#: argument is within 2 * 2**-24 of its own magnitude for every float32
#: ``|x| < 2**22`` (measured at the float32 values nearest each multiple of
#: pi/2, where cancellation is worst).
PIO2_1 = 1.57079637050628662109375
PIO2_2 = -4.371138828673793e-08
PIO2_3 = -1.7151245100058819e-15
#: Below this the fast path holds: ``x * 2/pi`` rounds to an integer by the
#: shifter and the reduction is exact enough up to 2**22, but the float32
#: 2/pi is 2.6e-8 off, so ``k`` may be one off the nearest at a half and
#: ``|r|`` reaches pi/4 + 0.0423 (``z = r**2 <= 0.6851``) at 2**20, which the
#: kernels are fitted for.
REDUCTION_LIMIT = 1048576.0

#: pi/2 as a float32 and the float32 nearest the rest.
PIO2_HI = PIO2_1
PIO2_LO = PIO2_2

#: sin(r)/r - 1 = z S(z), z = r**2: fit_poly.py --function
#: "sin(sqrt(x))/sqrt(x) - 1" --interval 0 0.686 --degree 3 --powers 1 2 3 --absolute
SIN = (-0.16666650772094727, 0.00833191443234682, -0.0001948205172084272)
#: cos(r) - 1 = z C(z): fit_poly.py --function "cos(sqrt(x)) - 1"
#: --interval 0 0.686 --degree 4 --powers 1 2 3 4 --absolute
COS = (-0.5, 0.04166663810610771, -0.0013886947417631745, 2.4391498300246894e-05)
#: tan(r)/r - 1 = z T(z): fit_poly.py --function "tan(sqrt(x))/sqrt(x) - 1"
#: --interval 0 0.686 --degree 7 --powers 1 2 3 4 5 6 7 --absolute
TAN = (0.3333337903022766, 0.1333169937133789, 0.054164595901966095, 0.02076365239918232,
       0.012126225046813488, -0.0014820224605500698, 0.00512147368863225)
#: atan(q)/q - 1 = z A(z), 0 <= q <= 1: fit_poly.py --function
#: "atan(sqrt(x))/sqrt(x) - 1" --interval 0 1 --degree 8 --powers 1 2 3 4 5 6 7 8 --absolute
ATAN = (-0.33333179354667664, 0.19994446635246277, -0.14216816425323486, 0.10689372569322586,
        -0.07602958381175995, 0.04381805285811424, -0.01674356497824192, 0.0030150411184877157)


def reduce_quadrant(m, x):
    """``(r, k)`` with ``x = k pi/2 + r``, ``|r| <= pi/4`` and a little
    more (:data:`REDUCTION_LIMIT`), ``k`` an int32, for ``|x| < 2**22``."""
    kf, k = round_multiple(m, x, TWO_OVER_PI)
    r = m.fma(-kf, PIO2_1, x)
    r = m.fma(-kf, PIO2_2, r)
    return m.fma(-kf, PIO2_3, r), k


def _sin_kernel(m, r, z):
    return m.fma(r * z, m.poly(z, SIN), r)


def _cos_kernel(m, z):
    return m.fma(z, m.poly(z, COS), 1.0)


def _flip(m, v, sign):
    """``v`` with its sign bit xor'ed with ``sign`` (an int32 of the bit alone)."""
    return m.from_bits(m.bits(v) ^ sign)


def _reduced_or_libclc(m, x, name, fast):
    """``fast(x)`` where the reduction holds, else libclc's ``name`` of ``x``."""
    return m.branch(m.fabs(x) < REDUCTION_LIMIT, lambda: fast(x),
                    lambda: m.call(name, x))


@define("sin", "float")
def sin(m, x):
    def fast(x):
        r, k = reduce_quadrant(m, x)
        z = r * r
        v = m.select((k & 1).eq(0), _sin_kernel(m, r, z), _cos_kernel(m, z))
        # The kernel's correction has the opposite sign of r, so -0 would
        # come out +0.
        return m.select(x.eq(0.0), x, _flip(m, v, (k & 2) << 30))
    return _reduced_or_libclc(m, x, "_Z3sinf", fast)


@define("cos", "float")
def cos(m, x):
    def fast(x):
        r, k = reduce_quadrant(m, x)
        z = r * r
        v = m.select((k & 1).eq(0), _cos_kernel(m, z), _sin_kernel(m, r, z))
        return _flip(m, v, ((k + 1) & 2) << 30)
    return _reduced_or_libclc(m, x, "_Z3cosf", fast)


@define("tan", "float")
def tan(m, x):
    def fast(x):
        r, k = reduce_quadrant(m, x)
        z = r * r
        t = m.fma(r * z, m.poly(z, TAN), r)
        # -1/t on odd quadrants, where t is never 0: the driver's quotient
        # (2.5 ULP) and a Newton step.
        c = m.approximate_divide(-1.0, t)
        c = m.fma(c, m.fma(t, c, 1.0), c)
        return m.select(x.eq(0.0), x, m.select((k & 1).eq(0), t, c))
    return _reduced_or_libclc(m, x, "_Z3tanf", fast)


def atan_kernel(m, q):
    """``atan(q)`` for ``0 <= q <= 1``."""
    z = q * q
    return m.fma(q * z, m.poly(z, ATAN), q)


@define("atan", "float")
def atan(m, x):
    a = m.fabs(x)
    big = a > 1.0
    # atan(a) = pi/2 - atan(1/a); past 2**40 the result is pi/2 all the same.
    q = m.select(big, reciprocal(m, m.minimum(a, 1099511627776.0)), a)
    t = atan_kernel(m, q)
    t = m.copysign(m.select(big, (PIO2_LO - t) + PIO2_HI, t), x)
    # Below 2**-12, x is atan(x) rounded (within 1/3 ULP); taken as it is,
    # a subnormal x also survives a device that flushes arithmetic's.
    return m.select(a < 0.000244140625, x, t)


@define("atan2", "float", arity=2)
def atan2(m, y, x):
    ax, ay = m.fabs(x), m.fabs(y)
    small, large = m.minimum(ax, ay), m.maximum(ax, ay)
    # Both scaled by 2**-e, e the exponent of the larger, so that the
    # divisor is in [1, 2) (2**-22 and up for subnormals, [2, 4) past
    # 2**127, where 2**-e is not a normal float) whatever the ratio: the
    # driver's quotient holds its accuracy for divisors within 2**+-126
    # only. An infinite ``large`` gives NaN here, as 0/0 does.
    exponent = m.bits(m.minimum(large, 1.7014117331926443e38)) & 0x7F800000
    scale = m.from_bits(m.int(0x7F000000) - exponent)
    n, d = small * scale, large * scale
    c = m.approximate_divide(1.0, d)
    q = n * c
    q = m.fma(m.fma(-q, d, n), c, q)
    # 0/0 and finite/inf: 0; inf/inf: 1 (pi/4 and its quadrants).
    q = m.select(m.isnan(q), m.select(small.eq(INF), 1.0, 0.0), q)
    t = atan_kernel(m, q)
    # t, pi/2 - t, pi - t or pi/2 + t, as the larger is |y| and x < 0 (-0
    # included): with the multiple of pi/2 added last, the result rounds
    # about once.
    swapped = ay > ax
    negative = m.bits(x) < 0
    f = m.select(swapped, 1.0, m.select(negative, 2.0, 0.0))
    t = m.select(swapped ^ negative, -t, t)
    angle = m.fma(f, PIO2_HI, m.fma(f, PIO2_LO, t))
    return m.select(m.isnan(ax + ay), x + y, m.copysign(angle, y))


__all__ = ["REDUCTION_LIMIT", "atan", "atan2", "cos", "reduce_quadrant",
           "sin", "tan"]
