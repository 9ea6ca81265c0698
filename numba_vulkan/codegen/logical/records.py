"""Record arrays: buffers of a structured dtype, and workgroup or private
byte arrays that the kernel reads as other types.

A record array's buffer holds NumPy's bytes, so its element type is not
given by a dtype: it is the largest unit that every access is a whole
number of, at offsets proven to be multiples of it (:func:`units`). An
access of that unit is one load or store; a wider one is assembled from
units, a narrower one reads its 32-bit word or writes it with atomic bit
operations (:func:`record_access`).
"""

from numba_vulkan.base.errors import UnsupportedError
from numba_vulkan.llvmir import ir, types
from numba_vulkan.codegen.logical import access
from numba_vulkan.codegen.logical.state import ALIGNED, ATOMIC_SCOPES, EMPTY, Choice, Object


def find(kernel):
    """Fill ``kernel.record_objects`` with the workgroup and private byte
    arrays (without contents) that some access reads or writes as another
    type: arrays of records."""
    found = kernel.record_objects
    for inst in kernel.main.instructions():
        if inst.opcode == "load":
            target, ty = inst.operands[0].value, inst.type
        elif inst.opcode == "store":
            target, ty = inst.operands[1].value, inst.operands[0].type
        else:
            continue
        obj = kernel.object_of(target)
        if isinstance(obj, Object) and obj.elem == "i8" and ty != "i8" and \
                obj.copies is None and getattr(obj.definition, "init", None) in \
                EMPTY + (None,):
            found.add(obj)


def alignments(kernel):
    """Fill ``kernel.alignments`` with the power of two that each pointer's
    byte offset is known to be a multiple of, by pointer name.

    A record array's buffer holds NumPy's bytes, so the alignment of a
    field access is not given by its type: it is what the offset's terms
    prove (record index times itemsize plus the field's offset). An
    offset the analysis cannot see through counts as aligned to 1, which
    costs speed (an access assembled from bytes), never correctness.
    """
    defs = {inst.name: inst for inst in kernel.main.instructions() if inst.name}
    known = {}

    def integer(value):
        text = str(value)
        if text.lstrip("-").isdigit():
            return _power_of_two(int(text))
        if text in known:
            return known[text]
        known[text] = 1      # a value on a cycle (a loop counter): unknown
        inst, result = defs.get(text), 1
        if inst is not None:
            values = [o.value for o in inst.operands]
            op = inst.opcode
            if op in ("add", "sub", "or", "xor", "phi"):
                result = min(map(integer, values))
            elif op == "select":
                result = min(integer(values[1]), integer(values[2]))
            elif op == "mul":
                result = min(integer(values[0]) * integer(values[1]), ALIGNED)
            elif op == "shl" and str(values[1]).isdigit():
                result = min(integer(values[0]) << int(str(values[1])), ALIGNED)
            elif op == "and":
                result = max(map(integer, values))
            elif op in ("sext", "zext", "trunc"):
                result = integer(values[0])
        known[text] = result
        return result

    aligns = dict.fromkeys(kernel.pointers, ALIGNED)

    def pointer(value):
        if value in aligns:
            return aligns[value]
        return ALIGNED if value in kernel.objects or value in EMPTY + ("null",) else 1

    changed = True
    while changed:
        changed = False
        for inst in kernel.main.instructions():
            if inst.name not in aligns:
                continue
            inputs = kernel.pointer_inputs(inst)
            if inst.opcode == "getelementptr":
                found = min([pointer(inputs[0])] + _gep_alignments(kernel, inst, integer))
            elif inst.opcode == "call":
                found = ALIGNED
            else:
                found = min(map(pointer, inputs))
            if found < aligns[inst.name]:
                aligns[inst.name] = found
                changed = True
    kernel.alignments = aligns


def merge_byte_accesses(kernel):
    """Make each four byte loads (or stores) of a record array at the
    offsets of one aligned 32-bit word one access of the word.

    Numba's record value is its bytes, so a whole-record assignment
    (``b[i] = a[i]``) reaches here as one byte access per byte, which
    would make the buffer's unit a byte. Only accesses that nothing
    else touching memory separates are merged: loads in a run of loads
    whose results are not used inside the run, stores in a run of
    stores, all through one base pointer at distinct offsets.
    """
    geps = {i.name: i for i in kernel.main.instructions() if i.opcode == "getelementptr"}
    for block in kernel.main.blocks:
        insts = block.instructions
        runs, current = [], None
        for k, inst in enumerate(insts):
            byte = _byte_access(kernel, inst)
            if byte is not None:
                base, offset = _byte_address(byte[1], geps)
                if current is None or current[0] != (byte[0], base):
                    current = ((byte[0], base), {})
                    runs.append(current)
                if offset in current[1]:
                    current = None
                    continue
                current[1][offset] = k
            elif inst.opcode in ("load", "store", "atomicrmw", "cmpxchg", "call", "fence"):
                current = None
        replaced = {}
        for (op, base), at in runs:
            if kernel.alignments.get(base, ALIGNED if base in kernel.objects else 1) < 4:
                continue
            for offset in sorted(at):
                quad = [at.get(offset + j) for j in range(4)]
                if offset % 4 or None in quad:
                    continue
                first, last = min(quad), max(quad)
                if op == "load" and _used_between(insts, quad, first, last):
                    continue
                replaced.update((k, []) for k in quad)
                replaced[last] = _word_access(kernel, op, [insts[k] for k in quad])
        if replaced:
            block.instructions = [new for k, inst in enumerate(insts)
                                  for new in replaced.get(k, [inst])]


def _byte_access(kernel, inst):
    """``(opcode, pointer)`` of a plain byte load or store into a record
    array, else None."""
    if inst.opcode == "load" and inst.type == "i8":
        target = inst.operands[0].value
    elif inst.opcode == "store" and inst.operands[0].type == "i8":
        target = inst.operands[1].value
    else:
        return None
    if "volatile" in inst.flags or "atomic" in inst.flags or \
            not kernel.is_record(kernel.object_of(target)):
        return None
    return inst.opcode, target


def _byte_address(pointer, geps):
    """``(base, offset)``: a pointer as a base pointer plus a constant."""
    gep = geps.get(pointer)
    if gep is not None and gep.type == "i8" and len(gep.operands) == 2 and \
            str(gep.operands[1].value).isdigit():
        return gep.operands[0].value, int(str(gep.operands[1].value))
    return pointer, 0


def _used_between(insts, quad, first, last):
    names = {insts[k].name for k in quad}
    return any(value in names for inst in insts[first:last + 1]
               for _, value in inst.values())


def _word_access(kernel, op, quad):
    """One 32-bit access in place of the four byte accesses ``quad``, in
    byte order."""
    tail = _with_align(quad[0].tail, 4)
    ptr = quad[0].operands[0 if op == "load" else 1].value
    lines = []
    if op == "load":
        word = kernel.fresh()
        lines.append(f"{word} = load i32, ptr {ptr}{tail}")
        for j, inst in enumerate(quad):
            moved = kernel.fresh()
            lines += [f"{moved} = lshr i32 {word}, {8 * j}",
                      f"{inst.name} = trunc i32 {moved} to i8"]
    else:
        total = None
        for j, inst in enumerate(quad):
            wide, part = kernel.fresh(), kernel.fresh()
            lines += [f"{wide} = zext i8 {inst.operands[0].value} to i32",
                      f"{part} = shl i32 {wide}, {8 * j}"]
            if total is not None:
                joined = kernel.fresh()
                lines.append(f"{joined} = or i32 {total}, {part}")
                part = joined
            total = part
        lines.append(f"store i32 {total}, ptr {ptr}{tail}")
    return [ir.instruction(text) for text in lines]


def _gep_alignments(kernel, inst, integer):
    """The alignment of each term a ``getelementptr`` adds to its base."""
    out = []
    layout = kernel.layout
    current = types.Array(0, layout.parse(inst.type))
    for operand in inst.operands[1:]:
        idx = str(operand.value)
        if isinstance(current, types.Struct):
            offsets, _, _ = layout.struct_layout(current)
            out.append(_power_of_two(offsets[int(idx)]))
            current = current.fields[int(idx)]
            continue
        current = current.elem
        out.append(min(_power_of_two(layout.stride(current)) * integer(idx), ALIGNED))
    return out


def units(kernel):
    """Fill ``kernel.units`` with the element type of each record array, by
    binding or object, and retype the objects to arrays of it.

    A buffer has one element type, the largest unit that every access
    to it is a whole number of, at an offset that is a multiple of it:
    an access of that size is one load or store, a wider one (a float64
    field of a packed dtype) is assembled from units. One type per
    buffer, rather than one variable per access type, keeps accesses to
    the same bytes from going through variables the driver may assume
    not to alias.
    """
    uses = {}
    for inst in kernel.main.instructions():
        if inst.opcode == "load":
            target, ty = inst.operands[0].value, inst.type
        elif inst.opcode == "store":
            target, ty = inst.operands[1].value, inst.operands[0].type
        elif inst.opcode in ("atomicrmw", "cmpxchg"):
            target, ty = inst.operands[0].value, inst.operands[1].type
        else:
            continue
        obj = kernel.object_of(target)
        for member in obj.members if isinstance(obj, Choice) else (obj,):
            if not kernel.is_record(member):
                continue
            size = types.SCALAR_SIZES.get(ty)
            if size is None or ty in ("ptr", "i1"):
                raise UnsupportedError(f"an access of {ty} into a record array: {inst}")
            unit = min(size, kernel.alignments.get(
                target, ALIGNED if target in kernel.objects else 1))
            uses.setdefault(member, []).append(
                (unit, size, ty, inst.opcode not in ("load", "store"), inst))
    units = {}
    for binding, found in uses.items():
        # A 1- or 2-byte field at a multiple of its size lies inside one
        # 32-bit word: it is read from the word and written with atomic
        # bit operations on it, rather than making every access to the
        # array one of bytes. The words must not pass the array's end:
        # only where the itemsize is a multiple of 4.
        in_word = [use for use in found if use[1] < 4 and use[0] == use[1] and not use[3]] \
            if kernel.record_bytes(binding) % 4 == 0 else []
        unit = min([use[0] for use in found if use not in in_word] + [4])
        if unit < 4 or not in_word:
            unit = min(u for u, *_ in found)
        for _, size, _, atomic, inst in found:
            if atomic and size != unit:
                raise UnsupportedError(
                    "an atomic on a record field whose offset is not a multiple of its "
                    f"size (a packed dtype): {inst}")
        typed = {ty for _, size, ty, atomic, _ in found if atomic} or \
            {ty for _, size, ty, _, _ in found if size == unit}
        if any(size < unit for _, size, *_ in found):
            typed = {"i32"}
        units[binding] = typed.pop() if len(typed) == 1 else f"i{8 * unit}"
    kernel.units = units
    for obj in kernel.record_objects:
        if obj in units:
            unit = units[obj]
            obj.shape, obj.elem = (obj.count // types.SCALAR_SIZES[unit],), unit
            obj.retype = True


def record_access(kernel, inst, target, ty, binding):
    """A load or store of ``ty`` into a record array: one access of the
    buffer's unit, or one per unit it spans, put together."""
    elem = kernel.elem_of(binding)
    unit, size = types.SCALAR_SIZES[elem], types.SCALAR_SIZES[ty]
    tail = _with_align(inst.tail, unit)
    flags = "".join(f"{f} " for f in inst.flags)
    offset = kernel.offset_of(target)
    out = []
    if size < unit:
        return _in_word_access(kernel, inst, ty, binding, offset, flags)
    if size == unit:
        ptr, elem, space = access.element_pointer_at(kernel, binding, offset, ty, inst, out)
        copy = ir.Instruction(inst.opcode, inst.operands, inst.name, inst.flags, inst.type,
                              tail, inst.prefix, inst.callee, inst.labels)
        return out + access.access(kernel, copy, ty, ptr, elem, space)
    piece, wide = f"i{8 * unit}", f"i{8 * size}"
    pointers = []
    for k in range(size // unit):
        at = kernel.fresh()
        out.append(ir.instruction(f"{at} = add i64 {offset}, {k * unit}"))
        ptr, _, space = access.element_pointer_at(kernel, binding, at, elem, inst, out)
        pointers.append(ptr)
    lines = []
    if inst.opcode == "load":
        parts = []
        for k, ptr in enumerate(pointers):
            raw, bits, part = kernel.fresh(), kernel.fresh(), kernel.fresh()
            lines.append(f"{raw} = load {flags}{elem}, ptr addrspace({space}) {ptr}{tail}")
            if elem != piece:
                lines.append(f"{bits} = bitcast {elem} {raw} to {piece}")
                raw = bits
            lines.append(f"{part} = zext {piece} {raw} to {wide}")
            if k:
                shifted = kernel.fresh()
                lines.append(f"{shifted} = shl {wide} {part}, {8 * unit * k}")
                part = shifted
            parts.append(part)
        total = parts[0]
        for k, part in enumerate(parts[1:], 2):
            name = inst.name if k == len(parts) and ty == wide else kernel.fresh()
            lines.append(f"{name} = or {wide} {total}, {part}")
            total = name
        if ty != wide:
            lines.append(f"{inst.name} = bitcast {wide} {total} to {ty}")
    else:
        value = _bitcast(kernel, inst.operands[0].value, ty, wide, lines)
        for k, ptr in enumerate(pointers):
            shifted, part = kernel.fresh(), kernel.fresh()
            lines += [f"{shifted} = lshr {wide} {value}, {8 * unit * k}",
                      f"{part} = trunc {wide} {shifted} to {piece}"]
            part = _bitcast(kernel, part, piece, elem, lines)
            lines.append(f"store {flags}{elem} {part}, ptr addrspace({space}) {ptr}{tail}")
    return out + [ir.instruction(text) for text in lines]


def _bitcast(kernel, value, ty, to, lines):
    """``value``, of type ``ty``, as a ``to``: a bitcast appended to
    ``lines`` where the two differ."""
    if ty == to:
        return value
    cast = kernel.fresh()
    lines.append(f"{cast} = bitcast {ty} {value} to {to}")
    return cast


def _in_word_access(kernel, inst, ty, binding, offset, flags):
    """A load or store of a 1- or 2-byte ``ty`` inside a 32-bit word of
    a record array: the word shifted, or its bits replaced by two
    atomics, which leave the word's other bytes to whoever writes them
    (in private memory, which no other invocation writes, a load and a
    store)."""
    size = types.SCALAR_SIZES[ty]
    narrow = f"i{8 * size}"
    word, low, bits, shift = kernel.fresh(), kernel.fresh(), kernel.fresh(), kernel.fresh()
    out = [ir.instruction(text) for text in (
        f"{word} = and i64 {offset}, -4", f"{low} = and i64 {offset}, 3",
        f"{bits} = shl i64 {low}, 3", f"{shift} = trunc i64 {bits} to i32")]
    ptr, _, space = access.element_pointer_at(kernel, binding, word, "i32", inst, out)
    where = f"ptr addrspace({space}) {ptr}"
    lines = []
    if inst.opcode == "load":
        raw, moved = kernel.fresh(), kernel.fresh()
        name = inst.name if ty == narrow else kernel.fresh()
        lines += [f"{raw} = load {flags}i32, {where}, align 4",
                  f"{moved} = lshr i32 {raw}, {shift}",
                  f"{name} = trunc i32 {moved} to {narrow}"]
        if ty != narrow:
            lines.append(f"{inst.name} = bitcast {narrow} {name} to {ty}")
    else:
        value = _bitcast(kernel, inst.operands[0].value, ty, narrow, lines)
        wide, put, mask, keep = kernel.fresh(), kernel.fresh(), kernel.fresh(), kernel.fresh()
        lines += [f"{wide} = zext {narrow} {value} to i32",
                  f"{put} = shl i32 {wide}, {shift}",
                  f"{mask} = shl i32 {(1 << 8 * size) - 1}, {shift}",
                  f"{keep} = xor i32 {mask}, -1"]
        if space == 0:
            old, cleared, new = kernel.fresh(), kernel.fresh(), kernel.fresh()
            lines += [f"{old} = load i32, {where}, align 4",
                      f"{cleared} = and i32 {old}, {keep}",
                      f"{new} = or i32 {cleared}, {put}",
                      f"store i32 {new}, {where}, align 4"]
        else:
            scope = f'syncscope("{ATOMIC_SCOPES.get(space, "device")}") monotonic, align 4'
            lines += [f"{kernel.fresh()} = atomicrmw and {where}, i32 {keep} {scope}",
                      f"{kernel.fresh()} = atomicrmw or {where}, i32 {put} {scope}"]
    return out + [ir.instruction(text) for text in lines]



def _power_of_two(value):
    """The largest power of two dividing ``value`` (:data:`ALIGNED` for 0)."""
    value = abs(value)
    return min(value & -value, ALIGNED) if value else ALIGNED


def _with_align(tail, align):
    """An access's tail with its alignment set to ``align``."""
    head, sep, rest = tail.partition(", align ")
    if not sep:
        return f", align {align}{tail}"
    digits = len(rest) - len(rest.lstrip("0123456789"))
    return f"{head}, align {align}{rest[digits:]}"
