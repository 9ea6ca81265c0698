"""Give a kernel's math calls libclc's implementations.

Numba lowers ``math.sin`` and NumPy's ufuncs to calls of C library functions
(``tanf``, ``atan2``, ``numba_gamma``, ...) and of LLVM intrinsics
(``llvm.sin.f32``, ``llvm.pow.f64``, ...). Vulkan has no C library, and
LLVM's SPIR-V backend turns those intrinsics into GLSL.std.450 instructions,
which drivers may implement with errors of thousands of ULP. So before
linking, every such call is renamed to libclc's OpenCL function
(``_Z3sinf``, ``_Z3powdd``, ...) and the functions used are linked in from
the prepared library (:mod:`numba_vulkan.libclc`). Floating-point ``frem``
becomes libclc's ``fmod`` for the same reason: Vulkan only promises
``x - y * trunc(x / y)``, which is wrong for large quotients.

Intrinsics that are exact in every Vulkan implementation (``fabs``,
``floor``, ``ceil``, ``trunc``, ``rint``, ``copysign``, ``fma``) stay as
they are; ``sqrt`` stays as ``llvm.sqrt``, which is also what libclc's
``sqrt`` is.
"""

import re

from numba_vulkan import libclc
from numba_vulkan.errors import UnsupportedError

_CODES = {"float": "f", "double": "d"}

#: OpenCL name of each C math function or LLVM intrinsic Numba calls, by the
#: name without its type suffix (``f`` for C's float variants).
_OPENCL = {
    **{n: n for n in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
                      "asinh", "acosh", "atanh", "exp", "exp2", "expm1", "log", "log2",
                      "log10", "log1p", "erf", "erfc", "lgamma", "tgamma", "cbrt", "pow",
                      "atan2", "hypot", "nextafter", "fmod", "remainder")},
    "numba_gamma": "tgamma",
    "numba_nextafter": "nextafter",
    "numba_ldexp": "ldexp",
    "numba_frexp": "frexp",
}

#: C functions that are exact, to the LLVM intrinsic the backend lowers exactly.
_EXACT = {"floor": "floor", "ceil": "ceil", "trunc": "trunc", "fabs": "fabs", "fma": "fma",
          "sqrt": "sqrt", "rint": "rint", "copysign": "copysign"}

#: Numba's C helpers that have no Vulkan implementation, and what they do.
_UNSUPPORTED = {
    "numba_cpow": "complex power", "numba_cpowf": "complex power",
}

_DECLARE = re.compile(r'^declare (?P<ret>\S+) @(?P<name>"[^"]*"|[-\w.$]+)\((?P<params>.*)\)'
                      r'(?P<attrs>[^)]*)$')
_FREM = re.compile(r"^(?P<lhs>\s*%\S+) = frem (?P<flags>(?:[a-z]+ )*)(?P<ty>float|double) "
                   r"(?P<a>[^,]+), (?P<b>\S+)\s*$")


def _parameter_types(params):
    from numba_vulkan.codegen.logical import split_top
    types = []
    for param in split_top(params):
        words = param.split()
        # Drop the parameter's name and attributes; keep its type.
        ty = words[0]
        if words[1:2] == ["addrspace"] or (len(words) > 1 and words[1].startswith("addrspace(")):
            ty += " " + words[1]
        types.append(ty)
    return types


def _target(name, ret, params):
    """The function a declared function is replaced with, or None to keep it."""
    if name.startswith("llvm."):
        parts = name.split(".")
        base = parts[1]
        ty = ret if ret in _CODES else None
        if base in _OPENCL and ty and base not in ("tgamma",):
            return libclc.mangled(_OPENCL[base], *[_CODES[ty]] * len(params))
        return None
    base = name
    ty = ret if ret in _CODES else None
    if ty is None:
        return None
    if base.endswith("f") and base[:-1] in {**_OPENCL, **_EXACT} and ty == "float":
        base = base[:-1]
    if base in _EXACT:
        return f"llvm.{_EXACT[base]}.{'f32' if ty == 'float' else 'f64'}"
    if base not in _OPENCL:
        return None
    code = _CODES[ty]
    opencl = _OPENCL[base]
    if opencl == "ldexp":
        return libclc.mangled(opencl, code, "i")
    if opencl == "frexp":
        return libclc.mangled(opencl, code, "Pi")
    return libclc.mangled(opencl, *[code] * len(params))


def _rename(text):
    """Rename the math calls of one module; return it and the libclc names used."""
    renames, used, lines, declared = {}, set(), [], set()
    for line in text.splitlines():
        m = _DECLARE.match(line)
        if m:
            name = m.group("name").strip('"')
            if name in _UNSUPPORTED:
                raise UnsupportedError(f"{_UNSUPPORTED[name]} ({name}) is not available in "
                                       "Vulkan kernels")
            params = _parameter_types(m.group("params"))
            target = _target(name, m.group("ret"), params)
            if target is not None:
                renames[m.group("name")] = target
                if not target.startswith("llvm."):
                    used.add(target)
                if target in declared:
                    continue
                line = f"declare {m.group('ret')} @{target}({', '.join(params)})"
            declared.add(name if target is None else target)
        lines.append(line)
    out = "\n".join(lines) + "\n"
    for old, new in renames.items():
        out = re.sub(re.escape("@" + old) + r"(?=\()", "@" + new, out)
    return _replace_frem(out, used)


def _replace_frem(text, used):
    if " frem " not in text:
        return text, used
    lines, declared = [], set()
    for line in text.splitlines():
        m = _FREM.match(line)
        if m:
            ty = m.group("ty")
            fn = libclc.mangled("fmod", _CODES[ty], _CODES[ty])
            declared.add((fn, ty))
            line = f"{m.group('lhs')} = call {ty} @{fn}({ty} {m.group('a')}, {ty} {m.group('b')})"
        lines.append(line)
    for fn, ty in sorted(declared):
        used.add(fn)
        if not re.search(rf"^declare \S+ @{fn}\(", text, re.M):
            lines.append(f"declare {ty} @{fn}({ty}, {ty})")
    return "\n".join(lines) + "\n", used


def link(sources):
    """Point the math calls of a kernel's modules at libclc.

    Args:
        sources: IR text of the kernel's modules, the entry point's last.

    Returns:
        The modules, rewritten, with a module of the libclc functions they
        use (if any) inserted before the entry point's.
    """
    out, used = [], set()
    for text in sources:
        renamed, names = _rename(text)
        out.append(renamed)
        used |= names
    if not used:
        return out
    library = libclc.library()
    return out[:-1] + [library.module(sorted(used))] + out[-1:]
