"""Loads and stores as accesses to one element of an object.

A buffer's element is reached through its resource handle
(``llvm.spv.resource.getpointer`` at an element index); an element of a
workgroup, private or constant array through an element marker with one
index per dimension, as SPIR-V's OpAccessChain needs
(:func:`numba_vulkan.codegen.entrypoint.lower_markers` makes it a
``getelementptr`` after the last optimisation).
"""

import math

from numba_vulkan.base.errors import UnsupportedError
from numba_vulkan.llvmir import ir, markers, types
from numba_vulkan.codegen.logical import objects
from numba_vulkan.codegen.logical.state import Choice, Object

#: How intrinsic names spell each element type.
_MANGLED = {"i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "half": "f16",
            "float": "f32", "double": "f64"}


def element_pointer(kernel, value, access_type, inst, out):
    """The element of ``value``'s object that an access of
    ``access_type`` at ``value`` reaches: ``(pointer, element type,
    address space)``; the instructions computing it go to ``out``."""
    obj = kernel.object_of(value)
    if isinstance(obj, Choice):
        raise UnsupportedError(
            f"an atomic through a pointer that may point into two different arrays: {inst}")
    return element_pointer_at(kernel, obj, kernel.offset_of(value), access_type, inst, out)


def element_pointer_at(kernel, obj, offset, access_type, inst, out):
    """:func:`element_pointer` of the element at byte ``offset`` of ``obj``."""
    if isinstance(obj, Object):
        return _object_element_pointer(kernel, obj, offset, access_type, inst, out)
    storage = kernel.bindings[obj]
    elem = kernel.elem_of(obj)
    size = types.SCALAR_SIZES[elem]
    if access_type != elem:
        acc = kernel.layout.size_align(access_type)[0]
        if acc != size or access_type == "ptr":
            raise UnsupportedError(
                f"an access of {access_type} into an array of {storage}: {inst}")
    kernel.used_buffers.add(obj)
    index, index32, ptr = kernel.fresh(), kernel.fresh(), kernel.fresh()
    shift = size.bit_length() - 1
    out += [ir.instruction(text) for text in (
        f"{index} = ashr exact i64 {offset}, {shift}",
        f"{index32} = trunc i64 {index} to i32",
        f"{ptr} = call ptr addrspace(11) @{_getpointer_name(kernel, obj)}"
        f"({_handle_type(kernel, obj)} %nv.handle.{obj}, i32 {index32})")]
    return ptr, elem, 11


def _object_element_pointer(kernel, obj, offset, access_type, inst, out):
    """A pointer to the element at byte ``offset`` of an object: one
    index per dimension."""
    if obj.copies is not None:
        obj = objects.typed_copy(kernel, obj, access_type, inst)
    elem = kernel.elem_of(obj)
    size = types.SCALAR_SIZES[elem]
    if access_type != elem:
        acc = kernel.layout.size_align(access_type)[0]
        if acc != size or access_type == "ptr":
            raise UnsupportedError(
                f"an access of {access_type} into an array of {elem}: {inst}")
    if not obj.shape:
        return obj.name, elem, obj.addrspace
    flat = kernel.fresh()
    lines = [f"{flat} = ashr exact i64 {offset}, {size.bit_length() - 1}"]
    indices = []
    for k, extent in enumerate(obj.shape):
        index, index32 = kernel.fresh(), kernel.fresh()
        lines.append(f"{index} = udiv i64 {flat}, {math.prod(obj.shape[k + 1:])}")
        if k:
            wrapped = kernel.fresh()
            lines.append(f"{wrapped} = urem i64 {index}, {extent}")
            index = wrapped
        lines.append(f"{index32} = trunc i64 {index} to i32")
        indices.append(f"i32 {index32}")
    kernel.used_globals.add((obj.addrspace, len(obj.shape)))
    ptr = kernel.fresh()
    lines.append(f"{ptr} = call ptr addrspace({obj.addrspace}) "
                 f"@{_element_marker(obj.addrspace, len(obj.shape))}("
                 f"ptr addrspace({obj.addrspace}) {obj.name}, {', '.join(indices)})")
    out += [ir.instruction(text) for text in lines]
    return ptr, elem, obj.addrspace


def access(kernel, inst, ty, ptr, elem, space, name=None):
    """``inst``, a load or store of ``ty``, at element pointer ``ptr``; a
    load's result is ``name`` (default: the load's own)."""
    load = inst.opcode == "load"
    name = name or inst.name
    out = []
    flags = "".join(f"{f} " for f in inst.flags)
    where = f"ptr addrspace({space}) {ptr}{inst.tail}"
    if load and elem != ty:
        raw = kernel.fresh()
        out += [ir.instruction(f"{raw} = load {flags}{elem}, {where}"),
                ir.instruction(f"{name} = bitcast {elem} {raw} to {ty}")]
    elif load:
        out.append(ir.instruction(f"{name} = load {flags}{ty}, {where}"))
    else:
        value = inst.operands[0].value
        if elem != ty:
            raw = kernel.fresh()
            out.append(ir.instruction(f"{raw} = bitcast {ty} {value} to {elem}"))
            value, ty = raw, elem
        out.append(ir.instruction(f"store {flags}{ty} {value}, {where}"))
    return out


def _handle_type(kernel, binding):
    return f'target("spirv.VulkanBuffer", [0 x {kernel.elem_of(binding)}], 12, 1)'


def _mangled(kernel, binding):
    code = _MANGLED[kernel.elem_of(binding)]
    return f"tspirv.VulkanBuffer_a0{code}_12_1t"


def _getpointer_name(kernel, binding):
    return f"llvm.spv.resource.getpointer.p11.{_mangled(kernel, binding)}"


def _element_marker(space, rank):
    return f"{markers.ELEMENT}{space}.{rank}"


def prologue(kernel):
    """The entry block's calls making the handle of each buffer used."""
    return [ir.instruction(
        f"%nv.handle.{binding} = call {_handle_type(kernel, binding)} "
        f"@llvm.spv.resource.handlefrombinding.{_mangled(kernel, binding)}"
        f"(i32 0, i32 {binding}, i32 1, i32 0, ptr @nv.name.{binding})")
        for binding in sorted(kernel.used_buffers)]


def declarations(kernel):
    """The element markers and buffer intrinsics called, and each buffer's name."""
    lines, declared = [], set()
    for space, rank in sorted(kernel.used_globals):
        params = ", ".join([f"ptr addrspace({space})"] + ["i32"] * rank)
        lines.append(f"declare ptr addrspace({space}) @{_element_marker(space, rank)}"
                     f"({params}) memory(none) nounwind")
    for binding in sorted(kernel.used_buffers):
        # The backend merges resources of the same name: give each its own.
        label = f"b{binding}"
        lines.append(f"@nv.name.{binding} = private unnamed_addr constant "
                     f'[{len(label) + 1} x i8] c"{label}\\00"')
        mangled = _mangled(kernel, binding)
        if mangled in declared:
            continue
        declared.add(mangled)
        handle = _handle_type(kernel, binding)
        lines += [
            f"declare {handle} @llvm.spv.resource.handlefrombinding.{mangled}"
            "(i32, i32, i32, i32, ptr)",
            f"declare ptr addrspace(11) @{_getpointer_name(kernel, binding)}({handle}, i32)",
        ]
    return lines
