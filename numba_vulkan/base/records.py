"""NumPy structured (record) dtypes as kernel argument types, without Numba.

A record array's storage buffer holds the NumPy bytes exactly: the same
field offsets, padding and itemsize as the dtype, packed or
``align=True`` alike, so copies in and out are plain byte copies. A
kernel's field access is a byte-offset access; the compiler types it by
the alignment it can prove (see :mod:`numba_vulkan.codegen.logical`).

Launches and AOT indexes need a record's type as text (see
:mod:`numba_vulkan.base.signature`). The text form spells every field with its
offset, and the itemsize, so that it names one layout:
``{x:float32@0,n:int32@4;8}``, fields in offset order; a subarray field is ``v:float32[3]@8``
(``[2x3]`` for two dimensions), and a nested record is a field whose type
is a record's text. Nothing else: a packed and an ``align=True`` dtype of
the same offsets are the same type (NumPy compares them equal too).
"""

import functools
import re

import numpy as np

#: Field dtypes a record may hold, by name.
FIELD_DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32",
                "int64", "uint64", "float16", "float32", "float64", "complex64",
                "complex128")

_NAME = re.compile(r"^[A-Za-z_]\w*$")
_SCALAR = re.compile(r"(\w+)")
_NUMBER = re.compile(r"(\d+)")


def is_record(text):
    """Whether a dtype in text form is a record's."""
    return text.startswith("{")


def text(dtype):
    """The text form of the structured dtype ``dtype`` (see :func:`_text`)."""
    return _text(np.dtype(dtype), "")


@functools.lru_cache(maxsize=256)
def _text(dtype, where):
    """The text form of the structured dtype ``dtype``.

    Raises:
        TypeError: A field cannot be laid out in a kernel's buffer (its
            dtype is not one of :data:`FIELD_DTYPES`, a record or a
            subarray of those; its name is not an identifier; it has a
            title); the message names the field.
    """
    if dtype.names is None:
        raise TypeError(f"{dtype} is not a structured dtype")
    fields = []
    # In offset order: Numba's record type lists its fields so, and the
    # text of a dtype must not depend on which of the two it came from.
    for name in sorted(dtype.names, key=lambda n: dtype.fields[n][1]):
        entry = dtype.fields[name]
        path = f"{where}.{name}" if where else name
        if len(entry) > 2:
            raise TypeError(f"record field {path!r} has a title; kernels take fields "
                            "without titles")
        if not _NAME.match(name):
            raise TypeError(f"record field {path!r}: a field name must be a Python "
                            "identifier in a kernel argument")
        field, offset = entry[0], entry[1]
        fields.append(f"{name}:{_field_text(field, path)}@{offset}")
    return "{" + ",".join(fields) + f";{dtype.itemsize}" + "}"


def _field_text(field, path):
    shape = ""
    if field.subdtype is not None:
        field, dims = field.subdtype
        shape = "[" + "x".join(map(str, dims)) + "]"
    if field.names is not None:
        return _text(field, path) + shape
    name = "bool" if field == np.bool_ else field.name
    if name not in FIELD_DTYPES or field.byteorder == ">":
        raise TypeError(f"record field {path!r} has dtype {field}, which a kernel cannot "
                        f"read; use one of {', '.join(FIELD_DTYPES)}, a record or a "
                        "fixed-size array of those")
    return name + shape


@functools.lru_cache(maxsize=256)
def dtype(text_form):
    """The NumPy dtype of a record's text form (the inverse of :func:`text`).

    Raises:
        ValueError: ``text_form`` is not the text :func:`text` gives for the
            dtype it spells (text read from an AOT index or the cache is
            checked so, field dtypes and names included).
    """
    parsed, end = _parse(text_form, 0)
    try:
        canonical = text(parsed)
    except TypeError as exc:
        raise ValueError(f"not a record type: {text_form!r}: {exc}") from None
    if end != len(text_form) or canonical != text_form:
        raise ValueError(f"not a record type: {text_form!r}")
    return parsed


def _parse(s, at):
    if s[at:at + 1] != "{":
        raise ValueError(f"not a record type: {s!r}")
    at += 1
    names, formats, offsets = [], [], []
    while True:
        colon = s.index(":", at)
        names.append(s[at:colon])
        at = colon + 1
        if s[at] == "{":
            field, at = _parse(s, at)
        else:
            m = _SCALAR.match(s, at)
            field, at = np.dtype(m.group(1)), m.end()
        if s[at] == "[":
            close = s.index("]", at)
            field = np.dtype((field, tuple(int(d) for d in s[at + 1:close].split("x"))))
            at = close + 1
        if s[at] != "@":
            raise ValueError(f"not a record type: {s!r}")
        m = _NUMBER.match(s, at + 1)
        formats.append(field)
        offsets.append(int(m.group(1)))
        at = m.end()
        if s[at] == ";":
            break
        at += 1
    m = _NUMBER.match(s, at + 1)
    at = m.end()
    if s[at] != "}":
        raise ValueError(f"not a record type: {s!r}")
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": int(m.group(1))}), at + 1


def scalar_fields(record, where=""):
    """``(path, dtype name, byte offset)`` of every scalar a record holds,
    subarray elements one by one, in field order."""
    out = []
    for name in record.names:
        field, offset = record.fields[name][:2]
        path = f"{where}.{name}" if where else name
        shape = ()
        if field.subdtype is not None:
            field, shape = field.subdtype
        for k, index in enumerate(np.ndindex(*shape)):
            at = offset + k * field.itemsize
            label = path + (f"[{', '.join(map(str, index))}]" if shape else "")
            if field.names is not None:
                out += [(p, n, at + o) for p, n, o in scalar_fields(field, label)]
            else:
                out.append((label, "bool" if field == np.bool_ else field.name, at))
    return out


def field_of(text_form, names):
    """The path of the record's first field whose dtype is one of ``names``,
    or None."""
    for path, name, _ in scalar_fields(dtype(text_form)):
        if name in names:
            return path
    return None


def element_view(record):
    """A record scalar (``numpy.void``) as a writable array of one record
    that shares its memory: for ``a[i]`` of a structured array, a view of that
    element, so that a kernel's writes to the record reach ``a``, as
    numba.cuda passes records by reference; for a record of no array, or of
    a read-only one, a copy (whose writes go nowhere)."""
    owner = record.base
    while isinstance(owner, np.ndarray) and isinstance(owner.base, np.ndarray):
        owner = owner.base
    if isinstance(owner, np.ndarray) and owner.flags.writeable and \
            (owner.flags.c_contiguous or owner.flags.f_contiguous):
        offset = (record.__array_interface__["data"][0]
                  - owner.__array_interface__["data"][0])
        if 0 <= offset <= owner.nbytes - record.dtype.itemsize:
            return np.ndarray((1,), record.dtype, buffer=owner.reshape(-1, order="A")
                              .view(np.uint8), offset=offset)
    return np.array([record], record.dtype)
