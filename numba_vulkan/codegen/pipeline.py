"""The code generator's stages, from a kernel's LLVM IR modules to a validated SPIR-V module.

Each function here is one stage of the compiler's table
(:data:`numba_vulkan.compiler.stages.STAGES`, which gives their order): it
reads what earlier stages left in the compilation ``job``, leaves its own
result there and returns that result, which the table can dump (an LLVM
module is printed only then). The
attributes a stage reads and writes are named in its docstring.

The table holds a lock around the stages that run LLVM in this process (its
context is not safe to use from two threads); the backend runs in a child
process.
"""

from numba_vulkan.base import config
from numba_vulkan.spirv import binary as spirv
from numba_vulkan.base.errors import UnsupportedError
from numba_vulkan.codegen import backend, barriers, carried, contract, divconst, entrypoint, exact, fixups, half, indices, int32, legalize, libclc_link, logical, looplimit, narrow, optimize, readonly, rounding, strip, structurize, tables, unitfloat, versioning, workarounds
from numba_vulkan.llvmir import groupops
from numba_vulkan.llvmir import ir
from numba_vulkan.spirv import tools as validate

#: Data layout of LLVM's logical SPIR-V target.
DATA_LAYOUT = ("e-i64:64-v16:16-v24:32-v32:32-v48:64-v96:128-v192:256-"
               "v256:256-v512:512-v1024:1024-n8:16:32:64-G10")

ENTRY_POINT = "main"


def _exact_float32(job):
    """Whether the kernel's float32 divisions and square roots are made
    correctly rounded: on targets with float64 (the rare operands' path),
    unless its fast-math flags let them be inexact."""
    return "float64" not in job.target.narrowed and exact.rounds_correctly(job.fastmath)


def _float32_operations(job):
    """Whether the kernel's float32 divisions and square roots are the math
    library's, correctly rounded in float32: where the target's ``Fma``
    rounds once (:mod:`numba_vulkan.codegen.mathlib.exact32`); elsewhere
    :func:`~numba_vulkan.codegen.legalize.exact_float32` computes them in
    float64."""
    return _exact_float32(job) and job.target.fused_fma


def _float64_operations(job):
    """Whether the kernel's float64 divisions and square roots are the math
    library's (:mod:`numba_vulkan.codegen.mathlib.exact64`): where the target
    has float64 and its ``Fma`` rounds once (with any fast-math flags: the
    library's are faster than the driver's); elsewhere they are the
    driver's."""
    return "float64" not in job.target.narrowed and job.target.fused_fma


def _machine(job):
    if job.machine is None:
        job.machine = optimize.target_machine(job.target.triple)
    return job.machine


def link(job):
    """``job.sources`` linked into one, narrowed, the workgroup size
    ``job.threads`` made a constant, and linked with the libclc functions they
    call into ``job.module`` (on a target with a loop limit, the library's
    loops marked to stay rolled); ``job.fastmath``, where the kernel's options
    do not say it, the fast-math flags of its float operations."""
    kernel = ir.parse(str(optimize.link(job.sources, job.target.triple, DATA_LAYOUT)))
    narrow.module(kernel, job.target.narrowed)
    if job.fastmath is None:
        job.fastmath = exact.fast_math_flags(kernel)
    entrypoint.constant_local_size(kernel, job.threads)
    texts = libclc_link.link(kernel, approximate=exact.uses_driver_functions(job.fastmath),
                             exact_float32=_float32_operations(job),
                             exact_float64=_float64_operations(job),
                             nvidia_rsqrt=job.target.nvidia_rsqrt)
    if job.target.loop_limit:
        texts = looplimit.keep_library_loops(texts, texts[-1:])
    job.module = optimize.link(texts, job.target.triple, DATA_LAYOUT)
    return job.module


def optimise(job):
    """``job.module`` with everything inlined into the entry point, optimised (on a
    target without a loop limit, a GPU, loops of run-time trip counts unrolled too)."""
    optimize.optimise(job.module, ENTRY_POINT, _machine(job),
                      unroll_runtime=not job.target.loop_limit)
    return job.module


def logical_addressing(job):
    """``job.model``: the IR model of ``job.module`` with every access through
    a buffer handle (``job.bindings``) instead of a byte address, at an
    element index computed in elements where the byte offset's terms allow
    it."""
    job.model = ir.parse(str(job.module))
    logical.rewrite(job.model, job.bindings)
    indices.element_indices(job.model)
    return job.model


def unroll_hints(job):
    """``job.model`` with every innermost loop marked to be unrolled
    :data:`~numba_vulkan.codegen.looplimit.UNROLL` times, on a target with a
    loop limit (lavapipe's): the driver then counts a fraction of the trips."""
    if job.target.loop_limit:
        looplimit.hint_unrolling(job.model, ENTRY_POINT, looplimit.UNROLL)
    return job.model


def reoptimise(job):
    """``job.module``: ``job.model`` optimised again, with what the rewrite
    exposed; on a target without a loop limit (a GPU), loops bounded by
    64-bit values get a copy for bounds that fit in 32 bits."""
    job.module = optimize.link([str(job.model)], job.target.triple, DATA_LAYOUT)
    optimize.optimise(job.module, ENTRY_POINT, _machine(job), speed=2,
                      unroll_runtime=not job.target.loop_limit)
    if job.target.loop_limit:
        # A CPU does 64-bit arithmetic at no extra cost, and lavapipe counts
        # a trip of every loop an invocation passes, entered or not.
        return job.module
    text = str(job.module)
    versioned = versioning.version_loops(text)
    if versioned is not text:
        job.module = optimize.link([versioned], job.target.triple, DATA_LAYOUT)
        job.module.verify()
    return job.module


def carry_values(job):
    """``job.module`` with each operation of a loop that its previous trip
    computed already, on the values this trip reads, taken from that trip
    through a phi (:mod:`numba_vulkan.codegen.carried`); after the loops'
    rotation, which leaves those duplicates."""
    model = ir.parse(str(job.module))
    if carried.carry(model):
        job.module = optimize.link([str(model)], job.target.triple, DATA_LAYOUT)
    return job.module


def structure(job):
    """``job.model``: the IR model of ``job.module`` with structured control
    flow (loops left by breaks where ``job.breaks`` allows). On a target with
    a loop limit, a kernel with loops counts its trips and reports reaching
    the limit in its status buffer (``job.status``); ``job.loop_check`` says
    whether it does. The stages after this one rewrite ``job.model`` in
    place, with LLVM's optimiser no more."""
    instrument = None
    job.loop_check = False
    if job.target.loop_limit:
        def instrument(function, loops):
            job.loop_check = True
            return looplimit.count_trips(function, loops, job.target.loop_limit, job.status)
    job.model = ir.parse(str(structurize.structurize(job.module, _machine(job), ENTRY_POINT,
                                                     job.breaks, instrument=instrument)))
    return job.model


def integers(job):
    """``job.model`` computing in 32 bits what provably gives the same
    result: integers (:mod:`~numba_vulkan.codegen.int32`) and float32s
    drawn from integers through float64 (:mod:`~numba_vulkan.codegen.unitfloat`)."""
    int32.counters(job.model)
    int32.low_bits(job.model)
    unitfloat.narrow(job.model)
    return job.model


def markers(job):
    """``job.model`` with the push constant, buffer and workgroup size markers lowered."""
    entrypoint.lower_markers(job.model, tuple(job.threads))
    return job.model


def narrowing(job):
    """``job.model`` with the 64-bit types the target lacks made 32-bit, and
    float16 computed in float32 on a target without float16 arithmetic."""
    narrow.final(job.model, job.target.narrowed)
    if job.target.float16:
        half.native(job.model, job.target.float16_rte)
    else:
        half.emulate(job.model)
    return job.model


def driver_workarounds(job):
    """``job.model`` steering around known driver bugs."""
    workarounds.signed_remainder(job.model)
    return job.model


def legalise(job):
    """``job.model`` with multiplies and adds the kernel lets contract fused
    (on a target with a fused ``Fma``), in the forms the backend can
    express, with float64 rounding computed on 64-bit integers where the
    target has them (:mod:`numba_vulkan.codegen.rounding`), integer
    divisions by constants as multiplies there
    (:mod:`numba_vulkan.codegen.divconst`), and selects between a value and
    its negation in a form the backend does not mistake for ``FaceForward``."""
    if job.target.fused_fma and "contract" in job.fastmath:
        contract.fuse(job.model)
    legalize.legalize(job.model, fused_fma=job.target.fused_fma)
    if "int64" not in job.target.narrowed:
        rounding.exact_rounding(job.model)
    if _exact_float32(job):
        legalize.exact_float32(job.model)
    legalize.unmark(job.model)
    legalize.fold_constants(job.model)
    # After the folding: the divisors the passes above computed are constants now.
    if "int64" not in job.target.narrowed and divconst.rewrite(job.model):
        legalize.fold_constants(job.model)
    legalize.negated_selects(job.model)
    return job.model


def barrier_semantics(job):
    """``job.llvm_ir``: ``job.model`` with each workgroup barrier that cannot
    need to order storage-buffer memory made a barrier of workgroup memory
    only (:mod:`numba_vulkan.codegen.barriers`), printed: the IR handed to
    the backend."""
    barriers.workgroup_only(job.model)
    job.llvm_ir = str(job.model)
    return job.llvm_ir


def emit(job):
    """``job.spirv``: the backend's module for ``job.llvm_ir``."""
    # At -O0 the backend runs no pass that reshapes the control flow (code
    # generation preparation, loop strength reduction, tail duplication)
    # before its own structurizer: the shape built above reaches it intact.
    job.spirv = backend.emit(job.llvm_ir, job.target.triple, opt=0)
    return job.spirv


def repair(job):
    """``job.spirv`` without the backend's debug noise and with its known
    mistakes fixed, and the storage buffers it never writes decorated
    NonWritable (:mod:`numba_vulkan.codegen.readonly`), and libclc's
    constant tables placed (:mod:`numba_vulkan.codegen.tables`)."""
    job.spirv = tables.place(readonly.decorate(half.storage_capabilities(
        fixups.repair(strip.strip(groupops.lower(job.spirv))), job.target.float16)))
    return job.spirv


def exact_floats(job):
    """``job.spirv`` with every float operation kept as written and NaNs,
    infinities and signed zeros preserved, unless the kernel's fast-math
    flags give that up (``fastmath``), and float16 arithmetic rounded
    to nearest where the target lets a module ask for that."""
    job.spirv = exact.decorate(job.spirv, exact.keeps_operations(job.fastmath),
                               exact.keeps_special_values(job.fastmath))
    if job.target.float16 and job.target.float16_rte:
        job.spirv = exact.round_float16_to_nearest(job.spirv)
    return job.spirv


def check(job):
    """``job.spirv``, checked by spirv-val when validation is on."""
    missing = spirv.imports(job.spirv)
    if missing:
        raise UnsupportedError(f"the kernel calls {', '.join(missing)}, which nothing defines "
                               "for the Vulkan target")
    if config.validate():
        validate.validate(job.spirv, job.target.target_env)
    return job.spirv
