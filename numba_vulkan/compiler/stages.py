"""The compiler as one ordered table of stages, from a Python function to SPIR-V.

:data:`STAGES` lists every step a kernel takes, by name, from the Python
function, its argument types and a :class:`~numba_vulkan.base.target.TargetDescription`
to a validated SPIR-V module. :func:`compile` runs the table; the JIT
(:mod:`numba_vulkan.api.dispatcher`) and the AOT build (:mod:`numba_vulkan.aot.build.builder`)
both call it, so both make the same module from the same inputs.

A stage reads what earlier stages left in a :class:`Compilation` and leaves
its result there. Two stages may send the compilation back to an earlier
one with a change: a kernel whose array takes both a native float atomic add
and a compare-and-swap loop is lowered again with compare-and-swap loops
only, and a module the backend left with an unmerged switch is structured
again with every loop exit through a flag.

Every failure is a :class:`~numba_vulkan.base.errors.CompilerError` that names the
kernel, its source line and the stage; an exception no stage expected is one
too, with the original chained. With ``NUMBA_VULKAN_DUMP`` set, the stages
named in ``NUMBA_VULKAN_DUMP_STAGES`` write their results there (see
``docs/settings.md``).
"""

import contextlib
import copy
import os
import threading
import warnings
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from numba_vulkan.base import abi
from numba_vulkan.base import config
from numba_vulkan import store as kernelcache
from numba_vulkan.spirv import binary as spirv
from numba_vulkan.spirv.compiled import CompiledKernel
from numba_vulkan.base.errors import CompilerError, NarrowingWarning, VulkanError


class Stage(NamedTuple):
    """One step of the compiler.

    Attributes:
        name: What dumps and errors call it.
        run: ``run(compilation)``: does the step and returns its result (IR
            text, an LLVM module or a SPIR-V binary, for a dump), or
            :data:`FINISHED`.
        doc: One line on what it does, for ``docs/design.md``.
        llvm: Whether it runs LLVM in this process (and so holds the lock).
    """

    name: str
    run: Callable
    doc: str
    llvm: bool = False


#: LLVM's context and pass managers are not safe to use from two threads.
_llvm_lock = threading.Lock()

#: What a stage returns when the compilation is complete without the rest.
FINISHED = object()


@dataclass
class Compilation:
    """One kernel on its way through :data:`STAGES`.

    Attributes:
        pyfunc: The kernel's Python function.
        name: Its qualified name.
        signature: Argument types in text form (:mod:`numba_vulkan.base.signature`).
        threads: Workgroup size ``(x, y, z)``.
        requested: The target the caller asked for.
        target: The target the stages compile for: ``requested``, or
            ``requested`` without native float atomics (see the module docs).
        options: The kernel's ``nv.jit`` options.
        breaks: Whether loops with few exits may leave by breaks.
        kernel_ir: The :class:`~numba_vulkan.frontend.compile.KernelIR`.
        sources: IR text of Numba's modules, the entry point's last.
        bindings: Storage dtype of each descriptor binding.
        cache_key: The kernel cache name of the module, or None.
        machine: LLVM's target machine for ``target``, made on first use.
        module: The LLVM module (``llvmlite.binding.ModuleRef``) between
            the stages that link and optimise.
        fastmath: The fast-math flags of the kernel's own float operations
            (``fastmath``), found at link.
        model: The IR model (:class:`numba_vulkan.llvmir.ir.Module`) between
            the stages that rewrite it; they change it in place.
        llvm_ir: The IR handed to the backend.
        spirv: The SPIR-V module.
        capabilities: The SPIR-V capabilities it declares.
        status: The binding of the kernel's status buffer: its own, or on a
            target with a loop limit the one after the arrays.
        loop_check: Whether the module reports reaching the target's loop
            limit there (:mod:`numba_vulkan.codegen.looplimit`).
        shared_bytes: Bytes of dynamic shared memory it is compiled for.
        typed: Where the ``numba`` stage keeps its results across compiles
            (:func:`compile`'s ``typed``), or None.
    """

    pyfunc: object
    name: str
    signature: tuple
    threads: tuple
    requested: object
    target: object
    options: dict = field(default_factory=dict)
    breaks: bool = True
    kernel_ir: object = None
    sources: list = None
    bindings: list = None
    cache_key: str = None
    machine: object = None
    module: object = None
    fastmath: frozenset = frozenset()
    model: object = None
    llvm_ir: str = None
    spirv: bytes = None
    capabilities: list = None
    status: int = None
    loop_check: bool = False
    shared_bytes: int = 0
    typed: dict = None

    @property
    def label(self):
        """The kernel and its signature, as messages name them."""
        return f"{self.name}({', '.join(self.signature)})"


class _Rerun(Exception):
    """Go back to ``stage`` with some attributes of the compilation changed."""

    def __init__(self, stage, **changes):
        super().__init__(stage)
        self.stage = stage
        self.changes = changes


# Preparing ahead ---------------------------------------------------------

_prepare_lock = threading.Lock()
#: The thread started by :func:`prepare_in_background` and what it raised.
_preparing = None
_prepare_errors = []


def prepare_in_background():
    """Start, on another thread, what a process's first compile does before
    it reads the kernel: the backend child, Numba's import, the Vulkan
    target's typing and target contexts, the code generator's modules and
    LLVM's targets. Returns at once; does nothing the second time.

    The dispatcher calls this before it opens the device for a first
    launch that will compile: the driver opens a device mostly outside the
    interpreter (loading its libraries, creating the instance), so the two
    overlap. The ``numba`` stage waits for it; the first compile after it
    raises what it raised.
    """
    global _preparing
    with _prepare_lock:
        if _preparing is None:
            _preparing = threading.Thread(target=_prepare, name="numba_vulkan-prepare")
            _preparing.start()


def _prepare():
    try:
        from numba_vulkan.codegen import backend
        backend.start()
        from numba_vulkan.frontend.compile import contexts
        contexts()
        from numba_vulkan.codegen import optimize, pipeline  # noqa: F401
        with _llvm_lock:
            optimize.initialise()
    except BaseException as exc:  # the compile waiting for it raises it
        _prepare_errors.append(exc)


def _wait_for_preparation():
    thread = _preparing
    if thread is not None and thread is not threading.current_thread():
        thread.join()
        with _prepare_lock:
            error = _prepare_errors.pop() if _prepare_errors else None
        if error is not None:
            # Once, as the compile that did the work itself would have.
            raise error


# Stages ------------------------------------------------------------------


def _numba(job):
    _wait_for_preparation()
    from numba_vulkan.codegen import backend
    # Its start-up (a Python process loading LLVM) overlaps Numba's work.
    backend.start()
    from numba_vulkan.frontend.compile import compile_kernel, numba_types
    key = _typing_key(job)
    kernel_ir = None if key is None else job.typed.get(key)
    if kernel_ir is None:
        kernel_ir = compile_kernel(job.pyfunc, numba_types(job.signature), job.target.narrowed,
                                   job.options, job.target.float32_atomic_add,
                                   job.target.max_push_constants, job.shared_bytes)
        if key is not None:
            job.typed[key] = kernel_ir
            while len(job.typed) > _TYPED_KEPT:
                del job.typed[next(iter(job.typed))]
    _warn_if_narrowed(job, kernel_ir)
    job.kernel_ir = kernel_ir
    job.sources = kernel_ir.modules
    job.bindings = abi.bindings(kernel_ir.params)
    job.status = next((p.binding for p in kernel_ir.params if p.kind == "status"),
                      len(job.bindings))
    return "\n".join(kernel_ir.modules)


#: Results of the ``numba`` stage a ``typed`` dictionary keeps, the latest.
_TYPED_KEPT = 8


def _typing_key(job):
    """Everything Numba's result depends on, the workgroup size not among it:
    the key of ``job.typed``, or None to compile afresh."""
    if job.typed is None:
        return None
    target = job.target
    key = (job.pyfunc, job.signature, tuple(sorted(target.narrowed)),
           target.float32_atomic_add, target.max_push_constants,
           tuple(sorted(job.options.items())), job.shared_bytes)
    try:
        hash(key)
    except TypeError:  # an option of an unhashable value
        return None
    return key


def _warn_if_narrowed(job, kernel_ir):
    """Warn that a kernel computes in 32 bits what it declares as 64."""
    if not job.target.narrowed:
        return
    narrowed = sorted({p.dtype for p in kernel_ir.params if p.storage != p.dtype})
    if "float64" in job.target.narrowed and any("double" in text for text in kernel_ir.modules):
        narrowed = sorted(set(narrowed) | {"float64"})
    if narrowed:
        warnings.warn(f"{job.label}: {', '.join(narrowed)} narrowed to 32 bits "
                      "for a device without 64-bit support", NarrowingWarning, stacklevel=2)


def _lookup(job):
    # Numba ran; everything after it is skipped on a hit.
    job.cache_key = kernelcache.module_key(job.sources, job.bindings, job.threads, job.target,
                                           job.options)
    cached = kernelcache.load_module(job.cache_key, job.label)
    if cached is None:
        return None
    job.spirv, job.llvm_ir = cached.spirv, cached.llvm_ir
    job.capabilities = list(cached.capabilities)
    job.loop_check = cached.loop_check
    return FINISHED


def _codegen(name):
    """The stage function ``name`` of :mod:`numba_vulkan.codegen.pipeline`.

    Imported on first use: it loads LLVM's targets and libclc, which a
    kernel found in the cache does without.
    """
    def run(job):
        from numba_vulkan.codegen import pipeline
        return getattr(pipeline, name)(job)
    run.__name__ = name
    return run


def _logical(job):
    from numba_vulkan.codegen.logical.atomics import MixedFloatAtomics
    try:
        return _codegen("logical_addressing")(job)
    except MixedFloatAtomics:
        if not job.target.float32_atomic_add:
            raise
        # One buffer cannot be typed both ways: compare-and-swap loops for
        # every float atomic instead.
        raise _Rerun("numba", target=job.target.with_features(float32_atomic_add=False))


def _repair(job):
    binary = _codegen("repair")(job)
    if job.breaks and spirv.unmerged_switch(binary):
        # The backend's own structurizer mishandled a loop left by breaks;
        # every loop leaving through a flag in its latch avoids that.
        raise _Rerun("structurize", breaks=False)
    return binary


def _store(job):
    job.capabilities = spirv.capabilities(job.spirv)
    kernelcache.store_module(job.cache_key, kernelcache.CachedModule(
        job.spirv, job.llvm_ir, job.capabilities, job.loop_check), job.label)
    return None


#: The compiler, in order.
STAGES = (
    Stage("numba", _numba, "Numba types and lowers the kernel for the `vulkan` target, with "
          "an entry point that reads the arguments through marker calls"),
    Stage("cache", _lookup, "the kernel cache's `kernels/` tier, keyed on Numba's IR: a hit "
          "ends the compilation here"),
    Stage("link", _codegen("link"), "Numba's modules are linked into one, the 64-bit types "
          "the target lacks narrowed and the workgroup size made a constant, then linked with "
          "the libclc functions they call", llvm=True),
    Stage("optimize", _codegen("optimise"), "everything is inlined into the entry point and "
          "optimised, with no C library, so that no loop becomes an `llvm.memset` or "
          "`llvm.memcpy` of a whole array; on a target without a loop limit, loops of run-time "
          "trip counts are unrolled too", llvm=True),
    Stage("logical", _logical, "logical addressing: every load and store goes through a "
          "buffer handle and an element index instead of a byte address", llvm=True),
    Stage("unroll", _codegen("unroll_hints"), "on a target with a loop limit (lavapipe's), "
          "innermost loops left only from their latch are marked to be "
          "unrolled 16 times, fewer if their body is large"),
    Stage("reoptimize", _codegen("reoptimise"), "optimised again, with what the rewrite "
          "exposed", llvm=True),
    Stage("carry", _codegen("carry_values"), "an operation in a loop that the previous trip "
          "computed already on the values this trip reads (the test of a rotated `while` "
          "loop, `zr * zr` again at the top) is taken from that trip through a phi", llvm=True),
    Stage("structurize", _codegen("structure"), "structured control flow: one merge block per "
          "loop and per branch; on a target with a loop limit, loop trips are counted and "
          "reaching the limit is reported", llvm=True),
    Stage("int32", _codegen("integers"), "64-bit arithmetic that provably gives the same "
          "result in 32 bits is done in 32 bits", llvm=True),
    Stage("markers", _codegen("markers"), "the marker calls that read push constants, buffer "
          "handles and the workgroup size are lowered", llvm=True),
    Stage("narrow", _codegen("narrowing"), "what is still 64-bit and the target lacks is "
          "made 32-bit; on a target without float16 arithmetic, float16 is computed in "
          "float32 and each result rounded to float16; every rounding to float16 is done in "
          "integer arithmetic", llvm=True),
    Stage("workarounds", _codegen("driver_workarounds"), "steering around known driver "
          "bugs", llvm=True),
    Stage("legalize", _codegen("legalise"), "multiply-adds fused where the kernel allows "
          "contraction and the target's fma is fused; rewrites into forms LLVM's SPIR-V backend "
          "can express (fma emulated unless the target's is fused), float32 division and square "
          "roots made correctly rounded in float64 (unless `fastmath` allows reciprocals or "
          "approximate functions), integer operations on constants folded", llvm=True),
    Stage("barriers", _codegen("barrier_semantics"), "workgroup barriers that cannot need to "
          "order storage-buffer memory order workgroup memory only; the result is the IR "
          "handed to the backend"),
    Stage("emit", _codegen("emit"), "LLVM's SPIR-V backend, in a child process"),
    Stage("repair", _repair, "placeholder calls become subgroup instructions, debug noise is "
          "stripped, the backend's known mistakes fixed and the 16-bit storage capability "
          "declared; a module with an unmerged switch goes back to `structurize` without "
          "breaks"),
    Stage("exact", _codegen("exact_floats"), "float operations kept exactly as written "
          "(NoContraction) and NaNs, infinities and signed zeros preserved, unless `fastmath` "
          "gives that up; float16 arithmetic rounded to nearest "
          "(RoundingModeRTE) where the target can ask for it"),
    Stage("validate", _codegen("check"), "spirv-val, unless `NUMBA_VULKAN_VALIDATE=0`"),
    Stage("store", _store, "the module is stored in the kernel cache"),
)


def names():
    """The names of :data:`STAGES`, in order."""
    return [stage.name for stage in STAGES]


# Running the table -------------------------------------------------------


def _failure(job, stage, exc):
    """The CompilerError for ``exc`` raised in ``stage``."""
    from numba_vulkan.frontend import diagnostics
    where = "{}: {}:{}".format(job.name, *diagnostics.definition(job.pyfunc))
    if isinstance(exc, CompilerError):
        if exc.kernel is not None:
            if getattr(exc, "stage", None) is None:
                exc.stage = stage
            return exc
        # Raised below the compiler, which does not know the kernel.
        message = f"cannot compile kernel {where}: stage {stage}: {exc}"
        try:
            error = type(exc)(message, kernel=job.name)
        except TypeError:
            error = CompilerError(message, kernel=job.name)
        error.stage = stage
        return error.with_traceback(exc.__traceback__)
    if isinstance(exc, VulkanError):
        error = CompilerError(f"cannot compile kernel {where}: stage {stage}: {exc}",
                              kernel=job.name)
    else:
        # Numba's lowering knows the line of the instruction it failed on.
        location = (diagnostics.traceback_location(exc.__traceback__)
                    or diagnostics.definition(job.pyfunc))
        error = CompilerError(diagnostics.message(
            job.name, location, f"internal error in stage {stage}: {type(exc).__name__}: "
            f"{exc}"), kernel=job.name)
    error.stage = stage
    return error


class _Dumper:
    """Writes the results of the stages that ``NUMBA_VULKAN_DUMP_STAGES`` names."""

    def __init__(self, job):
        self.directory = config.dump_dir()
        self.stem = None
        if not self.directory:
            self.wanted = frozenset()
            return
        requested = config.dump_stages()
        known = names()
        if "all" in requested:
            requested = frozenset(known)
        unknown = sorted(requested - set(known))
        if unknown:
            raise ValueError(f"NUMBA_VULKAN_DUMP_STAGES names unknown stages "
                             f"{', '.join(unknown)}; the stages are {', '.join(known)}")
        self.wanted = requested
        os.makedirs(self.directory, exist_ok=True)
        self.stem = os.path.join(self.directory,
                                 job.name.replace("<", "_").replace(">", "_"))

    def __call__(self, name, result):
        if self.stem is None or result is None:
            return
        if not isinstance(result, (str, bytes)):
            # An LLVM module: printed only to be written.
            result = str(result)
        if name in self.wanted:
            self._write(f"{self.stem}.{name}", result)
        # The IR handed to the backend and the final module, always.
        if name in ("legalize", "exact"):
            self._write(self.stem, result)

    @staticmethod
    def _write(stem, result):
        if isinstance(result, bytes):
            with open(stem + ".spv", "wb") as f:
                f.write(result)
        else:
            with open(stem + ".ll", "w") as f:
                f.write(result)


def run(job, stages=None):
    """Run ``job`` through ``stages`` (:data:`STAGES` by default).

    Returns:
        The finished :class:`Compilation` (another object than ``job`` when
        a stage sent it back).

    Raises:
        CompilerError: Any stage failed; the message names the kernel, its
            source line and the stage.
    """
    stages = STAGES if stages is None else stages
    order = [stage.name for stage in stages]
    dump = _Dumper(job)
    before, taken = {}, set()
    k = 0
    while k < len(stages):
        stage = stages[k]
        before[stage.name] = copy.copy(job)
        try:
            with _llvm_lock if stage.llvm else contextlib.nullcontext():
                result = stage.run(job)
        except _Rerun as again:
            key = (again.stage, tuple(sorted(again.changes.items())))
            if key in taken or again.stage not in before:
                raise _failure(job, stage.name, RuntimeError(
                    f"stage {stage.name} sent the compilation back to {again.stage} twice"))
            taken.add(key)
            job = copy.copy(before[again.stage])
            for name, value in again.changes.items():
                setattr(job, name, value)
            k = order.index(again.stage)
            continue
        except Exception as exc:
            error = _failure(job, stage.name, exc)
            if error is exc:
                raise
            # A CompilerError of a pass already says what went wrong: its
            # traceback is kept, not a second one. Anything else is chained.
            raise error from (None if isinstance(exc, CompilerError) else exc)
        if result is FINISHED:
            break
        dump(stage.name, result)
        k += 1
    return job


def compile(pyfunc, signature, threads, target, options=None, name=None, shared_bytes=0,
            typed=None):
    """Compile a kernel for one signature, workgroup size and target.

    Args:
        pyfunc: The kernel's Python function.
        signature: Argument types in text form (:mod:`numba_vulkan.base.signature`).
        threads: Workgroup size ``(x, y, z)``.
        target: The :class:`~numba_vulkan.base.target.TargetDescription`.
        options: The kernel's ``nv.jit`` options.
        name: The kernel's name in messages; its qualified name by default.
        shared_bytes: Bytes of dynamic shared memory (``shared.array(0, dtype)``
            views them); the kernel cache tells sizes apart by the IR, which
            holds the size.
        typed: A dictionary in which the ``numba`` stage keeps its latest
            results, to take one for another workgroup size of the same
            kernel, signature, options and target instead of typing and
            lowering the kernel again: Numba's result does not depend on
            the workgroup size. For a caller whose functions and their
            globals do not change meanwhile (an AOT build); None compiles
            afresh.

    Returns:
        The :class:`~numba_vulkan.spirv.compiled.CompiledKernel`.

    Raises:
        CompilerError: The kernel cannot be compiled.
    """
    job = Compilation(pyfunc, name or pyfunc.__qualname__, tuple(signature), tuple(threads),
                      target, target, dict(options or {}), shared_bytes=shared_bytes,
                      typed=typed)
    job = run(job)
    kernel_ir = job.kernel_ir
    metadata = {"exceptions": kernel_ir.exceptions} if kernel_ir.exceptions else {}
    if kernel_ir.prints:
        metadata["print"] = kernel_ir.prints
    if shared_bytes:
        metadata["shared_bytes"] = shared_bytes
    capabilities = job.capabilities or spirv.capabilities(job.spirv)
    params = kernel_ir.params
    if job.loop_check:
        metadata["loop_limit"] = job.target.loop_limit
        if not any(p.kind == "status" for p in params):
            params += (abi.Param(abi.STATUS_PARAM, "status", "uint32", "uint32", 1, "C",
                                 job.status, 0),)
    return CompiledKernel(job.name, job.signature, job.threads, target, job.spirv,
                          job.llvm_ir, capabilities, params, kernel_ir.push_size,
                          metadata=metadata)
