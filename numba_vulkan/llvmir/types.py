"""Sizes, alignments and field offsets of LLVM types written as text.

The IR model keeps types as LLVM prints them (``[4 x { float, float }]``,
``<{ i8, double }>``, ``%Record``); this module reads such a type into a
small tree and lays it out as the data layout of LLVM's logical SPIR-V
target does (:data:`numba_vulkan.codegen.pipeline.DATA_LAYOUT`): scalars
aligned to their size, vectors as its ``v`` entries say, structures padded
to their largest field's alignment unless packed.
"""

from dataclasses import dataclass

from numba_vulkan.base.errors import UnsupportedError
from numba_vulkan.llvmir import ir

#: Size in bytes of each scalar type (a pointer of any address space: ``ptr``).
SCALAR_SIZES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "half": 2, "bfloat": 2,
                "float": 4, "double": 8, "ptr": 8}
#: Vector alignments of the data layout, by the vector's size in bits.
_VECTOR_ALIGN = {16: 2, 24: 4, 32: 4, 48: 8, 64: 8, 96: 16, 128: 16, 192: 32, 256: 32,
                 512: 64, 1024: 128}


@dataclass(frozen=True)
class Scalar:
    """An integer, float or pointer type, by its name (``ptr`` for any pointer)."""

    name: str


@dataclass(frozen=True)
class Array:
    """``[count x elem]``, or the vector ``<count x elem>``."""

    count: int
    elem: object
    vector: bool = False


@dataclass(frozen=True)
class Struct:
    """``{ fields }``, or the packed ``<{ fields }>``."""

    fields: tuple
    packed: bool = False


class UnknownType(UnsupportedError):
    """A type that has no layout: ``void``, a label, an opaque target type."""


def _round_up(value, align):
    """``value`` rounded up to a multiple of ``align``."""
    return -(-value // align) * align


class Layout:
    """The layout of the types of one module.

    Args:
        named: The module's named types, the text of each by its name
            (:meth:`numba_vulkan.llvmir.ir.Module.named_types`).
    """

    def __init__(self, named=None):
        self.named = dict(named or {})

    def parse(self, text):
        """The type tree of ``text``, its named types resolved."""
        text = text.strip()
        if text in self.named:
            return self.parse(self.named[text])
        if text.startswith("ptr"):
            return Scalar("ptr")
        if text in SCALAR_SIZES:
            return Scalar(text)
        if text.startswith("<{") and text.endswith("}>"):
            return Struct(tuple(map(self.parse, ir.items(text[2:-2]))), packed=True)
        if text.startswith("{") and text.endswith("}"):
            return Struct(tuple(map(self.parse, ir.items(text[1:-1]))))
        if text[:1] in "[<" and text[-1:] in "]>":
            count, x, elem = text[1:-1].partition(" x ")
            if x and count.isdigit():
                return Array(int(count), self.parse(elem), vector=text[0] == "<")
        raise UnknownType(f"type {text} cannot be addressed in a Vulkan kernel")

    def _tree(self, ty):
        return self.parse(ty) if isinstance(ty, str) else ty

    def size_align(self, ty):
        """``(size, alignment)`` in bytes of ``ty`` (text or a tree)."""
        ty = self._tree(ty)
        if isinstance(ty, Scalar):
            size = SCALAR_SIZES[ty.name]
            return size, size
        if isinstance(ty, Array):
            size, align = self.size_align(ty.elem)
            if ty.vector:
                bits = ty.count * size * 8
                align = _VECTOR_ALIGN.get(bits, 1 << max(bits - 1, 1).bit_length() >> 3)
                return _round_up(ty.count * size, align), align
            return ty.count * _round_up(size, align), align
        _, size, align = self.struct_layout(ty)
        return size, align

    def stride(self, ty):
        """The distance in bytes between consecutive elements of type ``ty``."""
        return _round_up(*self.size_align(ty))

    def struct_layout(self, ty):
        """``(offsets, size, alignment)`` of the structure ``ty``: each
        field's offset in bytes, in order."""
        ty = self._tree(ty)
        offsets, offset, align = [], 0, 1
        for field in ty.fields:
            size, field_align = self.size_align(field)
            if ty.packed:
                field_align = 1
            offset = _round_up(offset, field_align)
            offsets.append(offset)
            offset += size
            align = max(align, field_align)
        return offsets, _round_up(offset, align), align

    def preferred_align(self, text):
        """The alignment LLVM gives an ``alloca`` of ``text`` that names
        none: at least 8 for a structure."""
        ty = self._tree(text)
        while isinstance(ty, Array) and not ty.vector:
            ty = ty.elem
        align = self.size_align(ty)[1]
        return max(align, 8) if isinstance(ty, Struct) else align


def leaves(ty):
    """The scalar types of the tree ``ty``'s leaves, in memory order."""
    if isinstance(ty, Scalar):
        return [ty.name]
    if isinstance(ty, Array):
        return leaves(ty.elem) * ty.count
    return [leaf for field in ty.fields for leaf in leaves(field)]
