"""The math library's functions on the device against exact references
(``tests/codegen/mathlib/accuracy.py``): random inputs across each domain
and every edge value (zeros of both signs, infinities, NaN, subnormals, the
ends of the range), with fixed seeds."""

import numpy as np
import pytest

from numba_vulkan.codegen import mathlib
from numba_vulkan.codegen.libclc import mangled
from tests.codegen.mathlib import accuracy

#: Every function the library defines, by accuracy.py's name.
LIBRARY = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "pow", "erf", "erfc", "tanh",
           "sinh", "cosh", "sin", "cos", "tan", "atan", "atan2"]
FLOAT64 = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "pow", "erf", "tanh", "sin",
           "cos", "atan", "atan2"]


def _cases():
    for name in LIBRARY:
        yield name, np.float32
    for name in FLOAT64:
        yield name, np.float64
    for name in ("div", "sqrt"):
        yield name, np.float32


@pytest.mark.parametrize("name, dtype", list(_cases()),
                         ids=[f"{n}_{np.dtype(d).name}" for n, d in _cases()])
def test_within_bound(name, dtype):
    n = 1 << 16 if dtype == np.float32 else 1500
    error, where, got, _ = accuracy.worst(name, dtype, n, seed=20261204)
    assert error <= accuracy.bound(name, dtype), f"{name}{where} = {got}: {error:.3f} ULP"


def test_the_table_names_what_the_library_defines():
    for name in LIBRARY:
        arity = accuracy.FUNCTIONS[name][3]
        assert mathlib.provides(mangled(name, *"f" * arity)), name
    for name in FLOAT64:
        arity = accuracy.FUNCTIONS[name][3]
        assert mathlib.provides(mangled(name, *"d" * arity)), name
