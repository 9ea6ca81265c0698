"""Drop a module's debug instructions.

They are optional, and they hold what differs between processes and
machines: Numba's per-process function numbers and module names. Without
them, two compiles of one kernel (the JIT's and the AOT build's, or two
builds') give the same bytes.
"""

from numba_vulkan.spirv import binary as spirv
from numba_vulkan.spirv import opcodes as spv

_DEBUG_OPCODES = frozenset({spv.OpSourceContinued, spv.OpSource, spv.OpSourceExtension,
                            spv.OpName, spv.OpMemberName, spv.OpString, spv.OpLine,
                            spv.OpNoLine, spv.OpModuleProcessed})


def strip(binary):
    """The SPIR-V module ``binary`` without its debug instructions (names,
    sources, lines)."""
    header, instructions = spirv.parse(binary)
    return spirv.assemble(header, [inst for inst in instructions
                                   if spirv.opcode(inst) not in _DEBUG_OPCODES])
