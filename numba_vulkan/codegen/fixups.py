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
* ``llvm.spv.group.memory.barrier.with.group.sync`` becomes an
  ``OpControlBarrier`` whose memory semantics name no storage class, which
  orders no memory in Vulkan's model. The barrier gets the semantics of
  ``numba.cuda.syncthreads``: acquire-release on workgroup and storage
  buffer memory.
"""

import struct

from numba_vulkan import spirv

_OP_TYPE_INT = 21
_OP_TYPE_FLOAT = 22
_OP_CONSTANT = 43
_OP_CONSTANT_NULL = 46
_OP_COMPOSITE_INSERT = 82
_OP_COPY_OBJECT = 83
_OP_CONTROL_BARRIER = 224

#: AcquireRelease | UniformMemory | WorkgroupMemory.
BARRIER_SEMANTICS = 0x8 | 0x40 | 0x100


def _instructions(words):
    out, i = [], 5
    while i < len(words):
        count = words[i] >> 16
        out.append(list(words[i:i + count]))
        i += count
    return out


def repair(binary):
    """The module with the backend's known defects repaired (see above)."""
    words = spirv.words(binary)
    header = list(words[:5])
    instructions = _instructions(words)
    widths = {}
    constants = {}
    for inst in instructions:
        opcode = inst[0] & 0xFFFF
        if opcode in (_OP_TYPE_INT, _OP_TYPE_FLOAT):
            widths[inst[1]] = inst[2]
        elif opcode == _OP_CONSTANT:
            constants[inst[2]] = (inst[1], tuple(inst[3:]))
    out, inserted = [], {}
    for inst in instructions:
        opcode = inst[0] & 0xFFFF
        if opcode == _OP_CONSTANT_NULL and inst[1] in widths:
            literal = [0] * (2 if widths[inst[1]] == 64 else 1)
            inst = [((3 + len(literal)) << 16) | _OP_CONSTANT, inst[1], inst[2], *literal]
        elif opcode == _OP_COMPOSITE_INSERT and inst[1] in widths and len(inst) == 6:
            source = inst[3] if inst[5] == 0 else inst[4]
            inst = [(4 << 16) | _OP_COPY_OBJECT, inst[1], inst[2], source]
        elif opcode == _OP_CONTROL_BARRIER:
            ty = constants[inst[3]][0]
            inst = inst[:3] + [_constant(header, constants, inserted, ty, BARRIER_SEMANTICS)]
        out.append(inst)
    if inserted:
        # New constants go right after the last type or constant declaration.
        last = max(k for k, inst in enumerate(out)
                   if (inst[0] & 0xFFFF) in (_OP_TYPE_INT, _OP_TYPE_FLOAT, _OP_CONSTANT))
        out[last + 1:last + 1] = list(inserted.values())
    flat = header + [w for inst in out for w in inst]
    return struct.pack(f"<{len(flat)}I", *flat)


def _constant(header, constants, inserted, ty, value):
    for cid, (cty, literal) in constants.items():
        if cty == ty and literal == (value,):
            return cid
    cid = header[3]
    header[3] += 1
    constants[cid] = (ty, (value,))
    inserted[cid] = [(4 << 16) | _OP_CONSTANT, ty, cid, value]
    return cid
