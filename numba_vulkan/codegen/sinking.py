"""Recompute constant offsets of array indices where a loop uses them.

After LLVM unrolls a loop over a workgroup tile (``for j in range(16):
acc += ta[ty, j] * tb[j, tx]``), loop-invariant code motion hoists every
unrolled index, ``base + j``, out of the enclosing loop: 32 values live
across it, one register each. A GPU compiler folds a constant offset into
its load instruction for free, but only where it sees ``base + constant``
next to the load. This pass moves such an index computation, an integer
add, or (of disjoint bits), sub, shl or mul with a constant, used only by
``getelementptr`` instructions (or element markers of workgroup arrays,
:data:`numba_vulkan.codegen.markers.ELEMENT`) of one loop, next to each of those uses.
It runs for targets without a loop limit (GPUs), after the last
optimisation, so nothing hoists the offsets back.
"""

from numba_vulkan.codegen import ir, markers
from numba_vulkan.codegen.versioning import Graph, renamed

_OFFSETS = frozenset(("add", "or", "sub", "shl", "mul"))


def _constant(value):
    return isinstance(value, str) and value.lstrip("-").isdigit()


def _offset(inst):
    """Whether ``inst`` is an integer op of a value and a constant."""
    if inst.name is None or inst.opcode not in _OFFSETS or len(inst.operands) != 2:
        return False
    if inst.operands[0].type not in ("i32", "i64"):
        return False
    return [_constant(o.value) for o in inst.operands].count(True) == 1


def _indexes(inst):
    """Whether ``inst`` computes an element's address from its operands."""
    return inst.opcode == "getelementptr" or (
        inst.opcode == "call" and inst.callee.startswith("@" + markers.ELEMENT))


def sink_offsets(text):
    """``text`` with loop-invariant constant offsets of indices recomputed at their uses."""
    module = ir.parse(text)
    changed = False
    for function in module.functions:
        if function.blocks:
            changed |= _sink(function)
    return str(module) if changed else text


def _sink(function):
    changed = False
    while _sink_once(function):
        changed = True
    return changed


def _sink_once(function):
    """Move the address computations (and constant offsets feeding only
    them) defined outside a loop and used only in it next to their uses;
    whether any moved. Repeated, an element's address moves first and its
    offset after it."""
    graph = Graph(function)
    loops = list(graph.loops().values())
    if not loops:
        return False
    uses = {}
    for block in function.blocks:
        for inst in block.instructions:
            for holder, value in inst.values():
                if isinstance(value, str) and value.startswith("%"):
                    uses.setdefault(value, []).append((inst, holder, block))
    moved = set()
    for block in function.blocks:
        for inst in list(block.instructions):
            found = uses.get(inst.name) if inst.name else None
            # Users moved in this round are found again in the next.
            if not found or any(user.opcode == "phi" or id(user) in moved
                                for user, _, _ in found):
                continue
            if not (_indexes(inst) or (_offset(inst) and
                                        all(_indexes(user) for user, _, _ in found))):
                continue
            body = next((b for b in loops if id(block) not in b
                         and all(id(where) in b for _, _, where in found)), None)
            if body is None:
                continue
            for k, (user, holder, where) in enumerate(found):
                copy = ir.instruction(str(inst))
                copy.name = renamed(inst.name, f".at{k}")
                if copy.opcode == "or" and "disjoint" in copy.flags:
                    # An or of disjoint bits is an add, the form a GPU
                    # compiler folds into an address.
                    copy.opcode, copy.flags = "add", []
                where.instructions.insert(where.instructions.index(user), copy)
                holder.value = copy.name
            block.instructions.remove(inst)
            moved.add(id(inst))
    return bool(moved)
