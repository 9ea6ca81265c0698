"""Typing and lowering of the kernel API in :mod:`numba_vulkan.intrinsics`."""

from llvmlite import ir
from numba.core import types
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import AbstractTemplate, Registry, signature

from numba_vulkan import intrinsics
from numba_vulkan.codegen import markers

typing_registry = Registry()
lowering_registry = LoweringRegistry("numba_vulkan")

_i32 = ir.IntType(32)
_i64 = ir.IntType(64)

#: Builtins read through an LLVM SPIR-V intrinsic.
_BUILTIN_INTRINSICS = {
    intrinsics.global_id: "llvm.spv.thread.id.i32",
    intrinsics.local_id: "llvm.spv.thread.id.in.group.i32",
    intrinsics.group_id: "llvm.spv.group.id.i32",
}


def _axis_template(func):
    class AxisTemplate(AbstractTemplate):
        key = func

        def generic(self, args, kws):
            if kws or len(args) != 1:
                return None
            axis = args[0]
            if isinstance(axis, types.IntegerLiteral) and axis.literal_value in (0, 1, 2):
                return signature(types.int64, axis)
            return None

    AxisTemplate.__name__ = f"{func.__name__}_template"
    typing_registry.register_global(func, types.Function(AxisTemplate))
    return AxisTemplate


def _intrinsic(builder, name, axis):
    fnty = ir.FunctionType(_i32, [_i32])
    try:
        fn = builder.module.get_global(name)
    except KeyError:
        fn = ir.Function(builder.module, fnty, name)
    return builder.call(fn, [ir.Constant(_i32, axis)])


def _num_groups(builder, axis):
    return markers.push(builder, _i32, 4 * axis)


def _register_axis_lowering(func, emit):
    _axis_template(func)

    @lowering_registry.lower(func, types.IntegerLiteral)
    def lower(context, builder, sig, args):
        axis = sig.args[0].literal_value
        return builder.zext(emit(builder, axis), _i64)


for _func, _name in _BUILTIN_INTRINSICS.items():
    _register_axis_lowering(_func, lambda builder, axis, _name=_name: _intrinsic(builder, _name, axis))
_register_axis_lowering(intrinsics.local_size, markers.local_size)
_register_axis_lowering(intrinsics.num_groups, _num_groups)
_register_axis_lowering(
    intrinsics.global_size,
    lambda builder, axis: builder.mul(_num_groups(builder, axis), markers.local_size(builder, axis)))
