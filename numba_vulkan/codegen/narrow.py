"""Narrow float64 and int64 to 32 bits, for devices without them.

A target without ``shaderFloat64`` (or ``shaderInt64``) cannot run a module
that declares the ``Float64`` (``Int64``) capability. Such a target's
kernels are compiled as written and then narrowed here, at the level of the
LLVM IR text: every ``double`` becomes ``float`` (with its constants
rounded to float) and every ``i64`` becomes ``i32`` (with constants
wrapped, and the 64-bit limits mapped to the 32-bit ones). Arrays of
narrowed dtypes are stored narrowed (see :mod:`numba_vulkan.abi`), and the
compiler sizes their elements by what is stored.

float64 is narrowed in Numba's modules, before libclc is linked, so that
math calls pick the float32 functions. int64 is narrowed there too, and
again in the final IR, where the logical addressing rewrite has added
64-bit offset arithmetic of its own. Results are those of float32 and
int32 arithmetic: values beyond their range or precision are not kept.
"""

import re
import struct

from numba_vulkan.errors import UnsupportedError

_SKIP = ("target ", "source_filename", "!", ";", "attributes ")

# Types, not value names such as %i64 or %"double".
_DOUBLE = re.compile(r"(?<![%@\"\w.$-])double\b")
_F64 = re.compile(r"(?<=\.)f64\b")
_FLOAT_LITERAL = re.compile(
    r"(?<![\w.%@\"$-])(-?(?:0x[0-9A-Fa-f]{16}|\d+\.\d+(?:[eE][-+]?\d+)?))(?![\w.])")
#: Numba's C helpers for doubles whose float twin takes the same arguments.
_DOUBLE_HELPERS = {"numba_cpow": "numba_cpowf"}

_I64 = re.compile(r"(?<![%@\"\w$-])i64\b")
_TYPED_INT = re.compile(r"(?<![%@\"\w.$-])i64 (-?\d+)\b")
_INT_OP = re.compile(
    r"= (?P<op>add|sub|mul|and|or|xor|shl|lshr|ashr|sdiv|udiv|srem|urem|"
    r"icmp(?: samesign)? \w+|phi|"
    r"select i1 \S+,)(?P<flags>(?: nuw| nsw| exact| disjoint| samesign)*) i64 (?P<rest>.*)$")
_SAME_TYPE_CAST = re.compile(
    r"= (?:sext|zext|trunc|fpext|fptrunc)(?: nneg| nuw| nsw)* (?P<ty>float|i32) "
    r"(?P<value>[^,]+?) to (?P=ty)\s*$")
_INT64_BITS_OF_DOUBLE = re.compile(r"bitcast (?:double \S+ to i64|i64 \S+ to double)")


def _round_to_float(literal):
    negative = literal.startswith("-")
    body = literal[1:] if negative else literal
    if body.startswith(("0x", "0X")):
        value = struct.unpack(">d", bytes.fromhex(body[2:]))[0]
    else:
        value = float(body)
    value = -value if negative else value
    try:
        single = struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        single = float("inf") if value > 0 else float("-inf")
    return "0x" + struct.pack(">d", single).hex().upper()


def _narrow_double_line(line):
    line = _DOUBLE.sub("float", line)
    line = _F64.sub("f32", line)
    for name, twin in _DOUBLE_HELPERS.items():
        line = re.sub(rf'@"?{name}"?(?=\()', f"@{twin}", line)
    if 'c"' in line:
        return line
    return _FLOAT_LITERAL.sub(lambda m: _round_to_float(m.group(1)), line)


def _int32(value):
    """An i64 constant as the i32 constant that stands for it."""
    if value >= 2 ** 63 - 1:
        return 2 ** 31 - 1
    if value <= -2 ** 63:
        return -2 ** 31
    value &= 0xFFFFFFFF
    return value - 2 ** 32 if value >= 2 ** 31 else value


def _narrow_int_line(line):
    m = _INT_OP.search(line)
    if m and m.group("op") in ("shl", "lshr", "ashr"):
        amount = line.rsplit(",", 1)[-1].strip()
        if re.fullmatch(r"\d+", amount) and int(amount) >= 32:
            raise UnsupportedError(
                f"a 64-bit shift by {amount} cannot be narrowed to 32 bits: {line.strip()}")
    if m:
        head, rest = line[:m.start("rest")], m.group("rest")
        rest = re.sub(r"(?<![\w.%@\"$-])-?\d+\b(?![.\w])",
                      lambda n: str(_int32(int(n.group(0)))), rest)
        line = head + rest
    line = _TYPED_INT.sub(lambda n: f"i64 {_int32(int(n.group(1)))}", line)
    return _I64.sub("i32", line)


def _fix_casts(line):
    """Casts between a type and itself (left by narrowing) as bitcasts."""
    m = _SAME_TYPE_CAST.search(line)
    if m:
        line = (line[:m.start()] + f"= bitcast {m.group('ty')} {m.group('value')} to "
                f"{m.group('ty')}")
    return line


def _narrow(text, double, int64):
    out = []
    for line in text.splitlines():
        if not line or line.startswith(_SKIP):
            out.append(line)
            continue
        if int64 and not double and _INT64_BITS_OF_DOUBLE.search(line):
            raise UnsupportedError(
                "narrowing int64 needs float64 narrowed too: the kernel uses the bits of a "
                f"double as an int64 (float64 math does): {line.strip()}")
        if double:
            line = _narrow_double_line(line)
        if int64:
            line = _narrow_int_line(line)
        out.append(_fix_casts(line))
    return "\n".join(out) + "\n"


def sources(texts, narrowed):
    """Narrow Numba's modules of a kernel for the narrowing mode ``narrowed``."""
    double, int64 = "float64" in narrowed, "int64" in narrowed
    if not (double or int64):
        return list(texts)
    return [_narrow(text, double, int64) for text in texts]


def final(text, narrowed):
    """Narrow the 64-bit integers that codegen itself added to the final IR."""
    if "int64" not in narrowed:
        return text
    return _narrow(_split_wide_multiplies(text), False, True)


_ZEXT = re.compile(r"^\s*(%\S+) = zext (?:nneg )?i32 (\S+) to i64\s*$")
_WIDE_MUL = re.compile(r"^\s*(%\S+) = mul (?:nuw |nsw )*i64 ([^,]+), (\S+)\s*$")
_HIGH_HALF = re.compile(r"^(\s*)(%\S+) = lshr (?:exact )?i64 (%\S+), 32\s*$")


def _split_wide_multiplies(text):
    """Compute the high half of 32 x 32 -> 64-bit products in 32-bit pieces.

    libclc's float32 argument reduction multiplies two 32-bit values as
    64-bit ones and keeps both halves of the product; the low half survives
    narrowing as it is, the high half is built from 16-bit partial products.
    """
    lines = text.splitlines()
    widened, products = {}, {}
    for line in lines:
        m = _ZEXT.match(line)
        if m:
            widened[m.group(1)] = m.group(2)
            continue
        m = _WIDE_MUL.match(line)
        if m:
            operands = [_as_int32_operand(v.strip(), widened) for v in m.group(2, 3)]
            if None not in operands:
                products[m.group(1)] = operands
    if not products:
        return text
    out, counter = [], 0
    for line in lines:
        m = _HIGH_HALF.match(line)
        if m and m.group(3) in products:
            counter += 1
            out += _high_half(m.group(1), m.group(2), f"%nv.mulhi.{counter}",
                              *products[m.group(3)])
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def _as_int32_operand(value, widened):
    if value in widened:
        return widened[value]
    if re.fullmatch(r"\d+", value) and int(value) < 2 ** 32:
        return str(_int32(int(value)))
    return None


def _high_half(indent, result, stem, x, y):
    lines, counter = [], [0]

    def emit(expression, name=None):
        if name is None:
            counter[0] += 1
            name = f"{stem}.{counter[0]}"
        lines.append(f"{indent}{name} = {expression}")
        return name

    a, b = emit(f"and i32 {x}, 65535"), emit(f"lshr i32 {x}, 16")
    c, d = emit(f"and i32 {y}, 65535"), emit(f"lshr i32 {y}, 16")
    ac, ad = emit(f"mul i32 {a}, {c}"), emit(f"mul i32 {a}, {d}")
    bc, bd = emit(f"mul i32 {b}, {c}"), emit(f"mul i32 {b}, {d}")
    middle = emit(f"add i32 {emit(f'lshr i32 {ac}, 16')}, {emit(f'and i32 {ad}, 65535')}")
    middle = emit(f"add i32 {middle}, {emit(f'and i32 {bc}, 65535')}")
    high = emit(f"add i32 {bd}, {emit(f'lshr i32 {ad}, 16')}")
    high = emit(f"add i32 {high}, {emit(f'lshr i32 {bc}, 16')}")
    emit(f"add i32 {high}, {emit(f'lshr i32 {middle}, 16')}", result)
    return lines
