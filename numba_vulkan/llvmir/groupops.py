"""Subgroup operations: placeholder calls in LLVM IR, SPIR-V instructions in the module.

LLVM 22's SPIR-V backend lowers OpenCL's ``__spirv_GroupNonUniform*``
built-ins only for OpenCL, and for Vulkan offers a few HLSL wave intrinsics
(no relative shuffles, no bitwise reductions, no scans). So the compiler
calls one declared placeholder function per operation and type,
``nv.group.<opcode>.<group operation>.<types>`` (:func:`call`), whose first
argument is the scope (Subgroup) and whose other arguments are the
instruction's operands in order. The backend emits each as an
``OpFunctionCall`` of an imported function; :func:`lower` turns every such
call into the ``OpGroupNonUniform*`` instruction (or, for ``syncwarp``, the
``OpControlBarrier``) it names, drops the placeholders and declares the
capabilities the instructions need. A plain ``OpControlBarrier`` (of
Workgroup scope, :mod:`numba_vulkan.codegen.barriers`) needs none.

The placeholders are ``convergent``: LLVM must not move a call into or out
of a branch, which would change the invocations taking part.
"""

import re

from llvmlite import ir

from numba_vulkan.spirv import binary as spirv
from numba_vulkan.spirv import opcodes as spv

#: Name prefix of the placeholder functions.
PREFIX = "nv.group."
#: Name prefix of placeholders for instructions without a scope, which LLVM
#: must not see as its own intrinsics (it merges two 32-bit
#: ``llvm.bitreverse`` into a 64-bit one, which Vulkan does not allow).
PLAIN = "nv.op."

#: The memory semantics of ``numba.cuda.syncthreads``, which a subgroup's
#: ``syncwarp`` and the backend's barriers and fences take too:
#: acquire-release on workgroup and storage buffer memory.
BARRIER_SEMANTICS = (spv.MemorySemanticsAcquireRelease | spv.MemorySemanticsUniformMemory
                     | spv.MemorySemanticsWorkgroupMemory)

#: The capability each group instruction needs besides GroupNonUniform.
_CAPABILITY_OF = {
    **{op: spv.CapabilityGroupNonUniformVote for op in (
        spv.OpGroupNonUniformAll, spv.OpGroupNonUniformAny, spv.OpGroupNonUniformAllEqual)},
    **{op: spv.CapabilityGroupNonUniformBallot for op in (
        spv.OpGroupNonUniformBroadcast, spv.OpGroupNonUniformBallot)},
    spv.OpGroupNonUniformShuffle: spv.CapabilityGroupNonUniformShuffle,
    spv.OpGroupNonUniformShuffleXor: spv.CapabilityGroupNonUniformShuffle,
    spv.OpGroupNonUniformShuffleUp: spv.CapabilityGroupNonUniformShuffleRelative,
    spv.OpGroupNonUniformShuffleDown: spv.CapabilityGroupNonUniformShuffleRelative,
    **{op: spv.CapabilityGroupNonUniformArithmetic for op in range(
        spv.OpGroupNonUniformIAdd, spv.OpGroupNonUniformBitwiseXor + 1)},
}

_UNSAFE = re.compile(r"[^A-Za-z0-9]+")


def _declare(builder, name, restype, argtypes, attributes):
    try:
        return builder.module.get_global(name)
    except KeyError:
        fn = ir.Function(builder.module, ir.FunctionType(restype, argtypes), name)
        for attribute in attributes:
            fn.attributes.add(attribute)
        if not isinstance(restype, ir.VoidType):
            fn.attributes.add("readnone")
        return fn


def _suffix(types):
    return "_".join(_UNSAFE.sub("", str(t)) for t in types)


def instruction(builder, opcode, restype, args):
    """Emit the placeholder call of SPIR-V instruction ``opcode`` with operands ``args``."""
    name = f"{PLAIN}{opcode}.x.{_suffix([restype, *[a.type for a in args]])}"
    fn = _declare(builder, name, restype, [a.type for a in args], ("nounwind",))
    return builder.call(fn, args)


def call(builder, opcode, restype, args, operation=None):
    """Emit the placeholder call of SPIR-V instruction ``opcode`` at Subgroup scope.

    Args:
        builder: The llvmlite IR builder.
        opcode: The SPIR-V opcode.
        restype: The LLVM result type (``ir.VoidType()`` for none).
        args: The instruction's operands after the scope, as LLVM values.
        operation: The group operation literal (``GroupOperationReduce``, ...) of an
            arithmetic instruction, or None.

    Returns:
        The call's value.
    """
    scope = ir.Constant(ir.IntType(32), spv.ScopeSubgroup)
    argtypes = [scope.type] + [a.type for a in args]
    name = (f"{PREFIX}{opcode}.{'x' if operation is None else operation}."
            f"{_suffix([restype, *argtypes])}")
    fn = _declare(builder, name, restype, argtypes, ("convergent", "nounwind"))
    return builder.call(fn, [scope, *args])


def _placeholders(instructions):
    found = {}
    for inst in instructions:
        if (inst[0] & 0xFFFF) == spv.OpName:
            name = spirv.string(inst[2:])
            for prefix in (PREFIX, PLAIN):
                if name.startswith(prefix):
                    opcode, operation = name[len(prefix):].split(".")[:2]
                    found[inst[1]] = (int(opcode), None if operation == "x" else int(operation),
                                      prefix == PREFIX)
    return found


def lower(binary):
    """The module with every placeholder call replaced by its instruction."""
    header, instructions = spirv.parse(binary)
    placeholders = _placeholders(instructions)
    if not placeholders:
        return binary
    void = {inst[1] for inst in instructions if (inst[0] & 0xFFFF) == spv.OpTypeVoid}
    needed = set()
    out, inside = [], False
    for inst in instructions:
        opcode = inst[0] & 0xFFFF
        if opcode == spv.OpFunction and inst[2] in placeholders:
            inside = True
        if inside:
            inside = opcode != spv.OpFunctionEnd
            continue
        if opcode in (spv.OpName, spv.OpDecorate) and inst[1] in placeholders:
            continue
        if opcode == spv.OpFunctionCall and inst[3] in placeholders:
            op, operation, subgroup = placeholders[inst[3]]
            literal = [] if operation is None else [operation]
            # The scope (of a group instruction) comes before the literal.
            operands = inst[4:5] + literal + inst[5:]
            words = operands if inst[1] in void else [inst[1], inst[2], *operands]
            inst = [((1 + len(words)) << 16) | op, *words]
            if op in _CAPABILITY_OF or (op == spv.OpControlBarrier and subgroup):
                needed.add(_CAPABILITY_OF.get(op, spv.CapabilityGroupNonUniform))
        out.append(inst)
    if not any((i[0] & 0xFFFF) == spv.OpDecorate and i[2] == spv.DecorationLinkageAttributes
               for i in out):
        out = [i for i in out
               if not ((i[0] & 0xFFFF) == spv.OpCapability and i[1] == spv.CapabilityLinkage)]
    declared = {i[1] for i in out if (i[0] & 0xFFFF) == spv.OpCapability}
    added = [[(2 << 16) | spv.OpCapability, c] for c in sorted(needed - declared)]
    return spirv.assemble(header, added + out)

