"""float32 error function, computed in float32."""

from numba_vulkan.codegen.mathlib.exp32 import expm1_bounded
from numba_vulkan.codegen.mathlib.library import define

#: log(erfc(x)) / x on [0, 4]: fit_poly.py --function "log(erfc(x))/x"
#: --interval 0 4 --degree 10
ERF_Q = (-1.128379225730896, -0.636616587638855, -0.10280295461416245, 0.019233910366892815,
         4.610056203091517e-05, -0.0015986701473593712, 0.0006300884997472167,
         -0.00013348473294172436, 1.6193367628147826e-05, -9.78151888375578e-07,
         1.7503309024391456e-08)


#: 2/sqrt(pi) as a float32 and the float32 nearest the rest.
TWO_OVER_SQRT_PI = (1.128379225730896, -5.8635382771399236e-08)

#: (erf(x)/x - 2/sqrt(pi)) / x**2 as a polynomial in x**2, |x| <= 0.75:
#: fit_poly.py --function "(erf(sqrt(x))/sqrt(x) - 1.1283791670955126)/x"
#: --interval 0 0.5625 --degree 4
ERF_SMALL = (-0.37612637877464294, 0.11283693462610245, -0.0268519576638937,
             0.005151897668838501, -0.0007029310218058527)


@define("erf", "float")
def erf(m, x):
    # Beyond 0.75, erf(x) = 1 - erfc(x) = -expm1(log(erfc(x))) with one
    # smooth polynomial for log(erfc(x)) up to 4 (erf is 1 in float32 from
    # 3.92). Below, an odd polynomial with 2/sqrt(pi) in two parts.
    a = m.fabs(x)
    t = a * a
    small = m.fma(a, TWO_OVER_SQRT_PI[0], a * m.fma(t, m.poly(t, ERF_SMALL), TWO_OVER_SQRT_PI[1]))
    clamped = m.minimum(a, 4.0)
    large = -expm1_bounded(m, clamped * m.poly(clamped, ERF_Q))
    y = m.select(a < 0.75, small, large)
    return m.select(m.isnan(x), x, m.copysign(y, x))

