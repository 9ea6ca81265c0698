"""float64 square root, correctly rounded, from the driver's float32
reciprocal square root.

The driver's float64 ``Sqrt`` (which Vulkan lets be inexact) is slow: an
H200 took 1.75 times numba-cuda's ``sqrt.rn.f64``. Here the root is
computed as GPU libraries compute it, from a float32 seed refined with
fused multiply-adds:

1. The seed: the high word of ``x`` gives a float32 ``f`` in ``[0.5, 2)``
   with the top 20 bits of its significand and the parity of its exponent;
   the driver's ``InverseSqrt`` of ``f`` (2 ULP), cut to 20 bits and given
   the exponent ``x`` needs, is ``r``, ``1/sqrt(x)`` within ``2**-19.6``.
   Integer operations only: conversions between float32 and float64 run
   at a quarter of the float64 rate on NVIDIA's GPUs.
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
every one within ``2**-43`` ULP (1,458 in ``[1, 4)``; every step scales by
``4**k`` exactly) and runs this IR on them, on the host, with every seed
within 2 ULP of the exact ``1/sqrt(f)``: all are correctly rounded (and
stay so with seeds up to 32 ULP off).

The steps need the residual's rounding relative and the products normal:
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
    # One unsigned comparison, which zeros, negatives, infinities and NaNs fail too.
    fast = (hi - _LOW).below(_HIGH - _LOW)

    def corrected():
        r = rsqrt_seed(m, x, hi)
        t = m.fma(-x, r * r, 1.0)
        y = m.fma(r * t, m.fma(t, 0.375, 0.5), r)
        s = x * y
        half_y = m.from_bits(m.bits(y) - (1 << 52))
        return m.fma(m.fma(-s, s, x), half_y, s)

    return m.branch(fast, corrected, lambda: m.sqrt(x))
