"""Buffer element indices computed in elements, not in bytes.

The logical addressing rewrite (:mod:`numba_vulkan.codegen.logical`)
follows Numba's pointers as 64-bit byte offsets and divides by the element
size at each access: ``trunc(ashr exact (shl i, 2) + 4, 2)`` for
``a[i, 1]`` of a float32 array. LLVM cannot undo the shift pair without
knowing that the offset does not overflow, so the index stays 64-bit and
the 32-bit narrowing that follows (:mod:`numba_vulkan.codegen.int32`)
cannot reach it: three 64-bit operations and a truncation per access, in
the inner loop of an n-body step or a matrix product.

:func:`element_indices` computes such an index from twins of the offset's
terms divided by the element size, when every term is a multiple of it.
This is exact: where ``X`` is a sum, product or shift of terms each a
multiple of ``2^s`` and ``T`` the same expression over the terms divided by
``2^s``, ``T * 2^s == X`` modulo ``2^64``, so ``X >> s`` and ``T`` agree in
their low ``64 - s`` bits, all that a truncation to 32 bits keeps.
"""

from numba_vulkan.llvmir import ir
from numba_vulkan.llvmir.build import Builder

#: Opcodes whose result is a multiple of ``2^s`` when their operands are
#: (for ``mul`` and ``shl``, when either is).
_OPCODES = ("add", "sub", "mul", "shl", "phi", "select")


def _constant(token):
    if isinstance(token, str) and token.lstrip("-").isdigit():
        return int(token)
    return None


def _shift(inst):
    """``(offset, s)`` of an exact right shift of a 64-bit offset by a
    constant ``s`` in 1..32, else None."""
    if inst.opcode not in ("ashr", "lshr") or "exact" not in inst.flags or inst.tail \
            or len(inst.operands) != 2 or inst.operands[0].type != "i64":
        return None
    s = _constant(inst.operands[1].value)
    offset = inst.operands[0].value
    if s is None or not 1 <= s <= 32 or not isinstance(offset, str):
        return None
    return offset, s


def _truncating(inst):
    return inst.opcode == "trunc" and not inst.flags and inst.type in ("i32", "i16", "i8")


def _candidate(inst):
    if inst.name is None or inst.opcode not in _OPCODES or inst.tail:
        return False
    if inst.opcode == "phi":
        return inst.type == "i64"
    if inst.opcode == "select":
        return inst.operands[1].type == "i64"
    return inst.operands[0].type == "i64" and all(isinstance(o.value, str)
                                                  for o in inst.operands)


class _Function:
    def __init__(self, function):
        self.function = function
        self.defs = {}
        self.uses = {}
        self.where = {}
        for block in function.blocks:
            for inst in block.instructions:
                if inst.name is not None:
                    self.defs[inst.name] = inst
                    self.where[inst.name] = block
                for _, value in inst.values():
                    if isinstance(value, str) and value.startswith("%"):
                        self.uses.setdefault(value, []).append(inst)
        self.fresh = 0

    def multiples(self, s):
        """The names of the 64-bit values provably multiples of ``2^s``."""
        unit = 1 << s
        members = {name for name, inst in self.defs.items() if _candidate(inst)}

        def multiple(token):
            c = _constant(token)
            return (c % unit == 0) if c is not None else token in members

        def holds(inst):
            values = [o.value for o in inst.operands]
            if inst.opcode in ("add", "sub", "phi"):
                return all(multiple(v) for v in values)
            if inst.opcode == "select":
                return multiple(values[1]) and multiple(values[2])
            if inst.opcode == "mul":
                return any(multiple(v) for v in values)
            amount = _constant(values[1])
            return amount is not None and 0 <= amount < 64 and (
                amount >= s or multiple(values[0]))

        work = sorted(members)
        while work:
            name = work.pop()
            if name in members and not holds(self.defs[name]):
                members.discard(name)
                work.extend(u.name for u in self.uses.get(name, ()) if u.name in members)
        return members

    def name(self):
        self.fresh += 1
        return f"%nv.el.{self.fresh}"


def element_indices(module):
    """Compute each element index of the IR model ``module`` that only
    reaches truncations from its offset's terms divided by the element
    size, where every term is a multiple of it, in place."""
    for function in module.functions:
        if function.blocks:
            _rewrite(_Function(function))


def _rewrite(fn):
    shifts = {}
    for name, inst in fn.defs.items():
        found = _shift(inst)
        if found and fn.uses.get(name) and all(_truncating(u) for u in fn.uses[name]):
            shifts.setdefault(found[1], []).append(inst)
    changed = False
    for s, insts in sorted(shifts.items()):
        multiples = fn.multiples(s)
        twins = {}
        for inst in insts:
            offset = inst.operands[0].value
            if offset not in multiples:
                continue
            value = _twin(fn, offset, s, multiples, twins)
            inst.opcode, inst.flags = "add", []
            inst.operands = [ir.Operand("i64", value), ir.Operand(None, "0")]
            changed = True
    return changed


def _twin(fn, token, s, multiples, twins):
    """The value of ``token`` (a multiple of ``2^s``) divided by ``2^s``,
    modulo ``2^(64 - s)``; instructions computing it are added after
    ``token``'s definition."""
    c = _constant(token)
    if c is not None:
        return str(c >> s)
    if token in twins:
        return twins[token]
    inst = fn.defs[token]
    twin = twins[token] = fn.name()
    values = [o.value for o in inst.operands]
    build = Builder()
    if inst.opcode == "phi":
        incoming = [_twin(fn, v, s, multiples, twins) for v in values]
        build.instructions.append(ir.Instruction("phi", [ir.Operand(None, v) for v in incoming],
                                                 name=twin, type="i64",
                                                 labels=list(inst.labels)))
    elif inst.opcode == "select":
        a, b = (_twin(fn, v, s, multiples, twins) for v in values[1:])
        build.select(values[0], "i64", a, b, name=twin)
    elif inst.opcode in ("add", "sub"):
        a, b = (_twin(fn, v, s, multiples, twins) for v in values)
        build.binary(inst.opcode, "i64", a, b, name=twin)
    elif inst.opcode == "mul":
        a, b = values
        if not _is_multiple(a, s, multiples):
            a, b = b, a
        build.binary("mul", "i64", _twin(fn, a, s, multiples, twins), b, name=twin)
    else:
        a, amount = values[0], int(values[1])
        if amount >= s:
            build.binary("shl", "i64", a, str(amount - s), name=twin)
        else:
            build.binary("shl", "i64", _twin(fn, a, s, multiples, twins), str(amount),
                         name=twin)
    new, = build.instructions
    block = fn.where[token]
    block.instructions.insert(block.instructions.index(inst) + 1, new)
    fn.defs[twin], fn.where[twin] = new, block
    return twin


def _is_multiple(token, s, multiples):
    c = _constant(token)
    return (c % (1 << s) == 0) if c is not None else token in multiples
