"""Steps that many of the library's functions share.

GPUs convert between floats and integers, and round to integers, at a
fraction of the rate of their float arithmetic (a quarter on NVIDIA's): the
steps here do it with float adds of a power-of-two constant instead, whose
rounding is the rounding wanted, and read the integer from its low bits.
"""

from numba_vulkan.codegen.mathlib.dsl import BITS, F32, F64

#: 1.5 * 2**(mantissa bits): added to a float of magnitude below 2**22
#: (float32; 2**51 for float64) it rounds that to an integer, ties to even,
#: and the sum's low bits hold the integer in two's complement.
SHIFTER = {F32: 12582912.0, F64: 6755399441055744.0}
_SHIFTER_BITS = {F32: 0x4B400000, F64: 0x4338000000000000}
_MANTISSA = {F32: 23, F64: 52}
_BIAS = {F32: 127, F64: 1023}


def round_multiple(m, x, c, offset=0.0):
    """``(kf, k)``: ``x * c`` (rounded once, by fma) rounded to an integer,
    as a float and as an integer of the float's width, for
    ``|x * c| < 2**22`` (float32; ``2**51`` float64). ``offset`` is added
    before rounding (0.5 gives the floor of values that are not integers)."""
    shifter = SHIFTER[x.type]
    t = m.fma(x, c, shifter + offset) if offset else m.fma(x, c, shifter)
    kf = t - shifter
    return kf, m.bits(t) - _SHIFTER_BITS[x.type]


def integer_to_float(m, k, ty):
    """The integer ``k`` (of ``ty``'s width, ``|k| < 2**22`` for float32,
    ``2**51`` for float64) as a float of ``ty``, exactly."""
    return m.from_bits(k + _SHIFTER_BITS[ty], ty) - SHIFTER[ty]


def power_of_two(m, k, ty):
    """``2**k`` for an integer ``k`` (of ``ty``'s width) in the normal range."""
    return m.from_bits((k + _BIAS[ty]) << _MANTISSA[ty], ty)


def scale(m, p, k):
    """``p * 2**k`` rounded once, for an integer ``k`` of ``p``'s width with
    ``|k| <= 2 * (bias + 1)``: as two factors, each normal, so that
    subnormal and infinite results come out as one multiplication rounds
    them."""
    half = k >> 1
    return p * power_of_two(m, half, p.type) * power_of_two(m, k - half, p.type)


def reciprocal(m, d):
    """``1/d`` within about half an ULP: in float32 the driver's reciprocal
    (within 2.5 ULP) refined by one Newton step, where a correctly rounded
    division would buy nothing; in float64 a division (the driver's own).
    ``d`` must be normal with a normal reciprocal."""
    if d.type == F32:
        y = m.approximate_divide(1.0, d)
        return m.fma(m.fma(-d, y, 1.0), y, y)
    return m.divide(1.0, d)


def fast_two_sum(m, a, b):
    """``(s, e)`` with ``s + e = a + b`` exactly and ``s = a + b`` rounded,
    for ``|a| >= |b|`` (or ``a`` zero)."""
    s = a + b
    return s, (a - s) + b


def log_specials(m, x, y):
    """``y`` (a logarithm of finite positive ``x``) with the logarithm's
    results at zero, infinity, negative and NaN ``x``."""
    inf = float("inf")
    y = m.select(x.eq(inf), inf, y)
    y = m.select(x.eq(0.0), -inf, y)
    return m.select(m.either(x < 0.0, m.isnan(x)), float("nan"), y)


__all__ = ["BITS", "SHIFTER", "fast_two_sum", "integer_to_float", "log_specials", "power_of_two", "reciprocal", "round_multiple", "scale"]
