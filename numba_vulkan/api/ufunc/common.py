"""What the GPU ufuncs share: their signatures, the kernels they generate
as Python source and launch, their host and device operands, and the base
class of :class:`~numba_vulkan.api.ufunc.VulkanUFunc` and
:class:`~numba_vulkan.api.ufunc.VulkanGUFunc`."""

import hashlib
import linecache
import os
import re
import threading

import numpy as np

from numba_vulkan.base import abi
from numba_vulkan.base import files
from numba_vulkan.base import intrinsics
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
