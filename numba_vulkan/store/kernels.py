"""The ``kernels`` section: modules found by the IR Numba lowered.

Turning a kernel's LLVM IR into SPIR-V (linking libclc, optimising,
restructuring, running the backend) is the larger part of compiling it.
The result depends only on that IR and on this package, so the compiler
(:mod:`numba_vulkan.compiler.stages`) stores it under
:func:`numba_vulkan.store.keys.module_key` and reuses it in later processes.
:func:`load` and :func:`store` are the section's entries as dicts, the API
specified for ``numba_vulkan.kernelcache``.
"""

from collections import namedtuple

from numba_vulkan.base import config
from numba_vulkan.spirv import modulecheck
from numba_vulkan.store import lookup

#: A module found in the ``kernels`` section.
CachedModule = namedtuple("CachedModule", "spirv llvm_ir capabilities loop_check",
                          defaults=(False,))


def load(name):
    """Read an entry.

    Args:
        name (str): Name of the entry, from :func:`~numba_vulkan.store.keys.key`.

    Returns:
        dict or None: The entry as passed to :func:`store` (as JSON gives it
        back: tuples become lists), or None if there is none, it is damaged
        or the cache is off.
    """
    return lookup.lookup("kernels", name)


def store(name, entry):
    """Write an entry; failures to write are ignored.

    Args:
        name (str): Name of the entry, from :func:`~numba_vulkan.store.keys.key`.
        entry (dict): str keys; values that are bytes or JSON-serialisable.
            Kernels store ``spirv`` (bytes), ``llvm_ir`` (str) and metadata.

    Raises:
        ValueError: ``name`` is not an entry name.
        TypeError: A value is neither bytes nor JSON-serialisable.
    """
    lookup.put("kernels", name, entry)


def _check_module(entry, make, shared):
    """Check an entry of the section; ValueError if it is not a module of
    this kernel. ``make`` turns it into the kernel the runtime will bind,
    whose interface the module must have."""
    capabilities = entry["capabilities"]
    if not isinstance(capabilities, list) or not all(isinstance(c, str) for c in capabilities):
        raise ValueError("malformed capabilities")
    if not isinstance(entry["spirv"], bytes) or not isinstance(entry["llvm_ir"], str):
        raise ValueError("no module")
    modulecheck.check_header(entry["spirv"])
    module = CachedModule(entry["spirv"], entry["llvm_ir"], capabilities,
                          entry.get("loop_check") is True)
    kernel = make(module) if make is not None else module
    if make is not None:
        modulecheck.check_kernel(kernel, capabilities, shared)
    elif shared and config.validate():
        raise ValueError("a module from a shared tier, with no kernel to check it against")
    if not shared and config.validate() and entry.get("validated") is not True:
        # Validation is on but this module never went through spirv-val.
        raise ValueError("not validated")
    entry["compiled"] = kernel


def load_module(name, label, make=None):
    """The module stored under ``name``, or None.

    Args:
        name: From :func:`~numba_vulkan.store.keys.module_key`, or None.
        label: What the debug log calls the kernel.
        make: Turns a :class:`CachedModule` into the
            :class:`~numba_vulkan.spirv.compiled.CompiledKernel` the runtime
            will bind (raising ValueError if it cannot); the module is checked
            against its interface and that kernel is returned. None returns
            the :class:`CachedModule` unchecked against any kernel, from
            the local disk only where spirv-val is on.

    None as well while ``NUMBA_VULKAN_DUMP`` is set: dumping asks for the
    code generator to run."""
    if name is None or config.dump_dir():
        return None
    entry = lookup.lookup("kernels", name, label,
                          lambda entry, shared: _check_module(entry, make, shared))
    return None if entry is None else entry["compiled"]


def store_module(name, module, label):
    """Store a module the compiler built (:mod:`numba_vulkan.compiler.stages`)."""
    if name is None:
        return
    store(name, {"spirv": module.spirv, "llvm_ir": module.llvm_ir,
                 "capabilities": list(module.capabilities), "kernel": label,
                 "loop_check": bool(module.loop_check),
                 "validated": config.validate()})
