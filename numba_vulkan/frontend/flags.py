"""Decorator options of the Vulkan target, mapped to Numba's compile flags."""

from numba.core import cpu
from numba.core.options import TargetOptions

class VulkanTargetOptions(TargetOptions):
    """Maps ``@nv.jit`` options to :class:`numba.core.compiler.Flags`."""

    # Numba takes a set of flags, not the frozenset options hold them in.
    fastmath = TargetOptions.Mapping("fastmath", lambda value: cpu.FastMathOptions(
        set(value) if isinstance(value, frozenset) else value))
    error_model = TargetOptions.Mapping("error_model")
    boundscheck = TargetOptions.Mapping("boundscheck")
    inline = TargetOptions.Mapping("inline")
    forceinline = TargetOptions.Mapping("forceinline")
    no_cpython_wrapper = TargetOptions.Mapping("no_cpython_wrapper")
    no_cfunc_wrapper = TargetOptions.Mapping("no_cfunc_wrapper")
    opt = TargetOptions.Mapping("opt")

    def finalize(self, flags, options):
        flags.no_cpython_wrapper = True
        flags.no_cfunc_wrapper = True
        flags.no_compile = True
        flags.nrt = False
        flags.enable_pyobject = False
        flags.enable_looplift = False
        flags.debuginfo = False
        if not flags.is_set("error_model"):
            flags.error_model = "numpy"
        if not flags.is_set("boundscheck"):
            flags.boundscheck = False
