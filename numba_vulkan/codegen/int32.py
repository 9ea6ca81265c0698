"""64-bit integer arithmetic done in 32 bits where the result is the same.

Numba types every integer a kernel computes with as int64 (``n += 1``,
``for i in range(k)``, index arithmetic), and GPUs do 64-bit integer
arithmetic in two or more 32-bit steps (a multiply in several). LLVM has
no pass that narrows such values for a target that has int64, so this
module does two rewrites of the final IR:

* :func:`low_bits`: an addition, subtraction, multiplication, left shift
  or bitwise operation whose result is only ever truncated to 32 bits (an
  element index, mostly) needs only the low 32 bits of its operands, so it
  is done in 32 bits. This is exact.
* :func:`counters`: a loop counter moving by ±1 from a 32-bit start and
  compared with a 32-bit value (its bound) is kept in 32 bits. A group of
  64-bit values is narrowed when it is closed: phis and additions of ±1
  with ``nsw`` whose operands are members, 32-bit constants or sign
  extensions of 32-bit values (or zero extensions of values known not
  negative), and whose uses are members, truncations to
  32 bits or comparisons with such operands; and at least one of those
  comparisons is with a 32-bit value, which keeps a plain tally of trips in
  64 bits. What is assumed is that a bounded counter is not stepped past
  2^31 within one invocation (2^31 trips of one loop in one GPU thread);
  ``docs/limitations.md`` says so. On an H200, Mandelbrot's inner loop ran
  14 % faster with an int32 counter, all else equal.
"""

import re

_DEF = re.compile(r"^\s*(%[-\w.$]+) = (.*)$")
_PHI = re.compile(r"^phi i64 (.*)$")
_INCOMING = re.compile(r"\[\s*([^,\]]+),\s*(%[-\w.$]+)\s*\]")
_ADD = re.compile(r"^(add|sub)((?: nuw| nsw)*) i64 (\S+), (\S+)$")
#: Extensions of 32-bit values that keep their signed value: a zero
#: extension of a value known not negative is a sign extension.
_SEXT = re.compile(r"^(?:sext|zext nneg) i32 (\S+) to i64$")
_TRUNC = re.compile(r"^trunc i64 (%[-\w.$]+) to i32$")
_ICMP = re.compile(r"^icmp (\w+) i64 (\S+), (\S+)$")
_NAME = re.compile(r"%[-\w.$]+")
_I32_MIN, _I32_MAX = -2 ** 31, 2 ** 31 - 1


def _constant(token):
    try:
        value = int(token)
    except ValueError:
        return None
    return value if _I32_MIN <= value <= _I32_MAX else None


def _definitions(lines):
    """``(index, name, right-hand side)`` of each line that defines a value."""
    for i, line in enumerate(lines):
        m = _DEF.match(line)
        if m:
            yield i, m.group(1), m.group(2)


def _uses(lines, names):
    """The lines (by index) that use each of ``names``, other than its own
    definition."""
    uses = {}
    for i, line in enumerate(lines):
        m = _DEF.match(line)
        own = m.group(1) if m else None
        for token in _NAME.findall(line):
            if token != own and token in names:
                uses.setdefault(token, set()).add(i)
    return uses


def _untruncate(lines, j):
    """Where line ``j`` truncates a value now computed in 32 bits, make it a
    plain copy; return whether it did."""
    user, rhs = _DEF.match(lines[j]).groups()
    t = _TRUNC.match(rhs)
    if t:
        lines[j] = f"  {user} = add i32 {t.group(1)}, 0"
    return t is not None


def counters(text):
    """Rewrite the closed groups of bounded 64-bit counters in ``text`` (IR
    of a module) as 32-bit values."""
    lines = text.split("\n")
    defs, leaves = {}, {}
    for i, name, rhs in _definitions(lines):
        if _PHI.match(rhs) or _ADD.match(rhs):
            defs[name] = (i, rhs)
        s = _SEXT.match(rhs)
        if s:
            leaves[name] = s.group(1)
    if not defs:
        return text
    uses = _uses(lines, defs.keys() | leaves.keys())

    members = set(defs)

    def operand_ok(token):
        return token in members or token in leaves or _constant(token) is not None

    changed = True
    bounded = set()
    while changed:
        changed = False
        bounded = set()
        for name in sorted(members):
            i, rhs = defs[name]
            phi, add = _PHI.match(rhs), _ADD.match(rhs)
            if phi:
                ok = all(operand_ok(v.strip()) for v, _ in _INCOMING.findall(phi.group(1)))
            else:
                _, flags, a, b = add.groups()
                steps = {a, b} - members
                ok = ("nsw" in flags and len(steps) == 1 and a != b and
                      _constant(steps.pop()) in (1, -1) and (a in members or b in members))
            for j in uses.get(name, ()):
                if not ok:
                    break
                use = _DEF.match(lines[j])
                if use is None:
                    ok = False
                    break
                user, urhs = use.groups()
                if user in members:
                    continue
                if _TRUNC.match(urhs):
                    continue
                c = _ICMP.match(urhs)
                if c and operand_ok(c.group(2)) and operand_ok(c.group(3)):
                    if any(t in leaves or _constant(t) is not None for t in c.groups()[1:]):
                        bounded.add(name)
                    continue
                ok = False
            if not ok:
                members.discard(name)
                changed = True
    members = _bounded_groups(members, bounded, defs)
    if not members:
        return text

    def narrowed(token):
        return leaves.get(token, token)

    for name in members:
        i, rhs = defs[name]
        phi, add = _PHI.match(rhs), _ADD.match(rhs)
        if phi:
            body = _INCOMING.sub(lambda m: f"[ {narrowed(m.group(1).strip())}, {m.group(2)} ]",
                                 phi.group(1))
            lines[i] = f"  {name} = phi i32 {body}"
        else:
            op, _, a, b = add.groups()
            lines[i] = f"  {name} = {op} i32 {narrowed(a)}, {narrowed(b)}"
        for j in uses.get(name, ()):
            if _untruncate(lines, j):
                continue
            user, urhs = _DEF.match(lines[j]).groups()
            c = _ICMP.match(urhs)
            if c and user not in members:
                pred, a, b = c.groups()
                lines[j] = f"  {user} = icmp {pred} i32 {narrowed(a)}, {narrowed(b)}"
    return "\n".join(lines)


def _bounded_groups(members, bounded, defs):
    """The members of the groups (connected by their definitions) that hold
    a bounded member."""
    parent = {m: m for m in members}

    def root(m):
        while parent[m] != m:
            parent[m] = parent[parent[m]]
            m = parent[m]
        return m

    for name in members:
        for token in _NAME.findall(defs[name][1]):
            if token in members:
                parent[root(token)] = root(name)
    keep = {root(m) for m in bounded & members}
    return {m for m in members if root(m) in keep}


_LOW = re.compile(r"^(add|sub|mul|shl|and|or|xor)((?: nuw| nsw| disjoint)*) i64 (\S+), (\S+)$")
_EXTEND = re.compile(r"^[sz]ext i32 (\S+) to i64$")


def low_bits(text):
    """Do in 32 bits the 64-bit integer operations of ``text`` (IR of a
    module) whose results only reach truncations to 32 bits."""
    lines = text.split("\n")
    ops, extended = {}, {}
    for i, name, rhs in _definitions(lines):
        op = _LOW.match(rhs)
        # A shift by 32 or more would be poison in 32 bits.
        if op and (op.group(1) != "shl" or _constant(op.group(4)) in range(32)):
            ops[name] = (i, op)
        e = _EXTEND.match(rhs)
        if e:
            extended[name] = e.group(1)
    if not ops:
        return text
    uses = _uses(lines, ops.keys())
    members = set(ops)
    changed = True
    while changed:
        changed = False
        for name in sorted(members):
            for j in uses.get(name, ()):
                use = _DEF.match(lines[j])
                if use and (use.group(1) in members or _TRUNC.match(use.group(2))):
                    continue
                members.discard(name)
                changed = True
                break
    if not members:
        return text
    inserted = {}
    for name in members:
        i, op = ops[name]
        kind, _, a, b = op.groups()
        operands = []
        for token in (a, b):
            if token in members:
                operands.append(token)
            elif token in extended:
                operands.append(extended[token])
            elif token.lstrip("-").isdigit():
                operands.append(str((int(token) + 2 ** 31) % 2 ** 32 - 2 ** 31))
            else:
                low = f"%nv.lo.{sum(map(len, inserted.values()))}"
                inserted.setdefault(i, []).append(f"  {low} = trunc i64 {token} to i32")
                operands.append(low)
        lines[i] = f"  {name} = {kind} i32 {operands[0]}, {operands[1]}"
        for j in uses.get(name, ()):
            _untruncate(lines, j)
    out = []
    for i, line in enumerate(lines):
        out.extend(inserted.get(i, ()))
        out.append(line)
    return "\n".join(out)
