"""numba.cuda's ``libdevice`` functions that portable code calls
(``from numba.cuda import libdevice``; here ``from numba_vulkan.cuda import
libdevice``), as the same computations in Vulkan kernels.

Each float function comes in numba.cuda's two spellings, ``exp`` (float64)
and ``expf`` (float32), and ``fast_expf`` and the other ``fast_`` ones
compute as ``expf`` does (as accurately, not faster). They run as Python's
``math`` functions run in kernels: libclc's, within the accuracy
``docs/cuda.md`` gives. Only inside kernels.
"""

import math

import numba
import numpy as np

from numba_vulkan.base import intrinsics as _intrinsics

__all__ = []


def _export(name, function):
    globals()[name] = function
    __all__.append(name)


#: libdevice's name (without the float32 ``f``) -> the function kernels
#: compute it with (NumPy's rounding functions, which return floats as
#: libdevice's do, where ``math``'s return ints).
_SAME = {
    "exp": math.exp, "exp2": _intrinsics.exp2, "expm1": math.expm1, "log": math.log,
    "log2": math.log2, "log10": math.log10, "log1p": math.log1p, "sin": math.sin,
    "cos": math.cos, "tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan,
    "atan2": math.atan2, "sinh": math.sinh, "cosh": math.cosh, "tanh": math.tanh,
    "asinh": math.asinh, "acosh": math.acosh, "atanh": math.atanh, "pow": math.pow,
    "sqrt": math.sqrt, "cbrt": _intrinsics.cbrt, "fabs": math.fabs, "floor": np.floor,
    "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint, "fmod": math.fmod,
    "hypot": math.hypot, "erf": math.erf, "erfc": math.erfc, "lgamma": math.lgamma,
    "tgamma": math.gamma, "copysign": math.copysign, "remainder": math.remainder,
    "fma": _intrinsics.fma,
}


def _made(make):
    """The float64 and the float32 function ``make(float type)`` gives."""
    return numba.njit(make(np.float64)), numba.njit(make(np.float32))


def _exp10(ty):
    ten = ty(10)
    return lambda x: math.pow(ten, x)


def _rsqrt(ty):
    one = ty(1)
    return lambda x: one / math.sqrt(x)


def _fmin(ty):
    def fmin(a, b):
        # C's fmin: a NaN operand gives the other.
        if math.isnan(a):
            return b
        if math.isnan(b):
            return a
        return a if a <= b else b
    return fmin


def _fmax(ty):
    def fmax(a, b):
        if math.isnan(a):
            return b
        if math.isnan(b):
            return a
        return a if a >= b else b
    return fmax


def _round(ty):
    half, one = ty(0.5), ty(1)

    def round_away(x):
        # C's round: ties away from zero; x - trunc(x) is exact.
        t = np.trunc(x)
        return t + math.copysign(one, x) if math.fabs(x - t) >= half else t
    return round_away


def _divide(ty):
    return lambda a, b: a / b


for _name, _function in _SAME.items():
    _export(_name, _function)
    _export(_name + "f", _function)
for _name, _make in (("exp10", _exp10), ("rsqrt", _rsqrt), ("fmin", _fmin), ("fmax", _fmax),
                     ("round", _round)):
    _double, _single = _made(_make)
    _export(_name, _double)
    _export(_name + "f", _single)
for _name in ("exp", "exp10", "log", "log2", "log10", "sin", "cos", "tan", "pow"):
    _export(f"fast_{_name}f", globals()[_name + "f"])
_export("fast_fdividef", _made(_divide)[1])
for _suffix, _kind in (("d", "double"), ("f", "float")):
    _export("isnan" + _suffix, math.isnan)
    _export("isinf" + _suffix, math.isinf)
_export("isfinited", math.isfinite)
_export("finitef", math.isfinite)


def _bits(function, word, result=np.int32):
    """libdevice's form of a bit function, declared as taking ``word`` (an
    int32 for ``popc``, an int64 for ``popcll``) whatever integer it is
    given; the result an int32 (``brev``'s the word's own bits)."""
    return numba.njit(lambda x: result(function(word(x))))


for _name in ("popc", "clz", "ffs"):
    _export(_name, _bits(getattr(_intrinsics, _name), np.int32))
    _export(_name + "ll", _bits(getattr(_intrinsics, _name), np.int64))
_export("brev", _bits(_intrinsics.brev, np.uint32))
_export("brevll", _bits(_intrinsics.brev, np.uint64, np.int64))
