"""An AOT build's use of the remote cache: built modules taken from it, and
put into it, keyed by build key."""

from numba_vulkan.base import abi
from numba_vulkan.base import config
from numba_vulkan.aot.build.worker import _check_built
from numba_vulkan.store import lookup as store_lookup
from numba_vulkan.base.errors import VulkanError


#: What a built module's metadata has only for some kernels.
_OPTIONAL_META = frozenset(("print", "shared_bytes", "exceptions", "loop_limit"))


#: The remote cache's namespace of built modules, keyed by build key.
REMOTE_TIER = "aot"


#: How ``done`` marks a module taken from the remote cache.
_REMOTE = "remote"


def _from_remote(pending, done):
    """Take what the remote cache has of ``pending`` into ``done``; the rest."""
    if config.remote_cache() is None:
        return pending
    rest = []
    for task, build_key in pending:
        target = task.profile.target()

        def check(entry, shared, task=task, target=target):
            meta = entry["meta"]
            if not isinstance(entry["spirv"], bytes) or not isinstance(meta, dict):
                raise ValueError("not a built module")
            if set(meta) - _OPTIONAL_META != {"capabilities", "params", "push_size",
                                              "abi_version"}:
                raise ValueError("not a built module's metadata")
            if meta.get("shared_bytes", 0) != task.shared_bytes:
                raise ValueError("a module of another dynamic shared memory size")
            if meta["abi_version"] != abi.ABI_VERSION:
                raise ValueError("a module of another ABI")
            try:
                _check_built(entry["spirv"], meta, task.signature, task.threads, target,
                             task.profile.target_env)
            except VulkanError as exc:
                raise ValueError(str(exc)) from None

        entry = store_lookup.lookup(REMOTE_TIER, build_key, check=check,
                                    tiers=(store_lookup.REMOTE,))
        if entry is None:
            rest.append((task, build_key))
        else:
            done[task] = (entry["spirv"], entry["meta"], _REMOTE)
    return rest


def _to_remote(build_key, data, meta):
    store_lookup.put(REMOTE_TIER, build_key, {"spirv": data, "meta": meta},
                     tiers=(store_lookup.REMOTE,))
