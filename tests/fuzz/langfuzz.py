"""A language fuzzer: random kernels over the whole kernel language, each
checked against the same code under ``numba.njit``.

Where :mod:`fuzzgen` varies control flow over int64, these programs combine
every dtype (bool, int8 to uint64, float32/64, complex64/128), array
arguments of 1 to 3 dimensions passed as contiguous, strided, negative-step,
offset and transposed NumPy views, slices taken in the kernel, workgroup
arrays (``nv.shared.array``) filled before a barrier, private arrays
(``nv.local.array``), global NumPy arrays read as constants, constant and
computed indices (negative ones too), atomics at computed indices on
argument and workgroup arrays, math calls, device functions returning
tuples and tuples as values.

One *case* is the source of a ``numba.njit`` function ``cN`` (and the
device functions it calls) that one workgroup runs in up to three phases:
phase 0 (each invocation fills its slots of the case's workgroup arrays),
after a barrier phase 1 (the body: reads everything, writes its own row of
the outputs ``oi`` (integers), ``of`` (floats or complex, compared exactly)
and ``om`` (math results, compared within a tolerance), and performs
atomics on ``acc``), then after a second barrier phase 2 (copies the
workgroup atomics' counters to ``acc``). On the CPU
the same functions run one invocation after another, phase by phase, which
is what the barriers guarantee on the GPU. A batch puts the cases of one
*family* (cases that share one argument signature) into one kernel: case k
of the batch runs in workgroup k, so one compile and one launch check many.

Results must be the same on every CPU and GPU, so the programs keep to
what is exactly defined: integer arithmetic wraps, divisors are made
positive, shift counts are masked below the width of the (64-bit) result,
floats are clamped into a range where no operation overflows or goes
subnormal (lavapipe flushes subnormals) before they are converted to
integers or kept in a variable, and float results are computed only with
correctly rounded operations (``+ - * /``, comparisons, ``abs``, ``min``,
``max``, ``floor``...). Math functions (``sin``, ``exp``...) are the
exception: their results go only to ``om``, compared within 16 ULP of
their dtype (the project's target is 2 ULP for float64 and 4 for float32).
Float atomics add small integers only, so the sum is exact in any order.

Features that are known to fail are switched off by default
(:data:`KNOWN_BROKEN`) and can be switched on by name. By hand::

    python -m tests.fuzz.langfuzz --seed 1 --cases 1000          # counts, failures
    python -m tests.fuzz.langfuzz --seed 1 --cases 1000 --all    # every feature
    python -m tests.fuzz.langfuzz --seed 1 --show 17             # source of case 17
"""

import argparse
import linecache
import os
import random
import re
import sys
import time

import numpy as np

#: Most statements in the body of a case (besides the stores at its end).
SIZE = 4
#: Invocations per workgroup; every case runs in one workgroup.
GROUP = 16
#: Cases that share one argument signature (and so may share one kernel).
FAMILY = 20
#: Output slots per invocation in each of ``oi``, ``of`` and ``om``.
SLOTS = 8
#: Columns of ``acc`` per case: counters that every invocation may hit,
#: one column owned by each invocation, and the drained workgroup counters.
ACC_SHARED = 12
ACC_DRAINED = 12
ACC_WIDTH = ACC_SHARED + GROUP + ACC_DRAINED

INTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
FLOATS = ("float32", "float64")
COMPLEX = ("complex64", "complex128")
DTYPES = ("bool",) + INTS + FLOATS + COMPLEX

#: Every switchable feature, with what it adds.
FEATURES = {
    "shared": "workgroup arrays filled before a barrier, read after it at computed indices",
    "shared_const_index": "workgroup arrays read at constant indices",
    "shared_2d": "2-d workgroup arrays",
    "shared_complex": "complex values in workgroup arrays",
    "shared_atomics": "atomics on workgroup arrays, drained after a second barrier",
    "private": "private arrays filled in a loop, read and written at computed indices",
    "private_sort": "an insertion sort of a private array",
    "private_2d": "2-d private arrays",
    "private_complex": "complex values in private arrays",
    "private_memset": "private arrays filled with one value in a loop (LLVM makes it a memset), "
                      "1000 elements too",
    "global_arrays": "global NumPy arrays read as constants",
    "atomics": "atomics on an argument array at computed indices",
    "atomic_mod": "atomic indices computed with %",
    "views": "slices of arguments taken in the kernel",
    "math": "math functions (results compared within a tolerance)",
    "rint": "round() and np.rint",
    "float_floordiv": "float // and %",
    "device_functions": "device functions returning scalars or tuples",
    "tuples": "tuples as values, unpacking and swaps",
    "complex": "complex arithmetic",
    "many_args": "argument lists of more than 128 bytes of push constants",
}

#: Features known to fail on main, with the issue item that fixes them;
#: off unless switched on by name (``--enable``) or with ``--all``. Empty
#: since issue 10's fixes landed: constant-index workgroup reads, global
#: arrays, atomics at ``%`` indices, complex workgroup and private arrays,
#: private memsets, sorts and 2-d arrays, more than 128 bytes of arguments,
#: ``np.rint`` and float ``//`` all failed when the fuzzer was written and
#: pass now (the CI seed's 300 cases with every feature on, 2026-12-01).
KNOWN_BROKEN = {}

DEFAULT_FEATURES = frozenset(FEATURES) - frozenset(KNOWN_BROKEN)

#: Bytes of push constants a device is guaranteed to offer, and the header.
PUSH_LIMIT = 128
PUSH_HEADER = 16
_SCALAR_BYTES = {"bool": 4, "int8": 4, "uint8": 4, "int16": 4, "uint16": 4, "int32": 4,
                 "uint32": 4, "int64": 8, "uint64": 8, "float32": 4, "float64": 8,
                 "complex64": 8, "complex128": 16}


def kind(dtype):
    """``"b"``, ``"i"``, ``"f"`` or ``"c"``: the kind of a dtype name."""
    if dtype == "bool":
        return "b"
    if dtype in INTS:
        return "i"
    return "f" if dtype in FLOATS else "c"


def np_name(dtype):
    return "np.bool_" if dtype == "bool" else f"np.{dtype}"


def _width_of(dtype):
    return np.dtype(dtype).itemsize * 8


# --------------------------------------------------------------------------
# Argument signatures, shared by the cases of a family


class Arg:
    """An input array argument: dtype, the shape of the view the kernel
    sees, and how the view is cut out of its base array."""

    def __init__(self, name, dtype, shape, cuts, transpose):
        self.name, self.dtype, self.shape = name, dtype, tuple(shape)
        self.cuts, self.transpose = cuts, transpose

    @property
    def ndim(self):
        return len(self.shape)

    def push_bytes(self):
        return 4 * (2 * self.ndim + 1)

    def describe(self):
        cut = ",".join(self.cuts) + (",T" if self.transpose else "")
        return f"{self.name}: {self.dtype}{list(self.shape)} [{cut}]"


class Family:
    """The argument signature of the cases ``FAMILY * number`` onwards."""

    def __init__(self, seed, number, features):
        rng = random.Random(f"langfuzz-family:{seed}:{number}")
        self.number = number
        self.inputs = []
        for name in ("A", "B", "C")[:rng.choice((2, 3, 3))]:
            dtype = rng.choice(DTYPES)
            if dtype not in COMPLEX and dtype not in FLOATS and rng.random() < 0.3:
                dtype = rng.choice(FLOATS + COMPLEX)
            if name == "A":
                # Every 13 families give A every dtype once.
                dtype = DTYPES[(3 * number + seed) % len(DTYPES)]
            if "complex" not in features and dtype in COMPLEX:
                dtype = rng.choice(FLOATS)
            ndim = rng.choice((1, 1, 2, 2, 3))
            shape = [rng.randint(4, 7) for _ in range(ndim)]
            cuts = [rng.choice(("all", "all", "step", "neg", "negstep", "off"))
                    for _ in range(ndim)]
            self.inputs.append(Arg(name, dtype, shape, cuts, ndim > 1 and rng.random() < 0.25))
        self.scalar = rng.choice(DTYPES) if rng.random() < 0.6 else None
        if self.scalar in COMPLEX and "complex" not in features:
            self.scalar = "float64"
        self.oi = rng.choice(INTS + ("bool",) if rng.random() < 0.1 else INTS)
        self.of = rng.choice(FLOATS + COMPLEX if "complex" in features else FLOATS)
        self.acc = rng.choice(("int32", "uint32", "int64", "uint64", "float32", "float64"))
        self.out_ndim = {name: rng.choice((1, 2)) for name in ("oi", "of", "om")}
        limit = None if "many_args" in features and rng.random() < 0.3 else PUSH_LIMIT
        while limit is not None and self.push_bytes() > limit:
            # Give up dimensions until the arguments fit Vulkan's minimum.
            two_d = [n for n, d in self.out_ndim.items() if d == 2]
            wide = [a for a in self.inputs if a.ndim > 1]
            # Outputs first: the inputs' dimensions matter more.
            if two_d:
                self.out_ndim[rng.choice(two_d)] = 1
            elif self.scalar is not None and rng.random() < 0.5:
                self.scalar = None
            elif wide:
                arg = min(wide, key=lambda a: a.ndim)
                arg.shape, arg.cuts, arg.transpose = arg.shape[:-1], arg.cuts[:-1], False
            else:
                self.inputs.pop()

    def push_bytes(self):
        total = PUSH_HEADER + sum(a.push_bytes() for a in self.inputs) + 4 * (2 * 2 + 1)
        total += sum(4 * (2 * d + 1) for d in self.out_ndim.values())
        if self.scalar is not None:
            size = _SCALAR_BYTES[self.scalar]
            total = -(-total // min(size, 8)) * min(size, 8) + size
        return total

    def params(self):
        """Names of the kernel's arguments, in order."""
        names = [a.name for a in self.inputs]
        if self.scalar is not None:
            names.append("s0")
        return names + ["oi", "of", "om", "acc"]

    def describe(self):
        parts = [a.describe() for a in self.inputs]
        if self.scalar is not None:
            parts.append(f"s0: {self.scalar}")
        parts.append(f"oi: {self.oi} {self.out_ndim['oi']}-d, of: {self.of} "
                     f"{self.out_ndim['of']}-d, om: {self.out_ndim['om']}-d, acc: {self.acc}")
        return "; ".join(parts)


def _values(rng, dtype, shape):
    """Seeded values of ``dtype``: mostly small (so comparisons hit), some
    spanning the whole type, floats on a grid of 1/64 and some not."""
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in INTS:
        info = np.iinfo(dtype)
        small = rng.integers(max(info.min, -20), 21, size=shape)
        wide = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
        return np.where(rng.random(shape) < 0.7, small, wide).astype(dtype)
    if dtype in COMPLEX:
        part = FLOATS[COMPLEX.index(dtype)]
        return (_values(rng, part, shape) + 1j * _values(rng, part, shape)).astype(dtype)
    grid = rng.integers(-512, 513, size=shape) / 64.0
    return np.where(rng.random(shape) < 0.8, grid, rng.uniform(-4, 4, shape)).astype(dtype)


def make_view(rng, arg):
    """A NumPy view of the shape ``arg`` describes, cut out of a bigger
    array as ``arg.cuts`` say (every other element, backwards, from 1)."""
    base_shape, slices = [], []
    for n, cut in zip(arg.shape, arg.cuts):
        if cut == "all":
            base_shape.append(n), slices.append(slice(None))
        elif cut == "step":
            base_shape.append(2 * n), slices.append(slice(None, None, 2))
        elif cut == "neg":
            base_shape.append(n), slices.append(slice(None, None, -1))
        elif cut == "negstep":
            base_shape.append(2 * n), slices.append(slice(None, None, -2))
        else:
            base_shape.append(n + 1), slices.append(slice(1, None))
    if arg.transpose:
        base = _values(rng, arg.dtype, tuple(reversed(base_shape))).T
    else:
        base = _values(rng, arg.dtype, tuple(base_shape))
    view = base[tuple(slices)]
    assert view.shape == arg.shape
    return view


# --------------------------------------------------------------------------
# The generator of one case


class _Array:
    """An array a case can index: its name, dtype and extents."""

    def __init__(self, name, dtype, shape, writable=False):
        self.name, self.dtype, self.shape, self.writable = name, dtype, tuple(shape), writable


#: How likely an expression at depth 0 and 1 is a leaf: small expressions
#: keep Numba's compile time (most of a run's time) down.
_LEAF = (0.45, 0.85)


#: Atomic operations that commute with each other; each class has counters
#: of its own (the first three for floats).
_OP_CLASSES = (("add", "sub"), ("min",), ("max",), ("and_",), ("or_",), ("xor",))


def _clamp(text):
    # What a float variable holds stays within 2**10, so that expressions of
    # a few of them neither overflow nor leave the range of exact integers.
    return f"min(max({text}, -1024.0), 1024.0)"


class _Case:
    def __init__(self, seed, index, family, features, size):
        self.rng = random.Random(f"langfuzz:{seed}:{index}")
        self.size = size
        self.index, self.family, self.features = index, family, features
        self.prefix = f"c{index}"
        self.used = set()
        self.dtypes = set()        # of the variables and arrays the case makes
        self.lines = []
        self.depth = 1
        self.counter = 0
        self.scalars = []          # (name, dtype)
        self.tuples = []           # (name, element dtypes)
        self.arrays = [_Array(a.name, a.dtype, a.shape) for a in family.inputs]
        self.helpers = []          # sources of device functions
        self.globals = {}          # name -> NumPy array
        self.shared = []           # (_Array, fill kind)
        self.shared_acc = None
        self.slot = {"oi": 0, "of": 0, "om": 0}
        self.tolerances = {}       # om slot -> relative tolerance
        self.loop_vars = []
        #: "fill" (workgroup arrays are being written), "main" or "helper".
        self.phase = "fill"

    # Helpers -------------------------------------------------------------

    def on(self, feature):
        return feature in self.features

    def use(self, feature):
        self.used.add(feature)

    def chance(self, p):
        return self.rng.random() < p

    def fresh(self, stem):
        self.counter += 1
        return f"{stem}{self.counter}"

    def emit(self, text):
        self.lines.append("    " * self.depth + text)

    def vars_of(self, kinds):
        return [(n, d) for n, d in self.scalars if kind(d) in kinds]

    # Indices -------------------------------------------------------------

    def index_into(self, n, extent_text, const=True):
        """An index expression in range for an axis of ``n`` elements; with
        ``const`` false one that the compiler cannot fold to a constant
        (it depends on the invocation)."""
        r = self.rng.random()
        if const and r < 0.25:
            return str(self.rng.randint(-n, n - 1))
        # An extent of an argument travels at run time: the sum cannot fold.
        e = self.sint_expr(1) if const else f"t + A.shape[0] + {self.sint_expr(1)}"
        if n & (n - 1) == 0 and r < 0.5:
            return f"(({e}) & {n - 1})"
        if self.chance(0.2):
            return f"(({e}) % {extent_text} - {extent_text})"
        return f"(({e}) % {extent_text})"

    def element(self, array, const=True):
        indices = []
        for axis, n in enumerate(array.shape):
            text = f"{array.name}.shape[{axis}]" if self.chance(0.5) else str(n)
            indices.append(self.index_into(n, text, const=const))
        return f"{array.name}[{', '.join(indices)}]"

    def load(self, kinds):
        """An element of an array whose dtype is of one of ``kinds``, or None."""
        choices = [a for a in self.arrays if kind(a.dtype) in kinds]
        if self.phase == "main":
            choices += [a for a, _ in self.shared if kind(a.dtype) in kinds]
        if not choices:
            return None
        array = self.rng.choice(choices)
        is_shared = any(array is a for a, _ in self.shared)
        const = not is_shared or self.on("shared_const_index")
        if is_shared:
            self.use("shared")
            if const:
                self.use("shared_const_index")
        if array.name.startswith("T"):
            self.use("global_arrays")
        return self.element(array, const=const), array.dtype

    # Expressions ---------------------------------------------------------

    def sint_leaf(self):
        """A leaf of a signed-int64 expression."""
        r = self.rng.random()
        ints = self.vars_of("i")
        if r < 0.45 and ints:
            name, dtype = self.rng.choice(ints)
            return f"np.int64({name})" if dtype == "uint64" else name
        if r < 0.55 and self.loop_vars:
            return self.rng.choice(self.loop_vars)
        if r < 0.65:
            return "t"
        if r < 0.75:
            loaded = self.load("ib")
            if loaded:
                text, dtype = loaded
                return f"np.int64({text})" if dtype in ("uint64", "bool") else text
        if r < 0.8 and self.tuples:
            name, elements = self.rng.choice(self.tuples)
            k = self.rng.randrange(len(elements))
            if kind(elements[k]) == "i":
                return f"np.int64({name}[{k}])"
        if r < 0.85 and self.vars_of("b"):
            return f"np.int64({self.rng.choice(self.vars_of('b'))[0]})"
        if r < 0.9:
            array = self.rng.choice(self.arrays)
            return f"{array.name}.shape[{self.rng.randrange(len(array.shape))}]"
        return str(self.rng.choice((0, 1, 2, 3, -1, -7, 13, 100, 255, 1 << 20, -(1 << 31),
                                    (1 << 31) - 1, 1 << 40, -(1 << 62))))

    def sint_expr(self, depth=0):
        """A signed int64 expression (small and unsigned values widen to it)."""
        r = self.rng.random()
        if depth >= 2 or r < _LEAF[depth]:
            return self.sint_leaf()
        a = self.sint_expr(depth + 1)
        if r < 0.6:
            op = self.rng.choice(("+", "-", "*", "&", "|", "^"))
            return f"({a} {op} {self.sint_expr(depth + 1)})"
        if r < 0.68:
            op = self.rng.choice(("//", "%"))
            return f"({a} {op} (({self.sint_expr(depth + 1)} & 15) + 1))"
        if r < 0.76:
            op = self.rng.choice(("<<", ">>"))
            mask = self.rng.choice((7, 31, 63))
            return f"({a} {op} ({self.sint_expr(depth + 1)} & {mask}))"
        if r < 0.82:
            return self.rng.choice((f"(-{a})", f"(~{a})", f"abs({a})"))
        if r < 0.88:
            fn = self.rng.choice(("min", "max"))
            return f"{fn}(np.int64({a}), np.int64({self.sint_expr(depth + 1)}))"
        if r < 0.93:
            return f"(np.int64({a}) if {self.bool_expr(depth + 1)} " \
                   f"else np.int64({self.sint_expr(depth + 1)}))"
        if r < 0.97:
            return f"np.int64({self.float_clamped(self.float_expr(depth + 1), 'int64')})"
        if self.on("rint") and self.chance(0.5):
            self.use("rint")
            return f"round({self.float_expr(depth + 1)})"
        # np.int64(): Numba folds a power of literals into a Python int.
        return f"(np.int64({a}) ** {self.rng.randint(0, 3)})"

    def uint_expr(self, depth=0):
        """A uint64 expression: unsigned arithmetic, logical shifts."""
        r = self.rng.random()
        if depth >= 2 or r < _LEAF[depth]:
            unsigned = [n for n, d in self.vars_of("i") if d.startswith("u")]
            if unsigned and self.chance(0.7):
                return f"np.uint64({self.rng.choice(unsigned)})"
            return f"np.uint64({self.rng.choice((0, 1, 3, 255, 65535, 4294967295, 2**63, 2**64 - 1))})"
        a = self.uint_expr(depth + 1)
        if r < 0.65:
            op = self.rng.choice(("+", "-", "*", "&", "|", "^"))
            return f"({a} {op} {self.uint_expr(depth + 1)})"
        if r < 0.75:
            op = self.rng.choice(("//", "%"))
            return f"({a} {op} (({self.uint_expr(depth + 1)} & np.uint64(15)) + np.uint64(1)))"
        if r < 0.9:
            op = self.rng.choice(("<<", ">>"))
            return f"({a} {op} ({self.uint_expr(depth + 1)} & np.uint64(63)))"
        return f"max({a}, {self.uint_expr(depth + 1)})"

    def int_expr(self, depth=0):
        return self.uint_expr(depth) if self.chance(0.15) else self.sint_expr(depth)

    def float_leaf(self):
        r = self.rng.random()
        floats = self.vars_of("f")
        if r < 0.45 and floats:
            return self.rng.choice(floats)[0]
        if r < 0.6:
            loaded = self.load("f")
            if loaded:
                return loaded[0]
        if r < 0.68 and self.vars_of("c"):
            return f"{self.rng.choice(self.vars_of('c'))[0]}.{self.rng.choice(('real', 'imag'))}"
        if r < 0.8:
            return f"np.{self.rng.choice(FLOATS)}({self.sint_expr(1)} & 1023)"
        return repr(self.rng.randint(-256, 256) / 32.0)

    def float_expr(self, depth=0):
        """A float expression of correctly rounded operations, bounded in
        magnitude by the leaves (at most 2**10) and its depth."""
        r = self.rng.random()
        if depth >= 2 or r < _LEAF[depth]:
            return self.float_leaf()
        a = self.float_expr(depth + 1)
        if r < 0.6:
            return f"({a} {self.rng.choice(('+', '-', '*'))} {self.float_expr(depth + 1)})"
        if r < 0.68:
            return f"({a} / (abs({self.float_expr(depth + 1)}) + 1.0))"
        if r < 0.75:
            fn = self.rng.choice(("min", "max", "math.copysign"))
            return f"{fn}({a}, {self.float_expr(depth + 1)})"
        if r < 0.85:
            fn = self.rng.choice(("abs", "-", "np.floor", "np.ceil", "np.trunc", "math.fabs"))
            return f"({fn}({a}))" if fn != "-" else f"(-{a})"
        if r < 0.92:
            return f"({a} if {self.bool_expr(depth + 1)} else {self.float_expr(depth + 1)})"
        if self.on("float_floordiv") and self.chance(0.5):
            self.use("float_floordiv")
            op = self.rng.choice(("//", "%"))
            return f"({a} {op} (abs({self.float_expr(depth + 1)}) + 0.5))"
        if self.on("rint") and self.chance(0.5):
            self.use("rint")
            return f"np.rint({a})"
        return f"np.float64({self.sint_expr(depth + 1)} & 255)"

    def complex_expr(self, depth=0):
        self.use("complex")
        r = self.rng.random()
        if depth >= 2 or r < _LEAF[depth]:
            complexes = self.vars_of("c")
            if complexes and r < 0.2:
                return self.rng.choice(complexes)[0]
            loaded = self.load("c") if r < 0.3 else None
            if loaded:
                return loaded[0]
            return f"complex({self.float_expr(2)}, {self.float_expr(2)})"
        a = self.complex_expr(depth + 1)
        if r < 0.7:
            return f"({a} {self.rng.choice(('+', '-', '*'))} {self.complex_expr(depth + 1)})"
        if r < 0.8:
            d = self.complex_expr(depth + 1)
            return f"({a} / complex(abs(({d}).real) + 1.0, ({d}).imag))"
        if r < 0.9:
            return f"({a}).conjugate()"
        return f"({a} * {self.float_expr(depth + 1)})"

    def bool_expr(self, depth=0):
        r = self.rng.random()
        if depth >= 2 or r < 0.55:
            s = self.rng.random()
            bools = self.vars_of("b")
            if s < 0.15 and bools:
                return self.rng.choice(bools)[0]
            if s < 0.25:
                loaded = self.load("b")
                if loaded:
                    return loaded[0]
            op = self.rng.choice(("<", "<=", ">", ">=", "==", "!="))
            if s < 0.6:
                return f"({self.sint_expr(1)} {op} {self.sint_expr(2)})"
            if s < 0.7:
                return f"({self.uint_expr(1)} {op} {self.uint_expr(2)})"
            if s < 0.95 or not self.on("complex"):
                return f"({self.float_expr(1)} {op} {self.float_expr(2)})"
            return f"({self.complex_expr(1)} {self.rng.choice(('==', '!='))} " \
                   f"{self.complex_expr(2)})"
        if r < 0.85:
            op = self.rng.choice(("and", "or", "!="))
            return f"({self.bool_expr(depth + 1)} {op} {self.bool_expr(depth + 1)})"
        return f"(not {self.bool_expr(depth + 1)})"

    def float_clamped(self, text, dtype):
        """``text``, a float, clamped into a range that ``dtype`` holds."""
        lo = 0.0 if dtype.startswith("u") else -100.0
        return f"min(max({text}, {lo}), 100.0)"

    def value_of(self, dtype, depth=0):
        """An expression of exactly ``dtype`` (conversions guarded)."""
        k = kind(dtype)
        if k == "b":
            return self.bool_expr(depth)
        if k == "i":
            r = self.rng.random()
            if r < 0.75:
                return f"{np_name(dtype)}({self.int_expr(depth)})"
            if r < 0.9:
                return f"{np_name(dtype)}({self.float_clamped(self.float_expr(depth), dtype)})"
            return f"{np_name(dtype)}({self.bool_expr(depth)})"
        if k == "f":
            source = self.float_expr(depth) if self.chance(0.8) else self.sint_expr(depth)
            return f"{np_name(dtype)}({_clamp(source)})"
        if self.chance(0.3):
            return f"{np_name(dtype)}({_clamp(self.float_expr(depth))})"
        # Kept in a temporary: the clamp reads both of its parts.
        temp = self.fresh("z")
        self.emit(f"{temp} = {self.complex_expr(depth)}")
        return f"{np_name(dtype)}(complex({_clamp(temp + '.real')}, {_clamp(temp + '.imag')}))"

    def math_call(self):
        """A math function of a bounded float argument, and its tolerance."""
        self.use("math")
        width = self.rng.choice(FLOATS)
        x = f"np.{width}(min(max({self.float_expr(1)}, -50.0), 50.0))"
        y = f"np.{width}(min(max({self.float_expr(1)}, -4.0), 4.0))"
        forms = (f"math.sin({x})", f"math.cos({x})", f"math.exp(min({x}, 10.0))",
                 f"math.log(abs({x}) + 0.5)", f"math.sqrt(abs({x}))", f"math.tanh({x})",
                 f"math.atan({x})", f"math.atan2({x}, {y})", f"math.hypot({x}, {y})",
                 f"math.expm1(min({x}, 10.0))", f"math.log1p(abs({x}))", f"math.erf({x})",
                 f"math.pow(abs({y}) + 0.5, {y})", f"np.sinh({y})", f"np.arcsinh({x})",
                 f"math.cosh({y})", f"math.log2(abs({x}) + 0.5)")
        if self.on("complex") and self.chance(0.15):
            self.use("complex")
            c = f"np.complex{128 if width == 'float64' else 64}({self.complex_expr(1)})"
            form = self.rng.choice((f"abs({c})", f"cmath.exp({c} * 0.1).real",
                                    f"cmath.sqrt({c}).imag"))
        else:
            form = self.rng.choice(forms)
        return form, (2.0 ** -19 if width == "float32" else 2.0 ** -48)

    # Statements ----------------------------------------------------------

    def out(self, name, slot):
        if self.family.out_ndim[name] == 2:
            return f"{name}[row, {slot}]"
        return f"{name}[row * {SLOTS} + {slot}]"

    def next_slot(self, name):
        slot = self.slot[name] % SLOTS
        self.slot[name] += 1
        return slot

    def store_value(self, text, dtype):
        """Store ``text`` of ``dtype`` where its value is checked."""
        k = kind(dtype)
        if k in "bi":
            self.emit(f"{self.out('oi', self.next_slot('oi'))} = {text}")
        elif k == "c" and kind(self.family.of) != "c":
            self.emit(f"{self.out('of', self.next_slot('of'))} = ({text}).real")
            self.emit(f"{self.out('of', self.next_slot('of'))} = ({text}).imag")
        else:
            self.emit(f"{self.out('of', self.next_slot('of'))} = {text}")

    def stmt_assign(self):
        dtype = self.rng.choice(DTYPES if self.on("complex") else DTYPES[:-2])
        name = self.fresh("v")
        self.emit(f"{name} = {self.value_of(dtype)}")
        self.scalars.append((name, dtype))
        self.dtypes.add(dtype)

    def stmt_reassign(self):
        if not self.scalars:
            return self.stmt_assign()
        name, dtype = self.rng.choice(self.scalars)
        if self.chance(0.3) and kind(dtype) == "i":
            op = self.rng.choice(("+", "-", "^", "*", "|"))
            self.emit(f"{name} = {np_name(dtype)}({name} {op} {np_name(dtype)}({self.int_expr(1)}))")
        else:
            self.emit(f"{name} = {self.value_of(dtype)}")

    def stmt_store(self):
        r = self.rng.random()
        if r < 0.35:
            self.emit(f"{self.out('oi', self.next_slot('oi'))} = {self.int_expr()}")
        elif r < 0.6:
            if self.on("complex") and kind(self.family.of) == "c" and self.chance(0.4):
                self.emit(f"{self.out('of', self.next_slot('of'))} = {self.complex_expr()}")
            else:
                self.emit(f"{self.out('of', self.next_slot('of'))} = {self.float_expr()}")
        elif r < 0.7:
            self.emit(f"{self.out('oi', self.next_slot('oi'))} = {self.bool_expr()}")
        elif self.on("math"):
            form, tolerance = self.math_call()
            slot = self.next_slot("om")
            self.tolerances[slot] = max(self.tolerances.get(slot, 0.0), tolerance)
            self.emit(f"{self.out('om', slot)} = {form}")
        else:
            self.emit(f"{self.out('oi', self.next_slot('oi'))} = {self.int_expr()}")

    def block(self, statements):
        saved = (list(self.scalars), list(self.tuples), list(self.arrays))
        self.depth += 1
        before = len(self.lines)
        for _ in range(statements):
            self.statement()
        if len(self.lines) == before:
            self.emit("pass")
        self.depth -= 1
        self.scalars, self.tuples, self.arrays = saved

    def stmt_if(self):
        self.emit(f"if {self.bool_expr()}:")
        self.block(self.rng.randint(1, 3))
        if self.chance(0.5):
            self.emit("else:")
            self.block(self.rng.randint(1, 2))

    def stmt_for(self):
        var = self.fresh("j")
        if self.chance(0.5):
            array = self.rng.choice(self.arrays)
            bound = f"{array.name}.shape[{self.rng.randrange(len(array.shape))}]"
        else:
            bound = str(self.rng.randint(0, 5))
        self.emit(f"for {var} in range({bound}):")
        self.loop_vars.append(var)
        self.block(self.rng.randint(1, 3))
        self.loop_vars.remove(var)

    def atomic_value(self, dtype, op):
        if kind(dtype) == "f" and op in ("add", "sub"):
            # Small integers: the sum is exact whatever the order.
            return f"{np_name(dtype)}({self.sint_expr(1)} & 255)"
        if kind(dtype) == "f":
            return f"{np_name(dtype)}({self.float_expr(1)})"
        return f"{np_name(dtype)}({self.int_expr(1)})"

    def atomic_op(self, dtype):
        """An operation and the first of the two counters its class owns:
        operations of different classes do not commute, so each class has
        counters of its own."""
        classes = _OP_CLASSES if kind(dtype) == "i" else _OP_CLASSES[:3]
        number = self.rng.randrange(len(classes))
        return self.rng.choice(classes[number]), 2 * number

    def stmt_atomic(self):
        self.use("atomics")
        acc = self.family.acc
        op, base = self.atomic_op(acc)
        if self.on("atomic_mod") and self.chance(0.3):
            self.use("atomic_mod")
            column = f"{base} + (({self.sint_expr(1)}) % 2)"
        else:
            column = f"{base} + (({self.sint_expr(1)}) & 1)"
        owned = self.chance(0.3)
        if owned:
            # A counter no other invocation touches: any operation, and the
            # old value it returns is defined.
            column = f"{ACC_SHARED} + t"
            if kind(acc) == "i":
                op = self.rng.choice(("add", "sub", "min", "max", "and_", "or_", "xor",
                                      "exch", "cas"))
        value = self.atomic_value(acc, op)
        if op == "cas":
            call = f"nv.atomic.cas(acc, (g, {column}), {np_name(acc)}({self.int_expr(1)}), {value})"
        else:
            call = f"nv.atomic.{op}(acc, (g, {column}), {value})"
        if owned:
            name = self.fresh("old")
            self.emit(f"{name} = {call}")
            self.scalars.append((name, acc))
        else:
            self.emit(call)

    def stmt_shared_atomic(self):
        array, dtype = self.shared_acc
        op, base = self.atomic_op(dtype)
        if self.on("shared_const_index") and self.chance(0.25):
            self.use("shared_const_index")
            where = str(base + self.rng.randint(0, 1))
        else:
            where = f"{base} + ((t + A.shape[0] + {self.sint_expr(1)}) & 1)"
        self.emit(f"nv.atomic.{op}({array}, {where}, {self.atomic_value(dtype, op)})")

    def stmt_private(self):
        self.use("private")
        choices = DTYPES if self.on("private_complex") else DTYPES[:-2]
        dtype = self.rng.choice(choices)
        if dtype in COMPLEX:
            self.use("private_complex")
        name = self.fresh("p")
        if self.on("private_memset") and self.chance(0.15):
            self.use("private_memset")
            n = 1000
            self.emit(f"{name} = nv.local.array({n}, {np_name(dtype)})")
            j = self.fresh("j")
            self.emit(f"for {j} in range({n}):")
            self.emit(f"    {name}[{j}] = 0")
            shape = (n,)
        elif self.on("private_2d") and self.chance(0.25):
            self.use("private_2d")
            shape = (self.rng.choice((2, 3, 4)), self.rng.choice((2, 4, 5)))
            self.emit(f"{name} = nv.local.array({shape}, {np_name(dtype)})")
            j, k = self.fresh("j"), self.fresh("j")
            self.emit(f"for {j} in range({shape[0]}):")
            self.emit(f"    for {k} in range({shape[1]}):")
            self.depth += 2
            self.emit(f"{name}[{j}, {k}] = {self.fill_value(dtype, f'{j} * {shape[1]} + {k}')}")
            self.depth -= 2
        else:
            n = self.rng.choice((4, 5, 8, 16))
            shape = (n,)
            self.emit(f"{name} = nv.local.array({n}, {np_name(dtype)})")
            j = self.fresh("j")
            self.emit(f"for {j} in range({n}):")
            self.depth += 1
            self.emit(f"{name}[{j}] = {self.fill_value(dtype, j)}")
            self.depth -= 1
        array = _Array(name, dtype, shape, writable=True)
        self.arrays.append(array)
        self.dtypes.add(dtype)
        for _ in range(self.rng.randint(0, 2)):
            self.emit(f"{self.element(array)} = {self.value_of(dtype, 1)}")
        if len(shape) == 1 and kind(dtype) in "if" and self.chance(0.3):
            self.sort(array)

    def fill_value(self, dtype, position):
        """What a loop stores at ``position`` of a private array: unless
        ``private_memset`` is on, a value that differs from one element to
        the next, so that LLVM cannot turn the loop into a memset."""
        if self.on("private_memset") and self.chance(0.3):
            self.use("private_memset")
            return self.value_of(dtype, 1)
        k = kind(dtype)
        if k == "b":
            return f"((({self.sint_expr(1)}) + {position}) & 1) == 1"
        if k == "i":
            return f"{np_name(dtype)}(({self.int_expr(1)}) + {position} * 3)"
        if k == "f":
            return f"{np_name(dtype)}({_clamp(self.float_expr(1))} + {position})"
        return f"{np_name(dtype)}(complex({_clamp(self.float_expr(1))}, {position}))"

    def sort(self, array):
        n, name = array.shape[0], array.name
        a, b = self.fresh("j"), self.fresh("j")
        if self.on("private_sort") and self.chance(0.5):
            self.use("private_sort")
            key = self.fresh("key")
            self.emit(f"for {a} in range(1, {n}):")
            self.emit(f"    {key} = {name}[{a}]")
            self.emit(f"    {b} = {a} - 1")
            self.emit(f"    while {b} >= 0 and {name}[{b}] > {key}:")
            self.emit(f"        {name}[{b} + 1] = {name}[{b}]")
            self.emit(f"        {b} -= 1")
            self.emit(f"    {name}[{b} + 1] = {key}")
        else:
            self.emit(f"for {a} in range({n}):")
            self.emit(f"    for {b} in range({n - 1} - {a}):")
            self.emit(f"        if {name}[{b}] > {name}[{b} + 1]:")
            self.emit(f"            {name}[{b}], {name}[{b} + 1] = {name}[{b} + 1], {name}[{b}]")

    def stmt_view(self):
        self.use("views")
        source = self.rng.choice([a for a in self.arrays if not a.writable] or self.arrays)
        name = self.fresh("w")
        n0 = source.shape[0]
        forms = [("[::-1]", n0), ("[1:]", n0 - 1), ("[::2]", (n0 + 1) // 2),
                 ("[::-2]", (n0 + 1) // 2), ("[1:-1]", n0 - 2)]
        if len(source.shape) > 1:
            forms.append((f"[{self.rng.randint(-n0, n0 - 1)}]", None))
        cut, n = self.rng.choice(forms)
        shape = source.shape[1:] if n is None else (n,) + source.shape[1:]
        if min(shape) < 1:
            return
        if source.name.startswith("T"):
            self.use("global_arrays")
        self.emit(f"{name} = {source.name}{cut}")
        self.arrays.append(_Array(name, source.dtype, shape, source.writable))

    def stmt_tuple(self):
        self.use("tuples")
        pool = [v for v in self.scalars if kind(v[1]) != "c" or self.on("complex")]
        if len(pool) < 2:
            return self.stmt_assign()
        items = self.rng.sample(pool, min(len(pool), self.rng.randint(2, 3)))
        r = self.rng.random()
        if r < 0.4:
            name = self.fresh("tp")
            self.emit(f"{name} = ({', '.join(n for n, _ in items)},)")
            self.tuples.append((name, [d for _, d in items]))
        elif r < 0.7:
            same = [v for v in self.scalars if v[1] == items[0][1] and v != items[0]]
            if same:
                other = self.rng.choice(same)[0]
                self.emit(f"{items[0][0]}, {other} = {other}, {items[0][0]}")
        elif self.tuples:
            name, elements = self.rng.choice(self.tuples)
            targets = [self.fresh("u") for _ in elements]
            self.emit(f"{', '.join(targets)} = {name}")
            self.scalars += list(zip(targets, elements))

    def stmt_call(self):
        self.use("device_functions")
        pool = [v for v in self.scalars if kind(v[1]) != "c" or self.on("complex")]
        if not pool:
            return self.stmt_assign()
        args = self.rng.sample(pool, min(len(pool), self.rng.randint(1, 3)))
        fname = f"{self.prefix}_h{len(self.helpers)}"
        array = self.rng.choice(self.arrays) if self.chance(0.5) else None
        params = [f"q{k}" for k in range(len(args))] + (["qa"] if array else [])
        outer = (self.lines, self.depth, self.scalars, self.tuples, self.arrays,
                 self.loop_vars)
        self.lines, self.depth, self.loop_vars, self.phase = [], 1, [], "helper"
        self.scalars = [(f"q{k}", d) for k, (_, d) in enumerate(args)]
        self.tuples = []
        self.arrays = [_Array("qa", array.dtype, array.shape)] if array else []
        if array is None:
            # A leaf needs an array to take shapes from.
            self.arrays = [_Array("A", outer[4][0].dtype, outer[4][0].shape)]
            params.append("A")
        for _ in range(self.rng.randint(1, 3)):
            self.statement()
        returns = [self.rng.choice(DTYPES[:-2]) for _ in range(self.rng.choice((1, 2, 2, 3)))]
        values = [self.value_of(d, 1) for d in returns]
        if len(values) == 1:
            self.emit(f"return {values[0]}")
        else:
            self.emit(f"return {', '.join(values)}")
        body = self.lines
        (self.lines, self.depth, self.scalars, self.tuples, self.arrays,
         self.loop_vars) = outer
        self.phase = "main"
        self.helpers.append(f"def {fname}(t, {', '.join(params)}):\n" + "\n".join(body) + "\n")
        call_args = [n for n, _ in args] + ([array.name] if array else ["A"])
        call = f"{fname}(t, {', '.join(call_args)})"
        targets = [self.fresh("r") for _ in returns]
        if len(targets) > 1 and self.chance(0.3):
            name = self.fresh("tp")
            self.emit(f"{name} = {call}")
            self.tuples.append((name, returns))
        else:
            self.emit(f"{', '.join(targets)} = {call}")
            self.scalars += list(zip(targets, returns))

    def statement(self):
        in_helper = self.phase == "helper"
        choices = [("assign", 5), ("reassign", 2), ("store", 4 if not in_helper else 0),
                   ("if", 1.5 if self.depth < 3 else 0), ("for", 1 if self.depth < 3 else 0)]
        if not in_helper:
            if self.on("atomics"):
                choices.append(("atomic", 1.5))
            if self.shared_acc:
                choices.append(("shared_atomic", 1.5))
            if self.on("private") and self.depth < 3:
                choices.append(("private", 1))
            if self.on("views"):
                choices.append(("view", 0.7))
            if self.on("device_functions") and self.depth < 3:
                choices.append(("call", 1))
        if self.on("tuples"):
            choices.append(("tuple", 1))
        kinds, weights = zip(*choices)
        getattr(self, f"stmt_{self.rng.choices(kinds, weights)[0]}")()

    # The case ------------------------------------------------------------

    def setup_globals(self):
        if not self.on("global_arrays"):
            return
        for _ in range(self.rng.choice((0, 1, 1, 2))):
            dtype = self.rng.choice(("float64", "uint8", "int32", "float32", "int16", "int64"))
            n = self.rng.choice((5, 8, 16, 33))
            name = f"T{self.index}_{len(self.globals)}"
            values = _values(np.random.default_rng(self.rng.randrange(2 ** 32)), dtype, (n,))
            self.globals[name] = values
            self.arrays.append(_Array(name, dtype, (n,)))

    def setup_shared(self):
        """The fill phase: workgroup arrays written by their own invocation."""
        fill = []
        if not self.on("shared"):
            return fill
        for k in range(self.rng.choice((0, 1, 1, 2))):
            choices = DTYPES if self.on("shared_complex") else DTYPES[:-2]
            dtype = self.rng.choice(choices)
            per = self.rng.choice((1, 1, 2))
            if self.on("shared_2d") and self.chance(0.3):
                self.use("shared_2d")
                shape = self.rng.choice(((GROUP // 4, 4 * per), (4 * per, GROUP // 4)))
            else:
                shape = (GROUP * per,)
            if dtype in COMPLEX:
                self.use("shared_complex")
            name = f"sm{k}"
            self.shared.append((_Array(name, dtype, shape), per))
            self.dtypes.add(dtype)
        if self.on("shared_atomics") and self.on("atomics") and self.chance(0.3):
            self.use("shared_atomics")
            dtype = {"int64": "int32", "uint64": "uint32", "float64": "float32"}.get(
                self.family.acc, self.family.acc)
            self.shared_acc = ("sa", dtype)
        saved = self.lines
        self.lines = []
        for array, per in self.shared:
            # Invocation t owns the elements t * per .. t * per + per - 1 in
            # C order, whatever the shape.
            j = self.fresh("j")
            self.emit(f"for {j} in range({per}):")
            self.loop_vars.append(j)
            self.depth += 1
            flat = f"t * {per} + {j}"
            if len(array.shape) == 2:
                where = f"({flat}) // {array.shape[1]}, ({flat}) % {array.shape[1]}"
            else:
                where = flat
            self.emit(f"{array.name}[{where}] = {self.value_of(array.dtype, 1)}")
            self.depth -= 1
            self.loop_vars.pop()
        if self.shared_acc:
            self.emit(f"if t < {ACC_DRAINED}:")
            self.emit(f"    sa[t] = {np_name(self.shared_acc[1])}({self.rng.randint(-5, 5)})")
        fill, self.lines = self.lines, saved
        self.phase = "main"
        return fill

    def generate(self):
        self.setup_globals()
        fill = self.setup_shared()
        self.phase = "main"
        self.emit(f"row = g * {GROUP} + t")
        for _ in range(self.rng.randint(1, 2)):
            self.stmt_assign()
        for _ in range(self.rng.randint(2, self.size)):
            self.statement()
        for name, dtype in self.scalars[-3:]:
            self.store_value(name, dtype)
        inputs = self.family.params()[:-4]
        shared = [a.name for a, _ in self.shared] + (["sa"] if self.shared_acc else [])
        params = ", ".join(["phase", "t", "g"] + inputs + shared + ["oi", "of", "om", "acc"])
        parts = ["@numba.njit\n" + h for h in self.helpers]
        # One function for the three phases keeps the compile count down;
        # the kernel calls it with each constant phase, the barriers between.
        body = []
        if fill:
            body += ["    if phase == 0:"] + ["    " + line for line in fill] + ["        return"]
        if self.shared_acc:
            body += ["    if phase == 2:",
                     f"        if t < {ACC_DRAINED}:",
                     f"            acc[g, {ACC_SHARED + GROUP} + t] = sa[t]",
                     "        return"]
        parts.append(f"@numba.njit\ndef {self.prefix}({params}):\n"
                     + "\n".join(body + self.lines) + "\n")
        return "\n".join(parts)


class Case:
    """One generated case: its source, what it needs and what it used."""

    def __init__(self, seed, index, features=DEFAULT_FEATURES, size=SIZE):
        self.seed, self.index = seed, index
        self.family = Family(seed, index // FAMILY, features)
        gen = _Case(seed, index, self.family, frozenset(features), size)
        self.source = gen.generate()
        self.features = gen.used
        if self.family.push_bytes() > PUSH_LIMIT:
            self.features.add("many_args")
        self.dtypes = gen.dtypes
        self.globals = gen.globals
        self.shared = [(a.name, a.dtype, a.shape) for a, _ in gen.shared]
        self.shared_acc = gen.shared_acc
        self.has_fill = bool(gen.shared) or bool(gen.shared_acc)
        self.tolerances = gen.tolerances
        self.inputs = self.family.params()[:-4]
        self.prefix = gen.prefix


def case_source(seed, index, features=DEFAULT_FEATURES, size=SIZE):
    """The source of case ``index`` of ``seed`` (its functions only)."""
    case = Case(seed, index, features, size)
    head = [f"# family: {case.family.describe()}"]
    head += [f"{n} = np.array({v.tolist()!r}, np.{v.dtype})" for n, v in case.globals.items()]
    return "\n".join(head) + "\n\n" + case.source


# --------------------------------------------------------------------------
# Running batches


_PRELUDE = """\
import cmath
import math
import numba
import numpy as np


"""

_CPU_ATOMICS = """
@numba.njit
def _atomic_add(a, i, v):
    old = a[i]
    a[i] = old + v
    return old


@numba.njit
def _atomic_sub(a, i, v):
    old = a[i]
    a[i] = old - v
    return old


@numba.njit
def _atomic_min(a, i, v):
    old = a[i]
    a[i] = min(old, v)
    return old


@numba.njit
def _atomic_max(a, i, v):
    old = a[i]
    a[i] = max(old, v)
    return old


@numba.njit
def _atomic_and_(a, i, v):
    old = a[i]
    a[i] = old & v
    return old


@numba.njit
def _atomic_or_(a, i, v):
    old = a[i]
    a[i] = old | v
    return old


@numba.njit
def _atomic_xor(a, i, v):
    old = a[i]
    a[i] = old ^ v
    return old


@numba.njit
def _atomic_exch(a, i, v):
    old = a[i]
    a[i] = v
    return old


@numba.njit
def _atomic_cas(a, i, expected, v):
    old = a[i]
    if old == expected:
        a[i] = v
    return old
"""


def _exec_source(source, filename, namespace):
    # Registered with linecache so that Numba's messages quote the program.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)


def _for_cpu(source):
    source = re.sub(r"nv\.atomic\.(\w+)\(", r"_atomic_\1(", source)
    return source.replace("nv.local.array(", "np.zeros(")


def batch_sources(cases):
    """The GPU and the CPU module of ``cases``: the GPU's kernel runs case k
    in workgroup k; the CPU's driver is run by :func:`run_cpu`."""
    params = cases[0].family.params()
    glob = []
    for case in cases:
        glob += [f"{n} = np.array({v.tolist()!r}, np.{v.dtype})" for n, v in case.globals.items()]
    body = "\n\n".join(c.source for c in cases)
    kernel = [f"def kernel({', '.join(params)}):",
              "    t = nv.local_id(0)",
              "    g = nv.group_id(0)"]
    for k, case in enumerate(cases):
        kernel.append(f"    {'if' if k == 0 else 'elif'} g == {k}:")
        shared = [n for n, _, _ in case.shared]
        for name, dtype, shape in case.shared:
            kernel.append(f"        {name} = nv.shared.array({shape}, {np_name(dtype)})")
        if case.shared_acc:
            shared.append("sa")
            kernel.append(f"        sa = nv.shared.array({ACC_DRAINED}, "
                          f"{np_name(case.shared_acc[1])})")
        args = ", ".join(["t", "g"] + case.inputs + shared + ["oi", "of", "om", "acc"])
        if case.has_fill:
            kernel.append(f"        {case.prefix}(0, {args})")
            kernel.append("        nv.barrier()")
        kernel.append(f"        {case.prefix}(1, {args})")
        if case.shared_acc:
            kernel.append("        nv.barrier()")
            kernel.append(f"        {case.prefix}(2, {args})")
    common = _PRELUDE + "\n" + "\n".join(glob) + "\n\n" + body
    gpu = "import numba_vulkan as nv\n" + common + "\n\n" + "\n".join(kernel) + "\n"
    cpu = _for_cpu(common) + _CPU_ATOMICS
    return gpu, cpu


def make_arguments(cases):
    """Seeded arguments for a batch of ``cases`` (one family): the inputs
    depend on the family alone and each case's row of ``acc`` on the case,
    so a case sees the same values in any batch, alone too."""
    family = cases[0].family
    rng = np.random.default_rng([cases[0].seed, family.number])
    args = [make_view(rng, a) for a in family.inputs]
    if family.scalar is not None:
        v = _values(rng, family.scalar, ())
        args.append(v.item() if family.scalar == "bool" else np.dtype(family.scalar).type(v))
    rows = len(cases) * GROUP
    for name, dtype in (("oi", family.oi), ("of", family.of), ("om", "float64")):
        shape = (rows, SLOTS) if family.out_ndim[name] == 2 else (rows * SLOTS,)
        args.append(np.zeros(shape, dtype))
    acc = np.array([np.random.default_rng([c.seed, c.index]).integers(-8, 9, ACC_WIDTH)
                    for c in cases])
    if family.acc.startswith("u"):
        acc = np.abs(acc)
    args.append(acc.astype(family.acc))
    return args


def run_cpu(cases, namespace, args):
    """Run ``cases`` on the CPU: every phase for every invocation in turn."""
    params = cases[0].family.params()
    named = dict(zip(params, args))
    inputs = [named[n] for n in cases[0].inputs]
    for g, case in enumerate(cases):
        shared = [np.zeros(shape, dtype) for _, dtype, shape in case.shared]
        if case.shared_acc:
            shared.append(np.zeros(ACC_DRAINED, case.shared_acc[1]))
        function = namespace[case.prefix]
        outputs = [named["oi"], named["of"], named["om"], named["acc"]]
        phases = ([0] if case.has_fill else []) + [1] + ([2] if case.shared_acc else [])
        for phase in phases:
            for t in range(GROUP):
                function(phase, t, g, *inputs, *shared, *outputs)


class Outcome:
    """Counts and failures of a run."""

    def __init__(self):
        self.cases = 0
        self.passed = 0
        self.failures = []      # (seed, index, class, message)
        self.features = {}

    def fail(self, case, cls, message):
        self.failures.append((case.seed, case.index, cls, message))

    def by_class(self):
        counts = {}
        for _, _, cls, _ in self.failures:
            counts[cls] = counts.get(cls, 0) + 1
        return counts

    def __repr__(self):
        return f"{self.cases} cases, {self.passed} passed, {len(self.failures)} failed " \
               f"{self.by_class() or ''}"


def _classify(exc):
    import numba
    import numba_vulkan as nv
    if isinstance(exc, nv.LaunchError) or isinstance(exc, nv.DriverError):
        return "launch"
    if isinstance(exc, nv.VulkanError):
        return f"compile:{type(exc).__name__}"
    if isinstance(exc, numba.core.errors.NumbaError):
        return "typing"
    return f"internal:{type(exc).__name__}"


def _message(exc):
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text[:1500]}"


def _rows(array, g, ndim):
    if ndim == 2:
        return array[g * GROUP:(g + 1) * GROUP]
    return array[g * GROUP * SLOTS:(g + 1) * GROUP * SLOTS].reshape(GROUP, SLOTS)


def _compare(case, g, got, expected):
    """None if case ``g`` of the batch gave the same results, else what differs."""
    family = case.family
    names = family.params()
    got, expected = dict(zip(names, got)), dict(zip(names, expected))
    for name in ("oi", "of"):
        a = _rows(got[name], g, family.out_ndim[name])
        b = _rows(expected[name], g, family.out_ndim[name])
        same = (a == b) | ((a != a) & (b != b))
        if not same.all():
            t, s = np.argwhere(~same)[0]
            return f"{name}[invocation {t}, slot {s}]: Vulkan {a[t, s]!r}, numba.njit {b[t, s]!r}"
    a = _rows(got["om"], g, family.out_ndim["om"])
    b = _rows(expected["om"], g, family.out_ndim["om"])
    for slot, tolerance in case.tolerances.items():
        bound = tolerance * np.maximum(np.abs(b[:, slot]), 1.0)
        bad = ~(np.abs(a[:, slot] - b[:, slot]) <= bound)
        if bad.any():
            t = np.flatnonzero(bad)[0]
            return f"om[invocation {t}, slot {slot}]: Vulkan {a[t, slot]!r}, " \
                   f"numba.njit {b[t, slot]!r} (tolerance {tolerance:.3g} relative)"
    if not np.array_equal(got["acc"][g], expected["acc"][g]):
        s = np.flatnonzero(got["acc"][g] != expected["acc"][g])[0]
        return f"acc[{g}, {s}]: Vulkan {got['acc'][g][s]!r}, numba.njit {expected['acc'][g][s]!r}"
    return None


def run_batch(cases, outcome, supports_int64_atomics=True):
    """Compile and run ``cases`` (one family); record each case's outcome.
    A batch that fails to compile or launch is split to find the cases at
    fault."""
    import numba_vulkan as nv
    first, last = cases[0].index, cases[-1].index
    gpu_source, cpu_source = batch_sources(cases)
    args = make_arguments(cases)
    expected = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    cpu_ns = {}
    try:
        _exec_source(cpu_source, f"<langfuzz-cpu seed={cases[0].seed} {first}..{last}>", cpu_ns)
        run_cpu(cases, cpu_ns, expected)
    except Exception as exc:
        if len(cases) > 1:
            half = len(cases) // 2
            run_batch(cases[:half], outcome, supports_int64_atomics)
            run_batch(cases[half:], outcome, supports_int64_atomics)
            return
        outcome.cases += 1
        outcome.fail(cases[0], "generator", _message(exc))
        return
    if not supports_int64_atomics and cases[0].family.acc in ("int64", "uint64", "float64") \
            and any("atomics" in c.features for c in cases):
        outcome.cases += len(cases)
        outcome.passed += len(cases)
        return
    gpu_ns = {}
    try:
        _exec_source(gpu_source, f"<langfuzz seed={cases[0].seed} {first}..{last}>", gpu_ns)
        kernel = nv.jit(gpu_ns["kernel"])
        got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        kernel[len(cases), GROUP](*got)
    except Exception as exc:
        if len(cases) > 1:
            half = len(cases) // 2
            run_batch(cases[:half], outcome, supports_int64_atomics)
            run_batch(cases[half:], outcome, supports_int64_atomics)
            return
        outcome.cases += 1
        outcome.fail(cases[0], _classify(exc), _message(exc))
        return
    for g, case in enumerate(cases):
        outcome.cases += 1
        for feature in case.features:
            outcome.features[feature] = outcome.features.get(feature, 0) + 1
        problem = _compare(case, g, got, expected)
        if problem:
            outcome.fail(case, "mismatch", problem)
        else:
            outcome.passed += 1


def _batches(start, cases, batch):
    """(first, end) of each batch: a batch never crosses a family, whose
    cases share one signature."""
    spans, index = [], start
    while index < start + cases:
        end = min(start + cases, (index // FAMILY + 1) * FAMILY, index + batch)
        spans.append((index, end))
        index = end
    return spans


def _print_progress(outcome):
    print(f"  ... [{os.getpid()}] {outcome}", file=sys.stderr, flush=True)


def _run_spans(seed, spans, features, size, progress=None):
    from numba_vulkan.runtime.device import current_device
    int64_atomics = "int64_atomics" in current_device().info.features
    outcome = Outcome()
    for first, end in spans:
        run_batch([Case(seed, k, features, size) for k in range(first, end)], outcome,
                  int64_atomics)
        if progress:
            progress(outcome)
    return outcome


def run(seed, cases, start=0, features=DEFAULT_FEATURES, batch=FAMILY, progress=None,
        size=SIZE, jobs=1):
    """Run ``cases`` cases of ``seed`` from ``start``; the :class:`Outcome`.
    With ``jobs`` > 1 the batches are shared among as many processes."""
    spans = _batches(start, cases, batch)
    if jobs <= 1:
        return _run_spans(seed, spans, features, size, progress)
    import concurrent.futures
    import multiprocessing
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
        parts = [pool.submit(_run_spans, seed, spans[k::jobs], features, size,
                             _print_progress if progress else None)
                 for k in range(jobs)]
        outcomes = [part.result() for part in parts]
    outcome = Outcome()
    for part in outcomes:
        outcome.cases += part.cases
        outcome.passed += part.passed
        outcome.failures += part.failures
        for name, count in part.features.items():
            outcome.features[name] = outcome.features.get(name, 0) + count
    outcome.failures.sort(key=lambda failure: failure[1])
    return outcome


def check(case):
    """``(class, message)`` of ``case`` run alone, or None if it passes."""
    from numba_vulkan.runtime.device import current_device
    outcome = Outcome()
    run_batch([case], outcome, "int64_atomics" in current_device().info.features)
    return outcome.failures[0][2:] if outcome.failures else None


def _signature(failure):
    cls, message = failure
    if cls == "mismatch":
        return cls
    return cls, re.sub(r"%[\w.]+|\d+", "#", message)[:120]


def _blocks(lines):
    """(start, end) of every statement of ``lines`` that may be deleted,
    last first: a line with the lines indented below it."""
    spans = []
    for i, line in enumerate(lines):
        if line.startswith("@numba.njit"):
            # A whole device function.
            end = i + 2
            while end < len(lines) and (not lines[end] or lines[end][0] == " "):
                end += 1
            spans.append((i, end))
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith(("@", "def ", "return", "row =")):
            continue
        if stripped.startswith(("else:", "elif ")):
            continue
        indent = len(line) - len(line.lstrip())
        end = i + 1
        while end < len(lines) and (len(lines[end]) - len(lines[end].lstrip()) > indent
                                    or lines[end].strip().startswith(("else:", "elif "))
                                    and len(lines[end]) - len(lines[end].lstrip()) == indent):
            end += 1
        spans.append((i, end))
    return spans[::-1]


def reduce_case(case, log=None):
    """Delete statements of ``case`` while it still fails the same way;
    return the failure and the case, smallest first found."""
    failure = check(case)
    if failure is None:
        return None, case
    wanted = _signature(failure)
    changed = True
    while changed:
        changed = False
        lines = case.source.splitlines()
        for start, end in _blocks(lines):
            trial = lines[:start] + lines[end:]
            original = case.source
            case.source = "\n".join(trial) + "\n"
            result = check(case)
            if result is not None and _signature(result) == wanted:
                failure, changed = result, True
                if log:
                    log(f"  reduced to {len(trial)} lines")
                break
            case.source = original
    return failure, case


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--batch", type=int, default=FAMILY)
    parser.add_argument("--enable", default="", help="comma-separated features to switch on")
    parser.add_argument("--disable", default="", help="comma-separated features to switch off")
    parser.add_argument("--all", action="store_true", help="every feature, known failures too")
    parser.add_argument("--jobs", type=int, default=1, help="processes to share the batches")
    parser.add_argument("--size", type=int, default=SIZE, help="most statements per case body")
    parser.add_argument("--show", type=int, help="print the source of this case and exit")
    parser.add_argument("--reduce", type=int,
                        help="run this case alone, delete statements while it fails the same "
                             "way, print the kernel module that is left and the failure")
    parser.add_argument("--quiet", action="store_true", help="counts only, no failure texts")
    args = parser.parse_args(argv)
    features = set(FEATURES) if args.all else set(DEFAULT_FEATURES)
    for name in filter(None, args.enable.split(",")):
        if name not in FEATURES:
            parser.error(f"unknown feature {name!r}; known: {', '.join(FEATURES)}")
        features.add(name)
    features -= set(filter(None, args.disable.split(",")))
    flags = ""
    if features != DEFAULT_FEATURES:
        flags = f" --enable {','.join(sorted(features - DEFAULT_FEATURES))}" \
                if features >= DEFAULT_FEATURES else f" --enable {','.join(sorted(features))}"
    if args.show is not None:
        print(case_source(args.seed, args.show, frozenset(features), args.size))
        return 0
    os.environ.setdefault("NUMBA_VULKAN_CACHE", "0")
    if args.reduce is not None:
        case = Case(args.seed, args.reduce, frozenset(features), args.size)
        failure, case = reduce_case(case, lambda text: print(text, file=sys.stderr))
        if failure is None:
            print(f"case {args.reduce} of seed {args.seed} passes alone")
            return 0
        print(f"# {case.family.describe()}")
        print(batch_sources([case])[0])
        print(f"# [{failure[0]}] {failure[1]}")
        return 1
    began = time.perf_counter()

    def progress(outcome):
        print(f"  ... {outcome} after {time.perf_counter() - began:.0f} s", file=sys.stderr,
              flush=True)

    outcome = run(args.seed, args.cases, args.start, frozenset(features), args.batch,
                  None if args.quiet else progress, args.size, args.jobs)
    if not args.quiet:
        for seed, index, cls, message in outcome.failures:
            print(f"FAIL [{cls}] seed={seed} index={index}: {message}\n"
                  f"  source: python -m tests.fuzz.langfuzz --seed {seed} --show {index}{flags}")
    print(f"seed {args.seed}: {outcome} in {time.perf_counter() - began:.0f} s")
    print("features exercised: " + ", ".join(f"{k} {v}" for k, v in sorted(outcome.features.items())))
    return 1 if outcome.failures else 0


if __name__ == "__main__":
    sys.exit(main())
