"""Rewrites of the final IR that steer clear of known driver bugs.

They run after the last optimisation, so LLVM cannot fold them back.
"""

import re

_SREM = re.compile(r"^(\s*)(%\S+) = srem i64 (\S+), (\S+)\s*$")


def signed_remainder(text):
    """Compute 64-bit signed remainders from unsigned ones.

    NVIDIA's driver (580.x, H200) returns wrong 64-bit ``OpSRem`` results
    when an operand is negative; unsigned remainders of the magnitudes with
    the dividend's sign applied are correct everywhere.
    """
    out, counter = [], 0
    for line in text.splitlines():
        m = _SREM.match(line)
        if not m:
            out.append(line)
            continue
        indent, result, a, b = m.groups()
        counter += 1
        t = f"%nv.srem.{counter}"
        out += [
            f"{indent}{t}.sa = ashr i64 {a}, 63",
            f"{indent}{t}.xa = xor i64 {a}, {t}.sa",
            f"{indent}{t}.ma = sub i64 {t}.xa, {t}.sa",
            f"{indent}{t}.sb = ashr i64 {b}, 63",
            f"{indent}{t}.xb = xor i64 {b}, {t}.sb",
            f"{indent}{t}.mb = sub i64 {t}.xb, {t}.sb",
            f"{indent}{t}.ur = urem i64 {t}.ma, {t}.mb",
            f"{indent}{t}.xr = xor i64 {t}.ur, {t}.sa",
            f"{indent}{result} = sub i64 {t}.xr, {t}.sa",
        ]
    return "\n".join(out) + "\n"
