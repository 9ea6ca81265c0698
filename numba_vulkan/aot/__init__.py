"""Ahead-of-time builds: compile a manifest of kernels into a directory apps ship.

``python -m numba_vulkan.aot build kernels.yaml`` compiles every kernel of a
manifest for every signature and profile into a directory of SPIR-V modules
and a JSON index (see ``docs/aot.md``). At run time, launches look kernels
up there before compiling anything::

    import numba_vulkan as nv
    nv.aot.register("aot")            # or a package carrying one as data
    nv.aot.stats()                    # {'hits': 1, 'misses': 0, ...}

``NUMBA_VULKAN_AOT_PATH`` adds directories too, and
``NUMBA_VULKAN_AOT_STRICT=1`` makes a kernel missing from them an error.
Importing this package imports only the run-time loader
(:mod:`numba_vulkan.aot.loader`): neither Numba nor Vulkan nor the build
(``manifest``, ``build``, ``keys`` and the command line, which sit on top).
"""

from numba_vulkan.aot.loader.lookup import directories, register, stats, unregister

__all__ = ["register", "unregister", "stats", "directories"]
