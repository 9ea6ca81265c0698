"""The functions a kernel calls to learn where it runs and to cooperate.

These are markers: the compiler replaces each call with the matching SPIR-V
built-in. Called from ordinary Python they raise, because there is no
workgroup to ask.
"""

import math
import types


def _device_only(name, doc):
    def stub(*args, **kwargs):
        raise RuntimeError(f"numba_vulkan.{name}() can only be called inside a kernel")
    stub.__name__ = name
    stub.__qualname__ = name
    stub.__module__ = "numba_vulkan"
    stub.__doc__ = doc
    return stub


global_id = _device_only("global_id", """\
Index of this invocation in the whole launch along ``axis`` (0, 1 or 2).""")

local_id = _device_only("local_id", """\
Index of this invocation inside its workgroup along ``axis``.""")

group_id = _device_only("group_id", """\
Index of this invocation's workgroup along ``axis``.""")

local_size = _device_only("local_size", """\
Number of invocations in a workgroup along ``axis``.""")

num_groups = _device_only("num_groups", """\
Number of workgroups in the launch along ``axis``.""")

global_size = _device_only("global_size", """\
Number of invocations in the launch along ``axis``.""")

grid = _device_only("grid", """\
This invocation's index in the whole launch: ``grid(ndim)`` with ``ndim``
1, 2 or 3 known at compile time.

``grid(1)`` is ``global_id(0)``, an int; ``grid(2)`` and ``grid(3)`` are
tuples ``(global_id(0), global_id(1)[, global_id(2)])`` (numba.cuda's
``cuda.grid``).
""")

gridsize = _device_only("gridsize", """\
Number of invocations in the launch: ``gridsize(ndim)``, an int for 1 and
a tuple of ``global_size(axis)`` for 2 and 3 (numba.cuda's ``cuda.gridsize``).
""")

lane_id = _device_only("lane_id", """\
Index of this invocation in its subgroup (numba.cuda's ``laneid``).""")

subgroup_size = _device_only("subgroup_size", """\
Invocations per subgroup, the device's (numba.cuda's ``warpsize``): 8 on
lavapipe, 32 on NVIDIA GPUs; code must not assume 32.""")

barrier = _device_only("barrier", """\
Wait until every invocation of the workgroup reaches this call.

Writes to workgroup memory and to arrays made before the barrier are visible
to the whole workgroup after it (``numba.cuda.syncthreads``). Every
invocation of the workgroup must reach the same barrier.
""")


fence = _device_only("fence", """\
Order this invocation's memory accesses device-wide: every invocation
that sees a write made after the fence also sees those made before it
(numba.cuda's ``threadfence``). Not a barrier: nothing waits.""")

workgroup_fence = _device_only("workgroup_fence", """\
:func:`fence` for the invocations of this workgroup only (numba.cuda's
``threadfence_block``).""")

barrier_count = _device_only("barrier_count", """\
:func:`barrier`, returning how many invocations of the workgroup passed
a true ``predicate`` (numba.cuda's ``syncthreads_count``).""")

barrier_and = _device_only("barrier_and", """\
:func:`barrier`, returning 1 if every invocation of the workgroup passed a
true ``predicate``, else 0 (numba.cuda's ``syncthreads_and``).""")

barrier_or = _device_only("barrier_or", """\
:func:`barrier`, returning 1 if any invocation of the workgroup passed a
true ``predicate``, else 0 (numba.cuda's ``syncthreads_or``).""")


def _namespace(name, doc, **members):
    namespace = types.ModuleType(f"numba_vulkan.{name}", doc)
    for member, text in members.items():
        setattr(namespace, member, _device_only(f"{name}.{member}", text))
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

_REDUCE_DOC = """The {what} of ``value`` over the active invocations of the subgroup;
    every invocation gets it."""
_SCAN_DOC = """The {what} of ``value`` over the active invocations of the subgroup with
    a lower :func:`subgroup.local_id` {than}."""
_SCAN_NAMES = {"add": "sum", "min": "minimum", "max": "maximum", "and": "bitwise and",
               "or": "bitwise or", "xor": "bitwise xor"}

subgroup = _namespace(
    "subgroup",
    """Subgroups: the invocations of a workgroup that the device runs together
(numba.cuda's warp). Their size is the device's, 8 on lavapipe and 32 on
NVIDIA GPUs: read :func:`subgroup.size`, never assume it.

The operations take part among the *active* invocations of the subgroup,
those that reach the call together. Values are ints (8 to 64 bits), bools
and floats (32 and 64 bits); a device may lack a class of operations
(``python -m numba_vulkan info`` lists them), and a kernel using one fails
at launch with a ``LaunchError`` naming it.
""",
    id="""Index of this invocation's subgroup in its workgroup.""",
    all="""Whether ``predicate`` is true in every active invocation of the subgroup.""",
    any="""Whether ``predicate`` is true in some active invocation of the subgroup.""",
    all_equal="""Whether ``value`` is the same in every active invocation of the subgroup.""",
    ballot="""The lanes whose ``predicate`` is true, as a uint64: bit ``k`` is
    invocation ``local_id() == k`` (lanes 64 and up, on devices with subgroups
    that large, are left out; inactive lanes are 0).""",
    broadcast="""``value`` of the invocation whose :func:`subgroup.local_id` is ``lane``.

    ``lane`` must be the same in every active invocation (use
    :func:`subgroup.shuffle` otherwise) and name an active one.""",
    shuffle="""``value`` of the invocation whose :func:`subgroup.local_id` is ``lane``
    modulo the subgroup size; the lane may differ per invocation.""",
    shuffle_xor="""``value`` of the invocation ``local_id() ^ mask``, or this invocation's
    own ``value`` if there is no such lane.""",
    shuffle_up="""``value`` of the invocation ``local_id() - delta``, or this invocation's
    own ``value`` if there is no such lane.""",
    shuffle_down="""``value`` of the invocation ``local_id() + delta``, or this invocation's
    own ``value`` if there is no such lane.""",
    barrier="""Wait until every active invocation of the subgroup reaches this call;
    their writes to workgroup and buffer memory before it are visible after it
    (numba.cuda's ``syncwarp``).""",
    **{f"reduce_{op}": _REDUCE_DOC.format(what=what) for op, what in _SCAN_NAMES.items()},
    **{f"inclusive_{op}": _SCAN_DOC.format(what=what, than="or equal")
       for op, what in _SCAN_NAMES.items()},
    **{f"exclusive_{op}": _SCAN_DOC.format(what=what, than="(the operation's identity in "
                                           "the first: 0 for a sum)")
       for op, what in _SCAN_NAMES.items()},
)
subgroup.size = subgroup_size
subgroup.local_id = lane_id

popc = _device_only("popc", """\
Number of bits set in an integer (numba.cuda's ``popc``).""")

brev = _device_only("brev", """\
An integer's bits in reverse order (numba.cuda's ``brev``): a uint64's 64
bits as a uint64; any other integer converted to uint32 (an int64 truncated,
as numba.cuda does) and its 32 bits reversed, as a uint32.""")

clz = _device_only("clz", """\
Number of zero bits above an integer's highest set bit, its width for 0
(numba.cuda's ``clz``).""")

ffs = _device_only("ffs", """\
Position of an integer's lowest set bit counted from 1, or 0 if none is
set, as a uint32 (numba.cuda's ``ffs``).""")

fma = _device_only("fma", """\
``a * b + c`` of floats rounded once, as a fused multiply-add (numba.cuda's
``fma``): the device's own where it fuses, else computed exactly.""")

selp = _device_only("selp", """\
``a`` if ``condition`` else ``b`` (numba.cuda's ``selp(condition, a, b)``).""")


def _cbrt(x):
    """The real cube root of ``x`` (Python 3.11's ``math.cbrt``)."""
    x = float(x)
    return math.copysign(abs(x) ** (1.0 / 3.0), x) if math.isfinite(x) and x else x


def _exp2(x):
    """2 to the power ``x`` (Python 3.11's ``math.exp2``)."""
    return 2.0 ** float(x)


# Python 3.10 lacks math.cbrt and math.exp2, which kernels (and numba.cuda's
# names for them) compute: there these stand-ins, which the frontend types
# and lowers as Numba does the math module's, so modules are the same.
#: The cube root kernels compile: ``math.cbrt``, or its stand-in on 3.10.
cbrt = getattr(math, "cbrt", _cbrt)
#: 2 to the power x: ``math.exp2``, or its stand-in on 3.10.
exp2 = getattr(math, "exp2", _exp2)

#: numba.cuda's warp functions, which :mod:`numba_vulkan.cuda` exports
#: (``docs/cuda.md`` says how they map onto :data:`subgroup`).
cuda_warp = _namespace(
    "cuda", "numba.cuda's warp functions.",
    shfl_sync="numba.cuda's ``shfl_sync(mask, value, src_lane)``.",
    shfl_up_sync="numba.cuda's ``shfl_up_sync(mask, value, delta)``.",
    shfl_down_sync="numba.cuda's ``shfl_down_sync(mask, value, delta)``.",
    shfl_xor_sync="numba.cuda's ``shfl_xor_sync(mask, value, lane_mask)``.",
    all_sync="numba.cuda's ``all_sync(mask, predicate)``.",
    any_sync="numba.cuda's ``any_sync(mask, predicate)``.",
    eq_sync="numba.cuda's ``eq_sync(mask, predicate)``.",
    ballot_sync="numba.cuda's ``ballot_sync(mask, predicate)``.",
    activemask="numba.cuda's ``activemask()``.",
    lanemask_lt="numba.cuda's ``lanemask_lt()``.",
    match_any_sync="numba.cuda's ``match_any_sync(mask, value)``.",
    match_all_sync="numba.cuda's ``match_all_sync(mask, value)``.",
    syncwarp="numba.cuda's ``syncwarp(mask=0xFFFFFFFF)``.",
)

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
    inc=_ATOMIC_DOC.format(what="increment (integers; wrapping to 0 once it is at least "
                                "``value``, as numba.cuda's)"),
    dec=_ATOMIC_DOC.format(what="decrement (integers; wrapping to ``value`` from 0 or from "
                                "above ``value``, as numba.cuda's)"),
    nanmin=_ATOMIC_DOC.format(what="store the smaller of ``value`` and, ignoring NaN,"),
    nanmax=_ATOMIC_DOC.format(what="store the larger of ``value`` and, ignoring NaN,"),
    cas="""Atomically store ``value`` in ``array[index]`` if it equals ``expected``;
    return the old value: ``cas(array, index, expected, value)``.

    Floats are compared by their bits.
    """,
)
atomic.compare_and_swap = _device_only("atomic.compare_and_swap", """\
Compare-and-swap with either arity, returning the old value:
    ``compare_and_swap(array, expected, value)`` works on ``array[0]`` (numba.cuda's
    meaning), ``compare_and_swap(array, index, expected, value)`` is :func:`cas`.
    """)


class Dim3:
    """An object whose ``.x``, ``.y`` and ``.z`` a kernel reads: numba.cuda's
    ``threadIdx``, ``blockIdx``, ``blockDim`` and ``gridDim``.

    ``axis_of`` is the native function it reads along axis 0, 1, 2
    (``local_id``, ``group_id``, ``local_size``, ``num_groups``).
    """

    __slots__ = ("name", "axis_of")

    def __init__(self, name, axis_of):
        self.name = name
        self.axis_of = axis_of

    def __repr__(self):
        return f"<numba_vulkan.cuda.{self.name}>"

    def __getattr__(self, attr):
        if attr in ("x", "y", "z"):
            raise RuntimeError(f"cuda.{self.name}.{attr} can only be read inside a kernel")
        raise AttributeError(attr)


class KernelValue:
    """A name a kernel reads as a value, not calls: numba.cuda's ``laneid``
    and ``warpsize``. Reading it calls ``func``, a native function of no
    arguments (:func:`lane_id`, :func:`subgroup_size`)."""

    __slots__ = ("name", "func")

    def __init__(self, name, func):
        self.name = name
        self.func = func

    def __repr__(self):
        return f"<numba_vulkan.cuda.{self.name}: read inside a kernel>"


_FP16_BINARY = {"hadd": "``a + b``", "hsub": "``a - b``", "hmul": "``a * b``",
                "hdiv": "``a / b``",
                "hmax": "the larger of ``a`` and ``b`` (the other one if one is NaN)",
                "hmin": "the smaller of ``a`` and ``b`` (the other one if one is NaN)"}
_FP16_UNARY = {"hneg": "``-a``", "habs": "``abs(a)``", "hsqrt": "the square root",
               "hrsqrt": "the reciprocal square root", "hrcp": "``1 / a``",
               "hfloor": "the floor", "hceil": "the ceiling",
               "htrunc": "the integer part, towards zero",
               "hrint": "the nearest integer, ties to even", "hsin": "the sine",
               "hcos": "the cosine", "hexp": "e to the power ``a``",
               "hexp2": "2 to the power ``a``", "hexp10": "10 to the power ``a``",
               "hlog": "the natural logarithm", "hlog2": "the base-2 logarithm",
               "hlog10": "the base-10 logarithm"}
_FP16_COMPARE = {"heq": "==", "hne": "!=", "hgt": ">", "hge": ">=", "hlt": "<", "hle": "<="}

#: float16 functions (numba.cuda's ``cuda.fp16``): arguments are converted to
#: float16, results are float16 (bool for the comparisons).
fp16 = _namespace(
    "fp16", "float16 functions (numba.cuda's ``cuda.fp16``); docs/float16.md.",
    **{name: f"{what} of float16 values, rounded to float16." for name, what in _FP16_BINARY.items()},
    **{name: f"{what} of a float16 value, rounded to float16." for name, what in _FP16_UNARY.items()},
    hfma="``a * b + c`` of float16 values with one rounding to float16.",
    **{name: f"``a {op} b`` of float16 values; false if either is NaN."
       for name, op in _FP16_COMPARE.items()},
)
