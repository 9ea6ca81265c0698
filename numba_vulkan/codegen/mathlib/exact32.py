"""float32 division and square root, correctly rounded, in float32.

Vulkan lets a driver divide within 2.5 ULP and take square roots within 3,
so the code generator used to compute both in float64 and round once
(:func:`numba_vulkan.codegen.legalize.exact_float32`): correct, but two
conversions and a float64 operation each. Here the driver's approximation
is corrected in float32 with fused multiply-adds, as GPU libraries compute
their correctly rounded operations. The quotient: the driver's reciprocal
refined by one Newton step, then two corrections by the exact residual
``a - b q`` (exact through fma), each of which shrinks the error to a small
fraction of the previous one before the last rounding. The root: the
driver's reciprocal root, one coupled Newton step for the root and half its
reciprocal, and one correction by the exact residual ``x - s s``.

The corrections need the residuals exact and every intermediate normal:
operands beyond ``2**-60 .. 2**60`` (division) or ``2**-100 .. 2**100``
(square root), infinities and NaNs (zero divisors, and zero roots) take a
branch to the float64 computation, which user data seldom takes.

Only for targets whose ``Fma`` rounds once (``Target.fused_fma``): an
emulated fma is neither exact enough nor cheap.
"""

from numba_vulkan.codegen.mathlib.dsl import F32, F64
from numba_vulkan.codegen.mathlib.library import operation

#: Names the linker calls in place of ``fdiv float`` and ``llvm.sqrt.f32``
#: (``SQRT_NVIDIA`` on devices with NVIDIA's reciprocal root).
DIVIDE = "fdiv.f32"
SQRT = "sqrt.f32"
SQRT_NVIDIA = "sqrt.f32.nvidia"


def _in_float64(m, operation, *args):
    wide = [m.convert(a, F64) for a in args]
    return m.convert(operation(*wide), F32)


@operation(DIVIDE, "float", 2)
def divide(m, a, b):
    magnitude = m.fabs(a)
    a_fits = m.either((magnitude >= 2.0 ** -60) & (magnitude <= 2.0 ** 60), a.eq(0.0))
    magnitude = m.fabs(b)
    fast = a_fits & (magnitude >= 2.0 ** -60) & (magnitude <= 2.0 ** 60)

    def corrected():
        y = m.approximate_divide(1.0, b)
        y = m.fma(m.fma(-b, y, 1.0), y, y)
        q = a * y
        # A zero numerator's quotient is its product's zero: the
        # corrections would add zeros of other signs to it.
        exact = m.fma(m.fma(-b, q, a), y, q)
        return m.select(a.eq(0.0), q, m.fma(m.fma(-b, exact, a), y, exact))

    return m.branch(fast, corrected, lambda: _in_float64(m, m.divide, a, b))


#: The bits of 2**-100 and the count of floats from there to 2**100: the square root's
#: ordinary range, tested by one unsigned comparison of the bits, which
#: zeros, negatives, infinities and NaNs fail too.
_ROOT_LOW, _ROOT_SPAN = 0x0D800000, 0x71800000 - 0x0D800000 + 1


def _root(m, x, correct):
    """The root of ``x`` by ``correct(r)`` from the driver's reciprocal root
    ``r`` in the ordinary range, by float64 elsewhere."""
    fast = (m.bits(x) - _ROOT_LOW).below(_ROOT_SPAN)
    return m.branch(fast, lambda: correct(m.approximate_rsqrt(x)),
                    lambda: _in_float64(m, m.sqrt, x))


@operation(SQRT, "float", 1)
def sqrt(m, x):
    def corrected(r):
        # r (one instruction) gives the root x r and half its reciprocal
        # r / 2; one coupled Newton step (Goldschmidt's) refines both, and a
        # last correction by the exact residual x - s s rounds. Simulated
        # exactly for every float32 mantissa of both exponent parities, it
        # is correctly rounded for every r within 64 ULP of 1 / sqrt(x)
        # (tests/codegen/mathlib/test_exact32.py), where the shorter
        # sequence of :func:`sqrt_nvidia` needs r nearly exact.
        s = x * r
        h = 0.5 * r
        e = m.fma(-s, h, 0.5)
        s = m.fma(s, e, s)
        h = m.fma(h, e, h)
        return m.fma(m.fma(-s, s, x), h, s)

    return _root(m, x, corrected)


@operation(SQRT_NVIDIA, "float", 1)
def sqrt_nvidia(m, x):
    """The root for devices whose ``InverseSqrt`` is NVIDIA's reciprocal
    root instruction (:attr:`Target.nvidia_rsqrt`): one correction of
    ``x r`` by the exact residual, numba-cuda's ``sqrt.rn`` sequence on the
    same instruction. Checked on every float32 input on an H200: none but
    the flushed subnormals rounded wrongly
    (``benchmarks/results/mathlib_h200.log``); 0.152 ms against 0.177 for
    :func:`sqrt` on the math benchmark's root."""
    def corrected(r):
        s = x * r
        return m.fma(m.fma(-s, s, x), 0.5 * r, s)

    return _root(m, x, corrected)
