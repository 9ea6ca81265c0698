"""Where a benchmark runs: numba_vulkan, numba-cuda, the CPU, and the ceilings.

Each kernel backend turns a :class:`~benchmarks.suite.Benchmark`'s source
into a launchable kernel, moves arrays, launches and waits. numba-cuda gets
the numba_vulkan source with only the indexing and cooperation calls
rewritten (:func:`to_cuda`), so both compile the same kernel.

Ceilings say what the hardware allows: a device-to-device copy for
memory-bound kernels, the fp32/fp64 rate for compute-bound ones, a trivial
framework operation for launch latency, pinned-memory copies for
transfers. They come from torch or cupy on a CUDA machine and from host
memory copies on a CPU Vulkan device (whose device memory is host memory).
"""

import importlib.metadata
import linecache
import math
import re
import time
import types

import numpy as np

from benchmarks import measure
from benchmarks.users import RngStates

# --- one kernel source, two targets ----------------------------------------

_AXES = "xyz"

#: numba_vulkan calls and their numba-cuda spelling. ``{axis}`` is x, y or z;
#: global_id is handled apart because CUDA spells it with the grid's rank.
_TO_CUDA = [
    (r"nv\.local_id\(([012])\)", "cuda.threadIdx.{axis}"),
    (r"nv\.group_id\(([012])\)", "cuda.blockIdx.{axis}"),
    (r"nv\.local_size\(([012])\)", "cuda.blockDim.{axis}"),
    (r"nv\.num_groups\(([012])\)", "cuda.gridDim.{axis}"),
    (r"nv\.grid\(", "cuda.grid("),
    (r"nv\.gridsize\(", "cuda.gridsize("),
    (r"nv\.shared\.array\(", "cuda.shared.array("),
    (r"nv\.local\.array\(", "cuda.local.array("),
    (r"nv\.barrier\(\)", "cuda.syncthreads()"),
    (r"nv\.atomic\.", "cuda.atomic."),
    (r"nv\.subgroup\.shuffle_down\(", "cuda.shfl_down_sync(0xFFFFFFFF, "),
    (r"nv\.subgroup\.size\(\)", "cuda.warpsize"),
    (r"nv\.subgroup\.local_id\(\)", "cuda.laneid"),
    # CUDA numbers warps along threadIdx.x (1-d blocks here).
    (r"nv\.subgroup\.id\(\)", "(cuda.threadIdx.x // cuda.warpsize)"),
]


def to_cuda(source, ndim):
    """numba-cuda source for a numba_vulkan kernel launched on an ``ndim`` grid.

    Raises:
        ValueError: The source calls an ``nv.`` function with no mapping.
    """
    def global_id(match):
        axis = int(match.group(1))
        return "cuda.grid(1)" if ndim == 1 else f"cuda.grid({ndim})[{axis}]"

    text = re.sub(r"nv\.global_id\(([012])\)", global_id, source)
    for pattern, replacement in _TO_CUDA:
        text = re.sub(pattern, lambda m, r=replacement: r.format(
            axis=_AXES[int(m.group(1))] if m.groups() else ""), text)
    left = re.findall(r"nv\.\w+", text)
    if left:
        raise ValueError(f"no numba-cuda spelling for {sorted(set(left))}")
    return text


def define(source, name, namespace, label):
    """Execute ``source`` and return the function ``name`` it defines.

    The source is registered with linecache under ``label`` so that
    tracebacks and Numba's messages can quote it.
    """
    filename = f"<benchmark {label}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = dict(namespace)
    exec(compile(source, filename, "exec"), scope)
    return scope[name]


def _numba_types(real):
    import numba
    return {"float32": numba.float32, "float64": numba.float64, "int32": numba.int32,
            "int64": numba.int64, "real": getattr(numba, real), "math": math}


def _cuda_scope(cuda, real):
    """What a numba.cuda user's module has in scope: ``cuda`` (numba.cuda or
    numba_vulkan.cuda), ``math``, ``np``, Numba's types and the generator
    functions of ``cuda.random``."""
    import importlib
    random = importlib.import_module(cuda.__name__ + ".random")
    generators = {name: getattr(random, name) for name in dir(random)
                  if name.startswith("xoroshiro128p_")}
    return {"cuda": cuda, "np": np, **_numba_types(real), **generators}


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


# --- kernel backends ----------------------------------------------------------

class Backend:
    """A place to run kernels. Subclasses fill in every method."""

    name = ""
    #: Whether :meth:`kernel_times` measures on the device.
    has_kernel_times = False
    #: Benchmark kinds this backend runs (None: all).
    kinds = None

    def to_device(self, host):
        raise NotImplementedError

    def device_value(self, value):
        """A kernel argument on this backend: arrays copied to it, scalars as they are."""
        return self.to_device(value) if isinstance(value, np.ndarray) else value

    def to_host(self, array):
        raise NotImplementedError

    def synchronize(self):
        raise NotImplementedError

    def make(self, bench):
        raise NotImplementedError

    def launch(self, kernel, groups, threads, args):
        raise NotImplementedError

    def kernel_times(self, run, count):
        """Device seconds of ``count`` launches of ``run``, or None."""
        return None

    def transfers(self, nbytes):
        """``{name: (run, check)}`` of the host<->device copies to time, or {}."""
        return {}

    def environment(self):
        return {}


class VulkanBackend(Backend):
    """numba_vulkan on its default (or ``NUMBA_VULKAN_DEVICE``) device."""

    name = "numba_vulkan"
    has_kernel_times = True

    def __init__(self):
        import numba_vulkan as nv
        from numba_vulkan.runtime.device import current_device
        self.nv = nv
        self.device = current_device()
        self.is_cpu = self.device.info.device_type == "cpu"

    def to_device(self, host):
        return self.nv.to_device(host)

    def to_host(self, array):
        return array.copy_to_host()

    def synchronize(self):
        self.nv.synchronize()

    options = {}

    def make(self, bench):
        if getattr(bench, "style", "nv") == "cuda":
            from numba_vulkan import cuda
            # cuda.jit's default is {"contract"}: the exact build asks for no flags.
            options = dict(self.options) or {"fastmath": set()}
            return cuda.jit(define(bench.source, bench.function, _cuda_scope(cuda, bench.real),
                                   bench.name), **options)
        scope = {"nv": self.nv, **_numba_types(bench.real)}
        return self.nv.jit(define(bench.source, bench.function, scope, bench.name),
                           **self.options)

    def device_value(self, value):
        """``value`` on the device: an array, or generator states made here."""
        if isinstance(value, RngStates):
            from numba_vulkan.cuda import random
            return random.create_xoroshiro128p_states(value.n, seed=value.seed)
        return self.to_device(value) if isinstance(value, np.ndarray) else value

    def launch(self, kernel, groups, threads, args):
        kernel[groups, threads](*args)

    def kernel_times(self, run, count):
        from numba_vulkan.runtime.timing import KernelTimer
        with KernelTimer(self.device) as timer:
            for _ in range(count):
                run()
                self.synchronize()
        return timer.times

    def transfers(self, nbytes):
        nv = self.nv
        touch = nv.jit(define(TOUCH, "touch", {"nv": nv, **_numba_types("float32")}, "touch"))
        return _transfer_cases(nv, nbytes, touch)

    def environment(self):
        info = self.device.info
        return {"device": info.name, "device_type": info.device_type,
                "vendor_id": hex(info.vendor_id), "device_id": hex(info.device_id),
                "driver_version": driver_version_text(info.vendor_id, info.driver_version),
                "driver_version_raw": info.driver_version,
                "vulkan": ".".join(map(str, info.api_version)),
                "subgroup_size": info.subgroup_size,
                "features": sorted(info.features),
                "max_shared_memory": info.max_shared_memory,
                "numba_vulkan_validate": _validate_setting()}


class VulkanFastmathBackend(VulkanBackend):
    """numba_vulkan with ``fastmath=True``, on compute-bound kernels only.

    numba_vulkan keeps float arithmetic exact unless told otherwise, while
    NVVM (numba-cuda) contracts ``a * b + c`` into fused multiply-adds by
    default; this backend shows what that difference costs in the same run.
    """

    name = "numba_vulkan_fastmath"
    options = {"fastmath": True}
    kinds = ("compute",)

    def transfers(self, nbytes):
        return {}


class VulkanContractBackend(VulkanBackend):
    """numba_vulkan with ``fastmath={"contract"}``, ``numba_vulkan.cuda.jit``'s
    default: multiplies and adds fused as NVVM fuses them by default, every
    other operation exact; the same float semantics as numba-cuda's kernels."""

    name = "numba_vulkan_contract"
    options = {"fastmath": {"contract"}}
    kinds = ("compute", "memory")

    def transfers(self, nbytes):
        return {}


#: A kernel that leaves its array as it was: a launch on a NumPy array then
#: costs the copies in and back and nothing else.
TOUCH = """
def touch(x):
    if nv.global_id(0) == 0:
        x[0] = x[0] + float32(0.0)
"""


def _validate_setting():
    from numba_vulkan.base import config
    return config.validate()


def driver_version_text(vendor_id, version):
    """A Vulkan driverVersion as its vendor writes it."""
    if vendor_id == 0x10DE:
        return (f"{(version >> 22) & 0x3FF}.{(version >> 14) & 0xFF}."
                f"{(version >> 6) & 0xFF}")
    return f"{version >> 22}.{(version >> 12) & 0x3FF}.{version & 0xFFF}"


class CudaBackend(Backend):
    """numba-cuda on the first CUDA device."""

    name = "numba_cuda"
    has_kernel_times = True

    def __init__(self):
        from numba import cuda
        self.cuda = cuda
        self.gpu = cuda.current_context().device
        # numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1, for checking the
        # translated kernels without a GPU) has no events.
        self.has_kernel_times = hasattr(cuda, "event_elapsed_time")

    def to_device(self, host):
        return self.cuda.to_device(host)

    def to_host(self, array):
        return array.copy_to_host()

    def synchronize(self):
        self.cuda.synchronize()

    def make(self, bench):
        if getattr(bench, "style", "nv") == "cuda":
            return self.cuda.jit(define(bench.source, bench.function,
                                        _cuda_scope(self.cuda, bench.real),
                                        bench.name + " (cuda)"))
        source = to_cuda(bench.source, bench.ndim)
        scope = {"cuda": self.cuda, **_numba_types(bench.real)}
        return self.cuda.jit(define(source, bench.function, scope, bench.name + " (cuda)"))

    def launch(self, kernel, groups, threads, args):
        kernel[groups, threads](*args)

    def device_value(self, value):
        """``value`` on the device: an array, or generator states made here."""
        if isinstance(value, RngStates):
            from numba.cuda import random
            return random.create_xoroshiro128p_states(value.n, seed=value.seed)
        return self.to_device(value) if isinstance(value, np.ndarray) else value

    def kernel_times(self, run, count):
        cuda = self.cuda
        start, end = cuda.event(), cuda.event()
        times = []
        for _ in range(count):
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(cuda.event_elapsed_time(start, end) * 1e-3)
        return times

    def transfers(self, nbytes):
        cuda = self.cuda
        source = to_cuda(TOUCH, 1)
        touch = cuda.jit(define(source, "touch", {"cuda": cuda, **_numba_types("float32")},
                                "touch (cuda)"))
        return _transfer_cases(cuda, nbytes, touch)

    def environment(self):
        cuda = self.cuda
        name = getattr(self.gpu, "name", None) or "CUDA simulator"
        if isinstance(name, bytes):
            name = name.decode()
        env = {"device": name, "compute_capability": ".".join(map(str,
                                                               self.gpu.compute_capability)),
               "numba_cuda": _version("numba-cuda")}
        try:
            env["cuda_driver"] = ".".join(map(str, cuda.cudadrv.driver.driver.get_version()))
            env["cuda_runtime"] = ".".join(map(str, cuda.runtime.get_version()))
        except Exception as exc:  # versions are informative only
            env["cuda_version_error"] = str(exc)
        return env


class CpuBackend(Backend):
    """The loop form of each kernel under ``numba.njit(parallel=True)``."""

    name = "cpu"

    def __init__(self):
        import numba
        self.numba = numba

    def to_device(self, host):
        return np.array(host, copy=True)

    def to_host(self, array):
        return np.array(array, copy=True)

    def synchronize(self):
        pass

    def make(self, bench):
        fn = bench.cpu
        scope = dict(fn.__globals__, **_numba_types(bench.real))
        loop = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__)
        return self.numba.njit(parallel=True)(loop)

    def launch(self, kernel, groups, threads, args):
        kernel(*args)

    def environment(self):
        import os
        return {"threads": self.numba.get_num_threads(), "cpus": os.cpu_count(),
                "threading_layer": self.numba.config.THREADING_LAYER}


KERNEL_BACKENDS = {"numba_vulkan": VulkanBackend,
                   "numba_vulkan_fastmath": VulkanFastmathBackend,
                   "numba_vulkan_contract": VulkanContractBackend,
                   "numba_cuda": CudaBackend, "cpu": CpuBackend}


def cuda_status():
    """``(available, note)`` for numba-cuda, without starting a backend."""
    try:
        from numba import cuda
    except Exception as exc:
        return False, f"numba.cuda does not import: {exc}"
    try:
        if cuda.is_available():
            return True, None
        return False, "numba.cuda.is_available() is False (no CUDA driver or GPU)"
    except Exception as exc:
        return False, f"numba.cuda.is_available() failed: {exc}"


# --- ceilings -------------------------------------------------------------

#: Non-tensor-core peak rates (FLOP/s) from vendors' datasheets, by device
#: name; the fp32 rate is the ceiling of compute-bound kernels.
DATASHEET_PEAKS = {
    "H200": {"float32": 67e12, "float64": 34e12},
    "H100": {"float32": 67e12, "float64": 34e12},
}


def datasheet_peak(device_name, real):
    for key, peaks in DATASHEET_PEAKS.items():
        if key in (device_name or ""):
            # Integer benchmarks have no datasheet rate.
            return peaks.get(real)
    return None


class Ceiling:
    """What the hardware allows, measured by a framework or read from a datasheet."""

    source = ""
    transfer_source = ""

    def copy_bandwidth(self, nbytes):
        """Bytes read plus written per second by a device-to-device copy."""
        raise NotImplementedError

    def tiny_times(self, plan):
        """Wall seconds of a trivial framework operation plus a wait, or None."""
        return None

    def matmul_time(self, n):
        """Seconds of the framework's own float32 n x n matrix product, or None."""
        return None

    def transfers(self, nbytes):
        """``{name: run}`` of pinned-memory copies matching the backends' copies."""
        return {}

    def synchronize(self):
        pass

    def environment(self):
        return {"source": self.source}


class TorchCeiling(Ceiling):
    """torch on the CUDA device: its copies, cuBLAS and pinned memory."""

    source = "torch"
    transfer_source = "torch copies from and to pinned host memory"

    def __init__(self):
        import torch
        self.torch = torch
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")

    def synchronize(self):
        self.torch.cuda.synchronize()

    def _event_times(self, run, count):
        torch = self.torch
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(count):
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e-3)
        return times

    def copy_bandwidth(self, nbytes):
        torch = self.torch
        src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        for _ in range(3):
            dst.copy_(src)
        times = self._event_times(lambda: dst.copy_(src), 20)
        return 2 * nbytes / measure.summary(times)["median"]

    def tiny_times(self, plan):
        torch = self.torch
        x = torch.zeros(1024, dtype=torch.float32, device="cuda")
        return measure.wall_times(lambda: x.add_(1.0), self.synchronize,
                                  plan["tiny_warmup"], plan["tiny_repeat"], plan["budget"])

    def matmul_time(self, n):
        torch = self.torch
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            a = torch.rand(n, n, device="cuda")
            b = torch.rand(n, n, device="cuda")
            for _ in range(3):
                torch.matmul(a, b)
            return measure.summary(self._event_times(lambda: torch.matmul(a, b), 10))["median"]
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous

    def transfers(self, nbytes):
        torch = self.torch
        pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        back = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")

        def round_trip():
            dev.copy_(pinned)
            back.copy_(dev)

        return {"copy_h2d": lambda: dev.copy_(pinned), "copy_d2h": lambda: back.copy_(dev),
                "copy_numpy_arg": round_trip, "copy_h2d_pinned": lambda: dev.copy_(pinned),
                "copy_d2h_pinned": lambda: back.copy_(dev)}

    def environment(self):
        torch = self.torch
        return {"source": "torch", "torch": torch.__version__,
                "device": torch.cuda.get_device_name(0)}


class CupyCeiling(Ceiling):
    """cupy on the CUDA device, where torch is missing."""

    source = "cupy"
    transfer_source = "cupy copies from and to pinned host memory"

    def __init__(self):
        import cupy
        self.cupy = cupy
        cupy.cuda.runtime.getDeviceCount()

    def synchronize(self):
        self.cupy.cuda.Device().synchronize()

    def _event_times(self, run, count):
        cupy = self.cupy
        times = []
        for _ in range(count):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, end) * 1e-3)
        return times

    def copy_bandwidth(self, nbytes):
        cupy = self.cupy
        src = cupy.empty(nbytes, dtype=cupy.uint8)
        dst = cupy.empty_like(src)
        for _ in range(3):
            cupy.copyto(dst, src)
        times = self._event_times(lambda: cupy.copyto(dst, src), 20)
        return 2 * nbytes / measure.summary(times)["median"]

    def tiny_times(self, plan):
        x = self.cupy.zeros(1024, dtype=self.cupy.float32)

        def add():
            x.__iadd__(1.0)

        return measure.wall_times(add, self.synchronize, plan["tiny_warmup"],
                                  plan["tiny_repeat"], plan["budget"])

    def matmul_time(self, n):
        cupy = self.cupy
        a = cupy.random.random((n, n), dtype=cupy.float32)
        b = cupy.random.random((n, n), dtype=cupy.float32)
        for _ in range(3):
            cupy.matmul(a, b)
        return measure.summary(self._event_times(lambda: cupy.matmul(a, b), 10))["median"]

    def transfers(self, nbytes):
        cupy = self.cupy
        import cupyx
        pinned = cupyx.empty_pinned(nbytes, dtype=np.uint8)
        back = cupyx.empty_pinned(nbytes, dtype=np.uint8)
        dev = cupy.empty(nbytes, dtype=cupy.uint8)

        def round_trip():
            dev.set(pinned)
            dev.get(out=back)

        return {"copy_h2d": lambda: dev.set(pinned), "copy_d2h": lambda: dev.get(out=back),
                "copy_numpy_arg": round_trip, "copy_h2d_pinned": lambda: dev.set(pinned),
                "copy_d2h_pinned": lambda: dev.get(out=back)}

    def environment(self):
        return {"source": "cupy", "cupy": self.cupy.__version__}


class HostCeiling(Ceiling):
    """Host memory copies: the ceiling of a CPU Vulkan device such as lavapipe.

    Its device memory is host memory, so a kernel can at best stream at
    the speed of a host copy. NumPy's copy runs on one thread; the driver
    may use more, so this is a floor of the real ceiling.
    """

    source = "numpy host copy (one thread)"
    transfer_source = "numpy host copies (one thread)"

    def copy_bandwidth(self, nbytes):
        src = np.ones(nbytes, np.uint8)
        dst = np.empty_like(src)
        np.copyto(dst, src)
        times = []
        for _ in range(5):
            start = time.perf_counter()
            np.copyto(dst, src)
            times.append(time.perf_counter() - start)
        return 2 * nbytes / measure.summary(times)["median"]

    def transfers(self, nbytes):
        src = np.ones(nbytes, np.uint8)
        dst = np.empty_like(src)

        def round_trip():
            np.copyto(dst, src)
            np.copyto(src, dst)

        return {"copy_h2d": lambda: np.copyto(dst, src), "copy_d2h": lambda: np.copyto(src, dst),
                "copy_numpy_arg": round_trip, "copy_h2d_pinned": lambda: np.copyto(dst, src),
                "copy_d2h_pinned": lambda: np.copyto(src, dst)}


def make_ceiling(vulkan_is_cpu):
    """The best ceiling source here, and notes on those that were skipped."""
    notes = []
    for cls in (TorchCeiling, CupyCeiling):
        try:
            return cls(), notes
        except Exception as exc:
            notes.append(f"{cls.source}: {type(exc).__name__}: {exc}")
    if vulkan_is_cpu:
        return HostCeiling(), notes
    notes.append("no torch or cupy with CUDA, and the Vulkan device is not the CPU")
    return None, notes


def _transfer_cases(lib, nbytes, touch):
    """The copy benchmarks as ``(run, check)`` pairs, for any backend ``lib``
    (``numba_vulkan`` or ``numba.cuda``) whose arrays copy like numba.cuda's
    and whose ``touch`` kernel launches on one NumPy array: from and to
    NumPy's (pageable) memory, and from and to the library's pinned arrays,
    which is what torch's copies of the ceiling use."""
    host = np.arange(nbytes // 4, dtype=np.float32)
    back = np.empty_like(host)
    dev = lib.device_array(host.shape, np.float32)
    arg = host.copy()
    pinned = lib.pinned_array(host.shape, np.float32)
    pinned[...] = host
    pinned_back = lib.pinned_array(host.shape, np.float32)
    return {
        "copy_h2d": (lambda: dev.copy_to_device(host),
                     lambda: np.array_equal(dev.copy_to_host(), host)),
        "copy_d2h": (lambda: dev.copy_to_host(back),
                     lambda: np.array_equal(back, host)),
        "copy_numpy_arg": (lambda: touch[1, 1](arg),
                           lambda: np.array_equal(arg, host)),
        "copy_h2d_pinned": (lambda: dev.copy_to_device(pinned),
                            lambda: np.array_equal(dev.copy_to_host(), host)),
        "copy_d2h_pinned": (lambda: dev.copy_to_host(pinned_back),
                            lambda: np.array_equal(pinned_back, host)),
    }
