"""numba.cuda's extension API in kernels: ``@overload``,
``@overload_method`` and ``@intrinsic`` for the ``cuda`` target, from
``numba_vulkan.cuda.extending`` or from ``numba.extending`` with
``target="cuda"``, as libraries built on numba.cuda register them."""

import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import overload as numba_overload

from numba_vulkan import cuda
from numba_vulkan.cuda.extending import intrinsic, overload, overload_method


def clamp(x, lo, hi):
    """A host function that kernels get an implementation of."""
    return min(max(x, lo), hi)


@overload(clamp)
def _clamp(x, lo, hi):
    def impl(x, lo, hi):
        return min(max(x, lo), hi)
    return impl


def squared(x):
    return x * x


@numba_overload(squared, target="cuda")
def _squared(x):
    return lambda x: x * x


@overload_method(types.Array, "first")
def _first(arr):
    return lambda arr: arr[0]


@intrinsic
def add_one_i32(typingctx, x):
    sig = types.int32(types.int32)

    def codegen(context, builder, signature, args):
        return builder.add(args[0], cgutils.int32_t(1))
    return sig, codegen


@cuda.jit
def uses_extensions(a, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = clamp(a[i], 2, 5) + squared(a[i]) + a.first() + add_one_i32(a[i])


def test_extending_in_kernels():
    a = np.arange(8, dtype=np.int32)
    out = np.zeros(8, np.int32)
    uses_extensions[1, 8](a, out)
    np.testing.assert_array_equal(out, np.clip(a, 2, 5) + a * a + a[0] + a + 1)
