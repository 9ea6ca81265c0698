"""numba_vulkan's own math functions, in place of libclc's where they are faster.

libclc's functions are written for CPUs and OpenCL devices: they branch,
read tables and compute float32 results through float64 steps. These are
written for GPUs, as GPU math libraries are: straight-line polynomial
kernels evaluated with fused multiply-adds, range reductions with
Cody-Waite constants, special values handled by selects, float32 computed
in float32. Each keeps the accuracy the documentation promises (float32
within 4 ULP of the correctly rounded result, float64 within 2), which
``tests/codegen/test_mathlib.py`` checks on the device against references.

Functions are written in :mod:`~numba_vulkan.codegen.mathlib.dsl` and
registered by libclc's mangled name (:mod:`.library`); the linker
(:mod:`numba_vulkan.codegen.libclc_link`) takes a registered function in
libclc's place.
"""

from numba_vulkan.codegen.mathlib import (  # noqa: F401  (they register)
    atan, exact32, exact64, exp32, exp64, hyperbolic, special32, special64, trig, trig32)
from numba_vulkan.codegen.mathlib.library import module, provides, symbol

__all__ = ["module", "provides", "symbol"]
