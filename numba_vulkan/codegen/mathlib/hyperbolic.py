"""Hyperbolic tangent, float32 and float64, each computed in its own width.

Below 0.55 an odd polynomial; above, ``tanh(a) = 1 - 2 / (exp(2a) + 1)``,
whose second term is at most half the result, so that its error shrinks in
the difference (and so a reciprocal within half an ULP serves: in float32
the driver's refined by a Newton step). tanh is 1 from 9.01 (float32) and 19.06 (float64); the clamp
at 20 keeps exp finite.
"""

from numba_vulkan.codegen.mathlib import exp32, exp64
from numba_vulkan.codegen.mathlib.common import reciprocal
from numba_vulkan.codegen.mathlib.library import define

#: (tanh(x)/x - 1) / x**2 as a polynomial in x**2, |x| <= 0.55: fit_poly.py
#: --function "(tanh(sqrt(x))/sqrt(x) - 1)/x" --interval 0 0.3025 --degree 4
#: (--degree 9 --type float64).
SMALL = {
    "float": (-0.3333333134651184, 0.13333037495613098, -0.05389508977532387,
              0.021222170442342758, -0.006446138024330139),
    "double": (-0.3333333333333331, 0.13333333333316344, -0.05396825394937543,
               0.02186948772636101, -0.008863217879480752, 0.003591906338825603,
               -0.0014541282822517416, 0.0005818045155840352, -0.00021459682741829716,
               5.3945378887606164e-05),
}
#: exp for arguments known finite and at most 104: no clamp, no NaN check.
EXP = {"float": exp32.exp_finite, "double": exp64.exp}


def tanh(m, x, ty):
    a = m.fabs(x)
    t = a * a
    small = m.fma(a * t, m.poly(t, SMALL[ty]), a)
    large = m.fma(-2.0, reciprocal(m, EXP[ty](m, 2.0 * m.minimum(a, 20.0)) + 1.0), 1.0)
    y = m.select(a < 0.55, small, large)
    return m.select(m.isnan(x), x, m.copysign(y, x))


for _ty in ("float", "double"):
    define("tanh", _ty)(lambda m, x, ty=_ty: tanh(m, x, ty))
