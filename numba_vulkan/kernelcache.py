"""On-disk cache of compiled kernels: the API specified for
``numba_vulkan.kernelcache``, kept at this path for the code that imports it.

The implementation lives in :mod:`numba_vulkan.store`.
"""

from numba_vulkan.store import (ENV_VAR, enabled, fingerprint, kernel_key, key, load,
                                load_kernel, normalise, source_stamp, store, store_kernel)

__all__ = ["ENV_VAR", "enabled", "fingerprint", "normalise", "key", "load", "store",
           "source_stamp", "kernel_key", "load_kernel", "store_kernel"]
