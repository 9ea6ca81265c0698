"""Rewrites of the final IR that steer clear of known driver bugs.

They run after the last optimisation, so LLVM cannot fold them back.
"""

import re

_SREM = re.compile(r"^(\s*)(%\S+) = srem (i\d+) (\S+), (\S+)\s*$")


def signed_remainder(text):
    """Compute signed remainders from unsigned ones.

    NVIDIA's driver (580.x, H200) returns wrong ``OpSRem`` results when an
    operand is negative: 64-bit ones, and 32-bit ones by some constants or
    next to a division of the same operands. Unsigned remainders of the
    magnitudes with the dividend's sign applied are correct everywhere.
    """
    out, counter = [], 0
    for line in text.splitlines():
        m = _SREM.match(line)
        if not m:
            out.append(line)
            continue
        indent, result, ty, a, b = m.groups()
        top = int(ty[1:]) - 1
        counter += 1
        t = f"%nv.srem.{counter}"
        out += [
            f"{indent}{t}.sa = ashr {ty} {a}, {top}",
            f"{indent}{t}.xa = xor {ty} {a}, {t}.sa",
            f"{indent}{t}.ma = sub {ty} {t}.xa, {t}.sa",
            f"{indent}{t}.sb = ashr {ty} {b}, {top}",
            f"{indent}{t}.xb = xor {ty} {b}, {t}.sb",
            f"{indent}{t}.mb = sub {ty} {t}.xb, {t}.sb",
            f"{indent}{t}.ur = urem {ty} {t}.ma, {t}.mb",
            f"{indent}{t}.xr = xor {ty} {t}.ur, {t}.sa",
            f"{indent}{result} = sub {ty} {t}.xr, {t}.sa",
        ]
    return "\n".join(out) + "\n"
