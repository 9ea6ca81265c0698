"""float64 hyperbolic tangent (float32's is in ``special32.py``).

Below 0.55 an odd polynomial; above, ``tanh(a) = 1 - 2 / (exp(2a) + 1)``,
whose second term is at most half the result, so that its error shrinks in
the difference. tanh is 1 from 19.06; the clamp at 20 keeps exp finite.
"""

from numba_vulkan.codegen.mathlib import exp64
from numba_vulkan.codegen.mathlib.library import define

#: (tanh(x)/x - 1) / x**2 as a polynomial in x**2, |x| <= 0.55: fit_poly.py
#: --function "(tanh(sqrt(x))/sqrt(x) - 1)/x" --interval 0 0.3025 --degree 9
#: --type float64
SMALL = (-0.3333333333333331, 0.13333333333316344, -0.05396825394937543,
         0.02186948772636101, -0.008863217879480752, 0.003591906338825603,
         -0.0014541282822517416, 0.0005818045155840352, -0.00021459682741829716,
         5.3945378887606164e-05)


@define("tanh", "double")
def tanh(m, x):
    a = m.fabs(x)
    t = a * a
    small = m.fma(a * t, m.poly(t, SMALL), a)
    large = m.fma(-2.0, m.divide(1.0, exp64.exp(m, 2.0 * m.minimum(a, 20.0)) + 1.0), 1.0)
    y = m.select(a < 0.55, small, large)
    return m.select(m.isnan(x), x, m.copysign(y, x))
