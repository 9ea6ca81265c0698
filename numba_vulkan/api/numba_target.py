"""``numba.vectorize(..., target="vulkan")``: the ``vulkan`` target in Numba's
ufunc target registry.

Numba's ``vectorize`` and ``guvectorize`` look their ``target`` up in a
registry of builders that other packages may extend (Numba registers its
CUDA target there the same way). The builders here hand the function,
signatures and options to the ufunc classes of :mod:`numba_vulkan.api.ufunc`.
The compile service registers the target at a first compile, and it sits
below the ufuncs, so :mod:`numba_vulkan.api.ufunc` hands its classes to
:func:`build_with` as it loads (every ``import numba_vulkan`` does) rather
than being imported here. Importing this module imports nothing, Numba
included.
"""

#: The classes the builders make, ``(ufunc, gufunc)``: set by
#: :func:`build_with` on ``import numba_vulkan``, before any registration.
_classes = None


def build_with(ufunc, gufunc):
    """Have ``numba.vectorize`` build ``ufunc`` and ``numba.guvectorize``
    build ``gufunc`` for ``target="vulkan"``: each is called with the
    function, its signatures (and the gufunc's layout) and the options."""
    global _classes
    _classes = ufunc, gufunc


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
        ufunc, _ = _classes
        return ufunc(self._func, self._signatures, **self._options)


class _NumbaGUVectorize(_NumbaVectorize):
    """:class:`_NumbaVectorize` for ``numba.guvectorize``."""

    def __init__(self, func, signature, identity=None, cache=False, targetoptions=None,
                 writable_args=(), is_dynamic=False):
        super().__init__(func, identity, cache, targetoptions)
        self._layout = signature

    def build_ufunc(self):
        _, gufunc = _classes
        return gufunc(self._func, self._signatures, self._layout, **self._options)


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
