"""The compile service: where every compiled kernel comes from.

The JIT (:mod:`numba_vulkan.api.dispatcher`), ufuncs (whose kernels are
dispatchers) and the AOT build (:mod:`numba_vulkan.aot.build.builder`) all
ask :func:`kernel` for a kernel, which looks in one order and takes the
first it finds:

1. memory: what this dispatcher found or compiled before;
2. the AOT directories (``docs/aot.md``);
3. the kernel cache (``docs/cache.md``): its ``functions/`` tier, which
   finds a ``cache=True`` kernel by its code without running Numba, then
   its ``kernels/`` tier, keyed on Numba's IR (after the compiler's
   ``numba`` stage);
4. the compiler (:mod:`numba_vulkan.compiler.stages`), whose module goes
   into both tiers.

The compiler itself reads and writes no cache. This module sits above the
compiler, the kernel cache and the AOT loader, which it joins, and below
the dispatcher and the AOT build, which use it.
"""

import time
from dataclasses import replace

from numba_vulkan import store
from numba_vulkan.api import numba_target
from numba_vulkan.base import config
from numba_vulkan.base import log


def memory_key(signature, threads, target, shared_bytes=0):
    """The key of a kernel in a dispatcher's memory: devices of one target
    description share it."""
    key = (signature, threads, target)
    return key + (shared_bytes,) if shared_bytes else key


def kernel(dispatcher, request, memory=None, typed=None, features=None, shipped=True):
    """The kernel for ``request``, from the first place that has it (see the
    module docs).

    Args:
        dispatcher: The kernel's :class:`~numba_vulkan.api.dispatcher.VulkanDispatcher`,
            whose code the AOT directories are searched by.
        request: The :class:`~numba_vulkan.compiler.stages.KernelRequest`.
        memory: The dispatcher's kernels by :func:`memory_key`, which the
            kernel found is added to; None for none.
        typed: Numba's results kept for other workgroup sizes
            (:func:`numba_vulkan.compiler.stages.lower`), or None.
        features: The launching device's features, for the AOT lookup.
        shipped: Whether to search the AOT directories: not for the AOT
            build, which makes them, nor for a module the driver refused.

    Returns:
        The :class:`~numba_vulkan.spirv.compiled.CompiledKernel`.

    Raises:
        CompilerError: The kernel cannot be compiled.
        AOTError: In strict AOT mode, no AOT directory has it.
    """
    key = memory_key(request.signature, request.threads, request.target,
                     request.shared_bytes)
    found = memory.get(key) if memory is not None else None
    if found is None and shipped:
        from numba_vulkan.aot.loader import lookup
        found = lookup.find(dispatcher, request.signature, request.threads, request.target,
                            features=features, shared_bytes=request.shared_bytes)
        if found is not None:
            log.event("aot", "hit", request.label, _launch_text(request))
    if found is None:
        found = _stored_or_compiled(request, typed)
    if memory is not None:
        memory[key] = found
    return found


def _stored_or_compiled(request, typed):
    """The kernel from the kernel cache's tiers, else compiled and stored."""
    from numba_vulkan.compiler import stages
    function_key = None
    # The functions/ tier's key does not tell sizes of dynamic shared
    # memory apart: it keeps kernels without any.
    if request.options.get("cache") and not request.shared_bytes:
        function_key = store.function_key(request.pyfunc, request.options, request.signature,
                                          request.threads, request.target)
        found = store.load_compiled(function_key, request.signature, request.threads,
                                    request.target, request.label)
        if found is not None:
            return found
    job = stages.lower(request, typed)
    # Numba is loaded now: numba.vectorize(target="vulkan") works from here on.
    numba_target.register_numba_target()
    module_key = store.module_key(job.sources, job.bindings, request.threads, request.target,
                                  request.options)
    found = store.load_module(module_key, request.label, lambda module: stages.artifact(
        replace(job, spirv=module.spirv, llvm_ir=module.llvm_ir, loop_check=module.loop_check)))
    if found is None:
        started = time.perf_counter()
        job = stages.generate(job)
        found = stages.artifact(job)
        log.event("compiler", "compiled", request.label,
                  f"{_launch_text(request)}; code generation "
                  f"{1000 * (time.perf_counter() - started):.0f} ms")
        store.store_module(module_key, store.CachedModule(
            found.spirv, found.llvm_ir, found.capabilities, job.loop_check), request.label)
    if function_key is not None:
        store.store_compiled(function_key, found, config.validate())
    return found


def _launch_text(request):
    threads = "x".join(str(t) for t in request.threads)
    return f"({', '.join(request.signature)}) threads {threads}"


def certain_to_compile(options):
    """Whether a first launch of a kernel with ``options`` will compile it:
    no AOT directory or ``functions/`` tier could hold it, so the compiler's
    set-up may start before the device opens."""
    from numba_vulkan.aot.loader import lookup
    return (not (options.get("cache") and config.cache_enabled())
            and not lookup.directories() and not config.aot_strict())

