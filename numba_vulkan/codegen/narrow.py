"""Narrow float64 and int64 to 32 bits, for devices without them.

A target without ``shaderFloat64`` (or ``shaderInt64``) cannot run a module
that declares the ``Float64`` (``Int64``) capability. Such a target's
kernels are compiled as written and then narrowed here, on the IR model
(:mod:`numba_vulkan.llvmir.ir`): every ``double`` becomes ``float`` (with
its constants rounded to float, and ``.f64`` intrinsics their ``.f32``
twins) and every ``i64`` becomes ``i32`` (with constants wrapped, and the
64-bit limits mapped to the 32-bit ones). Arrays of narrowed dtypes are
stored narrowed (see :mod:`numba_vulkan.base.abi`), and the compiler sizes their
elements by what is stored.

float64 is narrowed once Numba's modules are linked into one, before
libclc is linked, so that math calls pick the float32 functions. int64 is
narrowed there too, and again in the final IR (:func:`final`), where the
logical addressing rewrite has added 64-bit offset arithmetic of its own.
Results are those of float32 and int32 arithmetic: values beyond their
range or precision are not kept.
"""

import struct

from numba_vulkan.llvmir import ir, types
from numba_vulkan.base.errors import UnsupportedError

#: Numba's C helpers for doubles whose float twin takes the same arguments.
_DOUBLE_HELPERS = {"@numba_cpow": "@numba_cpowf"}
_SHIFTS = ("shl", "lshr", "ashr")
#: Casts that narrowing may leave between a type and itself.
_WIDTH_CASTS = ("sext", "zext", "trunc", "fpext", "fptrunc")
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
#: Where each memory access names its alignment: the operand whose type it
#: accesses (None: the instruction's own type).
_ACCESSES = {"load": None, "alloca": None, "store": 0, "atomicrmw": 1, "cmpxchg": 1}


def _is_float_literal(value):
    """Whether ``value`` is a float constant as LLVM writes a double:
    ``1.500000e+00`` or the 16 hex digits of its bits."""
    body = value[1:] if value.startswith("-") else value
    if body[:2] == "0x":
        return len(body) == 18 and all(c in _HEX_DIGITS for c in body[2:])
    mantissa, _, exponent = body.partition("e")
    whole, dot, fraction = mantissa.partition(".")
    return (bool(dot) and whole.isdigit() and fraction.isdigit()
            and (not exponent or exponent.lstrip("+-").isdigit()))


def _round_to_float(literal):
    negative = literal.startswith("-")
    body = literal[1:] if negative else literal
    if body.startswith(("0x", "0X")):
        value = struct.unpack(">d", bytes.fromhex(body[2:]))[0]
    else:
        value = float(body)
    value = -value if negative else value
    try:
        single = struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        single = float("inf") if value > 0 else float("-inf")
    return "0x" + struct.pack(">d", single).hex().upper()


def _int32(value):
    """An i64 constant as the i32 constant that stands for it."""
    if value >= 2 ** 63 - 1:
        return 2 ** 31 - 1
    if value <= -2 ** 63:
        return -2 ** 31
    value &= 0xFFFFFFFF
    return value - 2 ** 32 if value >= 2 ** 31 else value


def _integer(value):
    """The integer a literal stands for, or None."""
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return None


def _realign(tail, old, new):
    """``tail`` with its ``align old`` made ``align new``."""
    parts = tail.split(",")
    return ",".join(f" align {new}" if part.strip() == f"align {old}" else part
                    for part in parts)


class _Narrower:
    """Narrows one module in place."""

    def __init__(self, double, int64):
        self.double, self.int64 = double, int64
        self.words = {}
        if double:
            self.words["double"] = "float"
        if int64:
            self.words["i64"] = "i32"

    def type(self, ty):
        return ir.map_words(ty, self.words) if ty else ty

    def rename(self, name):
        """A function's name with its ``.f64`` (``.i64``) parts made 32-bit."""
        if self.double and name in _DOUBLE_HELPERS:
            return _DOUBLE_HELPERS[name]
        parts = name.split(".")
        for k in range(1, len(parts)):
            if self.double and parts[k] == "f64":
                parts[k] = "f32"
            elif self.int64 and parts[k] == "i64":
                parts[k] = "i32"
        return ".".join(parts)

    def value(self, ty, value):
        """The constant ``value`` of type ``ty`` (before narrowing), narrowed."""
        if isinstance(value, ir.Instruction):
            self.instruction(value)
            return value
        if value.startswith("@"):
            return self.renames.get(value, value)
        parts = ir.elements(value)
        if parts is not None:
            for part in parts:
                part.value = self.value(part.type, part.value)
                part.type = self.type(part.type)
            return ir.aggregate(value, parts)
        if self.double and _is_float_literal(value):
            return _round_to_float(value)
        number = _integer(value)
        if self.int64 and number is not None and ty == "i64":
            return str(_int32(number))
        return value

    def instruction(self, inst):
        if inst.opcode == "bitcast" and self.int64 and not self.double and \
                {inst.operands[0].type, inst.type} == {"double", "i64"}:
            raise UnsupportedError(
                "narrowing int64 needs float64 narrowed too: the kernel uses the bits of a "
                f"double as an int64 (float64 math does): {inst}")
        first = inst.operands[0].type if inst.operands else None
        if self.int64 and inst.opcode in _SHIFTS and first == "i64":
            amount = _integer(inst.operands[-1].value)
            if amount is not None and amount >= 32:
                raise UnsupportedError(
                    f"a 64-bit shift by {amount} cannot be narrowed to 32 bits: {inst}")
        if inst.opcode == "call":
            inst.callee = self.renames.get(inst.callee, inst.callee)
        accessed = None
        if inst.opcode in _ACCESSES:
            accessed = inst.type if _ACCESSES[inst.opcode] is None else \
                inst.operands[_ACCESSES[inst.opcode]].type
        for operand in inst.operands:
            # An operand without a type has the type of the instruction's
            # result (a phi's values) or of its first operand (a binary
            # operation's second).
            implied = operand.type or (inst.type if inst.opcode == "phi" else first)
            operand.value = self.value(implied, operand.value)
            operand.type = self.type(operand.type)
            operand.attrs = self.type(operand.attrs)
        inst.type = self.type(inst.type)
        inst.tail = self.type(inst.tail)
        if inst.opcode in _ACCESSES and accessed is not None:
            # LLVM gave an access without an alignment its type's; the
            # narrowed type's may be smaller.
            now = inst.type if _ACCESSES[inst.opcode] is None else \
                inst.operands[_ACCESSES[inst.opcode]].type
            try:
                if inst.opcode == "alloca":
                    before = self.before.preferred_align(accessed)
                    after = self.after.preferred_align(now)
                else:
                    before = self.before.size_align(accessed)[1]
                    after = self.after.size_align(now)[1]
            except types.UnknownType:
                before = after = None
            if before is not None and after < before:
                inst.tail = _realign(inst.tail, before, after)
        if inst.opcode in _WIDTH_CASTS and inst.operands[0].type == inst.type:
            inst.opcode, inst.flags = "bitcast", []

    def module(self, module):
        self.renames = {}
        named = module.named_types()
        self.before = types.Layout(named)
        self.after = types.Layout({name: self.type(ty) for name, ty in named.items()})
        declared = {f.name for f in module.functions}
        for function in module.functions:
            name = self.rename(function.name)
            if name != function.name:
                self.renames[function.name] = name
                if name in declared and function.blocks is None:
                    # The 32-bit twin is declared already (llvm.fabs.f32
                    # next to llvm.fabs.f64): once is enough.
                    module.items.remove(function)
                    continue
                function.header = function.header.replace(f"{function.name}(", f"{name}(", 1)
            function.header = self.type(function.header)
        for k, item in enumerate(module.items):
            if isinstance(item, ir.Global):
                item.init = None if item.init is None else self.value(item.type, item.init)
                item.type = self.type(item.type)
            elif isinstance(item, ir.Function):
                for inst in item.instructions():
                    self.instruction(inst)
            elif item.startswith("%") and " = type " in item:
                module.items[k] = self.type(item)


def module(model, narrowed):
    """Narrow the IR model ``model`` (Numba's modules linked into one) in
    place for the narrowing mode ``narrowed``."""
    double, int64 = "float64" in narrowed, "int64" in narrowed
    if double or int64:
        _Narrower(double, int64).module(model)


def final(model, narrowed):
    """Narrow the 64-bit integers that codegen itself added to the final IR
    model ``model``, in place."""
    if "int64" not in narrowed:
        return
    _split_wide_multiplies(model)
    _Narrower(False, True).module(model)


def _split_wide_multiplies(model):
    """Compute the high half of 32 x 32 -> 64-bit products in 32-bit pieces.

    libclc's float32 argument reduction multiplies two 32-bit values as
    64-bit ones and keeps both halves of the product; the low half survives
    narrowing as it is, the high half is built from 16-bit partial products.
    """
    widened, products = {}, {}
    for function in model.functions:
        for inst in function.instructions():
            ops = inst.operands
            if inst.opcode == "zext" and ops[0].type == "i32" and inst.type == "i64":
                widened[inst.name] = ops[0].value
            elif inst.opcode == "mul" and ops[0].type == "i64":
                halves = [_as_int32_operand(o.value, widened) for o in ops]
                if None not in halves:
                    products[inst.name] = halves
    counter = 0
    for function in model.functions:
        for block in function.blocks or ():
            out = []
            for inst in block.instructions:
                ops = inst.operands
                if inst.opcode == "lshr" and ops[0].type == "i64" and ops[1].value == "32" \
                        and ops[0].value in products:
                    counter += 1
                    out += _high_half(inst.name, f"%nv.mulhi.{counter}", *products[ops[0].value])
                else:
                    out.append(inst)
            block.instructions = out


def _as_int32_operand(value, widened):
    if value in widened:
        return widened[value]
    number = _integer(value)
    if number is not None and 0 <= number < 2 ** 32:
        return str(_int32(number))
    return None


def _high_half(result, stem, x, y):
    lines, counter = [], [0]

    def emit(expression, name=None):
        if name is None:
            counter[0] += 1
            name = f"{stem}.{counter[0]}"
        lines.append(ir.instruction(f"{name} = {expression}"))
        return name

    a, b = emit(f"and i32 {x}, 65535"), emit(f"lshr i32 {x}, 16")
    c, d = emit(f"and i32 {y}, 65535"), emit(f"lshr i32 {y}, 16")
    ac, ad = emit(f"mul i32 {a}, {c}"), emit(f"mul i32 {a}, {d}")
    bc, bd = emit(f"mul i32 {b}, {c}"), emit(f"mul i32 {b}, {d}")
    middle = emit(f"add i32 {emit(f'lshr i32 {ac}, 16')}, {emit(f'and i32 {ad}, 65535')}")
    middle = emit(f"add i32 {middle}, {emit(f'and i32 {bc}, 65535')}")
    high = emit(f"add i32 {bd}, {emit(f'lshr i32 {ad}, 16')}")
    high = emit(f"add i32 {high}, {emit(f'lshr i32 {bc}, 16')}")
    emit(f"add i32 {high}, {emit(f'lshr i32 {middle}, 16')}", result)
    return lines
