"""Rewrite optimised LLVM IR for SPIR-V's logical addressing model.

Numba computes addresses the way a CPU does: an array's data pointer plus a
byte offset. Vulkan shaders have no such pointers; an access names an object
(a storage buffer, a module-level variable or a private variable) and an
element index. After inlining and optimisation every address in a kernel is
the base of one object plus an offset: a buffer base (the ``__nv.buffer.K``
markers), a global (a workgroup array, a global NumPy array, libclc's
constant tables) or an alloca. This pass tracks, for each pointer value,
which object it points into and its byte offset as an i64, and turns each
load and store into an access to element ``offset / itemsize`` of that
object. It also replaces the push constant and workgroup size markers.

It works on the :mod:`numba_vulkan.llvmir.ir` model of the single-function
module. First it legalises, in the model, what SPIR-V cannot express:
constant expressions over objects become instructions, private variables
that a phi or select chooses between become one array, objects of complex
elements become arrays of their parts, and constant byte arrays are retyped
to what the kernel reads. Anything it cannot prove safe (a pointer that may
point into two buffers, a pointer passed to a call, an access whose size
differs from the buffer's element size) raises :class:`UnsupportedError`
naming the instruction, rather than producing a wrong module.
"""

import math
import struct
from dataclasses import dataclass

from numba_vulkan.base import records
from numba_vulkan.codegen import fixups
from numba_vulkan.llvmir import ir
from numba_vulkan.llvmir import markers
from numba_vulkan.base.errors import UnsupportedError

_ENTRY_NAME = "main"

#: LLVM element type and its intrinsic-name mangling, by storage dtype.
ELEMENT_TYPES = {
    "bool": ("i8", "i8"), "int8": ("i8", "i8"), "uint8": ("i8", "i8"),
    "int16": ("i16", "i16"), "uint16": ("i16", "i16"),
    "int32": ("i32", "i32"), "uint32": ("i32", "i32"),
    "int64": ("i64", "i64"), "uint64": ("i64", "i64"),
    "float16": ("half", "f16"), "float32": ("float", "f32"), "float64": ("double", "f64"),
    # A complex array is an array of its parts (see numba_vulkan.base.abi).
    "complex64": ("float", "f32"), "complex128": ("double", "f64"),
}

_SCALAR_SIZES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "half": 2,
                 "float": 4, "double": 8, "ptr": 8}
#: How intrinsic names spell each element type.
_MANGLED = {"i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "half": "f16",
            "float": "f32", "double": "f64"}
#: An alignment no access needs: that of a buffer's start, of a constant 0.
_ALIGNED = 1 << 16


class MixedFloatAtomics(UnsupportedError):
    """An array takes both a native float atomic add and a compare-and-swap
    loop on its bits; SPIR-V cannot type one buffer both ways. The compiler
    then uses compare-and-swap loops for the adds too."""


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
        if text[:1] in "[<" and text[-1:] in "]>":
            count, x, elem = text[1:-1].partition(" x ")
            if x and count.isdigit():
                return ("array", int(count), self.parse(elem))
        if text.startswith("<{") and text.endswith("}>"):
            return ("struct", True, [self.parse(t) for t in ir.items(text[2:-2])])
        if text.startswith("{") and text.endswith("}"):
            return ("struct", False, [self.parse(t) for t in ir.items(text[1:-1])])
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


@dataclass(eq=False)
class _Object:
    """An object other than a buffer that the kernel addresses: a
    module-level variable (a constant table, a workgroup array) or a private
    array (an alloca).

    Attributes:
        name: Its ``@name`` or ``%name``.
        addrspace: Its LLVM address space.
        shape: Extents of its nested array type, outermost first.
        elem: The LLVM scalar type of its elements.
        definition: Its :class:`ir.Global` or ``alloca`` instruction.
        retype: Whether its definition must be rewritten to ``shape`` and
            ``elem`` (its elements were aggregates, such as complex numbers).
        copies: For a constant byte array (how Numba stores a global NumPy
            array), which accesses may read as another type: the copy of it
            typed so, by type.
    """

    name: str
    addrspace: int
    shape: tuple
    elem: str
    definition: object
    retype: bool = False
    copies: object = None

    @property
    def count(self):
        return math.prod(self.shape)

    def array_type(self, elem=None):
        text = elem or self.elem
        for extent in reversed(self.shape):
            text = f"[{extent} x {text}]"
        return text


@dataclass
class _Pointer:
    #: The object pointed into: a buffer's binding (int), an :class:`_Object`
    #: or a :class:`_Choice`.
    object: object
    offset: str
    #: For a :class:`_Choice`, the i32 value naming the member pointed into.
    selector: str = None


@dataclass(eq=False)
class _Choice:
    """Objects that one pointer may point into and that cannot become one
    array (two buffers, a buffer and a workgroup array): the pointer carries
    which member it points into as an index into ``members``."""

    members: tuple


#: Scope of an atomic on memory of an LLVM address space (default: Device).
_ATOMIC_SCOPES = {3: "workgroup"}
_SPIRV_SCOPES = {"device": 1, "workgroup": 2}
_EMPTY = ("undef", "poison", "zeroinitializer")


def _leaves(ty):
    """The scalar leaves of a parsed type, in memory order."""
    if ty[0] == "scalar":
        return [ty[1]]
    if ty[0] == "array":
        return _leaves(ty[2]) * ty[1]
    return [leaf for field in ty[2] for leaf in _leaves(field)]


class _Rewriter:
    def __init__(self, module, bindings):
        self.module = module
        self.main = module.function(f"@{_ENTRY_NAME}")
        self.bindings = bindings
        self.counter = 0
        self.pointers = {}
        self.used_buffers = set()
        self.used_globals = set()
        self.cmpxchg_spaces = set()
        self.wide_atomics = set()
        self.views = {}
        self.types = _Types(module.named_types())
        self.objects = self._find_objects()

    def fresh(self):
        self.counter += 1
        return f"%nv.{self.counter}"

    def run(self):
        self._materialise_constants()
        conflicts = self.analyse()
        if conflicts and self._merge_objects(conflicts):
            conflicts = self.analyse()
        if conflicts:
            self._choose(conflicts)
        self.record_objects = self._byte_objects()
        self.alignments = self._alignments()
        self._merge_byte_accesses()
        self.units = self._record_units()
        for obj in self.record_objects:
            if obj in self.units:
                unit = self.units[obj]
                obj.shape, obj.elem = (obj.count // _SCALAR_SIZES[unit],), unit
                obj.retype = True
        self.views = self.atomic_views()
        self.guarded = {}
        for block in self.main.blocks:
            out = []
            for inst in block.instructions:
                out.extend(self.rewrite_instruction(inst))
            block.instructions = out
        if self.guarded:
            self._guard_stores()
        entry = self.main.blocks[0].instructions
        entry[0:0] = [ir.instruction(text) for text in self.prologue()]
        for text in self.declarations():
            self.module.add(text)
        for obj in self.objects.values():
            self._retype(obj)

    # Objects -----------------------------------------------------------------

    def _find_objects(self):
        """Module-level variables and private variables (allocas) that are
        scalars or (nested) arrays of one scalar type: constant tables,
        workgroup arrays, private arrays."""
        found = {}
        for g in self.module.globals.values():
            if g.init is not None:
                self._add_object(found, g.name, g.addrspace, g.type, g)
        for inst in self.main.instructions():
            if inst.opcode == "alloca" and not inst.operands:
                self._add_object(found, inst.name, 0, inst.type, inst)
        return found

    def _add_object(self, found, name, space, text, definition):
        try:
            ty = self.types.parse(text)
        except UnsupportedError:
            return
        shape = []
        while ty[0] == "array":
            shape.append(ty[1])
            ty = ty[2]
        leaves = _leaves(ty)
        if "ptr" in leaves or len(set(leaves)) != 1:
            return
        init = getattr(definition, "init", None)
        retype = len(leaves) > 1
        if retype:
            # An aggregate element (a complex number) is one more dimension,
            # as its parts: only where no initialiser needs retyping too.
            if init is not None and init not in _EMPTY:
                return
            shape.append(len(leaves))
        is_bytes = (getattr(definition, "kind", "") == "constant" and leaves[0] == "i8"
                    and str(init).startswith('c"') and len(shape) == 1)
        found[name] = _Object(name, space, tuple(shape), leaves[0], definition, retype,
                              {} if is_bytes else None)

    def _retype(self, obj):
        view = self.views.get(obj)
        if not (obj.retype or view):
            return
        definition = obj.definition
        if view and isinstance(definition, ir.Global) and definition.init not in _EMPTY:
            raise UnsupportedError(f"atomics on initialised array {obj.name}")
        definition.type = obj.array_type(view)

    def _typed_copy(self, obj, access_type, inst):
        """The constant byte array ``obj`` as an array of ``access_type``: a
        copy of it with its bytes re-encoded (Numba may store two global
        NumPy arrays of equal bytes as one, read as two types)."""
        if access_type == obj.elem:
            return obj
        if access_type not in obj.copies:
            size = _SCALAR_SIZES.get(access_type)
            if size is None or access_type == "ptr" or obj.count % size:
                raise UnsupportedError(
                    f"an access of {access_type} into an array of i8: {inst}")
            copy = _Object(f"{obj.name}.as.{access_type}", obj.addrspace,
                           (obj.count // size,), access_type, None)
            init = _constant_array(_c_string(obj.definition.init), access_type)
            copy.definition = self.module.add(
                f"{copy.name} = internal unnamed_addr constant {copy.array_type()} {init}, "
                f"align {size}")
            self.objects[copy.name] = obj.copies[access_type] = copy
        return obj.copies[access_type]

    # Constant expressions --------------------------------------------------

    def _materialise_constants(self):
        """Make each constant expression over an object (a cast of a
        workgroup array, an offset into it) instructions, which the rest of
        this pass tracks like any other pointer. A phi's become instructions
        at the end of the incoming block."""
        at_end, made = {}, {}
        for block in self.main.blocks:
            out = []
            for inst in block.instructions:
                if inst.opcode == "phi":
                    for operand, label in zip(inst.operands, inst.labels):
                        if self._mentions_object(operand.value):
                            # A block that branches here twice gives one value.
                            key = (label, str(operand.value))
                            if key not in made:
                                made[key] = self._as_instructions(
                                    operand.value, at_end.setdefault(label, []))
                            operand.value = made[key]
                else:
                    for operand in inst.operands:
                        if self._mentions_object(operand.value):
                            operand.value = self._as_instructions(operand.value, out)
                out.append(inst)
            block.instructions = out
        for block in self.main.blocks:
            extra = at_end.get(f"%{block.label}", [])
            block.instructions[-1:-1] = extra

    def _mentions_object(self, value):
        return isinstance(value, ir.Instruction) and any(
            isinstance(v, str) and v in self.objects for _, v in value.values())

    def _as_instructions(self, expr, out):
        for operand in expr.operands:
            if isinstance(operand.value, ir.Instruction):
                operand.value = self._as_instructions(operand.value, out)
        expr.name = self.fresh()
        out.append(expr)
        return expr.name

    # Which values point into which object ------------------------------------

    def analyse(self):
        """Find the object and offset of every pointer; return the phis and
        selects whose operands point into different objects."""
        self.pointers = {}
        changed = True
        while changed:
            changed = False
            for inst in self.main.instructions():
                if inst.name is None or inst.name in self.pointers:
                    continue
                found = [o for o in map(self._object_of, self._pointer_inputs(inst))
                         if o is not None]
                if found:
                    self.pointers[inst.name] = _Pointer(found[0], self.fresh())
                    changed = True
        conflicts = []
        for inst in self.main.instructions():
            if inst.opcode in ("phi", "select"):
                found = {self._object_of(v) for v in self._pointer_inputs(inst)}
                found.discard(None)
                if len(found) > 1:
                    conflicts.append((inst, found))
        return conflicts

    def _pointer_inputs(self, inst):
        """The values a pointer-valued instruction derives from; a buffer
        marker's binding."""
        if inst.opcode == "call" and inst.callee.startswith(f"@{markers.BUFFER}"):
            return [int(inst.callee[len(markers.BUFFER) + 1:])]
        if inst.opcode in ("getelementptr", "addrspacecast"):
            return [inst.operands[0].value]
        if inst.opcode == "phi" and inst.type.startswith("ptr"):
            return [o.value for o in inst.operands]
        if inst.opcode == "select" and str(inst.operands[1].type).startswith("ptr"):
            return [o.value for o in inst.operands[1:]]
        return []

    def _object_of(self, value):
        if isinstance(value, int):
            return value
        if value in self.objects:
            return self.objects[value]
        pointer = self.pointers.get(value)
        return None if pointer is None else pointer.object

    def _mergeable(self, obj):
        """Whether ``obj`` may become part of a larger object: a private
        variable, or a workgroup array (no contents to keep)."""
        if not isinstance(obj, _Object):
            return False
        if isinstance(obj.definition, ir.Instruction):
            return True
        return obj.addrspace == 3 and obj.definition.init in _EMPTY

    def _merge_objects(self, conflicts):
        """Make objects that one pointer may point into (the pieces that
        scalar replacement split a private array into, chosen by a phi; two
        workgroup arrays chosen by a select) one array, each a range of it:
        Vulkan can choose between pointers only with the VariablePointers
        capability, but between indices always. Returns whether any merged;
        the conflicts between objects that cannot merge are left to
        :meth:`_choose`."""
        groups = []
        for _, found in conflicts:
            if not all(map(self._mergeable, found)) or \
                    len({o.addrspace for o in found}) != 1 or \
                    len({o.elem for o in found}) != 1:
                continue
            for group in [g for g in groups if g & found]:
                groups.remove(group)
                found = found | group
            groups.append(set(found))
        for group in groups:
            self._merge(sorted(group, key=lambda o: o.name))
        return bool(groups)

    def _choose(self, conflicts):
        """Pointers that may point into one of several objects (``x[i] if c
        else y[i]`` after LLVM sank the two loads into one): each pointer
        derived from such a choice carries a selector beside its offset, and
        each access through it reads every member (at offset 0 in those not
        selected, so that no read leaves its object) and selects the value,
        or stores to the selected member alone, behind a branch."""
        groups = []
        for _, found in conflicts:
            for group in [g for g in groups if g & found]:
                groups.remove(group)
                found = found | group
            groups.append(set(found))
        choice_of = {}
        for group in groups:
            choice = _Choice(tuple(sorted(group, key=_object_key)))
            choice_of.update((member, choice) for member in group)
        chosen = {inst.name for inst, _ in conflicts}
        changed = True
        while changed:
            changed = False
            for inst in self.main.instructions():
                if inst.name in self.pointers and inst.name not in chosen and \
                        any(v in chosen for v in self._pointer_inputs(inst)):
                    chosen.add(inst.name)
                    changed = True
        for name in chosen:
            pointer = self.pointers[name]
            pointer.object = choice_of[pointer.object]
            pointer.selector = f"{self.fresh()}.sel"

    def _merge(self, members):
        elem, space = members[0].elem, members[0].addrspace
        count = sum(o.count for o in members)
        entry = self.main.blocks[0].instructions
        if space == 0:
            merged = _Object(f"%nv.private{self.fresh()[3:]}", 0, (count,), elem, None)
            merged.definition = ir.instruction(
                f"{merged.name} = alloca {merged.array_type()}, align 16")
            entry.insert(0, merged.definition)
        else:
            merged = _Object(f"@nv.workgroup{self.fresh()[3:]}", space, (count,), elem, None)
            merged.definition = self.module.add(
                f"{merged.name} = internal unnamed_addr addrspace({space}) global "
                f"{merged.array_type()} undef, align 16")
        pointer = f"ptr addrspace({space})"
        offset, pieces = 0, []
        for o in members:
            # Each member becomes a pointer to its range, defined first in
            # the entry block (after the merged alloca) so that it dominates
            # every use.
            local = o.name if space == 0 else self.fresh()
            pieces.append(ir.instruction(
                f"{local} = getelementptr inbounds i8, {pointer} {merged.name}, "
                f"i64 {offset * _SCALAR_SIZES[elem]}"))
            if space == 0:
                for block in self.main.blocks:
                    if o.definition in block.instructions:
                        block.instructions.remove(o.definition)
            else:
                self.module.items.remove(o.definition)
                for inst in self.main.instructions():
                    for holder, value in inst.values():
                        if value == o.name:
                            holder.value = local
            del self.objects[o.name]
            offset += o.count
        entry[1 if space == 0 else 0:1 if space == 0 else 0] = pieces
        self.objects[merged.name] = merged

    def _guard_stores(self):
        """Put each store to a member of a choice in a block of its own that
        runs only where that member is the one selected."""
        blocks = self.main.blocks
        k = 0
        while k < len(blocks):
            block = blocks[k]
            at = next((i for i, inst in enumerate(block.instructions)
                       if id(inst) in self.guarded), None)
            if at is None:
                k += 1
                continue
            if block.label is None:
                raise UnsupportedError("a store through a pointer that may point into two "
                                       "arrays, in an unnamed entry block")
            store = block.instructions[at]
            chosen = self.guarded.pop(id(store))
            then, rest = f"nv.store{self.fresh()[3:]}", f"nv.join{self.fresh()[3:]}"
            tail = block.instructions[at + 1:]
            block.instructions[at:] = [ir.instruction(
                f"br i1 {chosen}, label %{then}, label %{rest}")]
            blocks[k + 1:k + 1] = [ir.Block(then, [store, ir.instruction(f"br label %{rest}")]),
                                   ir.Block(rest, tail)]
            for successor in _successors(tail[-1]):
                for inst in self._block(successor).instructions:
                    if inst.opcode == "phi":
                        inst.labels = [f"%{rest}" if label == f"%{block.label}" else label
                                       for label in inst.labels]
            k += 2

    def _block(self, label):
        return next(b for b in self.main.blocks if f"%{b.label}" == label)

    # Atomics ---------------------------------------------------------------

    def atomic_views(self):
        """Element types that objects take to serve atomics on their bits.

        A compare-and-swap loop on a float array accesses its elements as
        integers of the same size; SPIR-V's atomics need the array itself
        typed so, and every other access then bitcasts.
        """
        views = {}
        for inst in self.main.instructions():
            if inst.opcode not in ("atomicrmw", "cmpxchg"):
                continue
            obj = self._object_of(inst.operands[0].value)
            if obj is None:
                continue
            if isinstance(obj, _Choice):
                raise UnsupportedError("an atomic through a pointer that may point into two "
                                       f"different arrays: {inst}")
            if self.is_record(obj):
                continue
            ty, natural = inst.operands[1].type, self.natural_elem(obj)
            if ty != natural:
                if not ty.startswith("i") or views.setdefault(obj, ty) != ty or \
                        _SCALAR_SIZES[ty] != _SCALAR_SIZES[natural]:
                    raise UnsupportedError(f"an atomic access of {ty} into an array of "
                                           f"{natural}: {inst}")
        for inst in self.main.instructions():
            if inst.opcode == "atomicrmw" and "fadd" in inst.flags and \
                    self._object_of(inst.operands[0].value) in views:
                raise MixedFloatAtomics("a native float atomic add and a compare-and-swap "
                                        f"loop on the same array: {inst}")
        return views

    def natural_elem(self, obj):
        if isinstance(obj, int) and self.is_record(obj):
            # A buffer no access types: words, where they divide the itemsize.
            return self.units.get(obj, "i8" if self._record_bytes(obj) % 4 else "i32")
        if isinstance(obj, int):
            return ELEMENT_TYPES[self.bindings[obj]][0]
        return obj.elem

    def elem_of(self, obj):
        return self.views.get(obj, self.natural_elem(obj))

    def rewrite_atomic(self, inst):
        ty = inst.operands[1].type
        out = []
        ptr, elem, space = self.element_pointer(inst.operands[0].value, ty, inst, out)
        if space == 0:
            raise UnsupportedError("atomics on a private array (nv.local.array): Vulkan has "
                                   f"atomics on buffers and workgroup memory only: {inst}")
        scope = _ATOMIC_SCOPES.get(space, "device")
        values = [o.value for o in inst.operands[1:]]
        if ty == "i64":
            return out + self.wide_atomic(inst, values, ptr, space, scope)
        if inst.opcode == "atomicrmw":
            op = next(f for f in inst.flags if f != "volatile")
            out.append(ir.instruction(
                f"{inst.name} = atomicrmw {op} ptr addrspace({space}) {ptr}, {ty} {values[0]} "
                f'syncscope("{scope}") monotonic, align {_SCALAR_SIZES[ty]}'))
            return out
        expected, value = values
        old, ok, half = self.fresh(), self.fresh(), self.fresh()
        self.cmpxchg_spaces.add(space)
        # LLVM's backend cannot lower cmpxchg for Vulkan; its own intrinsic
        # can (see numba_vulkan.codegen.fixups for the result it builds).
        return out + [ir.instruction(text) for text in (
            f"{old} = call {ty} (ptr addrspace({space}), ...) @llvm.spv.cmpxchg.p{space}("
            f"ptr addrspace({space}) {ptr}, {ty} {expected}, {ty} {value}, "
            f"i32 {_SPIRV_SCOPES[scope]}, i32 0, i32 0)",
            f"{ok} = icmp eq {ty} {old}, {expected}",
            f"{half} = insertvalue {{ {ty}, i1 }} poison, {ty} {old}, 0",
            f"{inst.name} = insertvalue {{ {ty}, i1 }} {half}, i1 {ok}, 1")]

    def wide_atomic(self, inst, values, ptr, space, scope):
        """A 64-bit atomic as a call that :mod:`numba_vulkan.codegen.fixups`
        turns into the SPIR-V instruction.

        LLVM's backend refuses 64-bit atomics for Vulkan (it offers no
        ``Int64Atomics`` capability there). The call takes the element
        through a volatile load, so that the module keeps the element
        pointer next to it; the repair reads the pointer from that load and
        drops it.
        """
        loaded = self.fresh()
        out = [f"{loaded} = load volatile i64, ptr addrspace({space}) {ptr}, align 8"]
        code = _SPIRV_SCOPES[scope]
        if inst.opcode == "atomicrmw":
            op = next(f for f in inst.flags if f != "volatile")
            callee = f"{fixups.WIDE_ATOMIC}{op}.{code}"
            self.wide_atomics.add((callee, 2))
            out.append(f"{inst.name} = call i64 @{callee}(i64 {loaded}, i64 {values[0]})")
        else:
            expected, value = values
            callee = f"{fixups.WIDE_ATOMIC}cmpxchg.{code}"
            self.wide_atomics.add((callee, 3))
            old, ok, half = self.fresh(), self.fresh(), self.fresh()
            out += [f"{old} = call i64 @{callee}(i64 {loaded}, i64 {expected}, i64 {value})",
                    f"{ok} = icmp eq i64 {old}, {expected}",
                    f"{half} = insertvalue {{ i64, i1 }} poison, i64 {old}, 0",
                    f"{inst.name} = insertvalue {{ i64, i1 }} {half}, i1 {ok}, 1"]
        return [ir.instruction(text) for text in out]

    # Rewriting ---------------------------------------------------------------

    def _tracked(self, value):
        return isinstance(value, str) and (value in self.pointers or value in self.objects)

    def rewrite_instruction(self, inst):
        if inst.name in self.pointers:
            return self.rewrite_pointer(inst, self.pointers[inst.name])
        if inst.opcode in ("load", "store") and "atomic" not in inst.flags:
            target = inst.operands[0 if inst.opcode == "load" else 1].value
            if self._tracked(target):
                return self.rewrite_access(inst, target)
            if inst.opcode == "store" and self._tracked(inst.operands[0].value):
                raise UnsupportedError(f"a pointer into an array is stored to memory: {inst}")
            return [inst]
        if inst.opcode in ("atomicrmw", "cmpxchg") and \
                self._object_of(inst.operands[0].value) is not None:
            return self.rewrite_atomic(inst)
        if inst.opcode == "call" and inst.callee.startswith("@llvm.lifetime."):
            # Lifetime hints of private arrays: Vulkan has none to give.
            return []
        if inst.opcode == "alloca" and inst.name in self.objects:
            return [inst]
        for _, value in inst.values():
            if isinstance(value, str) and self._tracked(value):
                raise UnsupportedError(
                    f"a pointer into an array is used in a way Vulkan cannot express: {inst}")
        return [inst]

    def rewrite_pointer(self, inst, pointer):
        out = self._offset(inst, pointer)
        if pointer.selector is not None:
            out.append(self._selector(inst, pointer))
        return out

    def _offset(self, inst, pointer):
        if inst.opcode == "call":
            self.used_buffers.add(pointer.object)
            return [ir.instruction(f"{pointer.offset} = add i64 0, 0")]
        if inst.opcode == "getelementptr":
            return self.gep_offset(inst, pointer)
        if inst.opcode == "addrspacecast":
            return [ir.instruction(
                f"{pointer.offset} = add i64 {self.offset_of(inst.operands[0].value)}, 0")]
        if inst.opcode == "phi":
            return [ir.Instruction("phi", [ir.Operand(None, self.offset_of(o.value))
                                           for o in inst.operands],
                                   name=pointer.offset, type="i64", labels=list(inst.labels))]
        cond, a, b = inst.operands
        return [ir.instruction(f"{pointer.offset} = select {cond}, i64 {self.offset_of(a.value)}, "
                               f"i64 {self.offset_of(b.value)}")]

    def _selector(self, inst, pointer):
        """Which member of its choice ``inst``'s pointer points into."""
        choice = pointer.object
        if inst.opcode == "phi":
            return ir.Instruction("phi", [ir.Operand(None, self.selector_of(o.value, choice))
                                          for o in inst.operands],
                                  name=pointer.selector, type="i32", labels=list(inst.labels))
        if inst.opcode == "select":
            cond, a, b = inst.operands
            return ir.instruction(
                f"{pointer.selector} = select {cond}, i32 {self.selector_of(a.value, choice)}, "
                f"i32 {self.selector_of(b.value, choice)}")
        return ir.instruction(f"{pointer.selector} = add i32 "
                              f"{self.selector_of(inst.operands[0].value, choice)}, 0")

    def selector_of(self, value, choice):
        pointer = self.pointers.get(value)
        if pointer is not None and pointer.object is choice:
            return pointer.selector
        if value in ("poison", "undef", "null"):
            return "0"
        return str(choice.members.index(self._object_of(value)))

    def offset_of(self, value):
        if value in self.pointers:
            return self.pointers[value].offset
        if value in self.objects or value in ("poison", "undef", "null"):
            return "0"
        raise UnsupportedError(f"pointer {value} does not point into a known array")

    def gep_offset(self, inst, pointer):
        base = self.offset_of(inst.operands[0].value)
        out, terms = [], []
        current = ("array", 0, self.types.parse(inst.type))
        for operand in inst.operands[1:]:
            idx_type, idx = operand.type, str(operand.value)
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
            if idx.lstrip("-").isdigit():
                if int(idx):
                    terms.append(str(int(idx) * stride))
                continue
            if idx_type != "i64":
                wide = self.fresh()
                out.append(f"{wide} = sext {idx_type} {idx} to i64")
                idx = wide
            if stride != 1:
                scaled = self.fresh()
                out.append(f"{scaled} = mul i64 {idx}, {stride}")
                idx = scaled
            terms.append(idx)
        total = base
        for term in terms:
            nxt = self.fresh()
            out.append(f"{nxt} = add i64 {total}, {term}")
            total = nxt
        out.append(f"{pointer.offset} = add i64 {total}, 0")
        return [ir.instruction(text) for text in out]

    def element_pointer(self, value, access_type, inst, out):
        """The element of ``value``'s object that an access of
        ``access_type`` at ``value`` reaches: ``(pointer, element type,
        address space)``; the instructions computing it go to ``out``."""
        obj = self._object_of(value)
        if isinstance(obj, _Choice):
            raise UnsupportedError(
                f"an atomic through a pointer that may point into two different arrays: {inst}")
        return self.element_pointer_at(obj, self.offset_of(value), access_type, inst, out)

    def element_pointer_at(self, obj, offset, access_type, inst, out):
        """:meth:`element_pointer` of the element at byte ``offset`` of ``obj``."""
        if isinstance(obj, _Object):
            return self.object_element_pointer(obj, offset, access_type, inst, out)
        storage = self.bindings[obj]
        elem = self.elem_of(obj)
        size = _SCALAR_SIZES[elem]
        if access_type != elem:
            acc = self.types.size_align(self.types.parse(access_type))[0]
            if acc != size or access_type == "ptr":
                raise UnsupportedError(
                    f"an access of {access_type} into an array of {storage}: {inst}")
        self.used_buffers.add(obj)
        index, index32, ptr = self.fresh(), self.fresh(), self.fresh()
        shift = size.bit_length() - 1
        out += [ir.instruction(text) for text in (
            f"{index} = ashr exact i64 {offset}, {shift}",
            f"{index32} = trunc i64 {index} to i32",
            f"{ptr} = call ptr addrspace(11) @{self.getpointer_name(obj)}"
            f"({self.handle_type(obj)} %nv.handle.{obj}, i32 {index32})")]
        return ptr, elem, 11

    def object_element_pointer(self, obj, offset, access_type, inst, out):
        """A pointer to the element at byte ``offset`` of an object: one
        index per dimension, as SPIR-V's OpAccessChain needs."""
        if obj.copies is not None:
            obj = self._typed_copy(obj, access_type, inst)
        elem = self.elem_of(obj)
        size = _SCALAR_SIZES[elem]
        if access_type != elem:
            acc = self.types.size_align(self.types.parse(access_type))[0]
            if acc != size or access_type == "ptr":
                raise UnsupportedError(
                    f"an access of {access_type} into an array of {elem}: {inst}")
        if not obj.shape:
            return obj.name, elem, obj.addrspace
        flat = self.fresh()
        lines = [f"{flat} = ashr exact i64 {offset}, {size.bit_length() - 1}"]
        indices = []
        for k, extent in enumerate(obj.shape):
            index, index32 = self.fresh(), self.fresh()
            lines.append(f"{index} = udiv i64 {flat}, {math.prod(obj.shape[k + 1:])}")
            if k:
                wrapped = self.fresh()
                lines.append(f"{wrapped} = urem i64 {index}, {extent}")
                index = wrapped
            lines.append(f"{index32} = trunc i64 {index} to i32")
            indices.append(f"i32 {index32}")
        self.used_globals.add((obj.addrspace, len(obj.shape)))
        ptr = self.fresh()
        lines.append(f"{ptr} = call ptr addrspace({obj.addrspace}) "
                     f"@{_element_marker(obj.addrspace, len(obj.shape))}("
                     f"ptr addrspace({obj.addrspace}) {obj.name}, {', '.join(indices)})")
        out += [ir.instruction(text) for text in lines]
        return ptr, elem, obj.addrspace

    def rewrite_access(self, inst, target):
        """A load or store through a tracked pointer, as an access to the
        element of its object."""
        load = inst.opcode == "load"
        ty = inst.type if load else inst.operands[0].type
        if isinstance(self._object_of(target), _Choice):
            return self.rewrite_chosen_access(inst, target, ty)
        obj = self._object_of(target)
        if self.is_record(obj):
            return self.record_access(inst, target, ty, obj)
        out = []
        ptr, elem, space = self.element_pointer(target, ty, inst, out)
        return out + self.access(inst, ty, ptr, elem, space)

    def rewrite_chosen_access(self, inst, target, ty):
        """A load or store through a pointer into one member of a choice."""
        pointer = self.pointers[target]
        out, values = [], []
        for k, member in enumerate(pointer.object.members):
            chosen, offset = self.fresh(), self.fresh()
            out += [ir.instruction(f"{chosen} = icmp eq i32 {pointer.selector}, {k}"),
                    ir.instruction(f"{offset} = select i1 {chosen}, i64 "
                                   f"{self.offset_of(target)}, i64 0")]
            ptr, elem, space = self.element_pointer_at(member, offset, ty, inst, out)
            if inst.opcode == "load":
                value = self.fresh()
                out += self.access(inst, ty, ptr, elem, space, name=value)
                values.append((chosen, value))
            else:
                stores = self.access(inst, ty, ptr, elem, space)
                self.guarded[id(stores[-1])] = chosen
                out += stores
        if values:
            result = values[-1][1]
            for k, (chosen, value) in reversed(list(enumerate(values[:-1]))):
                name = inst.name if k == 0 else self.fresh()
                out.append(ir.instruction(f"{name} = select i1 {chosen}, {ty} {value}, "
                                          f"{ty} {result}"))
                result = name
        return out

    def access(self, inst, ty, ptr, elem, space, name=None):
        """``inst``, a load or store of ``ty``, at element pointer ``ptr``; a
        load's result is ``name`` (default: the load's own)."""
        load = inst.opcode == "load"
        name = name or inst.name
        out = []
        flags = "".join(f"{f} " for f in inst.flags)
        where = f"ptr addrspace({space}) {ptr}{inst.tail}"
        if load and elem != ty:
            raw = self.fresh()
            out += [ir.instruction(f"{raw} = load {flags}{elem}, {where}"),
                    ir.instruction(f"{name} = bitcast {elem} {raw} to {ty}")]
        elif load:
            out.append(ir.instruction(f"{name} = load {flags}{ty}, {where}"))
        else:
            value = inst.operands[0].value
            if elem != ty:
                raw = self.fresh()
                out.append(ir.instruction(f"{raw} = bitcast {ty} {value} to {elem}"))
                value, ty = raw, elem
            out.append(ir.instruction(f"store {flags}{ty} {value}, {where}"))
        return out

    # Records ---------------------------------------------------------------

    def is_record(self, obj):
        """Whether ``obj`` holds records: a record array's buffer, or a byte
        array that the kernel reads as other types (``nv.shared.array`` or
        ``nv.local.array`` of records)."""
        if isinstance(obj, int):
            return records.is_record(self.bindings[obj])
        return obj in self.record_objects

    def _record_bytes(self, obj):
        """The size in bytes of a record of ``obj``'s (of an object: all of it)."""
        if isinstance(obj, int):
            return records.dtype(self.bindings[obj]).itemsize
        return obj.count

    def _byte_objects(self):
        """Workgroup and private byte arrays (without contents) that some
        access reads or writes as another type: arrays of records."""
        found = set()
        for inst in self.main.instructions():
            if inst.opcode == "load":
                target, ty = inst.operands[0].value, inst.type
            elif inst.opcode == "store":
                target, ty = inst.operands[1].value, inst.operands[0].type
            else:
                continue
            obj = self._object_of(target)
            if isinstance(obj, _Object) and obj.elem == "i8" and ty != "i8" and \
                    obj.copies is None and getattr(obj.definition, "init", None) in \
                    _EMPTY + (None,):
                found.add(obj)
        return found

    def _alignments(self):
        """The power of two that each pointer's byte offset is known to be a
        multiple of, by pointer name.

        A record array's buffer holds NumPy's bytes, so the alignment of a
        field access is not given by its type: it is what the offset's terms
        prove (record index times itemsize plus the field's offset). An
        offset the analysis cannot see through counts as aligned to 1, which
        costs speed (an access assembled from bytes), never correctness.
        """
        defs = {inst.name: inst for inst in self.main.instructions() if inst.name}
        known = {}

        def integer(value):
            text = str(value)
            if text.lstrip("-").isdigit():
                return _power_of_two(int(text))
            if text in known:
                return known[text]
            known[text] = 1      # a value on a cycle (a loop counter): unknown
            inst, result = defs.get(text), 1
            if inst is not None:
                values = [o.value for o in inst.operands]
                op = inst.opcode
                if op in ("add", "sub", "or", "xor", "phi"):
                    result = min(map(integer, values))
                elif op == "select":
                    result = min(integer(values[1]), integer(values[2]))
                elif op == "mul":
                    result = min(integer(values[0]) * integer(values[1]), _ALIGNED)
                elif op == "shl" and str(values[1]).isdigit():
                    result = min(integer(values[0]) << int(str(values[1])), _ALIGNED)
                elif op == "and":
                    result = max(map(integer, values))
                elif op in ("sext", "zext", "trunc"):
                    result = integer(values[0])
            known[text] = result
            return result

        aligns = dict.fromkeys(self.pointers, _ALIGNED)

        def pointer(value):
            if value in aligns:
                return aligns[value]
            return _ALIGNED if value in self.objects or value in _EMPTY + ("null",) else 1

        changed = True
        while changed:
            changed = False
            for inst in self.main.instructions():
                if inst.name not in aligns:
                    continue
                inputs = self._pointer_inputs(inst)
                if inst.opcode == "getelementptr":
                    found = min([pointer(inputs[0])] + self._gep_alignments(inst, integer))
                elif inst.opcode == "call":
                    found = _ALIGNED
                else:
                    found = min(map(pointer, inputs))
                if found < aligns[inst.name]:
                    aligns[inst.name] = found
                    changed = True
        return aligns

    def _merge_byte_accesses(self):
        """Make each four byte loads (or stores) of a record array at the
        offsets of one aligned 32-bit word one access of the word.

        Numba's record value is its bytes, so a whole-record assignment
        (``b[i] = a[i]``) reaches here as one byte access per byte, which
        would make the buffer's unit a byte. Only accesses that nothing
        else touching memory separates are merged: loads in a run of loads
        whose results are not used inside the run, stores in a run of
        stores, all through one base pointer at distinct offsets.
        """
        geps = {i.name: i for i in self.main.instructions() if i.opcode == "getelementptr"}
        for block in self.main.blocks:
            insts = block.instructions
            runs, current = [], None
            for k, inst in enumerate(insts):
                access = self._byte_access(inst)
                if access is not None:
                    base, offset = self._byte_address(access[1], geps)
                    if current is None or current[0] != (access[0], base):
                        current = ((access[0], base), {})
                        runs.append(current)
                    if offset in current[1]:
                        current = None
                        continue
                    current[1][offset] = k
                elif inst.opcode in ("load", "store", "atomicrmw", "cmpxchg", "call", "fence"):
                    current = None
            replaced = {}
            for (op, base), at in runs:
                if self.alignments.get(base, _ALIGNED if base in self.objects else 1) < 4:
                    continue
                for offset in sorted(at):
                    quad = [at.get(offset + j) for j in range(4)]
                    if offset % 4 or None in quad:
                        continue
                    first, last = min(quad), max(quad)
                    if op == "load" and self._used_between(insts, quad, first, last):
                        continue
                    replaced.update((k, []) for k in quad)
                    replaced[last] = self._word_access(op, [insts[k] for k in quad])
            if replaced:
                block.instructions = [new for k, inst in enumerate(insts)
                                      for new in replaced.get(k, [inst])]

    def _byte_access(self, inst):
        """``(opcode, pointer)`` of a plain byte load or store into a record
        array, else None."""
        if inst.opcode == "load" and inst.type == "i8":
            target = inst.operands[0].value
        elif inst.opcode == "store" and inst.operands[0].type == "i8":
            target = inst.operands[1].value
        else:
            return None
        if "volatile" in inst.flags or "atomic" in inst.flags or \
                not self.is_record(self._object_of(target)):
            return None
        return inst.opcode, target

    @staticmethod
    def _byte_address(pointer, geps):
        """``(base, offset)``: a pointer as a base pointer plus a constant."""
        gep = geps.get(pointer)
        if gep is not None and gep.type == "i8" and len(gep.operands) == 2 and \
                str(gep.operands[1].value).isdigit():
            return gep.operands[0].value, int(str(gep.operands[1].value))
        return pointer, 0

    @staticmethod
    def _used_between(insts, quad, first, last):
        names = {insts[k].name for k in quad}
        return any(value in names for inst in insts[first:last + 1]
                   for _, value in inst.values())

    def _word_access(self, op, accesses):
        """One 32-bit access in place of four byte accesses, in byte order."""
        tail = _with_align(accesses[0].tail, 4)
        ptr = accesses[0].operands[0 if op == "load" else 1].value
        lines = []
        if op == "load":
            word = self.fresh()
            lines.append(f"{word} = load i32, ptr {ptr}{tail}")
            for j, inst in enumerate(accesses):
                moved = self.fresh()
                lines += [f"{moved} = lshr i32 {word}, {8 * j}",
                          f"{inst.name} = trunc i32 {moved} to i8"]
        else:
            total = None
            for j, inst in enumerate(accesses):
                wide, part = self.fresh(), self.fresh()
                lines += [f"{wide} = zext i8 {inst.operands[0].value} to i32",
                          f"{part} = shl i32 {wide}, {8 * j}"]
                if total is not None:
                    joined = self.fresh()
                    lines.append(f"{joined} = or i32 {total}, {part}")
                    part = joined
                total = part
            lines.append(f"store i32 {total}, ptr {ptr}{tail}")
        return [ir.instruction(text) for text in lines]

    def _gep_alignments(self, inst, integer):
        """The alignment of each term a ``getelementptr`` adds to its base."""
        out = []
        current = ("array", 0, self.types.parse(inst.type))
        for operand in inst.operands[1:]:
            idx = str(operand.value)
            if current[0] == "struct":
                offsets, _, _ = self.types.struct_layout(current)
                out.append(_power_of_two(offsets[int(idx)]))
                current = current[2][int(idx)]
                continue
            size, align = self.types.size_align(current[2])
            current = current[2]
            out.append(min(_power_of_two(_round(size, align)) * integer(idx), _ALIGNED))
        return out

    def _record_units(self):
        """The element type of each record array's buffer, by binding.

        A buffer has one element type, the largest unit that every access
        to it is a whole number of, at an offset that is a multiple of it:
        an access of that size is one load or store, a wider one (a float64
        field of a packed dtype) is assembled from units. One type per
        buffer, rather than one variable per access type, keeps accesses to
        the same bytes from going through variables the driver may assume
        not to alias.
        """
        uses = {}
        for inst in self.main.instructions():
            if inst.opcode == "load":
                target, ty = inst.operands[0].value, inst.type
            elif inst.opcode == "store":
                target, ty = inst.operands[1].value, inst.operands[0].type
            elif inst.opcode in ("atomicrmw", "cmpxchg"):
                target, ty = inst.operands[0].value, inst.operands[1].type
            else:
                continue
            obj = self._object_of(target)
            for member in obj.members if isinstance(obj, _Choice) else (obj,):
                if not self.is_record(member):
                    continue
                size = _SCALAR_SIZES.get(ty)
                if size is None or ty in ("ptr", "i1"):
                    raise UnsupportedError(f"an access of {ty} into a record array: {inst}")
                unit = min(size, self.alignments.get(
                    target, _ALIGNED if target in self.objects else 1))
                uses.setdefault(member, []).append(
                    (unit, size, ty, inst.opcode not in ("load", "store"), inst))
        units = {}
        for binding, found in uses.items():
            # A 1- or 2-byte field at a multiple of its size lies inside one
            # 32-bit word: it is read from the word and written with atomic
            # bit operations on it, rather than making every access to the
            # array one of bytes. The words must not pass the array's end:
            # only where the itemsize is a multiple of 4.
            in_word = [use for use in found if use[1] < 4 and use[0] == use[1] and not use[3]] \
                if self._record_bytes(binding) % 4 == 0 else []
            unit = min([use[0] for use in found if use not in in_word] + [4])
            if unit < 4 or not in_word:
                unit = min(u for u, *_ in found)
            for _, size, _, atomic, inst in found:
                if atomic and size != unit:
                    raise UnsupportedError(
                        "an atomic on a record field whose offset is not a multiple of its "
                        f"size (a packed dtype): {inst}")
            typed = {ty for _, size, ty, atomic, _ in found if atomic} or \
                {ty for _, size, ty, _, _ in found if size == unit}
            if any(size < unit for _, size, *_ in found):
                typed = {"i32"}
            units[binding] = typed.pop() if len(typed) == 1 else f"i{8 * unit}"
        return units

    def record_access(self, inst, target, ty, binding):
        """A load or store of ``ty`` into a record array: one access of the
        buffer's unit, or one per unit it spans, put together."""
        elem = self.elem_of(binding)
        unit, size = _SCALAR_SIZES[elem], _SCALAR_SIZES[ty]
        tail = _with_align(inst.tail, unit)
        flags = "".join(f"{f} " for f in inst.flags)
        offset = self.offset_of(target)
        out = []
        if size < unit:
            return self.in_word_access(inst, ty, binding, offset, flags)
        if size == unit:
            ptr, elem, space = self.element_pointer_at(binding, offset, ty, inst, out)
            copy = ir.Instruction(inst.opcode, inst.operands, inst.name, inst.flags, inst.type,
                                  tail, inst.prefix, inst.callee, inst.labels)
            return out + self.access(copy, ty, ptr, elem, space)
        piece, wide = f"i{8 * unit}", f"i{8 * size}"
        pointers = []
        for k in range(size // unit):
            at = self.fresh()
            out.append(ir.instruction(f"{at} = add i64 {offset}, {k * unit}"))
            ptr, _, space = self.element_pointer_at(binding, at, elem, inst, out)
            pointers.append(ptr)
        lines = []
        if inst.opcode == "load":
            parts = []
            for k, ptr in enumerate(pointers):
                raw, bits, part = self.fresh(), self.fresh(), self.fresh()
                lines.append(f"{raw} = load {flags}{elem}, ptr addrspace({space}) {ptr}{tail}")
                if elem != piece:
                    lines.append(f"{bits} = bitcast {elem} {raw} to {piece}")
                    raw = bits
                lines.append(f"{part} = zext {piece} {raw} to {wide}")
                if k:
                    shifted = self.fresh()
                    lines.append(f"{shifted} = shl {wide} {part}, {8 * unit * k}")
                    part = shifted
                parts.append(part)
            total = parts[0]
            for k, part in enumerate(parts[1:], 2):
                name = inst.name if k == len(parts) and ty == wide else self.fresh()
                lines.append(f"{name} = or {wide} {total}, {part}")
                total = name
            if ty != wide:
                lines.append(f"{inst.name} = bitcast {wide} {total} to {ty}")
        else:
            value = self._bitcast(inst.operands[0].value, ty, wide, lines)
            for k, ptr in enumerate(pointers):
                shifted, part = self.fresh(), self.fresh()
                lines += [f"{shifted} = lshr {wide} {value}, {8 * unit * k}",
                          f"{part} = trunc {wide} {shifted} to {piece}"]
                part = self._bitcast(part, piece, elem, lines)
                lines.append(f"store {flags}{elem} {part}, ptr addrspace({space}) {ptr}{tail}")
        return out + [ir.instruction(text) for text in lines]

    def _bitcast(self, value, ty, to, lines):
        """``value``, of type ``ty``, as a ``to``: a bitcast appended to
        ``lines`` where the two differ."""
        if ty == to:
            return value
        cast = self.fresh()
        lines.append(f"{cast} = bitcast {ty} {value} to {to}")
        return cast

    def in_word_access(self, inst, ty, binding, offset, flags):
        """A load or store of a 1- or 2-byte ``ty`` inside a 32-bit word of
        a record array: the word shifted, or its bits replaced by two
        atomics, which leave the word's other bytes to whoever writes them
        (in private memory, which no other invocation writes, a load and a
        store)."""
        size = _SCALAR_SIZES[ty]
        narrow = f"i{8 * size}"
        word, low, bits, shift = self.fresh(), self.fresh(), self.fresh(), self.fresh()
        out = [ir.instruction(text) for text in (
            f"{word} = and i64 {offset}, -4", f"{low} = and i64 {offset}, 3",
            f"{bits} = shl i64 {low}, 3", f"{shift} = trunc i64 {bits} to i32")]
        ptr, _, space = self.element_pointer_at(binding, word, "i32", inst, out)
        where = f"ptr addrspace({space}) {ptr}"
        lines = []
        if inst.opcode == "load":
            raw, moved = self.fresh(), self.fresh()
            name = inst.name if ty == narrow else self.fresh()
            lines += [f"{raw} = load {flags}i32, {where}, align 4",
                      f"{moved} = lshr i32 {raw}, {shift}",
                      f"{name} = trunc i32 {moved} to {narrow}"]
            if ty != narrow:
                lines.append(f"{inst.name} = bitcast {narrow} {name} to {ty}")
        else:
            value = self._bitcast(inst.operands[0].value, ty, narrow, lines)
            wide, put, mask, keep = self.fresh(), self.fresh(), self.fresh(), self.fresh()
            lines += [f"{wide} = zext {narrow} {value} to i32",
                      f"{put} = shl i32 {wide}, {shift}",
                      f"{mask} = shl i32 {(1 << 8 * size) - 1}, {shift}",
                      f"{keep} = xor i32 {mask}, -1"]
            if space == 0:
                old, cleared, new = self.fresh(), self.fresh(), self.fresh()
                lines += [f"{old} = load i32, {where}, align 4",
                          f"{cleared} = and i32 {old}, {keep}",
                          f"{new} = or i32 {cleared}, {put}",
                          f"store i32 {new}, {where}, align 4"]
            else:
                scope = f'syncscope("{_ATOMIC_SCOPES.get(space, "device")}") monotonic, align 4'
                lines += [f"{self.fresh()} = atomicrmw and {where}, i32 {keep} {scope}",
                          f"{self.fresh()} = atomicrmw or {where}, i32 {put} {scope}"]
        return out + [ir.instruction(text) for text in lines]

    # Declarations ------------------------------------------------------------

    def handle_type(self, binding):
        return f'target("spirv.VulkanBuffer", [0 x {self.elem_of(binding)}], 12, 1)'

    def _mangled(self, binding):
        code = _MANGLED[self.elem_of(binding)]
        return f"tspirv.VulkanBuffer_a0{code}_12_1t"

    def getpointer_name(self, binding):
        return f"llvm.spv.resource.getpointer.p11.{self._mangled(binding)}"

    def prologue(self):
        return [f"%nv.handle.{binding} = call {self.handle_type(binding)} "
                f"@llvm.spv.resource.handlefrombinding.{self._mangled(binding)}"
                f"(i32 0, i32 {binding}, i32 1, i32 0, ptr @nv.name.{binding})"
                for binding in sorted(self.used_buffers)]

    def declarations(self):
        lines, declared = [], set()
        for space in sorted(self.cmpxchg_spaces):
            lines.append(f"declare i32 @llvm.spv.cmpxchg.p{space}(ptr addrspace({space}), ...)")
        for callee, arity in sorted(self.wide_atomics):
            lines.append(f"declare i64 @{callee}({', '.join(['i64'] * arity)})")
        for space, rank in sorted(self.used_globals):
            params = ", ".join([f"ptr addrspace({space})"] + ["i32"] * rank)
            lines.append(f"declare ptr addrspace({space}) @{_element_marker(space, rank)}"
                         f"({params}) memory(none) nounwind")
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


def _power_of_two(value):
    """The largest power of two dividing ``value`` (:data:`_ALIGNED` for 0)."""
    value = abs(value)
    return min(value & -value, _ALIGNED) if value else _ALIGNED


def _with_align(tail, align):
    """An access's tail with its alignment set to ``align``."""
    head, sep, rest = tail.partition(", align ")
    if not sep:
        return f", align {align}{tail}"
    digits = len(rest) - len(rest.lstrip("0123456789"))
    return f"{head}, align {align}{rest[digits:]}"


def _object_key(obj):
    """Members of a choice in a fixed order: buffers by binding, then objects
    by name."""
    return (1, obj.name) if isinstance(obj, _Object) else (0, str(obj))


def _successors(terminator):
    """Labels a terminator may branch to."""
    return [str(o.value) for o in terminator.operands if o.type == "label"]


def _element_marker(space, rank):
    return f"{markers.ELEMENT}{space}.{rank}"


def _c_string(init):
    """The bytes of an LLVM ``c"..."`` constant."""
    text, out, i = init[2:-1], bytearray(), 0
    while i < len(text):
        if text[i:i + 2] == "\\\\":
            out.append(ord("\\"))
            i += 2
        elif text[i] == "\\":
            out.append(int(text[i + 1:i + 3], 16))
            i += 3
        else:
            out.append(ord(text[i]))
            i += 1
    return bytes(out)


_STRUCT_CODES = {"i8": "b", "i16": "h", "i32": "i", "i64": "q", "half": "H", "float": "f",
                 "double": "d"}


def _constant_array(data, elem):
    """An LLVM array constant of ``elem`` holding the little-endian ``data``."""
    count = len(data) // _SCALAR_SIZES[elem]
    values = struct.unpack(f"<{count}{_STRUCT_CODES[elem]}", data)
    if elem in ("float", "double"):
        # LLVM writes both as the bits of the (exactly widened) double.
        items = [f"0x{struct.unpack('<Q', struct.pack('<d', v))[0]:016X}" for v in values]
    elif elem == "half":
        # ... and a half as its own bits (unpacked as uint16 above).
        items = [f"0xH{v:04X}" for v in values]
    else:
        items = [str(v) for v in values]
    return f"[{', '.join(f'{elem} {v}' for v in items)}]"


def rewrite(module, bindings):
    """Rewrite every array access of the optimised module, in place, to go
    through its buffer's handle.

    Args:
        module: The IR model of the module after optimisation.
        bindings: Storage dtype name of each descriptor binding, in order.
    """
    _Rewriter(module, list(bindings)).run()


_MARKERS = (markers.BUFFER, markers.PUSH, markers.LOCAL_SIZE, markers.ELEMENT)


def _marker(inst, prefix):
    """Whether ``inst`` calls a marker whose name starts with ``prefix``."""
    return inst.opcode == "call" and inst.callee.lstrip("@").strip('"').startswith(prefix)


def _lower_elements(module):
    """Replace each element marker by the ``getelementptr`` it stands for."""
    arrays = {g.name: g.type for g in module.globals.values()}
    for fn in module.functions:
        arrays.update((i.name, i.type) for i in fn.instructions() if i.opcode == "alloca")
        for block in fn.blocks or ():
            for k, inst in enumerate(block.instructions):
                if _marker(inst, markers.ELEMENT):
                    base, *indices = inst.operands
                    block.instructions[k] = ir.Instruction(
                        "getelementptr", [ir.Operand(base.type, base.value),
                                          ir.Operand("i32", "0"), *indices],
                        name=inst.name, flags=["inbounds"], type=arrays[base.value])


def _push_layout(module):
    fields = {}
    for fn in module.functions:
        for inst in fn.instructions():
            if _marker(inst, markers.PUSH):
                offset, ty = int(inst.operands[0].value), inst.type
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


def constant_local_size(module, local_size):
    """Replace each workgroup size marker of the IR model ``module`` by
    ``local_size``'s value on its axis, in place.

    The workgroup size is fixed when a kernel is compiled, so the optimiser
    may fold it: a tree reduction over ``nv.local_size(0) // 2`` steps
    unrolls as one over a constant does.
    """
    for fn in module.functions:
        for block in fn.blocks or ():
            for k, inst in enumerate(block.instructions):
                if _marker(inst, markers.LOCAL_SIZE):
                    axis = int(inst.operands[0].value)
                    block.instructions[k] = ir.instruction(
                        f"{inst.name} = add i32 {local_size[axis]}, 0")


def lower_markers(module, local_size):
    """Replace the push constant and workgroup size markers of the IR model
    ``module``, in place, and make ``main`` the compute entry point with
    workgroup size ``local_size``.

    This runs after the last optimisation: LLVM would fold the push constant
    accesses into byte-offset expressions that the backend cannot lower.
    """
    layout, index = _push_layout(module)
    _lower_elements(module)
    counter = 0
    for fn in module.functions:
        for block in fn.blocks or ():
            out = []
            for inst in block.instructions:
                if _marker(inst, markers.PUSH):
                    counter += 1
                    offset = int(inst.operands[0].value)
                    out += [ir.instruction(
                        f"%nv.push.{counter} = getelementptr inbounds %nv.push, "
                        f"ptr addrspace(13) @nv.push, i32 0, i32 {index[offset]}"),
                        ir.instruction(f"{inst.name} = load {inst.type}, "
                                       f"ptr addrspace(13) %nv.push.{counter}, align 4")]
                elif _marker(inst, markers.LOCAL_SIZE):
                    axis = int(inst.operands[0].value)
                    out.append(ir.instruction(f"{inst.name} = add i32 {local_size[axis]}, 0"))
                else:
                    out.append(inst)
            block.instructions = out
    for fn in module.functions:
        if fn.blocks is None and fn.name.lstrip("@").strip('"').startswith(_MARKERS):
            module.items.remove(fn)
    entry = module.function(f"@{_ENTRY_NAME}")
    x, y, z = local_size
    entry.header += f' "hlsl.shader"="compute" "hlsl.numthreads"="{x},{y},{z}"'
    if layout:
        module.add(f"%nv.push = type {{ {', '.join(layout)} }}", before=entry)
        module.add(ir.Global("@nv.push", ["external", "hidden", "addrspace(13)",
                                          "externally_initialized"], "global", "%nv.push",
                             tail=", align 8"), before=entry)
    for fn in module.functions:
        for inst in fn.instructions():
            for prefix in _MARKERS:
                if _marker(inst, prefix):
                    raise UnsupportedError(f"a {prefix} marker survived the rewrite")
