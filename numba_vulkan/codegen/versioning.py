"""Loops bounded by a 64-bit value get a twin for bounds that fit in 32 bits.

A loop counter compared with a 64-bit bound (``while n < max_iter`` with
``max_iter`` a Python int, ``for k in range(r + 1)`` with ``r`` computed in
int64) stays 64-bit: :func:`numba_vulkan.codegen.int32.counters` narrows a
counter only where its bounds are 32-bit values, for only then does the
narrow counter provably take the same values. GPUs do 64-bit integer
arithmetic in two or more 32-bit steps, so each trip pays twice for its
counter.

:func:`version_loops` copies such an innermost loop and runs the copy when
every such bound, tested on entry, fits in 32 bits, with each bound there
written as the sign extension of its low 32 bits (the value it has on that
path): the copy's counter is then one that ``int32.counters`` narrows
exactly, and the original loop runs otherwise, as it did. A copy that
would not be narrowed is not made.
"""

from numba_vulkan.codegen import int32
from numba_vulkan.llvmir import cfg
from numba_vulkan.llvmir import ir

_BINARY = frozenset("add sub mul udiv sdiv urem srem shl lshr ashr and or xor fadd fsub fmul "
                    "fdiv frem".split())
#: Most blocks a loop may have to be copied; larger loops are left alone.
MAX_BLOCKS = 64


def _result_type(inst):
    """The type of ``inst``'s result, or None where this module cannot tell."""
    op = inst.opcode
    if op in ("icmp", "fcmp"):
        return "i1" if not str(inst.operands[0].type).startswith("<") else None
    if op in ir.CASTS or op in ("phi", "load"):
        return inst.type
    if op == "select":
        return inst.operands[1].type
    if op in _BINARY or op == "fneg":
        return inst.operands[0].type
    if op == "call" and inst.type and "(" not in inst.type:
        return inst.type
    return None


def _label(block):
    return f"%{block.label}"


def _renamed(token, suffix):
    """``token`` (``%x``, ``%"x"``, ``%7``) with ``suffix`` appended; a
    number gets a name, as LLVM numbers only its unnamed values."""
    if token.startswith('%"'):
        return token[:-1] + suffix + '"'
    if token[1:].isdigit():
        return f"%nv.n{token[1:]}{suffix}"
    return token + suffix


def version_loops(text):
    """``text`` (IR of a module) with each innermost loop whose counter is
    bounded by 64-bit values preceded by a test of those bounds and a copy
    run when they fit in 32 bits."""
    count, tried = 0, set()
    while True:
        through32 = None
        while True:
            module = ir.parse(text)
            found = None
            for function in module.functions:
                if function.blocks:
                    found = _version_one(function, count, tried, through32)
                    if found:
                        break
            if found is None:
                return text
            key, routed = found
            candidate = str(module)
            counter, kept = _narrowed(candidate, count, routed)
            if counter and kept == set(routed.values()):
                text = candidate
                count += 1
                tried.add(key)
                break
            if counter and kept != set(routed.values()):
                # Values that int32.counters keeps 64-bit must not pass
                # through 32 bits: try again without them.
                through32 = kept
                continue
            tried.add(key)
            break


def _narrowed(text, count, routed):
    """Whether :func:`int32.counters` narrows a counter phi of copy
    ``count``, and the names of ``routed`` (``{out phi: name}``) whose out
    phi it narrows."""
    suffix = f".v{count}"
    counter, kept = False, set()
    module = ir.parse(text)
    # Read from the model it rewrote, not from its text parsed again.
    int32.counters(module)
    for function in module.functions:
        for inst in function.instructions():
            if inst.opcode != "phi" or inst.type != "i32" or not inst.name:
                continue
            if inst.name.endswith(suffix):
                counter = True
            if inst.name in routed:
                kept.add(routed[inst.name])
    return counter, kept


def _version_one(function, count, tried, through32):
    """Version the first loop not yet tried that qualifies: ``(key, routed)``
    (see :func:`_version`), or None."""
    graph = cfg.Graph(function)
    loops = graph.loops()
    for header_id, body in loops.items():
        inner = [h for h in loops if h != header_id and h in body]
        header = next(b for b in graph.blocks if id(b) == header_id)
        key = (function.name, header.label)
        if inner or len(body) > MAX_BLOCKS or key in tried:
            continue
        routed = _version(function, graph, header, body, count, through32)
        if routed is not None:
            return key, routed
        tried.add(key)
    return None


def _bounds(graph, header, body, defined):
    """The 64-bit values defined outside the loop that a compare in it
    makes with a 64-bit phi of ``header`` or a step of one, and those
    phis' start values."""
    phis = [i for i in header.instructions if i.opcode == "phi" and i.type == "i64"]
    counters = {i.name for i in phis}
    steps = set()
    for block in graph.blocks:
        if id(block) not in body:
            continue
        for inst in block.instructions:
            if inst.opcode in ("add", "sub") and inst.name and inst.operands[0].type == "i64" \
                    and any(o.value in counters for o in inst.operands):
                steps.add(inst.name)
    def outside(v):
        return isinstance(v, str) and v.startswith("%") and v not in counters \
            and v not in steps and defined.get(v) is not None \
            and id(defined[v]) not in body and not _sign_extension(v, graph)

    bounds = {o.value for phi in phis for o in phi.operands if outside(o.value)}
    for block in graph.blocks:
        if id(block) not in body:
            continue
        for inst in block.instructions:
            if inst.opcode != "icmp" or inst.operands[0].type != "i64":
                continue
            values = [o.value for o in inst.operands]
            if not any(v in counters or v in steps for v in values):
                continue
            bounds.update(v for v in values if outside(v))
    return sorted(bounds)


def _sign_extension(name, graph):
    for block in graph.blocks:
        for inst in block.instructions:
            if inst.name == name:
                return inst.opcode == "sext" and inst.operands[0].type == "i32"
    return False


def _preheader(function, graph, pred, header, count):
    """A block that only branches to ``header``, on the path from ``pred``."""
    term = pred.terminator
    if term.opcode == "br" and len(term.operands) == 1:
        return pred
    block = ir.Block(_renamed(_label(header), f".nv.pre{count}")[1:],
                     [ir.instruction(f"br label {_label(header)}")])
    for holder, value in term.values():
        if value == _label(header):
            holder.value = _label(block)
    _relabel_phis(header, _label(pred), _label(block))
    function.blocks.insert(function.blocks.index(header), block)
    return block


def _dedicated_exit(function, graph, body, exit_block, count):
    """A block between the loop and ``exit_block`` that only the loop
    reaches, where ``exit_block`` has other predecessors too."""
    preds = graph.preds[id(exit_block)]
    if all(id(p) in body for p in preds):
        return exit_block
    inside = [_label(p) for p in preds if id(p) in body]
    block = ir.Block(_renamed(_label(exit_block), f".nv.exit{count}")[1:])
    for inst in exit_block.instructions:
        if inst.opcode != "phi":
            break
        pairs = [(o, label) for o, label in zip(inst.operands, inst.labels) if label in inside]
        moved = _renamed(inst.name, f".nv.exit{count}")
        block.instructions.append(ir.Instruction(
            "phi", [ir.Operand(None, o.value) for o, _ in pairs], name=moved, type=inst.type,
            labels=[label for _, label in pairs]))
        keep = [(o, label) for o, label in zip(inst.operands, inst.labels) if label not in inside]
        inst.operands = [o for o, _ in keep] + [ir.Operand(None, moved)]
        inst.labels = [label for _, label in keep] + [_label(block)]
    block.instructions.append(ir.instruction(f"br label {_label(exit_block)}"))
    for p in preds:
        if id(p) in body:
            for holder, value in p.terminator.values():
                if value == _label(exit_block):
                    holder.value = _label(block)
    function.blocks.insert(function.blocks.index(exit_block), block)
    return block


def _relabel_phis(block, old, new):
    for inst in block.instructions:
        if inst.opcode != "phi":
            break
        inst.labels = [new if label == old else label for label in inst.labels]


def _version(function, graph, header, body, count, through32):
    defined = {}
    for block in graph.blocks:
        for inst in block.instructions:
            if inst.name:
                defined[inst.name] = block
    bounds = _bounds(graph, header, body, defined)
    if not bounds or header.label is None:
        return None
    outside = [p for p in graph.preds[id(header)] if id(p) not in body]
    exits = {id(s): s for b in graph.blocks if id(b) in body
             for s in graph.succs[id(b)] if id(s) not in body}
    if len(outside) != 1 or len(exits) != 1:
        return None
    (exit_block,) = exits.values()
    if exit_block.label is None or any(
            inst.opcode == "phi" and _result_type(inst) is None for inst in exit_block.instructions):
        return None
    loop_blocks = [b for b in graph.blocks if id(b) in body]
    names = {i.name for b in loop_blocks for i in b.instructions if i.name}
    used_later = {value for block in graph.blocks if id(block) not in body
                  for inst in block.instructions for _, value in inst.values()
                  if isinstance(value, str) and value in names}
    if any(_result_type(i) is None for b in loop_blocks for i in b.instructions
           if i.name in used_later):
        return None
    preheader = _preheader(function, graph, outside[0], header, count)
    exit_block = _dedicated_exit(function, graph, body, exit_block, count)
    graph = cfg.Graph(function)
    # Values of the loop used after it: each gets a phi in the exit block.
    later = {}
    for block in graph.blocks:
        if id(block) in body:
            continue
        for inst in block.instructions:
            for holder, value in inst.values():
                if isinstance(value, str) and value in names:
                    later.setdefault(value, []).append((block, inst, holder))
    types = {i.name: _result_type(i) for b in loop_blocks for i in b.instructions
             if i.name in later}

    suffix = f".v{count}"
    rename = {n: _renamed(n, suffix) for n in names}
    relabel = {_label(b): _renamed(_label(b), suffix) for b in loop_blocks}
    narrow_bounds = {}
    test = []
    fits = f"%nv.v{count}.fits"
    for k, bound in enumerate(bounds):
        low, wide, ok, shifted = (f"%nv.v{count}.b{k}.{w}"
                                  for w in ("low", "wide", "ok", "shifted"))
        # A bound of at most 2^31 - 2 in magnitude: a counter stepping by one
        # to it (or one past it) fits in 32 bits.
        test += [f"{shifted} = add i64 {bound}, 2147483647",
                 f"{ok} = icmp ult i64 {shifted}, 4294967294",
                 f"{low} = trunc i64 {bound} to i32", f"{wide} = sext i32 {low} to i64"]
        narrow_bounds[bound] = wide
    all_ok = f"%nv.v{count}.b0.ok"
    for k in range(1, len(bounds)):
        both = f"%nv.v{count}.all{k}"
        test.append(f"{both} = and i1 {all_ok}, %nv.v{count}.b{k}.ok")
        all_ok = both
    test.append(f"{fits} = or i1 {all_ok}, false")

    copies = []
    for block in loop_blocks:
        copy = ir.Block(_renamed(_label(block), suffix)[1:])
        for inst in block.instructions:
            twin = ir.instruction(str(inst))
            if twin.name:
                twin.name = rename[twin.name]
            for holder, value in twin.values():
                if isinstance(value, str):
                    holder.value = rename.get(value, narrow_bounds.get(value,
                                                                       relabel.get(value, value)))
            twin.labels = [relabel.get(label, label) for label in twin.labels]
            copy.instructions.append(twin)
        copies.append(copy)

    # The copy leaves through a block of its own, which hands the exit block
    # each value it takes from the loop: through 32 bits where the value is
    # one of the copy's counters (it fits there), so that the counters'
    # group stays closed.
    out_label = _renamed(_label(exit_block), suffix)
    exit_preds = [_label(p) for p in graph.preds[id(exit_block)]]
    out = ir.Block(out_label[1:])
    items = []
    for inst in exit_block.instructions:
        if inst.opcode != "phi":
            break
        items.append((inst.name, inst.type,
                      [rename.get(o.value, narrow_bounds.get(o.value, o.value))
                       for o in inst.operands],
                      [relabel[label] for label in inst.labels], inst))
    for value in sorted(later):
        if any(block is not exit_block or inst.opcode != "phi" for block, inst, _ in later[value]):
            items.append((value, types[value], [rename[value]] * len(exit_preds),
                          [relabel[p] for p in exit_preds], None))
    handed, routed, casts = {}, {}, []
    for k, (name, ty, values, labels, _) in enumerate(items):
        merged = f"%nv.v{count}.out{k}"
        out.instructions.append(ir.Instruction("phi", [ir.Operand(None, v) for v in values],
                                               name=merged, type=ty, labels=labels))
        if ty == "i64" and (through32 is None or name in through32):
            routed[merged] = name
            low = f"%nv.v{count}.out{k}.low"
            back = f"%nv.v{count}.out{k}.back"
            # After every phi of the block: phis come first.
            casts += [ir.instruction(f"{low} = trunc i64 {merged} to i32"),
                      ir.instruction(f"{back} = sext i32 {low} to i64")]
            merged = back
        handed[name] = merged
    out.instructions += casts
    out.instructions.append(ir.instruction(f"br label {_label(exit_block)}"))
    for copy in copies:
        for holder, value in copy.terminator.values():
            if value == _label(exit_block):
                holder.value = out_label
    merged_phis = []
    for name, ty, values, labels, inst in items:
        if inst is not None:
            inst.operands.append(ir.Operand(None, handed[name]))
            inst.labels.append(out_label)
            continue
        phi_name = _renamed(name, f".nv.out{count}")
        merged_phis.append(ir.Instruction(
            "phi", [ir.Operand(None, name) for _ in exit_preds] + [ir.Operand(None, handed[name])],
            name=phi_name, type=ty, labels=exit_preds + [out_label]))
        for block, use, holder in later[name]:
            if not (block is exit_block and use.opcode == "phi"):
                holder.value = phi_name
    phis = sum(1 for inst in exit_block.instructions if inst.opcode == "phi")
    exit_block.instructions[phis:phis] = merged_phis

    target = _renamed(_label(header), suffix)
    preheader.instructions[-1:] = [ir.instruction(t) for t in test] + [
        ir.instruction(f"br i1 {fits}, label {target}, label {_label(header)}")]
    at = function.blocks.index(loop_blocks[-1]) + 1
    function.blocks[at:at] = copies + [out]
    return routed
