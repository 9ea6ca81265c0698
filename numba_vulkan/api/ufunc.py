"""GPU ufuncs: ``@nv.vectorize``, ``@nv.guvectorize`` and ``nv.reduce``.

Each is built on ``@nv.jit`` kernels: the user's scalar (or core) function
becomes a device function, and for each signature and argument shape a
small kernel is generated as Python source that calls it once per element
(or per loop index of a gufunc). The generated kernels are ordinary
:class:`~numba_vulkan.api.dispatcher.VulkanDispatcher` objects, so they go
through the same lookup as any kernel: AOT directories, the kernel cache,
then a compile. They are reachable as attributes of the ufunc object
(``add.loop_float32_float32_1d_aa``), which is how an AOT manifest names
them (``docs/ufuncs.md``).

Broadcasting happens on the host, without copies: an operand is passed as
a view whose strides are 0 along broadcast axes, which the binding
interface carries like any strides. NumPy operands are staged by the
launch as for any kernel; device operands stay where they are.
"""

import hashlib
import linecache
import math
import os
import re
import threading

import numpy as np

from numba_vulkan.base import abi
from numba_vulkan.base import files
from numba_vulkan.base import intrinsics
from numba_vulkan.api import numba_target
from numba_vulkan.api.dispatcher import VulkanDispatcher, check_options
from numba_vulkan.runtime import memory
from numba_vulkan.runtime.device import current_device

#: Invocations per workgroup of the generated kernels (fewer on a device
#: whose limit is lower).
THREADS = 256

#: Workgroups along x before a launch also spreads along y (Vulkan's
#: guaranteed minimum of maxComputeWorkGroupCount).
_MAX_GROUPS = 65535

#: Folder of the cache directory that holds generated kernel source.
_GENERATED = "generated"

#: Workgroups of a reduction's first pass at most; each invocation folds
#: every (groups * threads)-th element first.
_REDUCE_GROUPS = 1024

_ALIASES = {"boolean": "bool", "bool_": "bool", "b1": "bool", "intp": "int64",
            "uintp": "uint64", "double": "float64", "float": "float64", "int": "int64"}

_ARRAY_TYPE = re.compile(r"^(\w+)\s*\[([^\]]*)\]$")
# str() of a Numba array type: array(float32, 1d, C)
_NUMBA_ARRAY = re.compile(r"^array\((\w+),\s*(\d+)d,\s*\w+\)$")

_KERNEL_GLOBALS = {"np": np, "global_id": intrinsics.global_id,
                   "global_size": intrinsics.global_size, "local_id": intrinsics.local_id,
                   "group_id": intrinsics.group_id, "num_groups": intrinsics.num_groups,
                   "barrier": intrinsics.barrier, "shared": intrinsics.shared}


# Signatures -----------------------------------------------------------------

def _dtype(name, where):
    name = _ALIASES.get(name.strip(), name.strip())
    try:
        dtype = np.dtype(name)
    except TypeError:
        raise TypeError(f"{where}: {name!r} is not a type name") from None
    if dtype.name not in abi.SCALAR_DTYPES:
        raise TypeError(f"{where}: type {dtype.name} is not supported in kernels")
    return dtype


def _split(text):
    """Comma-separated items of ``text``, commas inside brackets excepted."""
    items, depth, start = [], 0, 0
    for k, ch in enumerate(text):
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:k])
            start = k + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _type(text, where):
    """``(dtype, ndim)`` of a type's text: ``float32``, ``float32[:, ::1]``,
    or a Numba type's ``array(float32, 2d, C)``."""
    text = text.strip()
    m = _ARRAY_TYPE.match(text) or _NUMBA_ARRAY.match(text)
    if m is None:
        return _dtype(text, where), 0
    if m.re is _NUMBA_ARRAY:
        return _dtype(m.group(1), where), int(m.group(2))
    dims = _split(m.group(2))
    if not dims or any(d.replace(" ", "") not in (":", "::1") for d in dims):
        raise TypeError(f"{where}: bad array type {text!r} (write float32[:] or "
                        "float32[:, ::1])")
    return _dtype(m.group(1), where), len(dims)


def parse_signature(sig):
    """``(return type, argument types)`` of a signature, each type as
    ``(dtype, ndim)`` (the return type None for ``void``).

    Takes ``"float32(float32, int32)"``, ``"void(float32[:], float32[:])"``,
    Numba's ``(float32, float32) -> float32`` form, or a Numba signature
    object (anything whose ``str()`` is one of these), without Numba.
    """
    if not isinstance(sig, str):
        args = getattr(sig, "args", None)
        if args is not None:
            ret = getattr(sig, "return_type", None)
            sig = f"{ret if ret is not None else 'void'}({', '.join(map(str, args))})"
        elif isinstance(sig, (tuple, list)):
            sig = f"void({', '.join(map(str, sig))})"
        else:
            sig = str(sig)
    text = sig.strip()
    where = f"signature {sig!r}"
    arrow = re.fullmatch(r"\((.*)\)\s*->\s*(.+)", text)
    if arrow:
        args, ret = arrow.group(1), arrow.group(2)
    else:
        m = re.fullmatch(r"(\w*)\s*\((.*)\)", text)
        if m is None:
            raise TypeError(f"bad {where}: write it as 'float32(float32, float32)'")
        ret, args = m.group(1) or "void", m.group(2)
    ret = None if ret.strip() in ("void", "none", "None") else _type(ret, where)
    return ret, tuple(_type(a, where) for a in _split(args))


def _check_stream(stream):
    # Duck-typed: numba_vulkan.cuda's Stream (that module imports Numba).
    if not (stream is None or callable(getattr(stream, "synchronize", None))
            or (isinstance(stream, (int, np.integer)) and not isinstance(stream, bool)
                and stream == 0)):
        raise TypeError(f"stream must be a stream object, 0 or None, not {stream!r}")


def _device_function(func, options):
    """``func`` as an ``nv.jit`` function that generated kernels call."""
    if isinstance(func, VulkanDispatcher):
        return func
    if not callable(func) or not hasattr(func, "__code__"):
        raise TypeError(f"expected a Python function, not {func!r}")
    # The cache keeps kernels; a device function is compiled into each.
    return VulkanDispatcher(func, {k: v for k, v in options.items() if k != "cache"})


def _source_file(source, label, cached):
    """The file name generated source is compiled under.

    For a ``cache=True`` ufunc, a file of the cache directory named by the
    source's SHA-256, written once: the kernel cache's ``functions/`` section
    finds kernels by their source files (:func:`numba_vulkan.store.keys.source_stamp`),
    and an unchanged file keeps its stamp across processes. Otherwise, or
    where the cache cannot be written, a name of its own registered with
    :mod:`linecache`. Either way a compile error shows the generated line.
    """
    root = files.cache_root() if cached else None
    if root is not None:
        data = source.encode()
        path = os.path.join(root, _GENERATED, hashlib.sha256(data).hexdigest() + ".py")
        try:
            with open(path, "rb") as f:
                if f.read() == data:
                    return path
        except OSError:
            pass
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            files.write_atomic(path, data)
            return path
        except OSError:
            pass
    filename = f"<numba_vulkan generated {label}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return filename


def _generate(function, name, source, options):
    """A kernel from generated source that calls ``function``.

    Its qualified name is ``function``'s plus ``name`` and its module is
    ``function``'s, so that a manifest names it through the ufunc object.
    """
    qualname = f"{function.__qualname__}.{name}"
    filename = _source_file(source, f"{function.__module__}:{qualname}",
                            bool(options.get("cache")))
    namespace = dict(_KERNEL_GLOBALS, f=function, __name__=function.__module__)
    exec(compile(source, filename, "exec"), namespace)
    py_func = namespace[name]
    py_func.__qualname__ = qualname
    return VulkanDispatcher(py_func, options)


def _unravel(names, array, indent):
    """Lines that turn flat index ``i`` into one index per axis of ``array``."""
    if len(names) == 1:
        return [f"{indent}{names[0]} = i"]
    lines = [f"{indent}r = i"]
    for axis in range(len(names) - 1, 0, -1):
        lines.append(f"{indent}{names[axis]} = r % {array}.shape[{axis}]")
        lines.append(f"{indent}r //= {array}.shape[{axis}]")
    lines.append(f"{indent}{names[0]} = r")
    return lines


def _threads():
    return min(THREADS, current_device().info.max_workgroup_invocations)


def _launch(kernel, count, args, threads, stream=0):
    blocks = -(-count // threads)
    x = min(blocks, _MAX_GROUPS)
    kernel[(x, -(-blocks // x)), threads, stream](*args)


# Operands -------------------------------------------------------------------

def _operand(value):
    """A call argument as ``(kind, value)``: ``device``, ``host`` or ``scalar``."""
    if isinstance(value, memory.DeviceArray):
        return "device", value
    if isinstance(value, np.ndarray):
        return ("scalar", value[()]) if value.ndim == 0 else ("host", value)
    if isinstance(value, (bool, int, float, complex, np.generic)):
        return "scalar", value
    if isinstance(value, (list, tuple)):
        return _operand(np.asarray(value))
    raise TypeError(f"a value of type {type(value).__name__} cannot be a ufunc operand "
                    "(pass a NumPy array, a device array or a scalar)")


def _castable(kind, value, dtype):
    """Whether an operand converts to ``dtype`` safely, as NumPy 2 decides:
    arrays and NumPy scalars by their dtype, Python scalars by their kind
    (an int also by its value)."""
    if kind != "scalar" or isinstance(value, np.generic):
        return bool(np.can_cast(value.dtype, dtype, "safe"))
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            return info.min <= value <= info.max
        return dtype.kind in "fc"
    if isinstance(value, float):
        return dtype.kind in "fc"
    return dtype.kind == "c"


def _typed(kind, value):
    """Whether an operand has a dtype of its own: an array or a NumPy scalar."""
    return kind != "scalar" or isinstance(value, np.generic)


def _cast(dtype):
    """The NumPy constructor that converts to ``dtype`` in generated source."""
    return "np.bool_" if dtype == np.bool_ else f"np.{dtype.name}"


def _scalar(dtype, value):
    """A scalar kernel argument of ``dtype`` (a bool as Python's, which the
    launch packs)."""
    return bool(value) if dtype == np.bool_ else dtype.type(value)


def _type_name(kind, value):
    if kind == "scalar" and not isinstance(value, np.generic):
        return type(value).__name__
    return value.dtype.name


def _broadcast(kind, value, shape):
    """A view of an array operand with ``shape``, 0 strides on broadcast axes."""
    if value.shape == shape:
        return value
    if kind == "host":
        return np.broadcast_to(value, shape)
    lead = len(shape) - value.ndim
    strides = [0] * lead + [0 if extent == 1 and want != 1 else stride
                            for extent, stride, want in zip(value.shape, value.strides,
                                                            shape[lead:])]
    return value._like(shape, tuple(strides))


def _add_axis(kind, value, where):
    """A view with an axis of extent 1 added at ``where`` (0 or -1)."""
    if kind == "host":
        return value[np.newaxis] if where == 0 else value[..., np.newaxis]
    item = value.dtype.itemsize
    if where == 0:
        return value._like((1,) + value.shape, (0,) + value.strides)
    return value._like(value.shape + (1,), value.strides + (item,))


def _new_output(on_device, shape, dtype):
    if on_device:
        return "device", memory.device_array(shape, dtype)
    return "host", np.empty(shape, dtype)


def _result(kind, value):
    """What a call returns for one output: a NumPy scalar for a 0-d host result."""
    if kind == "host" and value.ndim == 0:
        return value[()]
    return value


class _Base:
    """What :class:`VulkanUFunc` and :class:`VulkanGUFunc` share."""

    def __init__(self, func, signatures, options, what):
        # Numba's compile mode, which code written for numba's vectorize
        # names: a GPU ufunc has only nopython mode.
        if options.pop("nopython", True) is not True:
            raise TypeError(f"{what}: nopython must be True (a GPU ufunc is compiled in "
                            "nopython mode)")
        options = check_options(options, what)
        self._function = _device_function(func, options)
        self._options = options
        self.py_func = self._function.py_func
        self.__name__ = self.py_func.__name__
        self.__qualname__ = self.py_func.__qualname__
        self.__doc__ = self.py_func.__doc__
        self.__module__ = self.py_func.__module__
        self.__wrapped__ = self.py_func
        if isinstance(signatures, str) or not isinstance(signatures, (list, tuple)):
            signatures = [signatures]
        if not signatures:
            example = ("void(float32[:], float32[:])" if what == "guvectorize"
                       else "float32(float32, float32)")
            raise TypeError(f"{what} needs a list of signatures, such as [{example!r}]; "
                            "types are not inferred here")
        #: The signatures as given, for the subclass to parse.
        self._given = list(signatures)
        self._lock = threading.RLock()
        self._kernels = {}

    def _select(self, operands, args_of):
        """The signature for the operands: as numba.cuda picks it, the first
        whose types the arrays (and NumPy scalars) have exactly, Python
        scalars fitting it; where there is none, the first whose types every
        operand casts to safely, as a NumPy ufunc picks (numba.cuda refuses
        those)."""
        for exact in (True, False):
            for sig in self._signatures:
                dtypes = args_of(sig)
                if all(_castable(kind, value, dtype) and not (
                        exact and _typed(kind, value) and value.dtype != dtype)
                       for (kind, value), dtype in zip(operands, dtypes)):
                    return sig
        got = ", ".join(_type_name(kind, value) for kind, value in operands)
        have = "; ".join(self.types)
        raise TypeError(f"ufunc {self.__name__!r}: no signature takes inputs of types ({got}) "
                        f"safely (its signatures: {have}); convert the inputs, e.g. with "
                        ".astype()")

    def _kernel(self, name, source):
        with self._lock:
            kernel = self._kernels.get(name)
            if kernel is None:
                kernel = self._kernels[name] = _generate(self._function, name,
                                                         source(), self._options)
            return kernel

    def __getattr__(self, name):
        # Generated kernels by name, for AOT manifests (module:ufunc.loop_...).
        if name.startswith("loop_"):
            source = self._source_for(name)
            if source is not None:
                return self._kernel(name, lambda: source)
        raise AttributeError(f"{type(self).__name__} {self.__dict__.get('__name__')!r} has no "
                             f"attribute {name!r}")

    def _source_for(self, name):
        raise NotImplementedError

    def __repr__(self):
        return f"<numba_vulkan {type(self).__name__} {self.__qualname__}>"


# @vectorize -----------------------------------------------------------------

class VulkanUFunc(_Base):
    """A GPU ufunc made by :func:`vectorize`: call it like a NumPy ufunc.

    ``ufunc(a, b)`` broadcasts its operands (NumPy arrays, device arrays,
    scalars), picks the first signature whose argument types they all cast
    to safely, and runs one invocation per element. The result is a device
    array when any operand is one, else a NumPy array (a NumPy scalar when
    every operand is a scalar). ``out=`` (or one more positional argument)
    receives the result instead; ``stream=`` runs the call's copies and
    launches on that stream, after what it has queued (a call with device
    operands only returns without waiting).
    """

    def __init__(self, func, signatures, **options):
        super().__init__(func, signatures, options, "vectorize")
        self._selected = {}
        self._by_layout = {}
        self._signatures = []
        for sig in self._given:
            ret, args = parse_signature(sig)
            if ret is None or ret[1] or any(ndim for _, ndim in args):
                raise TypeError(f"vectorize signature {sig!r}: scalars only, with a return "
                                "type, such as 'float32(float32, float32)'")
            if not args:
                raise TypeError(f"vectorize signature {sig!r} has no arguments")
            self._signatures.append((ret[0], tuple(d for d, _ in args)))
        nins = {len(args) for _, args in self._signatures}
        if len(nins) != 1:
            raise TypeError(f"vectorize {self.__name__}: every signature must take the same "
                            "number of arguments")
        self.nin = nins.pop()
        self.nout = 1
        self.nargs = self.nin + 1

    @property
    def types(self):
        """The signatures in NumPy's notation (``'ff->f'``)."""
        return ["".join(d.char for d in args) + "->" + ret.char
                for ret, args in self._signatures]

    @property
    def ntypes(self):
        return len(self._signatures)

    def aot_entries(self, sig):
        """``(attribute, kernel signature)`` of the kernel an AOT manifest
        builds for one of this ufunc's signatures: the one that calls with
        C-contiguous arrays of one shape and the signature's dtypes use
        (other calls name theirs in the AOT miss warning)."""
        ret, args = parse_signature(sig)
        dtypes = tuple(d for d, _ in args)
        if ret is None or (ret[0], dtypes) not in self._signatures:
            raise TypeError(f"it is not one of the signatures of ufunc {self.__name__!r} "
                            f"({'; '.join(self.types)})")
        arrays = ", ".join(f"{d.name}[::1]" for d in dtypes + (ret[0],))
        return [(self._name(dtypes, 1, "a" * len(dtypes)), f"void({arrays})")]

    @staticmethod
    def _name(dtypes, ndim, mask):
        return f"loop_{'_'.join(d.name for d in dtypes)}_{ndim}d_{mask}"

    def _source_for(self, name):
        for _, dtypes in self._signatures:
            prefix = f"loop_{'_'.join(d.name for d in dtypes)}_"
            rest = name[len(prefix):] if name.startswith(prefix) else ""
            m = re.fullmatch(r"(\d+)d_([as]+)", rest)
            if m and len(m.group(2)) == len(dtypes) and 1 <= int(m.group(1)) <= 32:
                return self._source(name, dtypes, int(m.group(1)), m.group(2))
        return None

    @staticmethod
    def _source(name, dtypes, ndim, mask):
        params = [f"a{k}" for k in range(len(dtypes))] + ["out"]
        index = [f"i{axis}" for axis in range(ndim)]
        at = ", ".join(index)
        values = [f"{_cast(dtype)}(a{k}[{at}])" if kind == "a" else f"{_cast(dtype)}(a{k})"
                  for k, (dtype, kind) in enumerate(zip(dtypes, mask))]
        lines = [f"def {name}({', '.join(params)}):",
                 "    i = global_id(1) * global_size(0) + global_id(0)",
                 "    if i < out.size:",
                 *_unravel(index, "out", "        "),
                 f"        out[{at}] = f({', '.join(values)})"]
        return "\n".join(lines) + "\n"

    def __call__(self, *args, out=None, stream=0):
        _check_stream(stream)
        if len(args) == self.nin + 1 and out is None:
            *args, out = args
        if isinstance(out, tuple) and len(out) == 1:
            out = out[0]
        if len(args) != self.nin:
            raise TypeError(f"ufunc {self.__name__!r} takes {self.nin} input(s), "
                            f"{len(args)} were given")
        operands = [_operand(a) for a in args]
        ret, dtypes = self._select_cached(operands)
        arrays = [(k, v) for k, v in operands if k != "scalar"]
        target = None
        if out is not None:
            target = _operand(out)
            if target[0] == "scalar":
                raise TypeError(f"ufunc {self.__name__!r}: out must be an array")
            if target[1].dtype != ret and not np.can_cast(ret, target[1].dtype, "same_kind"):
                raise TypeError(f"ufunc {self.__name__!r}: cannot store its {ret} result in "
                                f"out of dtype {target[1].dtype} (casting 'same_kind')")
        shapes = [v.shape for _, v in arrays] + ([target[1].shape] if target else [])
        try:
            shape = (shapes[0] if shapes and shapes.count(shapes[0]) == len(shapes)
                     else np.broadcast_shapes(*shapes))
        except ValueError:
            raise ValueError(f"ufunc {self.__name__!r}: operands of shapes "
                             f"{', '.join(map(str, shapes))} do not broadcast together") from None
        if target is not None and shape != target[1].shape:
            raise ValueError(f"ufunc {self.__name__!r}: out has shape {target[1].shape}, the "
                             f"operands broadcast to {shape}")
        on_device = any(k == "device" for k, _ in operands)
        if target is None:
            target = _new_output(on_device, shape, ret)
        if target[0] == "host" and not target[1].flags.writeable:
            raise ValueError(f"ufunc {self.__name__!r}: out is read-only")
        if math.prod(shape):
            self._run(operands, dtypes, target, shape, stream)
        return target[1] if out is not None else _result(*target)

    def _select_cached(self, operands):
        """:meth:`_select`, remembered per operand types where they alone
        decide (a Python int also by its value, so not then)."""
        key = tuple(type(v) if k == "scalar" and not isinstance(v, np.generic) else v.dtype
                    for k, v in operands)
        if int in key:
            return self._select(operands, lambda sig: sig[1])
        found = self._selected.get(key)
        if found is None:
            found = self._selected[key] = self._select(operands, lambda sig: sig[1])
        return found

    def _reducer(self):
        with self._lock:
            reducer = self.__dict__.get("_reduce")
            if reducer is None:
                reducer = self.__dict__["_reduce"] = Reduce(self._function, **self._options)
            return reducer

    def __getattr__(self, name):
        # The kernels of reduce() too (module:ufunc.loop_float32_256).
        if self.__dict__.get("nin") == 2 and re.fullmatch(r"loop_[a-z]+\d*_\d+", name):
            return getattr(self._reducer(), name)
        return super().__getattr__(name)

    def reduce(self, arr, stream=0):
        """Reduce a 1-d array with this binary ufunc, as numba.cuda's
        ``ufunc.reduce``: the first signature ``T(T, T)`` that ``arr``'s dtype
        casts to safely, by :class:`Reduce` (so the function must be
        associative and commutative). Returns a NumPy scalar; an empty
        array is a ValueError, as this ufunc has no identity."""
        if self.nin != 2:
            raise TypeError(f"ufunc {self.__name__!r}.reduce needs a binary ufunc, this one "
                            f"takes {self.nin} input(s)")
        kind, value = _operand(arr)
        for ret, (a, b) in self._signatures:
            if a == b == ret and kind != "scalar" and _castable(kind, value, a):
                break
        else:
            raise TypeError(f"ufunc {self.__name__!r}.reduce: no signature T(T, T) takes "
                            f"{_type_name(kind, value)} safely ({'; '.join(self.types)})")
        if value.ndim != 1:
            raise TypeError(f"ufunc {self.__name__!r}.reduce: expects a 1-d array")
        if not value.size:
            raise ValueError(f"ufunc {self.__name__!r}.reduce of an empty array: the ufunc "
                             "has no identity")
        reducer = self._reducer()
        value = _converted(kind, value, ret)
        # The first element is the initial value: every other is folded in once.
        first = value[0]
        rest = value[1:]
        return reducer(rest, init=first, stream=stream) if rest.size else ret.type(first)

    def _run(self, operands, dtypes, target, shape, stream=0):
        arrays = [(k, v) for k, v in operands if k != "scalar"] + [target]
        count = math.prod(shape)
        if all(v.shape == shape and v.flags.c_contiguous if k == "host" else
               v.shape == shape and v.is_c_contiguous() for k, v in arrays):
            # Every operand is laid out alike: one flat loop over the elements.
            flat = (count,)
            view = (lambda k, v: v) if len(shape) == 1 else (lambda k, v: v.reshape(flat))
            ndim = 1
        else:
            ndim = max(len(shape), 1)
            full = shape or (1,)
            view = lambda k, v: _broadcast(k, v, full)
        mask = "".join("s" if k == "scalar" else "a" for k, _ in operands)
        kernel = self._by_layout.get((dtypes, ndim, mask))
        if kernel is None:
            name = self._name(dtypes, ndim, mask)
            kernel = self._by_layout[dtypes, ndim, mask] = self._kernel(
                name, lambda: self._source(name, dtypes, ndim, mask))
        launch = [_scalar(dtype, v) if k == "scalar" else view(k, v)
                  for (k, v), dtype in zip(operands, dtypes)]
        launch.append(view(*target))
        _launch(kernel, count, launch, _threads(), stream)


def vectorize(signatures, **options):
    """A decorator that makes a GPU ufunc from a scalar function.

    ``@nv.vectorize(["float32(float32, float32)", "float64(float64, float64)"])``;
    options are ``nv.jit``'s (``fastmath``, ``cache``, ...). See
    :class:`VulkanUFunc` and ``docs/ufuncs.md``.
    """
    if callable(signatures) and not isinstance(signatures, (str, list, tuple)):
        raise TypeError("nv.vectorize needs signatures: @nv.vectorize(['float32(float32)'])")

    def wrap(func):
        return VulkanUFunc(func, signatures, **options)

    return wrap


# @guvectorize ---------------------------------------------------------------

def parse_layout(layout):
    """The core dimensions of a gufunc layout ``"(n),(n)->()"``: a tuple of
    name tuples for the inputs and one for the outputs."""
    text = layout.replace(" ", "")
    m = re.fullmatch(r"(.*)->(.*)", text)
    group = r"\((?:\w+(?:,\w+)*)?\)"
    if m is None or not re.fullmatch(f"{group}(?:,{group})*", m.group(1)) \
            or not re.fullmatch(f"{group}(?:,{group})*", m.group(2)):
        raise ValueError(f"bad gufunc layout {layout!r}: write it as '(n),(n)->()'")

    def groups(part):
        return tuple(tuple(g.split(",")) if g else () for g in re.findall(r"\(([^)]*)\)", part))
    return groups(m.group(1)), groups(m.group(2))


class VulkanGUFunc(_Base):
    """A generalized GPU ufunc made by :func:`guvectorize`.

    ``gufunc(*inputs)`` runs the core function once per index of the loop
    dimensions (the operands' leading dimensions, broadcast together), on
    views of the core dimensions its layout names, and returns the
    output(s); outputs may also be passed after the inputs or as ``out=``.
    A ``()`` output is a 1-element array in the core function
    (``out[0] = ...``). Operands that are not of the signature's dtype are
    converted first (NumPy arrays on the host, device arrays by a device
    kernel), since the core function sees them as arrays.
    """

    def __init__(self, func, signatures, layout, **options):
        super().__init__(func, signatures, options, "guvectorize")
        self.layout = layout
        self._ins, self._outs = parse_layout(layout)
        self.nin, self.nout = len(self._ins), len(self._outs)
        self.nargs = self.nin + self.nout
        self._signatures = []
        for sig in self._given:
            ret, args = parse_signature(sig)
            if ret is not None:
                raise TypeError(f"guvectorize signature {sig!r} must return void: outputs "
                                "are arguments")
            if len(args) != self.nargs:
                raise TypeError(f"guvectorize signature {sig!r} has {len(args)} arguments; "
                                f"layout {layout!r} has {self.nargs} operands")
            for k, ((dtype, ndim), core) in enumerate(zip(args, self._ins + self._outs)):
                scalar_ok = k < self.nin and not core
                if ndim != max(len(core), 1) and not (scalar_ok and ndim == 0):
                    raise TypeError(f"guvectorize signature {sig!r}: argument {k} has "
                                    f"{ndim} dimension(s), its core {core} needs "
                                    f"{max(len(core), 1)}")
            self._signatures.append(args)

    @property
    def types(self):
        return ["".join(d.char for d, _ in args[:self.nin]) + "->"
                + "".join(d.char for d, _ in args[self.nin:]) for args in self._signatures]

    @property
    def ntypes(self):
        return len(self._signatures)

    def aot_entries(self, sig):
        """``(attribute, kernel signature)`` of the kernel an AOT manifest
        builds for one of this gufunc's signatures: the one that calls with
        C-contiguous array operands of one loop dimension use."""
        _, args = parse_signature(sig)
        if args not in self._signatures:
            raise TypeError(f"it is not one of the signatures of gufunc {self.__name__!r}")
        index = self._signatures.index(args)
        mask, types = "", []
        for k, ((dtype, ndim), core) in enumerate(zip(args, self._ins + self._outs)):
            if k < self.nin:
                mask += "e" if ndim == 0 else "v"
            dims = 1 + (ndim if core or k >= self.nin or ndim else 0)
            types.append(f"{dtype.name}[{', '.join([':'] * (dims - 1) + ['::1'])}]")
        return [(f"loop_{index}_1d_{mask}", f"void({', '.join(types)})")]

    def _source_for(self, name):
        m = re.fullmatch(r"loop_(\d+)_(\d+)d_([ves]+)", name)
        if m and int(m.group(1)) < len(self._signatures) and len(m.group(3)) == self.nin \
                and 1 <= int(m.group(2)) <= 32:
            return self._source(name, self._signatures[int(m.group(1))], int(m.group(2)),
                                m.group(3))
        return None

    def _source(self, name, args, ndim, mask):
        ins = [f"a{k}" for k in range(self.nin)]
        outs = [f"o{k}" for k in range(self.nout)]
        index = [f"i{axis}" for axis in range(ndim)]
        at = ", ".join(index)
        values = []
        for k, kind in enumerate(mask):
            dtype = args[k][0]
            values.append(f"a{k}[{at}]" if kind == "v" else
                          f"{_cast(dtype)}(a{k}[{at}])" if kind == "e" else
                          f"{_cast(dtype)}(a{k})")
        values += [f"o{k}[{at}]" for k in range(self.nout)]
        count = " * ".join(f"o0.shape[{axis}]" for axis in range(ndim))
        lines = [f"def {name}({', '.join(ins + outs)}):",
                 "    i = global_id(1) * global_size(0) + global_id(0)",
                 f"    if i < {count}:",
                 *_unravel(index, "o0", "        "),
                 f"        f({', '.join(values)})"]
        return "\n".join(lines) + "\n"

    def __call__(self, *args, out=None, stream=0):
        _check_stream(stream)
        if out is not None:
            args = args + (tuple(out) if isinstance(out, tuple) else (out,))
        if len(args) not in (self.nin, self.nargs):
            raise TypeError(f"gufunc {self.__name__!r} takes {self.nin} input(s) and "
                            f"{self.nout} output(s), {len(args)} operands were given")
        operands = [_operand(a) for a in args[:self.nin]]
        outputs = [_operand(a) for a in args[self.nin:]]
        if any(k == "scalar" for k, _ in outputs):
            raise TypeError(f"gufunc {self.__name__!r}: outputs must be arrays")
        sig = self._select(operands, lambda s: [d for d, _ in s[:self.nin]])
        index = self._signatures.index(sig)
        sizes, loops = {}, []
        for k, ((kind, value), core) in enumerate(zip(operands + outputs,
                                                      self._ins + self._outs)):
            shape = () if kind == "scalar" else value.shape
            if len(shape) < len(core):
                raise ValueError(f"gufunc {self.__name__!r}: operand {k} has "
                                 f"{len(shape)} dimension(s), its core {core} needs "
                                 f"{len(core)}")
            split = len(shape) - len(core)
            for dim, extent in zip(core, shape[split:]):
                if sizes.setdefault(dim, extent) != extent:
                    raise ValueError(f"gufunc {self.__name__!r}: dimension {dim!r} is "
                                     f"{sizes[dim]} in one operand and {extent} in operand {k}")
            loops.append(shape[:split])
        try:
            loop = np.broadcast_shapes(*loops)
        except ValueError:
            raise ValueError(f"gufunc {self.__name__!r}: loop dimensions "
                             f"{', '.join(map(str, loops))} do not broadcast together") from None
        for k, (kind, value) in enumerate(outputs):
            if loops[self.nin + k] != loop:
                raise ValueError(f"gufunc {self.__name__!r}: output {k} has loop dimensions "
                                 f"{loops[self.nin + k]}, the inputs broadcast to {loop}")
            if value.dtype != sig[self.nin + k][0]:
                raise TypeError(f"gufunc {self.__name__!r}: output {k} has dtype "
                                f"{value.dtype}, signature {self.types[index]} writes "
                                f"{sig[self.nin + k][0]}")
        on_device = any(k == "device" for k, _ in operands)
        given = bool(outputs)
        if not given:
            for k, core in enumerate(self._outs):
                missing = [d for d in core if d not in sizes]
                if missing:
                    raise ValueError(f"gufunc {self.__name__!r}: output dimension(s) "
                                     f"{', '.join(missing)} appear in no input; pass the "
                                     "output")
                outputs.append(_new_output(on_device, loop + tuple(sizes[d] for d in core),
                                           sig[self.nin + k][0]))
        if math.prod(loop) and all(v.size for _, v in outputs):
            self._run(index, sig, operands, outputs, loop, stream)
        results = [_result(k, v) for k, v in outputs]
        if given:
            results = [v for _, v in outputs]
        return results[0] if self.nout == 1 else tuple(results)

    def _run(self, index, sig, operands, outputs, loop, stream=0):
        lead = not loop
        full = loop or (1,)
        mask, launch = [], []
        for k, ((kind, value), core) in enumerate(zip(operands, self._ins)):
            dtype, ndim = sig[k]
            if kind == "scalar":
                if ndim:
                    # A 0-d array, given its trailing axis of 1 below.
                    kind, value = "host", np.asarray(value, dtype)
                else:
                    mask.append("s")
                    launch.append(_scalar(dtype, value))
                    continue
            if not core and ndim == 0:
                mask.append("e")
                value = _broadcast(kind, value, loop)
                launch.append(_add_axis(kind, value, 0) if lead else value)
                continue
            mask.append("v")
            value = _converted(kind, value, dtype, stream)
            shape = loop + value.shape[value.ndim - len(core):] if core else loop
            value = _broadcast(kind, value, shape)
            if not core:
                value = _add_axis(kind, value, -1)
            launch.append(_add_axis(kind, value, 0) if lead else value)
        for (kind, value), core in zip(outputs, self._outs):
            if not core:
                value = _add_axis(kind, value, -1)
            launch.append(_add_axis(kind, value, 0) if lead else value)
        ndim = len(full)
        name = f"loop_{index}_{ndim}d_{''.join(mask)}"
        kernel = self._kernel(name, lambda: self._source(name, sig, ndim, "".join(mask)))
        _launch(kernel, math.prod(full), launch, _threads(), stream)


_casts = {}
_casts_lock = threading.Lock()


def _same(x):
    return x


def _converted(kind, value, dtype, stream=0):
    """An array operand in ``dtype``: converted on the host or on the device."""
    if value.dtype == dtype:
        return value
    if kind == "host":
        return value.astype(dtype)
    key = (value.dtype, dtype)
    with _casts_lock:
        cast = _casts.get(key)
        if cast is None:
            cast = _casts[key] = VulkanUFunc(_same, [f"{dtype.name}({value.dtype.name})"])
    converted = memory.device_array(value.shape, dtype)
    if value.size:
        cast(value, out=converted, stream=stream)
    return converted


def guvectorize(signatures, layout, **options):
    """A decorator that makes a generalized GPU ufunc from a core function.

    ``@nv.guvectorize(["void(float32[:], float32[:], float32[:])"], "(n),(n)->()")``;
    options are ``nv.jit``'s. See :class:`VulkanGUFunc` and ``docs/ufuncs.md``.
    """
    def wrap(func):
        return VulkanGUFunc(func, signatures, layout, **options)

    return wrap


# reduce ---------------------------------------------------------------------

class Reduce:
    """A tree reduction over a 1-d array with a binary function, as
    numba.cuda's ``cuda.reduce``: ``nv.reduce(lambda a, b: a + b)(array)``.

    The function must be associative and commutative: the order in which
    elements are combined is not the array's. It is compiled as a device
    function of the array's dtype, and its results are cast to that dtype.
    """

    def __init__(self, functor, **options):
        self._options = check_options(options, "reduce")
        self._function = _device_function(functor, self._options)
        self.py_func = self._function.py_func
        self.__name__ = self.py_func.__name__
        self.__qualname__ = self.py_func.__qualname__
        self.__module__ = self.py_func.__module__
        self.__doc__ = self.py_func.__doc__
        self.__wrapped__ = self.py_func
        self._lock = threading.RLock()
        self._kernels = {}

    def __repr__(self):
        return f"<numba_vulkan Reduce {self.__qualname__}>"

    def __getattr__(self, name):
        # Generated kernels by name, for AOT manifests (module:reducer.loop_float32_256).
        m = re.fullmatch(r"loop_(\w+?)_(\d+)", name)
        if m and m.group(2) in ("64", "128", "256"):
            try:
                dtype = _dtype(m.group(1), name)
            except TypeError:
                dtype = None
            if dtype is not None and dtype.kind != "c":
                return self._kernel(dtype, int(m.group(2)))
        raise AttributeError(f"Reduce {self.__dict__.get('__name__')!r} has no attribute "
                             f"{name!r}")

    def aot_entries(self, sig):
        """``(attribute, kernel signature)`` of the kernel an AOT manifest
        builds for a reduction of one dtype, given as ``"float32"`` or as the
        binary function's signature ``"float32(float32, float32)"``."""
        dtype = _dtype(sig, "reduce") if re.fullmatch(r"\s*\w+\s*", sig) else \
            parse_signature(sig)[1][0][0]
        if dtype.kind == "c":
            raise TypeError("complex reductions are not supported")
        return [(f"loop_{dtype.name}_{THREADS}",
                 f"void({dtype.name}[::1], {dtype.name}[::1], {dtype.name}, int32)")]

    @staticmethod
    def _source(name, dtype, threads):
        cast = _cast(dtype)
        lines = [f"def {name}(src, dst, init, final):",
                 f"    tile = shared.array({threads}, '{dtype.name}')",
                 "    lane = local_id(0)",
                 "    group = group_id(0)",
                 "    n = src.shape[0]",
                 f"    i = group * {threads} + lane",
                 "    if i < n:",
                 "        acc = src[i]",
                 f"        step = num_groups(0) * {threads}",
                 "        j = i + step",
                 "        while j < n:",
                 f"            acc = {cast}(f(acc, src[j]))",
                 "            j += step",
                 "        tile[lane] = acc",
                 "    barrier()",
                 # The lanes holding values are a prefix of the group.
                 f"    valid = min({threads}, n - group * {threads})"]
        half = threads // 2
        while half:
            lines += [f"    if lane < {half} and lane + {half} < valid:",
                      f"        tile[lane] = {cast}(f(tile[lane], tile[lane + {half}]))",
                      "    barrier()"]
            half //= 2
        lines += ["    if lane == 0:",
                  "        if final:",
                  f"            dst[group] = {cast}(f(tile[0], init))",
                  "        else:",
                  "            dst[group] = tile[0]"]
        return "\n".join(lines) + "\n"

    def _kernel(self, dtype, threads):
        name = f"loop_{dtype.name}_{threads}"
        with self._lock:
            kernel = self._kernels.get(name)
            if kernel is None:
                kernel = self._kernels[name] = _generate(
                    self._function, name, self._source(name, dtype, threads), self._options)
            return kernel

    def __call__(self, arr, size=None, res=None, init=0, stream=0):
        """Reduce ``arr`` (a 1-d NumPy or device array), or its first ``size``
        elements, combining the result with ``init`` last.

        Returns the result as a NumPy scalar of ``arr``'s dtype, or, when
        ``res`` (a device array) is given, writes it to ``res[0]`` on the
        device, without waiting, and returns None. An empty array reduces
        to ``init``.
        """
        _check_stream(stream)
        kind, arr = _operand(arr)
        if kind == "scalar" or arr.ndim != 1:
            raise TypeError(f"reduce {self.__name__!r}: expects a 1-d array, not "
                            f"{'a scalar' if kind == 'scalar' else f'{arr.ndim}-d'}")
        dtype = arr.dtype
        if dtype.kind == "c":
            raise TypeError(f"reduce {self.__name__!r}: complex arrays are not supported")
        if size is not None:
            if not 0 <= int(size) <= arr.shape[0]:
                raise ValueError(f"reduce {self.__name__!r}: size {size} is outside "
                                 f"0..{arr.shape[0]}")
            arr = arr[:int(size)]
        if res is not None and (not isinstance(res, memory.DeviceArray) or not res.size
                                or res.dtype != dtype):
            raise TypeError(f"reduce {self.__name__!r}: res must be a device array of dtype "
                            f"{dtype} with at least one element")
        init = dtype.type(init)
        n = arr.shape[0]
        if n == 0:
            if res is None:
                return init
            res[0] = init
            return None
        if kind == "host":
            arr = memory.to_device(arr, stream=stream)
        threads = _threads()
        threads = 256 if threads >= 256 else 128 if threads >= 128 else 64
        kernel = self._kernel(dtype, threads)
        groups = min(-(-n // threads), _REDUCE_GROUPS)
        dst = res if res is not None else memory.device_array(1, dtype)
        if groups > 1:
            partial = memory.device_array(groups, dtype)
            kernel[groups, threads, stream](arr, partial, _scalar(dtype, init), np.int32(0))
            arr = partial
        kernel[1, threads, stream](arr, dst, _scalar(dtype, init), np.int32(1))
        if res is None:
            return dst.copy_to_host(stream=stream)[0]
        return None


reduce = Reduce
numba_target.build_with(VulkanUFunc, VulkanGUFunc)
