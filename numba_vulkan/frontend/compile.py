"""Compile a Python kernel with Numba for the Vulkan target, to LLVM IR."""

import dataclasses
import gc
from dataclasses import dataclass, field

from llvmlite import ir
from numba.core import compiler, types
from numba.core.compiler_lock import global_compiler_lock
from numba.core.errors import NumbaError, UnsupportedBytecodeError
from numba.core.target_extension import target_override
from numba.np import numpy_support

from numba_vulkan.base import abi
from numba_vulkan.base import config
from numba_vulkan.base import records
from numba_vulkan.base import signature
from numba_vulkan.llvmir import markers
from numba_vulkan.frontend import checks
from numba_vulkan.frontend import diagnostics
from numba_vulkan.frontend import printing
from numba_vulkan.base.errors import CompilerError, UnsupportedError
from numba_vulkan.base.target import DEFAULT

#: Name of the SPIR-V entry point of every kernel.
ENTRY_POINT = "main"

_frozen = False


def contexts():
    """The typing and target contexts of the Vulkan target, made on first use."""
    global _frozen
    from numba_vulkan.frontend.target import vulkan_target
    with global_compiler_lock:
        made = vulkan_target.typing_context, vulkan_target.target_context
        if not _frozen and config.freeze_imports():
            # Numba's types, templates and registries, some hundred thousand
            # objects that live as long as the process, would otherwise be
            # walked by every full collection of the compiles to come (a
            # first call's one took 80-120 ms).
            gc.freeze()
        _frozen = True
        return made


@dataclass
class KernelIR:
    """A kernel lowered to LLVM IR, with what the runtime needs to call it.

    Attributes:
        name: Qualified name of the Python function.
        modules: LLVM IR text of every module, the entry point's last.
        params: The :class:`numba_vulkan.base.abi.Param` of each argument.
        push_size: Size of the push constant block in bytes.
        signature: The Numba signature, as text.
        options: The compile options.
        exceptions: What each error code the kernel may write to its status
            buffer stands for (see :func:`numba_vulkan.frontend.checks.exceptions`).
        prints: The format of each ``print`` call the kernel makes
            (``metadata["print"]``, see :mod:`numba_vulkan.base.printbuffer`).
    """

    name: str
    modules: list
    params: tuple
    push_size: int
    signature: str
    options: dict = field(default_factory=dict)
    exceptions: dict = field(default_factory=dict)
    prints: dict = field(default_factory=dict)


def has_checks(options):
    """Whether kernels compiled with ``options`` report errors to the host."""
    return bool(options.get("boundscheck")) or options.get("error_model") == "python"


def numba_types(sig):
    """Numba types of argument types in text form (see :mod:`numba_vulkan.base.signature`)."""
    out = []
    for text in sig:
        items = signature.tuple_items(text)
        if items is not None:
            out.append(types.Tuple.from_types([_scalar_type(item) for item in items]))
            continue
        kind, dtype, ndim, layout = signature.parse(text)
        if records.is_record(dtype):
            scalar = numpy_support.from_dtype(records.dtype(dtype))
            out.append(types.Array(scalar, ndim, layout) if kind == "array" else scalar)
            continue
        else:
            scalar = _scalar_type(dtype)
        out.append(types.Array(scalar, ndim, layout) if kind == "array" else scalar)
    return tuple(out)


def _scalar_type(name):
    return types.boolean if name == "bool" else getattr(types, name)


def _tuple_text(ty):
    """The text form of a tuple of numbers, or None if ``ty`` is not one."""
    if not (isinstance(ty, types.BaseTuple) and len(ty) and all(
            isinstance(item, (types.Boolean, types.Integer, types.Float)) for item in ty)):
        return None
    return f"({','.join('bool' if isinstance(i, types.Boolean) else str(i) for i in ty)})"


def signature_text(sig):
    """Argument types in text form from a Numba signature (a string such as
    ``"void(float32[::1])"`` or a signature object such as
    ``void(float32[::1])``), a tuple of Numba types, or a tuple of types in
    text form."""
    from numba.core.typing.templates import Signature
    if isinstance(sig, (str, Signature)):
        from numba.core import sigutils
        try:
            args, returns = sigutils.normalize_signature(sig)
        except Exception as exc:
            raise TypeError(f"bad signature {sig!r}: {exc}") from None
        if returns not in (None, types.none, types.void):
            raise TypeError(f"signature {sig!r} returns {returns}: a kernel returns nothing "
                            "(void)")
    else:
        args = tuple(sig)
    out = []
    for ty in args:
        if isinstance(ty, str):
            signature.parse(ty)
            out.append(ty)
        elif isinstance(ty, types.Array):
            out.append(signature.array(_dtype_of(ty.dtype), ty.ndim,
                                       "C" if ty.layout == "C" else "A"))
        elif isinstance(ty, types.Record):
            out.append(signature.dtype_text(_dtype_of(ty)))
        elif isinstance(ty, types.Boolean):
            out.append("bool")
        elif isinstance(ty, (types.Integer, types.Float, types.Complex)):
            out.append(str(ty))
        elif _tuple_text(ty) is not None:
            out.append(_tuple_text(ty))
        else:
            raise TypeError(f"type {ty} in signature {sig!r} cannot be a kernel argument")
    return tuple(out)


def _dtype_of(ty):
    """The NumPy dtype of a Numba array's element type (a record's keeps
    its layout)."""
    if isinstance(ty, types.Record):
        return numpy_support.as_dtype(ty)
    return str(ty)


def _flags(options):
    from numba_vulkan.frontend.flags import VulkanTargetOptions
    numba_options = {k: v for k, v in options.items() if k != "cache"}
    return VulkanTargetOptions.parse_as_flags(compiler.Flags(), numba_options)


def _param_specs(pyfunc, argtypes):
    import inspect
    names = list(inspect.signature(pyfunc).parameters)
    if len(names) != len(argtypes):
        raise CompilerError(diagnostics.located(
            pyfunc, f"it takes {len(names)} arguments, {len(argtypes)} types were given"),
            kernel=pyfunc.__qualname__)
    specs = []
    for name, ty in zip(names, argtypes):
        if isinstance(ty, types.Array):
            layout = "C" if ty.layout == "C" else "A"
            try:
                dtype = signature.dtype_text(_dtype_of(ty.dtype))
            except TypeError as exc:
                raise TypeError(f"parameter {name!r}: {exc}") from None
            specs.append((name, "array", dtype, ty.ndim, layout))
        elif isinstance(ty, types.Record):
            try:
                dtype = signature.dtype_text(_dtype_of(ty))
            except TypeError as exc:
                raise TypeError(f"parameter {name!r}: {exc}") from None
            specs.append(signature.argument_spec(name, dtype))
        elif isinstance(ty, (types.Integer, types.Float, types.Complex, types.Boolean)):
            specs.append((name, "scalar", str(ty), 0, "C"))
        elif _tuple_text(ty) is not None:
            specs.append((name, "scalar", signature.tuple_record(_tuple_text(ty)), 0, "C"))
        else:
            raise CompilerError(diagnostics.located(
                pyfunc, f"parameter {name!r} has type {ty}, which a kernel cannot take; "
                "use a scalar, an array or a tuple of numbers"), kernel=pyfunc.__qualname__)
    return specs


def normalise_argtypes(argtypes):
    """Map argument types to the ones a kernel is compiled for.

    Arrays of any layout other than C-contiguous are compiled as strided
    ('A'), and read-only arrays as writable ones, so that one module serves
    every view of the same dtype and rank.
    """
    out = []
    for ty in argtypes:
        if isinstance(ty, types.Array):
            layout = "C" if ty.layout == "C" else "A"
            ty = types.Array(ty.dtype, ty.ndim, layout)
        out.append(ty)
    return tuple(out)


def compile_kernel(pyfunc, argtypes, narrowed=(), options=None, float32_atomic_add=False,
                   max_push_constants=DEFAULT.max_push_constants, shared_bytes=0):
    """Type and lower ``pyfunc`` for ``argtypes``; return a :class:`KernelIR`.

    Args:
        pyfunc: The kernel's Python function.
        argtypes: Numba types of its arguments.
        narrowed: dtype names the target narrows to 32 bits.
        options: Compile options such as ``fastmath``.
        float32_atomic_add: Whether the target adds float32 atomically in
            hardware; if not, float atomics are compare-and-swap loops.
        max_push_constants: The target's push constant size: arguments
            past it travel in the argument buffer (see :mod:`numba_vulkan.base.abi`).
        shared_bytes: Bytes of dynamic shared memory, the room of every
            ``shared.array(0, dtype)``.
    """
    options = dict(options or {})
    argtypes = normalise_argtypes(argtypes)
    specs = _param_specs(pyfunc, argtypes)
    try:
        params, push_size = abi.layout(specs, narrowed, has_checks(options), max_push_constants)
    except TypeError as exc:
        raise UnsupportedError(diagnostics.located(pyfunc, str(exc)),
                               kernel=pyfunc.__qualname__) from None
    typing_context, target_context = contexts()
    with global_compiler_lock, target_override("vulkan"):
        # The lowering of atomics reads this, that of subgroup operations and
        # bit functions the other; the lock keeps them per compile.
        target_context.float32_atomic_add = float32_atomic_add
        target_context.int64_narrowed = "int64" in narrowed
        target_context.float64_narrowed = "float64" in narrowed
        target_context.dynamic_shared_bytes = shared_bytes
        try:
            cres = compiler.compile_extra(typing_context, target_context, pyfunc,
                                          args=argtypes, return_type=None,
                                          flags=_flags(options), locals={})
        except NumbaError as exc:
            # Numba's own message and traceback run to dozens of lines; they
            # stay reachable as the error's __context__.
            raise diagnostics.numba_error(pyfunc, exc) from None
        except UnsupportedBytecodeError as exc:
            raise diagnostics.bytecode_error(pyfunc, exc) from None
        except AttributeError as exc:
            error = diagnostics.attribute_error(pyfunc, exc)
            if error is None:
                raise
            raise error from None
        finally:
            target_context.float32_atomic_add = False
            target_context.int64_narrowed = False
            target_context.float64_narrowed = False
            target_context.dynamic_shared_bytes = 0
        if cres.signature.return_type not in (types.none, types.void):
            raise CompilerError(diagnostics.located(
                pyfunc, f"it returns {cres.signature.return_type}; kernels must not return "
                "a value (write results into an array)"), kernel=pyfunc.__qualname__)
        prints = printing.formats(cres.library.modules())
        if prints:
            # The print buffer's binding comes after every other.
            params, push_size = abi.layout(specs, narrowed, has_checks(options),
                                           max_push_constants, printing=True)
        wrapper = _entry_point(target_context, cres, argtypes, params)
        if prints:
            markers.define_print_buffers(wrapper, [int(k) for k in prints], params[-1].binding)
    modules = cres.library.modules() + [str(wrapper)]
    raised = checks.exceptions(modules) if has_checks(options) else {}
    return KernelIR(pyfunc.__qualname__, modules, params, push_size,
                    str(cres.signature.replace(return_type=types.void)), options, raised,
                    prints)


def _entry_point(context, cres, argtypes, params):
    """The SPIR-V entry point: reads each argument from its binding, the
    push constants or the argument buffer, builds Numba's value for it and
    calls the kernel."""
    module = context.create_module("entry")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), []), ENTRY_POINT)
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    i32, i64 = ir.IntType(32), ir.IntType(64)
    args = next((p for p in params if p.kind == "args"), None)

    def read(llvm_type, param, delta=0):
        if not param.spilled:
            return markers.push(builder, llvm_type, param.offset + delta)
        return _spilled(builder, args.binding, llvm_type, param.offset + delta)

    values = []
    for param, ty in zip(params, argtypes):
        if param.kind == "array":
            fields = [builder.sext(read(i32, param, 4 * k), i64)
                      for k in range(2 * param.ndim + 1)]
            shape, strides = fields[:param.ndim], fields[param.ndim:2 * param.ndim]
            # A narrowed array's elements are as large as what is stored:
            # codegen narrows the element type to match (codegen/narrow.py).
            element = ty if isinstance(ty, types.Record) else ty.dtype
            item = ir.Constant(i64, abi.itemsize(param.storage) if param.storage != param.dtype
                               else context.get_abi_sizeof(context.get_data_type(element)))
            data = builder.gep(markers.buffer(builder, param.binding),
                               [builder.mul(fields[-1], item)], source_etype=ir.IntType(8))
            if isinstance(ty, types.Record):
                # A record argument: Numba's record value points to its bytes.
                values.append(builder.bitcast(data, context.get_value_type(ty)))
                continue
            nitems = ir.Constant(i64, 1)
            for extent in shape:
                nitems = builder.mul(nitems, extent)
            array = context.make_array(ty)(context, builder)
            array.meminfo = context.get_constant_null(types.MemInfoPointer(ty.dtype))
            array.parent = context.get_constant_null(types.pyobject)
            array.nitems = nitems
            array.itemsize = item
            array.data = data
            array.shape = _tuple(builder, shape)
            array.strides = _tuple(builder, [builder.mul(s, item) for s in strides])
            values.append(array._getvalue())
        else:
            values.append(_scalar(context, builder, ty, param, read))
    callee = context.declare_function(module, cres.fndesc)
    status, _ = context.call_conv.call_function(builder, callee, cres.signature.return_type,
                                                argtypes, values)
    status_param = next((p for p in params if p.kind == "status"), None)
    if status_param is not None:
        with builder.if_then(status.is_error, likely=False):
            _report(builder, markers.buffer(builder, status_param.binding), status.code)
    builder.ret_void()
    return module


def _report(builder, words, code):
    """Store an error code and the invocation's id in the status buffer,
    unless another invocation stored one first."""
    i32 = ir.IntType(32)
    old = builder.cmpxchg(words, ir.Constant(i32, 0), code, "monotonic", "monotonic")
    with builder.if_then(builder.extract_value(old, 1)):
        thread_id = builder.module.declare_intrinsic("llvm.spv.thread.id.i32", (),
                                                     ir.FunctionType(i32, [i32]))
        for axis in range(3):
            slot = builder.gep(words, [ir.Constant(i32, 4 * (axis + 1))],
                               source_etype=ir.IntType(8))
            builder.store(builder.call(thread_id, [ir.Constant(i32, axis)]), slot)


def _tuple(builder, items):
    value = ir.Constant(ir.ArrayType(ir.IntType(64), len(items)), ir.Undefined)
    for k, item in enumerate(items):
        value = builder.insert_value(value, item, k)
    return value


def _spilled(builder, binding, llvm_type, offset):
    """Load a value of the argument buffer at byte ``offset``.

    The buffer is typed as 32-bit words (see :mod:`numba_vulkan.base.abi`), so a
    64-bit value is two words put together, a double through a vector of
    them (a target may have float64 without int64); the loads run once, at
    entry, before the kernel writes anything.
    """
    i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
    base = markers.buffer(builder, binding)
    words = []
    for k in range(2 if isinstance(llvm_type, ir.DoubleType) or llvm_type == i64 else 1):
        word = builder.gep(base, [ir.Constant(i64, offset + 4 * k)], source_etype=i8)
        words.append(builder.load(word, typ=i32, align=4))
    if llvm_type == i64:
        high = builder.shl(builder.zext(words[1], i64), ir.Constant(i64, 32))
        return builder.or_(builder.zext(words[0], i64), high)
    if len(words) == 2:
        pair = ir.Constant(ir.VectorType(i32, 2), ir.Undefined)
        for k, word in enumerate(words):
            pair = builder.insert_element(pair, word, ir.Constant(i32, k))
        return builder.bitcast(pair, llvm_type)
    return builder.bitcast(words[0], llvm_type) if llvm_type != i32 else words[0]


def _private_copy(builder, param, read, nbytes, name):
    """The first ``nbytes`` (a multiple of 4) of an argument, copied word by
    word into a private byte array aligned to 8 (the block places records
    at 4)."""
    i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
    slot = builder.alloca(ir.ArrayType(i8, nbytes), name=name)
    slot.align = 8
    base = builder.bitcast(slot, i8.as_pointer())
    for k in range(nbytes // 4):
        at = builder.gep(base, [ir.Constant(i64, 4 * k)])
        builder.store(read(i32, param, 4 * k), builder.bitcast(at, i32.as_pointer()), align=4)
    return slot


def _tuple_value(context, builder, ty, param, read):
    """A tuple of numbers, from the record it travels as
    (:func:`numba_vulkan.base.signature.tuple_record`): its words copied into
    private memory (the record is 4-byte aligned among the arguments, its
    64-bit items need 8), each item loaded from there as its field's type and
    then made the item's type as a scalar argument is."""
    i8, i64 = ir.IntType(8), ir.IntType(64)
    layout = records.dtype(param.storage)
    base = builder.bitcast(_private_copy(builder, param, read, layout.itemsize, "nv.tuple"),
                           i8.as_pointer())
    items = []
    for k, item in enumerate(ty):
        storage, offset = layout.fields[f"f{k}"][:2]
        llty = context.get_value_type(_scalar_type(storage.name))
        at = builder.bitcast(builder.gep(base, [ir.Constant(i64, offset)]), llty.as_pointer())
        items.append(_unwidened(context, builder, item,
                                builder.load(at, align=storage.itemsize)))
    return context.make_tuple(builder, ty, items)


def _unwidened(context, builder, ty, raw):
    """A value of ``ty`` from the 32-bit value it travels as: a bool, an
    integer narrower than 32 bits, a float16; another value as it is."""
    if isinstance(ty, types.Boolean):
        return builder.icmp_unsigned("!=", raw, ir.Constant(raw.type, 0))
    if isinstance(ty, types.Integer) and ty.bitwidth < 32:
        return builder.trunc(raw, context.get_value_type(ty))
    if isinstance(ty, types.Float) and ty.bitwidth < 32:
        # Exact: the runtime widened a float16 to this float32.
        return builder.fptrunc(raw, context.get_value_type(ty))
    return raw


def _scalar(context, builder, ty, param, read):
    i32 = ir.IntType(32)
    if isinstance(ty, types.BaseTuple):
        return _tuple_value(context, builder, ty, param, read)
    if isinstance(ty, types.Complex):
        part = types.float32 if param.storage == "complex64" else types.float64
        size = 4 if part == types.float32 else 8
        value = context.make_complex(builder, ty)
        for k, component in enumerate(("real", "imag")):
            raw = read(context.get_value_type(part), param, k * size)
            setattr(value, component, context.cast(builder, raw, part, ty.underlying_float))
        return value._getvalue()
    if isinstance(ty, types.Boolean) or ty.bitwidth < 32:
        return _unwidened(context, builder, ty,
                          read(ir.FloatType() if isinstance(ty, types.Float) else i32, param))
    llty = context.get_value_type(ty)
    if param.storage != param.dtype:
        narrow = ir.FloatType() if isinstance(ty, types.Float) else ir.IntType(32)
        raw = read(narrow, param)
        if isinstance(ty, types.Float):
            return builder.fpext(raw, llty)
        return (builder.sext if ty.signed else builder.zext)(raw, llty)
    return read(llty, param)
