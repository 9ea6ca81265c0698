"""Rewrites of the final IR that steer clear of known driver bugs.

They run after the last optimisation, so LLVM cannot fold them back.
"""

from numba_vulkan.llvmir.build import Builder


def signed_remainder(module):
    """Compute the signed remainders of the IR model ``module`` from unsigned
    ones, in place.

    NVIDIA's driver (580.x, H200) returns wrong ``OpSRem`` results when an
    operand is negative: 64-bit ones, and 32-bit ones by some constants or
    next to a division of the same operands. Unsigned remainders of the
    magnitudes with the dividend's sign applied are correct everywhere.
    """
    counter = 0
    for fn in module.functions:
        for block in fn.blocks or ():
            out = []
            for inst in block.instructions:
                ty = inst.operands[0].type if inst.opcode == "srem" else ""
                if not (ty.startswith("i") and ty[1:].isdigit()):
                    out.append(inst)
                    continue
                a, b = (o.value for o in inst.operands)
                top = str(int(ty[1:]) - 1)
                counter += 1
                t = f"%nv.srem.{counter}"
                build = Builder()
                sa = build.binary("ashr", ty, a, top, name=f"{t}.sa")
                xa = build.binary("xor", ty, a, sa, name=f"{t}.xa")
                ma = build.binary("sub", ty, xa, sa, name=f"{t}.ma")
                sb = build.binary("ashr", ty, b, top, name=f"{t}.sb")
                xb = build.binary("xor", ty, b, sb, name=f"{t}.xb")
                mb = build.binary("sub", ty, xb, sb, name=f"{t}.mb")
                ur = build.binary("urem", ty, ma, mb, name=f"{t}.ur")
                xr = build.binary("xor", ty, ur, sa, name=f"{t}.xr")
                build.binary("sub", ty, xr, sa, name=inst.name)
                out += build.instructions
            block.instructions = out
