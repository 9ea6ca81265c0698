"""Math lowering that differs from Numba's CPU target.

Numba's CPU lowering is used as it is, and codegen maps the C functions and
LLVM intrinsics it calls to libclc (:mod:`numba_vulkan.codegen.libclc_link`).
The exceptions live here: lowerings whose CPU version counts on an LLVM
rewrite into a C library call, which cannot happen once the call is
renamed to libclc; and the float functions of the ``math`` module that
Numba does not implement (``fmod``, ``remainder``, ``modf``, ``cbrt``,
``ulp``, ``log`` with a base), with Python's semantics; and ``math.gamma``
and float32 ``math.lgamma``, which libclc computes less accurately than the
target (float64 within 2 ULP, float32 within 4, the gamma functions within
8 of the correctly rounded value).
"""

import math

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import AbstractTemplate, ConcreteTemplate, Registry, signature

from numba_vulkan.base import intrinsics

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


_unary(intrinsics.cbrt)

if intrinsics.exp2 is not getattr(math, "exp2", None):
    # Python 3.10: Numba types math.exp2 only where the math module has it.
    _unary(intrinsics.exp2)

    @lowering_registry.lower(intrinsics.exp2, types.Float)
    def _lower_exp2(context, builder, sig, args):
        llty = context.get_value_type(sig.return_type)
        name = "llvm.exp2.f32" if sig.return_type == types.float32 else "llvm.exp2.f64"
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(llty, [llty]), name)
        return builder.call(fn, args)

_FMA = type("Math_fma", (ConcreteTemplate,), {
    "key": intrinsics.fma, "cases": [signature(ty, ty, ty, ty) for ty in _FLOATS]})
typing_registry.register_global(intrinsics.fma, types.Function(_FMA))


@lowering_registry.lower(intrinsics.fma, types.Float, types.Float, types.Float)
def _lower_fma(context, builder, sig, args):
    # llvm.fma: native on a target whose Fma rounds once, else emulated
    # exactly by codegen (legalize).
    ty = context.get_value_type(sig.return_type)
    values = [context.cast(builder, a, t, sig.return_type) for a, t in zip(args, sig.args)]
    name = "llvm.fma.f32" if sig.return_type == types.float32 else "llvm.fma.f64"
    fnty = ir.FunctionType(ty, [ty] * 3)
    return builder.call(cgutils.get_or_insert_function(builder.module, fnty, name), values)


class _Selp(AbstractTemplate):
    key = intrinsics.selp

    def generic(self, args, kws):
        if kws or len(args) != 3:
            return None
        condition, a, b = args
        unified = self.context.unify_types(a, b)
        if unified is None or not isinstance(condition, (types.Boolean, types.Integer)):
            return None
        return signature(unified, condition, unified, unified)


typing_registry.register_global(intrinsics.selp, types.Function(_Selp))


@lowering_registry.lower(intrinsics.selp, types.Any, types.Any, types.Any)
def _lower_selp(context, builder, sig, args):
    condition = context.cast(builder, args[0], sig.args[0], types.boolean)
    return builder.select(condition, args[1], args[2])


@lowering_registry.lower(intrinsics.cbrt, types.Float)
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
    from numba.np import ufunc_db
    info = ufunc_db.get_ufunc_info(ufunc)
    if ufunc is np.cbrt:
        info = {**info, "f->f": _cbrt, "d->d": _cbrt}
    return info


# The gamma function ---------------------------------------------------------
#
# libclc's tgamma is exp(lgamma(x)) and loses up to ~1700 ULP in float64
# (the error of lgamma times its magnitude); numba_gamma on the CPU is
# CPython's Lanczos approximation, ~10 ULP. Here float64 gamma keeps every
# step within a few ULP of the true value: below 10 it is a product of exact
# factors kept in double-double, times gamma of a value in [1, 2), where
# exp(lgamma) is accurate because lgamma is small there; from 10 on it is
# Stirling's formula with the power and the exponential of the math library, which
# are accurate to an ULP; negative arguments use the reflection formula.
# float32 gamma and lgamma are the float64 ones, rounded. No loops: lavapipe counts loop
# trips against one budget per invocation (docs/limitations.md).

_PI, _PI_LO = 3.141592653589793, 1.2246467991473532e-16
_SQRT_2PI, _SQRT_2PI_LO = 2.5066282746310007, -1.8328579980459167e-16
#: B(2k) / (2k (2k - 1)): ln gamma(a) - Stirling's main terms, in 1/a.
_STIRLING = (0.08333333333333333, -0.002777777777777778, 0.0007936507936507937,
             -0.0005952380952380953, 0.0008417508417508417, -0.0019175269175269176,
             0.00641025641025641, -0.029550653594771242)


def _gamma64(x):
    def times(hi, lo, t):
        # (hi + lo) * t in double-double for an exact t; hi * t below 2**996.
        p = hi * t
        u = hi * 134217729.0
        hh = u - (u - hi)
        hl = hi - hh
        v = t * 134217729.0
        th = v - (v - t)
        tl = t - th
        e = ((hh * th - p) + hh * tl + hl * th) + hl * tl
        q = e + lo * t
        s = p + q
        return s, q - (s - p)

    def step(hi, lo, a, k, n):
        # One factor a - k of gamma(a) / gamma(a - n), exact, if k <= n.
        if k <= n:
            return times(hi, lo, a - k)
        return hi, lo

    if math.isnan(x):
        return x
    if x == 0.0:
        return math.copysign(math.inf, x)
    if x < 0.0 and (math.isinf(x) or x == np.floor(x)):
        return math.nan
    a = abs(x)
    # gamma(a) = u * w and a * gamma(a) = u * wa, in factors that overflow
    # only where the result is out of range, in float64 and (narrowed, on
    # devices without it) in float32 alike: u is infinite exactly there.
    if a < 1.0:
        # gamma(a) = gamma(1 + a) / a; rounding 1 + a costs at most 0.58 ULP
        # (|digamma| < 0.58 on [1, 2]).
        g = math.exp(math.lgamma(1.0 + a))
        u, w, wa = g, 1.0 / a, 1.0
    elif a < 10.0:
        n = np.floor(a) - 1.0
        hi, lo = 1.0, 0.0
        hi, lo = step(hi, lo, a, 1.0, n)
        hi, lo = step(hi, lo, a, 2.0, n)
        hi, lo = step(hi, lo, a, 3.0, n)
        hi, lo = step(hi, lo, a, 4.0, n)
        hi, lo = step(hi, lo, a, 5.0, n)
        hi, lo = step(hi, lo, a, 6.0, n)
        hi, lo = step(hi, lo, a, 7.0, n)
        hi, lo = step(hi, lo, a, 8.0, n)
        g = math.exp(math.lgamma(a - n))
        ahi, alo = times(hi, lo, a)
        u, w, wa = 1.0, hi * g + lo * g, ahi * g + alo * g
    else:
        r = 1.0 / a
        z = r * r
        series = _STIRLING[7]
        series = series * z + _STIRLING[6]
        series = series * z + _STIRLING[5]
        series = series * z + _STIRLING[4]
        series = series * z + _STIRLING[3]
        series = series * z + _STIRLING[2]
        series = series * z + _STIRLING[1]
        series = (series * z + _STIRLING[0]) * r
        # sqrt(2 pi) exp(series), with the rounding error of sqrt(2 pi).
        f = _SQRT_2PI + (_SQRT_2PI * math.expm1(series) + _SQRT_2PI_LO)
        # a**(a - 1/2) exp(-a) as a square, which overflows no earlier than
        # gamma does.
        u = math.pow(a, 0.5 * a - 0.25)
        w = (u * math.exp(-a)) * f
        wa = w * a
    if x > 0.0:
        return math.inf if u == math.inf else u * w
    # gamma(-a) = -pi / (sin(pi a) a gamma(a)); sin(pi a) from the exact
    # distance r of a to the nearest integer m: (-1)**m sin(pi r).
    m = np.floor(a)
    r = a - m
    if r > 0.5:
        r = r - 1.0
        m = m + 1.0
    s = math.sin(_PI * r + _PI_LO * r)
    if m * 0.5 != np.floor(m * 0.5):
        s = -s
    q = -_PI / s
    if u == math.inf:
        # Far below the smallest subnormal: a zero of gamma's sign there.
        return q * 0.0
    return (q / u) / wa


@lowering_registry.lower(math.gamma, types.float64)
def _lower_gamma64(context, builder, sig, args):
    return context.compile_internal(builder, _gamma64, signature(types.float64, types.float64),
                                    args)


@lowering_registry.lower(math.gamma, types.Integer)
def _lower_gamma_of_int(context, builder, sig, args):
    # Typed float64, as Numba and numba.cuda type it; Numba's own lowering
    # calls its C helper, which a kernel does not have.
    wide = context.cast(builder, args[0], sig.args[0], types.float64)
    return context.compile_internal(builder, _gamma64, signature(types.float64, types.float64),
                                    [wide])


@lowering_registry.lower(math.gamma, types.float32)
def _lower_gamma32(context, builder, sig, args):
    wide = builder.fpext(args[0], ir.DoubleType())
    value = context.compile_internal(builder, _gamma64,
                                     signature(types.float64, types.float64), [wide])
    return builder.fptrunc(value, ir.FloatType())


@lowering_registry.lower(math.lgamma, types.float32)
def _lower_lgamma32(context, builder, sig, args):
    # libclc's float32 lgamma is 5 ULP off; its float64 one, rounded, is not.
    wide = builder.fpext(args[0], ir.DoubleType())
    return builder.fptrunc(_call_c(builder, "lgamma", types.float64, [wide]), ir.FloatType())
