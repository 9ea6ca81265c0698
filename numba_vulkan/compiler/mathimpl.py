"""Math lowering that differs from Numba's CPU target.

Numba's CPU lowering is used as it is, and codegen maps the C functions and
LLVM intrinsics it calls to libclc (:mod:`numba_vulkan.codegen.libclc_link`).
The exceptions live here: lowerings whose CPU version counts on an LLVM
rewrite into a C library call, which cannot happen once the call is
renamed to libclc; and the float functions of the ``math`` module that
Numba does not implement (``fmod``, ``remainder``, ``modf``, ``cbrt``,
``ulp``, ``log`` with a base), with Python's semantics.
"""

import math

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import ConcreteTemplate, Registry, signature

typing_registry = Registry()
lowering_registry = LoweringRegistry("numba_vulkan.mathimpl")

_FLOATS = (types.float64, types.float32)


def _unary(func, result=None):
    cases = [signature(result(ty) if result else ty, ty) for ty in _FLOATS]
    template = type(f"Math_{func.__name__}", (ConcreteTemplate,), {"key": func, "cases": cases})
    typing_registry.register_global(func, types.Function(template))


def _binary(func):
    cases = [signature(ty, ty, ty) for ty in _FLOATS]
    template = type(f"Math_{func.__name__}", (ConcreteTemplate,), {"key": func, "cases": cases})
    typing_registry.register_global(func, types.Function(template))


def _call_c(builder, name, ty, args, extra=()):
    """Call the C function ``name`` (``namef`` for float32), which codegen
    maps to libclc."""
    llty = ir.FloatType() if ty == types.float32 else ir.DoubleType()
    fnty = ir.FunctionType(llty, [llty] * len(args) + list(extra))
    name = name + "f" if ty == types.float32 else name
    return builder.call(cgutils.get_or_insert_function(builder.module, fnty, name), args)


for _func, _name in ((math.fmod, "fmod"), (math.remainder, "remainder")):
    _binary(_func)

    @lowering_registry.lower(_func, types.Float, types.Float)
    def _lower_binary(context, builder, sig, args, _name=_name):
        return _call_c(builder, _name, sig.return_type, args)


_unary(math.cbrt)


@lowering_registry.lower(math.cbrt, types.Float)
def _lower_cbrt(context, builder, sig, args):
    return _call_c(builder, "cbrt", sig.return_type, args)


_unary(math.modf, lambda ty: types.UniTuple(ty, 2))


@lowering_registry.lower(math.modf, types.Float)
def _lower_modf(context, builder, sig, args):
    ty = sig.args[0]
    llty = context.get_value_type(ty)
    whole = cgutils.alloca_once(builder, llty)
    fnty = ir.FunctionType(llty, [llty, whole.type])
    fn = cgutils.get_or_insert_function(builder.module, fnty,
                                        "modff" if ty == types.float32 else "modf")
    fraction = builder.call(fn, [args[0], whole])
    return context.make_tuple(builder, sig.return_type, [fraction, builder.load(whole)])


_unary(math.ulp)


@lowering_registry.lower(math.ulp, types.Float)
def _lower_ulp(context, builder, sig, args):
    def ulp(x):
        x = abs(x)
        if math.isnan(x) or math.isinf(x):
            return x
        above = math.nextafter(x, math.inf)
        if math.isinf(above):
            return x - math.nextafter(x, -math.inf)
        return above - x
    return context.compile_internal(builder, ulp, sig, args)


class _LogWithBase(ConcreteTemplate):
    key = math.log
    cases = [signature(ty, ty, ty) for ty in _FLOATS]


typing_registry.register_global(math.log, types.Function(_LogWithBase))


@lowering_registry.lower(math.log, types.Float, types.Float)
def _lower_log_base(context, builder, sig, args):
    def log(x, base):
        return math.log(x) / math.log(base)
    return context.compile_internal(builder, log, sig, args)

def _cbrt(context, builder, sig, args):
    # On the CPU this is pow(x, 1/3) compiled with fastmath so that LLVM
    # turns it into libm's cbrt; here it calls (libclc's) cbrt directly.
    ty = context.get_value_type(sig.args[0])
    name = "cbrtf" if ty == ir.FloatType() else "cbrt"
    fn = cgutils.insert_pure_function(builder.module, ir.FunctionType(ty, [ty]), name=name)
    return builder.call(fn, args)


def ufunc_info(ufunc):
    """Numba's CPU implementations of ``ufunc`` by loop signature, with the
    Vulkan target's replacements."""
    import numpy as np
    from numba.np import ufunc_db
    info = ufunc_db.get_ufunc_info(ufunc)
    if ufunc is np.cbrt:
        info = {**info, "f->f": _cbrt, "d->d": _cbrt}
    return info
