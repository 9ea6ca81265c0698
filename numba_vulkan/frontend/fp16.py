"""float16 in kernels: its data model, arithmetic typing and the fp16 functions.

Numba's CPU target has no float16: no data model, and its operator templates
promote a float16 operand to float32. Here float16 is LLVM's ``half``, and an
operation of two float16 values gives a float16, as in NumPy and numba.cuda:
``x[i] * y[i] + z[i]`` rounds after each operation. The lowering emits half
arithmetic; on a target without ``shaderFloat16`` codegen computes it in
float32 and rounds each result to float16
(:mod:`numba_vulkan.codegen.half`), which is the same value for ``+ - * /``
and ``sqrt`` (float32 holds more than twice float16's 11 bits plus two);
on one with it, codegen does that for what the driver may round otherwise.

The fp16 functions (``nv.fp16.hadd`` ... and numba.cuda's ``cuda.fp16``
names) take and return float16 and are typed here by their stubs in
:mod:`numba_vulkan.base.intrinsics`; NumPy ufuncs of float16 scalars
(``np.sqrt(h)``) are lowered here too.
"""

import operator

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.datamodel import models
from numba.core.datamodel.manager import DataModelManager
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import AbstractTemplate, ConcreteTemplate, Registry, signature

from numba_vulkan.base import intrinsics

typing_registry = Registry()
lowering_registry = LoweringRegistry("numba_vulkan.fp16")

_H = types.float16
_HALF = ir.HalfType()


class FloatModel(models.PrimitiveModel):
    """Numba's float model with float16 as LLVM ``half``."""

    def __init__(self, dmm, fe_type):
        width = {16: _HALF, 32: ir.FloatType(), 64: ir.DoubleType()}
        if fe_type.bitwidth not in width:
            raise NotImplementedError(fe_type)
        super().__init__(dmm, fe_type, width[fe_type.bitwidth])


def data_model_manager(base):
    """A manager whose float model knows float16 and that takes every other
    model from ``base``.

    Chained, not copied: Numba registers some default models when a module
    is first imported (``unicode_type``'s with ``numba.cpython.unicode``,
    after the target context exists), and a copy would miss them; Numba
    casts ``print``'s constant strings to ``unicode_type`` while lowering.
    """
    manager = DataModelManager().chain(base)
    manager.register(types.Float, FloatModel)
    return manager


def _template(key, cases):
    # Templates of the vulkan target are tried before the generic ones.
    return type(f"Float16_{key.__name__}", (ConcreteTemplate,),
                {"key": key, "cases": cases, "metadata": {"target": "vulkan"}})


def _operator(op, arity):
    # Only float16 operands: anything else, which a concrete template would
    # convert to float16 (int16 + 1 too), keeps Numba's own typing, which
    # promotes float16 to float32 (or float64 beside an int or a Python float).
    def generic(self, args, kws):
        if len(args) == arity and not kws and all(a == _H for a in args):
            return signature(_H, *args)
    return type(f"Float16_{op.__name__}", (AbstractTemplate,),
                {"key": op, "generic": generic, "metadata": {"target": "vulkan"}})


for _op in (operator.add, operator.sub, operator.mul, operator.truediv,
            operator.iadd, operator.isub, operator.imul, operator.itruediv):
    typing_registry.register_global(_op, types.Function(_operator(_op, 2)))

for _op in (operator.neg, operator.pos, abs):
    typing_registry.register_global(_op, types.Function(_operator(_op, 1)))

@lowering_registry.lower(operator.truediv, types.float16, types.float16)
@lowering_registry.lower(operator.itruediv, types.float16, types.float16)
def _divide(context, builder, sig, args):
    # Numba's own lowering tests the divisor for zero with a helper that
    # knows float and double only.
    with cgutils.if_zero(builder, builder.fpext(args[1], ir.FloatType())):
        context.error_model.fp_zero_division(builder, ("division by zero",))
    return builder.fdiv(*args)


# Numba's float() knows float32 and float64 only; a Python float is a float64.
typing_registry.register_global(float, types.Function(_template(
    float, [signature(types.float64, _H)])))


@lowering_registry.lower_cast(types.float64, types.float16)
def _double_to_half(context, builder, fromty, toty, value):
    """float64 to float16 rounded once, through float32 rounded to odd.

    Drivers may convert a double to a half through a float (lavapipe does),
    rounding twice: 1 + 2**-11 + 2**-40 became 1.0 instead of 1 + 2**-10.
    A float32 rounded to odd (truncated, its last bit set if anything was
    lost) keeps what rounding to float16 needs, since float32 has more than
    float16's 11 bits plus 2.
    """
    f32, i32 = ir.FloatType(), ir.IntType(32)
    single = builder.fptrunc(value, f32)
    back = builder.fpext(single, value.type)
    bits = builder.bitcast(single, i32)
    fabs = builder.module.declare_intrinsic("llvm.fabs", [value.type])
    rounded_up = builder.fcmp_ordered(">", builder.call(fabs, [back]),
                                      builder.call(fabs, [value]))
    odd = builder.or_(builder.sub(bits, builder.zext(rounded_up, i32)), ir.Constant(i32, 1))
    inexact = builder.fcmp_ordered("!=", back, value)
    return builder.fptrunc(builder.bitcast(builder.select(inexact, odd, bits), f32), _HALF)


# The fp16 functions: typed by their stubs, lowered to half operations.

def _register(name, cases):
    stub = getattr(intrinsics.fp16, name)
    typing_registry.register_global(stub, types.Function(_template(stub, cases)))
    return stub


def _intrinsic(builder, name, args):
    fnty = ir.FunctionType(_HALF, [_HALF] * len(args))
    return builder.call(cgutils.get_or_insert_function(builder.module, fnty, name), args)


def _via_float(builder, name, args, before=()):
    # Transcendental functions come from libclc's float32 code, rounded once
    # to float16: libclc has no half versions, and the float32 result is
    # within float32 accuracy, so the rounded one is within about one float16
    # ULP. ``before`` are float32 constants passed ahead of the arguments.
    f32 = ir.FloatType()
    values = [ir.Constant(f32, c) for c in before] + [builder.fpext(a, f32) for a in args]
    fnty = ir.FunctionType(f32, [f32] * len(values))
    fn = cgutils.get_or_insert_function(builder.module, fnty, name)
    return builder.fptrunc(builder.call(fn, values), _HALF)


def _rsqrt(builder, x):
    f32 = ir.FloatType()
    root = builder.call(builder.module.declare_intrinsic("llvm.sqrt", [f32]),
                        [builder.fpext(x, f32)])
    return builder.fptrunc(builder.fdiv(ir.Constant(f32, 1.0), root), _HALF)


_BINARY_LOWERING = {
    "hadd": lambda b, x, y: b.fadd(x, y), "hsub": lambda b, x, y: b.fsub(x, y),
    "hmul": lambda b, x, y: b.fmul(x, y), "hdiv": lambda b, x, y: b.fdiv(x, y),
    # NaN-ignoring like numba.cuda's (CUDA's __hmax/__hmin return the other
    # operand when one is NaN).
    "hmax": lambda b, x, y: _intrinsic(b, "llvm.maxnum.f16", [x, y]),
    "hmin": lambda b, x, y: _intrinsic(b, "llvm.minnum.f16", [x, y]),
}

_UNARY_LOWERING = {
    "hneg": lambda b, x: b.fneg(x),
    "habs": lambda b, x: _intrinsic(b, "llvm.fabs.f16", [x]),
    "hsqrt": lambda b, x: _intrinsic(b, "llvm.sqrt.f16", [x]),
    "hrsqrt": _rsqrt,
    "hrcp": lambda b, x: b.fdiv(ir.Constant(_HALF, 1.0), x),
    "hfloor": lambda b, x: _intrinsic(b, "llvm.floor.f16", [x]),
    "hceil": lambda b, x: _intrinsic(b, "llvm.ceil.f16", [x]),
    "htrunc": lambda b, x: _intrinsic(b, "llvm.trunc.f16", [x]),
    "hrint": lambda b, x: _intrinsic(b, "llvm.rint.f16", [x]),
    "hsin": lambda b, x: _via_float(b, "sinf", [x]),
    "hcos": lambda b, x: _via_float(b, "cosf", [x]),
    "hexp": lambda b, x: _via_float(b, "expf", [x]),
    "hexp2": lambda b, x: _via_float(b, "exp2f", [x]),
    "hexp10": lambda b, x: _via_float(b, "powf", [x], before=[10.0]),
    "hlog": lambda b, x: _via_float(b, "logf", [x]),
    "hlog2": lambda b, x: _via_float(b, "log2f", [x]),
    "hlog10": lambda b, x: _via_float(b, "log10f", [x]),
}


def _lower_with(stub, arity, emit):
    @lowering_registry.lower(stub, *([types.Float] * arity))
    def lower(context, builder, sig, args):
        halves = [context.cast(builder, a, t, _H) for a, t in zip(args, sig.args)]
        return emit(builder, *halves)
    return lower


for _name, _emit in _BINARY_LOWERING.items():
    _lower_with(_register(_name, [signature(_H, _H, _H)]), 2, _emit)

for _name, _emit in _UNARY_LOWERING.items():
    _lower_with(_register(_name, [signature(_H, _H)]), 1, _emit)

def _fma(builder, x, y, z):
    """``x * y + z`` rounded once to float16, in float32 arithmetic only.

    Vulkan lets a driver's Fma round twice (lavapipe's half one does). The
    product of two float16 values is exact in float32; the sum with ``z``
    is rounded (``s``) but its error ``e`` is exact (TwoSum, kept so by the
    NoContraction every float operation gets). ``s`` rounded to odd by
    ``e`` then rounds to float16 as the exact sum would.
    """
    f32, i32 = ir.FloatType(), ir.IntType(32)
    product = builder.fmul(builder.fpext(x, f32), builder.fpext(y, f32))
    addend = builder.fpext(z, f32)
    total = builder.fadd(product, addend)
    part = builder.fsub(total, product)
    error = builder.fadd(builder.fsub(product, builder.fsub(total, part)),
                         builder.fsub(addend, part))
    zero = ir.Constant(f32, 0.0)
    # Rounded away from zero where the error points the other way.
    away = builder.xor(builder.fcmp_ordered("<", error, zero),
                       builder.fcmp_ordered("<", total, zero))
    bits = builder.bitcast(total, i32)
    odd = builder.or_(builder.sub(bits, builder.zext(away, i32)), ir.Constant(i32, 1))
    inexact = builder.fcmp_ordered("!=", error, zero)
    return builder.fptrunc(builder.bitcast(builder.select(inexact, odd, bits), f32), _HALF)


_lower_with(_register("hfma", [signature(_H, _H, _H, _H)]), 3, _fma)

for _name, _op in intrinsics._FP16_COMPARE.items():
    # Ordered, as CUDA's: a NaN operand makes every one false, hne too.
    _lower_with(_register(_name, [signature(types.boolean, _H, _H)]), 2,
                lambda b, x, y, _op=_op: b.fcmp_ordered(_op, x, y))


# NumPy ufuncs of float16 scalars ----------------------------------------
# Numba's ufunc lowering takes no float16 operand (and has no float16
# loops). A call with one is the float32 loop on the exactly widened
# operands, its result converted to the type NumPy's float16 loop gives:
# one rounding of the float32 result, which is the float16 one for the
# arithmetic ufuncs and sqrt, and within about a float16 ULP for the rest.

def _ufunc_lowering(ufunc):
    def lower(context, builder, sig, args):
        from numba.np.numpy_support import ufunc_find_matching_loop
        wide = [types.float32 if t == _H else t for t in sig.args]
        loop = ufunc_find_matching_loop(ufunc, tuple(wide))
        inner = signature(loop.outputs[0], *wide)
        impl = context.get_function(ufunc, inner)
        values = [context.cast(builder, a, t, w) for a, t, w in zip(args, sig.args, wide)]
        return context.cast(builder, impl(builder, values), inner.return_type, sig.return_type)
    return lower


def _register_ufuncs():
    from numba.np import ufunc_db
    for ufunc in ufunc_db.get_ufuncs():
        if ufunc.nout != 1 or ufunc.nin not in (1, 2) or not any(
                "e" in loop.split("->")[0] for loop in ufunc.types):
            continue
        lower = _ufunc_lowering(ufunc)
        if ufunc.nin == 1:
            lowering_registry.lower(ufunc, _H)(lower)
        else:
            for operands in ((_H, _H), (_H, types.Number), (types.Number, _H)):
                lowering_registry.lower(ufunc, *operands)(lower)


_register_ufuncs()
