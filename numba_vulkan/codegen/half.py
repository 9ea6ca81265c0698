"""float16 on targets without float16 arithmetic, and the 16-bit storage capability.

A device without ``shaderFloat16`` cannot compute in float16, but with
``storageBuffer16BitAccess`` it can load and store float16 elements of
storage buffers and convert them to and from float32. :func:`emulate`
rewrites a module's float16 that way, on the IR model
(:mod:`numba_vulkan.llvmir.ir`): every ``half`` value becomes a ``float``,
a buffer load of a ``half`` is widened at once and a store narrowed just
before it, and each operation whose float16 result could differ from the
float32 one (``fadd``, ``fsub``, ``fmul``, ``fdiv``, ``frem``, ``sqrt``,
``fma``, conversions into float16) is computed in float32 and rounded to
a float16 value in integer arithmetic. That is the value a float16
operation gives for ``+ - * /`` and ``sqrt``: float32's 24 bits are more
than twice float16's 11 plus 2, so rounding twice is rounding once. ``fma``
may differ in the last bit in rare cases. Workgroup and private arrays of
float16 become float32 arrays holding float16 values.

:func:`native` keeps a target with float16 arithmetic from depending on
the driver's rounding: Vulkan lets a driver round float16 results and
conversions as it likes (NVIDIA's float16 quotient is an approximation).
Conversions from float32 are rounded in integer arithmetic first, so that
the driver converts float16 values only; division, remainders and square
roots are computed in float32 and so rounded; additions, subtractions and
products too, unless the module asks for rounding to nearest
(``RoundingModeRTE``, :func:`numba_vulkan.codegen.exact.round_float16_to_nearest`).

:func:`storage_capabilities` declares ``StorageBuffer16BitAccess`` in an
emitted module whose storage buffers hold 16-bit types, and
``StorageBuffer8BitAccess`` in one whose storage buffers hold 8-bit types
(int8, uint8 and bool arrays, records with such fields): Vulkan requires
them for those buffers, and LLVM's backend declares only
``Float16``/``Int16``/``Int8``. For a target without float16 arithmetic it
drops the ``Float16`` capability the backend declared for the ``half``
type that buffers still use.
"""

import re
import struct

from numba_vulkan.spirv import binary as spirv
from numba_vulkan.spirv import opcodes as spv
from numba_vulkan.llvmir import ir
from numba_vulkan.base.errors import UnsupportedError

#: Operations whose float32 result must be rounded to stay a float16 value.
_ROUNDED = frozenset(("fadd", "fsub", "fmul", "fdiv", "frem"))
#: Operations whose result is a float16 value whenever their operands are.
_EXACT = frozenset(("fneg", "freeze", "phi", "select", "load", "fcmp", "fptosi", "fptoui",
                    "extractelement", "insertelement", "extractvalue", "insertvalue",
                    "getelementptr", "alloca", "store", "call", "ret", "br", "switch"))
#: Intrinsics with float16 results: whether the float32 result needs rounding.
_INTRINSICS = {"sqrt": True, "fma": True, "fmuladd": True, "fabs": False, "floor": False,
               "ceil": False, "trunc": False, "rint": False, "nearbyint": False,
               "round": False, "roundeven": False, "minnum": False, "maxnum": False,
               "minimum": False, "maximum": False, "copysign": False, "canonicalize": False}
_BUFFER_POINTER = "ptr addrspace(11)"
_FLOAT = {"half": "float"}


def _float_constant(value):
    """A float16 literal (``0xH3C00``) as the float literal of the same value."""
    if isinstance(value, str) and value.startswith("0xH"):
        number = struct.unpack("<e", struct.pack("<H", int(value[3:], 16)))[0]
        return "0x" + struct.pack(">d", number).hex().upper()
    return value


#: A buffer handle's type: its float16 elements stay float16.
_HANDLE = re.compile(r'target\("[^"]*"[^()]*\)')


def _widen(text):
    if not isinstance(text, str) or text.startswith("target("):
        return text
    return ir.map_words(text, _FLOAT)


def _has_half(text):
    return isinstance(text, str) and "half" in ir.words(_HANDLE.sub("", text))


def _widen_aggregate(value):
    """An aggregate constant of float16 elements as one of float elements."""
    elements = ir.elements(value)
    if not elements:
        return value
    for element in elements:
        element.type = _widen(element.type)
        element.value = _float_constant(element.value)
    return ir.aggregate(value, elements)


def _rounding_steps(value):
    """``(key, text)`` steps leaving in ``result`` the float32 ``value``
    rounded to the nearest float16 value, ties to even, computed on its
    integer bits: Vulkan lets a driver round an ``OpFConvert`` to float16
    as it likes unless the module asks otherwise, and NVIDIA's H200 was
    seen to drop a conversion to float16 and back altogether. The result
    converts to float16 exactly, whatever the driver's rounding."""
    return [
        ("u", f"bitcast float {value} to i32"),
        ("sign", "and i32 {u}, -2147483648"), ("a", "and i32 {u}, 2147483647"),
        # Normal results: the 13 bits float16 lacks rounded off, ties to even.
        ("l0", "lshr i32 {a}, 13"), ("lsb", "and i32 {l0}, 1"), ("bias", "add i32 {lsb}, 4095"),
        ("up", "add i32 {a}, {bias}"), ("normal", "and i32 {up}, -8192"),
        # Beyond 65504 after rounding: an infinity.
        ("big", "icmp ugt i32 {normal}, 1199562752"),
        ("finite", "select i1 {big}, i32 2139095040, i32 {normal}"),
        # Below 2**-14: a whole number of 2**-24, the significand shifted
        # right by 126 - exponent (at most 25, past which all is lost).
        ("e", "lshr i32 {a}, 23"), ("m0", "and i32 {a}, 8388607"),
        ("m", "or i32 {m0}, 8388608"), ("r0", "sub i32 126, {e}"),
        ("far", "icmp ugt i32 {r0}, 25"), ("r", "select i1 {far}, i32 25, i32 {r0}"),
        ("q", "lshr i32 {m}, {r}"), ("one", "shl i32 1, {r}"), ("mask", "sub i32 {one}, 1"),
        ("rest", "and i32 {m}, {mask}"), ("halfway", "lshr i32 {one}, 1"),
        ("q1", "and i32 {q}, 1"), ("odd", "icmp ne i32 {q1}, 0"),
        ("over", "icmp ugt i32 {rest}, {halfway}"), ("tie", "icmp eq i32 {rest}, {halfway}"),
        ("even", "and i1 {tie}, {odd}"), ("away", "or i1 {over}, {even}"),
        ("awayi", "zext i1 {away} to i32"), ("n", "add i32 {q}, {awayi}"),
        # n * 2**-24 (n <= 1024) is exact in float32.
        ("nf", "uitofp i32 {n} to float"), ("sf", "fmul float {nf}, 0x3E70000000000000"),
        ("sb", "bitcast float {sf} to i32"),
        ("low", "icmp ult i32 {a}, 947912704"),
        ("mag0", "select i1 {low}, i32 {sb}, i32 {finite}"),
        # A NaN stays one, quiet (its payload's top bit set survives the
        # conversion to float16).
        ("nan", "icmp ugt i32 {a}, 2139095040"), ("quiet", "or i32 {a}, 4194304"),
        ("mag", "select i1 {nan}, i32 {quiet}, i32 {mag0}"),
        ("all", "or i32 {mag}, {sign}"), ("result", "bitcast i32 {all} to float")]


class _Rewriter:
    def __init__(self, function):
        self.function = function
        self.count = 0

    def fresh(self):
        self.count += 1
        return f"%nv.f16.{self.count}"

    def lines(self, out, steps, last=None):
        """Append ``(key, text)`` instructions, ``{key}`` in a text naming an
        earlier step's result, the last one named ``last`` if given; returns
        the names."""
        names = {}
        for k, (key, text) in enumerate(steps):
            names[key] = last if last and k == len(steps) - 1 else self.fresh()
            out.append(ir.instruction(f"{names[key]} = " + text.format(**names)))
        return names

    def round_float(self, value, out, name=None):
        """The name (``name`` if given) of the float ``value`` rounded to a
        float16 value, as a float."""
        return self.lines(out, _rounding_steps(value), last=name)["result"]

    def run(self):
        """Replace each instruction of the function by what :meth:`rewrite` appends."""
        for block in self.function.blocks or ():
            out = []
            for inst in block.instructions:
                self.rewrite(inst, out)
            block.instructions = out


class _Emulator(_Rewriter):
    def __init__(self, function):
        super().__init__(function)
        self.renamed = {}

    def rounded(self, inst, out):
        """``inst`` computing a float, then ``inst``'s name its float16 rounding."""
        name = inst.name
        inst.name = self.fresh()
        out.append(inst)
        self.narrowed(inst.name, name, out)

    def narrowed(self, value, name, out):
        """``name``: the float ``value`` rounded to a float16 value, a float."""
        self.round_float(value, out, name)

    def from_double(self, inst, out):
        """``inst``, a float64 to float16 conversion, rounded once: through a
        float32 rounded to odd, as :mod:`numba_vulkan.frontend.fp16` lowers
        one (drivers may round a double to a float first)."""
        value = inst.operands[0].value
        names = {k: self.fresh() for k in ("single", "back", "bits", "fa", "fx", "up", "upi",
                                             "less", "odd", "inexact", "chosen", "rto")}

        def add(name, text):
            out.append(ir.instruction(f"{names[name]} = {text}"))
        add("single", f"fptrunc double {value} to float")
        add("back", f"fpext float {names['single']} to double")
        add("bits", f"bitcast float {names['single']} to i32")
        add("fa", f"call double @llvm.fabs.f64(double {names['back']})")
        add("fx", f"call double @llvm.fabs.f64(double {value})")
        add("up", f"fcmp ogt double {names['fa']}, {names['fx']}")
        add("upi", f"zext i1 {names['up']} to i32")
        add("less", f"sub i32 {names['bits']}, {names['upi']}")
        add("odd", f"or i32 {names['less']}, 1")
        add("inexact", f"fcmp one double {names['back']}, {value}")
        add("chosen", f"select i1 {names['inexact']}, i32 {names['odd']}, i32 {names['bits']}")
        add("rto", f"bitcast i32 {names['chosen']} to float")
        self.narrowed(names["rto"], inst.name, out)

    def from_bits(self, inst, out):
        """``inst``, float16 bits (an i16, such as a record field) to a float16
        value, as the float32 of that value, computed on the integer bits."""
        bits = inst.operands[0].value
        n = self.lines(out, [
            ("w", f"zext i16 {bits} to i32"),
            ("s0", "and i32 {w}, 32768"), ("sign", "shl i32 {s0}, 16"),
            ("e0", "lshr i32 {w}, 10"), ("e", "and i32 {e0}, 31"),
            ("m", "and i32 {w}, 1023"),
            # Normal numbers, infinities and NaNs: the exponent rebased.
            ("top", "icmp eq i32 {e}, 31"), ("e1", "add i32 {e}, 112"),
            ("e32", "select i1 {top}, i32 255, i32 {e1}"), ("eb", "shl i32 {e32}, 23"),
            ("mb", "shl i32 {m}, 13"), ("normal", "or i32 {eb}, {mb}"),
            # Zeros and subnormals: the mantissa times 2**-24, exactly.
            ("mf", "uitofp i32 {m} to float"),
            ("small", "fmul float {mf}, 0x3E70000000000000"),
            ("smallb", "bitcast float {small} to i32"),
            ("zero", "icmp eq i32 {e}, 0"),
            ("mag", "select i1 {zero}, i32 {smallb}, i32 {normal}"),
            ("all", "or i32 {mag}, {sign}")])
        out.append(ir.instruction(f"{inst.name} = bitcast i32 {n['all']} to float"))

    def to_bits(self, inst, out):
        """``inst``, a float16 value (a float32 holding one exactly) to its
        float16 bits, computed on the integer bits."""
        value = inst.operands[0].value
        n = self.lines(out, [
            ("u", f"bitcast float {value} to i32"),
            ("s0", "lshr i32 {u}, 16"), ("sign", "and i32 {s0}, 32768"),
            ("e0", "lshr i32 {u}, 23"), ("e", "and i32 {e0}, 255"),
            ("m", "and i32 {u}, 8388607"), ("m13", "lshr i32 {m}, 13"),
            # Normal numbers.
            ("e1", "sub i32 {e}, 112"), ("eb", "shl i32 {e1}, 10"),
            ("normal", "or i32 {eb}, {m13}"),
            # Subnormals: the implicit bit shifted into place; zeros give 0.
            ("full", "or i32 {m}, 8388608"), ("shift", "sub i32 126, {e}"),
            ("small", "lshr i32 {full}, {shift}"),
            ("low", "icmp ult i32 {e}, 113"), ("zero", "icmp ult i32 {e}, 103"),
            ("tiny", "select i1 {zero}, i32 0, i32 {small}"),
            # Infinities and NaNs (a NaN stays one: its quiet bit is set).
            ("top", "icmp eq i32 {e}, 255"), ("nan", "icmp ne i32 {m}, 0"),
            ("quiet", "select i1 {nan}, i32 512, i32 0"), ("q", "or i32 {quiet}, {m13}"),
            ("special", "or i32 {q}, 31744"),
            ("finite", "select i1 {low}, i32 {tiny}, i32 {normal}"),
            ("mag", "select i1 {top}, i32 {special}, i32 {finite}"),
            ("all", "or i32 {mag}, {sign}")])
        out.append(ir.instruction(f"{inst.name} = trunc i32 {n['all']} to i16"))

    def operands(self, inst):
        """Widen ``inst``'s operands."""
        for operand in inst.operands:
            widened = _has_half(operand.type)
            operand.type = _widen(operand.type)
            if isinstance(operand.value, ir.Instruction):
                if widened or _has_half(str(operand.value)):
                    raise UnsupportedError("a float16 constant expression on a device "
                                           "without float16 arithmetic (shaderFloat16)")
            elif isinstance(operand.value, str):
                operand.value = self.renamed.get(operand.value, operand.value)
                if operand.value[:1] in ("[", "<", "{"):
                    operand.value = _widen_aggregate(operand.value)
                else:
                    operand.value = _float_constant(operand.value)

    def rewrite(self, inst, out):
        op = inst.opcode
        if not _has_half(str(inst)):
            out.append(inst)
            return
        if op == "load" and inst.type == "half" and inst.operands[0].type == _BUFFER_POINTER:
            name = inst.name
            inst.name = self.fresh()
            self.operands(inst)
            out.append(inst)
            out.append(ir.Instruction("fpext", [ir.Operand("half", inst.name)], name=name,
                                      type="float"))
            return
        if op == "store" and inst.operands[0].type == "half" \
                and inst.operands[1].type == _BUFFER_POINTER:
            self.operands(inst)
            narrow = self.fresh()
            value = inst.operands[0]
            out.append(ir.Instruction("fptrunc", [ir.Operand("float", value.value)],
                                      name=narrow, type="half"))
            inst.operands[0] = ir.Operand("half", narrow)
            out.append(inst)
            return
        if op == "fpext" and inst.operands[0].type == "half":
            self.operands(inst)
            if inst.type == "float":
                # Already float: later uses read the operand itself.
                self.renamed[inst.name] = inst.operands[0].value
                return
            inst.operands[0].type = "float"
            out.append(inst)
            return
        if op == "fptrunc" and inst.type == "half":
            self.operands(inst)
            source = inst.operands[0]
            if source.type == "float":
                self.narrowed(source.value, inst.name, out)
                return
            self.from_double(inst, out)
            return
        if op in ("sitofp", "uitofp") and inst.type == "half":
            self.operands(inst)
            inst.type = "float"
            # Integers below 2**24 convert exactly to float32; the rest
            # overflow float16 either way.
            self.rounded(inst, out)
            return
        if op == "bitcast" and inst.type == "half" and inst.operands[0].type == "i16":
            self.operands(inst)
            self.from_bits(inst, out)
            return
        if op == "bitcast" and inst.type == "i16" and inst.operands[0].type == "half":
            self.operands(inst)
            self.to_bits(inst, out)
            return
        if op == "call":
            self.call(inst, out)
            return
        if op in _ROUNDED:
            self.operands(inst)
            inst.type = _widen(inst.type)
            self.rounded(inst, out)
            return
        if op in _EXACT:
            self.operands(inst)
            inst.type = _widen(inst.type)
            if op in ("load", "store", "alloca"):
                # A workgroup or private element, now a float.
                inst.tail = inst.tail.replace("align 2", "align 4")
            out.append(inst)
            return
        raise UnsupportedError(f"'{op}' of float16 values on a device without float16 "
                               "arithmetic (shaderFloat16)")

    def call(self, inst, out):
        callee = inst.callee.lstrip("@").strip('"')
        base = callee[len("llvm."):].rsplit(".", 1)[0] if callee.startswith("llvm.") else None
        if not callee.endswith(".f16") or base not in _INTRINSICS:
            if _has_half(inst.type) or any(_has_half(o.type) for o in inst.operands):
                raise UnsupportedError(f"a call of {callee} with float16 values on a device "
                                       "without float16 arithmetic (shaderFloat16)")
            self.operands(inst)
            out.append(inst)
            return
        self.operands(inst)
        inst.type = "float"
        inst.callee = f"@llvm.{base}.f32"
        if _INTRINSICS[base]:
            self.rounded(inst, out)
        else:
            out.append(inst)

    def run(self):
        super().run()
        # Uses may come before the definition in block order (phis).
        if self.renamed:
            for inst in self.function.instructions():
                for operand in inst.operands:
                    if isinstance(operand.value, str):
                        while operand.value in self.renamed:
                            operand.value = self.renamed[operand.value]


#: Float16 operations Vulkan does not ask drivers to round correctly:
#: division (NVIDIA's float16 quotient is an approximation), remainders and
#: square roots.
_NATIVE_INEXACT = frozenset(("fdiv", "frem"))
#: Float16 operations correctly rounded where the module asks for rounding
#: to nearest (``RoundingModeRTE``), with the rounding the driver likes otherwise.
_NATIVE_ROUNDED = frozenset(("fadd", "fsub", "fmul"))
_BINARY_FLOAT = _NATIVE_INEXACT | _NATIVE_ROUNDED


class _Native(_Rewriter):
    def __init__(self, function, rte):
        super().__init__(function)
        self.rte = rte

    def widened(self, operand, out):
        """``operand`` (a half) as a float."""
        if isinstance(operand.value, str) and operand.value.startswith("0xH"):
            return _float_constant(operand.value)
        return self.lines(out, [("w", f"fpext half {operand.value} to float")])["w"]

    def via_float(self, inst, out, op):
        """``inst``, a float16 operation, computed in float32 and rounded once."""
        values = [self.widened(o, out) for o in inst.operands]
        if op == "sqrt":
            text = f"call float @llvm.sqrt.f32(float {values[0]})"
        else:
            flags = "".join(f"{flag} " for flag in inst.flags)
            text = f"{op} {flags}float {values[0]}, {values[1]}"
        wide = self.lines(out, [("v", text)])["v"]
        self.narrow(wide, inst.name, out)

    def narrow(self, value, name, out):
        """``name``: the float ``value`` rounded to float16, a half."""
        rounded = self.round_float(value, out)
        out.append(ir.instruction(f"{name} = fptrunc float {rounded} to half"))

    def rewrite(self, inst, out):
        op = inst.opcode
        result = inst.operands[0].type if op in _BINARY_FLOAT else inst.type
        scalar = result == "half" and inst.name is not None
        if scalar and op == "fptrunc" and inst.operands[0].type == "float":
            self.narrow(inst.operands[0].value, inst.name, out)
        elif scalar and (op in _NATIVE_INEXACT or (op in _NATIVE_ROUNDED and not self.rte)):
            self.via_float(inst, out, op)
        elif scalar and op == "call" and inst.callee == "@llvm.sqrt.f16":
            self.via_float(inst, out, "sqrt")
        elif scalar and op in ("sitofp", "uitofp") and inst.operands[0].type in ("i8", "i16",
                                                                                 "i32", "i64"):
            # Integers below 2**24 convert exactly to float32; the rest
            # overflow float16 either way.
            source = inst.operands[0]
            wide = self.lines(out, [("v", f"{op} {source.type} {source.value} to float")])["v"]
            self.narrow(wide, inst.name, out)
        else:
            out.append(inst)


def native(module, rte):
    """Make the IR model ``module``, of a target computing in float16, in
    place, one with every
    rounding to float16 done correctly on any driver: conversions from
    float32 rounded in integer arithmetic, division, remainders and square
    roots computed in float32 (exact enough: 24 >= 2 * 11 + 2 bits) and
    rounded so, and, unless the module asks for rounding to nearest (``rte``),
    additions, subtractions and products too."""
    if not _mentions_half(module):
        return
    for function in module.functions:
        if function.blocks is not None:
            _Native(function, rte).run()
    _declare_intrinsics(module)


def emulate(module):
    """Compute the float16 arithmetic of the IR model ``module`` in float32
    (see above), in place."""
    if not _mentions_half(module):
        return
    for item in module.items:
        if isinstance(item, ir.Global):
            if _has_half(item.type):
                item.type = _widen(item.type)
                if isinstance(item.init, str):
                    item.init = _widen_aggregate(item.init)
                item.tail = item.tail.replace("align 2", "align 4")
        elif isinstance(item, ir.Function):
            if item.blocks is not None:
                _Emulator(item).run()
    _declare_intrinsics(module)


def _mentions_half(module):
    """Whether a type in ``module`` (of a global, a function or an
    instruction's operand or result) has float16 in it."""
    for item in module.items:
        if isinstance(item, ir.Global) and _has_half(item.type):
            return True
        if isinstance(item, ir.Function):
            if _has_half(item.header):
                return True
            for inst in item.instructions():
                if _has_half(inst.type) or any(_has_half(o.type) for o in inst.operands):
                    return True
    return False


def _declare_intrinsics(module):
    """Declare in ``module`` the float32 intrinsics it now calls."""
    declared = {f.name for f in module.functions}
    wanted = {}
    for fn in module.functions:
        for inst in fn.instructions():
            if inst.opcode == "call" and inst.callee.startswith("@llvm.") \
                    and inst.callee.endswith((".f32", ".f64")) and inst.callee not in declared:
                args = ", ".join(o.type for o in inst.operands)
                wanted[inst.callee] = f"declare {inst.type} {inst.callee}({args})"
    for line in wanted.values():
        module.add(line)
    # The float16 declarations nothing calls any more.
    called = {inst.callee for fn in module.functions for inst in fn.instructions()
              if inst.opcode == "call"}
    module.items = [item for item in module.items
                    if not (isinstance(item, ir.Function) and item.blocks is None
                            and item.name.endswith(".f16") and item.name not in called)]


#: The storage capability that buffers of each width of type need.
_STORAGE_CAPABILITY = {16: spv.CapabilityStorageBuffer16BitAccess,
                       8: spv.CapabilityStorageBuffer8BitAccess}


def _stored_widths(instructions):
    """The widths below 32 bits of the types that storage buffers hold."""
    width = {}
    for inst in instructions:
        op = spirv.opcode(inst)
        if op in (spv.OpTypeInt, spv.OpTypeFloat) and inst[2] in _STORAGE_CAPABILITY:
            width[inst[1]] = {inst[2]}
        elif op in (spv.OpTypeVector, spv.OpTypeArray, spv.OpTypeRuntimeArray) \
                and inst[2] in width:
            width[inst[1]] = width[inst[2]]
        elif op == spv.OpTypeStruct:
            inner = set().union(*(width.get(member, ()) for member in inst[2:]))
            if inner:
                width[inst[1]] = inner
    stored = set()
    for inst in instructions:
        if spirv.opcode(inst) == spv.OpTypePointer and inst[2] == spv.StorageClassStorageBuffer:
            stored |= width.get(inst[3], set())
    return stored


def storage_capabilities(binary, float16):
    """The emitted module ``binary`` with ``StorageBuffer16BitAccess`` and
    ``StorageBuffer8BitAccess`` declared if its storage buffers hold 16- or
    8-bit types, and without ``Float16`` unless the target computes in
    float16 (``float16``)."""
    header, instructions = spirv.parse(binary)
    declared = {inst[1] for inst in instructions if spirv.opcode(inst) == spv.OpCapability}
    changed = False
    if not float16 and spv.CapabilityFloat16 in declared:
        instructions = [inst for inst in instructions
                        if not (spirv.opcode(inst) == spv.OpCapability
                                and inst[1] == spv.CapabilityFloat16)]
        changed = True
    for width in sorted(_stored_widths(instructions), reverse=True):
        capability = _STORAGE_CAPABILITY[width]
        if capability in declared:
            continue
        first = next(k for k, inst in enumerate(instructions)
                     if spirv.opcode(inst) == spv.OpCapability)
        instructions.insert(first + 1, [(2 << 16) | spv.OpCapability, capability])
        changed = True
    return spirv.assemble(header, instructions) if changed else binary
