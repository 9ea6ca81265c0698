"""A select between a value and its negation by the sign of a product,
which LLVM 22's SPIR-V backend made GLSL's ``FaceForward`` with the wrong
sign, or crashed on (a segfault or a failed assertion) where the values had
other uses: float64 ``erf`` of a product, and with fast-math of a quotient
by a constant (Black-Scholes' normal distribution)."""

import math

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan import cuda
from numba_vulkan.codegen import legalize
from tests.helpers import assert_valid_spirv, llvm_text, rewritten

#: The H200's target, which the fast-math kernel crashed the backend for.
GPU = nv.TargetDescription(vulkan=(1, 3), float32_atomic_add=True, fused_fma=True)


@cuda.jit
def signs(out, a, b, c):
    i = cuda.grid(1)
    if i < out.shape[0]:
        x = c[i]
        out[i] = -x if a[i] * b[i] < 0.0 else x


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_sign_by_a_product(dtype):
    # Compiled to FaceForward, it gave every element the other sign.
    a = np.linspace(-2, 2, 16).astype(dtype)
    b = np.full(16, 0.5, dtype)
    c = np.arange(1, 17).astype(dtype)
    out = np.zeros(16, dtype)
    signs[1, 32](out, a, b, c)
    np.testing.assert_array_equal(out, np.where(a * b < 0, -c, c))


def normal_cdf(out, d):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = 0.5 * (1.0 + math.erf(d[i] / math.sqrt(2.0)))


FAST_CDF = cuda.jit(fastmath=True)(normal_cdf)
CDF_SIG = "void(float64[::1], float64[::1])"


def test_fast_normal_cdf_compiles_for_the_gpu():
    assert_valid_spirv(FAST_CDF.compile(CDF_SIG, threads=(256, 1, 1), target=GPU))


def test_fast_normal_cdf_on_the_device():
    d = np.linspace(-4, 4, 64)
    out = np.zeros_like(d)
    FAST_CDF[1, 64](out, d)
    expected = 0.5 * (1.0 + np.array([math.erf(x / math.sqrt(2.0)) for x in d]))
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-15)


@cuda.jit
def erf_of_products(out, a, b):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = math.erf(a[i] * b[i])


def test_erf_of_a_product():
    # float64 erf restores its argument's sign by such a select: the
    # backend failed an assertion.
    a = np.linspace(-3, 3, 32)
    b = np.full(32, 0.5)
    out = np.zeros(32)
    erf_of_products[1, 32](out, a, b)
    expected = np.array([math.erf(x) for x in a * b])
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-15)


def every_function(out, x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        v = x[i]
        out[i, 0] = math.exp(v)
        out[i, 1] = math.log(v)
        out[i, 2] = math.erf(v / 3.0)
        out[i, 3] = math.sqrt(v)
        out[i, 4] = math.pow(v, 1.5)
        out[i, 5] = math.sin(v)


@pytest.mark.parametrize("ty", ["float32", "float64"])
def test_fast_math_functions_compile_for_the_gpu(ty):
    kernel = cuda.jit(fastmath=True)(every_function)
    assert_valid_spirv(kernel.compile(f"void({ty}[:, ::1], {ty}[::1])", threads=(64, 1, 1),
                                      target=GPU))


_SELECT = """define double @f(double %a, double %x) {
entry:
  %p = fmul double %a, 3.000000e+00
  %c = fcmp olt double %p, 0.000000e+00
  %n = fneg double %x
  %s = select i1 %c, double %n, double %x
  ret double %s
}
"""


def test_the_comparison_is_inverted_and_the_operands_swapped():
    text = rewritten(legalize.negated_selects, _SELECT)
    assert "%c = fcmp uge double %p, 0.000000e+00" in text
    assert "%s = select i1 %c, double %x, double %n" in text
    llvm_text(text)


def test_a_comparison_with_other_uses_is_copied():
    shared = _SELECT.replace("  ret double %s", "  %k = select i1 %c, double %a, double %x\n"
                                                "  %r = fadd double %s, %k\n  ret double %r")
    text = rewritten(legalize.negated_selects, shared)
    assert "%c = fcmp olt double %p, 0.000000e+00" in text
    assert "%nv.facing.1 = fcmp uge double %p, 0.000000e+00" in text
    assert "%s = select i1 %nv.facing.1, double %x, double %n" in text
    assert "%k = select i1 %c, double %a, double %x" in text
    llvm_text(text)


@pytest.mark.parametrize("change", [
    ("%p = fmul double %a, 3.000000e+00", "%p = fadd double %a, 3.000000e+00"),
    ("fcmp olt", "fcmp ole"),
    ("0.000000e+00", "1.000000e+00"),
    ("%n = fneg double %x", "%n = fadd double %x, 1.000000e+00"),
], ids=["not-a-product", "ole", "not-zero", "not-a-negation"])
def test_other_selects_are_left_alone(change):
    text = _SELECT.replace(*change)
    assert rewritten(legalize.negated_selects, text) == rewritten(lambda module: None, text)
