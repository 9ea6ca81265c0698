"""Which libclc bitcode file kernels link their math functions from.

The code generator prepares and links it (:mod:`numba_vulkan.codegen.libclc`);
the kernel cache names it in its fingerprint
(:func:`numba_vulkan.store.toolchain.fingerprint`), which must not import the
code generator to learn it.
"""

import glob
import os

from numba_vulkan.base import config

#: libclc file names, most preferred first.
FILE_NAMES = ("nvptx64--.bc",)
#: Where distributions install libclc, most preferred first within a pattern
#: by the reversed sort (the newest LLVM).
SEARCH_DIRS = ("/usr/lib/clc", "/usr/share/clc", "/usr/lib64/clc", "/usr/local/lib/clc",
               "/usr/local/share/clc", "/opt/homebrew/share/clc", "/opt/homebrew/lib/clc",
               "/usr/lib/llvm-*/lib/clc", "/usr/lib/llvm-*/share/clc")


def path_in_use():
    """Absolute path of the libclc bitcode file that kernels link from.

    ``NUMBA_VULKAN_LIBCLC`` if set, else the first ``nvptx64--.bc`` found in
    the usual install locations, else None.
    """
    explicit = config.libclc()
    if explicit:
        return os.path.abspath(explicit)
    for pattern in SEARCH_DIRS:
        for directory in sorted(glob.glob(pattern), reverse=True):
            for name in FILE_NAMES:
                path = os.path.join(directory, name)
                if os.path.isfile(path):
                    return path
    return None
