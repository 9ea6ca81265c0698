"""From a kernel's LLVM IR modules to a validated SPIR-V module."""

import os
import threading
from dataclasses import dataclass



from numba_vulkan import config, spirv
from numba_vulkan.codegen import (backend, exact, fixups, int32, legalize, libclc_link,
                                   logical, looplimit, narrow, optimize, strip, structurize,
                                   validate, workarounds)

#: Data layout of LLVM's logical SPIR-V target.
DATA_LAYOUT = ("e-i64:64-v16:16-v24:32-v32:32-v48:64-v96:128-v192:256-"
               "v256:256-v512:512-v1024:1024-n8:16:32:64-G10")

ENTRY_POINT = "main"

_llvm_lock = threading.Lock()


@dataclass
class Module:
    """A compiled kernel module.

    Attributes:
        spirv: The SPIR-V binary.
        llvm_ir: The IR handed to the backend, after every rewrite.
        capabilities: SPIR-V capabilities the module declares.
        loop_check: Whether the module reports reaching the target's loop
            limit in a status buffer (see :mod:`numba_vulkan.codegen.looplimit`).
    """

    spirv: bytes
    llvm_ir: str
    capabilities: list
    loop_check: bool = False


def build(sources, bindings, local_size, target, name="kernel", status=None):
    """Compile a kernel's IR modules to SPIR-V for ``target``.

    Args:
        sources: IR text of the kernel's modules, the entry point's last.
        bindings: Storage dtype of each descriptor binding.
        local_size: Workgroup size ``(x, y, z)``.
        target: The :class:`~numba_vulkan.target.TargetDescription`.
        name: The kernel's name, for messages and dumps.
        status: The binding of the kernel's status buffer, if it has one. On
            a target with a loop limit, a module with loops reports there
            (or at binding ``len(bindings)``, a status buffer of its own)
            and says so in :attr:`Module.loop_check`.
    """
    with _llvm_lock:
        tm = optimize.target_machine(target.triple)
        narrowed = narrow.sources(sources, target.narrowed)
        module = optimize.link(libclc_link.link(narrowed), target.triple, DATA_LAYOUT)
        optimize.optimise(module, ENTRY_POINT, tm)
        text = logical.rewrite(str(module), bindings)
        if target.loop_limit:
            text = looplimit.hint_unrolling(text, ENTRY_POINT, looplimit.UNROLL)
        module = optimize.link([text], target.triple, DATA_LAYOUT)
        optimize.optimise(module, ENTRY_POINT, tm, speed=2)
        checked = []
        instrument = None
        if target.loop_limit:
            binding = len(bindings) if status is None else status

            def instrument(function, loops):
                checked.append(True)
                return looplimit.count_trips(function, loops, target.loop_limit, binding)
        final = _structured(module, tm, local_size, target, sources, True, instrument)
    binary = _emit(final, target)
    if spirv.unmerged_switch(binary):
        # The backend's own structurizer mishandled a loop left by breaks;
        # every loop leaving through a flag in its latch avoids that.
        with _llvm_lock:
            final = _structured(module, tm, local_size, target, sources, False, instrument)
        binary = _emit(final, target)
    if not exact.contraction_allowed(sources):
        binary = exact.decorate(binary)
    _dump(name, final, binary)
    if config.validate():
        validate.validate(binary, target.target_env)
    return Module(binary, final, spirv.capabilities(binary), bool(checked))


def _structured(module, tm, local_size, target, sources, breaks, instrument):
    """The final IR for the backend: structured control flow, markers
    lowered, narrowed and legalised."""
    module = structurize.structurize(module, tm, ENTRY_POINT, breaks, instrument=instrument)
    final = logical.lower_markers(int32.low_bits(int32.counters(str(module))),
                                  tuple(local_size))
    final = narrow.final(final, target.narrowed)
    final = workarounds.signed_remainder(final)
    final = legalize.legalize(final)
    if "float64" not in target.narrowed and not exact.contraction_allowed(sources):
        final = legalize.exact_float32(final)
    return final


def _emit(final, target):
    # At -O0 the backend runs no pass that reshapes the control flow (code
    # generation preparation, loop strength reduction, tail duplication)
    # before its own structurizer: the shape built above reaches it intact.
    return fixups.repair(strip.strip(backend.emit(final, target.triple, opt=0)))


def _dump(name, text, binary):
    directory = config.dump_dir()
    if not directory:
        return
    os.makedirs(directory, exist_ok=True)
    stem = os.path.join(directory, name.replace("<", "_").replace(">", "_"))
    with open(stem + ".ll", "w") as f:
        f.write(text)
    with open(stem + ".spv", "wb") as f:
        f.write(binary)



