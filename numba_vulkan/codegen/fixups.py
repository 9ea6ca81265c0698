"""Repairs of the SPIR-V that LLVM's backend emits, before validation.

Each repair undoes one known defect of LLVM 22's SPIR-V backend for Vulkan:

* It spells the integer zero of some instructions (the memory semantics of
  a relaxed atomic) as ``OpConstantNull`` and then reuses that constant as
  the member index of an ``OpAccessChain`` into a storage buffer, where
  SPIR-V requires an ``OpConstant``. Every scalar null becomes an
  ``OpConstant`` zero.
* It cannot lower LLVM's ``cmpxchg`` for Vulkan, so the compiler calls
  ``llvm.spv.cmpxchg`` directly, declared to return the old value. The
  backend then packs that value and a success flag into the call's result
  type as if it were a struct: two ``OpCompositeInsert`` into a scalar.
  Those become copies of the old value.
* It refuses 64-bit atomics for Vulkan (no ``Int64Atomics`` capability
  there), so the compiler calls a placeholder function per operation
  (``nv.atomic64.<op>.<scope>``) on a volatile load of the element; each
  call becomes the atomic instruction on the loaded element's pointer, the
  load and the placeholders go, and the module declares ``Int64Atomics``.
* ``llvm.spv.group.memory.barrier.with.group.sync`` becomes an
  ``OpControlBarrier`` whose memory semantics name no storage class, which
  orders no memory in Vulkan's model. The barrier gets the semantics of
  ``numba.cuda.syncthreads``: acquire-release on workgroup and storage
  buffer memory. A barrier whose semantics name storage classes was placed
  by the compiler with the ones it needs (:mod:`numba_vulkan.codegen.barriers`,
  ``cuda.syncwarp``) and keeps them.
* An LLVM ``fence`` becomes an ``OpMemoryBarrier`` whose semantics name no
  storage class either, which Vulkan rejects; it gets the same semantics.
"""

from numba_vulkan.llvmir.groupops import BARRIER_SEMANTICS
from numba_vulkan.spirv import binary as spirv
from numba_vulkan.spirv import opcodes as spv

#: Name prefix of the placeholder functions of 64-bit atomics.
WIDE_ATOMIC = "nv.atomic64."
#: SPIR-V opcode of each LLVM ``atomicrmw`` operation (and of cmpxchg).
_ATOMIC_OPCODES = {"xchg": spv.OpAtomicExchange, "cmpxchg": spv.OpAtomicCompareExchange,
                   "add": spv.OpAtomicIAdd, "sub": spv.OpAtomicISub, "min": spv.OpAtomicSMin,
                   "umin": spv.OpAtomicUMin, "max": spv.OpAtomicSMax, "umax": spv.OpAtomicUMax,
                   "and": spv.OpAtomicAnd, "or": spv.OpAtomicOr, "xor": spv.OpAtomicXor}


def repair(binary):
    """The module with the backend's known defects repaired (see above)."""
    header, instructions = spirv.parse(binary)
    widths = {}
    constants = {}
    for inst in instructions:
        opcode = inst[0] & 0xFFFF
        if opcode in (spv.OpTypeInt, spv.OpTypeFloat):
            widths[inst[1]] = inst[2]
        elif opcode == spv.OpConstant:
            constants[inst[2]] = (inst[1], tuple(inst[3:]))
    out, inserted = [], {}
    instructions = _wide_atomics(instructions, header, constants, inserted)
    for inst in instructions:
        opcode = inst[0] & 0xFFFF
        if opcode == spv.OpConstantNull and inst[1] in widths:
            literal = [0] * (2 if widths[inst[1]] == 64 else 1)
            inst = [((3 + len(literal)) << 16) | spv.OpConstant, inst[1], inst[2], *literal]
        elif opcode == spv.OpCompositeInsert and inst[1] in widths and len(inst) == 6:
            source = inst[3] if inst[5] == 0 else inst[4]
            inst = [(4 << 16) | spv.OpCopyObject, inst[1], inst[2], source]
        elif opcode == spv.OpControlBarrier and not _names_storage(constants, inst[3]):
            ty = constants[inst[3]][0]
            inst = inst[:3] + [_constant(header, constants, inserted, ty, BARRIER_SEMANTICS)]
        elif opcode == spv.OpMemoryBarrier:
            ty = constants[inst[1]][0]
            inst = inst[:2] + [_constant(header, constants, inserted, ty, BARRIER_SEMANTICS)]
        out.append(inst)
    if inserted:
        # New constants go right after the last type or constant declaration.
        last = max(k for k, inst in enumerate(out)
                   if (inst[0] & 0xFFFF) in (spv.OpTypeInt, spv.OpTypeFloat, spv.OpConstant))
        out[last + 1:last + 1] = list(inserted.values())
    return spirv.assemble(header, out)


def _wide_atomics(instructions, header, constants, inserted):
    placeholders = {}
    for inst in instructions:
        if (inst[0] & 0xFFFF) == spv.OpName:
            name = spirv.string(inst[2:])
            if name.startswith(WIDE_ATOMIC):
                op, scope = name[len(WIDE_ATOMIC):].rsplit(".", 1)
                placeholders[inst[1]] = (_ATOMIC_OPCODES[op], int(scope))
    if not placeholders:
        return instructions
    uint = next(inst[1] for inst in instructions
                if (inst[0] & 0xFFFF) == spv.OpTypeInt and inst[2:] == [32, 0])
    loads = {inst[2]: k for k, inst in enumerate(instructions)
             if (inst[0] & 0xFFFF) == spv.OpLoad}
    drop = set()
    for k, inst in enumerate(instructions):
        if (inst[0] & 0xFFFF) != spv.OpFunctionCall or inst[3] not in placeholders:
            continue
        opcode, scope = placeholders[inst[3]]
        ty, result, element, args = inst[1], inst[2], inst[4], inst[5:]
        load = loads[element]
        drop.add(load)
        pointer = instructions[load][3]
        scope_id = _constant(header, constants, inserted, uint, scope)
        relaxed = _constant(header, constants, inserted, uint, 0)
        if opcode == _ATOMIC_OPCODES["cmpxchg"]:
            expected, value = args
            operands = [pointer, scope_id, relaxed, relaxed, value, expected]
        else:
            operands = [pointer, scope_id, relaxed, args[0]]
        instructions[k] = [((3 + len(operands)) << 16) | opcode, ty, result, *operands]
    out, inside = [], False
    for k, inst in enumerate(instructions):
        opcode = inst[0] & 0xFFFF
        if k in drop:
            continue
        if opcode == spv.OpFunction and inst[2] in placeholders:
            inside = True
        if inside:
            inside = opcode != spv.OpFunctionEnd
            continue
        if opcode in (spv.OpName, spv.OpDecorate) and inst[1] in placeholders:
            continue
        out.append(inst)
    if not any((i[0] & 0xFFFF) == spv.OpDecorate and i[2] == spv.DecorationLinkageAttributes
               for i in out):
        out = [i for i in out
               if not ((i[0] & 0xFFFF) == spv.OpCapability and i[1] == spv.CapabilityLinkage)]
    out.insert(0, [(2 << 16) | spv.OpCapability, spv.CapabilityInt64Atomics])
    return out


#: The storage-class bits of memory semantics.
_STORAGE_CLASSES = (spv.MemorySemanticsUniformMemory | spv.MemorySemanticsSubgroupMemory
                    | spv.MemorySemanticsWorkgroupMemory | spv.MemorySemanticsCrossWorkgroupMemory
                    | spv.MemorySemanticsAtomicCounterMemory | spv.MemorySemanticsImageMemory)


def _names_storage(constants, semantics):
    """Whether the memory semantics constant ``semantics`` names a storage class."""
    return bool(constants[semantics][1][0] & _STORAGE_CLASSES)


def _constant(header, constants, inserted, ty, value):
    for cid, (cty, literal) in constants.items():
        if cty == ty and literal == (value,):
            return cid
    cid = header[3]
    header[3] += 1
    constants[cid] = (ty, (value,))
    inserted[cid] = [(4 << 16) | spv.OpConstant, ty, cid, value]
    return cid
