"""numba.cuda's API on numba_vulkan: port a numba.cuda program by replacing
``from numba import cuda`` with ``from numba_vulkan import cuda``.

Every name here is numba.cuda's, with its arguments and meaning, mapped onto
numba_vulkan's own API (``docs/cuda.md`` has the table and what differs);
nothing is implemented twice. Unlike ``import numba_vulkan``, importing this
module imports Numba, for the Numba types numba.cuda re-exports
(``cuda.float32``, ...).
"""

import contextlib
import sys

import numpy as np
from numba.core.types import (boolean, bool_, complex64, complex128, float32, float64, int8,
                              int16, int32, int64, intp, uint8, uint16, uint32, uint64, uintp,
                              void)

from numba_vulkan import dispatcher as _dispatcher
from numba_vulkan import intrinsics as _intrinsics
from numba_vulkan.errors import UnsupportedError, VulkanError
from numba_vulkan.runtime import device as _device
from numba_vulkan.runtime import memory as _memory

__all__ = [
    "jit", "grid", "gridsize", "threadIdx", "blockIdx", "blockDim", "gridDim", "shared",
    "local", "const", "atomic", "syncthreads", "laneid", "warpsize", "to_device",
    "device_array", "device_array_like", "synchronize", "stream", "default_stream",
    "legacy_default_stream", "per_thread_default_stream", "Stream", "pinned_array",
    "mapped_array", "pinned", "is_available", "detect", "select_device", "get_current_device",
    "boolean", "bool_", "complex64", "complex128", "float32", "float64", "int8", "int16",
    "int32", "int64", "intp", "uint8", "uint16", "uint32", "uint64", "uintp", "void",
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
laneid = _intrinsics.KernelValue("laneid", _intrinsics.lane_id)
warpsize = _intrinsics.KernelValue("warpsize", _intrinsics.subgroup_size)

#: numba.cuda.jit options that only tune numba.cuda's own code generation.
_IGNORED_OPTIONS = ("debug", "opt", "lineinfo", "max_registers", "link")


def jit(func_or_sig=None, device=False, **options):
    """numba.cuda's ``@cuda.jit``: a kernel, or with ``device=True`` a device
    function that kernels call.

    ``func_or_sig`` is the function, or a signature string or list of them
    (such as ``"void(float32[:], float32[:])"``): then each is compiled when
    the decorator runs, so that typing errors show at once. ``fastmath``,
    ``cache``, ``boundscheck`` and ``inline`` are :func:`numba_vulkan.jit`'s;
    ``debug``, ``opt``, ``lineinfo``, ``max_registers`` and ``link`` are
    accepted and have no effect.
    """
    for name in _IGNORED_OPTIONS:
        options.pop(name, None)
    signatures = None
    if isinstance(func_or_sig, (str, list, tuple)):
        signatures = [func_or_sig] if isinstance(func_or_sig, str) else list(func_or_sig)
        func_or_sig = None

    unknown = set(options) - set(_dispatcher.OPTIONS)
    if unknown:
        raise TypeError(f"unknown cuda.jit option(s): {', '.join(sorted(unknown))}; known: "
                        f"{', '.join((*_dispatcher.OPTIONS, *_IGNORED_OPTIONS))}")

    def wrap(func):
        kernel = _Kernel(func, options)
        if not device:
            for sig in signatures or ():
                kernel.compile(sig)
        return kernel

    return wrap(func_or_sig) if func_or_sig is not None else wrap


class _Kernel(_dispatcher.VulkanDispatcher):
    """A kernel that also takes numba.cuda's launch forms
    ``kernel[blocks, threads, stream]`` and
    ``kernel[blocks, threads, stream, shared_bytes]`` (``shared_bytes`` 0)."""

    def __getitem__(self, config):
        if isinstance(config, tuple) and len(config) in (3, 4):
            _check_stream(config[2])
            if len(config) == 4 and config[3] != 0:
                raise UnsupportedError(
                    f"{self.__qualname__}[blocks, threads, stream, {config[3]!r}]: dynamic "
                    "shared memory is not supported; give cuda.shared.array a shape known "
                    "at compile time and launch with shared_bytes 0")
            config = config[:2]
        return super().__getitem__(config)


# Host side -------------------------------------------------------------------

class Stream:
    """numba.cuda's stream: here the device's one queue, so work submitted on
    any stream runs in submission order, and :meth:`synchronize` waits for
    all of it."""

    def synchronize(self):
        """Wait for every launch and copy submitted so far."""
        _dispatcher.synchronize()

    @contextlib.contextmanager
    def auto_synchronize(self):
        """A context that synchronizes the stream when it exits."""
        yield self
        self.synchronize()

    def __repr__(self):
        return "<numba_vulkan.cuda.Stream: the device's queue>"


_DEFAULT_STREAM = Stream()


def stream():
    """A new :class:`Stream`."""
    return Stream()


def default_stream():
    """The default :class:`Stream`."""
    return _DEFAULT_STREAM


legacy_default_stream = per_thread_default_stream = default_stream


def _check_stream(value):
    if not (value is None or isinstance(value, Stream)
            or (isinstance(value, (int, np.integer)) and value == 0)):
        raise TypeError(f"a stream must be a cuda.stream(), 0 or None, not {value!r}")


def pinned_array(shape, dtype=np.float64, strides=None, order="C"):
    """A host array to copy to and from: an ordinary NumPy array (copies are
    staged by the device, so page-locking would gain nothing here)."""
    if strides is not None:
        raise UnsupportedError("pinned_array: strides are not supported")
    return np.empty(shape, dtype, order=order)


def mapped_array(shape, dtype=np.float64, strides=None, order="C", stream=0, portable=False,
                 wc=False):
    """A host array kernels read and write: an ordinary NumPy array, which a
    launch copies to the device and back (numba.cuda maps it instead)."""
    return pinned_array(shape, dtype, strides, order)


@contextlib.contextmanager
def pinned(*arrays):
    """numba.cuda's page-locking context: nothing to do here."""
    yield


def to_device(obj, stream=0, copy=True, to=None):
    """Copy a NumPy array to a new device array, or into ``to``; return it.

    ``stream`` is accepted for numba.cuda's signature: copies are ordered on
    the device's one queue.
    """
    if to is not None:
        to.copy_to_device(obj)
        return to
    return _memory.to_device(obj)


def device_array(shape, dtype=np.float64, strides=None, order="C", stream=0):
    """A new uninitialised C-contiguous device array."""
    if order != "C" or strides is not None:
        raise UnsupportedError("device_array: only C-contiguous arrays (order='C', no "
                               "strides) are supported")
    return _memory.device_array(shape, dtype)


def device_array_like(ary, stream=0):
    """A new uninitialised device array of ``ary``'s shape and dtype."""
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
    """Make Vulkan device ``device_id`` (an index, or part of its name) current."""
    return _device.select_device(device_id)


def get_current_device():
    """The current device (opened on first use)."""
    return _device.current_device()

