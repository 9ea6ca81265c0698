"""The binding interface between a compiled kernel and the runtime.

Plain data shared by the compiler, which generates code that reads its
arguments this way, and the runtime, which packs them this way; neither
imports the other. A compiled module records :data:`ABI_VERSION` and the
runtime refuses a module built for another.

The interface, version 3:

* Array argument number *k* (counting arrays only) is the storage buffer at
  descriptor set 0, binding *k*, typed as a runtime array of its storage
  dtype. Its shape, its strides and the index of its first element in the
  buffer travel as 32-bit signed integers in the push constant block, in
  that order; strides count elements, not bytes.
* Scalar arguments travel in the push constant block at their natural
  alignment; bools and 8- and 16-bit integers travel as 32-bit integers,
  float16 as float32,
  complex numbers as their real then imaginary part. An array of complex
  numbers is a runtime array of their parts: element *i* is entries *2i*
  and *2i + 1*, and shapes, strides and offsets count complex elements.
* A kernel compiled with error checks (``boundscheck=True`` or
  ``error_model="python"``) has one more storage buffer after the arrays,
  its status (:data:`STATUS_WORDS` 32-bit words, zero before the launch). An
  invocation that raises writes the exception's code (a key of the compiled
  kernel's ``metadata["exceptions"]``) to word 0 and its global invocation
  id to words 1 to 3; the runtime raises the exception after the launch.
* A kernel compiled for a target with a loop limit (lavapipe's) whose code
  has loops gets that status buffer too, even without error checks: an
  invocation whose loops reached the limit writes :data:`LOOP_LIMIT_CODE`
  there the same way (see :mod:`numba_vulkan.codegen.looplimit`).
* The push constant block starts with :data:`HEADER_SIZE` bytes that the
  runtime fills: the number of workgroups along x, y and z as 32-bit
  unsigned integers, then padding. Scalars and array fields follow in
  argument order, as many arguments as fit the target's push constant size
  (:attr:`~numba_vulkan.base.target.TargetDescription.max_push_constants`).
* The first argument that does not fit, and every argument after it, travel
  in the argument buffer instead (their :attr:`Param.spilled` is set): a
  storage buffer of 32-bit words at the binding after the arrays and the
  status buffer, laid out like the push constant block but from offset 0
  and without a header (a 64-bit value is two words, low word first). The
  runtime fills one per launch and keeps it unchanged while that launch may
  be in flight. Kernels that fit the push constant block have no argument
  buffer. (Version 1 had none: every argument was in the block, and a
  kernel whose arguments passed the device's size could not launch.)
* An array of records (a NumPy structured dtype) holds the NumPy bytes
  exactly, field offsets, padding and itemsize as the dtype has them; its
  shape, strides and offset count records. Its dtype and storage are the
  record's text form (:mod:`numba_vulkan.base.records`). Its fields are never
  narrowed: a record with a 64-bit field cannot be passed to a target that
  lacks the type. A record argument (a NumPy structured scalar, ``a[i]``)
  is passed by reference, as numba.cuda passes it: as an array of one
  record (a binding, with shape, stride and offset), which the entry point
  hands the kernel as a pointer to that record, so that its writes reach
  the caller's array. (Version 3 passed it by value, as its bytes in the
  push constant block.) A tuple of numbers still travels as the bytes of
  the record it is laid out as, padded to a multiple of 4, at a 4-byte
  boundary of the push constant block.
"""

from dataclasses import dataclass, asdict

import numpy as np

from numba_vulkan.base import records

ABI_VERSION = 4

#: Bytes at the start of the push constant block that the runtime fills.
HEADER_SIZE = 16

#: Workgroup size of ``forall`` launches (capped by the device's limit), and
#: so of AOT entries whose manifest names none.
FORALL_THREADS = 256

#: dtypes an argument may have, by name; the value is the size in bytes a
#: scalar of that dtype takes in the push constant block. Scalars narrower
#: than 32 bits travel widened to 32 (float16 as float32), which keeps 8- and
#: 16-bit types (and the device features they need) out of the block.
SCALAR_DTYPES = {
    "bool": 4,
    "int8": 4, "uint8": 4, "int16": 4, "uint16": 4,
    "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
    "float16": 4, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16,
}

#: What a 64-bit dtype becomes on a target without it.
NARROWED = {"float64": "float32", "int64": "int32", "uint64": "uint32",
            "complex128": "complex64"}

#: The 64-bit type whose absence narrows each dtype of :data:`NARROWED`.
_NARROWED_BY = {"float64": "float64", "int64": "int64", "uint64": "int64",
                "complex128": "float64"}

#: Words of the status buffer of a kernel compiled with error checks.
STATUS_WORDS = 4

#: The status code of an invocation whose loops reached the target's loop
#: limit (below the codes of raise sites, which start at 1024).
LOOP_LIMIT_CODE = 2


@dataclass(frozen=True)
class Param:
    """One kernel argument as the runtime sees it.

    Attributes:
        name: The Python parameter name.
        kind: ``"array"`` or ``"scalar"``.
        dtype: NumPy dtype name of the argument as the user passes it.
        storage: NumPy dtype name as the device stores it (differs from
            ``dtype`` only when narrowed).
        ndim: Number of dimensions (0 for scalars).
        layout: Numba layout of an array, ``"C"`` or ``"A"``.
        binding: Descriptor binding of an array, -1 for a scalar.
        offset: Byte offset in the push constant block (in the argument
            buffer if ``spilled``): the value of a scalar, or the shape
            (then strides) of an array. The status buffer (kind
            ``"status"``), the argument buffer (kind ``"args"``) and the
            print buffer (kind ``"print"``) take none.
        writable: Whether the kernel may write the array.
        spilled: Whether the argument travels in the argument buffer
            rather than in the push constant block.
    """

    name: str
    kind: str
    dtype: str
    storage: str
    ndim: int = 0
    layout: str = "C"
    binding: int = -1
    offset: int = 0
    writable: bool = True
    spilled: bool = False

    @property
    def push_size(self):
        """Bytes the argument's values occupy (in the push constant block or
        the argument buffer)."""
        if self.kind == "array":
            return 4 * (2 * self.ndim + 1)
        if self.kind in HIDDEN_KINDS:
            return 0
        return scalar_size(self.storage)

    def to_json(self):
        return asdict(self)


def storage_dtype(dtype, narrowed=()):
    """The dtype name a target with narrowing mode ``narrowed`` stores ``dtype`` as."""
    return NARROWED[dtype] if _NARROWED_BY.get(dtype) in narrowed else dtype


def scalar_size(storage):
    """Bytes a scalar of this storage dtype takes in the push constant block
    (a record's bytes padded to a multiple of 4)."""
    if records.is_record(storage):
        return _align(records.dtype(storage).itemsize, 4)
    return SCALAR_DTYPES[storage]


def _check_record(name, dtype, narrowed):
    """Refuse a record with a field the target cannot hold as laid out:
    narrowing a field would move every field after it."""
    if narrowed:
        path = records.field_of(dtype, ("int64", "uint64", "float64", "complex128"))
        if path is not None:
            raise TypeError(f"argument {name!r}: record field {path!r} is 64-bit, which "
                            "this target lacks (it narrows "
                            f"{' and '.join(narrowed)}); records keep NumPy's layout")


def _align(offset, alignment):
    return (offset + alignment - 1) // alignment * alignment


def layout(args, narrowed=(), checks=False, max_push=None, printing=False, loop_status=False):
    """Assign bindings and push constant offsets to kernel arguments.

    Args:
        args: ``(name, kind, dtype, ndim, layout)`` per argument, in order.
        narrowed: dtype names that the target narrows (see :data:`NARROWED`).
        checks: Whether the kernel reports errors through a status buffer.
        max_push: The target's push constant size in bytes; the arguments
            from the first that would end past it on travel in the argument
            buffer. None: everything in the push constant block.
        printing: Whether the kernel calls ``print`` (and so has a print buffer).
        loop_status: Whether a kernel without ``checks`` has a status buffer
            for its loop limit, which comes after every other buffer.

    Returns:
        ``(params, push_size)``: a tuple of :class:`Param` and the size in
        bytes of the push constant block.
    """
    params = []
    offset = HEADER_SIZE
    push_end = None
    binding = 0
    for name, kind, dtype, ndim, array_layout in args:
        if records.is_record(dtype):
            _check_record(name, dtype, narrowed)
        elif dtype not in SCALAR_DTYPES:
            raise TypeError(f"argument {name!r}: dtype {dtype} is not supported")
        storage = storage_dtype(dtype, narrowed)
        if kind == "array":
            size, alignment = 4 * (2 * ndim + 1), 4
        elif records.is_record(storage):
            size, alignment = scalar_size(storage), 4
        else:
            size = SCALAR_DTYPES[storage]
            alignment = size // 2 if storage.startswith("complex") else size
        start = _align(offset, alignment)
        if push_end is None and max_push is not None and _align(start + size, 4) > max_push:
            push_end, start = offset, 0
        spilled = push_end is not None
        if kind == "array":
            params.append(Param(name, kind, dtype, storage, ndim, array_layout, binding, start,
                                spilled=spilled))
            binding += 1
        else:
            params.append(Param(name, kind, dtype, storage, 0, "C", -1, start, spilled=spilled))
        offset = start + size
    if checks:
        params.append(Param(STATUS_PARAM, "status", "uint32", "uint32", 1, "C", binding, 0))
        binding += 1
    if push_end is not None:
        params.append(Param(ARGS_PARAM, "args", "uint32", "uint32", 1, "C", binding, 0))
        binding += 1
    if printing:
        params.append(Param(PRINT_PARAM, "print", "uint32", "uint32", 1, "C", binding, 0))
        binding += 1
    if loop_status and not checks:
        params.append(Param(STATUS_PARAM, "status", "uint32", "uint32", 1, "C", binding, 0))
    return tuple(params), _align(offset if push_end is None else push_end, 4)


def args_size(params):
    """Bytes of the argument buffer of a kernel's parameters (0: it has none)."""
    ends = [p.offset + p.push_size for p in params if p.spilled]
    return _align(max(ends), 4) if ends else 0


def bindings(params):
    """Storage dtype name of each descriptor binding, in binding order."""
    bound = sorted((p for p in params if p.binding >= 0), key=lambda p: p.binding)
    return [p.storage for p in bound]


#: Name of the status buffer's :class:`Param`.
STATUS_PARAM = "__status"

#: Name of the argument buffer's :class:`Param`.
ARGS_PARAM = "__args"

#: Name of the print buffer's :class:`Param`.
PRINT_PARAM = "__print"

#: Kinds of the :class:`Param` of buffers that no argument of the user's fills.
HIDDEN_KINDS = ("status", "args", "print")


def params_from_json(items):
    """Rebuild :class:`Param` objects from :meth:`Param.to_json` output."""
    return tuple(Param(**item) for item in items)


_CODES = {"bool": "i", "int8": "i", "uint8": "I", "int16": "i", "uint16": "I",
          "int32": "i", "uint32": "I", "int64": "q", "uint64": "Q", "float16": "f", "float32": "f",
          "float64": "d", "complex64": "2f", "complex128": "2d"}


def push_format(params, push_size):
    """A :mod:`struct` format that packs a launch's arguments.

    The format covers the whole push constant block, with padding, followed
    by the argument buffer where the kernel has one (see :func:`args_size`):
    a launch's bytes are the block's ``push_size`` bytes, then the buffer's.
    """
    fmt = ["<3I4x"]
    for spilled, start, end in ((False, HEADER_SIZE, push_size),
                                (True, 0, args_size(params))):
        position = start
        for p in params:
            if p.kind not in ("array", "scalar") or p.spilled != spilled:
                continue
            if p.offset > position:
                fmt.append(f"{p.offset - position}x")
            if p.kind == "array":
                fmt.append(f"{2 * p.ndim + 1}i")
            else:
                fmt.append(f"{p.push_size}s" if records.is_record(p.storage)
                           else _CODES[p.storage])
            position = p.offset + p.push_size
        if end > position:
            fmt.append(f"{end - position}x")
    return "".join(fmt)


def itemsize(dtype):
    """Size in bytes of one element of a dtype named as in :data:`SCALAR_DTYPES`,
    or of a record in its text form."""
    if records.is_record(dtype):
        return records.dtype(dtype).itemsize
    return np.dtype(dtype).itemsize
