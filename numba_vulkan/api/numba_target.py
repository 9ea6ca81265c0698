"""``numba.vectorize(..., target="vulkan")``: the ``vulkan`` target in Numba's
ufunc target registry.

Numba's ``vectorize`` and ``guvectorize`` look their ``target`` up in a
registry of builders that other packages may extend (Numba registers its
CUDA target there the same way). The builders here hand the function,
signatures and options to the ufunc classes of :mod:`numba_vulkan.api.ufunc`.
Importing this module does not import Numba.
"""

from numba_vulkan.api.ufunc import VulkanGUFunc, VulkanUFunc


class _NumbaVectorize:
    """What Numba's ``Vectorize`` expects of a target's builder: made with
    the function and options, given signatures by :meth:`add`, and turned
    into the ufunc by :meth:`build_ufunc`."""

    def __init__(self, func, identity=None, cache=False, targetoptions=None):
        self._func = func
        self._signatures = []
        self._options = dict(targetoptions or {})
        # Numba's own compile modes: a Vulkan ufunc is compiled for its signatures.
        self._options.pop("nopython", None)
        self._options.pop("is_dynamic", None)
        if cache:
            self._options["cache"] = True

    def add(self, sig=None):
        if sig is None:
            raise TypeError("target='vulkan' needs signatures: "
                            "numba.vectorize(['float32(float32)'], target='vulkan')")
        self._signatures.append(sig)

    def disable_compile(self):
        """Signatures are fixed once given: nothing to disable."""

    def build_ufunc(self):
        return VulkanUFunc(self._func, self._signatures, **self._options)


class _NumbaGUVectorize(_NumbaVectorize):
    """:class:`_NumbaVectorize` for ``numba.guvectorize``."""

    def __init__(self, func, signature, identity=None, cache=False, targetoptions=None,
                 writable_args=(), is_dynamic=False):
        super().__init__(func, identity, cache, targetoptions)
        self._layout = signature

    def build_ufunc(self):
        return VulkanGUFunc(self._func, self._signatures, self._layout, **self._options)


def register_numba_target():
    """Make ``numba.vectorize`` and ``numba.guvectorize`` take ``target="vulkan"``.

    Done on ``import numba_vulkan`` when Numba was imported first, on
    ``import numba_vulkan.cuda`` and when numba_vulkan's compiler first
    loads; call it when Numba is imported after numba_vulkan and before
    any of those. Imports Numba.
    """
    from numba.np.ufunc.decorators import GUVectorize, Vectorize
    for registry, builder in ((Vectorize.target_registry, _NumbaVectorize),
                              (GUVectorize.target_registry, _NumbaGUVectorize)):
        if "vulkan" not in registry and "vulkan" not in registry.ondemand:
            registry.ondemand["vulkan"] = lambda builder=builder: builder
