"""Compiling one module of an AOT build, in whichever process runs it.

The build process, its worker processes and a cluster's workers all compile
a module with :func:`_compile` (timed by :func:`_timed_compile`), and check
what they made, or what a cache gave, against the interface every reader
checks (:func:`_check_built`).
"""

import os
import sys
import time
import warnings

try:
    import resource
except ImportError:  # not on Windows: no CPU times in a build's timings
    resource = None

from numba_vulkan.base import abi
from numba_vulkan.base import config
from numba_vulkan.spirv import modulecheck
from numba_vulkan.spirv import binary as spirv
from numba_vulkan.aot.loader import index
from numba_vulkan.spirv.compiled import check_errors, check_print
from numba_vulkan.base.errors import NarrowingWarning


def _compile(module_name, qualname, sig, threads, target_key, options, profile,
             shared_bytes=0):
    """Compile one module; runs in the build process or in a worker.

    Returns:
        ``(spirv, metadata)`` or ``(None, message)``.
    """
    from numba_vulkan.api import service
    from numba_vulkan.base.request import KernelRequest
    from numba_vulkan.base.target import TargetDescription
    target = TargetDescription.from_key(target_key)
    try:
        kernel = _import_kernel(module_name, qualname)
        request = KernelRequest(kernel.py_func, sig, threads, target, dict(options),
                                shared_bytes)
        # A shipped module is validated whatever the build's setting.
        with warnings.catch_warnings(), config.overriding(NUMBA_VULKAN_VALIDATE="1"):
            # A narrow profile asks for narrowing: no need to warn about it.
            warnings.simplefilter("ignore", NarrowingWarning)
            compiled = service.kernel(kernel, request, typed=_TYPED, shipped=False)
        binary = compiled.spirv
        meta = {"capabilities": compiled.capabilities,
                "params": [p.to_json() for p in compiled.params],
                "push_size": compiled.push_size, "abi_version": compiled.abi_version}
        if "print" in compiled.metadata:
            meta["print"] = compiled.metadata["print"]
        if "exceptions" in compiled.metadata:
            root = index.source_root(module_name, kernel.py_func.__code__.co_filename)
            meta["exceptions"] = index.portable_exceptions(compiled.metadata["exceptions"],
                                                           root)
        if "loop_limit" in compiled.metadata:
            meta["loop_limit"] = compiled.metadata["loop_limit"]
        if shared_bytes:
            meta["shared_bytes"] = shared_bytes
        _check_interface(binary, meta, sig, threads, target)
    except Exception as exc:  # any failure is this module's, reported with the others
        return None, f"{type(exc).__name__}: {exc}"
    capabilities = meta["capabilities"]
    lacking = [c for c, feature in (("Float64", "float64"), ("Int64", "int64"))
               if c in capabilities and not getattr(target, feature)]
    if lacking:
        return None, (f"the module uses {' and '.join(lacking)}, which profile {profile} "
                      "leaves out: the compiler did not narrow this kernel")
    return binary, meta


#: Numba's results of this process's compiles of one build (``stages.lower``'s
#: ``typed``): another workgroup size of a kernel and signature takes its IR.
_TYPED = {}


def _cpu():
    """CPU seconds of this process, and of the children it waited for."""
    if resource is None:
        return time.process_time(), 0.0
    own = resource.getrusage(resource.RUSAGE_SELF)
    tools = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, tools.ru_utime + tools.ru_stime


def _timed_compiles(argument_lists):
    """:func:`_timed_compile` of each arguments in turn: a worker's share of
    one kernel and signature (:func:`_chunks`)."""
    return [_timed_compile(*arguments) for arguments in argument_lists]


def _timed_compile(*arguments):
    """:func:`_compile`, and ``(pid, start, wall seconds, own and tools' CPU
    seconds)`` of it."""
    start, (own, tools) = time.perf_counter(), _cpu()
    value = _compile(*arguments)
    own_after, tools_after = _cpu()
    return value, (os.getpid(), start, time.perf_counter() - start, own_after - own,
                   tools_after - tools)


def _check_built(binary, meta, sig, threads, target, target_env):
    """Raise unless ``binary`` is a valid module with the interface ``meta``
    describes, for these argument types, threads and target."""
    from numba_vulkan.spirv import tools as validate
    validate.validate(binary, target_env)
    _check_interface(binary, meta, sig, threads, target)


def _check_interface(binary, meta, sig, threads, target):
    """Raise unless ``binary`` has the interface ``meta`` describes, for these
    argument types, threads and target: what every reader will check the
    module against (index.check_module)."""
    modulecheck.check_params(tuple(sig), meta["params"], meta["push_size"], target.narrowed,
                             target.max_push_constants)
    params = abi.params_from_json(meta["params"])
    modulecheck.check_interface(binary, params, meta["push_size"], threads, target.vulkan)
    check_print(params, meta.get("print"))
    check_errors(params, meta, target)
    if meta["capabilities"] != spirv.capabilities(binary):
        raise ValueError("capabilities differ from the module's")


def _worker_init(paths, settings, backends=(), counter=None):
    # A spawned worker does not inherit the build's overridden settings.
    config.override(settings)
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)
    if backends:
        # A forked worker takes the next of the backend children started for them.
        from numba_vulkan.codegen import backend
        with counter.get_lock():
            k = counter.value
            counter.value += 1
        backend.adopt(backends, k)


def _import_kernel(module_name, qualname):
    import importlib
    kernel = importlib.import_module(module_name)
    for part in qualname.split("."):
        kernel = getattr(kernel, part)
    return kernel
