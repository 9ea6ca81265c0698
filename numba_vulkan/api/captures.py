"""Device arrays a kernel reads from its module's globals or its closure.

numba.cuda lets a kernel read ``d`` after ``d = cuda.to_device(x)`` at
module level (or in an enclosing function). Numba types a global or a
closure variable as a constant, and a Vulkan kernel can only reach device
memory through a binding, so such an array becomes a parameter: the kernel
is compiled from a copy of the function whose loads of those names read
extra parameters appended to its own, and each launch passes the arrays
the names hold then. Only the bytecode's load instructions change, in
place (same length, so line numbers and jumps stay), which needs the
CPython bytecode this module knows (3.11); elsewhere a capture is an
:class:`~numba_vulkan.base.errors.UnsupportedError` naming it. Imports
neither Numba nor Vulkan.
"""

import dis
import sys
import types

from numba_vulkan.base.errors import UnsupportedError

_LOAD_GLOBAL = dis.opmap["LOAD_GLOBAL"]
_LOAD_DEREF = dis.opmap["LOAD_DEREF"]
_LOAD_FAST = dis.opmap["LOAD_FAST"]
_PUSH_NULL = dis.opmap.get("PUSH_NULL")
_NOP = dis.opmap["NOP"]
_LOCAL_OPS = frozenset(dis.haslocal) | frozenset(dis.hasfree)
_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]


def find(func, wanted):
    """The names of globals and closure variables of ``func`` whose value
    ``wanted(value)`` accepts, in the order the code first loads them."""
    names = []
    cells = dict(zip(func.__code__.co_freevars, func.__closure__ or ()))
    for ins in dis.get_instructions(func.__code__):
        name = ins.argval
        if ins.opcode == _LOAD_GLOBAL and name in func.__globals__:
            value = func.__globals__[name]
        elif ins.opcode == _LOAD_DEREF and name in cells:
            try:
                value = cells[name].cell_contents
            except ValueError:
                continue
        else:
            continue
        if name not in names and wanted(value):
            names.append(name)
    return names


def values(func, names):
    """What ``names`` (from :func:`find`) hold now."""
    cells = dict(zip(func.__code__.co_freevars, func.__closure__ or ()))
    return tuple(cells[n].cell_contents if n in cells else func.__globals__[n] for n in names)


def with_parameters(func, names):
    """A copy of ``func`` that takes ``names`` as parameters after its own
    and reads them there instead of from its globals or closure."""
    code = func.__code__
    argc = code.co_argcount
    if sys.version_info[:2] != (3, 11) or code.co_kwonlyargcount \
            or code.co_flags & (0x04 | 0x08):
        raise UnsupportedError(
            f"{func.__qualname__} reads the device array(s) {', '.join(names)} from its "
            "globals or closure, which numba_vulkan passes as extra parameters only to a "
            "kernel without *args, **kwargs or keyword-only parameters, on Python 3.11: "
            "pass them as arguments")
    shift = len(names)
    slot = {name: argc + k for k, name in enumerate(names)}
    raw = bytearray(code.co_code)
    for ins in dis.get_instructions(code):
        at, op = ins.offset, ins.opcode
        if op == _LOAD_GLOBAL and ins.argval in slot:
            if at and raw[at - 2] == _EXTENDED_ARG:
                raise UnsupportedError(f"{func.__qualname__} uses too many global names to "
                                       f"pass the device array {ins.argval} it reads from "
                                       "its globals as a parameter: pass it as an argument")
            caches = dis._inline_cache_entries[op]
            units = [(_PUSH_NULL, 0)] if ins.arg & 1 else []
            units.append((_LOAD_FAST, slot[ins.argval]))
            units += [(_NOP, 0)] * (1 + caches - len(units))
            raw[at:at + 2 * len(units)] = bytes(b for unit in units for b in unit)
        elif op == _LOAD_DEREF and ins.argval in slot:
            raw[at:at + 2] = bytes((_LOAD_FAST, slot[ins.argval]))
        elif op in _LOCAL_OPS and ins.arg >= argc:
            if ins.arg + shift > 255 or (at and raw[at - 2] == _EXTENDED_ARG):
                raise UnsupportedError(f"{func.__qualname__} has too many local variables "
                                       "to pass the device arrays it captures as "
                                       "parameters: pass them as arguments")
            raw[at + 1] = ins.arg + shift
    new = code.replace(co_code=bytes(raw), co_argcount=argc + shift,
                       co_nlocals=code.co_nlocals + shift,
                       co_varnames=(*code.co_varnames[:argc], *names,
                                    *code.co_varnames[argc:]))
    copy = types.FunctionType(new, func.__globals__, func.__name__, None, func.__closure__)
    copy.__qualname__ = func.__qualname__
    copy.__module__ = func.__module__
    return copy
