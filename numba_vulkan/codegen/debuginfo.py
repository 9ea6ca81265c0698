"""Drop a module's debug instructions.

They are optional, and they hold what differs between processes and
machines: Numba's per-process function numbers and module names. Without
them, two compiles of one kernel (the JIT's and the AOT build's, or two
builds') give the same bytes.
"""

from numba_vulkan.spirv import binary as spirv

#: OpSourceContinued, OpSource, OpSourceExtension, OpName, OpMemberName,
#: OpString, OpLine, OpNoLine, OpModuleProcessed.
_DEBUG_OPCODES = frozenset({2, 3, 4, 5, 6, 7, 8, 317, 330})


def strip(binary):
    """The SPIR-V module ``binary`` without its debug instructions (names,
    sources, lines)."""
    header, instructions = spirv.parse(binary)
    return spirv.assemble(header, [inst for inst in instructions
                                   if spirv.opcode(inst) not in _DEBUG_OPCODES])
