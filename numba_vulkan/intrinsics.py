"""The functions a kernel calls to learn where it runs and to cooperate.

These are markers: the compiler replaces each call with the matching SPIR-V
built-in. Called from ordinary Python they raise, because there is no
workgroup to ask.
"""

import types


def _device_only(name):
    def stub(*args, **kwargs):
        raise RuntimeError(f"numba_vulkan.{name}() can only be called inside a kernel")
    stub.__name__ = name
    stub.__qualname__ = name
    stub.__module__ = "numba_vulkan"
    return stub


global_id = _device_only("global_id")
global_id.__doc__ = """Index of this invocation in the whole launch along ``axis`` (0, 1 or 2)."""

local_id = _device_only("local_id")
local_id.__doc__ = """Index of this invocation inside its workgroup along ``axis``."""

group_id = _device_only("group_id")
group_id.__doc__ = """Index of this invocation's workgroup along ``axis``."""

local_size = _device_only("local_size")
local_size.__doc__ = """Number of invocations in a workgroup along ``axis``."""

num_groups = _device_only("num_groups")
num_groups.__doc__ = """Number of workgroups in the launch along ``axis``."""

global_size = _device_only("global_size")
global_size.__doc__ = """Number of invocations in the launch along ``axis``."""

barrier = _device_only("barrier")
barrier.__doc__ = """Wait until every invocation of the workgroup reaches this call.

Writes to workgroup memory and to arrays made before the barrier are visible
to the whole workgroup after it (``numba.cuda.syncthreads``). Every
invocation of the workgroup must reach the same barrier.
"""


def _namespace(name, doc, **members):
    namespace = types.ModuleType(f"numba_vulkan.{name}", doc)
    for member, text in members.items():
        stub = _device_only(f"{name}.{member}")
        stub.__doc__ = text
        setattr(namespace, member, stub)
    return namespace


shared = _namespace("shared", "Workgroup memory, shared by the invocations of a workgroup.",
                    array="""An array in workgroup memory: ``shared.array(shape, dtype)``.

    ``shape`` is an int or a tuple of ints known at compile time. Every
    invocation of a workgroup sees the same array; its contents start
    undefined. Synchronise with :func:`barrier`.
    """)

local = _namespace("local", "Memory private to each invocation.",
                   array="""A private array: ``local.array(shape, dtype)``.

    ``shape`` is an int or a tuple of ints known at compile time; the
    contents start undefined.
    """)

const = _namespace("const", "Constant memory (numba.cuda's ``cuda.const``).",
                   array_like="""A constant array with the contents of ``arr``, a NumPy array
    read from a global variable: ``const.array_like(arr)``.

    The kernel reads it as a table compiled into the module, as it does any
    global NumPy array it reads directly; writes to it are not allowed.
    """)

_ATOMIC_DOC = """Atomically {what} ``array[index]``; return the old value.

    ``index`` is an int or a tuple of ints; the array is a kernel argument
    or a :func:`shared.array`.
    """

atomic = _namespace(
    "atomic", "Atomic read-modify-write operations on array elements (numba.cuda's names).",
    add=_ATOMIC_DOC.format(what="add ``value`` to"),
    sub=_ATOMIC_DOC.format(what="subtract ``value`` from"),
    min=_ATOMIC_DOC.format(what="store the smaller of ``value`` and"),
    max=_ATOMIC_DOC.format(what="store the larger of ``value`` and"),
    and_=_ATOMIC_DOC.format(what="bitwise-and ``value`` into"),
    or_=_ATOMIC_DOC.format(what="bitwise-or ``value`` into"),
    xor=_ATOMIC_DOC.format(what="bitwise-xor ``value`` into"),
    exch=_ATOMIC_DOC.format(what="store ``value`` in"),
    cas="""Atomically store ``value`` in ``array[index]`` if it equals ``expected``;
    return the old value: ``cas(array, index, expected, value)``.

    Floats are compared by their bits.
    """,
)
atomic.compare_and_swap = atomic.cas
