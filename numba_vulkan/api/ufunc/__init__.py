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

from numba_vulkan.api import numba_target
from numba_vulkan.api.ufunc.common import THREADS, parse_signature
from numba_vulkan.api.ufunc.elementwise import VulkanUFunc, vectorize
from numba_vulkan.api.ufunc.generalized import VulkanGUFunc, guvectorize, parse_layout
from numba_vulkan.api.ufunc.reduction import Reduce, reduce

__all__ = ["THREADS", "Reduce", "VulkanGUFunc", "VulkanUFunc", "guvectorize", "parse_layout",
           "parse_signature", "reduce", "vectorize"]

numba_target.build_with(VulkanUFunc, VulkanGUFunc)
