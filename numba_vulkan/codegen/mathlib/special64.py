"""float64 error function.

``erf(x) = x + x E(x**2)`` below 0.85; beyond, ``1 - exp(L(|x|))`` where
``L`` approximates ``log(erfc)`` weighted by ``erfc`` (an absolute error of
``erf``), the exponential's ``1 + s`` never rounded on its own; 1 from 5.93
on, where ``erfc`` is below half an ULP of 1. Both are computed and one is
chosen by a select (GPU threads of one group take both paths anyway when
their arguments straddle the threshold); the sign of ``x`` is copied last
(``-0.0`` included), and a NaN takes the polynomial's NaN. Coefficients
come from ``scripts/fit_poly.py``; the worst errors measured are in
``tests/codegen/mathlib/test_special64.py``.
"""

from numba_vulkan.codegen.mathlib import exp64
from numba_vulkan.codegen.mathlib.common import power_of_two
from numba_vulkan.codegen.mathlib.library import define

#: erf(u) / u - 1 as a polynomial in z = u**2, z <= 0.7225 (|u| <= 0.85):
#: fit_poly.py --function "erf(sqrt(x))/sqrt(x) - 1" --interval 0 0.7225
#: --degree 11 --type float64 --absolute (error 2e-17)
ERF_E = (0.1283791670955126, -0.3761263890318417, 0.11283791670979293,
         -0.026866170650578017, 0.005223977687931482, -0.0008548331173067635,
         0.00012055503510701177, -1.4930118205246946e-05, 1.6536668533008708e-06,
         -1.7128128319369537e-07, 1.907877493783243e-08, -2.1286538185912938e-09)
ERF_SMALL = 0.85

#: log(erfc(x)) on [0.85, 5.93] as a polynomial in x, fitted as
#: fit_poly.py fits but with each point's error weighted by erfc(x), so that
#: the error is that of erf (degree 18, weighted error 4.2e-18).
ERF_L = (-3.970779352559967e-08, -1.128378740945039, -0.6366218521350272,
         -0.10276656463519195, 0.01911712464167674, 0.0002225977014820683,
         -0.0017033970074952192, 0.0005831962841222126, -4.32365034476853e-06,
         -9.289243546268806e-05, 5.5036244857215835e-05, -2.0047323781969294e-05,
         5.313646072805546e-06, -1.065290947900683e-06, 1.613254157064513e-07,
         -1.7973232166951527e-08, 1.3930804897863647e-09, -6.715534576921048e-11,
         1.5162342852652493e-12)
#: From here erfc(x) is below half an ULP of 1.
ERF_ONE = 5.93


@define("erf", "double")
def erf(m, x):
    a = m.fabs(x)
    small = m.fma(x, m.poly(x * x, ERF_E), x)
    # 1 - (1 + s) 2**k with k <= -2: 1 - 2**k is exact, one fma rounds.
    s, _, k = exp64.exp_parts(m, m.poly(m.minimum(a, ERF_ONE), ERF_L))
    scale = power_of_two(m, k, x.type)
    large = m.fma(-scale, s, 1.0 - scale)
    large = m.select(a < ERF_ONE, large, 1.0)
    return m.copysign(m.select(a >= ERF_SMALL, large, small), x)
