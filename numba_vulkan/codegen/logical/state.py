"""What the logical addressing rewrite knows about one kernel's memory.

A :class:`Kernel` holds the entry function being rewritten, the objects it
addresses (buffers by binding, :class:`Object` for the rest), the object and
offset of each pointer value, and what the later steps decided about each
object's element type; the rewrite's steps read and extend it in turn (see
:func:`numba_vulkan.codegen.logical.rewrite` for their order).
"""

import math
from dataclasses import dataclass

from numba_vulkan.base import records
from numba_vulkan.base.errors import UnsupportedError
from numba_vulkan.llvmir import markers, types
from numba_vulkan.codegen.entrypoint import ENTRY_NAME

#: LLVM element type of a buffer, by storage dtype.
ELEMENT_TYPES = {
    "bool": "i8", "int8": "i8", "uint8": "i8", "int16": "i16", "uint16": "i16",
    "int32": "i32", "uint32": "i32", "int64": "i64", "uint64": "i64",
    "float16": "half", "float32": "float", "float64": "double",
    # A complex array is an array of its parts (see numba_vulkan.base.abi).
    "complex64": "float", "complex128": "double",
}

#: An alignment no access needs: that of a buffer's start, of a constant 0.
ALIGNED = 1 << 16
#: Initialisers that give an object no contents to keep.
EMPTY = ("undef", "poison", "zeroinitializer")
#: Scope of an atomic on memory of an LLVM address space (default: Device).
ATOMIC_SCOPES = {3: "workgroup"}


@dataclass(eq=False)
class Object:
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
class Pointer:
    #: The object pointed into: a buffer's binding (int), an :class:`Object`
    #: or a :class:`Choice`.
    object: object
    offset: str
    #: For a :class:`Choice`, the i32 value naming the member pointed into.
    selector: str = None


@dataclass(eq=False)
class Choice:
    """Objects that one pointer may point into and that cannot become one
    array (two buffers, a buffer and a workgroup array): the pointer carries
    which member it points into as an index into ``members``."""

    members: tuple


class Kernel:
    """The entry function of ``module`` and what is known of its memory.

    Args:
        module: The IR model of the single-function module, rewritten in place.
        bindings: Storage dtype name of each descriptor binding, in order.
    """

    def __init__(self, module, bindings):
        self.module = module
        self.main = module.function(f"@{ENTRY_NAME}")
        self.bindings = bindings
        self.layout = types.Layout(module.named_types())
        self.counter = 0
        #: :class:`Object` by name, the objects other than buffers.
        self.objects = {}
        #: :class:`Pointer` by the name of each pointer value.
        self.pointers = {}
        #: Objects holding records that are not buffers, see :meth:`is_record`.
        self.record_objects = set()
        #: The power of two each pointer's byte offset is a multiple of.
        self.alignments = {}
        #: The element type of each record array, by binding or object.
        self.units = {}
        #: The integer element type an object takes for atomics on its bits.
        self.views = {}
        #: Bindings whose handles the entry block makes.
        self.used_buffers = set()
        #: ``(address space, rank)`` of each element marker called.
        self.used_globals = set()
        #: Address spaces of the compare-and-swap intrinsics called.
        self.cmpxchg_spaces = set()
        #: ``(callee, arity)`` of each 64-bit atomic called.
        self.wide_atomics = set()
        #: The condition guarding each store to a member of a choice, by id.
        self.guarded = {}

    def fresh(self):
        """A new value name."""
        self.counter += 1
        return f"%nv.{self.counter}"

    def pointer_inputs(self, inst):
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

    def object_of(self, value):
        """The object ``value`` points into, or None."""
        if isinstance(value, int):
            return value
        if value in self.objects:
            return self.objects[value]
        pointer = self.pointers.get(value)
        return None if pointer is None else pointer.object

    def tracked(self, value):
        """Whether ``value`` is a pointer into an object."""
        return isinstance(value, str) and (value in self.pointers or value in self.objects)

    def offset_of(self, value):
        """The i64 byte offset of the pointer ``value`` in its object."""
        if value in self.pointers:
            return self.pointers[value].offset
        if value in self.objects or value in ("poison", "undef", "null"):
            return "0"
        raise UnsupportedError(f"pointer {value} does not point into a known array")

    def is_record(self, obj):
        """Whether ``obj`` holds records: a record array's buffer, or a byte
        array that the kernel reads as other types (``nv.shared.array`` or
        ``nv.local.array`` of records)."""
        if isinstance(obj, int):
            return records.is_record(self.bindings[obj])
        return obj in self.record_objects

    def record_bytes(self, obj):
        """The size in bytes of a record of ``obj``'s (of an object: all of it)."""
        if isinstance(obj, int):
            return records.dtype(self.bindings[obj]).itemsize
        return obj.count

    def natural_elem(self, obj):
        """The element type of ``obj`` as its dtype or definition gives it."""
        if isinstance(obj, int) and self.is_record(obj):
            # A buffer no access types: words, where they divide the itemsize.
            return self.units.get(obj, "i8" if self.record_bytes(obj) % 4 else "i32")
        if isinstance(obj, int):
            return ELEMENT_TYPES[self.bindings[obj]]
        return obj.elem

    def elem_of(self, obj):
        """The element type ``obj`` is declared with in the rewritten module."""
        return self.views.get(obj, self.natural_elem(obj))
