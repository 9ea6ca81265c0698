"""Reading facts out of a SPIR-V binary without any external tool."""

import struct

MAGIC = 0x07230203

#: Capability enumerants this package may meet, by number.
CAPABILITIES = {
    1: "Shader", 5: "Linkage", 9: "Float16", 10: "Float64", 11: "Int64",
    12: "Int64Atomics", 22: "Int16", 39: "Int8", 4433: "StorageBuffer16BitAccess",
    4434: "UniformAndStorageBuffer16BitAccess", 4435: "StoragePushConstant16",
    4448: "StorageBuffer8BitAccess", 4449: "UniformAndStorageBuffer8BitAccess",
    4450: "StoragePushConstant8", 6033: "AtomicFloat32AddEXT",
    6034: "AtomicFloat64AddEXT", 4441: "VariablePointersStorageBuffer",
    4442: "VariablePointers", 5612: "AtomicFloat32MinMaxEXT",
    4464: "DenormPreserve", 4465: "DenormFlushToZero", 4466: "SignedZeroInfNanPreserve",
    4467: "RoundingModeRTE",
    61: "GroupNonUniform", 62: "GroupNonUniformVote", 63: "GroupNonUniformArithmetic",
    64: "GroupNonUniformBallot", 65: "GroupNonUniformShuffle",
    66: "GroupNonUniformShuffleRelative",
}

#: SPIR-V opcodes (the low 16 bits of an instruction's first word) the
#: package's passes and checks read or write, named as the specification does.
OP_NAME = 5
OP_EXTENSION = 10
OP_ENTRY_POINT = 15
OP_EXECUTION_MODE = 16
OP_CAPABILITY = 17
OP_TYPE_VOID = 19
OP_TYPE_BOOL = 20
OP_TYPE_INT = 21
OP_TYPE_FLOAT = 22
OP_TYPE_VECTOR = 23
OP_TYPE_ARRAY = 28
OP_TYPE_RUNTIME_ARRAY = 29
OP_TYPE_STRUCT = 30
OP_TYPE_POINTER = 32
OP_CONSTANT = 43
OP_CONSTANT_NULL = 46
OP_FUNCTION = 54
OP_FUNCTION_END = 56
OP_FUNCTION_CALL = 57
OP_VARIABLE = 59
OP_LOAD = 61
OP_STORE = 62
OP_DECORATE = 71
OP_MEMBER_DECORATE = 72
OP_COMPOSITE_INSERT = 82
OP_COPY_OBJECT = 83
OP_SELECT = 169
OP_CONTROL_BARRIER = 224
OP_MEMORY_BARRIER = 225
OP_PHI = 245
OP_SELECTION_MERGE = 247
OP_SWITCH = 251
OP_EXECUTION_MODE_ID = 331


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
    return [CAPABILITIES.get(inst[1], str(inst[1])) for inst in instructions
            if opcode(inst) == OP_CAPABILITY]


_LINKAGE_ATTRIBUTES = 41
_IMPORT = 1


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
            if opcode(inst) == OP_DECORATE and len(inst) >= 5
            and inst[2] == _LINKAGE_ATTRIBUTES and inst[-1] == _IMPORT]


def unmerged_switch(binary):
    """Whether an ``OpSwitch`` lacks the ``OpSelectionMerge`` that structured
    control flow requires right before it."""
    _, instructions = parse(binary)
    previous = None
    for inst in instructions:
        op = opcode(inst)
        if op == OP_SWITCH and previous != OP_SELECTION_MERGE:
            return True
        previous = op
    return False


#: Decoration enumerants of storage-buffer variables.
DECORATION_NON_WRITABLE = 24
DECORATION_BINDING = 33


def nonwritable_bindings(binary):
    """The descriptor bindings of the variables a module decorates NonWritable."""
    _, instructions = parse(binary)
    bindings, readonly = {}, set()
    for inst in instructions:
        if opcode(inst) == OP_DECORATE and len(inst) >= 3:
            if inst[2] == DECORATION_BINDING and len(inst) >= 4:
                bindings[inst[1]] = inst[3]
            elif inst[2] == DECORATION_NON_WRITABLE:
                readonly.add(inst[1])
    return {bindings[target] for target in readonly if target in bindings}


def without_nonwritable(binary):
    """The module with its variables' NonWritable decorations removed."""
    header, instructions = parse(binary)
    return assemble(header, [inst for inst in instructions
                             if not (opcode(inst) == OP_DECORATE and len(inst) == 3
                                     and inst[2] == DECORATION_NON_WRITABLE)])
