"""numba.cuda's API on numba_vulkan: port a numba.cuda program by replacing
``from numba import cuda`` with ``from numba_vulkan import cuda``.

Every name here is numba.cuda's, with its arguments and meaning, mapped onto
numba_vulkan's own API (``docs/cuda.md`` has the table and what differs);
nothing is implemented twice. Unlike ``import numba_vulkan``, importing this
module imports Numba, for the Numba types numba.cuda re-exports
(``cuda.float32``, ...).
"""

import collections
import contextlib
import sys

import numpy as np
from numba.core.typing.templates import Signature as _Signature
from numba.core.types import (boolean, bool_, complex64, complex128, float16, float32, float64,
                              int8,
                              int16, int32, int64, intp, uint8, uint16, uint32, uint64, uintp,
                              void)

from numba_vulkan.api import dispatcher as _dispatcher
from numba_vulkan.base import intrinsics as _intrinsics
from numba_vulkan.api import numba_target as _numba_target
from numba_vulkan.api import ufunc as _ufunc
from numba_vulkan.base.errors import LaunchError, UnsupportedError, VulkanError
from numba_vulkan.runtime import device as _device
from numba_vulkan.runtime import memory as _memory
from numba_vulkan.runtime import queue as _queue

__all__ = [
    "jit", "grid", "gridsize", "threadIdx", "blockIdx", "blockDim", "gridDim", "shared",
    "local", "const", "atomic", "syncthreads", "syncthreads_count", "syncthreads_and",
    "syncthreads_or", "threadfence", "threadfence_block", "threadfence_system", "laneid",
    "warpsize", "syncwarp", "shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync",
    "all_sync", "any_sync", "eq_sync", "ballot_sync", "activemask", "lanemask_lt",
    "match_any_sync", "match_all_sync", "popc", "fp16",
    "brev", "clz", "ffs", "to_device", "device_array", "device_array_like", "synchronize", "stream",
    "default_stream", "legacy_default_stream", "per_thread_default_stream", "Stream", "Event",
    "event", "event_elapsed_time", "pinned_array", "mapped_array", "pinned", "is_available",
    "detect", "select_device", "get_current_device", "close", "gpus", "boolean", "bool_",
    "complex64", "complex128", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "intp",
    "uint8", "uint16", "uint32", "uint64", "uintp", "void", "vectorize", "guvectorize", "reduce",
    "Reduce", "current_context", "defer_cleanup", "is_cuda_array", "as_cuda_array", "fma",
    "selp", "cbrt", "list_devices", "profile_start", "profile_stop", "profiling", "In", "Out",
    "InOut",
]

# Kernel side: the native markers themselves, so both spellings compile alike.
grid = _intrinsics.grid
gridsize = _intrinsics.gridsize
threadIdx = _intrinsics.Dim3("threadIdx", _intrinsics.local_id)
blockIdx = _intrinsics.Dim3("blockIdx", _intrinsics.group_id)
blockDim = _intrinsics.Dim3("blockDim", _intrinsics.local_size)
gridDim = _intrinsics.Dim3("gridDim", _intrinsics.num_groups)
shared = _intrinsics.shared
local = _intrinsics.local
const = _intrinsics.const
atomic = _intrinsics.atomic
syncthreads = _intrinsics.barrier
threadfence = _intrinsics.fence
threadfence_block = _intrinsics.workgroup_fence
# Vulkan kernels have no scope beyond the device: host reads wait for the
# launch anyway.
threadfence_system = _intrinsics.fence
syncthreads_count = _intrinsics.barrier_count
syncthreads_and = _intrinsics.barrier_and
syncthreads_or = _intrinsics.barrier_or
laneid = _intrinsics.KernelValue("laneid", _intrinsics.lane_id)
warpsize = _intrinsics.KernelValue("warpsize", _intrinsics.subgroup_size)
# Warp functions: nv.subgroup's operations with numba.cuda's masks and
# out-of-range rules (numba_vulkan/frontend/subgroups.py).
syncwarp = _intrinsics.cuda_warp.syncwarp
shfl_sync = _intrinsics.cuda_warp.shfl_sync
shfl_up_sync = _intrinsics.cuda_warp.shfl_up_sync
shfl_down_sync = _intrinsics.cuda_warp.shfl_down_sync
shfl_xor_sync = _intrinsics.cuda_warp.shfl_xor_sync
all_sync = _intrinsics.cuda_warp.all_sync
any_sync = _intrinsics.cuda_warp.any_sync
eq_sync = _intrinsics.cuda_warp.eq_sync
ballot_sync = _intrinsics.cuda_warp.ballot_sync
activemask = _intrinsics.cuda_warp.activemask
lanemask_lt = _intrinsics.cuda_warp.lanemask_lt
match_any_sync = _intrinsics.cuda_warp.match_any_sync
match_all_sync = _intrinsics.cuda_warp.match_all_sync
# numba.cuda's float16 functions (hadd, hfma, heq, ...): nv.fp16's.
fp16 = _intrinsics.fp16
fma = _intrinsics.fma
selp = _intrinsics.selp
#: numba.cuda's ``cbrt``: Python's ``math.cbrt`` (on 3.10, which lacks it,
#: a stand-in that kernels compile the same way).
cbrt = _intrinsics.cbrt
popc = _intrinsics.popc
brev = _intrinsics.brev
clz = _intrinsics.clz
ffs = _intrinsics.ffs

#: What ``fastmath=False`` (numba.cuda's default) means in numba.cuda.
_CUDA_FASTMATH = frozenset({"contract"})
#: numba.cuda.jit options that only tune numba.cuda's own code generation.
#: ``launch_bounds`` hints a block size to NVVM; a Vulkan kernel is compiled
#: for the launch's workgroup size anyway. ``forceinline`` asks NVVM to
#: inline the function into its callers, which LLVM does to device functions
#: on its own.
_IGNORED_OPTIONS = ("opt", "lineinfo", "max_registers", "link", "launch_bounds",
                    "forceinline")


def jit(func_or_sig=None, device=False, **options):
    """numba.cuda's ``@cuda.jit``: a kernel, or with ``device=True`` a device
    function that kernels call.

    ``func_or_sig`` is the function, or a signature (a string such as
    ``"void(float32[:], float32[:])"``, a signature object such as
    ``void(float32[:], float32[:])``, or a tuple of argument types) or a
    list of them: then each is compiled when the decorator runs, so that
    typing errors show at once. ``fastmath``,
    ``cache``, ``boundscheck`` and ``inline`` are :func:`numba_vulkan.jit`'s,
    except that ``fastmath=False`` (the default) means ``{"contract"}``, as
    in numba.cuda, whose compiler fuses multiplies and adds (on devices whose
    fused multiply-add is fused; ``fastmath=set()`` keeps every operation as
    written); ``debug=True`` turns on error checks (``error_model="python"``),
    so that an exception a kernel raises reaches the host, as numba.cuda's
    does with it;
    ``opt``, ``lineinfo``, ``max_registers`` and ``link`` are accepted and
    have no effect.
    """
    debug = options.pop("debug", False)
    extensions = list(options.pop("extensions", None) or ())
    for name in _IGNORED_OPTIONS:
        options.pop(name, None)
    if isinstance(options.get("inline"), bool):
        # numba.cuda's inline=True: Numba's inline="always".
        options["inline"] = "always" if options["inline"] else "never"
    signatures = None
    if isinstance(func_or_sig, list):
        signatures, func_or_sig = func_or_sig, None
    elif isinstance(func_or_sig, (str, tuple, _Signature)):
        # One signature: "void(float32[:])", void(float32[:]) or a tuple of
        # argument types, as numba.cuda takes them.
        signatures, func_or_sig = [func_or_sig], None

    unknown = set(options) - set(_dispatcher.OPTIONS)
    if unknown:
        raise TypeError(f"unknown cuda.jit option(s): {', '.join(sorted(unknown))}; known: "
                        f"{', '.join((*_dispatcher.OPTIONS, 'debug', 'extensions', *_IGNORED_OPTIONS))}")
    if debug:
        options.setdefault("error_model", "python")
    options = _dispatcher.check_options(options, "cuda.jit")
    if options.get("fastmath", False) is False:
        # NVVM fuses multiplies and adds unless told not to, and numba.cuda
        # does not tell it: ported code computes (and runs) as it did.
        options["fastmath"] = _CUDA_FASTMATH

    def wrap(func):
        kernel = _Kernel(func, options)
        kernel.device = device
        kernel.extensions = extensions
        if not device and signatures is not None:
            kernel._compile_only(signatures)
        return kernel

    return wrap(func_or_sig) if func_or_sig is not None else wrap


class _Kernel(_dispatcher.VulkanDispatcher):
    """A kernel that also takes numba.cuda's launch forms
    ``kernel[blocks, threads, stream]`` and
    ``kernel[blocks, threads, stream, shared_bytes]``: ``shared_bytes`` of
    dynamic shared memory, which every ``cuda.shared.array(0, dtype)`` of the
    kernel views (compiled once per distinct size)."""

    #: Whether ``cuda.jit(device=True)`` made it: kernels call it, the host does not.
    device = False
    #: numba.cuda's code is written for 32-lane warps: a launch on smaller
    #: subgroups refuses shuffles by constant distances they lack.
    warp_lanes = 32
    #: numba.cuda's ``extensions``: objects whose ``prepare_args(ty, val,
    #: stream=, retr=)`` turns each launch argument into ``(ty, val)`` passed
    #: instead, and may append to ``retr`` callables run after the launch.
    extensions = ()
    #: The signatures (text form) ``cuda.jit`` was given, the only ones it
    #: launches; None for a kernel compiled per argument types (lazily).
    _signatures = None

    def _compile_only(self, signatures):
        """Compile ``signatures`` now and launch no others, as numba.cuda
        does with a kernel given signatures."""
        self._signatures = []
        for sig in signatures:
            # The kernel's own signature, with the arrays it captures.
            self._signatures.append(tuple(self.compile(sig).signature))
        # As numba.cuda's: a kernel given one signature is specialized, and
        # answers questions about it without one.
        self.specialized = len(signatures) == 1

    def specialize(self, *args):
        """A new kernel compiled for the types of ``args`` (launch arguments)
        and launching only those, as numba.cuda's ``specialize``."""
        sig, _ = _dispatcher.VulkanDispatcher._launch_types(self, _hinted(args))
        kernel = _Kernel(self.py_func, self.options)
        kernel.extensions = self.extensions
        kernel._compile_only([sig])
        return kernel

    def _launch(self, groups, threads, args, shared_bytes=0, stream=None):
        retr = []
        args = tuple(self._prepared(value, stream, retr) for value in args)
        super()._launch(groups, threads, args, shared_bytes, stream)
        for callback in retr:
            callback()

    def _prepared(self, value, stream, retr):
        """A launch argument after ``cuda.In``/``Out``/``InOut`` and the
        kernel's extensions."""
        if isinstance(value, In):
            # Copied in, never back.
            return _memory.to_device(np.asarray(value.value), stream=stream or 0)
        if isinstance(value, (Out, InOut)):
            value = value.value
        if self.extensions:
            from numba import typeof
            for extension in self.extensions:
                try:
                    ty = typeof(value)
                except ValueError:
                    ty = None
                ty, value = extension.prepare_args(ty, value, stream=stream or 0, retr=retr)
        return value

    def _launch_types(self, args):
        sig, args = super()._launch_types(args)
        if self._signatures is None or sig in self._signatures:
            return sig, args
        for allowed in self._signatures:
            converted = _converted(args, sig, allowed)
            if converted is not None:
                return allowed, converted
        given = ", ".join(sig)
        compiled = "; ".join(f"({', '.join(s)})" for s in self._signatures)
        raise TypeError(f"{self.__qualname__}(): no signature it was compiled for matches the "
                        f"arguments ({given}): it launches only ({compiled}), as a numba.cuda "
                        "kernel given signatures does (leave them out to compile per "
                        "argument types)")

    def __call__(self, *args, **kwargs):
        if self.device:
            raise LaunchError(f"{self.__qualname__} is a device function "
                              "(cuda.jit(device=True)): call it from a kernel, not from the host")
        return super().__call__(*args, **kwargs)

    def __getitem__(self, config):
        if isinstance(config, tuple) and len(config) in (3, 4):
            _check_stream(config[2])
            config = (*config[:2], config[2] or None, *(config[3:4] or (0,)))
        return super().__getitem__(config)

    def forall(self, ntasks, tpb=0, stream=0, sharedmem=0, threads=None):
        """A launch covering ``ntasks`` invocations, ``tpb`` per block (the
        device's choice for 0), on ``stream``, with ``sharedmem`` bytes of
        dynamic shared memory, as numba.cuda's ``forall``: ``ntasks`` is an
        int (``nv.jit`` kernels' ``forall`` also takes a shape)."""
        if isinstance(ntasks, tuple):
            raise TypeError(f"forall(ntasks): ntasks must be an int, as in numba.cuda, not "
                            f"{ntasks!r}; launch over a shape with kernel[blocks, threads]")
        _check_stream(stream)
        return super().forall(ntasks, threads or tpb or None,
                              _dispatcher._shared_bytes(sharedmem, "sharedmem"), stream or None)

    @property
    def overloads(self):
        """The compiled kernels (:class:`~numba_vulkan.spirv.compiled.CompiledKernel`),
        by argument types in text form."""
        return {key[0]: kernel for key, kernel in self._compiled.items()}

    def inspect_llvm(self, signature=None):
        """The LLVM IR of the kernel for ``signature``, or a dict of it for
        every compiled signature."""
        if signature is not None:
            return self.compile(signature).llvm_ir
        return {sig: kernel.llvm_ir for sig, kernel in self.overloads.items()}

    def inspect_asm(self, signature=None):
        """The SPIR-V of the kernel as text (numba.cuda's is PTX), for
        ``signature`` or as a dict for every compiled signature."""
        if signature is not None:
            return self.compile(signature).disassemble()
        return {sig: kernel.disassemble() for sig, kernel in self.overloads.items()}

    #: Whether the kernel was made for one signature given to ``cuda.jit``.
    specialized = False

    def _reported(self, signature, which):
        """A quantity the driver reports for the kernel of ``signature``; for
        None, that of a specialized kernel, else a dict of it by signature
        for every kernel compiled for the current device (as numba.cuda's)."""
        from numba_vulkan.runtime import executables as _executables
        device = _device.current_device()

        def value(sig):
            return _executables.quantity(self.executables(sig, device=device), which,
                                         f"device {device.info.name}",
                                         f"{self.__qualname__}({', '.join(sig)})")

        if signature is not None:
            from numba_vulkan.frontend.compile import signature_text
            return value(signature_text(signature))
        _executables.require(device)
        sigs = list(dict.fromkeys(key[0] for key in self._compiled
                                  if key[2] == device.target and len(key) == 3))
        if self.specialized and len(sigs) == 1:
            return value(sigs[0])
        return {sig: value(sig) for sig in sigs}

    def get_regs_per_thread(self, signature=None):
        """Registers each thread of the kernel uses, as its driver reports
        them (NVIDIA's "Register Count", AMD's vector registers), for
        ``signature``; without one, of a kernel ``cuda.jit`` was given one
        signature, else a dict by signature of every compiled kernel.
        Raises :class:`~numba_vulkan.base.errors.NotReportedError` where the
        driver does not report it."""
        return self._reported(signature, "registers")

    def get_shared_mem_per_block(self, signature=None):
        """Bytes of shared (workgroup) memory each block of the kernel uses,
        as its driver reports them; ``signature`` and errors as for
        :meth:`get_regs_per_thread`."""
        return self._reported(signature, "shared_memory")

    def get_local_mem_per_thread(self, signature=None):
        """Bytes of local (private, spilled) memory each thread of the kernel
        uses, as its driver reports them; ``signature`` and errors as for
        :meth:`get_regs_per_thread`."""
        return self._reported(signature, "local_memory")

    def get_max_threads_per_block(self, signature=None):
        """The most threads a block of the kernel may have, where its driver
        reports it (no driver known does: a Vulkan kernel's block size is
        fixed when it is compiled, up to the device's
        ``max_workgroup_invocations``); ``signature`` and errors as for
        :meth:`get_regs_per_thread`."""
        return self._reported(signature, "max_threads")


def _converted(args, given, allowed):
    """``args`` (of types ``given``) as arguments of the signature
    ``allowed``, or None if they cannot be: arrays of the same dtype and
    dimensions (a C-contiguous one where any layout is taken), numbers
    converted to the number type, as numba.cuda converts them."""
    from numba_vulkan.base import signature as _signature
    if len(given) != len(allowed):
        return None
    out = []
    for value, have, want in zip(args, given, allowed):
        if have != want:
            try:
                kind, dtype, ndim, layout = _signature.parse(have)
                want_kind, want_dtype, want_ndim, want_layout = _signature.parse(want)
            except ValueError:
                return None
            if kind == "array" or want_kind == "array":
                if (kind, dtype, ndim) != (want_kind, want_dtype, want_ndim) \
                        or want_layout not in (layout, "A"):
                    return None
            elif _NUMBERS.issuperset((dtype, want_dtype)):
                if dtype.startswith("complex") and not want_dtype.startswith("complex"):
                    return None
                value = np.dtype(want_dtype).type(value)
            else:
                return None
        out.append(value)
    return tuple(out)


_NUMBERS = frozenset(("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                      "uint64", "float16", "float32", "float64", "complex64", "complex128"))


class _ArgHint:
    """numba.cuda's hint of how a NumPy array argument is copied."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class In(_ArgHint):
    """``cuda.In(ary)``: copied to the device for the launch, not back."""


class Out(_ArgHint):
    """``cuda.Out(ary)``: copied back to ``ary`` after the launch."""


class InOut(_ArgHint):
    """``cuda.InOut(ary)``: copied in and back, as a NumPy array argument is."""


def _hinted(args):
    return tuple(a.value if isinstance(a, _ArgHint) else a for a in args)


# Host side -------------------------------------------------------------------

#: numba.cuda's stream: copies and launches on one run in order, on
#: different ones they may overlap (:class:`numba_vulkan.runtime.queue.Stream`).
Stream = _queue.Stream
#: numba.cuda's event, timed on the device's clock.
Event = _queue.Event


def stream():
    """A new :class:`Stream` on the current device."""
    return _device.stream()


def default_stream():
    """The current device's default stream: numba.cuda's legacy default
    stream, whose work waits for every stream's earlier work, and which
    other streams' later work waits for."""
    return _device.default_stream()


#: numba.cuda's per-thread default stream is the default stream here: its
#: work is ordered with every stream's, as the legacy one's is.
legacy_default_stream = per_thread_default_stream = default_stream


def _check_stream(value):
    if not _queue.is_stream(value):
        raise TypeError(f"a stream must be a cuda.stream(), 0 or None, not {value!r}")


def event(timing=True):
    """A new :class:`Event` on the current device."""
    return _device.event(timing)


def event_elapsed_time(evtstart, evtend):
    """Milliseconds of device time between two recorded events."""
    return evtstart.elapsed_time(evtend)


def pinned_array(shape, dtype=np.float64, strides=None, order="C"):
    """A host array in memory the device copies to and from directly: a
    NumPy array (:class:`numba_vulkan.runtime.memory.HostArray`) in
    host-visible memory of the current device. ``d.copy_to_host(ary,
    stream=s)`` into it is one device copy, asynchronous on a stream; a
    kernel given it uses it in place, as a mapped array."""
    if strides is not None:
        raise UnsupportedError("pinned_array: strides are not supported; use order='C' or "
                               "'F', or a view")
    return _memory.pinned_array(shape, dtype, order)


def mapped_array(shape, dtype=np.float64, strides=None, order="C", stream=0, portable=False,
                 wc=False):
    """A host array kernels read and write in place, without copies: a
    NumPy array (:class:`numba_vulkan.runtime.memory.HostArray`) in
    host-visible, coherent memory of the current device (device-local where
    the device offers that). As with numba.cuda's, the host sees a kernel's
    writes once it has synchronized (``cuda.synchronize()``), and must not
    touch what a running kernel uses. ``portable`` and ``wc`` are accepted
    and have no effect."""
    _check_stream(stream)
    if strides is not None:
        raise UnsupportedError("mapped_array: strides are not supported; use order='C' or "
                               "'F', or a view")
    return _memory.mapped_array(shape, dtype, order)


@contextlib.contextmanager
def pinned(*arrays):
    """numba.cuda's page-locking of existing host arrays: nothing to do here,
    since copies of any NumPy array go through the device's staging (or
    imported) memory; allocate with :func:`pinned_array` or
    :func:`mapped_array` for copies and kernels without staging."""
    for ary in arrays:
        if not isinstance(ary, np.ndarray):
            raise TypeError(f"pinned(*arrays): each must be a NumPy array, not "
                            f"{type(ary).__name__}")
    yield


def to_device(obj, stream=0, copy=True, to=None):
    """Copy a NumPy array, or a device array of any device, to a new device
    array on the calling thread's current device, or into ``to``; return it.

    On ``stream`` (see ``DeviceArray.copy_to_device``): from a pinned array
    the copy is asynchronous, from other NumPy arrays done when this returns.
    """
    _check_stream(stream)
    if to is not None:
        to.copy_to_device(obj, stream=stream)
        return to
    return _memory.to_device(obj, stream=stream)


def device_array(shape, dtype=np.float64, strides=None, order="C", stream=0):
    """A new uninitialised C-contiguous device array (``stream`` is
    accepted: allocating is not ordered on streams)."""
    _check_stream(stream)
    if order != "C" or strides is not None:
        raise UnsupportedError("device_array: only C-contiguous arrays (order='C', no "
                               "strides) are supported")
    return _memory.device_array(shape, dtype)


def device_array_like(ary, stream=0):
    """A new uninitialised device array of ``ary``'s shape and dtype."""
    _check_stream(stream)
    return _memory.device_array_like(ary)


synchronize = _dispatcher.synchronize


def is_available():
    """Whether a Vulkan device can run kernels."""
    try:
        return bool(_device.list_devices())
    except VulkanError:
        return False


def detect(file=None):
    """Print the Vulkan devices found; return whether there is one."""
    out = file or sys.stdout
    try:
        devices = _device.list_devices()
    except VulkanError as exc:
        print(f"No Vulkan devices: {exc}", file=out)
        return False
    print(f"Found {len(devices)} Vulkan device(s)", file=out)
    for info in devices:
        print(f"id {info.index:>2} {info.name!r:>40} {info.device_type}, subgroup size "
              f"{info.subgroup_size}", file=out)
    return bool(devices)


def select_device(device_id):
    """Make Vulkan device ``device_id`` (a ``gpus`` index, or part of its
    name) current for the calling thread, and the default of threads that
    chose none."""
    return _device.select_device(device_id)


def get_current_device():
    """The calling thread's current device (opened on first use)."""
    return _device.current_device()


def close():
    """Wait for all work on the calling thread's current device. Unlike
    numba.cuda's, the device stays open: its arrays stay valid."""
    if _device.opened_device() is not None:
        _dispatcher.synchronize()


def list_devices():
    """numba.cuda's list of devices: :data:`gpus`."""
    return gpus


def profile_start():
    """numba.cuda's start of the CUDA profiler's capture: nothing to start
    here (a Vulkan profiler captures on its own), so benchmark code that
    brackets its kernels with it runs unchanged."""


def profile_stop():
    """numba.cuda's end of the profiler's capture: nothing to stop here."""


@contextlib.contextmanager
def profiling():
    """numba.cuda's ``with cuda.profiling():``, between :func:`profile_start`
    and :func:`profile_stop`."""
    profile_start()
    try:
        yield
    finally:
        profile_stop()


#: ``free`` and ``total`` bytes of a device's memory, as numba.cuda's
#: ``get_memory_info()`` gives them.
MemoryInfo = collections.namedtuple("MemoryInfo", "free total")


class _Context:
    """numba.cuda's context of a device: what code asks of
    ``cuda.current_context()``."""

    def __init__(self, device):
        self.device = device

    def get_memory_info(self):
        """``MemoryInfo(free, total)`` bytes of the device's largest
        device-local memory (the driver's budget where it has one, else its
        size less what numba_vulkan holds)."""
        return MemoryInfo(*self.device.memory_info())

    def synchronize(self):
        """Wait for all work on the device."""
        self.device.synchronize()

    def reset(self):
        """numba.cuda frees the context's memory here; arrays are freed when
        nothing refers to them, so this only waits for the device's work."""
        self.device.synchronize()


def current_context(devnum=None):
    """The context of the calling thread's current device (or of
    ``gpus[devnum]``), for ``get_memory_info()``."""
    device = _device.current_device() if devnum is None else gpus[devnum].device
    return _Context(device)


@contextlib.contextmanager
def defer_cleanup():
    """numba.cuda's pause of memory frees; accepted, and nothing is paused:
    an array is freed once nothing refers to it and the device is done with it."""
    yield


def is_cuda_array(obj):
    """Whether ``obj`` is a device array (numba.cuda: has
    ``__cuda_array_interface__``)."""
    return isinstance(obj, _memory.DeviceArray)


def as_cuda_array(obj, sync=True):
    """``obj`` if it is a device array. Memory of CUDA libraries (CuPy,
    PyTorch) cannot be viewed from Vulkan: a TypeError says to copy it
    through the host."""
    if isinstance(obj, _memory.DeviceArray):
        return obj
    raise TypeError(f"{type(obj).__name__} is not a numba_vulkan device array; memory of CUDA "
                    "libraries (CuPy, PyTorch) cannot be used from Vulkan: pass a NumPy array "
                    "(such as x.get() or x.cpu().numpy()) or cuda.to_device(...) of one")


#: numba.cuda's ``gpus``: every logical Vulkan device, by index (``nv.gpus``);
#: ``with gpus[i]:`` makes one the calling thread's current device inside the block.
gpus = _device.gpus


# Ufuncs ----------------------------------------------------------------------

def vectorize(signatures, target="cuda", **options):
    """numba's ``vectorize(..., target='cuda')``: a GPU ufunc
    (:func:`numba_vulkan.vectorize`); ``target`` is accepted and ignored."""
    return _ufunc.vectorize(signatures, **options)


def guvectorize(signatures, layout, target="cuda", **options):
    """numba's ``guvectorize(..., target='cuda')``: a generalized GPU ufunc
    (:func:`numba_vulkan.guvectorize`); ``target`` is accepted and ignored."""
    return _ufunc.guvectorize(signatures, layout, **options)


#: numba.cuda's ``Reduce``/``reduce``: :class:`numba_vulkan.Reduce`.
Reduce = reduce = _ufunc.Reduce

# Importing this module imports Numba: numba.vectorize(target="vulkan") too.
_numba_target.register_numba_target()

# numba.cuda has it as an attribute too: kernels call cuda.libdevice.expf(x).
from numba_vulkan.cuda import libdevice  # noqa: E402
