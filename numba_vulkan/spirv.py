"""Reading facts out of a SPIR-V binary without any external tool."""

import struct

MAGIC = 0x07230203

#: Capability enumerants this package may meet, by number.
CAPABILITIES = {
    1: "Shader", 5: "Linkage", 9: "Float16", 10: "Float64", 11: "Int64",
    12: "Int64Atomics", 22: "Int16", 39: "Int8", 4433: "StorageBuffer16BitAccess",
    4434: "UniformAndStorageBuffer16BitAccess", 4435: "StoragePushConstant16",
    4448: "StorageBuffer8BitAccess", 4449: "UniformAndStorageBuffer8BitAccess",
    4450: "StoragePushConstant8", 5569: "AtomicFloat32AddEXT",
    5570: "AtomicFloat64AddEXT", 4441: "VariablePointersStorageBuffer",
    4442: "VariablePointers", 6016: "AtomicFloat32MinMaxEXT",
}

_OP_CAPABILITY = 17


def words(binary):
    """The module as 32-bit words, after checking its header."""
    if len(binary) < 20 or len(binary) % 4:
        raise ValueError("not a SPIR-V module: bad size")
    (magic,) = struct.unpack_from("<I", binary)
    if magic != MAGIC:
        raise ValueError("not a SPIR-V module: bad magic number")
    return struct.unpack(f"<{len(binary) // 4}I", binary)


def capabilities(binary):
    """Names of the capabilities a module declares, in order."""
    w = words(binary)
    out, i = [], 5
    while i < len(w):
        count, opcode = w[i] >> 16, w[i] & 0xFFFF
        if count == 0:
            raise ValueError("not a SPIR-V module: zero-length instruction")
        if opcode == _OP_CAPABILITY:
            out.append(CAPABILITIES.get(w[i + 1], str(w[i + 1])))
        i += count
    return out
