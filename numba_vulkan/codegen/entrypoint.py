"""The markers that stand for a kernel's interface, made what Vulkan runs.

Numba's lowering leaves calls to markers (:mod:`numba_vulkan.llvmir.markers`)
where a kernel reads a push constant or the workgroup size, and the logical
addressing rewrite leaves one where it indexes an element of a workgroup,
private or constant array. The workgroup size becomes a constant early, so
that the optimiser may fold it (:func:`constant_local_size`); the rest are
lowered after the last optimisation (:func:`lower_markers`), which also
makes ``main`` the compute entry point.
"""

from numba_vulkan.base.errors import UnsupportedError
from numba_vulkan.llvmir import ir, markers, types

#: The name of the kernel's entry function.
ENTRY_NAME = "main"

_MARKERS = (markers.BUFFER, markers.PUSH, markers.LOCAL_SIZE, markers.ELEMENT)


def _marker(inst, prefix):
    """Whether ``inst`` calls a marker whose name starts with ``prefix``."""
    return inst.opcode == "call" and inst.callee.lstrip("@").strip('"').startswith(prefix)


def _lower_elements(module):
    """Replace each element marker by the ``getelementptr`` it stands for."""
    arrays = {g.name: g.type for g in module.globals.values()}
    for fn in module.functions:
        arrays.update((i.name, i.type) for i in fn.instructions() if i.opcode == "alloca")
        for block in fn.blocks or ():
            for k, inst in enumerate(block.instructions):
                if _marker(inst, markers.ELEMENT):
                    base, *indices = inst.operands
                    block.instructions[k] = ir.Instruction(
                        "getelementptr", [ir.Operand(base.type, base.value),
                                          ir.Operand("i32", "0"), *indices],
                        name=inst.name, flags=["inbounds"], type=arrays[base.value])


def _push_layout(module):
    fields = {}
    for fn in module.functions:
        for inst in fn.instructions():
            if _marker(inst, markers.PUSH):
                offset, ty = int(inst.operands[0].value), inst.type
                if fields.setdefault(offset, ty) != ty:
                    raise UnsupportedError(f"push constant offset {offset} read as two types")
    layout, index, position = [], {}, 0
    for offset in sorted(fields):
        while position < offset:
            layout.append("i32")
            position += 4
        index[offset] = len(layout)
        layout.append(fields[offset])
        position += types.SCALAR_SIZES[fields[offset]]
    return layout, index


def constant_local_size(module, local_size):
    """Replace each workgroup size marker of the IR model ``module`` by
    ``local_size``'s value on its axis, in place.

    The workgroup size is fixed when a kernel is compiled, so the optimiser
    may fold it: a tree reduction over ``nv.local_size(0) // 2`` steps
    unrolls as one over a constant does.
    """
    for fn in module.functions:
        for block in fn.blocks or ():
            for k, inst in enumerate(block.instructions):
                if _marker(inst, markers.LOCAL_SIZE):
                    axis = int(inst.operands[0].value)
                    block.instructions[k] = ir.instruction(
                        f"{inst.name} = add i32 {local_size[axis]}, 0")


def lower_markers(module, local_size):
    """Replace the push constant and workgroup size markers of the IR model
    ``module``, in place, and make ``main`` the compute entry point with
    workgroup size ``local_size``.

    This runs after the last optimisation: LLVM would fold the push constant
    accesses into byte-offset expressions that the backend cannot lower.
    """
    layout, index = _push_layout(module)
    _lower_elements(module)
    counter = 0
    for fn in module.functions:
        for block in fn.blocks or ():
            out = []
            for inst in block.instructions:
                if _marker(inst, markers.PUSH):
                    counter += 1
                    offset = int(inst.operands[0].value)
                    out += [ir.instruction(
                        f"%nv.push.{counter} = getelementptr inbounds %nv.push, "
                        f"ptr addrspace(13) @nv.push, i32 0, i32 {index[offset]}"),
                        ir.instruction(f"{inst.name} = load {inst.type}, "
                                       f"ptr addrspace(13) %nv.push.{counter}, align 4")]
                elif _marker(inst, markers.LOCAL_SIZE):
                    axis = int(inst.operands[0].value)
                    out.append(ir.instruction(f"{inst.name} = add i32 {local_size[axis]}, 0"))
                else:
                    out.append(inst)
            block.instructions = out
    for fn in module.functions:
        if fn.blocks is None and fn.name.lstrip("@").strip('"').startswith(_MARKERS):
            module.items.remove(fn)
    entry = module.function(f"@{ENTRY_NAME}")
    x, y, z = local_size
    entry.header += f' "hlsl.shader"="compute" "hlsl.numthreads"="{x},{y},{z}"'
    if layout:
        module.add(f"%nv.push = type {{ {', '.join(layout)} }}", before=entry)
        module.add(ir.Global("@nv.push", ["external", "hidden", "addrspace(13)",
                                          "externally_initialized"], "global", "%nv.push",
                             tail=", align 8"), before=entry)
    for fn in module.functions:
        for inst in fn.instructions():
            for prefix in _MARKERS:
                if _marker(inst, prefix):
                    raise UnsupportedError(f"a {prefix} marker survived the rewrite")
