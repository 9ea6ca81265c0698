"""Carry across a loop's back edge what the next trip would compute again.

LLVM rotates a ``while`` loop so that its test runs at the bottom of each
trip, on the values the trip just computed. In a plainly written
Mandelbrot::

    while n < max_iter and zr * zr + zi * zi <= 4.0:
        zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci

the test's ``zr * zr`` and ``zi * zi`` are then computed on the new ``zr``
and ``zi`` at the bottom of the trip, and the next trip computes the same
products again on its phis: six multiplies a trip where the tuned kernel
(``zr2 = zr * zr`` once) does four, 1.2-1.27x its time on an H200. LLVM's
value numbering does not look through a back edge, and NVVM's output for
numba.cuda does not have the duplicates.

:func:`carry` rewrites each such loop (its header entered from one
preheader and one latch): an operation ``I`` in the loop on the header's
phis and values from outside the loop is the same operation ``J`` on the
phis' incoming values from the latch, one trip later. Where such a ``J``
exists, computed in every trip (in a block that every path from the
header to the latch passes), ``I`` becomes a phi of the header: ``I``
computed in the preheader on the phis' initial values, and ``J`` from the
latch. The result is bit-identical: ``J``
applies the same opcode, flags and metadata to the same values ``I`` would
read in the next trip, and only operations that always give the same
result for the same operands and have no side effects are taken.
"""

import math
import struct

from numba_vulkan.llvmir import cfg
from numba_vulkan.llvmir import ir

#: Operations taken: deterministic, without side effects, and safe to
#: compute in the preheader even on a path where the loop would not have
#: (integer division, which may trap, is not among them).
_PURE = frozenset("fadd fsub fmul fneg add sub mul and or xor shl icmp fcmp".split())
#: Intrinsics taken, by the start of their names.
_PURE_CALLS = ("@llvm.fma.f", "@llvm.fabs.f")
_FLOATS = {"float": ("<f", 2.0 ** -126), "double": ("<d", 2.0 ** -1022)}


def _scalar(ty):
    return ty in ("half", "float", "double") or (
        isinstance(ty, str) and ty[:1] == "i" and ty[1:].isdigit())


def _result_type(inst):
    """The type of a taken operation's result, or None if it is not one."""
    if inst.name is None or not inst.operands:
        return None
    # Operands after the first of an arithmetic instruction carry no type.
    if not all((_scalar(o.type) or o.type is None and inst.opcode != "call")
               and isinstance(o.value, str) for o in inst.operands) \
            or not _scalar(inst.operands[0].type):
        return None
    if inst.opcode == "call":
        if inst.prefix == "musttail" or not inst.callee.startswith(_PURE_CALLS) \
                or not _scalar(inst.type):
            return None
        return inst.type
    if inst.opcode not in _PURE or inst.type is not None:
        return None
    return "i1" if inst.opcode in ("icmp", "fcmp") else inst.operands[0].type


def _key(inst, operands):
    """What two operations must share to give the same result: everything
    but their names, with ``operands`` as their operands' values."""
    return (inst.opcode, tuple(inst.flags), inst.type, inst.tail, inst.callee,
            tuple((o.type, value, o.attrs) for o, value in zip(inst.operands, operands)))


def carry(module):
    """Take each operation of a loop of the IR model ``module`` that the
    loop's previous trip computed already, on the values this trip reads,
    from that trip through a phi of the loop's header, in place; return
    whether there was one."""
    changed = False
    for function in module.functions:
        if function.blocks:
            changed |= _carry_function(function)
    return changed


def _carry_function(function):
    graph = cfg.Graph(function)
    # Values and blocks share one namespace; parameters are in the header.
    names = {inst.name for inst in function.instructions() if inst.name}
    names.update(f"%{block.label}" for block in function.blocks)
    defined = {inst.name: block for block in function.blocks
               for inst in block.instructions if inst.name}
    counter = [0]

    def fresh():
        while True:
            counter[0] += 1
            name = f"%nv.carry.{counter[0]}"
            if name not in names and name not in function.header:
                names.add(name)
                return name

    changed = False
    for header in graph.order:
        edges = graph.preds[id(header)]
        if len(edges) != 2 or edges[0] is edges[1]:
            continue
        latches = [p for p in edges if id(p) in graph.idom and graph.dominates(header, p)]
        if len(latches) != 1:
            continue
        latch = latches[0]
        preheader = edges[1] if edges[0] is latch else edges[0]
        changed |= _carry_loop(graph, header, preheader, latch, defined, fresh)
    return changed


def _dominating(graph, header, latch):
    """The blocks of the loop that every path from its header to its latch
    passes.

    What such a block computes last before the latch is what it computes
    on the values its operands have there, in a block of an inner loop
    too: an operand dominates it, so a path on which the operand is
    computed again after the block's last run, with no run of the block
    after, would make a path to the latch that avoids the block.
    """
    chain, block = {id(latch)}, latch
    while block is not header:
        block = graph.idom[id(block)]
        chain.add(id(block))
    return chain


def _carry_loop(graph, header, preheader, latch, defined, fresh):
    phis = {}
    phi_end = 0
    for k, inst in enumerate(header.instructions):
        if inst.opcode != "phi":
            break
        phi_end = k + 1
        latch_label = f"%{latch.label}" if latch.label is not None else None
        if len(inst.operands) != 2 or inst.labels.count(latch_label) != 1:
            return False
        at = inst.labels.index(latch_label)
        phis[inst.name] = (inst.operands[1 - at].value, inst.operands[at].value)
        pre_label = inst.labels[1 - at]
    if not phis:
        return False
    body = graph.loop_body(header, latch)
    dominating = _dominating(graph, header, latch)
    computed = {}
    for block in graph.order:
        if id(block) in dominating:
            for inst in block.instructions:
                if _result_type(inst) is not None:
                    computed.setdefault(_key(inst, [o.value for o in inst.operands]), inst)

    def invariant(value):
        block = defined.get(value)
        return block is None or id(block) not in body

    added = []
    for block in graph.order:
        if id(block) not in body:
            continue
        kept = []
        for inst in block.instructions:
            ty = _result_type(inst)
            values = [o.value for o in inst.operands]
            if ty is None or not any(v in phis for v in values) \
                    or not all(v in phis or invariant(v) for v in values):
                kept.append(inst)
                continue
            key = _key(inst, values)
            later = computed.get(_key(inst, [phis[v][1] if v in phis else v for v in values]))
            if later is None or later is inst:
                kept.append(inst)
                continue
            initial = ir.Instruction(inst.opcode, [ir.Operand(o.type, phis[v][0] if v in phis
                                                              else v, o.attrs)
                                                   for o, v in zip(inst.operands, values)],
                                     fresh(), list(inst.flags), inst.type, inst.tail,
                                     inst.prefix, inst.callee)
            start = _folded(initial, ty)
            if start is None:
                preheader.instructions.insert(len(preheader.instructions) - 1, initial)
                start = initial.name
            added.append(ir.Instruction("phi", [ir.Operand(None, start),
                                                ir.Operand(None, later.name)],
                                        inst.name, type=ty,
                                        labels=[pre_label, f"%{latch.label}"]))
            phis[inst.name] = (start, later.name)
            defined[inst.name] = header
            if computed.get(key) is inst:
                del computed[key]
        block.instructions = kept
    header.instructions[phi_end:phi_end] = added
    return bool(added)


def _folded(inst, ty):
    """The constant a float addition, subtraction, multiply or negation of
    constants gives, written as LLVM reads it, or None. Only where every
    operand and the result are zero or normal numbers: the result is then
    the one every IEEE device computes (a float32 operation computed in
    float64 and rounded once gives the float32 result), whatever it does
    with subnormal numbers."""
    if ty not in _FLOATS or inst.opcode not in ("fadd", "fsub", "fmul", "fneg"):
        return None
    fmt, smallest = _FLOATS[ty]
    values = [_float(o.value) for o in inst.operands]
    if any(v is None or not _ordinary(v, smallest) for v in values):
        return None
    if inst.opcode == "fneg":
        result = -values[0]
    else:
        a, b = values
        result = a + b if inst.opcode == "fadd" else a - b if inst.opcode == "fsub" else a * b
    try:
        result = struct.unpack(fmt, struct.pack(fmt, result))[0]
    except OverflowError:
        return None
    if not _ordinary(result, smallest) or result == 0.0 and inst.opcode == "fmul" \
            and 0.0 not in values:
        # A product too small even for zero (an underflow) is left too.
        return None
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", result))[0]


def _ordinary(value, smallest):
    return math.isfinite(value) and (value == 0.0 or abs(value) >= smallest)


def _float(text):
    """The value of a float constant as LLVM prints a float or double."""
    if text.startswith("0x") and len(text) == 18:
        return struct.unpack("<d", struct.pack("<Q", int(text[2:], 16)))[0]
    if text[:1].isdigit() or text[:1] == "-" and text[1:2].isdigit():
        try:
            return float(text)
        except ValueError:
            return None
    return None
