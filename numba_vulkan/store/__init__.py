"""Compiled kernels kept between processes: the code hasher, the on-disk
cache and the shared remote tier. Imports no Numba."""

from numba_vulkan.store.cache import (CachedModule, function_key, load_compiled, load_module,
                                      module_key, store_compiled, store_module)

__all__ = ["CachedModule", "function_key", "load_compiled", "load_module", "module_key",
           "store_compiled", "store_module"]
