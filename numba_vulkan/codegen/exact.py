"""Keep a module's float arithmetic exactly as written.

Vulkan drivers may fuse a multiply and an add into one operation, and
Mesa's compiler also applies algebraic rewrites such as ``a - (a - b) -> b``,
unless an instruction carries the ``NoContraction`` decoration. The CPU does
neither, and libclc's error-free transformations (and the fma emulation in
:mod:`numba_vulkan.codegen.legalize`) depend on every rounding happening as
written. LLVM's SPIR-V backend emits no such decoration, so this pass adds
one for the result of every float arithmetic instruction of the binary.
Kernels compiled with ``fastmath`` skip it.
"""

import re
import struct

from numba_vulkan import spirv

_OP_DECORATE = 71
_NO_CONTRACTION = 42
#: OpFNegate, OpFAdd, OpFSub, OpFMul, OpFDiv, OpFRem, OpFMod,
#: OpVectorTimesScalar, OpDot: result type at word 1, result id at word 2.
_FLOAT_ARITHMETIC = {127, 129, 131, 133, 136, 140, 141, 142, 148}
#: OpTypeVoid .. OpTypeForwardPointer, OpTypeCooperativeMatrix..: the first
#: declaration after the annotations.
_FIRST_DECLARATION = set(range(19, 40)) | {41, 42, 43, 44, 45, 46, 48, 49, 50, 51, 52, 59}


def decorate(binary):
    """The module ``binary`` with every float arithmetic result NoContraction."""
    words = spirv.words(binary)
    header, body = list(words[:5]), words[5:]
    instructions, i = [], 0
    while i < len(body):
        count = body[i] >> 16
        instructions.append(body[i:i + count])
        i += count
    results = [inst[2] for inst in instructions if inst[0] & 0xFFFF in _FLOAT_ARITHMETIC]
    if not results:
        return binary
    already = {inst[1] for inst in instructions
               if inst[0] & 0xFFFF == _OP_DECORATE and inst[2] == _NO_CONTRACTION}
    position = next(k for k, inst in enumerate(instructions)
                    if inst[0] & 0xFFFF in _FIRST_DECLARATION)
    added = [((3 << 16) | _OP_DECORATE, result, _NO_CONTRACTION)
             for result in results if result not in already]
    instructions[position:position] = added
    out = header + [w for inst in instructions for w in inst]
    return struct.pack(f"<{len(out)}I", *out)


_CONTRACT = re.compile(r"= (?:fadd|fsub|fmul|fdiv|frem|fneg) (?:[a-z]+ )*(?:fast|contract) ")


def contraction_allowed(sources):
    """Whether the kernel's own IR lets float operations be fused (``fastmath``)."""
    return any(_CONTRACT.search(text) for text in sources)
