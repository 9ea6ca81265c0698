"""Finding libclc, LLVM's OpenCL C math library, and the package's cache directory."""

import os

from numba_vulkan import config


def cache_directory():
    """The directory where numba_vulkan keeps what it derives and caches.

    ``NUMBA_VULKAN_CACHE_DIR`` if set, else ``numba_vulkan`` below
    ``$XDG_CACHE_HOME`` (``~/.cache`` by default). Created on first use.
    """
    path = config.cache_dir()
    os.makedirs(path, exist_ok=True)
    return path
