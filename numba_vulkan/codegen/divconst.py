"""Integer division and remainder by a constant as multiplies and shifts.

A GPU has no integer divider: a driver computes ``OpSDiv`` / ``OpUDiv`` /
``OpSRem`` / ``OpUMod`` with a loop or a long subroutine, 64-bit ones most
of all. A C compiler turns a division by a constant into a multiplication
by a "magic" reciprocal, but LLVM does that while selecting machine
instructions, which its SPIR-V backend does without; and NVIDIA's Vulkan
driver was measured to leave 64-bit ones as divisions (issue 23: int64
``y // 9`` at 1.9x numba-cuda's time). So this pass rewrites, in the final
IR, every ``sdiv``, ``udiv``, ``srem`` and ``urem`` of a scalar i8 to i64
by a constant into what the division is worth:

* An unsigned division by ``d`` (not a power of two) is ``floor(n * m /
  2**(N + s))`` for ``m = ceil(2**(N + s) / d)``, with ``N`` the width, as
  long as the rounding error ``e = m * d - 2**(N + s)`` is at most
  ``2**s``: then ``n * m / 2**(N + s) = n / d + e * n / (d * 2**(N + s))``
  exceeds ``n / d`` by less than ``1 / d``, which cannot reach the next
  integer. The smallest such ``s`` is taken for which ``m`` has ``N`` bits;
  for even ``d`` the dividend may first be shifted right by the divisor's
  trailing zeros (fewer dividend bits tolerate a larger error); where no
  ``N``-bit ``m`` exists, the ``N + 1``-bit one is applied as
  ``t = mulhi(n, m - 2**N)``, ``q = (t + ((n - t) >> 1)) >> (l - 1)`` with
  ``l = ceil(log2 d)``, which never overflows. A divisor above ``2**(N-1)``
  gives 1 or 0: a comparison.
* A signed division by ``d`` (``|d|`` not a power of two) is ``floor(n *
  m / 2**(N + s)) + (1 if n < 0 else 0)`` for ``|d|``, negated for a
  negative ``d``, with ``m = ceil(2**(N + s) / |d|) < 2**N`` and ``e <
  2**(s + 1)``: for ``n >= 0`` as above; for ``n < 0`` the product lies
  below ``n / |d|`` by less than ``1 / |d|``, so its floor is one below
  the quotient truncated towards zero. By a power of two ``2**k`` it is the
  arithmetic shift of ``n`` biased by ``2**k - 1`` when negative.
* A remainder is ``n - q * d``.

``mulhi``, the upper ``N`` bits of a ``2N``-bit product, is one 64-bit
multiply for ``N = 32``; for ``N = 64`` it is built from four 32 x 32 ->
64-bit products of the halves (the backend has no 128-bit integers; a GPU
does a 64-bit multiply as such products anyway). i8 and i16 operations are
extended to 32 bits and use the 32-bit form. Only for targets with 64-bit
integers: a 32-bit ``mulhi`` needs one.

The rewrite keeps LLVM's semantics exactly (division truncating towards
zero, the remainder with the dividend's sign), so Numba's floor division,
an ``sdiv`` and a fix-up, is unchanged. A division by 0, 1 or -1 is left
as it is, and so are vector operations.
"""

from numba_vulkan.codegen.legalize import Emitter, _literal, _printed, _signed, _width, splice

_OPCODES = ("sdiv", "udiv", "srem", "urem")
_MASK32 = (1 << 32) - 1


def _ceil_log2(d):
    return (d - 1).bit_length()


def _smallest_magic(d, bits, tolerance):
    """``(m, s)`` for the smallest ``s`` whose ``m = ceil(2**(bits + s) / d)``
    has ``bits`` bits and whose error ``m * d - 2**(bits + s)`` is at most
    ``tolerance(s)``; None if there is none."""
    for s in range(bits):
        m = -(-(1 << (bits + s)) // d)
        if m >> bits:
            return None
        if m * d - (1 << (bits + s)) <= tolerance(s):
            return m, s
    return None


def unsigned_plan(d, bits):
    """How to divide a ``bits``-wide unsigned integer by ``d`` (``1 < d < 2**bits``).

    Returns one of ``("shift", k)`` (``n >> k``), ``("compare",)`` (``n >=
    d``), ``("magic", z, m, s)`` (``mulhi(n >> z, m) >> s``) or ``("add",
    m, s)`` (``t = mulhi(n, m)``, ``(t + ((n - t) >> 1)) >> s``).
    """
    if d & (d - 1) == 0:
        return ("shift", d.bit_length() - 1)
    if d > 1 << (bits - 1):
        return ("compare",)
    found = _smallest_magic(d, bits, lambda s: 1 << s)
    if found:
        return ("magic", 0, *found)
    z = (d & -d).bit_length() - 1
    if z:
        found = _smallest_magic(d >> z, bits, lambda s: 1 << (s + z))
        if found:
            return ("magic", z, *found)
    l = _ceil_log2(d)
    m = (((1 << bits) * ((1 << l) - d)) // d) + 1
    return ("add", m, l - 1)


def signed_plan(d, bits):
    """How to divide a ``bits``-wide signed integer by ``|d|`` (``|d| > 1``;
    the caller negates the quotient for a negative ``d``).

    Returns ``("shift", k)`` (``(n + (2**k - 1 if n < 0 else 0)) >> k``) or
    ``("magic", m, s)`` (``floor(n * m / 2**(bits + s)) + (n < 0)``, ``m``
    unsigned).
    """
    d = abs(d)
    if d & (d - 1) == 0:
        return ("shift", d.bit_length() - 1)
    return ("magic", *_smallest_magic(d, bits, lambda s: (1 << (s + 1)) - 1))


class _Divider:
    """Emits the replacement of one division or remainder."""

    def __init__(self, emit, bits):
        self.emit = emit
        self.bits = bits
        self.ty = f"i{bits}"

    def op(self, opcode, a, b):
        return self.emit(f"{opcode} {self.ty} {a}, {b}")

    def mulhu(self, n, m):
        """The upper half of ``n * m`` (``n`` unsigned, ``m`` a constant below ``2**bits``)."""
        emit = self.emit
        if self.bits == 32:
            wide = emit(f"mul i64 {emit(f'zext i32 {n} to i64')}, {m}")
            return emit(f"trunc i64 {emit(f'lshr i64 {wide}, 32')} to i32")
        nl = emit(f"zext i32 {emit(f'trunc i64 {n} to i32')} to i64")
        nh = emit(f"lshr i64 {n}, 32")
        ml, mh = m & _MASK32, m >> 32

        def product(x, c):
            return emit(f"mul i64 {x}, {c}") if c else None

        def plus(x, y):
            return y if x is None else x if y is None else emit(f"add i64 {x}, {y}")

        def high(x):
            return None if x is None else emit(f"lshr i64 {x}, 32")

        # Each sum below stays under 2**64: (2**32 - 1)**2 + 2 * (2**32 - 1) < 2**64.
        low_products = product(nl, ml)
        t = plus(product(nh, ml), high(low_products))
        if not mh:
            return high(t)
        u = plus(product(nl, mh), None if t is None else emit(f"and i64 {t}, {_MASK32}"))
        return plus(plus(product(nh, mh), high(t)), high(u))

    def unsigned(self, n, d):
        plan = unsigned_plan(d, self.bits)
        kind = plan[0]
        if kind == "shift":
            return self.op("lshr", n, plan[1])
        if kind == "compare":
            at_least = self.emit(f"icmp uge {self.ty} {n}, {_printed(d, self.bits)}")
            return self.emit(f"zext i1 {at_least} to {self.ty}")
        if kind == "magic":
            _, z, m, s = plan
            if z:
                n = self.op("lshr", n, z)
            if self.bits == 32:
                wide = self.emit(f"mul i64 {self.emit(f'zext i32 {n} to i64')}, {m}")
                return self.emit(f"trunc i64 {self.emit(f'lshr i64 {wide}, {32 + s}')} to i32")
            t = self.mulhu(n, m)
            return self.op("lshr", t, s) if s else t
        _, m, s = plan
        t = self.mulhu(n, m)
        half = self.op("lshr", self.op("sub", n, t), 1)
        total = self.op("add", t, half)
        return self.op("lshr", total, s) if s else total

    def signed(self, n, d):
        plan = signed_plan(d, self.bits)
        top = self.bits - 1
        if plan[0] == "shift":
            k = plan[1]
            bias = self.op("lshr", self.op("ashr", n, top), self.bits - k)
            q = self.op("ashr", self.op("add", n, bias), k)
        else:
            _, m, s = plan
            if self.bits == 32:
                wide = self.emit(f"mul i64 {self.emit(f'sext i32 {n} to i64')}, {m}")
                t = self.emit(f"trunc i64 {self.emit(f'ashr i64 {wide}, {32 + s}')} to i32")
            else:
                # floor(n * m / 2**64) for a signed n: the unsigned product's
                # upper half less m where n is negative.
                negative_m = self.op("and", self.op("ashr", n, top), _printed(m, 64))
                t = self.op("sub", self.mulhu(n, m), negative_m)
                if s:
                    t = self.op("ashr", t, s)
            q = self.op("add", t, self.op("lshr", n, top))
        return self.op("sub", 0, q) if d < 0 else q


def _extended(emit, n, bits, signed, definition):
    """``n``, an i``bits`` value, extended to i32.

    LLVM's SPIR-V backend folds the extension of a truncated 64-bit value
    into a mask of the 64-bit value typed as 32-bit, which spirv-val
    rejects: such a value is truncated to 32 bits first and masked (or its
    sign extended) here.
    """
    source = definition.operands[0] if definition is not None and \
        definition.opcode == "trunc" else None
    wide = _width(source.type) if source is not None else None
    if wide is None or wide < 32:
        return emit(f"{'sext' if signed else 'zext'} i{bits} {n} to i32")
    low = source.value if wide == 32 else emit(f"trunc {source.type} {source.value} to i32")
    if not signed:
        return emit(f"and i32 {low}, {(1 << bits) - 1}")
    return emit(f"ashr i32 {emit(f'shl i32 {low}, {32 - bits}')}, {32 - bits}")


def _rewrite(inst, stem, widths, defined):
    """The lines replacing ``inst``, a division or remainder by a constant, or None."""
    if inst.opcode not in _OPCODES or inst.name is None or len(inst.operands) != 2:
        return None
    ty = inst.operands[0].type
    bits = _width(ty)
    if bits is None or bits not in widths:
        return None
    literal = _literal(inst.operands[1].value, bits)
    signed = inst.opcode[0] == "s"
    if literal is None:
        return None
    d = _signed(literal, bits) if signed else literal
    if abs(d) <= 1:
        return None
    emit = Emitter(stem)
    n = inst.operands[0].value
    work = max(bits, 32)
    if bits < 32:
        n = _extended(emit, n, bits, signed, defined.get(n))
    divider = _Divider(emit, work)
    q = divider.signed(n, d) if signed else divider.unsigned(n, d)
    if inst.opcode.endswith("rem"):
        q = divider.op("sub", n, divider.op("mul", q, _printed(d, work)))
    if bits < 32:
        emit(f"trunc i32 {q} to {ty}", inst.name)
        return emit.lines
    # The last line computes q: it takes the instruction's name.
    last = emit.lines[-1]
    assert last.startswith(f"{q} = ")
    return emit.lines[:-1] + [f"{inst.name} = {last[len(q) + 3:]}"]


#: Widths of the integer divisions :func:`rewrite` replaces.
WIDTHS = frozenset((8, 16, 32, 64))


def rewrite(module, widths=WIDTHS):
    """Replace each integer division and remainder by a constant of the IR
    model ``module`` (whose target has 64-bit integers) of a width in
    ``widths`` by multiplies and shifts, in place; return whether any was."""
    counter = 0
    definitions = {}

    def replace(inst, function):
        nonlocal counter
        if function.name not in definitions:
            definitions[function.name] = {i.name: i for i in function.instructions() if i.name}
        lines = _rewrite(inst, f"%nv.divc.{counter + 1}", widths, definitions[function.name])
        if lines is not None:
            counter += 1
        return lines

    return splice(module, replace)
