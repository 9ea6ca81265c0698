"""Pointers that may point into one of several objects that cannot merge.

``x[i] if c else y[i]`` over two buffers reaches the rewrite as one load
through a ``select`` of two pointers, after LLVM sank the two loads into
one. Vulkan can choose between pointers only with the VariablePointers
capability, so each pointer derived from such a choice carries a selector
beside its offset: an i32 naming the member it points into. A load reads
every member (at offset 0 in those not selected, so that no read leaves its
object) and selects the value; a store writes the selected member alone,
behind a branch.
"""

from numba_vulkan.base.errors import UnsupportedError
from numba_vulkan.llvmir import ir
from numba_vulkan.codegen.logical import access
from numba_vulkan.codegen.logical.state import Choice, Object


def choose(kernel, conflicts):
    """Make the objects of each conflict (``(instruction, objects)`` of a
    phi or select) one :class:`Choice`, and give each pointer derived from
    such an instruction a selector."""
    groups = []
    for _, found in conflicts:
        for group in [g for g in groups if g & found]:
            groups.remove(group)
            found = found | group
        groups.append(set(found))
    choice_of = {}
    for group in groups:
        choice = Choice(tuple(sorted(group, key=_object_key)))
        choice_of.update((member, choice) for member in group)
    chosen = {inst.name for inst, _ in conflicts}
    changed = True
    while changed:
        changed = False
        for inst in kernel.main.instructions():
            if inst.name in kernel.pointers and inst.name not in chosen and \
                    any(v in chosen for v in kernel.pointer_inputs(inst)):
                chosen.add(inst.name)
                changed = True
    for name in chosen:
        pointer = kernel.pointers[name]
        pointer.object = choice_of[pointer.object]
        pointer.selector = f"{kernel.fresh()}.sel"


def _object_key(obj):
    """Members of a choice in a fixed order: buffers by binding, then objects
    by name."""
    return (1, obj.name) if isinstance(obj, Object) else (0, str(obj))


def selector(kernel, inst, pointer):
    """The instruction computing which member of its choice ``inst``'s
    pointer points into."""
    choice = pointer.object
    if inst.opcode == "phi":
        return ir.Instruction("phi", [ir.Operand(None, _selector_of(kernel, o.value, choice))
                                      for o in inst.operands],
                              name=pointer.selector, type="i32", labels=list(inst.labels))
    if inst.opcode == "select":
        cond, a, b = inst.operands
        return ir.instruction(
            f"{pointer.selector} = select {cond}, i32 {_selector_of(kernel, a.value, choice)}, "
            f"i32 {_selector_of(kernel, b.value, choice)}")
    return ir.instruction(f"{pointer.selector} = add i32 "
                          f"{_selector_of(kernel, inst.operands[0].value, choice)}, 0")


def _selector_of(kernel, value, choice):
    pointer = kernel.pointers.get(value)
    if pointer is not None and pointer.object is choice:
        return pointer.selector
    if value in ("poison", "undef", "null"):
        return "0"
    return str(choice.members.index(kernel.object_of(value)))


def chosen_access(kernel, inst, target, ty):
    """A load or store of ``ty`` through ``target``, a pointer into one
    member of a choice."""
    pointer = kernel.pointers[target]
    out, values = [], []
    for k, member in enumerate(pointer.object.members):
        chosen, offset = kernel.fresh(), kernel.fresh()
        out += [ir.instruction(f"{chosen} = icmp eq i32 {pointer.selector}, {k}"),
                ir.instruction(f"{offset} = select i1 {chosen}, i64 "
                               f"{kernel.offset_of(target)}, i64 0")]
        ptr, elem, space = access.element_pointer_at(kernel, member, offset, ty, inst, out)
        if inst.opcode == "load":
            value = kernel.fresh()
            out += access.access(kernel, inst, ty, ptr, elem, space, name=value)
            values.append((chosen, value))
        else:
            stores = access.access(kernel, inst, ty, ptr, elem, space)
            kernel.guarded[id(stores[-1])] = chosen
            out += stores
    if values:
        result = values[-1][1]
        for k, (chosen, value) in reversed(list(enumerate(values[:-1]))):
            name = inst.name if k == 0 else kernel.fresh()
            out.append(ir.instruction(f"{name} = select i1 {chosen}, {ty} {value}, "
                                      f"{ty} {result}"))
            result = name
    return out


def guard_stores(kernel):
    """Put each store to a member of a choice in a block of its own that
    runs only where that member is the one selected."""
    blocks = kernel.main.blocks
    k = 0
    while k < len(blocks):
        block = blocks[k]
        at = next((i for i, inst in enumerate(block.instructions)
                   if id(inst) in kernel.guarded), None)
        if at is None:
            k += 1
            continue
        if block.label is None:
            raise UnsupportedError("a store through a pointer that may point into two "
                                   "arrays, in an unnamed entry block")
        store = block.instructions[at]
        chosen = kernel.guarded.pop(id(store))
        then, rest = f"nv.store{kernel.fresh()[3:]}", f"nv.join{kernel.fresh()[3:]}"
        tail = block.instructions[at + 1:]
        block.instructions[at:] = [ir.instruction(
            f"br i1 {chosen}, label %{then}, label %{rest}")]
        blocks[k + 1:k + 1] = [ir.Block(then, [store, ir.instruction(f"br label %{rest}")]),
                               ir.Block(rest, tail)]
        for successor in _successors(tail[-1]):
            for inst in _block(kernel, successor).instructions:
                if inst.opcode == "phi":
                    inst.labels = [f"%{rest}" if label == f"%{block.label}" else label
                                   for label in inst.labels]
        k += 2


def _successors(terminator):
    """Labels a terminator may branch to."""
    return [str(o.value) for o in terminator.operands if o.type == "label"]


def _block(kernel, label):
    return next(b for b in kernel.main.blocks if f"%{b.label}" == label)
