"""Rewrite optimised LLVM IR for SPIR-V's logical addressing model.

Numba computes addresses the way a CPU does: an array's data pointer plus a
byte offset. Vulkan shaders have no such pointers; an access names an object
(a storage buffer or a module-level array variable) and an element index.
After inlining and optimisation every address in a kernel is the base of one
object plus an offset: a buffer base (the ``__nv.buffer.K`` markers) or a
global array (such as libclc's constant tables). This pass tracks, for each
pointer value, which object it points into and its byte offset as an i64,
and turns each load and store into an access to element
``offset / itemsize`` of that object. It also replaces the push constant and
workgroup size markers.

The pass works on the text of a single-function module, as the optimiser
prints it. Anything it cannot prove safe (a pointer that may point into two
buffers, a pointer passed to a call, an access whose size differs from the
buffer's element size) raises :class:`UnsupportedError` naming the
instruction, rather than producing a wrong module.
"""

import re
from dataclasses import dataclass

from numba_vulkan.codegen import fixups, markers
from numba_vulkan.errors import UnsupportedError

_LOCAL = r'%(?:"[^"]*"|[-a-zA-Z$._0-9]+)'
_ASSIGN = re.compile(rf"^\s*({_LOCAL}) = (.*)$")
_VALUE = re.compile(r'[%@](?:"[^"]*"|[-a-zA-Z$._0-9]+)')
_ENTRY_NAME = "main"

#: LLVM element type and its intrinsic-name mangling, by storage dtype.
ELEMENT_TYPES = {
    "bool": ("i8", "i8"), "int8": ("i8", "i8"), "uint8": ("i8", "i8"),
    "int16": ("i16", "i16"), "uint16": ("i16", "i16"),
    "int32": ("i32", "i32"), "uint32": ("i32", "i32"),
    "int64": ("i64", "i64"), "uint64": ("i64", "i64"),
    "float32": ("float", "f32"), "float64": ("double", "f64"),
    # A complex array is an array of its parts (see numba_vulkan.abi).
    "complex64": ("float", "f32"), "complex128": ("double", "f64"),
}

_SCALAR_SIZES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "half": 2,
                 "float": 4, "double": 8, "ptr": 8}
#: How intrinsic names spell each element type.
_MANGLED = {"i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "float": "f32", "double": "f64"}


class MixedFloatAtomics(UnsupportedError):
    """An array takes both a native float atomic add and a compare-and-swap
    loop on its bits; SPIR-V cannot type one buffer both ways. The compiler
    then uses compare-and-swap loops for the adds too."""


def split_top(text, sep=","):
    """Split ``text`` at ``sep`` characters outside brackets and quotes."""
    parts, depth, start, quoted = [], 0, 0, False
    for i, ch in enumerate(text):
        if ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


class _Types:
    """Sizes and layouts of LLVM types written as text."""

    def __init__(self, named):
        self.named = named

    def parse(self, text):
        text = text.strip()
        if text in self.named:
            return self.parse(self.named[text])
        if text.startswith("ptr"):
            return ("scalar", "ptr")
        if text in _SCALAR_SIZES:
            return ("scalar", text)
        m = re.fullmatch(r"\[(\d+) x (.*)\]", text)
        if m:
            return ("array", int(m.group(1)), self.parse(m.group(2)))
        m = re.fullmatch(r"<(\d+) x (.*)>", text)
        if m:
            return ("array", int(m.group(1)), self.parse(m.group(2)))
        if text.startswith("<{") and text.endswith("}>"):
            return ("struct", True, [self.parse(t) for t in split_top(text[2:-2])])
        if text.startswith("{") and text.endswith("}"):
            return ("struct", False, [self.parse(t) for t in split_top(text[1:-1])])
        raise UnsupportedError(f"type {text} cannot be addressed in a Vulkan kernel")

    def size_align(self, ty):
        kind = ty[0]
        if kind == "scalar":
            size = _SCALAR_SIZES[ty[1]]
            return size, size
        if kind == "array":
            size, align = self.size_align(ty[2])
            return ty[1] * _round(size, align), align
        offsets, size, align = self.struct_layout(ty)
        return size, align

    def struct_layout(self, ty):
        _, packed, fields = ty
        offsets, offset, align = [], 0, 1
        for field in fields:
            size, falign = self.size_align(field)
            if packed:
                falign = 1
            offset = _round(offset, falign)
            offsets.append(offset)
            offset += size
            align = max(align, falign)
        return offsets, _round(offset, align), align


def _round(value, align):
    return (value + align - 1) // align * align


def _value(operand):
    """The value part of a ``type value`` operand."""
    return operand.rsplit(None, 1)[-1]


@dataclass(frozen=True)
class _Global:
    """A module-level array variable that the kernel addresses.

    Attributes:
        name: Its ``@name``.
        addrspace: Its LLVM address space.
        shape: Extents of its nested array type, outermost first.
        elem: The LLVM scalar type of its elements.
    """

    name: str
    addrspace: int
    shape: tuple
    elem: str


@dataclass
class _Pointer:
    #: The object pointed into: a buffer's binding (int) or a :class:`_Global`.
    object: object
    offset: str


_GLOBAL_DEF = re.compile(r'^(@(?:"[^"]*"|[-a-zA-Z$._0-9]+)) = ([^\[]*?)'
                         r'(?:addrspace\((\d+)\) )?(?:global|constant) (\[.*?\]|\w+) ')
#: A private array; the groups line up with :data:`_GLOBAL_DEF`'s.
_ALLOCA = re.compile(rf"^\s*({_LOCAL}) = ()()alloca (\[\d+ x \w+\])(?:, align \d+)?$")
#: A workgroup array as Numba's pointers see it: cast to the generic space.
_CAST = re.compile(r'addrspacecast \(ptr addrspace\(\d+\) (@(?:"[^"]*"|[-a-zA-Z$._0-9]+)) to ptr\)')
#: Scope of an atomic on memory of an LLVM address space (default: Device).
_ATOMIC_SCOPES = {3: "workgroup"}
_SPIRV_SCOPES = {"device": 1, "workgroup": 2}


class _Rewriter:
    def __init__(self, text, bindings):
        self.lines = text.splitlines()
        self.bindings = bindings
        self.counter = 0
        self.pointers = {}
        self.used_buffers = set()
        self.used_globals = set()
        self.cmpxchg_spaces = set()
        self.wide_atomics = set()
        self.views = {}
        named = {}
        for line in self.lines:
            m = re.match(rf"^({_LOCAL}) = type (.*)$", line)
            if m:
                named[m.group(1)] = m.group(2)
        self.types = _Types(named)
        self.globals = self._find_globals()

    def _find_globals(self):
        """Objects other than buffers: module-level variables that are
        scalars or (nested) arrays of one scalar type (constant tables,
        workgroup arrays), and private arrays (allocas of an array type)."""
        found = {}
        for line in self.lines:
            m = _GLOBAL_DEF.match(line) or _ALLOCA.match(line)
            if not m or "external" in m.group(2):
                continue
            shape, ty = [], self.types.parse(m.group(4))
            while ty[0] == "array":
                shape.append(ty[1])
                ty = ty[2]
            if ty[0] == "scalar" and ty[1] != "ptr" and (shape or m.re is _GLOBAL_DEF):
                found[m.group(1)] = _Global(m.group(1), int(m.group(3) or 0), tuple(shape),
                                            ty[1])
        return found

    def fresh(self):
        self.counter += 1
        return f"%nv.{self.counter}"

    # Locating the kernel body ------------------------------------------------

    def body_range(self):
        start = end = None
        for i, line in enumerate(self.lines):
            if line.startswith("define ") and f"@{_ENTRY_NAME}(" in line:
                start = i + 1
            elif start is not None and line.startswith("}"):
                end = i
                break
        if start is None or end is None:
            raise UnsupportedError("the optimised module has no kernel entry point")
        return start, end

    # Which values point into buffers ----------------------------------------

    def analyse(self, body):
        changed = True
        while changed:
            changed = False
            for line in body:
                m = _ASSIGN.match(line)
                if not m or m.group(1) in self.pointers:
                    continue
                name, rhs = m.groups()
                source = self._pointer_source(rhs)
                if source is not None:
                    self.pointers[name] = _Pointer(source, self.fresh())
                    changed = True

    def _pointer_source(self, rhs):
        call = re.match(rf"(?:tail )?call ptr @{re.escape(markers.BUFFER)}(\d+)\(\)", rhs)
        if call:
            return int(call.group(1))
        if rhs.startswith("getelementptr"):
            operands = split_top(self._strip_gep(rhs))
            return self._object_of(_value(operands[1]))
        if rhs.startswith("phi ptr"):
            incoming = re.findall(r"\[\s*([^,\]]+),", rhs)
            return self._common_buffer(incoming, rhs)
        if rhs.startswith("select"):
            operands = split_top(rhs[len("select"):])
            if len(operands) == 3 and operands[1].startswith("ptr"):
                return self._common_buffer([_value(operands[1]), _value(operands[2])], rhs)
        return None

    def _common_buffer(self, values, rhs):
        found = {self._object_of(v) for v in values}
        found.discard(None)
        if not found:
            return None
        if len(found) > 1:
            raise UnsupportedError(f"a pointer may point into two different arrays: {rhs}")
        return found.pop()

    def _object_of(self, value):
        if value in self.globals:
            return self.globals[value]
        pointer = self.pointers.get(value)
        return None if pointer is None else pointer.object

    @staticmethod
    def _strip_gep(rhs):
        rest = rhs[len("getelementptr"):].strip()
        while True:
            word = rest.split(None, 1)[0]
            if word in ("inbounds", "nuw", "nusw") or word.startswith("inrange"):
                rest = rest.split(None, 1)[1]
            else:
                return rest

    # Rewriting ---------------------------------------------------------------

    def rewrite(self):
        start, end = self.body_range()
        body = [_CAST.sub(lambda m: m.group(1) if m.group(1) in self.globals else m.group(0),
                          line) for line in self.lines[start:end]]
        self.analyse(body)
        self.views = self.atomic_views(body)
        out = []
        for line in body:
            out.extend(self.rewrite_line(line))
        prologue = self.prologue()
        insert_at = 1 if out and re.match(r"^[-\w.$\"]+:", out[0]) else 0
        out[insert_at:insert_at] = prologue
        header = self.declarations()
        before = [self.retyped_definition(line) for line in self.lines[:start - 1]]
        lines = before + header + self.lines[start - 1:start] + out + self.lines[end:]
        return "\n".join(lines) + "\n"

    # Atomics ---------------------------------------------------------------

    def atomic_views(self, body):
        """Element types that objects take to serve atomics on their bits.

        A compare-and-swap loop on a float array accesses its elements as
        integers of the same size; SPIR-V's atomics need the array itself
        typed so, and every other access then bitcasts.
        """
        views = {}
        for line in body:
            m = _ASSIGN.match(line)
            rhs = m.group(2) if m else line.strip()
            access = self._atomic_access(rhs)
            if access is None:
                continue
            target, ty = access
            obj = self._object_of(target)
            if obj is None:
                continue
            natural = self.natural_elem(obj)
            if ty != natural:
                key = obj if isinstance(obj, int) else obj.name
                if not ty.startswith("i") or views.setdefault(key, ty) != ty or \
                        _SCALAR_SIZES[ty] != _SCALAR_SIZES[natural]:
                    raise UnsupportedError(f"an atomic access of {ty} into an array of "
                                           f"{natural}: {line.strip()}")
        for line in body:
            rhs = (_ASSIGN.match(line).group(2) if _ASSIGN.match(line) else line.strip())
            if rhs.startswith("atomicrmw fadd") or rhs.startswith("atomicrmw volatile fadd"):
                obj = self._object_of(self._atomic_access(rhs)[0])
                if obj is not None and (obj if isinstance(obj, int) else obj.name) in views:
                    raise MixedFloatAtomics(
                        "a native float atomic add and a compare-and-swap loop on the same "
                        f"array: {line.strip()}")
        return views

    @staticmethod
    def _atomic_access(rhs):
        """``(pointer, type)`` of an atomicrmw or cmpxchg, else None."""
        if rhs.startswith("atomicrmw "):
            words = rhs.split()
            operands = split_top(" ".join(w for w in words[1:] if w != "volatile"))
            return _value(operands[0]), operands[1].split()[0]
        if rhs.startswith("cmpxchg "):
            words = [w for w in rhs.split()[1:] if w not in ("weak", "volatile")]
            operands = split_top(" ".join(words))
            return _value(operands[0]), operands[1].split()[0]
        return None

    def natural_elem(self, obj):
        if isinstance(obj, int):
            return ELEMENT_TYPES[self.bindings[obj]][0]
        return obj.elem

    def elem_of(self, obj):
        key = obj if isinstance(obj, int) else obj.name
        return self.views.get(key, self.natural_elem(obj))

    def retyped_definition(self, line):
        m = _GLOBAL_DEF.match(line)
        if m and m.group(1) in self.views:
            obj = self.globals[m.group(1)]
            if "undef" not in line[m.end():] and "poison" not in line[m.end():]:
                raise UnsupportedError(f"atomics on initialised array {obj.name}")
            inner = self.views[obj.name]
            for extent in reversed(obj.shape):
                inner = f"[{extent} x {inner}]"
            return line[:m.start(4)] + inner + line[m.end(4):]
        return line

    def rewrite_atomic(self, name, rhs, line):
        target, ty = self._atomic_access(rhs)
        ptr, lines, elem, space = self.element_pointer(target, ty, line)
        if space == 0:
            raise UnsupportedError("atomics on a private array (nv.local.array): Vulkan has "
                                   f"atomics on buffers and workgroup memory only: {line.strip()}")
        scope = _ATOMIC_SCOPES.get(space, "device")
        if ty == "i64":
            return lines + self.wide_atomic(name, rhs, ptr, space, scope)
        if rhs.startswith("atomicrmw "):
            words = rhs.split()
            operands = split_top(" ".join(w for w in words[1:] if w != "volatile"))
            op = words[2] if words[1] == "volatile" else words[1]
            value = operands[1].split()[1]
            lines.append(f"  {name} = atomicrmw {op} ptr addrspace({space}) {ptr}, {ty} {value} "
                         f'syncscope("{scope}") monotonic, align {_SCALAR_SIZES[ty]}')
            return lines
        words = [w for w in rhs.split()[1:] if w not in ("weak", "volatile")]
        operands = split_top(" ".join(words))
        expected = operands[1].rsplit(None, 1)[1]
        value = operands[2].split()[1]
        old, ok, half = self.fresh(), self.fresh(), self.fresh()
        self.cmpxchg_spaces.add(space)
        # LLVM's backend cannot lower cmpxchg for Vulkan; its own intrinsic
        # can (see numba_vulkan.codegen.fixups for the result it builds).
        lines += [
            f"  {old} = call {ty} (ptr addrspace({space}), ...) @llvm.spv.cmpxchg.p{space}("
            f"ptr addrspace({space}) {ptr}, {ty} {expected}, {ty} {value}, "
            f"i32 {_SPIRV_SCOPES[scope]}, i32 0, i32 0)",
            f"  {ok} = icmp eq {ty} {old}, {expected}",
            f"  {half} = insertvalue {{ {ty}, i1 }} poison, {ty} {old}, 0",
            f"  {name} = insertvalue {{ {ty}, i1 }} {half}, i1 {ok}, 1",
        ]
        return lines

    def wide_atomic(self, name, rhs, ptr, space, scope):
        """A 64-bit atomic as a call that :mod:`numba_vulkan.codegen.fixups`
        turns into the SPIR-V instruction.

        LLVM's backend refuses 64-bit atomics for Vulkan (it offers no
        ``Int64Atomics`` capability there). The call takes the element
        through a volatile load, so that the module keeps the element
        pointer next to it; the repair reads the pointer from that load and
        drops it.
        """
        loaded = self.fresh()
        out = [f"  {loaded} = load volatile i64, ptr addrspace({space}) {ptr}, align 8"]
        code = _SPIRV_SCOPES[scope]
        if rhs.startswith("atomicrmw "):
            words = [w for w in rhs.split()[1:] if w != "volatile"]
            value = split_top(" ".join(words))[1].split()[1]
            callee = f"{fixups.WIDE_ATOMIC}{words[0]}.{code}"
            self.wide_atomics.add((callee, 2))
            out.append(f"  {name} = call i64 @{callee}(i64 {loaded}, i64 {value})")
            return out
        operands = split_top(" ".join(w for w in rhs.split()[1:] if w not in ("weak", "volatile")))
        expected, value = operands[1].split()[1], operands[2].split()[1]
        callee = f"{fixups.WIDE_ATOMIC}cmpxchg.{code}"
        self.wide_atomics.add((callee, 3))
        old, ok, half = self.fresh(), self.fresh(), self.fresh()
        out += [f"  {old} = call i64 @{callee}(i64 {loaded}, i64 {expected}, i64 {value})",
                f"  {ok} = icmp eq i64 {old}, {expected}",
                f"  {half} = insertvalue {{ i64, i1 }} poison, i64 {old}, 0",
                f"  {name} = insertvalue {{ i64, i1 }} {half}, i1 {ok}, 1"]
        return out

    def rewrite_line(self, line):
        m = _ASSIGN.match(line)
        name, rhs = (m.groups() if m else (None, line.strip()))
        if name in self.pointers:
            return self.rewrite_pointer(name, rhs)
        if rhs.startswith("load ") and not rhs.startswith("load atomic"):
            return self.rewrite_load(name, rhs, line)
        if rhs.startswith("store ") and not rhs.startswith("store atomic"):
            return self.rewrite_store(rhs, line)
        if self._atomic_access(rhs) is not None and self._object_of(
                self._atomic_access(rhs)[0]) is not None:
            return self.rewrite_atomic(name, rhs, line)
        if re.match(r"(?:tail )?call void @llvm\.lifetime\.(?:start|end)", rhs):
            # Lifetime hints of private arrays: Vulkan has none to give.
            return []
        for value in _VALUE.findall(rhs):
            if value in self.pointers or value in self.globals:
                raise UnsupportedError(
                    f"a pointer into an array is used in a way Vulkan cannot express: {line.strip()}")
        return [line]

    def rewrite_pointer(self, name, rhs):
        pointer = self.pointers[name]
        if rhs.startswith("getelementptr") or "call ptr @" in rhs:
            if "call ptr @" in rhs:
                self.used_buffers.add(pointer.object)
                return [f"  {pointer.offset} = add i64 0, 0"]
            return self.gep_offset(pointer, rhs)
        if rhs.startswith("phi"):
            ty, _, incoming = rhs[len("phi"):].strip().partition(" ")
            pairs = re.findall(r"\[\s*([^,\]]+),\s*([^\]]+)\]", incoming)
            parts = ", ".join(f"[ {self.offset_of(v)}, {bb.strip()} ]" for v, bb in pairs)
            return [f"  {pointer.offset} = phi i64 {parts}"]
        operands = split_top(rhs[len("select"):])
        cond, a, b = operands
        return [f"  {pointer.offset} = select {cond}, i64 {self.offset_of(_value(a))}, "
                f"i64 {self.offset_of(_value(b))}"]

    def offset_of(self, value):
        if value in self.pointers:
            return self.pointers[value].offset
        if value in self.globals:
            return "0"
        if value in ("poison", "undef", "null"):
            return "0"
        raise UnsupportedError(f"pointer {value} does not point into a known array")

    def gep_offset(self, pointer, rhs):
        operands = split_top(self._strip_gep(rhs))
        ty = self.types.parse(operands[0])
        base = self.offset_of(_value(operands[1]))
        lines, terms = [], []
        current = ("array", 0, ty)
        for k, operand in enumerate(operands[2:]):
            idx_type, idx = operand.rsplit(None, 1)
            if current[0] == "struct":
                offsets, _, _ = self.types.struct_layout(current)
                field = int(idx)
                if field:
                    terms.append(str(offsets[field]))
                current = current[2][field]
                continue
            element = current[2]
            size, align = self.types.size_align(element)
            stride = _round(size, align)
            current = element
            if re.fullmatch(r"-?\d+", idx):
                if int(idx):
                    terms.append(str(int(idx) * stride))
                continue
            if idx_type != "i64":
                wide = self.fresh()
                lines.append(f"  {wide} = sext {idx_type} {idx} to i64")
                idx = wide
            if stride != 1:
                scaled = self.fresh()
                lines.append(f"  {scaled} = mul i64 {idx}, {stride}")
                idx = scaled
            terms.append(idx)
        total = base
        for term in terms:
            nxt = self.fresh()
            lines.append(f"  {nxt} = add i64 {total}, {term}")
            total = nxt
        lines.append(f"  {pointer.offset} = add i64 {total}, 0")
        return lines

    def element_pointer(self, value, access_type, line):
        if value in self.globals:
            return self.global_element_pointer(self.globals[value], "0", access_type, line)
        pointer = self.pointers[value]
        if isinstance(pointer.object, _Global):
            return self.global_element_pointer(pointer.object, pointer.offset, access_type,
                                               line)
        storage = self.bindings[pointer.object]
        elem = self.elem_of(pointer.object)
        size = _SCALAR_SIZES[elem]
        if access_type != elem:
            acc = self.types.size_align(self.types.parse(access_type))[0]
            if acc != size or access_type == "ptr":
                raise UnsupportedError(
                    f"an access of {access_type} into an array of {storage}: {line.strip()}")
        self.used_buffers.add(pointer.object)
        index, index32, ptr = self.fresh(), self.fresh(), self.fresh()
        shift = size.bit_length() - 1
        return ptr, [
            f"  {index} = ashr exact i64 {pointer.offset}, {shift}",
            f"  {index32} = trunc i64 {index} to i32",
            f"  {ptr} = call ptr addrspace(11) @{self.getpointer_name(pointer.object)}"
            f"({self.handle_type(pointer.object)} %nv.handle.{pointer.object}, i32 {index32})",
        ], elem, 11

    def global_element_pointer(self, obj, offset, access_type, line):
        """A pointer to the element at byte ``offset`` of a global array: one
        index per dimension, as SPIR-V's OpAccessChain needs."""
        elem = self.elem_of(obj)
        size = _SCALAR_SIZES[elem]
        if access_type != elem:
            acc = self.types.size_align(self.types.parse(access_type))[0]
            if acc != size or access_type == "ptr":
                raise UnsupportedError(
                    f"an access of {access_type} into an array of {elem}: {line.strip()}")
        if not obj.shape:
            return obj.name, [], elem, obj.addrspace
        lines, flat = [], self.fresh()
        lines.append(f"  {flat} = ashr exact i64 {offset}, {size.bit_length() - 1}")
        indices = []
        for k, extent in enumerate(obj.shape):
            stride = 1
            for inner in obj.shape[k + 1:]:
                stride *= inner
            index, index32 = self.fresh(), self.fresh()
            lines.append(f"  {index} = udiv i64 {flat}, {stride}")
            if k:
                wrapped = self.fresh()
                lines.append(f"  {wrapped} = urem i64 {index}, {extent}")
                index = wrapped
            lines.append(f"  {index32} = trunc i64 {index} to i32")
            indices.append(f"i32 {index32}")
        self.used_globals.add(obj)
        ptr = self.fresh()
        lines.append(f"  {ptr} = call ptr addrspace({obj.addrspace}) @{_element_marker(obj)}("
                     f"ptr addrspace({obj.addrspace}) {obj.name}, {', '.join(indices)})")
        return ptr, lines, elem, obj.addrspace

    def rewrite_load(self, name, rhs, line):
        operands = split_top(rhs[len("load "):])
        volatile = operands[0].startswith("volatile ")
        ty = operands[0].removeprefix("volatile ")
        target = _value(operands[1])
        if target not in self.pointers and target not in self.globals:
            return [line]
        ptr, lines, elem, space = self.element_pointer(target, ty, line)
        rest = ", ".join(operands[2:])
        rest = (", " + rest) if rest else ""
        vol = "volatile " if volatile else ""
        if elem != ty:
            raw = self.fresh()
            lines.append(f"  {raw} = load {vol}{elem}, ptr addrspace({space}) {ptr}{rest}")
            lines.append(f"  {name} = bitcast {elem} {raw} to {ty}")
        else:
            lines.append(f"  {name} = load {vol}{ty}, ptr addrspace({space}) {ptr}{rest}")
        return lines

    def rewrite_store(self, rhs, line):
        operands = split_top(rhs[len("store "):])
        volatile = operands[0].startswith("volatile ")
        first = operands[0].removeprefix("volatile ")
        ty, value = first.rsplit(None, 1)
        target = _value(operands[1])
        if target not in self.pointers and target not in self.globals:
            if value in self.pointers or value in self.globals:
                raise UnsupportedError(f"a pointer into an array is stored to memory: {line.strip()}")
            return [line]
        ptr, lines, elem, space = self.element_pointer(target, ty, line)
        rest = ", ".join(operands[2:])
        rest = (", " + rest) if rest else ""
        vol = "volatile " if volatile else ""
        if elem != ty:
            raw = self.fresh()
            lines.append(f"  {raw} = bitcast {ty} {value} to {elem}")
            value, ty = raw, elem
        lines.append(f"  store {vol}{ty} {value}, ptr addrspace({space}) {ptr}{rest}")
        return lines

    # Declarations ------------------------------------------------------------

    def handle_type(self, binding):
        return f'target("spirv.VulkanBuffer", [0 x {self.elem_of(binding)}], 12, 1)'

    def _mangled(self, binding):
        code = _MANGLED[self.elem_of(binding)]
        return f"tspirv.VulkanBuffer_a0{code}_12_1t"

    def getpointer_name(self, binding):
        return f"llvm.spv.resource.getpointer.p11.{self._mangled(binding)}"

    def prologue(self):
        lines = []
        for binding in sorted(self.used_buffers):
            lines.append(
                f"  %nv.handle.{binding} = call {self.handle_type(binding)} "
                f"@llvm.spv.resource.handlefrombinding.{self._mangled(binding)}"
                f"(i32 0, i32 {binding}, i32 1, i32 0, ptr @nv.name.{binding})")
        return lines

    def declarations(self):
        lines, declared = [], set()
        for space in sorted(self.cmpxchg_spaces):
            lines.append(f"declare i32 @llvm.spv.cmpxchg.p{space}(ptr addrspace({space}), ...)")
        for callee, arity in sorted(self.wide_atomics):
            lines.append(f"declare i64 @{callee}({', '.join(['i64'] * arity)})")
        for marker, space, rank in sorted({(_element_marker(g), g.addrspace, len(g.shape))
                                           for g in self.used_globals}):
            params = ", ".join([f"ptr addrspace({space})"] + ["i32"] * rank)
            lines.append(f"declare ptr addrspace({space}) @{marker}({params}) "
                         "memory(none) nounwind")
        for binding in sorted(self.used_buffers):
            # The backend merges resources of the same name: give each its own.
            label = f"b{binding}"
            lines.append(f"@nv.name.{binding} = private unnamed_addr constant "
                         f'[{len(label) + 1} x i8] c"{label}\\00"')
            mangled = self._mangled(binding)
            if mangled in declared:
                continue
            declared.add(mangled)
            handle = self.handle_type(binding)
            lines += [
                f"declare {handle} @llvm.spv.resource.handlefrombinding.{mangled}"
                "(i32, i32, i32, i32, ptr)",
                f"declare ptr addrspace(11) @{self.getpointer_name(binding)}({handle}, i32)",
            ]
        return lines


def _element_marker(obj):
    return f"{markers.ELEMENT}{obj.addrspace}.{len(obj.shape)}"


def rewrite(text, bindings):
    """Rewrite every array access of the optimised module ``text``.

    Args:
        text: The module as printed after optimisation.
        bindings: Storage dtype name of each descriptor binding, in order.

    Returns:
        The module text with each access going through its buffer's handle.
    """
    return _Rewriter(text, list(bindings)).rewrite()


_PUSH_CALL = re.compile(
    rf"^(\s*{_LOCAL}) = (?:tail )?call (\S+) @{re.escape(markers.PUSH)}\S+\(i32 (\d+)\)\s*$")
_LOCAL_SIZE_CALL = re.compile(
    rf"^(\s*{_LOCAL}) = (?:tail )?call i32 @{re.escape(markers.LOCAL_SIZE)}\(i32 (\d)\)\s*$")
_ELEMENT_CALL = re.compile(
    rf"^(\s*{_LOCAL}) = (?:tail )?call ptr addrspace\((\d+)\) @{re.escape(markers.ELEMENT)}"
    r"[\d.]+\(ptr addrspace\(\d+\) ([@%][^,]+), (.*)\)\s*$")
_MARKERS = (markers.BUFFER, markers.PUSH, markers.LOCAL_SIZE, markers.ELEMENT)


def _global_array_types(text):
    """LLVM type of each global array variable and private array of a
    module, by name."""
    types = {}
    for line in text.splitlines():
        m = _GLOBAL_DEF.match(line) or _ALLOCA.match(line)
        if m:
            types[m.group(1)] = m.group(4)
    return types


def _push_layout(text):
    fields = {}
    for line in text.splitlines():
        m = _PUSH_CALL.match(line)
        if m:
            offset, ty = int(m.group(3)), m.group(2)
            if fields.setdefault(offset, ty) != ty:
                raise UnsupportedError(f"push constant offset {offset} read as two types")
    layout, index, position = [], {}, 0
    for offset in sorted(fields):
        while position < offset:
            layout.append("i32")
            position += 4
        index[offset] = len(layout)
        layout.append(fields[offset])
        position += _SCALAR_SIZES[fields[offset]]
    return layout, index


def lower_markers(text, local_size):
    """Replace the push constant and workgroup size markers, and make ``main``
    the compute entry point with workgroup size ``local_size``.

    This runs after the last optimisation: LLVM would fold the push constant
    accesses into byte-offset expressions that the backend cannot lower.
    """
    layout, index = _push_layout(text)
    arrays = _global_array_types(text)
    out, counter = [], 0
    for line in text.splitlines():
        m = _ELEMENT_CALL.match(line)
        if m:
            name, space, array, indices = m.groups()
            out.append(f"{name} = getelementptr inbounds {arrays[array]}, "
                       f"ptr addrspace({space}) {array}, i32 0, {indices}")
            continue
        m = _PUSH_CALL.match(line)
        if m:
            counter += 1
            name, ty, offset = m.group(1), m.group(2), int(m.group(3))
            out.append(f"  %nv.push.{counter} = getelementptr inbounds %nv.push, "
                       f"ptr addrspace(13) @nv.push, i32 0, i32 {index[offset]}")
            out.append(f"{name} = load {ty}, ptr addrspace(13) %nv.push.{counter}, align 4")
            continue
        m = _LOCAL_SIZE_CALL.match(line)
        if m:
            out.append(f"{m.group(1)} = add i32 {local_size[int(m.group(2))]}, 0")
            continue
        if line.startswith("declare") and any(re.search(f'@"?{re.escape(p)}', line)
                                              for p in _MARKERS):
            continue
        if line.startswith("define ") and f"@{_ENTRY_NAME}(" in line:
            if not line.rstrip().endswith("{"):
                raise UnsupportedError(f"unexpected kernel definition: {line}")
            x, y, z = local_size
            line = (line.rstrip()[:-1].rstrip() + f' "hlsl.shader"="compute" '
                    f'"hlsl.numthreads"="{x},{y},{z}" {{')
            if layout:
                out.append(f"%nv.push = type {{ {', '.join(layout)} }}")
                out.append("@nv.push = external hidden addrspace(13) externally_initialized "
                           "global %nv.push, align 8")
        out.append(line)
    result = "\n".join(out) + "\n"
    for prefix in _MARKERS:
        if re.search(rf"call [^\n]*@{re.escape(prefix)}", result):
            raise UnsupportedError(f"a {prefix} marker survived the rewrite")
    return result
