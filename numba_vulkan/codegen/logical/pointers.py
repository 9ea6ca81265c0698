"""Which object each pointer points into, and at which byte offset.

Every pointer of an optimised kernel derives from the base of one object
(a buffer marker, a global, an alloca) through ``getelementptr``,
``addrspacecast``, ``phi`` and ``select``. :func:`analyse` follows those
derivations; :func:`offset` replaces each such instruction by the i64
arithmetic on its offset.
"""

from numba_vulkan.llvmir import ir, types
from numba_vulkan.codegen.logical.state import Pointer


def analyse(kernel):
    """Fill ``kernel.pointers`` with the object and offset of every
    pointer; return ``(instruction, objects)`` of each phi and select
    whose operands point into different objects."""
    kernel.pointers = {}
    changed = True
    while changed:
        changed = False
        for inst in kernel.main.instructions():
            if inst.name is None or inst.name in kernel.pointers:
                continue
            found = [o for o in map(kernel.object_of, kernel.pointer_inputs(inst))
                     if o is not None]
            if found:
                kernel.pointers[inst.name] = Pointer(found[0], kernel.fresh())
                changed = True
    conflicts = []
    for inst in kernel.main.instructions():
        if inst.opcode in ("phi", "select"):
            found = {kernel.object_of(v) for v in kernel.pointer_inputs(inst)}
            found.discard(None)
            if len(found) > 1:
                conflicts.append((inst, found))
    return conflicts


def offset(kernel, inst, pointer):
    """The instructions computing ``pointer.offset``, the offset of the
    pointer that ``inst`` defines."""
    if inst.opcode == "call":
        kernel.used_buffers.add(pointer.object)
        return [ir.instruction(f"{pointer.offset} = add i64 0, 0")]
    if inst.opcode == "getelementptr":
        return _gep_offset(kernel, inst, pointer)
    if inst.opcode == "addrspacecast":
        return [ir.instruction(
            f"{pointer.offset} = add i64 {kernel.offset_of(inst.operands[0].value)}, 0")]
    if inst.opcode == "phi":
        return [ir.Instruction("phi", [ir.Operand(None, kernel.offset_of(o.value))
                                       for o in inst.operands],
                               name=pointer.offset, type="i64", labels=list(inst.labels))]
    cond, a, b = inst.operands
    return [ir.instruction(f"{pointer.offset} = select {cond}, i64 {kernel.offset_of(a.value)}, "
                           f"i64 {kernel.offset_of(b.value)}")]


def _gep_offset(kernel, inst, pointer):
    layout = kernel.layout
    base = kernel.offset_of(inst.operands[0].value)
    out, terms = [], []
    current = types.Array(0, layout.parse(inst.type))
    for operand in inst.operands[1:]:
        idx_type, idx = operand.type, str(operand.value)
        if isinstance(current, types.Struct):
            offsets, _, _ = layout.struct_layout(current)
            field = int(idx)
            if field:
                terms.append(str(offsets[field]))
            current = current.fields[field]
            continue
        current = current.elem
        stride = layout.stride(current)
        if idx.lstrip("-").isdigit():
            if int(idx):
                terms.append(str(int(idx) * stride))
            continue
        if idx_type != "i64":
            wide = kernel.fresh()
            out.append(f"{wide} = sext {idx_type} {idx} to i64")
            idx = wide
        if stride != 1:
            scaled = kernel.fresh()
            out.append(f"{scaled} = mul i64 {idx}, {stride}")
            idx = scaled
        terms.append(idx)
    total = base
    for term in terms:
        nxt = kernel.fresh()
        out.append(f"{nxt} = add i64 {total}, {term}")
        total = nxt
    out.append(f"{pointer.offset} = add i64 {total}, 0")
    return [ir.instruction(text) for text in out]
