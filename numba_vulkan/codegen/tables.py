"""Where libclc's constant tables live in the SPIR-V module.

LLVM's SPIR-V backend makes each module-level constant array (libclc's
``LOG_INV_TBL``, ``PIBITS``, ...) a ``Private`` variable with the array as
its initializer, read through ``OpAccessChain`` at indices computed at run
time. ``Private`` memory belongs to each invocation: a driver that cannot
prove the variable is never written may give every invocation its own copy
of it in local memory. GLSL compilers write ``const float t[] = ...``
indexed at run time differently, as a ``Function`` variable stored from the
constant once in the function (glslang), which drivers are used to seeing
and may turn into reads of constant memory. Vulkan offers no other
placement a kernel could declare by itself (``UniformConstant`` is for
images and samplers only).

:func:`place` moves each such table into the entry point, as a ``Function``
variable with the constant as its initializer (``"function"``) or stored
from it at the function's start (``"function_store"``, glslang's form);
``"private"`` (the default, :data:`PLACEMENT`) leaves the module as the
backend wrote it. Which one a GPU reads fastest is for
``benchmarks/bench_variants.py`` (``tables_function``,
``tables_function_store``) to measure.
"""

from numba_vulkan.spirv import binary as spirv
from numba_vulkan.spirv import opcodes as spv

#: The placement :func:`place` uses unless told otherwise.
PLACEMENT = "private"
PLACEMENTS = ("private", "function", "function_store")

_CHAINS = (spv.OpAccessChain, spv.OpInBoundsAccessChain)


def _tables(instructions, body):
    """The ``Private`` variables with initializers that ``body`` (indices of
    the function's instructions) only reads, each with the access chains
    into it; a variable used any other way is left out."""
    tables = {inst[2]: [] for inst in instructions
              if spirv.opcode(inst) == spv.OpVariable and len(inst) == 5
              and inst[3] == spv.StorageClassPrivate}
    chains = {}
    rejected = set()
    for k in body:
        inst = instructions[k]
        op = spirv.opcode(inst)
        if op in _CHAINS and inst[3] in tables:
            tables[inst[3]].append(k)
            chains[inst[2]] = inst[3]
            rejected.update(w for w in inst[4:] if w in tables)
            continue
        if op == spv.OpLoad and (inst[3] in tables or inst[3] in chains):
            continue
        for word in inst[1:]:
            if word in tables:
                rejected.add(word)
            elif word in chains:
                rejected.add(chains[word])
    for inst in instructions:
        # A decorated table stays where the decoration was meant for.
        if spirv.opcode(inst) == spv.OpDecorate and inst[1] in tables:
            rejected.add(inst[1])
    return {var: found for var, found in tables.items() if var not in rejected}


def place(binary, placement=None):
    """``binary`` with its read-only ``Private`` tables placed as
    ``placement`` says (one of :data:`PLACEMENTS`; :data:`PLACEMENT` by
    default). Modules of more than one function are left as they are."""
    placement = PLACEMENT if placement is None else placement
    if placement not in PLACEMENTS:
        raise ValueError(f"unknown table placement {placement!r}; known: {PLACEMENTS}")
    if placement == "private":
        return binary
    header, instructions = spirv.parse(binary)
    starts = [k for k, inst in enumerate(instructions) if spirv.opcode(inst) == spv.OpFunction]
    if len(starts) != 1:
        return binary
    start = starts[0]
    end = next(k for k in range(start, len(instructions))
               if spirv.opcode(instructions[k]) == spv.OpFunctionEnd)
    tables = _tables(instructions, range(start, end))
    if not tables:
        return binary
    bound = header[3]
    pointers = {}  # (storage class, pointee) -> pointer type id
    pointees = {}  # pointer type id -> pointee
    for inst in instructions:
        if spirv.opcode(inst) == spv.OpTypePointer:
            pointers.setdefault((inst[2], inst[3]), inst[1])
            pointees[inst[1]] = inst[3]
    new_types = {}  # Private pointer type id -> [its Function twin's declaration]

    def function_pointer(private_type):
        nonlocal bound
        key = (spv.StorageClassFunction, pointees[private_type])
        if key not in pointers:
            pointers[key] = bound
            new_types[private_type] = [(4 << 16) | spv.OpTypePointer, bound,
                                       spv.StorageClassFunction, pointees[private_type]]
            bound += 1
        return pointers[key]

    variables, stores = [], []
    moved = {}
    for inst in instructions:
        if spirv.opcode(inst) == spv.OpVariable and inst[2] in tables:
            var, initializer = inst[2], inst[4]
            ty = function_pointer(inst[1])
            if placement == "function":
                variables.append([(5 << 16) | spv.OpVariable, ty, var, spv.StorageClassFunction,
                                  initializer])
            else:
                variables.append([(4 << 16) | spv.OpVariable, ty, var, spv.StorageClassFunction])
                stores.append([(3 << 16) | spv.OpStore, var, initializer])
            moved[var] = inst
    for chains in tables.values():
        for k in chains:
            chain = list(instructions[k])
            chain[1] = function_pointer(chain[1])
            instructions[k] = chain
    out = []
    k = 0
    entry_block = next(j for j in range(start, end)
                       if spirv.opcode(instructions[j]) == spv.OpLabel)
    while k < len(instructions):
        inst = instructions[k]
        op = spirv.opcode(inst)
        k += 1
        if op == spv.OpVariable and inst[2] in moved:
            continue
        if op == spv.OpEntryPoint:
            name_end = 3 + next(i for i, w in enumerate(inst[3:]) if w >> 24 == 0) + 1
            inst = inst[:name_end] + [w for w in inst[name_end:] if w not in moved]
            inst[0] = (len(inst) << 16) | spv.OpEntryPoint
        out.append(inst)
        if op == spv.OpTypePointer and inst[1] in new_types:
            out.append(new_types[inst[1]])
        if k - 1 == entry_block:
            # A function's variables come first in its first block.
            while spirv.opcode(instructions[k]) == spv.OpVariable:
                out.append(instructions[k])
                k += 1
            out += variables + stores
    header = list(header)
    header[3] = bound
    return spirv.assemble(header, out)
