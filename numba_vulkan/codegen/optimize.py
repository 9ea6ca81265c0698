"""Link a kernel's LLVM modules into one and optimise it with LLVM's pipeline."""

import llvmlite.binding as llvm
from numba.core.compiler_lock import global_compiler_lock

from numba_vulkan.llvmir import ir
# The child's, so that the backend and the optimiser set LLVM up alike.
from numba_vulkan.codegen.backend_child import initialise, target_machine  # noqa: F401
from numba_vulkan.base.errors import CompilerError


def _without_builtins(text):
    """``text`` with every function defined ``"no-builtins"``.

    Without C library functions to call, LLVM's optimiser forms no
    ``llvm.memset``, ``llvm.memcpy`` or ``llvm.memmove`` from loops that fill
    or copy an array (loop idiom recognition) or from runs of stores
    (MemCpyOpt): an access of a whole array that Vulkan's logical
    addressing cannot express.

    Only the ``define`` lines are read, as the IR model's tokens: Numba's
    modules (in its own printer's form) pass here unparsed.
    """
    lines = text.splitlines()
    for k, line in enumerate(lines):
        if line.startswith("define "):
            words = ir.tokens(line)
            # After the name and parameters, and the words that must
            # precede attributes.
            at = next(i for i, w in enumerate(words) if w.startswith("@")) + 1
            while at < len(words) and (words[at] in ("unnamed_addr", "local_unnamed_addr")
                                       or words[at].startswith("addrspace(")):
                at += 1
            lines[k] = " ".join(words[:at] + ['"no-builtins"'] + words[at:])
    return "\n".join(lines) + "\n"


def link(sources, triple, data_layout):
    """Parse and link IR texts into one module for ``triple``."""
    initialise()
    modules = []
    for text in sources:
        try:
            module = llvm.parse_assembly(_without_builtins(text))
        except RuntimeError as exc:
            raise CompilerError(f"LLVM could not parse generated IR: {exc}") from exc
        module.triple = triple
        module.data_layout = data_layout
        modules.append(module)
    main = modules.pop()
    for other in modules:
        main.link_in(other)
    return main


def optimise(module, entry, tm, speed=3, unroll_runtime=False):
    """Inline everything into ``entry`` and optimise, in place.

    Logical SPIR-V cannot pass pointers between functions, so every function
    is made internal and inlined; loops are not vectorised because the
    pointer rewrite handles scalar accesses only. ``unroll_runtime`` lets
    LLVM unroll loops whose trip count is known only at run time (with a
    remainder loop), as its NVPTX target does for numba-cuda: a GPU then has
    the loads of several trips in flight at once (a CSR product's gathers:
    1.65 ms to 1.10 ms on an H200, ``benchmarks/bench_variants.py``). The
    remainder runs first (a prologue): with it after the unrolled loop, the
    two exits of a loop with a branch inside met in a block that
    structurize had to dispatch to.
    """
    for fn in module.functions:
        if fn.is_declaration or fn.name == entry:
            continue
        fn.linkage = "internal"
        fn.add_function_attribute("alwaysinline")
    for gv in module.global_variables:
        if not gv.is_declaration:
            gv.linkage = "internal"
    pto = llvm.create_pipeline_tuning_options(speed_level=speed)
    pto.loop_vectorization = False
    pto.slp_vectorization = False
    pto.inlining_threshold = 100000
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    # IndVarSimplify rewrites a loop's exit values into closed forms that may
    # need integers wider than 64 bits (the sum 0 + 1 + ... + n becomes an
    # i65 product), which Vulkan has no type for. The option is process-wide
    # and Numba's CPU compiles read it too: set it only while this pipeline
    # runs, under Numba's compiler lock.
    #
    # SimplifyCFG's sinking of common code turns stores to two arrays in the
    # two arms of an `if` into one store through a phi of the arrays, which
    # Vulkan cannot express; after the pointer rewrite it would undo the
    # branches that keep such stores apart (numba_vulkan.codegen.logical).
    with global_compiler_lock:
        llvm.set_option("", "-replexitval=never")
        llvm.set_option("", "-simplifycfg-sink-common=false")
        llvm.set_option("", f"-unroll-runtime={str(unroll_runtime).lower()}")
        llvm.set_option("", "-unroll-runtime-epilog=false")
        try:
            pm.run(module, pb)
        finally:
            llvm.set_option("", "-replexitval=cheap")
            llvm.set_option("", "-simplifycfg-sink-common=true")
            llvm.set_option("", "-unroll-runtime=false")
            llvm.set_option("", "-unroll-runtime-epilog=true")
    for fn in list(module.functions):
        if fn.name != entry and not fn.is_declaration:
            raise CompilerError(f"function {fn.name} was not inlined into the kernel")
    module.verify()
    return module
