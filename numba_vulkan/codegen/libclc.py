"""libclc, LLVM's OpenCL C math library, prepared for the Vulkan target; and
the package's cache directory.

Kernels get their math functions (``sin``, ``pow``, ``lgamma``, ...) from
libclc rather than from the driver: Vulkan's GLSL.std.450 built-ins are only
required to be accurate to a few thousand ULP and some drivers use that
freedom. libclc's ``nvptx64--.bc`` is generic LLVM IR apart from a few
details, which :func:`prepare` removes once per libclc file:

* Only the math entry points in :data:`ENTRY_POINTS` and what they call are
  kept.
* Constant tables move from address space 4 (CUDA constant memory) to 10
  (SPIR-V ``Private``, where the logical SPIR-V target keeps module-level
  data), and each becomes a flat array of the scalar type the code reads it
  as (``PIBITS_TBL`` is bytes read as 64-bit words), so that
  :mod:`numba_vulkan.codegen.logical` can address it by element index.
* NVPTX attributes (``target-features``, which would stop inlining) and
  metadata are dropped.
* Functions with known bugs get a wrapper that handles the inputs they get
  wrong (:data:`_FIXES`).

The prepared library is stored in ``libclc/`` below the cache directory
(:func:`numba_vulkan.base.files.cache_root`) as LLVM IR text
with a JSON record holding its SHA-256; a record that does not match its
text is a damaged entry and is prepared again. ``NUMBA_VULKAN_LIBCLC`` names
the libclc file to use; :func:`numba_vulkan.base.libclcfile.path_in_use`
tells which one is used.
"""

import hashlib
import json
import os
import re
import shutil
import struct
import threading

from numba_vulkan.base import system
from numba_vulkan.base import config
from numba_vulkan.base import files
from numba_vulkan.base import libclcfile
from numba_vulkan.base.errors import CompilerError

#: Version of the preparation; part of the prepared file's name.
FORMAT = 4

_UNARY = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
          "asinh", "acosh", "atanh", "exp", "exp2", "expm1", "log", "log2", "log10",
          "log1p", "erf", "erfc", "lgamma", "tgamma", "cbrt", "sqrt")
_BINARY = ("pow", "atan2", "hypot", "nextafter", "fmod", "remainder")


def mangled(name, *args):
    """The Itanium-mangled OpenCL name of a libclc function.

    Args:
        name: The OpenCL C name, such as ``"sin"``.
        args: Mangling codes of the parameters: ``f`` float, ``d`` double,
            ``i`` int, ``Pi`` / ``Pf`` / ``Pd`` (generic) pointers.
    """
    return f"_Z{len(name)}{name}{''.join(args)}"


#: Every libclc function numba_vulkan may link, by mangled name.
ENTRY_POINTS = frozenset(
    [mangled(n, s) for n in _UNARY for s in "fd"]
    + [mangled(n, s, s) for n in _BINARY for s in "fd"]
    + [mangled("ldexp", s, "i") for s in "fd"]
    + [mangled("frexp", s, "Pi") for s in "fd"]
    + [mangled("modf", s, "P" + s) for s in "fd"])


# The prepared library ---------------------------------------------------------

_GLOBAL_NAME = r'@(?:"[^"]*"|[-a-zA-Z$._0-9]+)'
_REFERENCE = re.compile(_GLOBAL_NAME)
_DEFINE = re.compile(rf"^define [^@]*({_GLOBAL_NAME})\(")
_DECLARE = re.compile(rf"^declare [^@]*({_GLOBAL_NAME})\(")
_GLOBAL = re.compile(rf"^({_GLOBAL_NAME}) = ")


class Library:
    """A prepared libclc: its definitions, and how to pick the ones a kernel needs.

    Attributes:
        path: The libclc file it was prepared from.
        text: The prepared module as LLVM IR text.
    """

    def __init__(self, path, text):
        self.path = path
        self.text = text
        self._items = {}
        self._deps = {}
        self._split(text)

    def _split(self, text):
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            m = _DEFINE.match(line)
            if m:
                end = i
                while lines[end] != "}":
                    end += 1
                body = "\n".join(lines[i:end + 1])
                self._add(m.group(1), body, body[len(line):])
                i = end + 1
                continue
            m = _DECLARE.match(line) or _GLOBAL.match(line)
            if m:
                self._add(m.group(1), line, line[m.end(1):])
            i += 1

    def _add(self, name, text, rest):
        self._items[name[1:]] = text
        self._deps[name[1:]] = {r[1:] for r in _REFERENCE.findall(rest)} - {name[1:]}

    def defines(self, name):
        """Whether the library defines the function ``name`` (mangled)."""
        text = self._items.get(name)
        return text is not None and text.startswith("define ")

    def module(self, names):
        """IR text of a module defining ``names`` and everything they use."""
        todo, seen = list(names), set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            if name not in self._items:
                raise CompilerError(f"libclc ({self.path}) does not define {name}")
            seen.add(name)
            todo.extend(self._deps[name])
        order = {name: k for k, name in enumerate(self._items)}
        return "\n\n".join(self._items[n] for n in sorted(seen, key=order.get)) + "\n"


_lock = threading.Lock()
_loaded = {}


def library():
    """The prepared libclc for :func:`~numba_vulkan.base.libclcfile.path_in_use`,
    prepared on first use.

    Raises:
        CompilerError: No libclc was found, or it cannot be prepared.
    """
    path = libclcfile.path_in_use()
    if path is None:
        raise CompilerError("libclc was not found (looked in "
                            f"{', '.join(libclcfile.SEARCH_DIRS)}; NUMBA_VULKAN_LIBCLC names "
                            f"its nvptx64--.bc). {system.how_to_get('libclc')}")
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise CompilerError(f"cannot read libclc file {path}: {exc}") from None
    identity = json.dumps([FORMAT, path, stat.st_size, stat.st_mtime_ns, sorted(ENTRY_POINTS),
                           sorted(_FIXES.items())])
    stem = hashlib.sha256(identity.encode()).hexdigest()[:20]
    with _lock:
        lib = _loaded.get(stem)
        if lib is None:
            lib = _loaded[stem] = _load_or_prepare(path, stem)
        return lib


def _load_or_prepare(path, stem):
    """The prepared library from the cache, else prepared now and stored
    there if the cache directory is writable."""
    root = files.cache_root()
    if root is None:
        return Library(path, prepare(path))
    base = os.path.join(root, "libclc", f"prepared-{stem}")
    text_path, record_path = base + ".ll", base + ".json"
    text = _load(path, text_path, record_path)
    if text is None:
        text = prepare(path)
        record = {"format": FORMAT, "source": path,
                  "sha256": hashlib.sha256(text.encode()).hexdigest()}
        try:
            os.makedirs(os.path.dirname(base), exist_ok=True)
            _write_atomically(text_path, text.encode())
            _write_atomically(record_path, json.dumps(record, indent=1).encode())
        except OSError:
            pass
    return Library(path, text)


#: Largest prepared library and record read (the library is a few MB).
_TEXT_LIMIT = 256 << 20
_RECORD_LIMIT = 1 << 20


def _load(path, text_path, record_path):
    """The prepared text if both files exist and agree, else None."""
    try:
        record = json.loads(files.read_regular(record_path, _RECORD_LIMIT))
        data = files.read_regular(text_path, _TEXT_LIMIT)
        if (record.get("format") != FORMAT or record.get("source") != path
                or record.get("sha256") != hashlib.sha256(data).hexdigest()):
            return None
        return data.decode()
    except (OSError, ValueError, AttributeError, UnicodeDecodeError, RecursionError):
        return None


def _write_atomically(path, data):
    if os.path.isdir(path) and not os.path.islink(path):
        # Something else took the name; the prepared file is ours to keep.
        shutil.rmtree(path)
    files.write_atomic(path, data)


# Preparation ------------------------------------------------------------------

def prepare(path):
    """Prepare the libclc bitcode file ``path``; return the module as IR text.

    Raises:
        CompilerError: The file is not libclc bitcode LLVM can read, or lacks
            one of :data:`ENTRY_POINTS`.
    """
    import llvmlite.binding as llvm
    from numba_vulkan.codegen.optimize import initialise, target_machine
    initialise()
    try:
        with open(path, "rb") as f:
            module = llvm.parse_bitcode(f.read())
    except (OSError, RuntimeError) as exc:
        raise CompilerError(f"cannot read libclc bitcode {path}: {exc}") from None
    defined = {fn.name for fn in module.functions if not fn.is_declaration}
    missing = sorted(ENTRY_POINTS - defined)
    if missing:
        raise CompilerError(f"libclc file {path} lacks {', '.join(missing)}")
    for fn in module.functions:
        if not fn.is_declaration and fn.name not in ENTRY_POINTS:
            fn.linkage = "internal"
    for gv in module.global_variables:
        if not gv.is_declaration:
            gv.linkage = "internal"
    pm = llvm.create_new_module_pass_manager()
    pm.add_global_dead_code_eliminate_pass()
    pm.add_strip_dead_prototype_pass()
    tm = target_machine("spirv1.5-unknown-vulkan1.2-compute")
    pm.run(module, llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options()))
    text = _clean(str(module))
    text = _retype_tables(text)
    text = _apply_fixes(text)
    try:
        llvm.parse_assembly(text).verify()
    except RuntimeError as exc:
        raise CompilerError(f"preparing libclc {path} produced invalid IR: {exc}") from None
    return text


_INF = "0x7FF0000000000000"

#: Wrappers around libclc 22 functions that get some inputs wrong: the
#: original is renamed ``__nv.unfixed.<name>`` and called for the others.
_FIXES = {
    # pow(x, y) with |y| >= 2**64 overflows inside and returns inf or a
    # wrong finite value; such a y is an even integer, and |x| != 1 makes
    # the result overflow to inf or underflow to +0.
    "_Z3powdd": f"""
define double @_Z3powdd(double %x, double %y) {{
  %r = call double @__nv.unfixed._Z3powdd(double %x, double %y)
  %ax = call double @llvm.fabs.f64(double %x)
  %ay = call double @llvm.fabs.f64(double %y)
  %huge = fcmp oge double %ay, 0x43F0000000000000
  %finite = fcmp olt double %ay, {_INF}
  %x_finite = fcmp olt double %ax, {_INF}
  %x_nonzero = fcmp one double %ax, 0.0
  %x_not_one = fcmp one double %ax, 1.0
  %c1 = and i1 %huge, %finite
  %c2 = and i1 %x_finite, %x_nonzero
  %c3 = and i1 %c1, %c2
  %c = and i1 %c3, %x_not_one
  %grows = fcmp ogt double %ax, 1.0
  %positive = fcmp ogt double %y, 0.0
  %overflows = icmp eq i1 %grows, %positive
  %limit = select i1 %overflows, double {_INF}, double 0.0
  %v = select i1 %c, double %limit, double %r
  ret double %v
}}""",
    # ldexp(nan, n) returns inf for n > 0.
    **{mangled("ldexp", code, "i"): f"""
define {ty} @{mangled("ldexp", code, "i")}({ty} %x, i32 %n) {{
  %r = call {ty} @__nv.unfixed.{mangled("ldexp", code, "i")}({ty} %x, i32 %n)
  %nan = fcmp une {ty} %x, %x
  %v = select i1 %nan, {ty} %x, {ty} %r
  ret {ty} %v
}}""" for code, ty in (("f", "float"), ("d", "double"))},
    # Odd functions of x that libclc 22's float64 versions return +0 for at
    # x = -0 (sin computes the sign as x < 0): at zero they return x.
    **{mangled(name, "d"): f"""
define double @{mangled(name, "d")}(double %x) {{
  %r = call double @__nv.unfixed.{mangled(name, "d")}(double %x)
  %zero = fcmp oeq double %x, 0.0
  %v = select i1 %zero, double %x, double %r
  ret double %v
}}""" for name in ("sin", "tan", "asin", "atan", "erf", "expm1")},
    # lgamma(x) is +inf at +-0 and +-inf (libclc: -inf at -inf). For tiny
    # negative float x libclc returns inf; there it is -log|x| - x * Euler's
    # gamma to float precision.
    "_Z6lgammaf": f"""
define float @_Z6lgammaf(float %x) {{
  %r = call float @__nv.unfixed._Z6lgammaf(float %x)
  %ax = call float @llvm.fabs.f32(float %x)
  %tiny = fcmp olt float %ax, 0x3E80000000000000
  %nonzero = fcmp one float %ax, 0.0
  %small = and i1 %tiny, %nonzero
  %log = call float @_Z3logf(float %ax)
  %gx = fmul float %x, 0x3FE2788CC0000000
  %series = fadd float %log, %gx
  %near = fneg float %series
  %edge = fcmp oeq float %ax, {_INF}
  %pole = fcmp oeq float %ax, 0.0
  %infinite = or i1 %edge, %pole
  %v1 = select i1 %small, float %near, float %r
  %v = select i1 %infinite, float {_INF}, float %v1
  ret float %v
}}""",
    "_Z6lgammad": f"""
define double @_Z6lgammad(double %x) {{
  %r = call double @__nv.unfixed._Z6lgammad(double %x)
  %ax = call double @llvm.fabs.f64(double %x)
  %edge = fcmp oeq double %ax, {_INF}
  %pole = fcmp oeq double %ax, 0.0
  %infinite = or i1 %edge, %pole
  %v = select i1 %infinite, double {_INF}, double %r
  ret double %v
}}""",
}


def _apply_fixes(text):
    """Rename each function of :data:`_FIXES` and append its wrapper."""
    for name, wrapper in _FIXES.items():
        text = re.sub(rf"@{re.escape(name)}(?=\()", f"@__nv.unfixed.{name}", text)
        text += wrapper.lstrip("\n") + "\n"
    for intrinsic in ("float @llvm.fabs.f32(float)", "double @llvm.fabs.f64(double)"):
        if f"declare {intrinsic}" not in text:
            text += f"declare {intrinsic}\n"
    return text


_ATTRIBUTE_REF = re.compile(r" #\d+(?=\s|$| \{)")
_METADATA_ATTACHMENT = re.compile(r",\s*![-\w.]+ !\d+")


def _clean(text):
    """Keep definitions, declarations and globals, without NVPTX attributes,
    metadata, or CUDA's constant address space."""
    out = []
    for line in text.splitlines():
        if not line or line[0] in ";!" or line.startswith(
                ("target ", "source_filename", "attributes ")):
            continue
        line = _ATTRIBUTE_REF.sub("", line)
        line = _METADATA_ATTACHMENT.sub("", line)
        out.append(line.replace("addrspace(4)", "addrspace(10)"))
    return "\n".join(out) + "\n"


_TABLE = re.compile(rf"^({_GLOBAL_NAME}) = (internal unnamed_addr addrspace\(10\) constant) "
                    r"(\[\d+ x [^\]]+\]) (.*)$")
_SCALARS = {"i8": "<b", "i16": "<h", "i32": "<i", "i64": "<q", "float": "<f",
            "double": "<d"}


def _retype_tables(text):
    """Make each constant table a flat array of the one scalar type it is read as."""
    reads = _table_reads(text)
    out = []
    for line in text.splitlines():
        m = _TABLE.match(line)
        kinds = reads.get(m.group(1)) if m else None
        if m and kinds and len(kinds) == 1:
            scalar = next(iter(kinds))
            data = _constant_bytes(m.group(3), m.group(4))
            line = f"{m.group(1)} = {m.group(2)} {_constant_text(scalar, data)}"
        out.append(line)
    return "\n".join(out) + "\n"


def _table_reads(text):
    """For each table, the set of scalar types that loads from it read."""
    reads = {}
    derived = {}
    pointer = re.compile(r"ptr addrspace\(10\) (" + _GLOBAL_NAME + r"|%[-\w.]+)")
    for line in text.splitlines():
        if line.startswith("define "):
            derived = {}
            continue
        m = re.match(r"\s*(%[-\w.]+) = (getelementptr|phi|select)\b(.*)$", line)
        if m:
            for base in pointer.findall(m.group(3)):
                table = base if base.startswith("@") else derived.get(base)
                if table:
                    derived[m.group(1)] = table
            continue
        m = re.match(r"\s*%[-\w.]+ = load (\S+), ptr addrspace\(10\) (\S+?),", line)
        if m:
            base = m.group(2)
            table = base if base.startswith("@") else derived.get(base)
            if table:
                reads.setdefault(table, set()).add(m.group(1))
    return reads


def _parse_constant(text, pos=0):
    """Parse ``type value`` at ``pos``; return ``(leaves, end)`` where leaves is
    a list of ``(scalar type, literal)``."""
    ty, pos = _parse_type(text, pos)
    return _parse_value(ty, text, pos)


def _skip(text, pos):
    while pos < len(text) and text[pos] == " ":
        pos += 1
    return pos


def _parse_type(text, pos):
    pos = _skip(text, pos)
    if text[pos] in "[<":
        close = "]" if text[pos] == "[" else ">"
        depth, end = 0, pos
        while True:
            if text[end] in "[<":
                depth += 1
            elif text[end] in "]>":
                depth -= 1
                if depth == 0:
                    break
            end += 1
        assert text[end] == close
        return text[pos:end + 1], end + 1
    end = pos
    while end < len(text) and text[end] not in " ,]>":
        end += 1
    return text[pos:end], end


def _aggregate(ty):
    m = re.fullmatch(r"[\[<](\d+) x (.*)[\]>]", ty)
    return (int(m.group(1)), m.group(2)) if m else None


def _parse_value(ty, text, pos):
    pos = _skip(text, pos)
    aggregate = _aggregate(ty)
    if text.startswith("zeroinitializer", pos):
        return _zeros(ty), pos + len("zeroinitializer")
    if aggregate is None:
        end = pos
        while end < len(text) and text[end] not in " ,]>":
            end += 1
        return [(ty, text[pos:end])], end
    count, element = aggregate
    if text[pos] == "c":
        end = text.index('"', pos + 2)
        raw = re.sub(rb"\\([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]),
                     text[pos + 2:end].encode("latin-1"))
        return [("i8", str(b)) for b in raw], end + 1
    pos += 1
    leaves = []
    for k in range(count):
        pos = _skip(text, pos)
        if k:
            assert text[pos] == ","
            pos = _skip(text, pos + 1)
        items, pos = _parse_constant(text, pos)
        leaves += items
    pos = _skip(text, pos)
    return leaves, pos + 1


def _zeros(ty):
    aggregate = _aggregate(ty)
    if aggregate is None:
        return [(ty, "0")]
    count, element = aggregate
    return _zeros(element) * count


def _literal_value(ty, literal):
    if ty in ("float", "double"):
        if literal.startswith("0x"):
            return struct.unpack("<d", bytes.fromhex(literal[2:])[::-1])[0]
        return float(literal)
    return int(literal)


def _constant_bytes(ty, value):
    leaves, _ = _parse_value(ty, value, 0)
    out = bytearray()
    for scalar, literal in leaves:
        number = _literal_value(scalar, literal)
        if scalar not in ("float", "double"):
            number &= (1 << (8 * struct.calcsize(_SCALARS[scalar]))) - 1
            out += number.to_bytes(struct.calcsize(_SCALARS[scalar]), "little")
        else:
            out += struct.pack(_SCALARS[scalar], number)
    return bytes(out)


def _constant_text(scalar, data):
    size = struct.calcsize(_SCALARS[scalar])
    data = data + bytes(-len(data) % size)
    values = struct.unpack(f"<{len(data) // size}{_SCALARS[scalar][1]}", data)
    if scalar in ("float", "double"):
        items = [f"{scalar} 0x{struct.pack('>d', v).hex().upper()}" for v in values]
    else:
        items = [f"{scalar} {v}" for v in values]
    return f"[{len(values)} x {scalar}] [{', '.join(items)}]"
