"""numba.cuda's ``extending``: Numba's extension API for kernels.

``@overload``, ``@overload_method``, ``@overload_attribute`` and
``@intrinsic`` from here register for the ``cuda`` target, as numba.cuda's
do; numba_vulkan's Vulkan target is a kind of Numba's CUDA target, so what
libraries register for ``target="cuda"`` (with these or with
``numba.extending``'s) is seen by kernels, and so is what is registered
for every target. An ``@intrinsic``'s code generation must emit LLVM IR a
Vulkan kernel can hold: no NVVM intrinsics, inline PTX or pointers into
generic memory.
"""

from numba.core import extending as _extending
from numba.core.extending import (make_attribute_wrapper, models, register_jitable,  # noqa: F401
                                  register_model, type_callable, typeof_impl)
from numba.core.imputils import lower_builtin, lower_cast, lower_getattr  # noqa: F401

_TARGET = "cuda"


def overload(func, **kwargs):
    """Numba's ``overload`` for kernels (``target="cuda"`` unless given)."""
    kwargs.setdefault("target", _TARGET)
    return _extending.overload(func, **kwargs)


def overload_method(typ, attr, **kwargs):
    """Numba's ``overload_method`` for kernels."""
    kwargs.setdefault("target", _TARGET)
    return _extending.overload_method(typ, attr, **kwargs)


def overload_attribute(typ, attr, **kwargs):
    """Numba's ``overload_attribute`` for kernels."""
    kwargs.setdefault("target", _TARGET)
    return _extending.overload_attribute(typ, attr, **kwargs)


def intrinsic(*args, **kwargs):
    """Numba's ``intrinsic`` for kernels: ``@intrinsic`` or
    ``@intrinsic(prefer_literal=True)``."""
    kwargs.setdefault("target", _TARGET)
    if args:
        # @intrinsic without arguments: Numba's takes options only when
        # called without the function.
        return _extending.intrinsic(**kwargs)(*args)
    return _extending.intrinsic(**kwargs)
