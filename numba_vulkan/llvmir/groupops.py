"""Subgroup operations: placeholder calls in LLVM IR, SPIR-V instructions in the module.

LLVM 22's SPIR-V backend lowers OpenCL's ``__spirv_GroupNonUniform*``
built-ins only for OpenCL, and for Vulkan offers a few HLSL wave intrinsics
(no relative shuffles, no bitwise reductions, no scans). So the compiler
calls one declared placeholder function per operation and type,
``nv.group.<opcode>.<group operation>.<types>`` (:func:`call`), whose first
argument is the scope (Subgroup) and whose other arguments are the
instruction's operands in order. The backend emits each as an
``OpFunctionCall`` of an imported function; :func:`lower` turns every such
call into the ``OpGroupNonUniform*`` instruction (or, for ``syncwarp``, the
``OpControlBarrier``) it names, drops the placeholders and declares the
capabilities the instructions need. A plain ``OpControlBarrier`` (of
Workgroup scope, :mod:`numba_vulkan.codegen.barriers`) needs none.

The placeholders are ``convergent``: LLVM must not move a call into or out
of a branch, which would change the invocations taking part.
"""

import re

from llvmlite import ir

from numba_vulkan.spirv import binary as spirv

#: Name prefix of the placeholder functions.
PREFIX = "nv.group."
#: Name prefix of placeholders for instructions without a scope, which LLVM
#: must not see as its own intrinsics (it merges two 32-bit
#: ``llvm.bitreverse`` into a 64-bit one, which Vulkan does not allow).
PLAIN = "nv.op."

#: SPIR-V's Subgroup scope, the first argument of every placeholder.
SUBGROUP = 3

#: SPIR-V opcodes of the instructions the compiler emits.
ALL, ANY, ALL_EQUAL, BROADCAST, BALLOT = 334, 335, 336, 337, 339
SHUFFLE, SHUFFLE_XOR, SHUFFLE_UP, SHUFFLE_DOWN = 345, 346, 347, 348
IADD, FADD, SMIN, UMIN, FMIN, SMAX, UMAX, FMAX = 349, 350, 353, 354, 355, 356, 357, 358
BITWISE_AND, BITWISE_OR, BITWISE_XOR = 359, 360, 361
CONTROL_BARRIER = 224
BIT_REVERSE, BIT_COUNT = 204, 205

#: SPIR-V group operations of the arithmetic instructions.
REDUCE, INCLUSIVE_SCAN, EXCLUSIVE_SCAN = 0, 1, 2

#: The capability each instruction needs besides GroupNonUniform, by name
#: (``spirv.CAPABILITIES`` numbers them).
_GROUP_NON_UNIFORM = 61
_CAPABILITY_OF = {
    **{op: 62 for op in (ALL, ANY, ALL_EQUAL)},
    **{op: 64 for op in (BROADCAST, BALLOT)},
    SHUFFLE: 65, SHUFFLE_XOR: 65, SHUFFLE_UP: 66, SHUFFLE_DOWN: 66,
    **{op: 63 for op in range(IADD, BITWISE_XOR + 1)},
}

_CAPABILITY_LINKAGE = 5
_DECORATION_LINKAGE = 41

_UNSAFE = re.compile(r"[^A-Za-z0-9]+")


def _declare(builder, name, restype, argtypes, attributes):
    try:
        return builder.module.get_global(name)
    except KeyError:
        fn = ir.Function(builder.module, ir.FunctionType(restype, argtypes), name)
        for attribute in attributes:
            fn.attributes.add(attribute)
        if not isinstance(restype, ir.VoidType):
            fn.attributes.add("readnone")
        return fn


def _suffix(types):
    return "_".join(_UNSAFE.sub("", str(t)) for t in types)


def instruction(builder, opcode, restype, args):
    """Emit the placeholder call of SPIR-V instruction ``opcode`` with operands ``args``."""
    name = f"{PLAIN}{opcode}.x.{_suffix([restype, *[a.type for a in args]])}"
    fn = _declare(builder, name, restype, [a.type for a in args], ("nounwind",))
    return builder.call(fn, args)


def call(builder, opcode, restype, args, operation=None):
    """Emit the placeholder call of SPIR-V instruction ``opcode`` at Subgroup scope.

    Args:
        builder: The llvmlite IR builder.
        opcode: The SPIR-V opcode.
        restype: The LLVM result type (``ir.VoidType()`` for none).
        args: The instruction's operands after the scope, as LLVM values.
        operation: The group operation literal (``REDUCE``, ...) of an
            arithmetic instruction, or None.

    Returns:
        The call's value.
    """
    scope = ir.Constant(ir.IntType(32), SUBGROUP)
    argtypes = [scope.type] + [a.type for a in args]
    name = (f"{PREFIX}{opcode}.{'x' if operation is None else operation}."
            f"{_suffix([restype, *argtypes])}")
    fn = _declare(builder, name, restype, argtypes, ("convergent", "nounwind"))
    return builder.call(fn, [scope, *args])


def _placeholders(instructions):
    found = {}
    for inst in instructions:
        if (inst[0] & 0xFFFF) == spirv.OP_NAME:
            name = spirv.string(inst[2:])
            for prefix in (PREFIX, PLAIN):
                if name.startswith(prefix):
                    opcode, operation = name[len(prefix):].split(".")[:2]
                    found[inst[1]] = (int(opcode), None if operation == "x" else int(operation),
                                      prefix == PREFIX)
    return found


def lower(binary):
    """The module with every placeholder call replaced by its instruction."""
    header, instructions = spirv.parse(binary)
    placeholders = _placeholders(instructions)
    if not placeholders:
        return binary
    void = {inst[1] for inst in instructions if (inst[0] & 0xFFFF) == spirv.OP_TYPE_VOID}
    needed = set()
    out, inside = [], False
    for inst in instructions:
        opcode = inst[0] & 0xFFFF
        if opcode == spirv.OP_FUNCTION and inst[2] in placeholders:
            inside = True
        if inside:
            inside = opcode != spirv.OP_FUNCTION_END
            continue
        if opcode in (spirv.OP_NAME, spirv.OP_DECORATE) and inst[1] in placeholders:
            continue
        if opcode == spirv.OP_FUNCTION_CALL and inst[3] in placeholders:
            op, operation, subgroup = placeholders[inst[3]]
            literal = [] if operation is None else [operation]
            # The scope (of a group instruction) comes before the literal.
            operands = inst[4:5] + literal + inst[5:]
            words = operands if inst[1] in void else [inst[1], inst[2], *operands]
            inst = [((1 + len(words)) << 16) | op, *words]
            if op in _CAPABILITY_OF or (op == CONTROL_BARRIER and subgroup):
                needed.add(_CAPABILITY_OF.get(op, _GROUP_NON_UNIFORM))
        out.append(inst)
    if not any((i[0] & 0xFFFF) == spirv.OP_DECORATE and i[2] == _DECORATION_LINKAGE for i in out):
        out = [i for i in out
               if not ((i[0] & 0xFFFF) == spirv.OP_CAPABILITY and i[1] == _CAPABILITY_LINKAGE)]
    declared = {i[1] for i in out if (i[0] & 0xFFFF) == spirv.OP_CAPABILITY}
    added = [[(2 << 16) | spirv.OP_CAPABILITY, c] for c in sorted(needed - declared)]
    return spirv.assemble(header, added + out)

