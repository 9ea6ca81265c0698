"""Fuse a kernel's multiplies and adds where it allows contraction.

NVVM fuses ``a * b + c`` into one fused multiply-add by default, so
numba.cuda kernels compute that way, and it is a large part of their speed
in loops such as Mandelbrot's. A kernel compiled with the ``contract``
fast-math flag (``fastmath={"contract"}``, the default of
``numba_vulkan.cuda.jit``) asks for the same. Leaving the fusion to the
driver would mean dropping ``NoContraction`` from the whole module, and
with it the exactness that libclc's functions (inlined into the same
module) rely on; so the fusion is done here, on the IR, for exactly the
instructions that carry the flag, and every other operation stays as
written.

Only for targets whose ``Fma`` is fused (:attr:`Target.fused_fma`): on the
others an ``llvm.fma`` is emulated, which would be slower than the two
operations it replaces, and contraction is a permission, not a duty.
"""

from numba_vulkan.llvmir import ir

#: Fast-math flags that allow a multiply and an add to be fused.
_CONTRACT = frozenset(("contract", "fast"))
_TYPES = {"float": "f32", "double": "f64"}


def _contractible(inst, opcode):
    return (inst.opcode == opcode and inst.name is not None and inst.type is None
            and inst.operands and inst.operands[0].type in _TYPES
            and not _CONTRACT.isdisjoint(inst.flags))


def fuse(module):
    """Compute each ``fadd``/``fsub`` of an ``fmul`` of the IR model
    ``module``, both allowing contraction, by one ``llvm.fma``, in place. As NVVM does (LLVM's
    aggressive fusion for NVIDIA GPUs), a product with several uses is fused
    into each add that uses it (``zr*zr + zi*zi`` and ``zr*zr - zi*zi +
    cr``), and the multiply stays only for uses that are not adds."""
    used = set()
    for function in module.functions:
        if function.blocks is not None and _fuse_function(function):
            used.update(inst.callee for inst in function.instructions()
                        if inst.opcode == "call" and inst.callee.startswith("@llvm.fma."))
    if not used:
        return
    declared = {f.name for f in module.functions}
    for callee in sorted(used - declared):
        ty = next(t for t, suffix in _TYPES.items() if callee.endswith(suffix))
        module.add(f"declare {ty} {callee}({ty}, {ty}, {ty})")


def _fuse_function(function):
    products = {inst.name: inst for inst in function.instructions()
                if _contractible(inst, "fmul")}
    if not products:
        return False
    counter = 0
    fused = False
    for block in function.blocks:
        out = []
        for inst in block.instructions:
            build = None
            if _contractible(inst, "fadd") or _contractible(inst, "fsub"):
                build = _fused(inst, products)
            if build is None:
                out.append(inst)
                continue
            counter += 1
            out.extend(build(f"%nv.fma.{counter}"))
            fused = True
        block.instructions = out
    if not fused:
        return False
    # A product every use of which was fused is left without uses.
    uses = set()
    for inst in function.instructions():
        uses.update(value for _, value in inst.values() if isinstance(value, str))
    for block in function.blocks:
        block.instructions = [inst for inst in block.instructions
                              if inst.name not in products or inst.name in uses]
    return True


def _fused(inst, products):
    """A builder of the lines computing ``inst`` as an fma of its first
    operand that is a product, or None. ``a*b + c``, ``c + a*b``, ``a*b - c``
    (``fma(a, b, -c)``) and ``c - a*b`` (``fma(-a, b, c)``)."""
    left, right = (o.value for o in inst.operands)
    ty = inst.operands[0].type
    for position, name in ((0, left), (1, right)):
        product = products.get(name)
        if product is None:
            continue
        other = right if position == 0 else left
        negate_addend = inst.opcode == "fsub" and position == 0
        negate_product = inst.opcode == "fsub" and position == 1

        def build(stem):
            a, b = (o.value for o in product.operands)
            lines, c = [], other
            if negate_addend:
                c = f"{stem}.neg"
                lines.append(ir.instruction(f"{c} = fneg {ty} {other}"))
            if negate_product:
                lines.append(ir.instruction(f"{stem}.neg = fneg {ty} {a}"))
                a = f"{stem}.neg"
            lines.append(ir.instruction(f"{inst.name} = call {ty} @llvm.fma.{_TYPES[ty]}"
                                        f"({ty} {a}, {ty} {b}, {ty} {c})"))
            return lines
        return build
    return None
