"""float64 square root, correctly rounded, from the driver's float32
reciprocal square root.

The driver's float64 ``Sqrt`` (which Vulkan lets be inexact) is slow. Here
the root is computed as GPU libraries compute it, from a float32 seed
refined with fused multiply-adds. On an H200 (device time of the
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

Only for targets whose ``Fma`` rounds once (``Target.fused_fma``): an
emulated fma is neither exact enough nor cheap.
"""

from numba_vulkan.codegen.mathlib.dsl import F32, F64, I32, I64
from numba_vulkan.codegen.mathlib.library import operation

#: The name the linker calls in place of ``llvm.sqrt.f64``.
SQRT = "sqrt.f64"

#: The high words of ``2**-120`` and ``2**120``: the fast path's range.
_LOW, _HIGH = (1023 - 120) << 20, (1023 + 120) << 20


def _high_word(m, x):
    return m.trunc_int(m.bits(x) >> 32, I32)


def _from_high_word(m, hi):
    """The float64 whose high word is ``hi`` (positive) and low word 0."""
    return m.from_bits(m.extend(hi, I64) << 32, F64)


def _high_word_of_float32(bits):
    """The high word of the float64 of the positive float32 whose bits are
    ``bits``, its significand cut to 20 bits: a shift, and the exponent
    rebiased from 127 to 1023 by one add."""
    return (bits >> 3) + ((1023 - 127) << 20)


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
