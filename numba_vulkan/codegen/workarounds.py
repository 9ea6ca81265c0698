"""Rewrites of the final IR that steer clear of known driver bugs.

They run after the last optimisation, so LLVM cannot fold them back.
"""

from numba_vulkan.llvmir import ir


def signed_remainder(text):
    """Compute signed remainders from unsigned ones.

    NVIDIA's driver (580.x, H200) returns wrong ``OpSRem`` results when an
    operand is negative: 64-bit ones, and 32-bit ones by some constants or
    next to a division of the same operands. Unsigned remainders of the
    magnitudes with the dividend's sign applied are correct everywhere.
    """
    module = ir.parse(text)
    counter = 0
    for fn in module.functions:
        for block in fn.blocks or ():
            out = []
            for inst in block.instructions:
                ty = inst.operands[0].type if inst.opcode == "srem" else ""
                if not (ty.startswith("i") and ty[1:].isdigit()):
                    out.append(inst)
                    continue
                a, b = (str(o.value) for o in inst.operands)
                top = int(ty[1:]) - 1
                counter += 1
                t = f"%nv.srem.{counter}"
                out += [ir.instruction(line) for line in (
                    f"{t}.sa = ashr {ty} {a}, {top}",
                    f"{t}.xa = xor {ty} {a}, {t}.sa",
                    f"{t}.ma = sub {ty} {t}.xa, {t}.sa",
                    f"{t}.sb = ashr {ty} {b}, {top}",
                    f"{t}.xb = xor {ty} {b}, {t}.sb",
                    f"{t}.mb = sub {ty} {t}.xb, {t}.sb",
                    f"{t}.ur = urem {ty} {t}.ma, {t}.mb",
                    f"{t}.xr = xor {ty} {t}.ur, {t}.sa",
                    f"{inst.name} = sub {ty} {t}.xr, {t}.sa")]
            block.instructions = out
    return str(module) if counter else text
