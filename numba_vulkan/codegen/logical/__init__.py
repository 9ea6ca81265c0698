"""Rewrite optimised LLVM IR for SPIR-V's logical addressing model.

Numba computes addresses the way a CPU does: an array's data pointer plus a
byte offset. Vulkan shaders have no such pointers; an access names an object
(a storage buffer, a module-level variable or a private variable) and an
element index. After inlining and optimisation every address in a kernel is
the base of one object plus an offset: a buffer base (the ``__nv.buffer.K``
markers), a global (a workgroup array, a global NumPy array, libclc's
constant tables) or an alloca. This pass tracks, for each pointer value,
which object it points into and its byte offset as an i64, and turns each
load and store into an access to element ``offset / itemsize`` of that
object.

It works on the :mod:`numba_vulkan.llvmir.ir` model of the single-function
module, in steps that each have a module of their own: the objects and what
SPIR-V cannot express about them (:mod:`.objects`), which object each
pointer points into (:mod:`.pointers`), pointers that may point into several
(:mod:`.choices`), record arrays (:mod:`.records`), atomics
(:mod:`.atomics`) and the element accesses themselves (:mod:`.access`);
:class:`.state.Kernel` holds what they find. Anything it cannot prove safe
(a pointer that may point into two buffers, a pointer passed to a call, an
access whose size differs from the buffer's element size) raises
:class:`~numba_vulkan.base.errors.UnsupportedError` naming the instruction,
rather than producing a wrong module.
"""

from numba_vulkan.base.errors import UnsupportedError
from numba_vulkan.codegen.logical import access, atomics, choices, objects, pointers, records
from numba_vulkan.codegen.logical.state import Choice, Kernel


def rewrite(module, bindings):
    """Rewrite every array access of the optimised module, in place, to go
    through its buffer's handle.

    Args:
        module: The IR model of the module after optimisation.
        bindings: Storage dtype name of each descriptor binding, in order.
    """
    kernel = Kernel(module, list(bindings))
    objects.find(kernel)
    objects.materialise_constants(kernel)
    conflicts = pointers.analyse(kernel)
    if conflicts and objects.merge(kernel, conflicts):
        conflicts = pointers.analyse(kernel)
    if conflicts:
        choices.choose(kernel, conflicts)
    records.find(kernel)
    records.alignments(kernel)
    records.merge_byte_accesses(kernel)
    records.units(kernel)
    kernel.views = atomics.views(kernel)
    for block in kernel.main.blocks:
        block.instructions = [new for inst in block.instructions
                              for new in _rewrite_instruction(kernel, inst)]
    if kernel.guarded:
        choices.guard_stores(kernel)
    kernel.main.blocks[0].instructions[0:0] = access.prologue(kernel)
    for line in atomics.declarations(kernel) + access.declarations(kernel):
        module.add(line)
    objects.retype(kernel)


def _rewrite_instruction(kernel, inst):
    """The instructions that stand for ``inst`` in the rewritten module."""
    if inst.name in kernel.pointers:
        pointer = kernel.pointers[inst.name]
        out = pointers.offset(kernel, inst, pointer)
        if pointer.selector is not None:
            out.append(choices.selector(kernel, inst, pointer))
        return out
    if inst.opcode in ("load", "store") and "atomic" not in inst.flags:
        target = inst.operands[0 if inst.opcode == "load" else 1].value
        if kernel.tracked(target):
            return _rewrite_access(kernel, inst, target)
        if inst.opcode == "store" and kernel.tracked(inst.operands[0].value):
            raise UnsupportedError(f"a pointer into an array is stored to memory: {inst}")
        return [inst]
    if inst.opcode in ("atomicrmw", "cmpxchg") and \
            kernel.object_of(inst.operands[0].value) is not None:
        return atomics.rewrite(kernel, inst)
    if inst.opcode == "call" and inst.callee.startswith("@llvm.lifetime."):
        # Lifetime hints of private arrays: Vulkan has none to give.
        return []
    if inst.opcode == "alloca" and inst.name in kernel.objects:
        return [inst]
    for _, value in inst.values():
        if kernel.tracked(value):
            raise UnsupportedError(
                f"a pointer into an array is used in a way Vulkan cannot express: {inst}")
    return [inst]


def _rewrite_access(kernel, inst, target):
    """A load or store through a tracked pointer, as an access to the
    element of its object."""
    ty = inst.type if inst.opcode == "load" else inst.operands[0].type
    obj = kernel.object_of(target)
    if isinstance(obj, Choice):
        return choices.chosen_access(kernel, inst, target, ty)
    if kernel.is_record(obj):
        return records.record_access(kernel, inst, target, ty, obj)
    out = []
    ptr, elem, space = access.element_pointer(kernel, target, ty, inst, out)
    return out + access.access(kernel, inst, ty, ptr, elem, space)
