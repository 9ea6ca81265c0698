"""Exceptions raised in kernels: the calling convention and the status code.

Numba's minimal calling convention returns an error code from a function
that raises, and propagates a callee's code to its caller. Its codes only
tell apart the raise sites of one function, and a kernel's code reaches
the host through the status buffer (see :mod:`numba_vulkan.base.abi`), so here a
code names its raise site everywhere: it is a hash of the exception class,
its arguments and its location (function, file name, line). Equal raise
sites get equal codes in every process and every checkout, which keeps the
generated IR (and so the kernel cache key, and an AOT build) stable.

:func:`exceptions` recovers, for a compiled kernel, what each code it may
return stands for, as JSON-compatible data for the compiled kernel's
metadata, from which the dispatcher raises it after the launch.
"""

import builtins
import hashlib
import os
import re
import threading

from numba.core import callconv

_lock = threading.Lock()
#: Every raise site seen in this process: code -> description.
_raise_sites = {}


def _describe(exc, exc_args, locinfo):
    if exc is None:
        kind = "Exception"
    elif getattr(builtins, exc.__name__, None) is exc:
        kind = exc.__name__
    else:
        kind = f"{exc.__module__}.{exc.__qualname__}"
    args = tuple(exc_args or ())
    message = str(args[0]) if len(args) == 1 else (", ".join(map(str, args)) if args else "")
    function, filename, line = locinfo if locinfo else (None, None, None)
    return {"type": kind, "message": message, "function": function, "file": filename,
            "line": line}


def _code(description):
    # The file by its name alone: its folder would make the code, and so the
    # module, differ between two checkouts of the same source (AOT builds
    # are byte-identical across checkouts).
    named = dict(description, file=os.path.basename(description["file"] or "") or None)
    digest = hashlib.sha256(repr(sorted(named.items())).encode()).digest()
    # Positive, and above the small codes the calling convention reserves.
    return int.from_bytes(digest[:4], "little") % (2 ** 31 - 1024) + 1024


class _CallHelper(callconv._MinimalCallHelper):
    def _add_exception(self, exc, exc_args, locinfo):
        description = _describe(exc, exc_args, locinfo)
        code = _code(description)
        with _lock:
            _raise_sites[code] = description
        self.exceptions[code] = exc, exc_args, locinfo
        return code


class VulkanCallConv(callconv.MinimalCallConv):
    """Numba's minimal calling convention with codes unique to each raise site."""

    def _make_call_helper(self, builder):
        return _CallHelper()


_RETURN_CODE = re.compile(r"\bret i32 (\d+)\b")


def exceptions(modules):
    """What each error code that the IR ``modules`` may return stands for.

    Returns:
        ``{str(code): description}``; a description has the exception's
        ``type`` (a builtin's name, else ``module.qualname``), ``message``,
        and the ``function``, ``file`` and ``line`` that raise it (or None).
    """
    codes = {int(c) for text in modules for c in _RETURN_CODE.findall(text)}
    with _lock:
        return {str(code): dict(_raise_sites[code]) for code in sorted(codes)
                if code in _raise_sites}

