"""Storage buffers a kernel never writes, decorated NonWritable.

A driver may read memory it knows the shader does not write through a
faster path: on an NVIDIA H200 the tiled matrix product took 0.96 of its
time with its two input arrays so decorated, the transpose 0.74 and the 2-d
convolution 0.91 (``benchmarks/bench_variants.py --variants base,writable``
measures it without). Restrict, tried beside it, gained nothing more.

Such a path need not see writes made through another binding during the
same dispatch, which matters where one array is passed for two arguments,
one read and one written. The runtime therefore checks every launch:
where a buffer bound NonWritable is also bound at another binding, it runs
the module with these decorations removed
(:class:`numba_vulkan.runtime.pipeline.Pipeline`).
"""

from numba_vulkan.spirv import modulecheck
from numba_vulkan.spirv import binary as spirv
from numba_vulkan.spirv import opcodes as spv


def decorate(binary):
    """``binary`` with NonWritable on each storage-buffer variable that
    :func:`numba_vulkan.spirv.modulecheck.written_bindings` finds no write to."""
    written = modulecheck.written_bindings(binary)
    header, instructions = spirv.parse(binary)
    bindings, decorated, first = {}, set(), None
    for k, inst in enumerate(instructions):
        if spirv.opcode(inst) == spv.OpDecorate and len(inst) >= 3:
            first = k if first is None else first
            if inst[2] == spv.DecorationBinding and len(inst) >= 4:
                bindings[inst[1]] = inst[3]
            elif inst[2] == spv.DecorationNonWritable:
                decorated.add(inst[1])
    readonly = [inst[2] for inst in instructions
                if spirv.opcode(inst) == spv.OpVariable and len(inst) >= 4
                and inst[3] == spv.StorageClassStorageBuffer and inst[2] in bindings
                and bindings[inst[2]] not in written and inst[2] not in decorated]
    if not readonly:
        return binary
    annotations = [[(3 << 16) | spv.OpDecorate, variable, spv.DecorationNonWritable]
                   for variable in readonly]
    return spirv.assemble(header, instructions[:first] + annotations + instructions[first:])
