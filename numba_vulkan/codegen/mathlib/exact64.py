"""float64 square root and division, correctly rounded, from the driver's
float32 reciprocal square root and reciprocal.

The driver's float64 ``Sqrt`` and ``OpFDiv`` (which Vulkan lets be
inexact) are slow. Here both are computed as GPU libraries compute them,
from a float32 seed refined with fused multiply-adds.

Square root
-----------

On an H200 (device time of the
``sqrt_f64`` math kernel, ms, one process: ``python
benchmarks/bench_variants.py --only sqrt_f64 --variants
driver_sqrt64,sqrt64_convert,sqrt64_integer``): this root 0.286,
numba-cuda's ``sqrt.rn.f64`` 0.285, the driver's ``Sqrt`` 0.499; seeded by
two conversions (``sqrt64_convert``) 0.289, by integer operations on the
high word only (``sqrt64_integer``, which reached ``2**-900 .. 2**1020``)
0.326: the GPU is issue-bound here, and the conversion saves integer
operations.

1. The seed: ``x`` converted to float32 (one conversion), the driver's
   ``InverseSqrt`` of that (2 ULP), and the float64 built from its bits
   by integer operations (its exponent rebiased, the significand cut to
   20 bits, the low word zero) is ``r``, ``1/sqrt(x)`` within
   ``2**-19.6``.
2. ``r`` has 21 significant bits, so ``r * r`` is exact, and
   ``t = 1 - x r**2`` is (one fma) within ``2**-72`` of exact;
   ``1/sqrt(x) = r (1 - t)**-1/2 = r (1 + t/2 + 3/8 t**2 + 5/16 t**3 ...)``,
   so ``y = r + r t (1/2 + 3/8 t)`` is ``1/sqrt(x)`` within
   ``(1 + 2**-4.4) 2**-53`` (relative), and ``s = x y`` the root within
   2.05 ULP.
3. ``s + (y/2) (x - s**2)``, the residual exact but for one rounding and
   the sum rounded once (fma), is within ``2**-50.3`` ULP of ``sqrt(x)``:
   with ``s = sqrt(x) + e`` and ``y/2 = (1 + c)/(2 sqrt(x))``, the error is
   ``-e (c + d) - e**2 / (2 sqrt(x))`` (``d`` the residual's rounding).

So the result is the correctly rounded root except where ``sqrt(x)`` is
within ``2**-50.3`` ULP of a midpoint between two floats. Those ``x`` are
few and can be listed: ``x = n**2 / 4 + K/4`` in units of ``ulp(sqrt(x))**2``
with ``n`` odd and ``|K|`` small, ``n**2 = -K`` modulo a power of two, solved
by 2-adic square roots. ``tests/codegen/mathlib/test_exact64.py`` lists
every one within ``2**-43`` ULP (1,458 in ``[1, 4)``; every step, the
float32 conversion too, scales by ``4**k`` exactly) and runs this IR on
them, on the host, with every seed within 2 ULP of the exact
``1/sqrt(f)`` (``f`` the float32 of ``x``): all are correctly rounded (and
stay so with seeds up to 32 ULP off).

The seed needs ``x`` and its root's reciprocal normal float32 numbers:
``x`` outside ``2**-120 .. 2**120`` (zeros, subnormals, infinities, NaNs,
negative numbers and the extremes) takes a branch to the driver's
``Sqrt``.

Division
--------

numba-cuda's ``div.rn.f64`` compiles to a reciprocal seed, 8 fma-class
operations and a range check; the driver's ``OpFDiv`` took 1.18 times its
time on an H200 (``div_f64``), and most of the users' float64 n-body
(``1.0 / (d2 * math.sqrt(d2))``). Here, with ``T = 1.5 * 2**-19``:

1. The seed ``y``: ``|b|`` converted to float32, the driver's reciprocal of
   that (Vulkan: 2.5 ULP), the float64 built from its bits as the root's
   seed, 2 units of its last (20th) bit added and ``b``'s sign given
   (integer operations). The bias exceeds the conversion's, the driver's
   and the cut's errors together, so ``e = 1 - b y`` is negative, above
   ``-2.4 * 2**-20``.
2. One signed comparison of ``e``'s high word checks ``-T < e <= 0``: a
   check of the seed itself, whatever the driver gave (seeds up to 7
   steps of the float32 off pass), which also bounds ``|b|`` to about
   ``2**-129 .. 2**126`` (zeros, infinities, NaNs and float32's extremes
   fail).
3. ``y + y (e + e**2)`` is ``1/b (1 - e**3)``, within ``T**3 = 2**-55.2``
   (and ``2**-70`` of rounding) of ``1/b``, so its rounding ``y1`` is a
   neighbour of ``1/b``. Markstein's step ``y2 = y1 + y1 (1 - b y1)`` (the
   residual exact) is then ``RN(1/b)``: it computes
   ``1/b - b (y1 - 1/b)**2``, below ``1/b``, which crosses a midpoint only
   if ``1/b`` lies just above one and ``y1`` is the neighbour below; for
   ``b``'s significand ``B`` and ``1/b``'s ``Y`` (integers) that needs
   ``B + M >= 2 M Y`` where ``1/b`` is ``M / (2 B)`` ULP above the
   midpoint: only ``B = 2**53 - 1`` (the known exception, a significand of
   all ones). There ``1/b`` lies above its midpoint, and so does
   ``1/b (1 - e**3)``, ``e`` being negative and, with the seed's 21 bits,
   at least ``2**-21`` in magnitude (or ``+2**-53``, which fails the check):
   ``y1`` is the neighbour above.
4. ``q = RN(a y2)``, ``r = a - b q`` (exact), and ``RN(q + r y2)``:
   ``q + r y2 = a/b + (a/b - q) (b y2 - 1)``, ``|b y2 - 1| <= B 2**-106``.
   ``a/b`` is ``|D| / (2 B)`` ULP from the nearest midpoint, ``D`` a
   nonzero integer (a midpoint would need ``a`` wider than 53 bits). ``q``
   is within 1.5 ULP of ``a/b``, so the error is below ``1.5 * 2**-53``
   ULP, less than that for ``|D| >= 3``; for ``|D| <= 2``, ``q`` is one of
   the two floats around ``a/b``, ``(B + |D|) / (2 B)`` ULP away at most,
   and the error below ``(B + |D|) 2**-107`` ULP, less than
   ``|D| / (2 B)`` as ``(B + 1) B < 2**106``. So the sum rounds as ``a/b``
   does (Markstein's theorem, here with ``q`` up to 1.5 ULP off).

The residual needs ``|q| >= 2**-830`` (with ``|b| >= 2**-129`` it is a
multiple of ``2**-1063``) and ``q`` finite with room below the largest
float: one ordered comparison of ``q``'s high word read as a float32 with
``2**-830``'s, which ``|q| >= 2**1017`` (read as float32 NaNs), infinities,
NaNs, zeros and subnormals fail, takes the rest to the driver's
``OpFDiv`` (so do zero numerators). Fast path: a conversion, the driver's
float32 reciprocal, 2 integer operations for the seed, 8 fma-class float64
operations, 2 comparisons and a branch.

``tests/codegen/mathlib/test_exact64.py`` runs this IR on the host with
seeds from 64 ULP below to 64 above the nearest float32 on quotients
nearest midpoints (``|D| = 1``), divisors whose reciprocals are nearest
midpoints (the divisors of ``2**105 -+ 1``, ``2**106 -+ 1``) or just below
one (which the sequence without Markstein's step fails), and a million
random pairs, against exact rational quotients.

Only for targets whose ``Fma`` rounds once (``Target.fused_fma``): an
emulated fma is neither exact enough nor cheap.
"""

import struct

from numba_vulkan.codegen.mathlib.dsl import F32, F64, I32, I64
from numba_vulkan.codegen.mathlib.library import operation

#: The names the linker calls in place of ``llvm.sqrt.f64`` and ``fdiv double``.
SQRT = "sqrt.f64"
DIVIDE = "fdiv.f64"

#: The high words of ``2**-120`` and ``2**120``: the fast path's range.
_LOW, _HIGH = (1023 - 120) << 20, (1023 + 120) << 20


def _high_word(m, x):
    return m.trunc_int(m.bits(x) >> 32, I32)


def _from_high_word(m, hi):
    """The float64 whose high word is ``hi`` (positive) and low word 0."""
    return m.from_bits(m.extend(hi, I64) << 32, F64)


def _high_word_of_float32(bits, plus=0):
    """The high word of the float64 of the positive float32 whose bits are
    ``bits``, its significand cut to 20 bits (and ``plus`` units of the
    20th bit added): a shift, and the exponent rebiased from 127 to 1023 by
    one add."""
    return (bits >> 3) + (((1023 - 127) << 20) + plus)


def rsqrt_seed(m, x):
    """``1/sqrt(x)`` within ``2**-19.6`` with 21 significant bits, for ``x``
    in ``2**-120 .. 2**120``."""
    rb = m.bits(m.approximate_rsqrt(m.convert(x, F32)))
    return _from_high_word(m, _high_word_of_float32(rb))


@operation(SQRT, "double", 1)
def sqrt(m, x):
    hi = _high_word(m, x)
    # One unsigned comparison, which zeros, negatives, infinities and NaNs fail too.
    fast = (hi - _LOW).below(_HIGH - _LOW)

    def corrected():
        r = rsqrt_seed(m, x)
        t = m.fma(-x, r * r, 1.0)
        y = m.fma(r * t, m.fma(t, 0.375, 0.5), r)
        s = x * y
        half_y = m.from_bits(m.bits(y) - (1 << 52))
        return m.fma(m.fma(-s, s, x), half_y, s)

    return m.branch(fast, corrected, lambda: m.sqrt(x))


#: The sign bit of a high word, as a signed 32-bit integer.
_SIGN = -(1 << 31)

#: The seed's bias: 2 units of its 20th significand bit, above every error
#: of the float32 reciprocal and the cut, so that ``1 - b y`` is negative.
_BIAS = 2

#: ``1 - b y`` passes where its high word, signed, is below this: negative
#: and above ``-1.5 * 2**-19`` (the high word of ``-1.5 * 2**-19``).
_SEED_LIMIT = _SIGN | (((1023 - 19) << 20) | (1 << 19))

#: ``q = a y`` passes where its high word, read as a float32, is at least
#: this in magnitude (``|q| >= 2**-830``): the high words of ``|q| >= 2**1017``
#: read as float32 NaNs (those of infinities and NaNs too) and fail the
#: ordered comparison.
_QUOTIENT_LOW = struct.unpack("<f", struct.pack("<I", (1023 - 830) << 20))[0]


@operation(DIVIDE, "double", 2)
def divide(m, a, b):
    # y ~ 1/b: the driver's float32 reciprocal of |b| as a float64 (as
    # rsqrt_seed), biased up and given b's sign.
    reciprocal = m.approximate_divide(m.value(1.0, F32), m.fabs(m.convert(b, F32)))
    high = _high_word_of_float32(m.bits(reciprocal), _BIAS) | (_high_word(m, b) & _SIGN)
    y = _from_high_word(m, high)
    e = m.fma(-b, y, 1.0)
    # One signed comparison: the seed is as good as it must be, and b within
    # about 2**-129 .. 2**126 (zeros, infinities and NaNs fail).
    seeded = _high_word(m, e) < _SEED_LIMIT
    # Third order: y (1 + e + e**2) is 1/b within 2**-55.2, then y = RN(1/b)
    # by Markstein's step.
    y = m.fma(y, m.fma(e, e, e), y)
    y = m.fma(y, m.fma(-b, y, 1.0), y)
    q = a * y
    # |q| in 2**-830 .. 2**1017 (zero, subnormal, huge, infinite and NaN
    # quotients fail): one comparison of q's high word as a float32.
    fast = seeded & (m.fabs(m.from_bits(_high_word(m, q), F32)) >= _QUOTIENT_LOW)
    return m.branch(fast, lambda: m.fma(m.fma(-b, q, a), y, q), lambda: m.divide(a, b))
