"""The ``functions`` section: whole compiled kernels found by their Python code.

Kernels compiled with ``@nv.jit(cache=True)`` are stored whole, which skips
Numba's pipeline too (:meth:`numba_vulkan.api.dispatcher.VulkanDispatcher.compile`).
They are found by :func:`numba_vulkan.store.keys.function_key`: the
stamps of their source files, as with Numba's ``cache=True``, and the
content of their code and of the globals it reads. A kernel without a
source file (defined with ``exec`` or interactively) is not stored.

A module from this section is checked against the kernel's interface
before it is used (:mod:`numba_vulkan.spirv.modulecheck`), as a shipped
one is. :func:`load_kernel` and :func:`store_kernel` are the section's
entries as dicts, the API specified for ``numba_vulkan.kernelcache``.
"""

from numba_vulkan.base import config
from numba_vulkan.spirv import modulecheck
from numba_vulkan.spirv.compiled import CompiledKernel
from numba_vulkan.store import lookup


def load_kernel(name):
    """Read a cached kernel.

    Args:
        name (str): From :func:`~numba_vulkan.store.keys.kernel_key`.

    Returns:
        dict or None: As passed to :func:`store_kernel` (as JSON gives it
        back), or None if there is none or it cannot be read.
    """
    return lookup.lookup("functions", name)


def store_kernel(name, entry):
    """Write a cached kernel; failures to write are ignored.

    Args:
        name (str): From :func:`~numba_vulkan.store.keys.kernel_key`.
        entry (dict): str keys; values that are bytes or JSON-serialisable.
            The dispatcher stores ``spirv`` (bytes), ``llvm_ir`` (str),
            ``kernel`` (:meth:`CompiledKernel.to_metadata`) and ``validated``.

    Raises:
        ValueError: ``name`` is not an entry name.
        TypeError: A value is neither bytes nor JSON-serialisable.
    """
    lookup.put("functions", name, entry)


def _from_elsewhere(key):
    """What makes an entry from the server, another checkout's, this one's:
    its source files named by this machine's paths (in its list of them and
    where its ``raise`` statements report them); ValueError if it lists
    none, or not as many as the kernel has."""
    def adapt(entry):
        theirs = entry.get("sources")
        if (not isinstance(theirs, list) or len(theirs) != len(key.sources)
                or not all(isinstance(path, str) for path in theirs)):
            raise ValueError("no list of the kernel's source files")
        ours = dict(zip(theirs, key.sources))
        entry["sources"] = list(key.sources)
        exceptions = entry["kernel"]["metadata"].get("exceptions", {})
        for description in exceptions.values():
            if description.get("file") in ours:
                description["file"] = ours[description["file"]]
    return adapt


def load_compiled(key, sig, local_size, target, label):
    """The :class:`~numba_vulkan.spirv.compiled.CompiledKernel` stored under
    ``key`` (a :class:`~numba_vulkan.store.keys.FunctionKey`, or an entry
    name that the server has the entry under too) for exactly this
    signature, workgroup size and target, or None (also while
    ``NUMBA_VULKAN_DUMP`` is set).

    The disk is asked under the local name, the server under the remote one;
    an entry from the server is made this checkout's (:func:`_from_elsewhere`)
    and then gets every check one from the disk gets."""
    if key is None or config.dump_dir():
        return None

    def check(entry, shared):
        if not isinstance(entry["spirv"], bytes) or not isinstance(entry["kernel"], dict):
            raise ValueError("not a compiled kernel")
        kernel = CompiledKernel.from_metadata(entry["kernel"], entry["spirv"], entry["llvm_ir"])
        if (kernel.signature != tuple(sig) or kernel.local_size != tuple(local_size)
                or kernel.target != target):
            raise ValueError("entry of another signature, workgroup size or target")
        # The module must be the kernel the runtime will bind, whatever the file says.
        modulecheck.check_params(kernel.signature, entry["kernel"]["params"],
                                 kernel.push_size, target.narrowed,
                                 target.max_push_constants)
        modulecheck.check_kernel(kernel, kernel.capabilities, shared)
        if not shared and config.validate() and entry.get("validated") is not True:
            raise ValueError("not validated")
        entry["compiled"] = kernel

    if isinstance(key, str):
        entry = lookup.lookup("functions", key, label, check)
    else:
        portable = None if key.remote is None else (key.remote, _from_elsewhere(key))
        entry = lookup.lookup("functions", key.local, label, check, portable)
    return None if entry is None else entry["compiled"]


def store_compiled(key, kernel, validated):
    """Store a compiled kernel in the ``functions`` section.

    Args:
        key: From :func:`~numba_vulkan.store.keys.function_key` (the server,
            if any, gets the entry under the remote name), or an entry name;
            nothing is stored if None.
        kernel: The :class:`~numba_vulkan.spirv.compiled.CompiledKernel`.
        validated: Whether its module went through spirv-val.
    """
    if key is None:
        return
    entry = {"spirv": kernel.spirv, "llvm_ir": kernel.llvm_ir,
             "kernel": kernel.to_metadata(), "validated": bool(validated)}
    if isinstance(key, str):
        lookup.put("functions", key, entry)
        return
    if key.sources is not None:
        entry["sources"] = list(key.sources)
    lookup.put("functions", key.local, entry, key.remote)
