"""Argument types as plain text, without Numba.

A launch must find its compiled kernel without importing Numba (an app
that ships its kernels ahead of time never compiles). So argument types
have a canonical text form that the dispatcher computes from the values
and that AOT indexes and cache keys store: a scalar is its dtype name
(``float32``), an array is ``dtype[Nd,L]`` with layout ``C`` (C-contiguous)
or ``A`` (any strides), e.g. ``float32[1d,C]``. A record (structured)
dtype is spelled as :func:`numba_vulkan.base.records.text` gives it: an array of
them ``{x:float32@0,n:int32@4;8}[1d,C]``, a record scalar (``numpy.void``)
``{x:float32@0,n:int32@4;8}``. A tuple of numbers is its items' types in
parentheses, ``(float64,int64)``; it travels as the record of those fields
laid out as a C struct would be (:func:`tuple_record`).
"""

import re

import numpy as np

from numba_vulkan.base import records
from numba_vulkan.base.abi import SCALAR_DTYPES

_ARRAY = re.compile(r"^(\w+|\{.*\})\[(\d+)d,([CA])\]$")

# Launches look scalars up by their exact type: getattr on a value without
# ``type_text`` raises and catches an AttributeError, which costs more than
# the rest of of_value. Subclasses take the general path below.
_SCALAR_TYPES = {bool: "bool", int: "int64", float: "float64", complex: "complex128",
                 **{np.dtype(name).type: name for name in SCALAR_DTYPES}}


def array(dtype, ndim, layout):
    """The text form of an array type."""
    return f"{dtype_text(dtype)}[{ndim}d,{layout}]"


def dtype_text(dtype):
    """The text form of an array's dtype: its name, or a record's text."""
    dtype = np.dtype(dtype)
    if dtype.names is not None:
        return records.text(dtype)
    return "bool" if dtype == np.bool_ else dtype.name


#: The types a tuple argument's items may have.
TUPLE_ITEMS = frozenset(name for name in SCALAR_DTYPES if not name.startswith("complex"))


def tuple_items(text):
    """The item types of a tuple in text form (``"(float64,int64)"``), or
    None if ``text`` is not a tuple's."""
    if not (text.startswith("(") and text.endswith(")")):
        return None
    items = text[1:-1].split(",")
    if not all(item in TUPLE_ITEMS for item in items):
        raise ValueError(f"not a kernel argument type: {text!r} (a tuple's items are "
                         "booleans, integers or floats)")
    return items


#: What a tuple item narrower than 32 bits travels as, as a scalar argument does.
_WIDENED = {"bool": "uint32", "int8": "int32", "int16": "int32", "uint8": "uint32",
            "uint16": "uint32", "float16": "float32"}


def tuple_record(text):
    """The record text a tuple travels as: field ``f0``, ``f1``, ... per item
    (one narrower than 32 bits widened, as a scalar argument is), each at its
    natural alignment."""
    items = tuple_items(text)
    return records.text(np.dtype([(f"f{k}", _WIDENED.get(item, item))
                                  for k, item in enumerate(items)], align=True))


def argument_spec(name, text):
    """How an argument of type ``text`` is laid out, as the spec
    :func:`numba_vulkan.base.abi.layout` takes: ``(name, kind, dtype, ndim,
    layout)``. A record is passed by reference, as numba.cuda passes it: as
    an array of one record, which the kernel writes in place (a tuple, which
    travels as a record too, stays a scalar)."""
    kind, dtype, ndim, layout = parse(text)
    if kind == "scalar" and records.is_record(dtype) and not text.startswith("("):
        return name, "array", dtype, 1, "A"
    return name, kind, dtype, ndim, layout


def parse(text):
    """``(kind, dtype, ndim, layout)`` of a type in text form (a tuple's dtype
    is the record it travels as)."""
    if text.startswith("("):
        return "scalar", tuple_record(text), 0, "C"
    m = _ARRAY.match(text)
    if m:
        if records.is_record(m.group(1)):
            try:
                records.dtype(m.group(1))
            except (ValueError, TypeError, IndexError, AttributeError):
                raise ValueError(f"not a kernel argument type: {text!r}") from None
        return "array", m.group(1), int(m.group(2)), m.group(3)
    if text in SCALAR_DTYPES:
        return "scalar", text, 0, "C"
    if records.is_record(text):
        try:
            records.dtype(text)
        except (ValueError, TypeError, IndexError, AttributeError):
            raise ValueError(f"not a kernel argument type: {text!r}") from None
        return "scalar", text, 0, "C"
    raise ValueError(f"not a kernel argument type: {text!r}")


def of_value(value):
    """The text form of a launch argument's type.

    Python ints are int64, floats float64, as in Numba; NumPy scalars keep
    their dtype; arrays (NumPy or device) are C or A by their strides.
    """
    text = _SCALAR_TYPES.get(type(value))
    if text is not None:
        return text
    text = getattr(value, "type_text", None)
    if text is not None:
        return text
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, complex):
        return "complex128"
    if isinstance(value, np.void) and value.dtype.names is not None:
        return records.text(value.dtype)
    if isinstance(value, tuple) and value:
        items = [of_value(item) for item in value]
        if all(item in TUPLE_ITEMS for item in items):
            return f"({','.join(items)})"
        raise TypeError("a tuple passed to a kernel holds booleans, integers or floats, not "
                        + ", ".join(sorted(set(items) - TUPLE_ITEMS)))
    if isinstance(value, np.generic):
        name = value.dtype.name
        if name in SCALAR_DTYPES:
            return name
        raise TypeError(f"scalars of dtype {name} cannot be passed to a kernel")
    if not isinstance(value, np.ndarray):
        raise TypeError(f"a value of type {type(value).__name__} cannot be passed to a kernel "
                        "(pass a NumPy array, a device array or a scalar)")
    dtype, shape = value.dtype, value.shape
    if dtype.names is not None:
        return array(dtype, len(shape), "C" if value.flags.c_contiguous else "A")
    name = "bool" if dtype == np.bool_ else np.dtype(dtype).name
    if name not in SCALAR_DTYPES:
        raise TypeError(f"arrays of dtype {name} cannot be passed to a kernel")
    return array(name, len(shape), "C" if value.flags.c_contiguous else "A")
