"""The objects other than buffers that a kernel addresses: workgroup arrays,
private arrays, constant tables.

Each is a module-level variable or an alloca of a scalar or (nested) array
of one scalar type. The steps here legalise them for SPIR-V: constant
expressions over them become instructions, objects that one pointer may
point into become one array, constant byte arrays get copies typed as the
kernel reads them, and definitions are retyped to what the accesses need.
"""

import struct

from numba_vulkan.base.errors import UnsupportedError
from numba_vulkan.llvmir import ir, types
from numba_vulkan.codegen.logical.state import EMPTY, Object

_STRUCT_CODES = {"i8": "b", "i16": "h", "i32": "i", "i64": "q", "half": "H", "float": "f",
                 "double": "d"}


def find(kernel):
    """Fill ``kernel.objects`` with the module-level variables and private
    variables (allocas) that are scalars or (nested) arrays of one scalar
    type."""
    for g in kernel.module.globals.values():
        if g.init is not None:
            _add(kernel, g.name, g.addrspace, g.type, g)
    for inst in kernel.main.instructions():
        if inst.opcode == "alloca" and not inst.operands:
            _add(kernel, inst.name, 0, inst.type, inst)


def _add(kernel, name, space, text, definition):
    try:
        ty = kernel.layout.parse(text)
    except types.UnknownType:
        return
    shape = []
    while isinstance(ty, types.Array):
        shape.append(ty.count)
        ty = ty.elem
    leaves = types.leaves(ty)
    if "ptr" in leaves or len(set(leaves)) != 1:
        return
    init = getattr(definition, "init", None)
    retype = len(leaves) > 1
    if retype:
        # An aggregate element (a complex number) is one more dimension,
        # as its parts: only where no initialiser needs retyping too.
        if init is not None and init not in EMPTY:
            return
        shape.append(len(leaves))
    is_bytes = (getattr(definition, "kind", "") == "constant" and leaves[0] == "i8"
                and str(init).startswith('c"') and len(shape) == 1)
    kernel.objects[name] = Object(name, space, tuple(shape), leaves[0], definition, retype,
                                  {} if is_bytes else None)


def materialise_constants(kernel):
    """Make each constant expression over an object (a cast of a
    workgroup array, an offset into it) instructions, which the rest of
    the rewrite tracks like any other pointer. A phi's become instructions
    at the end of the incoming block."""
    at_end, made = {}, {}
    for block in kernel.main.blocks:
        out = []
        for inst in block.instructions:
            if inst.opcode == "phi":
                for operand, label in zip(inst.operands, inst.labels):
                    if _mentions_object(kernel, operand.value):
                        # A block that branches here twice gives one value.
                        key = (label, str(operand.value))
                        if key not in made:
                            made[key] = _as_instructions(
                                kernel, operand.value, at_end.setdefault(label, []))
                        operand.value = made[key]
            else:
                for operand in inst.operands:
                    if _mentions_object(kernel, operand.value):
                        operand.value = _as_instructions(kernel, operand.value, out)
            out.append(inst)
        block.instructions = out
    for block in kernel.main.blocks:
        extra = at_end.get(f"%{block.label}", [])
        block.instructions[-1:-1] = extra


def _mentions_object(kernel, value):
    return isinstance(value, ir.Instruction) and any(
        isinstance(v, str) and v in kernel.objects for _, v in value.values())


def _as_instructions(kernel, expr, out):
    for operand in expr.operands:
        if isinstance(operand.value, ir.Instruction):
            operand.value = _as_instructions(kernel, operand.value, out)
    expr.name = kernel.fresh()
    out.append(expr)
    return expr.name


def _mergeable(obj):
    """Whether ``obj`` may become part of a larger object: a private
    variable, or a workgroup array (no contents to keep)."""
    if not isinstance(obj, Object):
        return False
    if isinstance(obj.definition, ir.Instruction):
        return True
    return obj.addrspace == 3 and obj.definition.init in EMPTY


def merge(kernel, conflicts):
    """Make objects that one pointer may point into (the pieces that
    scalar replacement split a private array into, chosen by a phi; two
    workgroup arrays chosen by a select) one array, each a range of it:
    Vulkan can choose between pointers only with the VariablePointers
    capability, but between indices always.

    Args:
        conflicts: ``(instruction, objects)`` of each phi or select whose
            operands point into different objects.

    Returns:
        Whether any merged; the conflicts between objects that cannot merge
        are left to :func:`numba_vulkan.codegen.logical.choices.choose`.
    """
    groups = []
    for _, found in conflicts:
        if not all(map(_mergeable, found)) or \
                len({o.addrspace for o in found}) != 1 or \
                len({o.elem for o in found}) != 1:
            continue
        for group in [g for g in groups if g & found]:
            groups.remove(group)
            found = found | group
        groups.append(set(found))
    for group in groups:
        _merge(kernel, sorted(group, key=lambda o: o.name))
    return bool(groups)


def _merge(kernel, members):
    elem, space = members[0].elem, members[0].addrspace
    count = sum(o.count for o in members)
    main = kernel.main
    entry = main.blocks[0].instructions
    if space == 0:
        merged = Object(f"%nv.private{kernel.fresh()[3:]}", 0, (count,), elem, None)
        merged.definition = ir.instruction(
            f"{merged.name} = alloca {merged.array_type()}, align 16")
        entry.insert(0, merged.definition)
    else:
        merged = Object(f"@nv.workgroup{kernel.fresh()[3:]}", space, (count,), elem, None)
        merged.definition = kernel.module.add(
            f"{merged.name} = internal unnamed_addr addrspace({space}) global "
            f"{merged.array_type()} undef, align 16")
    pointer = f"ptr addrspace({space})"
    offset, pieces = 0, []
    for o in members:
        # Each member becomes a pointer to its range, defined first in
        # the entry block (after the merged alloca) so that it dominates
        # every use.
        local = o.name if space == 0 else kernel.fresh()
        pieces.append(ir.instruction(
            f"{local} = getelementptr inbounds i8, {pointer} {merged.name}, "
            f"i64 {offset * types.SCALAR_SIZES[elem]}"))
        if space == 0:
            for block in main.blocks:
                if o.definition in block.instructions:
                    block.instructions.remove(o.definition)
        else:
            kernel.module.items.remove(o.definition)
            for inst in main.instructions():
                for holder, value in inst.values():
                    if value == o.name:
                        holder.value = local
        del kernel.objects[o.name]
        offset += o.count
    at = 1 if space == 0 else 0
    entry[at:at] = pieces
    kernel.objects[merged.name] = merged


def typed_copy(kernel, obj, access_type, inst):
    """The constant byte array ``obj`` as an array of ``access_type``: a
    copy of it with its bytes re-encoded (Numba may store two global
    NumPy arrays of equal bytes as one, read as two types)."""
    if access_type == obj.elem:
        return obj
    if access_type not in obj.copies:
        size = types.SCALAR_SIZES.get(access_type)
        if access_type not in _STRUCT_CODES or obj.count % size:
            raise UnsupportedError(
                f"an access of {access_type} into an array of i8: {inst}")
        copy = Object(f"{obj.name}.as.{access_type}", obj.addrspace,
                      (obj.count // size,), access_type, None)
        init = _constant_array(_c_string(obj.definition.init), access_type)
        copy.definition = kernel.module.add(
            f"{copy.name} = internal unnamed_addr constant {copy.array_type()} {init}, "
            f"align {size}")
        kernel.objects[copy.name] = obj.copies[access_type] = copy
    return obj.copies[access_type]


def retype(kernel):
    """Give each object whose elements changed type its new definition's type."""
    for obj in kernel.objects.values():
        view = kernel.views.get(obj)
        if not (obj.retype or view):
            continue
        definition = obj.definition
        if view and isinstance(definition, ir.Global) and definition.init not in EMPTY:
            raise UnsupportedError(f"atomics on initialised array {obj.name}")
        definition.type = obj.array_type(view)


def _c_string(init):
    """The bytes of an LLVM ``c"..."`` constant."""
    text, out, i = init[2:-1], bytearray(), 0
    while i < len(text):
        if text[i:i + 2] == "\\\\":
            out.append(ord("\\"))
            i += 2
        elif text[i] == "\\":
            out.append(int(text[i + 1:i + 3], 16))
            i += 3
        else:
            out.append(ord(text[i]))
            i += 1
    return bytes(out)


def _constant_array(data, elem):
    """An LLVM array constant of ``elem`` holding the little-endian ``data``."""
    count = len(data) // types.SCALAR_SIZES[elem]
    values = struct.unpack(f"<{count}{_STRUCT_CODES[elem]}", data)
    if elem in ("float", "double"):
        # LLVM writes both as the bits of the (exactly widened) double.
        items = [f"0x{struct.unpack('<Q', struct.pack('<d', v))[0]:016X}" for v in values]
    elif elem == "half":
        # ... and a half as its own bits (unpacked as uint16 above).
        items = [f"0xH{v:04X}" for v in values]
    else:
        items = [str(v) for v in values]
    return f"[{', '.join(f'{elem} {v}' for v in items)}]"
