"""The registry of the library's functions, and the module a kernel links.

Each function is registered under the mangled OpenCL name libclc gives it
(``_Z3logf``), so that :mod:`numba_vulkan.codegen.libclc_link` can take it
in libclc's place; it is defined as ``nv.math.<that name>``, so it
never meets a libclc definition of the same name.
"""

import functools
import re

from llvmlite import ir

from numba_vulkan.codegen.mathlib import dsl

_CODES = {dsl.F32: "f", dsl.F64: "d"}
_TYPES = {"float": dsl.F32, "double": dsl.F64}

#: mangled name -> (writer, float type, arity)
_DEFINITIONS = {}


def define(name, ty, arity=1):
    """Register the decorated writer ``writer(m, *args)`` as the OpenCL
    function ``name`` of ``ty`` (``"float"`` or ``"double"``) and ``arity``."""
    llty = _TYPES[ty]

    def register(writer):
        _DEFINITIONS[f"_Z{len(name)}{name}{_CODES[llty] * arity}"] = (writer, llty, arity)
        return writer
    return register


def operation(name, ty, arity):
    """Register the decorated writer as the library's ``name``: an operation
    the linker substitutes for an LLVM instruction, not a libclc function."""
    def register(writer):
        _DEFINITIONS[name] = (writer, _TYPES[ty], arity)
        return writer
    return register


def provides(mangled):
    """Whether the library defines the libclc function ``mangled``."""
    return mangled in _DEFINITIONS


def symbol(mangled):
    """The name the library's version of ``mangled`` is defined under."""
    return f"nv.math.{mangled}"


@functools.lru_cache(maxsize=64)
def module(names):
    """``(text, calls)``: LLVM IR text defining the library's functions
    ``names`` (a frozenset of mangled names), and the libclc functions they
    call."""
    mod = ir.Module(name="nv.math")
    calls = set()
    for name in sorted(names):
        writer, ty, arity = _DEFINITIONS[name]
        m = dsl.Function(mod, symbol(name), ty, arity)
        m.ret(writer(m, *m.args))
        calls |= m.calls
    # llvmlite quotes every name; the passes that read the linked texts
    # before LLVM does take labels as LLVM prints them, unquoted. The
    # module's own header lines (target triple and data layout, empty here)
    # would clash with the kernel's.
    text = _QUOTED.sub(r"\1\2", str(mod))
    body = "\n".join(line for line in text.splitlines()
                     if not line.startswith(("target ", "; ModuleID", "source_filename")))
    return body + "\n", frozenset(calls)


_QUOTED = re.compile(r'([%@])"([-a-zA-Z$._][-a-zA-Z$._0-9]*)"')
