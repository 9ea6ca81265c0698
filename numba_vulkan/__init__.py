"""numba_vulkan: Python GPU kernels for any GPU with a Vulkan driver.

Write kernels in the style of ``numba.cuda`` and launch them on any Vulkan
device::

    import numba_vulkan as nv

    @nv.jit
    def saxpy(a, x, y):
        i = nv.global_id(0)
        if i < x.shape[0]:
            y[i] = a * x[i] + y[i]

    saxpy.forall(x.size)(np.float32(2.0), x, y)

Importing this package loads no Vulkan library and opens no device; the
first launch, copy or device query does.

``logging.getLogger("numba_vulkan")`` says at DEBUG what was compiled,
found in a cache or an AOT directory, fetched, rejected, and why
(:mod:`numba_vulkan.base.log`); ``python -m numba_vulkan info`` reports
what the system provides (``docs/install.md``).
"""

import sys

#: The package's version (also the wheel's, which pyproject.toml reads here).
__version__ = "0.1.0"

from numpy import (bool_, complex64, complex128, float16, float32, float64, int8, int16, int32,
                   int64, intp, uint8, uint16, uint32, uint64, uintp)

from numba_vulkan import aot
from numba_vulkan.spirv.compiled import CompiledKernel
from numba_vulkan.api.dispatcher import VulkanDispatcher, jit, synchronize
from numba_vulkan.base.errors import (AOTError, AOTWarning, CacheWarning, CompilerError, ConfigError,
                                      DriverError, KernelTypeError, LaunchError, ManifestError,
                                      NarrowingWarning, NotReportedError,
                                      ToolError, UnsupportedError, ValidationError, VulkanError)
from numba_vulkan.base.intrinsics import (atomic, barrier, barrier_and, barrier_count, barrier_or,
                                     brev, clz, const, fence, ffs, fma, fp16, global_id, global_size,
                                     grid,
                                     gridsize, group_id, lane_id, local, local_id, local_size,
                                     num_groups, popc, selp, shared, subgroup, subgroup_size,
                                     workgroup_fence)
from numba_vulkan.runtime.device import (default_stream, event, get_current_device, gpus,
                                         list_devices, select_device, stream)
from numba_vulkan.runtime.memory import (DeviceArray, HostArray, device_array, device_array_like,
                                         mapped_array, pinned_array, to_device)
from numba_vulkan.runtime.queue import Event, Stream
from numba_vulkan.base.target import TargetDescription
from numba_vulkan.api.numba_target import register_numba_target
from numba_vulkan.api.ufunc import Reduce, VulkanGUFunc, VulkanUFunc, guvectorize, reduce, vectorize

__all__ = [
    "jit", "synchronize", "to_device", "device_array", "device_array_like", "DeviceArray",
    "pinned_array", "mapped_array", "HostArray", "stream", "default_stream", "event", "Stream",
    "Event",
    "list_devices", "select_device", "get_current_device", "gpus", "global_id", "local_id",
    "group_id",
    "local_size", "num_groups", "global_size", "grid", "gridsize", "shared", "local", "const",
    "barrier", "barrier_count", "barrier_and", "barrier_or", "lane_id", "subgroup_size",
    "subgroup", "popc", "brev", "clz", "ffs", "fma", "selp", "fp16",
    "fence", "workgroup_fence",
    "atomic", "vectorize", "guvectorize", "reduce", "Reduce", "VulkanUFunc", "VulkanGUFunc",
    "register_numba_target",
    "TargetDescription", "CompiledKernel",
    "VulkanDispatcher", "VulkanError", "CompilerError", "KernelTypeError", "UnsupportedError",
    "ToolError",
    "ValidationError", "DriverError", "NotReportedError", "LaunchError", "AOTError",
    "ManifestError", "NarrowingWarning", "AOTWarning", "aot", "CacheWarning", "ConfigError",
    # NumPy's scalar types, for dtypes and casts in kernels (np.float32(x)).
    "bool_", "complex64", "complex128", "float16", "float32", "float64", "int8", "int16",
    "int32", "int64", "intp", "uint8", "uint16", "uint32", "uint64", "uintp",
]

# numba.vectorize(..., target="vulkan") where Numba is already loaded; loading
# it here would cost every import.
if "numba.np.ufunc.decorators" in sys.modules:
    register_numba_target()
