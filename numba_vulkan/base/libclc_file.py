"""Which libclc bitcode file kernels link their math functions from.

Found here, below both the compiler, which prepares it
(:mod:`numba_vulkan.codegen.libclc`), and the kernel cache, whose keys name
it and its content (:mod:`numba_vulkan.store.cache`).
"""

import glob
import os

from numba_vulkan.base import config

#: libclc file names, most preferred first.
_FILE_NAMES = ("nvptx64--.bc",)
_SEARCH_DIRS = ("/usr/lib/clc", "/usr/share/clc", "/usr/local/lib/clc",
                "/usr/lib/llvm-*/lib/clc", "/usr/lib/llvm-*/share/clc")


def path_in_use():
    """Absolute path of the libclc bitcode file that kernels link from.

    ``NUMBA_VULKAN_LIBCLC`` if set, else the first ``nvptx64--.bc`` found in
    the usual install locations, else None.
    """
    explicit = config.libclc()
    if explicit:
        return os.path.abspath(explicit)
    for pattern in _SEARCH_DIRS:
        for directory in sorted(glob.glob(pattern), reverse=True):
            for name in _FILE_NAMES:
                path = os.path.join(directory, name)
                if os.path.isfile(path):
                    return path
    return None
