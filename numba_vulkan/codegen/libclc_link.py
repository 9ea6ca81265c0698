"""Give a kernel's math calls libclc's implementations.

Numba lowers ``math.sin`` and NumPy's ufuncs to calls of C library functions
(``tanf``, ``atan2``, ``numba_ldexp``, ...) and of LLVM intrinsics
(``llvm.sin.f32``, ``llvm.pow.f64``, ...). Vulkan has no C library, and
LLVM's SPIR-V backend turns those intrinsics into GLSL.std.450 instructions,
which drivers may implement with errors of thousands of ULP. So once
Numba's modules are linked into one, every such call is renamed (on the IR
model, :mod:`numba_vulkan.llvmir.ir`) to libclc's OpenCL function
(``_Z3sinf``, ``_Z3powdd``, ...) and the functions used are linked in from
the prepared library (:mod:`numba_vulkan.codegen.libclc`). Floating-point ``frem``
becomes libclc's ``fmod`` for the same reason: Vulkan only promises
``x - y * trunc(x / y)``, which is wrong for large quotients.

Exact operations (``fabs``, ``floor``, ``ceil``, ``trunc``, ``rint``,
``copysign``, ``fma``, ``sqrt``) stay LLVM intrinsics, C calls of them
become intrinsics, and :mod:`numba_vulkan.codegen.legalize` sees that they
stay exact. Numba's C helpers for complex powers are defined here in IR.
"""

import re

from numba_vulkan.codegen import libclc, mathlib
from numba_vulkan.llvmir import ir

_CODES = {"float": "f", "double": "d"}

#: OpenCL name of each C math function or LLVM intrinsic Numba calls, by the
#: name without its type suffix (``f`` for C's float variants).
_OPENCL = {
    **{n: n for n in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
                      "asinh", "acosh", "atanh", "exp", "exp2", "expm1", "log", "log2",
                      "log10", "log1p", "erf", "erfc", "lgamma", "tgamma", "cbrt", "pow",
                      "atan2", "hypot", "nextafter", "fmod", "remainder", "modf")},
    "numba_nextafter": "nextafter",
    "numba_ldexp": "ldexp",
    "numba_frexp": "frexp",
}

#: C functions that are exact, to the LLVM intrinsic the backend lowers exactly.
_EXACT = {"floor": "floor", "ceil": "ceil", "trunc": "trunc", "fabs": "fabs", "fma": "fma",
          "sqrt": "sqrt", "rint": "rint", "copysign": "copysign"}


def _cpow(name, ty, code):
    """Numba's C helper for ``complex ** complex`` (CPython's algorithm)."""
    fn = {op: libclc.mangled(op, *[code] * arity)
          for op, arity in (("hypot", 2), ("pow", 2), ("atan2", 2), ("exp", 1), ("log", 1),
                            ("cos", 1), ("sin", 1))}
    nan = "0x7FF8000000000000"
    return f"""
define void @{name}(ptr %pa, ptr %pb, ptr %out) {{
entry:
  %ar = load {ty}, ptr %pa
  %pai = getelementptr {{{ty}, {ty}}}, ptr %pa, i32 0, i32 1
  %ai = load {ty}, ptr %pai
  %br = load {ty}, ptr %pb
  %pbi = getelementptr {{{ty}, {ty}}}, ptr %pb, i32 0, i32 1
  %bi = load {ty}, ptr %pbi
  %b_re_zero = fcmp oeq {ty} %br, 0.0
  %b_im_zero = fcmp oeq {ty} %bi, 0.0
  %b_zero = and i1 %b_re_zero, %b_im_zero
  %a_re_zero = fcmp oeq {ty} %ar, 0.0
  %a_im_zero = fcmp oeq {ty} %ai, 0.0
  %a_zero = and i1 %a_re_zero, %a_im_zero
  %b_im_nonzero = fcmp une {ty} %bi, 0.0
  %b_re_negative = fcmp olt {ty} %br, 0.0
  %domain = or i1 %b_im_nonzero, %b_re_negative
  %vabs = call {ty} @{fn["hypot"]}({ty} %ar, {ty} %ai)
  %len0 = call {ty} @{fn["pow"]}({ty} %vabs, {ty} %br)
  %at = call {ty} @{fn["atan2"]}({ty} %ai, {ty} %ar)
  %phase0 = fmul {ty} %at, %br
  %atbi = fmul {ty} %at, %bi
  %damp = call {ty} @{fn["exp"]}({ty} %atbi)
  %len1 = fdiv {ty} %len0, %damp
  %logabs = call {ty} @{fn["log"]}({ty} %vabs)
  %turn = fmul {ty} %bi, %logabs
  %phase1 = fadd {ty} %phase0, %turn
  %len = select i1 %b_im_nonzero, {ty} %len1, {ty} %len0
  %phase = select i1 %b_im_nonzero, {ty} %phase1, {ty} %phase0
  %cos = call {ty} @{fn["cos"]}({ty} %phase)
  %sin = call {ty} @{fn["sin"]}({ty} %phase)
  %re0 = fmul {ty} %len, %cos
  %im0 = fmul {ty} %len, %sin
  %zero_re = select i1 %domain, {ty} {nan}, {ty} 0.0
  %re1 = select i1 %a_zero, {ty} %zero_re, {ty} %re0
  %im1 = select i1 %a_zero, {ty} %zero_re, {ty} %im0
  %re = select i1 %b_zero, {ty} 1.0, {ty} %re1
  %im = select i1 %b_zero, {ty} 0.0, {ty} %im1
  store {ty} %re, ptr %out
  %pouti = getelementptr {{{ty}, {ty}}}, ptr %out, i32 0, i32 1
  store {ty} %im, ptr %pouti
  ret void
}}
""", set(fn.values())


#: Numba's C helpers defined here in IR: name -> (IR text, libclc functions used).
_HELPERS = {
    # The CPU computes numba_cpowf in double; here in float, within a few ULP.
    "numba_cpow": _cpow("numba_cpow", "double", "d"),
    "numba_cpowf": _cpow("numba_cpowf", "float", "f"),
}

def _split(words):
    """``words`` split at their commas."""
    groups = [[]]
    for word in words:
        if word == ",":
            groups.append([])
        else:
            groups[-1].append(word)
    return [g for g in groups if g]


def _type(words):
    """The type that ``words`` start with."""
    if len(words) > 1 and words[1].startswith("addrspace("):
        return f"{words[0]} {words[1]}"
    return words[0]


def _declaration(function):
    """``(name, return type, parameter types)`` of a declared function."""
    words = ir.tokens(function.header)
    k = next(i for i, w in enumerate(words) if w.startswith("@"))
    callee = words[k]
    end = callee.index('"', 2) + 1 if callee.startswith('@"') else 1
    start = callee.index("(", end)
    ret = (f"{words[k - 2]} {words[k - 1]}" if words[k - 1].startswith("addrspace(")
           else words[k - 1])
    params = [_type(group) for group in _split(ir.tokens(callee[start + 1:-1]))]
    return callee[1:start].strip('"'), ret, params


def _target(name, ret, params):
    """The function a declared function is replaced with, or None to keep it."""
    if name.startswith("llvm."):
        base = name.split(".")[1]
        if base in _OPENCL and ret in _CODES:
            return libclc.mangled(_OPENCL[base], *[_CODES[ret]] * len(params))
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
    if opencl == "modf":
        return libclc.mangled(opencl, code, "P" + code)
    return libclc.mangled(opencl, *[code] * len(params))


#: float32 functions a kernel allowing approximate functions (``fastmath``)
#: takes from the driver (GLSL.std.450's, as numba.cuda's fastmath takes
#: CUDA's fast intrinsics): mangled name -> the LLVM intrinsic the backend
#: lowers to the driver's instruction. GLSL has them for float32 only.
DRIVER_FUNCTIONS = {libclc.mangled(name, *"f" * arity): f"llvm.{name}.f32"
                    for name, arity in (("sin", 1), ("cos", 1), ("exp", 1), ("exp2", 1),
                                        ("log", 1), ("log2", 1), ("pow", 2))}


#: Fast-math flags that let a float32 division or square root be inexact.
_INEXACT = frozenset(("arcp", "afn", "fast"))


def _exact_operations(module, float32=True, float64=False, nvidia_rsqrt=False):
    """Replace the kernel's float32 divisions and square roots (with
    ``float32``) and float64 divisions and square roots (with ``float64``;
    divisions by constants stay the driver's) with the library's correctly
    rounded ones (:mod:`numba_vulkan.codegen.mathlib.exact32`,
    :mod:`~numba_vulkan.codegen.mathlib.exact64`; float32 roots by NVIDIA's
    reciprocal root with ``nvidia_rsqrt``), in place; return the library
    names called. float64 ones stay the library's in kernels that allow
    inexact ones: they are faster than the driver's (a root on an H200:
    0.29 ms against 0.50)."""
    from numba_vulkan.codegen.mathlib import exact32, exact64
    called = {}

    def replaced(inst):
        if inst.name is None:
            return inst
        exact = float32 and not _INEXACT & set(inst.flags)
        if exact and inst.opcode == "fdiv" and inst.type is None \
                and inst.operands[0].type == "float" and not _is_constant(inst.operands[1].value):
            name, ty, args = exact32.DIVIDE, "float", inst.operands
        elif exact and inst.opcode == "call" and inst.callee == "@llvm.sqrt.f32":
            name = exact32.SQRT_NVIDIA if nvidia_rsqrt else exact32.SQRT
            ty, args = "float", inst.operands
        elif float64 and inst.opcode == "call" and inst.callee == "@llvm.sqrt.f64":
            name, ty, args = exact64.SQRT, "double", inst.operands
        elif float64 and inst.opcode == "fdiv" and inst.type is None \
                and inst.operands[0].type == "double" and not _is_constant(inst.operands[1].value):
            name, ty, args = exact64.DIVIDE, "double", inst.operands
        else:
            return inst
        called[name] = (ty, len(args))
        values = ", ".join(f"{ty} {a.value}" for a in args)
        return ir.instruction(f'{inst.name} = call {ty} @"{mathlib.symbol(name)}"({values})')

    for function in module.functions:
        for block in function.blocks or ():
            block.instructions = [replaced(inst) for inst in block.instructions]
    for name, (ty, arity) in sorted(called.items()):
        params = ", ".join([ty] * arity)
        module.items.append(ir.parse(
            f'declare {ty} @"{mathlib.symbol(name)}"({params})').items[0])
    return set(called)


def _is_constant(value):
    return not str(value).startswith("%")


def link(module, approximate=False, exact_float32=False, exact_float64=False,
         nvidia_rsqrt=False):
    """Point the math calls of a kernel's module at our math library
    (:mod:`numba_vulkan.codegen.mathlib`) and, for what it lacks, libclc.

    Args:
        module: The kernel's modules linked into one, as the IR model
            (:mod:`numba_vulkan.llvmir.ir`); rewritten in place.
        approximate: Whether the kernel allows approximate functions: then
            the float32 functions of :data:`DRIVER_FUNCTIONS` are the driver's.
        exact_float32: Whether the kernel's float32 divisions and square
            roots are to be correctly rounded (the library's, in float32).
        exact_float64: Whether the kernel's float64 divisions and square
            roots are the library's (correctly rounded, as the driver's, but
            faster).
        nvidia_rsqrt: Whether the target's float32 reciprocal root is
            NVIDIA's (:attr:`~numba_vulkan.base.target.TargetDescription.nvidia_rsqrt`).

    Returns:
        Module texts: Numba's C helpers, the library's and libclc's
        functions the kernel uses (if any), then the kernel's, rewritten.
    """
    renames, used, helpers, own = {}, set(), set(), set()
    declared = {f.name[1:].strip('"') for f in module.functions}
    for function in module.functions:
        if function.blocks is not None:
            continue
        name, ret, params = _declaration(function)
        if name in _HELPERS:
            helpers.add(name)
        target = _target(name, ret, params)
        if target is None:
            continue
        if approximate and target in DRIVER_FUNCTIONS:
            target = DRIVER_FUNCTIONS[target]
        elif mathlib.provides(target):
            own.add(target)
            target = mathlib.symbol(target)
        elif not target.startswith("llvm."):
            used.add(target)
        renames[function.name] = f'@"{target}"' if "." in target and \
            not target.startswith("llvm.") else f"@{target}"
        if target in declared:
            # Numba declares an intrinsic that a renamed C call already
            # declared (``x // 3.0`` and ``np.floor(x)``): once is enough.
            module.items.remove(function)
        else:
            function.header = f"declare {ret} {renames[function.name]}({', '.join(params)})"
            declared.add(target)
    for function in module.functions:
        for block in function.blocks or ():
            block.instructions = [_call_of_library(inst, renames, used)
                                  for inst in block.instructions]
    for fn in sorted(used - declared):
        if fn.startswith("_Z4fmod"):
            ty = "float" if fn.endswith("f") else "double"
            module.items.append(ir.parse(f"declare {ty} @{fn}({ty}, {ty})").items[0])
    if exact_float32 or exact_float64:
        own |= _exact_operations(module, float32=exact_float32, float64=exact_float64,
                                 nvidia_rsqrt=nvidia_rsqrt)
    out = [str(module)]
    for name in sorted(helpers):
        helper, names = _HELPERS[name]
        declarations = [f"declare {_signature(library_name)}" for library_name in sorted(names)]
        out.insert(-1, helper + "\n".join(declarations) + "\n")
        used |= names
    if own:
        text, calls = mathlib.module(frozenset(own))
        out.insert(-1, text)
        used |= calls
    if not used:
        return out
    return out[:-1] + [mark_own_divisions(libclc.library().module(sorted(used)))] + out[-1:]


#: Metadata that marks a float32 division or square root in libclc's own
#: float32 code: :func:`numba_vulkan.codegen.legalize.exact_float32` leaves
#: those to the driver.
OWN = "!nv.libclc.own"

#: libclc's float32 functions whose divisions and square roots stay correctly
#: rounded: ``sqrt`` itself, and those that leave 4 ULP when each of them
#: may be off as Vulkan allows (2.5 ULP, square roots 3), as
#: ``tests/codegen/test_libclc_divisions.py`` simulates on the host (worst
#: errors over 200,000 inputs, exact -> simulated: ``atan2`` 2 -> 6,
#: ``erfc`` 4 -> 6, ``tan`` 3 -> 5, ``acosh`` 1 -> 5, ``hypot`` 1 -> 4);
#: ``tgamma`` and ``lgamma`` (10 divisions each) are kept too.
EXACT_OWN = frozenset({"_Z4sqrtf", "_Z5atan2ff", "_Z4erfcf", "_Z3tanf", "_Z5acoshf",
                       "_Z5hypotff", "_Z6tgammaf", "__nv.unfixed._Z6lgammaf"})

_OWN_OPERATION = re.compile(r"= (?:fdiv (?:[a-z]+ )*float |(?:tail )?call (?:[a-z]+ )*float "
                            r"@llvm\.sqrt\.f32\()")


def mark_own_divisions(text):
    """The libclc module ``text`` with each float32 division and square root
    of a function returning float32 (but those of :data:`EXACT_OWN`) marked
    :data:`OWN`.

    libclc's float32 functions meet their error bounds with OpenCL's float32
    division, which may be 2.5 ULP off as Vulkan's may, so computing it in
    float64 there buys nothing but time (``erf``'s five divisions); the
    kernel's own divisions stay correctly rounded. A division LLVM's
    optimiser rebuilds or merges with another loses the mark and stays
    exact.
    """
    out, marking = [], False
    for line in text.splitlines():
        if line.startswith("define "):
            header = _DEFINED.match(line)
            marking = bool(header) and header.group(2) not in EXACT_OWN
        elif line == "}":
            marking = False
        elif marking and _OWN_OPERATION.search(line):
            line += f", {OWN} !{{}}"
        out.append(line)
    return "\n".join(out) + "\n"


_DEFINED = re.compile(r"define (?:[a-z_]+ )*(float) @([-\w.$]+)\(")


def _call_of_library(inst, renames, used):
    """``inst`` calling the function it is renamed to; a float remainder as a
    call of libclc's ``fmod``."""
    if inst.opcode == "call" and inst.callee in renames:
        inst.callee = renames[inst.callee]
    if inst.opcode != "frem" or inst.operands[0].type not in _CODES:
        return inst
    ty = inst.operands[0].type
    fn = libclc.mangled("fmod", _CODES[ty], _CODES[ty])
    used.add(fn)
    a, b = (o.value for o in inst.operands)
    return ir.instruction(f"{inst.name} = call {ty} @{fn}({ty} {a}, {ty} {b})")


def _signature(name):
    """``ret @name(params)`` of a libclc function with float/double parameters."""
    digits = name[2:len(name) - len(name[2:].lstrip("0123456789"))]
    codes = name[2 + len(digits) + int(digits):]
    types = [{"f": "float", "d": "double"}[c] for c in codes]
    return f"{types[0]} @{name}({', '.join(types)})"
