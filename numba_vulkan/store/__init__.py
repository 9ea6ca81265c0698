"""Compiled kernels kept between processes; imports no Numba and no llvmlite.

One concept a module:

* :mod:`~numba_vulkan.store.entry`: the one format of an entry, on disk and
  on the server alike, and its version.
* :mod:`~numba_vulkan.store.keys`: every key: modules by their IR
  (``kernels``), whole kernels by their Python code (``functions``), AOT
  directories' content keys and build keys, the server's keys.
* :mod:`~numba_vulkan.store.codehash`: the hash of a kernel's Python code
  and of what it reads, which the content key is.
* :mod:`~numba_vulkan.store.toolchain`: the fingerprint of what turns IR
  into SPIR-V, and the versions of what shapes Numba's lowering.
* :mod:`~numba_vulkan.store.tier`: the interface of a tier;
  :mod:`~numba_vulkan.store.disk` the local one (atomic files, eviction),
  :mod:`~numba_vulkan.store.remote` the Redis server.
* :mod:`~numba_vulkan.store.lookup`: the loop that asks the tiers in turn,
  and the one that stores in them.
* :mod:`~numba_vulkan.store.kernels` and :mod:`~numba_vulkan.store.functions`:
  the two sections, as the compiler and the dispatcher use them.
* :mod:`~numba_vulkan.store.counters`: hits, misses and stores, their totals
  in ``stats.json``, and the debug log.
* :mod:`~numba_vulkan.store.cli`: ``python -m numba_vulkan cache``.

``numba_vulkan.kernelcache`` is the public face of this package.
"""

from numba_vulkan.store.counters import flush_stats, reset_stats, stats
from numba_vulkan.store.disk import evict
from numba_vulkan.store.functions import (load_compiled, load_kernel, store_compiled,
                                          store_kernel)
from numba_vulkan.store.keys import (FunctionKey, function_key, kernel_key, key, module_key,
                                     normalise, source_stamp)
from numba_vulkan.store.kernels import CachedModule, load, load_module, store, store_module
from numba_vulkan.store.lookup import ENV_VAR, enabled
from numba_vulkan.store.toolchain import fingerprint

__all__ = ["module_key", "load_module", "store_module", "CachedModule", "function_key",
           "FunctionKey", "load_compiled", "store_compiled", "stats", "reset_stats",
           "flush_stats", "evict", "enabled", "fingerprint", "ENV_VAR", "normalise", "key",
           "load", "store", "source_stamp", "kernel_key", "load_kernel", "store_kernel"]
