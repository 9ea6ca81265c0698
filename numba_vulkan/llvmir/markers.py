"""Calls the compiler emits where the final code depends on codegen's choices.

The compiler lowers a kernel into ordinary LLVM IR, except for what only
exists in SPIR-V (descriptor bindings, push constants) or depends on the
launch shape (the workgroup size). For those it calls these declared
functions; :mod:`numba_vulkan.codegen.logical` and
:mod:`numba_vulkan.codegen.entrypoint` replace each call. Keeping
them as calls keeps the IR that the kernel cache hashes free of the
workgroup size and of SPIR-V types that llvmlite's IR builder cannot spell.
"""

from llvmlite import ir

#: ``ptr @__nv.buffer.K()``: base address of the array bound at binding K.
BUFFER = "__nv.buffer."
#: ``T @__nv.push.T(i32 offset)``: a value of the push constant block.
PUSH = "__nv.push."
#: ``i32 @__nv.local_size(i32 axis)``: the workgroup size along an axis.
LOCAL_SIZE = "__nv.local_size"
#: ``ptr addrspace(A) @__nv.element.A.R(ptr addrspace(A) @G, i32 i, ...)``:
#: element ``(i, ...)`` of the rank-R global array ``@G``. Emitted by
#: codegen.logical, replaced by a ``getelementptr`` after the last optimisation,
#: which would otherwise fold it back into a byte offset that the backend
#: cannot lower.
ELEMENT = "__nv.element."
#: ``ptr @__nv.print.format.F()``: base address of the print buffer, for a
#: ``print`` call of format F (see :mod:`numba_vulkan.frontend.printing`).
#: Defined by the kernel's entry point, as the buffer marker of its binding,
#: and gone once inlined.
PRINT = "__nv.print.format."

_PUSH_TYPES = {"i8": ir.IntType(8), "i16": ir.IntType(16), "i32": ir.IntType(32),
               "i64": ir.IntType(64), "float": ir.FloatType(), "double": ir.DoubleType()}


def _declare(module, name, restype, argtypes):
    try:
        return module.get_global(name)
    except KeyError:
        fn = ir.Function(module, ir.FunctionType(restype, argtypes), name)
        fn.attributes.add("nounwind")
        fn.attributes.add("readnone")
        return fn


def buffer(builder, binding):
    """Emit the base address of the storage buffer at ``binding``."""
    fn = _declare(builder.module, f"{BUFFER}{binding}", ir.PointerType(), [])
    return builder.call(fn, [])


def push(builder, llvm_type, offset):
    """Emit a load of ``llvm_type`` from the push constant block at ``offset``."""
    name = str(llvm_type)
    fn = _declare(builder.module, f"{PUSH}{name}", _PUSH_TYPES[name], [ir.IntType(32)])
    return builder.call(fn, [ir.Constant(ir.IntType(32), offset)])


def local_size(builder, axis):
    """Emit the workgroup size along ``axis`` as an i32."""
    fn = _declare(builder.module, LOCAL_SIZE, ir.IntType(32), [ir.IntType(32)])
    return builder.call(fn, [ir.Constant(ir.IntType(32), axis)])


def print_buffer(builder, format_id):
    """Emit the base address of the print buffer, for a call of ``format_id``."""
    fn = _declare(builder.module, f"{PRINT}{format_id}", ir.PointerType(), [])
    return builder.call(fn, [])


def define_print_buffers(module, format_ids, binding):
    """Define in ``module`` the print buffer marker of each of ``format_ids``
    as the buffer at ``binding``."""
    for format_id in format_ids:
        fn = ir.Function(module, ir.FunctionType(ir.PointerType(), []),
                         f"{PRINT}{format_id}")
        fn.attributes.add("alwaysinline")
        fn.attributes.add("nounwind")
        builder = ir.IRBuilder(fn.append_basic_block("entry"))
        builder.ret(buffer(builder, binding))
