"""``print()`` in kernels and device functions: each call becomes a record.

A call writes a record into the kernel's print buffer, laid out as
:mod:`numba_vulkan.base.printbuffer` describes: the id of its format, then the
bits of its value arguments. The format (the call's constant strings and
the kind of each value) is the host's to keep: it is registered here under
an id hashed from it, so that equal call sites get equal ids in every
process and the IR (and so the kernel cache key) stays stable, and
:func:`formats` recovers the formats a kernel's modules use for its
metadata.

The buffer's binding is not known while a device function is lowered (it
is compiled once for every kernel that calls it), so a call reaches the
buffer through a marker function named after its format
(:func:`numba_vulkan.llvmir.markers.print_buffer`), which the kernel's
entry point defines once its parameters are known.
"""

import hashlib
import json
import re
import threading

from llvmlite import ir
from numba.core import types
from numba.core.imputils import Registry

from numba_vulkan.base import printbuffer
from numba_vulkan.llvmir import markers
from numba_vulkan.base.errors import UnsupportedError

lowering_registry = Registry("numba_vulkan.printing")

_i8, _i32, _i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)

_lock = threading.Lock()
#: Every format lowered in this process: id -> items.
_formats = {}

_MARKER = re.compile(re.escape(markers.PRINT) + r"(\d+)")


def _format_id(items):
    digest = hashlib.sha256(json.dumps(items, sort_keys=True).encode()).digest()
    # Never 0: a word the kernel did not write reads as no format.
    return int.from_bytes(digest[:4], "little") % (2 ** 31 - 1) + 1


def _text(ty):
    """What a constant argument prints as, or None if it is not one."""
    if isinstance(ty, types.StringLiteral):
        return ty.literal_value
    if isinstance(ty, (types.IntegerLiteral, types.BooleanLiteral)):
        return str(ty.literal_value)
    if isinstance(ty, types.NoneType):
        return "None"
    return None


def _float_words(context, builder, value, bits):
    """(kind, words) of a float: float64 as two words, or on a target that
    narrows it as the float32 it is computed in."""
    if bits == 16:
        return "float16", [builder.bitcast(builder.fpext(value, ir.FloatType()), _i32)]
    if bits == 32:
        return "float32", [builder.bitcast(value, _i32)]
    if getattr(context, "float64_narrowed", False):
        return "float32", [builder.bitcast(builder.fptrunc(value, ir.FloatType()), _i32)]
    # Through a vector: a target may have float64 without int64.
    pair = builder.bitcast(value, ir.VectorType(_i32, 2))
    return "float64", [builder.extract_element(pair, ir.Constant(_i32, k)) for k in range(2)]


def _value_words(context, builder, ty, value):
    """(kind, words) of a value argument, or None if it cannot be printed."""
    if isinstance(ty, types.Boolean):
        return "bool", [builder.zext(value, _i32)]
    if isinstance(ty, types.Integer):
        kind = "int" if ty.signed else "uint"
        if ty.bitwidth < 32:
            return kind + "32", [(builder.sext if ty.signed else builder.zext)(value, _i32)]
        if ty.bitwidth == 32:
            return kind + "32", [value]
        if getattr(context, "int64_narrowed", False):
            return kind + "32", [builder.trunc(value, _i32)]
        high = builder.lshr(value, ir.Constant(_i64, 32))
        return kind + "64", [builder.trunc(value, _i32), builder.trunc(high, _i32)]
    if isinstance(ty, types.Float):
        return _float_words(context, builder, value, ty.bitwidth)
    if isinstance(ty, types.Complex):
        parts = context.make_complex(builder, ty, value)
        bits = ty.underlying_float.bitwidth
        words = []
        for part in (parts.real, parts.imag):
            kind, part_words = _float_words(context, builder, part, bits)
            words += part_words
        return ("complex64" if kind == "float32" else "complex128"), words
    return None


def _word(builder, base, index):
    """A pointer to word ``index`` (an i32) of the buffer at ``base``."""
    offset = builder.mul(builder.zext(index, _i64), ir.Constant(_i64, 4))
    return builder.gep(base, [offset], source_etype=_i8)


def _write_record(builder, format_id, words):
    """Reserve a record's words and write them, or count the call as dropped."""
    base = markers.print_buffer(builder, format_id)
    size = ir.Constant(_i32, 1 + len(words))

    def header(field):
        return _word(builder, base, ir.Constant(_i32, field))

    start = builder.atomic_rmw("add", header(printbuffer.RESERVED), size, "monotonic")
    capacity = builder.load(header(printbuffer.CAPACITY), typ=_i32, align=4)
    end = builder.add(start, size)
    # An end below the start: the counter wrapped, which is past the end too.
    fits = builder.and_(builder.icmp_unsigned("<=", end, capacity),
                        builder.icmp_unsigned(">=", end, start))
    with builder.if_else(fits) as (then, otherwise):
        with then:
            first = builder.add(start, ir.Constant(_i32, printbuffer.HEADER_WORDS))
            for k, word in enumerate([ir.Constant(_i32, format_id)] + words):
                index = builder.add(first, ir.Constant(_i32, k)) if k else first
                builder.store(word, _word(builder, base, index), align=4)
        with otherwise:
            builder.atomic_rmw("add", header(printbuffer.DROPPED), ir.Constant(_i32, 1),
                               "monotonic")
            # The one call whose record straddles the end marks where the
            # written records end.
            with builder.if_then(builder.icmp_unsigned("<", start, capacity)):
                builder.store(start, header(printbuffer.END), align=4)


@lowering_registry.lower(print, types.VarArg(types.Any))
def print_call(context, builder, sig, args):
    """A ``print(...)`` of ints, floats, complex numbers, booleans and
    constant strings (and None), which the host prints after the launch."""
    items, words = [], []
    for number, (ty, value) in enumerate(zip(sig.args, args), 1):
        text = _text(ty)
        if text is not None:
            items.append({"text": text})
            continue
        found = _value_words(context, builder, ty, value)
        if found is None:
            what = ("a string that is not a constant" if isinstance(ty, types.UnicodeType)
                    else f"a {ty}")
            raise UnsupportedError(
                f"print() in a kernel takes ints, floats, complex numbers, booleans and "
                f"constant strings; argument {number} is {what}")
        kind, value_words = found
        items.append({"value": kind})
        words += value_words
    format_id = _format_id(items)
    with _lock:
        _formats[format_id] = items
    _write_record(builder, format_id, words)
    return context.get_dummy_value()


def formats(modules):
    """The print formats the IR ``modules`` use: ``{str(id): items}``
    (``metadata["print"]`` of :mod:`numba_vulkan.base.printbuffer`), empty if
    they call no ``print``."""
    ids = {int(m) for text in modules for m in _MARKER.findall(text)}
    with _lock:
        return {str(k): [dict(item) for item in _formats[k]] for k in sorted(ids)}
