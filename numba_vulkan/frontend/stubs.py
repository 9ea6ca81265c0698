"""Typing and lowering of the kernel API in :mod:`numba_vulkan.base.intrinsics`."""

import math

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.datamodel import models, register_default
from numba.core.errors import TypingError
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import (AbstractTemplate, AttributeTemplate, CallableTemplate,
                                         Registry, signature)
from numba.core.typing.typeof import typeof_impl
from numba.np.arrayobj import populate_array

from numba_vulkan.base import intrinsics
from numba_vulkan.base.errors import UnsupportedError
from numba_vulkan.llvmir import markers

typing_registry = Registry()
lowering_registry = LoweringRegistry("numba_vulkan")
lower_constant = lowering_registry.lower_constant
lower_getattr = lowering_registry.lower_getattr

_i32 = ir.IntType(32)
_i64 = ir.IntType(64)

#: LLVM address space of workgroup memory on the SPIR-V target.
WORKGROUP = 3

#: Builtins read through an LLVM SPIR-V intrinsic.
_BUILTIN_INTRINSICS = {
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
        return _wide(builder, emit(builder, sig.args[0].literal_value))


def _wide(builder, value):
    return value if value.type == _i64 else builder.zext(value, _i64)


def _wide_product(builder, a, b):
    # Both 32-bit and unsigned: the 64-bit product neither wraps nor overflows.
    return builder.mul(builder.zext(a, _i64), builder.zext(b, _i64), flags=("nuw", "nsw"))


def _global_id(builder, axis):
    # In 64 bits, as numba.cuda's grid(1): Vulkan's GlobalInvocationId is a
    # 32-bit value, which wraps once a launch has 2^32 invocations along an
    # axis (an H200 allows 2^31 - 1 workgroups of up to 1024).
    first = _wide_product(builder, _intrinsic(builder, "llvm.spv.group.id.i32", axis),
                          markers.local_size(builder, axis))
    local = builder.zext(_intrinsic(builder, "llvm.spv.thread.id.in.group.i32", axis), _i64)
    return builder.add(first, local, flags=("nuw", "nsw"))


#: How each per-axis function reads its value along an axis: an i32, or an
#: i64 where the value may not fit in 32 bits.
_AXIS_EMITTERS = {
    **{func: lambda builder, axis, _name=name: _intrinsic(builder, _name, axis)
       for func, name in _BUILTIN_INTRINSICS.items()},
    intrinsics.global_id: _global_id,
    intrinsics.local_size: markers.local_size,
    intrinsics.num_groups: _num_groups,
    intrinsics.global_size: lambda builder, axis: _wide_product(
        builder, _num_groups(builder, axis), markers.local_size(builder, axis)),
}

for _func, _emit in _AXIS_EMITTERS.items():
    _register_axis_lowering(_func, _emit)


# grid and gridsize: all axes at once ---------------------------------------

def _ndim_template(func, name):
    class NdimTemplate(AbstractTemplate):
        key = func

        def generic(self, args, kws):
            if kws or len(args) != 1:
                raise TypingError(f"nv.{name}(ndim) takes one argument")
            ndim = args[0]
            if not (isinstance(ndim, types.IntegerLiteral) and ndim.literal_value in (1, 2, 3)):
                raise TypingError(f"nv.{name}(ndim): ndim must be 1, 2 or 3 known at compile "
                                  f"time, not {ndim}")
            n = ndim.literal_value
            return signature(types.int64 if n == 1 else types.UniTuple(types.int64, n), ndim)

    NdimTemplate.__name__ = f"{name}_template"
    typing_registry.register_global(func, types.Function(NdimTemplate))


def _register_ndim(func, name, axis_func):
    _ndim_template(func, name)
    emit = _AXIS_EMITTERS[axis_func]

    @lowering_registry.lower(func, types.IntegerLiteral)
    def lower(context, builder, sig, args):
        n = sig.args[0].literal_value
        values = [_wide(builder, emit(builder, axis)) for axis in range(n)]
        if n == 1:
            return values[0]
        return context.make_tuple(builder, sig.return_type, values)


_register_ndim(intrinsics.grid, "grid", intrinsics.global_id)
_register_ndim(intrinsics.gridsize, "gridsize", intrinsics.global_size)


# Subgroups ----------------------------------------------------------------

#: Functions of no arguments read through an LLVM SPIR-V intrinsic.
_NULLARY_INTRINSICS = {
    intrinsics.lane_id: "llvm.spv.subgroup.local.invocation.id",
    intrinsics.subgroup_size: "llvm.spv.subgroup.size",
    intrinsics.subgroup.id: "llvm.spv.subgroup.id",
}


def _read_nullary(builder, func):
    name = _NULLARY_INTRINSICS[func]
    try:
        fn = builder.module.get_global(name)
    except KeyError:
        fn = ir.Function(builder.module, ir.FunctionType(_i32, []), name)
    return builder.zext(builder.call(fn, []), _i64)


def _nullary_template(func):
    class NullaryTemplate(AbstractTemplate):
        key = func

        def generic(self, args, kws):
            if args or kws:
                raise TypingError(f"nv.{func.__name__}() takes no arguments")
            return signature(types.int64)

    typing_registry.register_global(func, types.Function(NullaryTemplate))

    @lowering_registry.lower(func)
    def lower(context, builder, sig, args):
        return _read_nullary(builder, func)


for _func in _NULLARY_INTRINSICS:
    _nullary_template(_func)


@typeof_impl.register(intrinsics.KernelValue)
def _typeof_kernel_value(value, c):
    return types.int64


def kernel_value(builder, value):
    """Read a :class:`~numba_vulkan.base.intrinsics.KernelValue` (numba.cuda's
    ``laneid``, ``warpsize``) where a kernel names it."""
    return _read_nullary(builder, value.func)


# numba.cuda's threadIdx, blockIdx, blockDim, gridDim ----------------------

class Dim3Type(types.Type):
    """The Numba type of one :class:`~numba_vulkan.base.intrinsics.Dim3` object."""

    def __init__(self, dim3):
        self.dim3 = dim3
        super().__init__(name=f"Dim3({dim3.name})")

    @property
    def key(self):
        return self.dim3.name


register_default(Dim3Type)(models.OpaqueModel)


@typeof_impl.register(intrinsics.Dim3)
def _typeof_dim3(value, c):
    return Dim3Type(value)


@lower_constant(Dim3Type)
def _lower_dim3_constant(context, builder, ty, value):
    return context.get_dummy_value()


@typing_registry.register_attr
class _Dim3Attributes(AttributeTemplate):
    key = Dim3Type

    def generic_resolve(self, ty, attr):
        if attr in ("x", "y", "z"):
            return types.int64
        return None


for _attr, _axis in (("x", 0), ("y", 1), ("z", 2)):
    @lower_getattr(Dim3Type, _attr)
    def _lower_dim3_axis(context, builder, ty, value, _axis=_axis):
        return builder.zext(_AXIS_EMITTERS[ty.dim3.axis_of](builder, _axis), _i64)


# Workgroup and private arrays --------------------------------------------

def _literal_shape(ty):
    if isinstance(ty, types.IntegerLiteral):
        return (ty.literal_value,)
    if isinstance(ty, types.BaseTuple) and all(isinstance(t, types.IntegerLiteral) for t in ty):
        return tuple(t.literal_value for t in ty)
    return None


def _dtype(ty):
    if isinstance(ty, (types.NumberClass, types.DType)):
        return ty.dtype
    if isinstance(ty, types.TypeRef) and isinstance(ty.instance_type, types.Record):
        # A record type from numba.from_dtype(dtype).
        return ty.instance_type
    if isinstance(ty, types.StringLiteral):
        # numba.cuda also takes the dtype's name: "float32".
        from numba.np.numpy_support import from_dtype
        try:
            return from_dtype(np.dtype(ty.literal_value))
        except (TypeError, NotImplementedError):
            return None
    return None


def _shape_hint(dynamic):
    """What to do about a shape that is not a compile-time constant."""
    hint = (": sizes are integers written in the kernel or global constants; arithmetic "
            "on them, such as (TILE + 2, TILE + 2), is not folded, so name the result as "
            "a global (TILE2 = TILE + 2) and use it")
    if dynamic:
        hint += ("; for a size chosen at launch (a kernel argument), use "
                 "shared.array(0, dtype), which views the launch's dynamic shared memory "
                 "(kernel[blocks, threads, stream, nbytes])")
    return hint


def _array_template(func, what, dynamic=False):
    class ArrayTemplate(CallableTemplate):
        key = func
        prefer_literal = True

        def generic(self):
            def typer(shape, dtype):
                dims = _literal_shape(shape)
                if dims is None and _dtype(dtype) is not None:
                    raise TypingError(f"{what}(shape, dtype): the shape ({shape}) is not a "
                                      "compile-time constant" + _shape_hint(dynamic))
                if dims is None or _dtype(dtype) is None:
                    raise TypingError(
                        f"{what}(shape, dtype): shape must be an int or a tuple of ints known "
                        f"at compile time and dtype a NumPy scalar type or its name; got "
                        f"{shape}, {dtype}")
                if dynamic and dims == (0,):
                    # numba.cuda's dynamic shared memory: sized at launch.
                    return types.Array(_dtype(dtype), 1, "C")
                if any(d < 1 for d in dims):
                    hint = (" (shape 0, and only it, is the launch's dynamic shared memory)"
                            if dynamic else "")
                    raise TypingError(f"{what}: every extent must be positive, not "
                                      f"{dims}{hint}")
                return types.Array(_dtype(dtype), len(dims), "C")
            return typer

    typing_registry.register_global(func, types.Function(ArrayTemplate))


_array_template(intrinsics.shared.array, "nv.shared.array", dynamic=True)
_array_template(intrinsics.local.array, "nv.local.array")

def _array_value(context, builder, aryty, dims, data):
    item = context.get_abi_sizeof(context.get_data_type(aryty.dtype))
    strides, stride = [], item
    for extent in reversed(dims):
        strides.insert(0, stride)
        stride *= extent
    intp = context.get_value_type(types.intp)
    data = builder.bitcast(data, context.get_value_type(types.CPointer(aryty.dtype)))
    ary = context.make_array(aryty)(context, builder)
    populate_array(ary, data=data, shape=[ir.Constant(intp, d) for d in dims],
                   strides=[ir.Constant(intp, s) for s in strides], itemsize=item,
                   meminfo=None)
    return ary._getvalue()


@lowering_registry.lower(intrinsics.shared.array, types.Any, types.Any)
def _lower_shared_array(context, builder, sig, args):
    dims = _literal_shape(sig.args[0])
    if dims == (0,):
        return _dynamic_shared_array(context, builder, sig.return_type)
    storage = ir.ArrayType(context.get_data_type(sig.return_type.dtype), math.prod(dims))
    # Workgroup memory is a module-level variable in LLVM's address space 3;
    # Numba's arrays hold generic pointers, so the data pointer is a cast.
    # Named per module, not per process: the IR (and so the kernel cache
    # key) must not depend on what else the process compiled first.
    var = ir.GlobalVariable(builder.module, storage,
                            builder.module.get_unique_name("nv.shared"), addrspace=WORKGROUP)
    var.linkage = "internal"
    var.initializer = ir.Constant(storage, ir.Undefined)
    var.align = 16
    data = builder.addrspacecast(var, ir.PointerType(storage))
    return _array_value(context, builder, sig.return_type, dims, data)


#: The workgroup variable behind every ``shared.array(0, dtype)`` of a kernel.
DYNAMIC_SHARED = "nv.dynamic_shared"


def _dynamic_shared_array(context, builder, aryty):
    """A view of the launch's dynamic shared memory, as numba.cuda's: every
    such array of a kernel starts at the same byte, and holds as many
    elements of its dtype as the launch's ``shared_bytes`` has room for.

    The kernel is compiled for one size (the target context's
    ``dynamic_shared_bytes``, set per compile), so the block is an ordinary
    workgroup array: SPIR-V has no unsized workgroup arrays, and LLVM's
    backend cannot size one by a specialization constant.
    """
    nbytes = getattr(context, "dynamic_shared_bytes", 0)
    module = builder.module
    elem = context.get_data_type(aryty.dtype)
    item = context.get_abi_sizeof(elem)
    try:
        var = module.get_global(DYNAMIC_SHARED)
    except KeyError:
        # Typed by its first view: logical addressing reads and writes
        # workgroup arrays by element. At least one element: SPIR-V has no
        # empty arrays. Linked once across the kernel's modules, so that
        # device functions see the same block.
        storage = ir.ArrayType(elem, max(-(-nbytes // item), 1))
        var = ir.GlobalVariable(module, storage, DYNAMIC_SHARED, addrspace=WORKGROUP)
        var.linkage = "linkonce_odr"
        var.initializer = ir.Constant(storage, ir.Undefined)
        var.align = 16
    first = context.get_abi_sizeof(var.value_type.element)
    if first != item:
        raise UnsupportedError(
            f"shared.array(0, {aryty.dtype}) views the dynamic shared memory that an "
            f"earlier shared.array(0, ...) views with {first}-byte elements: here every "
            "view of it must have elements of one size (take a slice of one view instead)")
    data = builder.addrspacecast(var, ir.PointerType(var.value_type))
    return _array_value(context, builder, aryty, (nbytes // item,), data)


@lowering_registry.lower(intrinsics.local.array, types.Any, types.Any)
def _lower_local_array(context, builder, sig, args):
    dims = _literal_shape(sig.args[0])
    storage = ir.ArrayType(context.get_data_type(sig.return_type.dtype), math.prod(dims))
    # Not cgutils.alloca_once, which stores zeros: the contents start
    # undefined, and LLVM makes that store a memset that Vulkan cannot express.
    with builder.goto_entry_block():
        data = builder.alloca(storage, name="nv.local")
    return _array_value(context, builder, sig.return_type, dims, data)


class _ConstArrayLikeTemplate(AbstractTemplate):
    key = intrinsics.const.array_like

    def generic(self, args, kws):
        if len(args) != 1 or kws or not isinstance(args[0], types.Array):
            raise TypingError("nv.const.array_like(arr) takes one array, a global NumPy array")
        return signature(args[0].copy(readonly=True), args[0])


typing_registry.register_global(intrinsics.const.array_like,
                                types.Function(_ConstArrayLikeTemplate))


@lowering_registry.lower(intrinsics.const.array_like, types.Array)
def _lower_const_array_like(context, builder, sig, args):
    # A global NumPy array is already a constant table in the module.
    return args[0]


# Barrier -----------------------------------------------------------------

class _BarrierTemplate(AbstractTemplate):
    key = intrinsics.barrier

    def generic(self, args, kws):
        if args or kws:
            raise TypingError("nv.barrier() takes no arguments")
        return signature(types.none)


typing_registry.register_global(intrinsics.barrier, types.Function(_BarrierTemplate))


@lowering_registry.lower(intrinsics.barrier)
def _lower_barrier(context, builder, sig, args):
    _emit_barrier(builder)
    return context.get_dummy_value()


def _emit_barrier(builder):
    name = "llvm.spv.group.memory.barrier.with.group.sync"
    try:
        fn = builder.module.get_global(name)
    except KeyError:
        fn = ir.Function(builder.module, ir.FunctionType(ir.VoidType(), []), name)
        # Convergent: LLVM must not make the barrier depend on more (or
        # other) conditions than the program does.
        fn.attributes.add("convergent")
        fn.attributes.add("nounwind")
    builder.call(fn, [])


#: LLVM synchronisation scope of each fence; codegen's fixups give the
#: resulting OpMemoryBarrier the storage classes it orders.
_FENCES = {intrinsics.fence: "device", intrinsics.workgroup_fence: "workgroup"}


def _fence(func, scope):
    class FenceTemplate(AbstractTemplate):
        key = func

        def generic(self, args, kws):
            if args or kws:
                raise TypingError(f"nv.{func.__name__}() takes no arguments")
            return signature(types.none)

    typing_registry.register_global(func, types.Function(FenceTemplate))

    @lowering_registry.lower(func)
    def lower(context, builder, sig, args):
        builder.fence("acq_rel", scope)
        return context.get_dummy_value()


for _func, _scope in _FENCES.items():
    _fence(_func, _scope)


#: Counted barriers: the value the workgroup's word starts at and the
#: atomic that folds each invocation's predicate (0 or 1) into it.
_COUNTED_BARRIERS = {
    intrinsics.barrier_count: (0, "add"),
    intrinsics.barrier_and: (1, "and"),
    intrinsics.barrier_or: (0, "or"),
}


def _counted_barrier(func, start, op):
    class CountedBarrierTemplate(AbstractTemplate):
        key = func

        def generic(self, args, kws):
            if kws or len(args) != 1 or not isinstance(args[0], (types.Boolean, types.Integer)):
                raise TypingError(f"nv.{func.__name__}(predicate) takes one bool or int")
            return signature(types.int64, args[0])

    typing_registry.register_global(func, types.Function(CountedBarrierTemplate))

    @lowering_registry.lower(func, types.Any)
    def lower(context, builder, sig, args):
        # One word of workgroup memory per call: the first invocation sets
        # it between two barriers, every invocation folds its predicate in,
        # all read it after a third, and a fourth keeps the next call's
        # reset from overtaking a slow reader.
        var = ir.GlobalVariable(builder.module, _i32,
                                builder.module.get_unique_name("nv.counted"),
                                addrspace=WORKGROUP)
        var.linkage = "internal"
        var.initializer = ir.Constant(_i32, ir.Undefined)
        var.align = 4
        word = builder.addrspacecast(var, ir.PointerType(_i32))
        lid = _AXIS_EMITTERS[intrinsics.local_id]
        zero = ir.Constant(_i32, 0)
        first = builder.and_(builder.and_(builder.icmp_unsigned("==", lid(builder, 0), zero),
                                          builder.icmp_unsigned("==", lid(builder, 1), zero)),
                             builder.icmp_unsigned("==", lid(builder, 2), zero))
        _emit_barrier(builder)
        with builder.if_then(first):
            builder.store(ir.Constant(_i32, start), word)
        _emit_barrier(builder)
        truth = context.cast(builder, args[0], sig.args[0], types.boolean)
        builder.atomic_rmw(op, word, builder.zext(truth, _i32), "monotonic")
        _emit_barrier(builder)
        result = builder.load(word)
        _emit_barrier(builder)
        return builder.zext(result, _i64)


for _func, (_start, _op) in _COUNTED_BARRIERS.items():
    _counted_barrier(_func, _start, _op)


# Atomics -----------------------------------------------------------------

#: LLVM ``atomicrmw`` operation of each atomic on (signed, unsigned) integers.
_INT_RMW = {
    "add": ("add", "add"), "sub": ("sub", "sub"), "and_": ("and", "and"),
    "or_": ("or", "or"), "xor": ("xor", "xor"), "exch": ("xchg", "xchg"),
    "min": ("min", "umin"), "max": ("max", "umax"),
}
#: Operations on floats, done with a compare-and-swap loop on their bits.
_FLOAT_OPS = ("add", "sub", "min", "max", "exch", "nanmin", "nanmax")
#: Operations on integers done with a compare-and-swap loop: numba.cuda's
#: wrapping increment and decrement.
_INT_CAS_OPS = ("inc", "dec")
#: Element types atomics support.
_ATOMIC_DTYPES = (types.int32, types.uint32, types.int64, types.uint64, types.float32,
                  types.float64)


def _atomic_index(ary, idx):
    if isinstance(idx, types.Integer):
        return ary.ndim == 1
    return (isinstance(idx, types.BaseTuple) and len(idx) == ary.ndim
            and all(isinstance(t, types.Integer) for t in idx))


def _check_atomic(name, ary, idx, values):
    what = f"nv.atomic.{name}"
    if not isinstance(ary, types.Array):
        raise TypingError(f"{what}: the first argument must be an array, not {ary}")
    if ary.dtype not in _ATOMIC_DTYPES:
        raise TypingError(f"{what}: arrays of {ary.dtype} are not supported; atomics work "
                          "on int32, uint32, int64, uint64, float32 and float64 arrays")
    if isinstance(ary.dtype, types.Float) and name not in _FLOAT_OPS + ("cas", "compare_and_swap"):
        raise TypingError(f"{what} is not defined for float arrays")
    if not _atomic_index(ary, idx):
        floats = isinstance(idx, types.Float) or (isinstance(idx, types.BaseTuple) and any(
            isinstance(t, types.Float) for t in idx))
        # Numba types a variable that is an int64 on one path and a uint64 on
        # another as float64.
        hint = (" (a variable holding an int64 on one path and a uint64 on another is a "
                "float64 in Numba: make both the same type, or index with int(...))"
                if floats else "")
        raise TypingError(f"{what}: the index must be an int or a tuple of {ary.ndim} ints "
                          f"for a {ary.ndim}-d array, not {idx}{hint}")
    for value in values:
        if not isinstance(value, (types.Number, types.Boolean)):
            raise TypingError(f"{what}: values must be numbers, not {value}")
    if not ary.mutable:
        raise TypingError(f"{what}: the array is read-only")
    return ary.dtype


def _atomic_template(name):
    func = getattr(intrinsics.atomic, name)

    class AtomicTemplate(CallableTemplate):
        key = func

        def generic(self):
            if name == "cas":
                def typer(ary, idx, expected, value):
                    return _check_atomic(name, ary, idx, (expected, value))
            else:
                def typer(ary, idx, value):
                    return _check_atomic(name, ary, idx, (value,))
            return typer

    typing_registry.register_global(func, types.Function(AtomicTemplate))


def _atomic_pointer(context, builder, aryty, ary, idxty, idx):
    array = context.make_array(aryty)(context, builder, ary)
    if isinstance(idxty, types.BaseTuple):
        indices = cgutils.unpack_tuple(builder, idx, len(idxty))
        index_types = idxty.types
    else:
        indices, index_types = [idx], [idxty]
    indices = [context.cast(builder, i, t, types.intp) for i, t in zip(indices, index_types)]
    return cgutils.get_item_pointer(context, builder, aryty, array, indices, wraparound=True)


def _float_update(builder, name, old, value):
    if name == "add":
        return builder.fadd(old, value)
    if name == "sub":
        return builder.fsub(old, value)
    if name == "exch":
        return value
    # Python's min and max: keep the old value unless the new one wins.
    wins = builder.fcmp_ordered("<" if name in ("min", "nanmin") else ">", value, old)
    if name in ("nanmin", "nanmax"):
        # NaN is ignored: a NaN old value loses to any value.
        wins = builder.or_(wins, builder.fcmp_unordered("uno", old, old))
    return builder.select(wins, value, old)


def _int_update(builder, name, old, value, signed):
    compare = builder.icmp_signed if signed else builder.icmp_unsigned
    one = ir.Constant(old.type, 1)
    if name == "inc":
        # numba.cuda's: 0 once the old value reaches ``value``, else old + 1.
        return builder.select(compare(">=", old, value), ir.Constant(old.type, 0),
                              builder.add(old, one))
    # dec: ``value`` when the old value is 0 or above it, else old - 1.
    reset = builder.or_(builder.icmp_unsigned("==", old, ir.Constant(old.type, 0)),
                        compare(">", old, value))
    return builder.select(reset, value, builder.sub(old, one))


def _cas_loop(builder, ptr, valuety, update):
    """Replace the value at ``ptr`` by ``update(old)`` with a compare-and-swap
    loop on its bits; return the old value."""
    bits = valuety if isinstance(valuety, ir.IntType) else ir.IntType(
        64 if isinstance(valuety, ir.DoubleType) else 32)
    start = builder.load(ptr, typ=bits)
    entry = builder.block
    loop = builder.append_basic_block("nv.cas.loop")
    done = builder.append_basic_block("nv.cas.done")
    builder.branch(loop)
    builder.position_at_end(loop)
    current = builder.phi(bits)
    current.add_incoming(start, entry)
    old = current if bits is valuety else builder.bitcast(current, valuety)
    new = update(old)
    if bits is not valuety:
        new = builder.bitcast(new, bits)
    pair = builder.cmpxchg(ptr, current, new, "monotonic", "monotonic")
    seen = builder.extract_value(pair, 0)
    current.add_incoming(seen, loop)
    builder.cbranch(builder.extract_value(pair, 1), done, loop)
    builder.position_at_end(done)
    return old


def _cmpxchg(context, builder, dtype, ptr, expected, expty, value, valty):
    expected = context.cast(builder, expected, expty, dtype)
    value = context.cast(builder, value, valty, dtype)
    if isinstance(dtype, types.Float):
        bits = ir.IntType(dtype.bitwidth)
        expected = builder.bitcast(expected, bits)
        value = builder.bitcast(value, bits)
    pair = builder.cmpxchg(ptr, expected, value, "monotonic", "monotonic")
    old = builder.extract_value(pair, 0)
    if isinstance(dtype, types.Float):
        return builder.bitcast(old, context.get_value_type(dtype))
    return old


class _CompareAndSwapTemplate(CallableTemplate):
    """Both arities: numba.cuda's ``(array, expected, value)`` on ``array[0]``
    and our ``(array, index, expected, value)``."""

    key = intrinsics.atomic.compare_and_swap

    def generic(self):
        def typer(ary, a, b, c=None):
            if c is None:
                if isinstance(ary, types.Array) and ary.ndim != 1:
                    raise TypingError("nv.atomic.compare_and_swap(array, expected, value) "
                                      "works on array[0] of a 1-d array; pass an index "
                                      "for a multi-dimensional one")
                return _check_atomic("compare_and_swap", ary, types.intp, (a, b))
            return _check_atomic("compare_and_swap", ary, a, (b, c))
        return typer


typing_registry.register_global(intrinsics.atomic.compare_and_swap,
                                types.Function(_CompareAndSwapTemplate))


@lowering_registry.lower(intrinsics.atomic.compare_and_swap, types.Array, types.Any, types.Any)
def _lower_compare_and_swap3(context, builder, sig, args):
    aryty, expty, valty = sig.args
    ptr = _atomic_pointer(context, builder, aryty, args[0], types.intp,
                          context.get_constant(types.intp, 0))
    return _cmpxchg(context, builder, aryty.dtype, ptr, args[1], expty, args[2], valty)


@lowering_registry.lower(intrinsics.atomic.compare_and_swap, types.Array, types.Any,
                         types.Any, types.Any)
def _lower_compare_and_swap4(context, builder, sig, args):
    aryty, idxty, expty, valty = sig.args
    ptr = _atomic_pointer(context, builder, aryty, args[0], idxty, args[1])
    return _cmpxchg(context, builder, aryty.dtype, ptr, args[2], expty, args[3], valty)


def _register_atomic(name):
    _atomic_template(name)
    func = getattr(intrinsics.atomic, name)

    if name == "cas":
        @lowering_registry.lower(func, types.Array, types.Any, types.Any, types.Any)
        def lower_cas(context, builder, sig, args):
            aryty, idxty, expty, valty = sig.args
            ptr = _atomic_pointer(context, builder, aryty, args[0], idxty, args[1])
            return _cmpxchg(context, builder, aryty.dtype, ptr, args[2], expty, args[3], valty)
        return

    @lowering_registry.lower(func, types.Array, types.Any, types.Any)
    def lower_rmw(context, builder, sig, args):
        aryty, idxty, valty = sig.args
        dtype = aryty.dtype
        ptr = _atomic_pointer(context, builder, aryty, args[0], idxty, args[1])
        value = context.cast(builder, args[2], valty, dtype)
        if (dtype == types.float32 and name in ("add", "sub")
                and getattr(context, "float32_atomic_add", False)):
            if name == "sub":
                value = builder.fneg(value)
            return builder.atomic_rmw("fadd", ptr, value, "monotonic")
        if isinstance(dtype, types.Float):
            return _cas_loop(builder, ptr, context.get_value_type(dtype),
                             lambda old: _float_update(builder, name, old, value))
        if name in _INT_CAS_OPS:
            return _cas_loop(builder, ptr, context.get_value_type(dtype),
                             lambda old: _int_update(builder, name, old, value, dtype.signed))
        op = _INT_RMW[name.replace("nan", "")][0 if dtype.signed else 1]
        return builder.atomic_rmw(op, ptr, value, "monotonic")


for _name in ("add", "sub", "and_", "or_", "xor", "exch", "min", "max", "cas", "inc", "dec",
              "nanmin", "nanmax"):
    _register_atomic(_name)
