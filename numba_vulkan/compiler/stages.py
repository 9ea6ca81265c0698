"""The compiler as one ordered table of stages, from a Python function to SPIR-V.

:data:`STAGES` lists every step a kernel takes, by name, from a
:class:`~numba_vulkan.base.request.KernelRequest` (the Python function, its
argument types, workgroup size,
:class:`~numba_vulkan.base.target.TargetDescription` and options) to the
validated SPIR-V module of a
:class:`~numba_vulkan.spirv.compiled.CompiledKernel`. The table is the whole
compiler and does no I/O of its own: the compile service
(:mod:`numba_vulkan.api.service`), which the JIT, ufuncs and the AOT build
all go through, looks for a kernel in memory, AOT directories and the
kernel cache before it runs the table, so a JIT module and an AOT module of
one kernel are the same bytes. The service runs the ``numba`` stage alone
first (:func:`lower`), since the cache's ``kernels/`` tier is keyed on
Numba's IR, then the rest (:func:`generate`); :func:`compile` runs both.

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

from __future__ import annotations

import contextlib
import copy
import os
import threading
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, NamedTuple, Optional

from numba_vulkan.base import abi
from numba_vulkan.base import config
from numba_vulkan.base.request import KernelRequest
from numba_vulkan.base.target import TargetDescription
from numba_vulkan.spirv import binary as spirv
from numba_vulkan.spirv.compiled import CompiledKernel
from numba_vulkan.base.errors import (CompilerError, ConfigError, NarrowingWarning, UnsupportedError,
                                      VulkanError)

if TYPE_CHECKING:
    from numba_vulkan.frontend.compile import KernelIR


class Stage(NamedTuple):
    """One step of the compiler.

    Attributes:
        name: What dumps and errors call it.
        run: ``run(compilation)``: does the step and returns its result (IR
            text, an LLVM module or a SPIR-V binary, for a dump).
        doc: One line on what it does, for ``docs/design.md``.
        llvm: Whether it runs LLVM in this process (and so holds the lock).
    """

    name: str
    run: Callable
    doc: str
    llvm: bool = False


#: LLVM's context and pass managers are not safe to use from two threads.
_llvm_lock = threading.Lock()


@dataclass
class Compilation:
    """One kernel on its way through :data:`STAGES`.

    Attributes:
        request: What is compiled.
        target: The target the stages compile for: the request's, or without
            native float atomics (see the module docs).
        typed: Where the ``numba`` stage keeps its results across compiles
            (:func:`compile`'s ``typed``), or None.
        breaks: Whether loops with few exits may leave by breaks.
        fastmath: The fast-math flags the kernel's float operations may
            use: its ``fastmath`` option's; without that option, those its
            IR carries (from device functions given one), found at link.
        kernel_ir: Numba's result, from the ``numba`` stage.
        bindings: Storage dtype of each descriptor binding.
        status: The binding of the kernel's status buffer: its own, or on a
            target with a loop limit the one after the arrays.
        machine: LLVM's target machine for ``target``, made on first use.
        module: The LLVM module (``llvmlite.binding.ModuleRef``) between
            the stages that link and optimise.
        model: The IR model (:class:`numba_vulkan.llvmir.ir.Module`) between
            the stages that rewrite it; they change it in place.
        llvm_ir: The IR handed to the backend.
        spirv: The SPIR-V module.
        loop_check: Whether the module reports reaching the target's loop
            limit there (:mod:`numba_vulkan.codegen.looplimit`).
    """

    request: KernelRequest
    target: Optional[TargetDescription] = None
    typed: Optional[dict] = None
    breaks: bool = True
    fastmath: Optional[frozenset] = None
    kernel_ir: Optional[KernelIR] = None
    bindings: Optional[list] = None
    status: Optional[int] = None
    machine: object = None
    module: object = None
    model: object = None
    llvm_ir: Optional[str] = None
    spirv: Optional[bytes] = None
    loop_check: bool = False

    def __post_init__(self):
        if self.target is None:
            self.target = self.request.target
        if self.fastmath is None:
            self.fastmath = self.request.options.fastmath_flags

    # What the stages read of the request, by the names they use.
    pyfunc = property(lambda self: self.request.pyfunc)
    name = property(lambda self: self.request.name)
    signature = property(lambda self: self.request.signature)
    threads = property(lambda self: self.request.threads)
    options = property(lambda self: self.request.options)
    shared_bytes = property(lambda self: self.request.shared_bytes)
    label = property(lambda self: self.request.label)

    @property
    def sources(self):
        """IR text of Numba's modules, the entry point's last."""
        return self.kernel_ir.modules


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
    return (job.pyfunc, job.signature, tuple(sorted(target.narrowed)),
            target.float32_atomic_add, target.max_push_constants, job.options,
            job.shared_bytes)


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


def _drop_debug(job):
    from numba_vulkan.codegen import debuginfo
    job.spirv = debuginfo.strip(job.spirv)
    return job.spirv


#: The compiler, in order.
STAGES = (
    Stage("numba", _numba, "Numba types and lowers the kernel for the `vulkan` target, with "
          "an entry point that reads the arguments through marker calls"),
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
    Stage("debuginfo", _drop_debug, "debug instructions (names, sources, lines) are "
          "dropped: they hold Numba's per-process names, which would make two compiles of "
          "one kernel differ"),
    Stage("validate", _codegen("check"), "spirv-val, unless `NUMBA_VULKAN_VALIDATE=0`"),
)


def names():
    """The names of :data:`STAGES`, in order."""
    return [stage.name for stage in STAGES]


# Running the table -------------------------------------------------------


def _failure(job, stage, exc):
    """The CompilerError for ``exc`` raised in ``stage``."""
    from numba_vulkan.frontend import diagnostics
    if isinstance(exc, ConfigError):
        # A setting the user wrote wrong, not this kernel: its message names it.
        return exc
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
    elif isinstance(exc, ImportError) and "scipy" in str(exc):
        # Numba's np.linalg calls SciPy's LAPACK on the host, which it imports
        # while lowering the call.
        location = (diagnostics.traceback_location(exc.__traceback__)
                    or diagnostics.definition(job.pyfunc))
        error = UnsupportedError(diagnostics.message(
            job.name, location, "NumPy's linear algebra (np.linalg, np.dot of matrices) is "
            "not supported in kernels: it calls LAPACK on the host; write the loop "
            "(np.linalg.norm(v): math.sqrt of the sum of v[i] * v[i])"), kernel=job.name)
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
        if name in ("barriers", "debuginfo"):
            self._write(self.stem, result)

    @staticmethod
    def _write(stem, result):
        if isinstance(result, bytes):
            with open(stem + ".spv", "wb") as f:
                f.write(result)
        else:
            with open(stem + ".ll", "w") as f:
                f.write(result)


def run(job, first=None, last=None, stages=None):
    """Run ``job`` through ``stages`` (:data:`STAGES` by default), from the
    stage named ``first`` to the one named ``last`` (by default from the
    first to the last).

    Returns:
        The :class:`Compilation` after ``last`` (another object than ``job``
        when a stage sent it back).

    Raises:
        CompilerError: Any stage failed; the message names the kernel, its
            source line and the stage.
    """
    stages = STAGES if stages is None else stages
    order = [stage.name for stage in stages]
    k = 0 if first is None else order.index(first)
    end = len(stages) if last is None else order.index(last) + 1
    dump = _Dumper(job)
    # A stage may send the compilation back to Numba, which ran in an
    # earlier call (:func:`lower`): it starts again from the request.
    before = ({FRONTEND: Compilation(job.request, typed=job.typed)}
              if FRONTEND in order[:k] else {})
    taken = set()
    while k < end:
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
        dump(stage.name, result)
        k += 1
    return job


#: The stage whose result keys the kernel cache's ``kernels/`` tier.
FRONTEND = "numba"


def lower(request, typed=None):
    """The :class:`Compilation` of ``request`` after the ``numba`` stage:
    what the kernel cache's ``kernels/`` tier is keyed on.

    Args:
        request: The :class:`~numba_vulkan.base.request.KernelRequest`.
        typed: A dictionary in which the ``numba`` stage keeps its latest
            results, to take one for another workgroup size of the same
            kernel, signature, options and target instead of typing and
            lowering the kernel again: Numba's result does not depend on
            the workgroup size. For a caller whose functions and their
            globals do not change meanwhile (a dispatcher, an AOT build);
            None lowers afresh.
    """
    return run(Compilation(request, typed=typed), last=FRONTEND)


def generate(job):
    """``job`` (from :func:`lower`) through the rest of the table, to its
    validated SPIR-V module."""
    return run(job, first=STAGES[[s.name for s in STAGES].index(FRONTEND) + 1].name)


def artifact(job):
    """The :class:`~numba_vulkan.spirv.compiled.CompiledKernel` of a
    compilation that has its SPIR-V module: generated, or (the compile
    service's cache hit) set on the result of :func:`lower`."""
    kernel_ir = job.kernel_ir
    metadata = {"exceptions": kernel_ir.exceptions} if kernel_ir.exceptions else {}
    if kernel_ir.prints:
        metadata["print"] = kernel_ir.prints
    if job.shared_bytes:
        metadata["shared_bytes"] = job.shared_bytes
    params = kernel_ir.params
    if job.loop_check:
        metadata["loop_limit"] = job.target.loop_limit
        if not any(p.kind == "status" for p in params):
            params += (abi.Param(abi.STATUS_PARAM, "status", "uint32", "uint32", 1, "C",
                                 job.status, 0),)
    return CompiledKernel(job.name, job.signature, job.threads, job.request.target, job.spirv,
                          job.llvm_ir, spirv.capabilities(job.spirv), params,
                          kernel_ir.push_size, metadata=metadata)


def compile(request, typed=None):
    """Compile a kernel: the whole table, with no cache.

    Args:
        request: The :class:`~numba_vulkan.base.request.KernelRequest`.
        typed: As for :func:`lower`.

    Returns:
        The :class:`~numba_vulkan.spirv.compiled.CompiledKernel`.

    Raises:
        CompilerError: The kernel cannot be compiled.
    """
    return artifact(run(Compilation(request, typed=typed)))
