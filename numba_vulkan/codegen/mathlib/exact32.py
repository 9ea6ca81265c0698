"""float32 division and square root, correctly rounded, in float32.

Vulkan lets a driver divide within 2.5 ULP and take square roots within 3,
so the code generator used to compute both in float64 and round once
(:func:`numba_vulkan.codegen.legalize.exact_float32`): correct, but two
conversions and a float64 operation each. Here the driver's approximation
is corrected in float32 with fused multiply-adds, as GPU libraries compute
their correctly rounded operations: a reciprocal refined by one Newton step,
then two corrections of the quotient (or root) by its exact residual
(``a - b q`` and ``x - s s``, exact through fma), each of which shrinks the
error to a small fraction of the previous one before the last rounding.

The corrections need the residuals exact and every intermediate normal:
operands beyond ``2**-60 .. 2**60`` (division) or ``2**-100 .. 2**100``
(square root), infinities and NaNs (and zero divisors) take a branch to
the float64 computation, which user data almost never takes.

Only for targets whose ``Fma`` rounds once (``Target.fused_fma``): an
emulated fma is neither exact enough nor cheap.
"""

from numba_vulkan.codegen.mathlib.dsl import F32, F64
from numba_vulkan.codegen.mathlib.library import operation

#: Names the linker calls in place of ``fdiv float`` and ``llvm.sqrt.f32``.
DIVIDE = "fdiv.f32"
SQRT = "sqrt.f32"


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


@operation(SQRT, "float", 1)
def sqrt(m, x):
    zero = x.eq(0.0)
    fast = m.either((x >= 2.0 ** -100) & (x <= 2.0 ** 100), zero)

    def corrected():
        # Zeros (common in user data) stay on this path: their root is
        # themselves, whatever the steps make of them. A device that flushes
        # subnormals takes those for zeros too: they come back as zeros.
        s = m.approximate_sqrt(x)
        half = 0.5 * m.approximate_divide(1.0, s)
        s = m.fma(m.fma(-s, s, x), half, s)
        return m.select(zero, m.copysign(0.0, x), m.fma(m.fma(-s, s, x), half, s))

    return m.branch(fast, corrected, lambda: _in_float64(m, m.sqrt, x))
