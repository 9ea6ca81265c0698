"""``@nv.jit`` kernels: compiling per signature, finding compiled code, launching.

A launch computes its argument types as text (:mod:`numba_vulkan.base.signature`)
without Numba, then looks for a launch plan (pipeline plus argument packer)
made earlier for those types, that device and workgroup size. Only when
there is none does it look further, and only a compile imports Numba.
"""

import builtins
import pickle
import sys
import threading

import numpy as np

from numba_vulkan.base import abi
from numba_vulkan.base import config
from numba_vulkan.base import jitoptions
from numba_vulkan.api import captures, service
from numba_vulkan.base.request import KernelRequest
from numba_vulkan.spirv import modulecheck
from numba_vulkan.base import printbuffer
from numba_vulkan.base import records
from numba_vulkan.base import signature
from numba_vulkan.base.errors import DriverError, LaunchError
from numba_vulkan.runtime import memory, pipeline_cache, queue
from numba_vulkan.runtime.device import current_device, opened_device
from numba_vulkan.runtime.pipeline import Pipeline

_COMPLEX = ("complex64", "complex128")

# How a launch passes each argument (_Plan.kinds); a tuple's kind is a _TupleScalar.
_ARRAY, _SCALAR, _COMPLEX_SCALAR = range(3)


class _TupleScalar:
    """How a launch passes a tuple of numbers: as the bytes of the record it
    travels as (:func:`numba_vulkan.base.signature.tuple_record`)."""

    __slots__ = ("dtype",)

    def __init__(self, record_text):
        self.dtype = records.dtype(record_text)

    def pack(self, value):
        return np.array(tuple(value), self.dtype).tobytes()

#: What a parameter without a default has in ``_defaults``.
_NO_DEFAULT = object()

#: Options of ``nv.jit`` and what they do (from :mod:`numba_vulkan.base.jitoptions`).
OPTIONS = {name: option.description for name, option in jitoptions.OPTIONS.items()}


def _dim3(value, what):
    # Exactly int: a bool or an int subclass takes the general path.
    if type(value) is int and value > 0:
        return (value, 1, 1)
    items = (value,) if isinstance(value, (int, float, np.number)) else value
    try:
        items = tuple(items)
    except TypeError:
        items = (value,)
    for item in items:
        # int() would make 10.9 groups 10, silently.
        if isinstance(item, bool) or not isinstance(item, (int, np.integer)):
            raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, not "
                            f"{value!r} ({item!r} is not an int)")
    value = tuple(int(v) for v in items)
    if not 1 <= len(value) <= 3 or any(v < 1 for v in value):
        raise LaunchError(f"{what} must be a positive int or a tuple of 1 to 3 of them, "
                          f"not {value}")
    return value + (1,) * (3 - len(value))


def _forall_shape(n):
    """forall's ``n``, an int or a tuple of 1 to 3 ints, as a tuple; checked."""
    items = n if isinstance(n, tuple) else (n,)
    if not 1 <= len(items) <= 3 or any(
            isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in items):
        raise TypeError(f"forall(n): n must be an int or a shape (a tuple of 1 to 3 ints), "
                        f"not {n!r}")
    if any(v < 0 for v in items):
        raise ValueError(f"forall(n): n must not be negative, not {n}")
    return tuple(int(v) for v in items)


def _forall_threads(ndim, total):
    """A workgroup of at most ``total`` invocations over ``ndim`` axes: its
    power of two split as evenly as it goes, the first axes taking more."""
    exponent = total.bit_length() - 1
    return tuple(1 << (exponent // ndim + (k < exponent % ndim)) for k in range(ndim))


def _shared_bytes(value, what):
    """A launch's bytes of dynamic shared memory, checked."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an int (bytes of dynamic shared memory), not "
                        f"{value!r}")
    if value < 0:
        raise ValueError(f"{what} must not be negative, not {value}")
    return int(value)


#: What a kernel uses that needs each subgroup feature, for launch errors.
_SUBGROUP_USES = {
    "subgroup_vote": "subgroup votes (nv.subgroup.all, any, all_equal; cuda.all_sync, "
                     "any_sync, eq_sync)",
    "subgroup_arithmetic": "subgroup reductions or scans (nv.subgroup.reduce_*, "
                           "inclusive_*, exclusive_*)",
    "subgroup_ballot": "subgroup ballots or broadcasts (nv.subgroup.ballot, broadcast; "
                       "cuda.ballot_sync, activemask)",
    "subgroup_shuffle": "subgroup shuffles (nv.subgroup.shuffle, shuffle_xor; "
                        "cuda.shfl_sync, shfl_xor_sync)",
    "subgroup_shuffle_relative": "relative subgroup shuffles (nv.subgroup.shuffle_up, "
                                 "shuffle_down; cuda.shfl_up_sync, shfl_down_sync)",
    "subgroup_extended_types": "subgroup sums, minima or maxima of 64-bit integers "
                               "(shaderSubgroupExtendedTypes)",
}


class _Plan:
    """What a launch of one signature on one device needs, made once."""

    __slots__ = ("pipeline", "params", "kernel", "status", "printer", "hidden", "kinds",
                 "written")

    def __init__(self, kernel, device):
        self.kernel = kernel
        self.params = kernel.params
        self.kinds = tuple(_TupleScalar(p.storage) if text.startswith("(") else
                           _ARRAY if p.kind == "array" else
                           _COMPLEX_SCALAR if p.dtype in _COMPLEX else _SCALAR
                           for p, text in zip((p for p in kernel.params
                                               if p.kind in ("array", "scalar")),
                                              kernel.signature))
        if "Int64Atomics" in kernel.capabilities and "int64_atomics" not in device.info.features:
            raise LaunchError(f"{kernel.name} uses 64-bit atomics, which device "
                              f"{device.info.name} does not support")
        if "StorageBuffer16BitAccess" in kernel.capabilities \
                and "storage16" not in device.info.features:
            raise LaunchError(f"{kernel.name} has float16 or 16-bit integer arrays, which "
                              f"device {device.info.name} cannot store (it lacks "
                              "storageBuffer16BitAccess)")
        if "StorageBuffer8BitAccess" in kernel.capabilities \
                and "storage8" not in device.info.features:
            raise LaunchError(f"{kernel.name} has int8, uint8 or bool arrays (or records with "
                              f"such fields), which device {device.info.name} cannot store "
                              "(it lacks storageBuffer8BitAccess)")
        lacking = sorted(modulecheck.subgroup_features(kernel.spirv) - device.info.features)
        if lacking:
            uses = "; ".join(_SUBGROUP_USES[f] for f in lacking)
            raise LaunchError(f"{kernel.name} uses {uses}, which device {device.info.name} "
                              "does not support (python -m numba_vulkan info lists its "
                              "subgroup operations)")
        # Per argument: whether it is an array the kernel may write.
        written = modulecheck.written_bindings(kernel.spirv)
        self.written = tuple(p.kind == "array" and p.binding in written
                             for p in kernel.params if p.kind in ("array", "scalar"))
        _check_shared_memory(kernel, device)
        self.pipeline = Pipeline(device, kernel.spirv, kernel.params, kernel.push_size,
                                 cache=pipeline_cache.for_device(device), name=kernel.name)
        # Where a kernel compiled with error checks reports the first error.
        self.status = None
        if any(p.kind == "status" for p in kernel.params):
            self.status = memory.to_device(np.zeros(abi.STATUS_WORDS, np.uint32), device=device)
        self.printer = None
        if any(p.kind == "print" for p in kernel.params):
            self.printer = _Printer(kernel, device)
        self.hidden = self._hidden()

    def _hidden(self):
        """The buffers bound after the arrays, in the order of their parameters."""
        return [(self.status if p.kind == "status" else self.printer).buffer
                for p in self.params if p.kind in ("status", "print")]

    def check(self, stream=None):
        """Raise the exception the last launch (on ``stream``) reported, if any."""
        words = np.zeros(abi.STATUS_WORDS, np.uint32)
        self.status.buffer.read(words, stream=stream)
        if words[0]:
            # On the default stream: every later launch, on any stream, comes
            # after it, so none sees the error again.
            self.status.buffer.write(np.zeros(abi.STATUS_WORDS, np.uint32))
            invocation = tuple(int(w) for w in words[1:4])
            if words[0] == abi.LOOP_LIMIT_CODE and "loop_limit" in self.kernel.metadata:
                raise _loop_limit_error(self.kernel, invocation)
            description = self.kernel.metadata.get("exceptions", {}).get(str(int(words[0])))
            raise _kernel_exception(description, self.kernel.name, invocation)


class _Printer:
    """The print buffer of a kernel that calls ``print``, on one device.

    Sized by ``NUMBA_VULKAN_PRINT_BUFFER_BYTES`` when a launch starts; after
    the launch, its records are decoded and written to ``sys.stdout`` (see
    :mod:`numba_vulkan.base.printbuffer`). Launches that share it hold its lock
    from before the launch until its output is written.
    """

    __slots__ = ("formats", "device", "size", "buffer", "lock")

    def __init__(self, kernel, device):
        self.formats = kernel.metadata.get("print", {})
        self.device = device
        self.size = None
        self.buffer = None
        self.lock = threading.Lock()

    def prepare(self):
        """Make the buffer for the current setting; whether it is a new one."""
        size = config.print_buffer_bytes()
        if size == self.size:
            return False
        self.buffer = memory.Buffer(self.device, size)
        self.buffer.write(printbuffer.header(size))
        self.size = size
        return True

    def flush(self):
        """Write the finished launch's lines to ``sys.stdout``, and empty the buffer."""
        head = printbuffer.header(self.size)
        self.buffer.read(head)
        if not head[printbuffer.RESERVED] and not head[printbuffer.DROPPED]:
            return
        used = min(int(head[printbuffer.RESERVED]), int(head[printbuffer.END]),
                   int(head[printbuffer.CAPACITY]))
        words = np.empty(printbuffer.HEADER_WORDS + used, np.uint32)
        words[:printbuffer.HEADER_WORDS] = head
        self.buffer.read(words[printbuffer.HEADER_WORDS:], 4 * printbuffer.HEADER_WORDS)
        self.buffer.write(printbuffer.header(self.size))
        sys.stdout.write("".join(printbuffer.decode(words, self.formats)))


def _check_shared_memory(kernel, device):
    """Raise LaunchError if the kernel's shared memory, static and dynamic,
    exceeds the device's maxComputeSharedMemorySize."""
    dynamic = kernel.metadata.get("shared_bytes", 0)
    total = modulecheck.interface(kernel.spirv).workgroup_bytes
    limit = device.info.max_shared_memory
    if max(total, dynamic) <= limit:
        return
    # The dynamic block is one of the module's workgroup variables, when used.
    static = total - dynamic if total >= dynamic else total
    raise LaunchError(f"kernel {kernel.name} needs {static} bytes of static shared memory "
                      f"and {dynamic} of dynamic shared memory (shared_bytes), "
                      f"{static + dynamic} in all, but device {device.info.name} has "
                      f"{limit} (maxComputeSharedMemorySize)")


def _loop_limit_error(kernel, invocation):
    limit = kernel.metadata["loop_limit"]
    return LaunchError(
        f"kernel {kernel.name} hit the device's loop limit in invocation {invocation}: the "
        f"driver (lavapipe) leaves every loop of an invocation after {limit} loop trips, all "
        "loops together, so the launch's results are incomplete. Give each invocation fewer "
        "trips (more invocations, shorter loops) or run on a GPU.")


def _refuse_read_only(dispatcher, plan, args, value):
    """Raise for a read-only NumPy array where the kernel writes: its writes
    would be lost (the array cannot take the results back)."""
    position = next(k for k, a in enumerate(args) if a is value and plan.written[k])
    raise LaunchError(f"{dispatcher.__qualname__}(): parameter "
                      f"{plan.params[position].name!r} is a read-only array, and the "
                      "kernel writes it; pass a writable array (a copy)")


def _refuse_other_device(dispatcher, plan, args, value, device):
    """Raise for a device array of another device than the launch's."""
    # The first argument that is this array is the one found wanting.
    param = plan.params[next(k for k, a in enumerate(args) if a is value)]
    other = value.buffer.device
    raise LaunchError(f"{dispatcher.__qualname__}(): parameter {param.name!r} lives on "
                      f"another device: it is an array of device {other.id} ({other.name}), "
                      f"and the launch runs on device {device.id} ({device.name}), the "
                      "calling thread's current one. Launch inside `with nv.gpus["
                      f"{other.id}]:`, or copy the array over with "
                      f"nv.to_device(array, device={device.id})")


#: Most elements an array argument may have: kernels index arrays with
#: 32-bit integers (its shape travels as int32 in the push constants).
MAX_ELEMENTS = 2**31 - 1

_AXES = "xyz"


def _grid_error(dispatcher, groups, device):
    """The LaunchError of a grid past the device's workgroup count limits."""
    limit = device.info.max_workgroup_count
    axis = next(i for i in range(3) if groups[i] > limit[i])
    return LaunchError(f"kernel {dispatcher.__qualname__}: {groups[axis]} workgroups along "
                       f"{_AXES[axis]} (grid {list(groups)}) exceed the limit of device "
                       f"{device.info.name}, {limit[axis]} (maxComputeWorkGroupCount "
                       f"{list(limit)})")


def _too_many_elements(dispatcher, plan, number, value):
    """The LaunchError of an array argument with more than :data:`MAX_ELEMENTS`."""
    return LaunchError(f"{dispatcher.__qualname__}(): parameter {plan.params[number].name!r} "
                       f"is an array of {value.size} elements (shape {tuple(value.shape)}); "
                       f"kernels index arrays with 32-bit integers, so at most {MAX_ELEMENTS}")


def _scalar_error(dispatcher, plan, args):
    """The LaunchError naming the scalar argument its type cannot hold, or None."""
    for param, value in zip(plan.params, args):
        if param.kind != "scalar" or isinstance(value, complex) or \
                records.is_record(param.storage):
            continue
        dtype = np.dtype(param.storage)
        try:
            if dtype.kind in "iub":
                info = np.iinfo(dtype) if dtype.kind != "b" else np.iinfo(np.int32)
                fits = info.min <= int(value) <= info.max
            elif dtype.kind == "f":
                fits = not np.isfinite(value) or abs(float(value)) <= np.finfo(dtype).max
            else:
                continue
        except (TypeError, ValueError, OverflowError):
            fits = False
        if not fits:
            return LaunchError(f"{dispatcher.__qualname__}(): parameter {param.name!r}: "
                               f"{value!r} does not fit its type {param.dtype}")
    return None


def _kernel_exception(description, kernel, invocation):
    """The Python exception for an error a kernel reported in its status."""
    where = f"in kernel {kernel}, invocation {invocation}"
    if description is None:
        return LaunchError(f"the kernel reported an unknown error {where}")
    if description.get("file") and description.get("line"):
        where += f", {description['file']}:{description['line']}"
    kind = description.get("type", "Exception")
    message = description.get("message") or ""
    text = f"{message} ({where})" if message else where
    cls = _exception_class(kind)
    if cls is not None:
        try:
            return cls(text)
        except Exception:  # noqa: BLE001 - a class whose __init__ takes other arguments
            pass
    message = f"{kind}: {message}"
    return RuntimeError(f"{message} ({where})")


def _exception_class(kind):
    """The exception class a kernel's raise site names: a builtin by its
    name, a user's class as ``module.qualname`` of a module this process has
    loaded (a class defined inside a function cannot be found); else None."""
    parts = kind.split(".")
    # The longest prefix that is a loaded module, then the class's qualname in it.
    for split in range(len(parts) - 1, -1, -1):
        found = sys.modules.get(".".join(parts[:split])) if split else builtins
        if found is None:
            continue
        for part in parts[split:]:
            found = getattr(found, part, None)
        if isinstance(found, type) and issubclass(found, Exception):
            return found
    return None


def _check_warp_lanes(dispatcher, kernel, device):
    """Refuse a kernel written for warps of ``dispatcher.warp_lanes`` lanes
    whose results would silently differ on the device's smaller subgroups:
    one that shuffles by a constant distance (or xor mask) the subgroup does
    not have, such as ``shfl_down_sync(mask, v, 16)`` on 8 lanes, which gives
    lanes 0 to 7 their own values where a warp of 32 gives them lanes 16 to
    23's."""
    size = device.info.subgroup_size
    if size >= dispatcher.warp_lanes:
        return
    beyond = sorted((distance, name)
                    for name, distance in modulecheck.constant_shuffle_distances(kernel.spirv)
                    if size <= distance < dispatcher.warp_lanes)
    if beyond:
        uses = ", ".join(f"{name} by {distance}" for distance, name in beyond)
        raise LaunchError(f"{kernel.name} is written for {dispatcher.warp_lanes}-lane warps "
                          f"({uses}), but device {device.info.name}'s warps (subgroups) have "
                          f"{size} lanes, where those shuffles would read no other lane and "
                          f"the results would be wrong; compute distances from cuda.warpsize "
                          f"(offset = cuda.warpsize // 2, ...), or run on a device with "
                          f"{dispatcher.warp_lanes}-lane subgroups")


def _launch_stream(value):
    """A launch's stream argument, checked: a Stream, or None for the
    default stream (also for 0)."""
    if not queue.is_stream(value):
        raise TypeError(f"a launch's stream must be a stream (nv.stream(), cuda.stream()), "
                        f"0 or None, not {value!r}")
    return value if type(value) is queue.Stream else None


class LaunchConfiguration:
    """A kernel with its grid, ready to be called with arguments."""

    __slots__ = ("dispatcher", "groups", "threads", "shared_bytes", "stream")

    def __init__(self, dispatcher, groups, threads, shared_bytes=0, stream=None):
        self.dispatcher = dispatcher
        self.groups = groups
        self.threads = threads
        self.shared_bytes = shared_bytes
        self.stream = stream

    def __call__(self, *args):
        # forall(0), or of an empty shape: there is nothing to cover.
        if all(self.groups):
            self.dispatcher._launch(self.groups, self.threads, args, self.shared_bytes,
                                    self.stream)


def _by_reference(module, qualname):
    """The object ``module.qualname`` names, or None (unpickles a kernel)."""
    import importlib
    try:
        found = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return None
    return found


def _kernel_named(module, qualname):
    """The kernel a pickle names by reference."""
    found = _by_reference(module, qualname)
    if not isinstance(found, VulkanDispatcher):
        raise pickle.UnpicklingError(f"no kernel {module}.{qualname} to unpickle")
    return found


class VulkanDispatcher:
    """A Python function compiled for Vulkan on demand, per argument types.

    Launch it as ``kernel[groups, threads](*args)`` or
    ``kernel.forall(n)(*args)``; call it from another kernel as a device
    function. ``groups`` and ``threads`` are an int or a tuple of up to 3.
    ``kernel[groups, threads, shared_bytes]`` also gives the launch
    ``shared_bytes`` bytes of dynamic shared memory, which every
    ``nv.shared.array(0, dtype)`` in the kernel views: the kernel is compiled
    once per distinct size. ``kernel[groups, threads, stream]`` and
    ``kernel[groups, threads, stream, shared_bytes]`` launch on a stream
    (``nv.stream()``; 0 or None: the default stream).
    """

    def __init__(self, py_func, options=None):
        self.py_func = py_func
        self.options = dict(options or {})
        self.__name__ = py_func.__name__
        self.__qualname__ = py_func.__qualname__
        self.__doc__ = py_func.__doc__
        self.__module__ = py_func.__module__
        self.__wrapped__ = py_func
        self._lock = threading.RLock()
        self._plans = {}
        self._compiled = {}
        # Numba's typing of a signature, which another workgroup size reuses.
        self._typed = {}
        self._device_functions = {}
        self._inspected = {}

    #: The lanes of a warp the kernel's code is written for, checked against
    #: the device's subgroup size at launch: numba.cuda's kernels set 32.
    warp_lanes = None

    def __repr__(self):
        return f"<numba_vulkan kernel {self.__qualname__}>"

    def __getitem__(self, config):
        if not isinstance(config, tuple) or len(config) not in (2, 3, 4):
            raise LaunchError("launch a kernel as kernel[groups, threads](...), "
                              "kernel[groups, threads, shared_bytes](...), "
                              "kernel[groups, threads, stream](...) or "
                              "kernel[groups, threads, stream, shared_bytes](...)")
        shared, stream = 0, None
        if len(config) == 4:
            stream = _launch_stream(config[2])
            shared = _shared_bytes(config[3], "shared_bytes")
        elif len(config) == 3:
            if type(config[2]) is queue.Stream or config[2] is None:
                stream = config[2]
            elif isinstance(config[2], bool) or not isinstance(config[2], (int, np.integer)):
                raise TypeError(f"kernel[groups, threads, x]: x must be a stream "
                                f"(nv.stream()) or shared_bytes (an int), not {config[2]!r}")
            else:
                shared = _shared_bytes(config[2], "shared_bytes")
        return LaunchConfiguration(self, _dim3(config[0], "groups"), _dim3(config[1], "threads"),
                                   shared, stream)

    def forall(self, n, threads=None, shared_bytes=0, stream=None):
        """A launch configuration covering ``n`` invocations along x, or, for
        a shape ``n`` (a tuple of 1 to 3 ints, such as ``a.shape``), one
        invocation per element, whose index is ``nv.grid(len(n))``; for an
        empty one a configuration that launches nothing. ``threads``: the
        workgroup size, an int or a tuple (by default 256 invocations, fewer
        on a device whose limit is lower, split evenly over the axes).
        ``shared_bytes`` and ``stream``: as for ``kernel[groups, threads,
        stream, shared_bytes]``."""
        shared_bytes = _shared_bytes(shared_bytes, "shared_bytes")
        stream = _launch_stream(stream)
        shape = _forall_shape(n)
        if threads is None:
            limit = (opened_device() or self._open_device()).info.max_workgroup_invocations
            threads = _forall_threads(len(shape), min(abi.FORALL_THREADS, limit))
        threads = _dim3(threads, "forall(n, threads): threads")
        shape += (1,) * (3 - len(shape))
        groups = tuple(-(-extent // size) for extent, size in zip(shape, threads))
        return LaunchConfiguration(self, groups, threads, shared_bytes, stream)

    def __call__(self, *args, **kwargs):
        raise LaunchError(f"{self.__qualname__} is a kernel: launch it with "
                          f"{self.__name__}[groups, threads](...) or "
                          f"{self.__name__}.forall(n)(...)")

    # Compiling -------------------------------------------------------------

    def compile(self, sig, threads=(64, 1, 1), target=None):
        """Compile for a signature; return the
        :class:`~numba_vulkan.spirv.compiled.CompiledKernel`.

        Args:
            sig: A Numba signature string such as
                ``"void(float32, float32[::1])"``, a tuple of Numba types, or a
                tuple of argument types in text form.
            threads: The workgroup size.
            target: A :class:`~numba_vulkan.base.target.TargetDescription`; the
                current device's by default.

        The kernel is looked up in the registered AOT directories first
        (``docs/aot.md``), then in the kernel cache (``docs/cache.md``): the
        ``kernels/`` tier always, and with ``@nv.jit(cache=True)`` also the
        ``functions/`` tier, which finds the whole kernel by the bytecode and
        source files of the kernel and every function it calls, without
        running Numba.
        """
        features = None
        if target is None:
            device = opened_device() or self._open_device()
            target, features = device.target, device.info.features
        from numba_vulkan.frontend.compile import signature_text
        sig = signature_text(sig)
        captured = self._find_captured() if self._captured is None else self._captured
        if captured:
            sig += tuple(map(signature.of_value, captures.values(self.py_func, captured)))
        return self._compile(sig, _dim3(threads, "threads"), target, features)

    def _compile(self, sig, threads, target, features=None, shared_bytes=0, shipped=True):
        """Find or make the kernel through the compile service
        (:func:`numba_vulkan.api.service.kernel`): memory, the AOT
        directories (unless not ``shipped``), the kernel cache, a compile.

        Kept by target description: devices that share one share the kernel
        (each makes its own pipeline). ``features`` are the launching
        device's, for the AOT lookup; ``shared_bytes`` the bytes of dynamic
        shared memory the kernel is compiled for.
        """
        pyfunc = self.__dict__.get("_kernel_func", self.py_func)
        request = KernelRequest(pyfunc, sig, threads, target,
                                jitoptions.KernelOptions(self.options), shared_bytes)
        with self._lock:
            return service.kernel(self, request, self._compiled, self._typed, features,
                                  shipped)

    @property
    def _parameter_names(self):
        names = self.__dict__.get("_names")
        if names is None:
            import inspect
            parameters = inspect.signature(self.py_func).parameters
            names = self.__dict__["_names"] = list(parameters)
            self.__dict__["_defaults"] = [_NO_DEFAULT if p.default is p.empty else p.default
                                          for p in parameters.values()]
        return names

    def _with_defaults(self, args):
        """``args`` followed by the defaults of the parameters they leave out
        (``def k(a, n=16)`` launched as ``k[g, t](a)``), as a Python call
        would take them; unchanged when they are all given or some missing one
        has no default."""
        count = len(self._parameter_names)
        missing = self.__dict__["_defaults"][len(args):count]
        if not missing or any(d is _NO_DEFAULT for d in missing):
            return args
        return (*args, *missing)

    def _launch_types(self, args):
        """``(signature, args)`` of a launch: the argument types in text form,
        and the arguments to pass, followed by the device arrays the kernel
        reads from its globals or closure (:mod:`numba_vulkan.api.captures`).
        What ``to_device`` takes (an object with ``__array__`` or the buffer
        protocol, such as a torch CPU tensor) goes as the NumPy array viewing
        it, whose copy back then reaches the object's memory."""
        captured = self._captured
        if captured is None:
            captured = self._find_captured()
        if captured:
            args = (*args, *captures.values(self.py_func, captured))
        try:
            return tuple(map(signature.of_value, args)), args
        except TypeError:
            pass
        converted = tuple(map(memory.as_host_array, args))
        try:
            return tuple(map(signature.of_value, converted)), converted
        except TypeError:
            raise self._argument_error(args) from None

    def __reduce__(self):
        # By reference to the module and name it was defined under, as Python
        # pickles functions: a process that unpickles it imports the module
        # (and compiles or finds the kernel there), so no code is pickled.
        if _by_reference(self.__module__, self.__qualname__) is not self:
            raise pickle.PicklingError(
                f"cannot pickle kernel {self.__qualname__}: kernels are pickled by "
                f"reference to their module and name, and {self.__module__}."
                f"{self.__qualname__} is not this kernel (define it at a module's top level)")
        return _kernel_named, (self.__module__, self.__qualname__)

    #: The names of the device arrays the kernel reads from its globals or
    #: closure, found at its first launch or compile; None before.
    _captured = None

    def _find_captured(self):
        captured = self.__dict__["_captured"] = tuple(captures.find(
            self.py_func, lambda value: isinstance(value, memory.DeviceArray)))
        if captured:
            self.__dict__["_kernel_func"] = captures.with_parameters(self.py_func, captured)
        return captured

    def _argument_error(self, args):
        for name, value in zip(self._parameter_names, args):
            try:
                signature.of_value(value)
            except TypeError as exc:
                return TypeError(f"{self.__qualname__}(): parameter {name!r}: {exc}")
        return TypeError(f"{self.__qualname__}(): bad arguments")

    def device_function(self):
        """This function as a device function, for calls from other kernels."""
        from numba_vulkan.frontend.target import DeviceDispatcher, lowering_variant
        with self._lock:
            variant = lowering_variant()
            device = self._device_functions.get(variant)
            if device is None:
                # Numba's target knows only the options that change code
                # (``cache`` is the dispatcher's).
                device = self._device_functions[variant] = DeviceDispatcher(
                    self.py_func, targetoptions=jitoptions.code_options(self.options))
            return device

    # Inspecting ------------------------------------------------------------

    def pipeline_statistics(self, *args, signature=None, threads=None, shared_bytes=0,
                            internal_representations=False, device=None):
        """What the device's driver compiled the kernel into: a list with a
        dict per executable (one for a compute kernel on the drivers seen).

        Each dict has the driver's ``name``, ``description``, ``stages`` and
        ``subgroup_size`` of the executable, ``statistics`` (statistic name
        to value: an int, float or bool) and ``statistic_descriptions``
        (name to the driver's description), all named by the driver (NVIDIA
        reports "Register Count", AMD's RADV "VGPRs" and "LDS size", ...),
        and ``internal_representations``: with
        ``internal_representations=True`` a list of ``{"name",
        "description", "text"}`` (the driver's IR and disassembly, where it
        gives them), else empty.

        The kernel is the one for ``signature`` (as for :meth:`compile`) or,
        given launch arguments ``args``, for their types; with neither, the
        one kernel compiled so far for the device. ``threads`` is its
        workgroup size (by default the one it was compiled with, or launched
        with where it was compiled for several, else ``(64, 1, 1)``),
        ``shared_bytes`` its bytes of dynamic shared memory.

        The driver compiles the module once more for the question, into a
        pipeline that is then destroyed: launches are not changed. Raises
        :class:`~numba_vulkan.base.errors.NotReportedError` where the device lacks
        ``VK_KHR_pipeline_executable_properties`` (lavapipe of Mesa 22 does).
        """
        from numba_vulkan.base.signature import of_value
        if signature is None and args:
            try:
                signature = tuple(map(of_value, args))
            except TypeError:
                raise self._argument_error(args) from None
        return [e.to_json() for e in self.executables(signature, threads, shared_bytes,
                                                      internal_representations, device)]

    def executables(self, sig=None, threads=None, shared_bytes=0, representations=False,
                    device=None):
        """The :class:`~numba_vulkan.runtime.executables.Executable` s of the
        kernel for ``sig`` on ``device`` (see :meth:`pipeline_statistics`),
        kept for later questions."""
        from numba_vulkan.runtime import executables
        from numba_vulkan.runtime.device import as_device
        device = as_device(device) or current_device()
        executables.require(device)
        shared_bytes = _shared_bytes(shared_bytes, "shared_bytes")
        sig, threads = self._inspected_kernel(sig, threads, shared_bytes, device)
        key = (sig, threads, shared_bytes, device)
        with self._lock:
            found = self._inspected.get(key)
            if found is not None and (found[0] or not representations):
                return found[1]
            compiled = self._compile(sig, threads, device.target, device.info.features,
                                     shared_bytes)
            found = executables.inspect(device, compiled.spirv, compiled.params,
                                        compiled.push_size, name=compiled.name,
                                        representations=representations)
            self._inspected[key] = (representations, found)
            return found

    def _inspected_kernel(self, sig, threads, shared_bytes, device):
        """``(signature, threads)`` of the kernel a question is about."""
        compiled = [key for key in self._compiled if key[2] == device.target
                    and (key[3] if len(key) > 3 else 0) == shared_bytes]
        if sig is None:
            choices = {key[:2] for key in compiled}
            if len(choices) != 1:
                raise LaunchError(f"{self.__qualname__} has {len(choices)} kernels compiled "
                                  f"for device {device.info.name}: name one by its signature "
                                  "or launch arguments")
            sig, = {key[0] for key in compiled}
        elif not (isinstance(sig, tuple) and all(isinstance(t, str) for t in sig)):
            from numba_vulkan.frontend.compile import signature_text
            sig = signature_text(sig)
        if threads is not None:
            return sig, _dim3(threads, "threads")
        sizes = {key[1] for key in compiled if key[0] == sig}
        if len(sizes) > 1:
            # Compiled for a signature given ahead (64 threads) and launched
            # with another size: the launched one is meant.
            launched = {key[1] for key in self._plans if key[0] == sig and key[2] is device
                        and (key[3] if len(key) > 3 else 0) == shared_bytes}
            sizes = launched if len(launched) == 1 else sizes
        if len(sizes) > 1:
            raise LaunchError(f"{self.__qualname__}({', '.join(sig)}) is compiled for "
                              f"workgroups of {', '.join(map(str, sorted(sizes)))}: name one "
                              "with threads=")
        return sig, sizes.pop() if sizes else (64, 1, 1)

    # Launching -------------------------------------------------------------

    def _plan(self, sig, threads, device, shared_bytes=0):
        key = (sig, threads, device) if not shared_bytes else (sig, threads, device,
                                                                shared_bytes)
        plan = self._plans.get(key)
        if plan is None:
            limit = device.info.max_workgroup_invocations
            if threads[0] * threads[1] * threads[2] > limit:
                raise LaunchError(f"a workgroup of {threads} invocations exceeds the "
                                  f"device's limit of {limit}")
            with self._lock:
                plan = self._plans.get(key)
                if plan is None:
                    compiled = self._compile(sig, threads, device.target,
                                             device.info.features, shared_bytes)
                    if self.warp_lanes:
                        _check_warp_lanes(self, compiled, device)
                    try:
                        plan = _Plan(compiled, device)
                    except DriverError as exc:
                        if "aot" not in compiled.metadata:
                            raise
                        # A shipped module the driver refuses: the JIT's instead.
                        from numba_vulkan.aot.loader import lookup
                        lookup.refused_by_driver(compiled, exc)
                        self._compiled.pop(service.memory_key(sig, threads, device.target,
                                                              shared_bytes))
                        compiled = self._compile(sig, threads, device.target,
                                                 shared_bytes=shared_bytes, shipped=False)
                        plan = _Plan(compiled, device)
                    self._plans[key] = plan
        return plan

    def _open_device(self):
        """The calling thread's current device, which this launch, the
        process's first, opens.

        Where the launch is certain to compile (no AOT directory to look in,
        no ``functions/`` tier that could hold the kernel), the compiler's
        set-up starts first on another thread: the driver opens a device
        mostly outside the interpreter, so the two overlap.
        """
        if service.certain_to_compile(self.options):
            from numba_vulkan.compiler import stages
            stages.prepare_in_background()
        return current_device()

    def _launch(self, groups, threads, args, shared_bytes=0, stream=None):
        if len(args) < len(self._parameter_names):
            args = self._with_defaults(args)
        device = opened_device() or self._open_device()
        if stream is not None:
            stream = queue.resolve(stream, device)
        sig, args = self._launch_types(args)
        plan = self._plans.get((sig, threads, device) if not shared_bytes else
                               (sig, threads, device, shared_bytes))
        if plan is None:
            # A plan for these types exists only once the count was checked.
            given = len(args) - len(self._captured)
            if given != len(self._parameter_names):
                raise TypeError(f"{self.__qualname__}() takes {len(self._parameter_names)} "
                                f"arguments, {given} were given")
            plan = self._plan(sig, threads, device, shared_bytes)
        limit = device.info.max_workgroup_count
        if groups[0] > limit[0] or groups[1] > limit[1] or groups[2] > limit[2]:
            raise _grid_error(self, groups, device)
        buffers, flat, copy_backs = [], [*groups], None
        for number, (value, kind, written) in enumerate(zip(args, plan.kinds, plan.written)):
            if kind == _ARRAY:
                if isinstance(value, np.void):
                    value = records.element_view(value)
                if value.size > MAX_ELEMENTS:
                    raise _too_many_elements(self, plan, number, value)
                if isinstance(value, np.ndarray):
                    if written and not value.flags.writeable:
                        _refuse_read_only(self, plan, args, value)
                    # A mapped or pinned array is passed in place, not copied.
                    mapped = (memory.mapped_view(value, device)
                              if type(value) is memory.HostArray else None)
                    if mapped is not None:
                        value = mapped
                    else:
                        value, copy_back = memory.staged_host_array(value, device, written,
                                                                    stream)
                        if copy_backs is None:
                            copy_backs = []
                        copy_backs.append(copy_back)
                elif value.buffer.device is not device:
                    _refuse_other_device(self, plan, args, value, device)
                flat += value.launch_fields
                buffers.append(value.buffer)
            elif kind == _SCALAR:
                # struct packs Python numbers; np.bool_ is not an int.
                flat.append(value.item() if isinstance(value, np.generic) else value)
            elif kind == _COMPLEX_SCALAR:
                flat += (value.real, value.imag)
            else:
                flat.append(kind.pack(value))
        pipeline = plan.pipeline
        try:
            push = pipeline.pack(flat)
        except LaunchError as exc:
            raise _scalar_error(self, plan, args) or exc from None
        if plan.printer is not None:
            self._launch_printing(plan, groups, buffers, push, copy_backs, stream)
            return
        status = plan.status
        if status is not None:
            buffers += plan.hidden
        pipeline.launch(groups, buffers, push, stream)
        if copy_backs or status is not None:
            if stream is None:
                device.synchronize()
            else:
                stream.synchronize()
            for copy_back in copy_backs or ():
                copy_back()
            if status is not None:
                plan.check(stream)

    @staticmethod
    def _launch_printing(plan, groups, buffers, push, copy_backs, stream=None):
        """Launch a kernel that calls ``print`` (on ``stream``; None: the
        default stream), and write its output once it has finished, before
        its copies back and errors."""
        printer = plan.printer
        with printer.lock:
            if printer.prepare():
                plan.hidden = plan._hidden()
            plan.pipeline.launch(groups, buffers + plan.hidden, push, stream)
            (stream or printer.device.stream).synchronize()
            printer.flush()
        for copy_back in copy_backs or ():
            copy_back()
        if plan.status is not None:
            plan.check(stream)


def check_options(options, what):
    """``options`` of ``what`` (``"nv.jit"``, ...) with each value in its
    canonical form; TypeError naming an unknown option or a wrong value."""
    unknown = set(options) - set(OPTIONS)
    if unknown:
        raise TypeError(f"unknown {what} option(s): {', '.join(sorted(unknown))}; "
                        f"known: {', '.join(OPTIONS)}")
    try:
        return {name: jitoptions.check(name, value) for name, value in options.items()}
    except ValueError as e:
        raise TypeError(f"{what}: {e}") from None


def jit(func=None, **options):
    """Compile a Python function for Vulkan: ``@nv.jit`` or ``@nv.jit(fastmath=True)``.

    Options:
        fastmath: ``True`` allows float reassociation, contraction and
            approximate division and square roots; a set of LLVM's fast-math
            flags allows some: ``{"contract"}`` fuses multiplies and adds
            into fused multiply-adds where the device's are fused, as
            numba.cuda does by default.
        error_model: ``"numpy"`` (default) or ``"python"``.
        cache: Keep compiled kernels on disk (see ``docs/cache.md``).

    ``func`` may instead be a signature (``"void(float32[::1])"``) or a list
    of them, each compiled when the decorator runs so that typing errors
    show at once; launches with other argument types still compile for
    those (``numba_vulkan.cuda.jit`` launches only the signatures given, as
    numba.cuda does).
    """
    options = check_options(options, "nv.jit")
    signatures = None
    if func is not None and not callable(func):
        signatures = func if isinstance(func, list) else [func]
        func = None

    def wrap(f):
        kernel = VulkanDispatcher(f, options)
        for sig in signatures or ():
            kernel.compile(sig)
        return kernel

    return wrap(func) if func is not None else wrap


def synchronize():
    """Wait for every launch and copy submitted on the calling thread's
    current device, on every stream."""
    current_device().synchronize()

