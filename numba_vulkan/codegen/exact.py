"""Keep a module's float arithmetic exactly as written.

Vulkan drivers may fuse a multiply and an add into one operation, and
Mesa's compiler also applies algebraic rewrites such as ``a - (a - b) -> b``,
unless an instruction carries the ``NoContraction`` decoration. The CPU does
neither, and libclc's error-free transformations (and the fma emulation in
:mod:`numba_vulkan.codegen.legalize`) depend on every rounding happening as
written. LLVM's SPIR-V backend emits no such decoration, so this pass adds
one for the result of every float arithmetic instruction of the binary.

Drivers may also assume that no value is NaN or infinite and that the sign
of a zero does not matter (NVIDIA's turns Python's ``max`` into its own
min/max instruction, which ignores NaNs), unless the entry point has the
``SignedZeroInfNanPreserve`` execution mode of SPV_KHR_float_controls
(core in SPIR-V 1.4) for the float widths the module uses; this pass adds
it too. Kernels compiled with ``fastmath`` skip both; with a set of
LLVM's fast-math flags (``fastmath={"nnan", "ninf", "nsz"}``), what those
flags give up.
"""

import struct

from numba_vulkan.base import jitoptions
from numba_vulkan.spirv import binary as spirv
from numba_vulkan.spirv import opcodes as spv

#: Float arithmetic: result type at word 1, result id at word 2.
_FLOAT_ARITHMETIC = {spv.OpFNegate, spv.OpFAdd, spv.OpFSub, spv.OpFMul, spv.OpFDiv, spv.OpFRem,
                     spv.OpFMod, spv.OpVectorTimesScalar, spv.OpDot}
#: The types, constants and global variables, the first of which follows
#: the annotations.
_FIRST_DECLARATION = (set(range(spv.OpTypeVoid, spv.OpTypeForwardPointer + 1))
                      | {spv.OpConstantTrue, spv.OpConstantFalse, spv.OpConstant,
                         spv.OpConstantComposite, spv.OpConstantSampler, spv.OpConstantNull,
                         spv.OpSpecConstantTrue, spv.OpSpecConstantFalse, spv.OpSpecConstant,
                         spv.OpSpecConstantComposite, spv.OpSpecConstantOp, spv.OpVariable})


def decorate(binary, operations=True, special_values=True):
    """The module ``binary`` with every float arithmetic result NoContraction
    (with ``operations``), and NaNs, infinities and signed zeros preserved
    (with ``special_values``)."""
    header, instructions = spirv.parse(binary)
    if special_values:
        _preserve_special_values(header, instructions)
    results = [inst[2] for inst in instructions if inst[0] & 0xFFFF in _FLOAT_ARITHMETIC]
    if not results or not operations:
        return spirv.assemble(header, instructions)
    already = {inst[1] for inst in instructions
               if inst[0] & 0xFFFF == spv.OpDecorate and inst[2] == spv.DecorationNoContraction}
    position = next(k for k, inst in enumerate(instructions)
                    if inst[0] & 0xFFFF in _FIRST_DECLARATION)
    added = [((3 << 16) | spv.OpDecorate, result, spv.DecorationNoContraction)
             for result in results if result not in already]
    instructions[position:position] = added
    return spirv.assemble(header, instructions)


def _preserve_special_values(header, instructions):
    widths = {inst[2] for inst in instructions if inst[0] & 0xFFFF == spv.OpTypeFloat}
    if not any(inst[0] & 0xFFFF == spv.OpCapability and inst[1] == spv.CapabilityFloat16
               for inst in instructions):
        # float16 only stored and converted (no Float16 arithmetic): the mode
        # for it would need shaderSignedZeroInfNanPreserveFloat16 for nothing.
        widths.discard(16)
    widths = sorted(widths)
    entries = [inst[2] for inst in instructions if inst[0] & 0xFFFF == spv.OpEntryPoint]
    if not widths or not entries:
        return
    _add_float_controls(header, instructions, spv.CapabilitySignedZeroInfNanPreserve,
                        spv.ExecutionModeSignedZeroInfNanPreserve, entries, widths)


_FLOAT_CONTROLS = b"SPV_KHR_float_controls\0" + bytes(-len(b"SPV_KHR_float_controls\0") % 4)


def _add_float_controls(header, instructions, capability, mode, entries, widths):
    """Declare ``capability`` (of SPV_KHR_float_controls, an extension before
    SPIR-V 1.4) and give each entry point the execution ``mode`` for each
    float width."""
    opcodes = [inst[0] & 0xFFFF for inst in instructions]
    last_capability = max(k for k, op in enumerate(opcodes) if op == spv.OpCapability)
    added = [[(2 << 16) | spv.OpCapability, capability]]
    words = list(struct.unpack(f"<{len(_FLOAT_CONTROLS) // 4}I", _FLOAT_CONTROLS))
    if header[1] < 0x00010400 and not any(
            op == spv.OpExtension and inst[1:] == words for op, inst in zip(opcodes, instructions)):
        added.append([((1 + len(words)) << 16) | spv.OpExtension, *words])
    instructions[last_capability + 1:last_capability + 1] = added
    opcodes = [inst[0] & 0xFFFF for inst in instructions]
    after = max(k for k, op in enumerate(opcodes) if op in (spv.OpEntryPoint, spv.OpExecutionMode))
    modes = [[(4 << 16) | spv.OpExecutionMode, entry, mode, width]
             for entry in entries for width in widths]
    instructions[after + 1:after + 1] = modes


def round_float16_to_nearest(binary):
    """The module ``binary`` asking for float16 arithmetic rounded to nearest,
    ties to even (``RoundingModeRTE 16``), if it computes in float16 (declares
    ``Float16``): Vulkan lets a driver round float16 results either way
    otherwise. For devices with ``shaderRoundingModeRTEFloat16``."""
    header, instructions = spirv.parse(binary)
    entries = [inst[2] for inst in instructions if inst[0] & 0xFFFF == spv.OpEntryPoint]
    if not entries or not any(inst[0] & 0xFFFF == spv.OpCapability
                              and inst[1] == spv.CapabilityFloat16 for inst in instructions):
        return binary
    _add_float_controls(header, instructions, spv.CapabilityRoundingModeRTE,
                        spv.ExecutionModeRoundingModeRTE, entries, [16])
    return spirv.assemble(header, instructions)


_FLOAT_OPCODES = frozenset(("fadd", "fsub", "fmul", "fdiv", "frem", "fneg"))


def fast_math_flags(module):
    """The fast-math flags the kernel's own IR (the IR model of its Numba
    modules linked into one) puts on its float operations (``fastmath``)."""
    flags = set()
    for function in module.functions:
        for inst in function.instructions():
            if inst.opcode in _FLOAT_OPCODES:
                flags.update(jitoptions.FAST_MATH_FLAGS if "fast" in inst.flags
                             else jitoptions.FAST_MATH_FLAGS.intersection(inst.flags))
    return frozenset(flags)


def keeps_operations(flags):
    """Whether a kernel with fast-math ``flags`` has every float operation
    kept as written (NoContraction): unless it allows reassociation, which
    lets the driver rewrite and fuse as it likes. A kernel allowing only
    ``contract`` is fused where it says so (:mod:`numba_vulkan.codegen.contract`)
    and exact elsewhere."""
    return "reassoc" not in flags


def keeps_special_values(flags):
    """Whether a kernel with fast-math ``flags`` needs NaNs, infinities and
    signed zeros preserved: unless it gives up all three."""
    return not {"nnan", "ninf", "nsz"} <= flags


def uses_driver_functions(flags):
    """Whether a kernel with fast-math ``flags`` takes the driver's float32
    ``sin``, ``exp``, ``log``, ``pow``, ... (GLSL.std.450's, with the
    driver's accuracy): where it allows approximate functions."""
    return "afn" in flags


def rounds_correctly(flags):
    """Whether a kernel with fast-math ``flags`` divides and takes square
    roots correctly rounded: unless it allows reciprocals or approximate
    functions."""
    return not flags & {"arcp", "afn"}
