"""The package's cache directory, at the path the kernel cache's specification
names (``numba_vulkan.libclc.cache_directory``).

libclc itself is prepared in :mod:`numba_vulkan.codegen.libclc`.
"""

from numba_vulkan.base.config import cache_dir


def cache_directory():
    """The directory below which numba_vulkan keeps what it caches: kernels in
    ``kernels/`` and ``functions/``, the prepared libclc and the drivers'
    pipeline caches. ``NUMBA_VULKAN_CACHE_DIR`` sets it; otherwise it is
    ``numba_vulkan`` in ``$XDG_CACHE_HOME`` (``~/.cache``).

    :rtype: str
    """
    return cache_dir()


__all__ = ["cache_directory"]
