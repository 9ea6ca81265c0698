"""Reading facts out of a SPIR-V binary without any external tool."""

import struct

from numba_vulkan.spirv import opcodes as spv

MAGIC = 0x07230203

#: The device feature (as in ``DeviceInfo.features``: the operation classes
#: of ``VkPhysicalDeviceSubgroupProperties.supportedOperations``) each
#: subgroup capability needs. GroupNonUniform itself is in every Vulkan 1.1
#: device.
SUBGROUP_FEATURES = {
    "GroupNonUniformVote": "subgroup_vote",
    "GroupNonUniformArithmetic": "subgroup_arithmetic",
    "GroupNonUniformBallot": "subgroup_ballot",
    "GroupNonUniformShuffle": "subgroup_shuffle",
    "GroupNonUniformShuffleRelative": "subgroup_shuffle_relative",
}


def words(binary):
    """The module as 32-bit words, after checking its header."""
    if len(binary) < 20 or len(binary) % 4:
        raise ValueError("not a SPIR-V module: bad size")
    (magic,) = struct.unpack_from("<I", binary)
    if magic != MAGIC:
        raise ValueError("not a SPIR-V module: bad magic number")
    return struct.unpack(f"<{len(binary) // 4}I", binary)


def parse(binary):
    """``(header, instructions)`` of a module: the 5 header words, and each
    instruction as a list of its words (the first holds count and opcode)."""
    w = words(binary)
    out, i = [], 5
    while i < len(w):
        count = w[i] >> 16
        if count == 0 or i + count > len(w):
            raise ValueError("not a SPIR-V module: bad instruction length")
        out.append(list(w[i:i + count]))
        i += count
    return list(w[:5]), out


def assemble(header, instructions):
    """The binary of a module from :func:`parse`'s parts."""
    flat = list(header) + [word for inst in instructions for word in inst]
    return struct.pack(f"<{len(flat)}I", *flat)


def opcode(instruction):
    """The opcode of an instruction from :func:`parse`."""
    return instruction[0] & 0xFFFF


def capabilities(binary):
    """Names of the capabilities a module declares, in order."""
    _, instructions = parse(binary)
    return [spv.CAPABILITIES.get(inst[1], str(inst[1])) for inst in instructions
            if opcode(inst) == spv.OpCapability]


def string(words):
    """A literal string from the words that hold it (nul-terminated UTF-8)."""
    data = struct.pack(f"<{len(words)}I", *words)
    return data.split(b"\0", 1)[0].decode("utf-8", "replace")


def imports(binary):
    """Names of the functions a module imports: declared with Import
    linkage, for a linker that Vulkan does not have. No driver can run such a
    module, and lavapipe crashes the process creating its pipeline, although
    spirv-val accepts it."""
    _, instructions = parse(binary)
    return [string(inst[3:-1]) for inst in instructions
            if opcode(inst) == spv.OpDecorate and len(inst) >= 5
            and inst[2] == spv.DecorationLinkageAttributes and inst[-1] == spv.LinkageTypeImport]


def unmerged_switch(binary):
    """Whether an ``OpSwitch`` lacks the ``OpSelectionMerge`` that structured
    control flow requires right before it."""
    _, instructions = parse(binary)
    previous = None
    for inst in instructions:
        op = opcode(inst)
        if op == spv.OpSwitch and previous != spv.OpSelectionMerge:
            return True
        previous = op
    return False


def nonwritable_bindings(binary):
    """The descriptor bindings of the variables a module decorates NonWritable."""
    _, instructions = parse(binary)
    bindings, readonly = {}, set()
    for inst in instructions:
        if opcode(inst) == spv.OpDecorate and len(inst) >= 3:
            if inst[2] == spv.DecorationBinding and len(inst) >= 4:
                bindings[inst[1]] = inst[3]
            elif inst[2] == spv.DecorationNonWritable:
                readonly.add(inst[1])
    return {bindings[target] for target in readonly if target in bindings}


def without_nonwritable(binary):
    """The module with its variables' NonWritable decorations removed."""
    header, instructions = parse(binary)
    return assemble(header, [inst for inst in instructions
                             if not (opcode(inst) == spv.OpDecorate and len(inst) == 3
                                     and inst[2] == spv.DecorationNonWritable)])
