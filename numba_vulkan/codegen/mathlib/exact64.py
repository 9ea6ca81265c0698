"""float64 square root, correctly rounded, from the driver's float32
reciprocal square root.

The driver's float64 ``Sqrt`` (which Vulkan lets be inexact) is slow: an
H200 took 1.75 times numba-cuda's ``sqrt.rn.f64``. Here the root is
computed as GPU libraries compute it, from a float32 seed refined with
fused multiply-adds, and then rounded correctly by an exact test:

1. The seed: the high word of ``x`` gives a float32 ``f`` in ``[0.5, 2)``
   with the top 20 bits of its significand and the parity of its exponent;
   the driver's ``InverseSqrt`` of ``f`` (2 ULP), cut to 20 bits and given
   the exponent ``x`` needs, is ``r``, ``1/sqrt(x)`` within ``2**-19.6``.
   Integer operations only: conversions between float32 and float64 run
   at a quarter of the float64 rate on NVIDIA's GPUs.
2. ``r`` has 21 significant bits, so ``r * r`` is exact, and
   ``t = 1 - x r**2`` is (one fma) within ``2**-72`` of exact:
   ``sqrt(x) = x r (1 - t)**-1/2 = x r (1 + t/2 + 3/8 t**2 + 5/16 t**3 ...)``.
   ``s = fma(x, r, x r t (1/2 + 3/8 t))`` adds the correction to the exact
   product ``x r``: ``s`` is within ``0.5 + 0.04`` ULP of ``sqrt(x)``.
3. ``s`` is then the correctly rounded root or one of its neighbours;
   which one follows from the signs of ``x - s next(s)`` and
   ``x - s prev(s)``, each one fma whose rounding keeps the sign of the
   exact value: ``sqrt(x)`` is above ``(s + next(s)) / 2`` exactly when
   ``x - s next(s) > 0`` (both ``x`` and ``s next(s)`` are multiples of
   ``ulp(s)**2``, and the midpoint's square is ``s next(s) + ulp(s)**2 / 4``),
   below ``(prev(s) + s) / 2`` exactly when ``x - s prev(s) <= 0``. Never
   on a midpoint: its square has 108 significant bits.

The steps need ``x r**2`` and those remainders exact or of exact sign:
``x`` outside ``2**-900 .. 2**1020`` (zeros, subnormals, infinities, NaNs,
negative numbers and the extremes) takes a branch to the driver's
``Sqrt``.

Only for targets whose ``Fma`` rounds once (``Target.fused_fma``): an
emulated fma is neither exact enough nor cheap.
"""

from numba_vulkan.codegen.mathlib.dsl import F32, F64, I32, I64
from numba_vulkan.codegen.mathlib.library import operation

#: The name the linker calls in place of ``llvm.sqrt.f64``.
SQRT = "sqrt.f64"

#: The high words of ``2**-900`` and ``2**1020``: the fast path's range.
_LOW, _HIGH = (1023 - 900) << 20, (1023 + 1020) << 20


def _high_word(m, x):
    return m.trunc_int(m.bits(x) >> 32, I32)


def _from_high_word(m, hi):
    """The float64 whose high word is ``hi`` (positive) and low word 0."""
    return m.from_bits(m.extend(hi, I64) << 32, F64)


def rsqrt_seed(m, x, hi):
    """``1/sqrt(x)`` within ``2**-19.6`` with 21 significant bits, for ``x``
    positive and normal (``hi`` its high word)."""
    # f = x 2**-2j in [0.5, 2): the exponent's low bit and the top 20 bits
    # of the significand, below a float32 exponent of 126.
    f = m.from_bits(((hi << 3) & 0x00FFFFFF) | 0x3F000000, F32)
    rb = m.bits(m.approximate_rsqrt(f))
    # 1/sqrt(f) in (0.7, 1.42] times 2**-j, j = (E >> 1) - 511 for x's
    # biased exponent E: the float32 exponent rebiased by 1023 - 127, the
    # significand's top 20 bits.
    top = (rb >> 3) + (((1023 - 127) + 511) << 20) - ((hi >> 1) & 0x3FF00000)
    return _from_high_word(m, top)


@operation(SQRT, "double", 1)
def sqrt(m, x):
    hi = _high_word(m, x)
    fast = (hi >= _LOW) & (hi < _HIGH)

    def corrected():
        r = rsqrt_seed(m, x, hi)
        t = m.fma(-x, r * r, 1.0)
        s = m.fma(x, r, (x * r) * t * m.fma(t, 0.375, 0.5))
        bits = m.bits(s)
        up, down = m.from_bits(bits + 1), m.from_bits(bits - 1)
        rounded = m.select(m.fma(-s, up, x) > 0.0, up, s)
        return m.select(m.fma(-s, down, x) <= 0.0, down, rounded)

    return m.branch(fast, corrected, lambda: m.sqrt(x))
