"""64-bit integer arithmetic done in 32 bits where the result is the same.

Numba types every integer a kernel computes with as int64 (``n += 1``,
``for i in range(k)``, index arithmetic), and GPUs do 64-bit integer
arithmetic in two or more 32-bit steps (a multiply in several). LLVM has
no pass that narrows such values for a target that has int64, so this
module does two rewrites of the final IR:

* :func:`low_bits`: an addition, subtraction, multiplication, left shift
  or bitwise operation whose result is only ever truncated to 32 bits (an
  element index, mostly) needs only the low 32 bits of its operands, so it
  is done in 32 bits. This is exact.
* :func:`counters`: a loop counter moving by ±1 from a 32-bit start and
  compared with a 32-bit value (its bound) is kept in 32 bits. A group of
  64-bit values is narrowed when it is closed: phis and additions of ±1
  with ``nsw`` whose operands are members, 32-bit constants or sign
  extensions of 32-bit values (or zero extensions of values known not
  negative), and whose uses are members, truncations to
  32 bits or comparisons with such operands; and at least one of those
  comparisons is with a 32-bit value, which keeps a plain tally of trips in
  64 bits. What is assumed is that a bounded counter is not stepped past
  2^31 within one invocation (2^31 trips of one loop in one GPU thread);
  ``docs/limitations.md`` says so. On an H200, Mandelbrot's inner loop ran
  14 % faster with an int32 counter, all else equal.
"""

from numba_vulkan.llvmir.build import Builder

_I32_MIN, _I32_MAX = -2 ** 31, 2 ** 31 - 1


def _constant(token):
    try:
        value = int(token)
    except (TypeError, ValueError):
        return None
    return value if _I32_MIN <= value <= _I32_MAX else None


def _plain(inst, opcode, flags, ty):
    """Whether ``inst`` is ``opcode`` with flags among ``flags``, operands of
    type ``ty`` that are plain values, and nothing after them."""
    return (inst.opcode in opcode and set(inst.flags) <= flags and not inst.tail
            and inst.operands and all(isinstance(o.value, str) for o in inst.operands)
            and inst.operands[0].type == ty)


def _is_phi(inst):
    return inst.opcode == "phi" and inst.type == "i64" and not inst.flags and \
        all(isinstance(o.value, str) for o in inst.operands)


def _is_step(inst):
    return _plain(inst, ("add", "sub"), {"nuw", "nsw"}, "i64")


def _sign_extended(inst):
    """The 32-bit source of an extension that keeps its signed value (a zero
    extension of a value known not negative is a sign extension), else None."""
    if _plain(inst, ("sext", "zext"), {"nneg"}, "i32") and inst.type == "i64" and \
            (inst.opcode == "sext") == (not inst.flags):
        return inst.operands[0].value
    return None


def _truncated(inst):
    """The 64-bit local that ``inst`` truncates to 32 bits, else None."""
    if _plain(inst, ("trunc",), set(), "i64") and inst.type == "i32" and \
            inst.operands[0].value.startswith("%"):
        return inst.operands[0].value
    return None


def _is_compare(inst):
    return inst.opcode == "icmp" and len(inst.flags) == 1 and not inst.tail and \
        inst.operands[0].type == "i64" and all(isinstance(o.value, str) for o in inst.operands)


def _instructions(module):
    for fn in module.functions:
        yield from fn.instructions()


def _uses(module, names):
    """The instructions that use each of ``names``, other than its own
    definition."""
    uses = {}
    for inst in _instructions(module):
        for _, value in inst.values():
            if isinstance(value, str) and value != inst.name and value in names:
                uses.setdefault(value, []).append(inst)
    return uses


def _replace(module, old, new):
    for fn in module.functions:
        for block in fn.blocks or ():
            if old in block.instructions:
                block.instructions[block.instructions.index(old)] = new
                return


def _untruncate(module, inst):
    """Where ``inst`` truncates a value now computed in 32 bits, make it a
    plain copy; return whether it did."""
    source = _truncated(inst)
    if source is not None:
        b = Builder()
        b.binary("add", "i32", source, "0", name=inst.name)
        _replace(module, inst, *b.instructions)
    return source is not None


def counters(module):
    """Rewrite the closed groups of bounded 64-bit counters of the IR model
    ``module`` as 32-bit values, in place; return whether it changed
    anything."""
    defs, leaves = {}, {}
    for inst in _instructions(module):
        if inst.name is None:
            continue
        if _is_phi(inst) or _is_step(inst):
            defs[inst.name] = inst
        if _sign_extended(inst) is not None:
            leaves[inst.name] = _sign_extended(inst)
    if not defs:
        return False
    uses = _uses(module, defs.keys() | leaves.keys())

    members = set(defs)

    def operand_ok(token):
        return token in members or token in leaves or _constant(token) is not None

    changed = True
    bounded = set()
    while changed:
        changed = False
        bounded = set()
        for name in sorted(members):
            inst = defs[name]
            values = [o.value for o in inst.operands]
            if inst.opcode == "phi":
                ok = all(operand_ok(v) for v in values)
            else:
                a, b = values
                steps = {a, b} - members
                ok = ("nsw" in inst.flags and len(steps) == 1 and a != b and
                      _constant(steps.pop()) in (1, -1) and (a in members or b in members))
            for use in uses.get(name, ()):
                if not ok:
                    break
                if use.name is None:
                    ok = False
                    break
                if use.name in members or _truncated(use) is not None:
                    continue
                if _is_compare(use) and all(operand_ok(o.value) for o in use.operands):
                    if any(o.value in leaves or _constant(o.value) is not None
                           for o in use.operands):
                        bounded.add(name)
                    continue
                ok = False
            if not ok:
                members.discard(name)
                changed = True
    members = _bounded_groups(members, bounded, defs)
    if not members:
        return False

    def narrow(inst):
        inst.flags = [] if inst.opcode != "icmp" else inst.flags
        inst.operands[0].type = "i32"
        for operand in inst.operands:
            operand.value = leaves.get(operand.value, operand.value)

    for name in sorted(members):
        inst = defs[name]
        if inst.opcode == "phi":
            inst.type = "i32"
            for operand in inst.operands:
                operand.value = leaves.get(operand.value, operand.value)
        else:
            narrow(inst)
        for use in uses.get(name, ()):
            if not _untruncate(module, use) and _is_compare(use) and use.name not in members:
                narrow(use)
    return True


def _bounded_groups(members, bounded, defs):
    """The members of the groups (connected by their definitions) that hold
    a bounded member."""
    parent = {m: m for m in members}

    def root(m):
        while parent[m] != m:
            parent[m] = parent[parent[m]]
            m = parent[m]
        return m

    for name in sorted(members):
        for operand in defs[name].operands:
            if operand.value in members:
                parent[root(operand.value)] = root(name)
    keep = {root(m) for m in bounded & members}
    return {m for m in members if root(m) in keep}


_LOW = ("add", "sub", "mul", "shl", "and", "or", "xor")


def low_bits(module):
    """Do in 32 bits the 64-bit integer operations of the IR model
    ``module`` whose results only reach truncations to 32 bits, in place."""
    ops, extended = {}, {}
    for inst in _instructions(module):
        if inst.name is None:
            continue
        # A shift by 32 or more would be poison in 32 bits.
        if _plain(inst, _LOW, {"nuw", "nsw", "disjoint"}, "i64") and len(inst.operands) == 2 \
                and (inst.opcode != "shl" or _constant(inst.operands[1].value) in range(32)):
            ops[inst.name] = inst
        if _plain(inst, ("sext", "zext"), set(), "i32") and inst.type == "i64":
            extended[inst.name] = inst.operands[0].value
    if not ops:
        return
    uses = _uses(module, ops.keys())
    members = set(ops)
    changed = True
    while changed:
        changed = False
        for name in sorted(members):
            for use in uses.get(name, ()):
                if use.name is not None and (use.name in members or
                                             _truncated(use) is not None):
                    continue
                members.discard(name)
                changed = True
                break
    if not members:
        return
    lows = 0
    for name in sorted(members):
        inst = ops[name]
        for operand in inst.operands:
            token = operand.value
            if token in members:
                continue
            if token in extended:
                operand.value = extended[token]
            elif token.lstrip("-").isdigit():
                operand.value = str((int(token) + 2 ** 31) % 2 ** 32 - 2 ** 31)
            else:
                b = Builder()
                operand.value = b.cast("trunc", "i64", token, "i32", name=f"%nv.lo.{lows}")
                lows += 1
                _insert_before(module, inst, *b.instructions)
        inst.flags = []
        inst.operands[0].type = "i32"
        for use in uses.get(name, ()):
            _untruncate(module, use)


def _insert_before(module, inst, new):
    for fn in module.functions:
        for block in fn.blocks or ():
            if inst in block.instructions:
                block.instructions.insert(block.instructions.index(inst), new)
                return
