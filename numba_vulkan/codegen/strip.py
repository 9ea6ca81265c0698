"""Remove what LLVM's SPIR-V backend leaves in a module without use.

The backend turns the name given to each buffer binding into an 8-bit
string held in an unused Function-storage variable, which makes every module
declare the ``Int8`` capability; a device without ``shaderInt8`` would reject
it. This pass deletes unused Function variables, then the constants and
types nothing refers to any more, then ``Int8`` if no 8-bit type is left.

Whether an id is used is decided by scanning the words of every other
instruction, less those known to be literals. A literal this misses and that
happens to equal the id counts as a use: that can only keep something, never
remove something in use.
"""

from numba_vulkan.spirv import binary as spirv
from numba_vulkan.spirv import opcodes as spv

#: Declarations that can go when nothing refers to them: result id at word 1.
_REMOVABLE_TYPES = {spv.OpTypeInt, spv.OpTypeArray, spv.OpTypePointer}
#: Constants: result type at word 1, result id at word 2.
_REMOVABLE_CONSTANTS = {spv.OpConstantTrue, spv.OpConstantFalse, spv.OpConstant,
                        spv.OpConstantComposite, spv.OpConstantNull}

def _result_id(inst):
    opcode = inst[0] & 0xFFFF
    if opcode in _REMOVABLE_TYPES:
        return inst[1]
    if opcode in _REMOVABLE_CONSTANTS or opcode == spv.OpVariable:
        return inst[2]
    return None


#: Instructions whose operands are all literals (or refer to nothing this
#: pass may remove).
_NO_ID_OPERANDS = {spv.OpSource, spv.OpName, spv.OpMemberName, spv.OpExtension,
                   spv.OpExtInstImport, spv.OpMemoryModel, spv.OpEntryPoint, spv.OpCapability,
                   spv.OpDecorate, spv.OpMemberDecorate}
#: Instructions with literals from this word on.
_LITERALS_FROM = {spv.OpExecutionMode: 2, spv.OpTypeInt: 2, spv.OpTypeFloat: 2, spv.OpConstant: 3}

def _uses(instructions, skip):
    counts = {}
    for k, inst in enumerate(instructions):
        opcode = inst[0] & 0xFFFF
        if k in skip or opcode in _NO_ID_OPERANDS:
            continue
        own = _result_id(inst)
        for word in inst[1:_LITERALS_FROM.get(opcode, len(inst))]:
            if word != own:
                counts[word] = counts.get(word, 0) + 1
    return counts


def strip(binary):
    """The module without unused Function variables, their constants and
    types, and without ``Int8`` where no 8-bit integer type remains."""
    header, instructions = spirv.parse(binary)
    removed = set()
    changed = True
    while changed:
        changed = False
        uses = _uses(instructions, removed)
        for k, inst in enumerate(instructions):
            if k in removed:
                continue
            opcode = inst[0] & 0xFFFF
            rid = _result_id(inst)
            if rid is None or uses.get(rid):
                continue
            if opcode == spv.OpVariable and inst[3] != spv.StorageClassFunction:
                continue
            removed.add(k)
            changed = True
    gone = {_result_id(instructions[k]) for k in removed}
    kept = [inst for k, inst in enumerate(instructions)
            if k not in removed and not (
                (inst[0] & 0xFFFF) in (spv.OpName, spv.OpDecorate) and inst[1] in gone)]
    if not any((i[0] & 0xFFFF) == spv.OpTypeInt and i[2] == 8 for i in kept):
        kept = [i for i in kept
                if not ((i[0] & 0xFFFF) == spv.OpCapability and i[1] == spv.CapabilityInt8)]
    return spirv.assemble(header, kept)
