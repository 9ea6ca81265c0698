"""Atomics on buffers and workgroup memory, in the forms the backend lowers.

A 32-bit ``atomicrmw`` keeps its form at the element pointer; ``cmpxchg``
becomes LLVM's SPIR-V intrinsic, and a 64-bit atomic a call that
:mod:`numba_vulkan.codegen.fixups` turns into the SPIR-V instruction.
A compare-and-swap loop on a float array makes the array an array of
integers of the same size (:func:`views`).
"""

from numba_vulkan.base.errors import UnsupportedError
from numba_vulkan.llvmir import ir, types
from numba_vulkan.codegen import fixups
from numba_vulkan.codegen.logical import access
from numba_vulkan.codegen.logical.state import ATOMIC_SCOPES, Choice

_SPIRV_SCOPES = {"device": 1, "workgroup": 2}


class MixedFloatAtomics(UnsupportedError):
    """An array takes both a native float atomic add and a compare-and-swap
    loop on its bits; SPIR-V cannot type one buffer both ways. The compiler
    then uses compare-and-swap loops for the adds too."""


def views(kernel):
    """Element types that objects take to serve atomics on their bits, by
    object.

    A compare-and-swap loop on a float array accesses its elements as
    integers of the same size; SPIR-V's atomics need the array itself
    typed so, and every other access then bitcasts.
    """
    found = {}
    for inst in kernel.main.instructions():
        if inst.opcode not in ("atomicrmw", "cmpxchg"):
            continue
        obj = kernel.object_of(inst.operands[0].value)
        if obj is None:
            continue
        if isinstance(obj, Choice):
            raise UnsupportedError("an atomic through a pointer that may point into two "
                                   f"different arrays: {inst}")
        if kernel.is_record(obj):
            continue
        ty, natural = inst.operands[1].type, kernel.natural_elem(obj)
        if ty != natural:
            if not ty.startswith("i") or found.setdefault(obj, ty) != ty or \
                    types.SCALAR_SIZES[ty] != types.SCALAR_SIZES[natural]:
                raise UnsupportedError(f"an atomic access of {ty} into an array of "
                                       f"{natural}: {inst}")
    for inst in kernel.main.instructions():
        if inst.opcode == "atomicrmw" and "fadd" in inst.flags and \
                kernel.object_of(inst.operands[0].value) in found:
            raise MixedFloatAtomics("a native float atomic add and a compare-and-swap "
                                    f"loop on the same array: {inst}")
    return found


def rewrite(kernel, inst):
    """The atomic ``inst`` on the element its pointer reaches."""
    ty = inst.operands[1].type
    out = []
    ptr, elem, space = access.element_pointer(kernel, inst.operands[0].value, ty, inst, out)
    if space == 0:
        raise UnsupportedError("atomics on a private array (nv.local.array): Vulkan has "
                               f"atomics on buffers and workgroup memory only: {inst}")
    scope = ATOMIC_SCOPES.get(space, "device")
    values = [o.value for o in inst.operands[1:]]
    if ty == "i64":
        return out + _wide(kernel, inst, values, ptr, space, scope)
    if inst.opcode == "atomicrmw":
        op = next(f for f in inst.flags if f != "volatile")
        out.append(ir.instruction(
            f"{inst.name} = atomicrmw {op} ptr addrspace({space}) {ptr}, {ty} {values[0]} "
            f'syncscope("{scope}") monotonic, align {types.SCALAR_SIZES[ty]}'))
        return out
    expected, value = values
    old, ok, half = kernel.fresh(), kernel.fresh(), kernel.fresh()
    kernel.cmpxchg_spaces.add(space)
    # LLVM's backend cannot lower cmpxchg for Vulkan; its own intrinsic
    # can (see numba_vulkan.codegen.fixups for the result it builds).
    return out + [ir.instruction(text) for text in (
        f"{old} = call {ty} (ptr addrspace({space}), ...) @llvm.spv.cmpxchg.p{space}("
        f"ptr addrspace({space}) {ptr}, {ty} {expected}, {ty} {value}, "
        f"i32 {_SPIRV_SCOPES[scope]}, i32 0, i32 0)",
        f"{ok} = icmp eq {ty} {old}, {expected}",
        f"{half} = insertvalue {{ {ty}, i1 }} poison, {ty} {old}, 0",
        f"{inst.name} = insertvalue {{ {ty}, i1 }} {half}, i1 {ok}, 1")]


def _wide(kernel, inst, values, ptr, space, scope):
    """A 64-bit atomic as a call that :mod:`numba_vulkan.codegen.fixups`
    turns into the SPIR-V instruction.

    LLVM's backend refuses 64-bit atomics for Vulkan (it offers no
    ``Int64Atomics`` capability there). The call takes the element
    through a volatile load, so that the module keeps the element
    pointer next to it; the repair reads the pointer from that load and
    drops it.
    """
    loaded = kernel.fresh()
    out = [f"{loaded} = load volatile i64, ptr addrspace({space}) {ptr}, align 8"]
    code = _SPIRV_SCOPES[scope]
    if inst.opcode == "atomicrmw":
        op = next(f for f in inst.flags if f != "volatile")
        callee = f"{fixups.WIDE_ATOMIC}{op}.{code}"
        kernel.wide_atomics.add((callee, 2))
        out.append(f"{inst.name} = call i64 @{callee}(i64 {loaded}, i64 {values[0]})")
    else:
        expected, value = values
        callee = f"{fixups.WIDE_ATOMIC}cmpxchg.{code}"
        kernel.wide_atomics.add((callee, 3))
        old, ok, half = kernel.fresh(), kernel.fresh(), kernel.fresh()
        out += [f"{old} = call i64 @{callee}(i64 {loaded}, i64 {expected}, i64 {value})",
                f"{ok} = icmp eq i64 {old}, {expected}",
                f"{half} = insertvalue {{ i64, i1 }} poison, i64 {old}, 0",
                f"{inst.name} = insertvalue {{ i64, i1 }} {half}, i1 {ok}, 1"]
    return [ir.instruction(text) for text in out]


def declarations(kernel):
    """The compare-and-swap intrinsics and 64-bit atomics called."""
    lines = [f"declare i32 @llvm.spv.cmpxchg.p{space}(ptr addrspace({space}), ...)"
             for space in sorted(kernel.cmpxchg_spaces)]
    lines += [f"declare i64 @{callee}({', '.join(['i64'] * arity)})"
              for callee, arity in sorted(kernel.wide_atomics)]
    return lines
