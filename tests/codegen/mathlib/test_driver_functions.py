"""``fastmath`` kernels take the driver's float32 functions; others take the
library's."""

import math
import re

import numpy as np
import pytest

import numba_vulkan as nv
from tests.helpers import assert_valid_spirv


def _functions(x, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        v = x[i]
        out[i, 0] = math.sin(v)
        out[i, 1] = math.cos(v)
        out[i, 2] = math.exp(v)
        out[i, 3] = math.log(abs(v) + np.float32(1))
        out[i, 4] = math.pow(abs(v) + np.float32(0.5), v)
        out[i, 5] = math.log2(abs(v) + np.float32(1))


SIGNATURE = "void(float32[::1], float32[:, ::1])"


def _instructions(compiled):
    return set(re.findall(r"OpExtInst %\w+ %\w+ (\w+)", compiled.disassemble()))


@pytest.mark.parametrize("fastmath", [True, False])
def test_float32_functions_by_fastmath(fastmath):
    kernel = nv.jit(fastmath=fastmath)(_functions)
    compiled = kernel.compile(SIGNATURE)
    assert_valid_spirv(compiled)
    driver = {"Sin", "Cos", "Exp", "Log", "Pow", "Log2"} & _instructions(compiled)
    assert driver == ({"Sin", "Cos", "Exp", "Log", "Pow", "Log2"} if fastmath else set())
    x = np.linspace(-3, 3, 999).astype(np.float32)
    out = np.zeros((x.size, 6), np.float32)
    kernel[4, 256](x, out)
    w = x.astype(np.float64)
    want = np.stack([np.sin(w), np.cos(w), np.exp(w), np.log(abs(w) + 1), (abs(w) + 0.5) ** w,
                     np.log2(abs(w) + 1)], 1)
    # The driver's accuracy is its own (lavapipe's is LLVM's); the library's
    # is held to 4 ULP elsewhere.
    np.testing.assert_allclose(out, want, rtol=1e-5 if fastmath else 5e-7, atol=1e-6)


def test_float64_functions_stay_the_librarys():
    @nv.jit(fastmath=True)
    def kernel(x, out):
        i = nv.global_id(0)
        if i < x.shape[0]:
            out[i] = math.exp(x[i])

    compiled = kernel.compile("void(float64[::1], float64[::1])")
    assert "Exp" not in _instructions(compiled)
