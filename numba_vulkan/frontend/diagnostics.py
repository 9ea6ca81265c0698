"""Short errors for kernels Numba cannot type or lower.

Numba reports a typing failure as dozens of lines (its own traceback, every
candidate overload, the passes it ran), and a name a module lacks
(``nv.cg.this_grid()``) as a bare ``AttributeError`` without the kernel's
line. The compiler turns both into one :class:`~numba_vulkan.base.errors.CompilerError`:
the kernel, the source file and line, the line itself, Numba's reason in a
line or two, and, where the name is one of numba.cuda's, what numba_vulkan
calls it. Numba's full exception stays reachable as the error's
``__context__``.
"""

import linecache
import math
import os
import re
import types

from numba_vulkan.base.errors import CompilerError, KernelTypeError, UnsupportedError

#: numba.cuda names: (what numba_vulkan calls it, or None, and a note).
CUDA_NAMES = {
    "threadIdx": ("nv.local_id(axis)", "threadIdx.x is nv.local_id(0)"),
    "blockIdx": ("nv.group_id(axis)", "blockIdx.x is nv.group_id(0)"),
    "blockDim": ("nv.local_size(axis)", "blockDim.x is nv.local_size(0)"),
    "gridDim": ("nv.num_groups(axis)", "gridDim.x is nv.num_groups(0)"),
    "grid": ("nv.grid(ndim)", "cuda.grid(1) is nv.global_id(0); cuda.grid(2) is "
             "(nv.global_id(0), nv.global_id(1))"),
    "gridsize": ("nv.gridsize(ndim)", "cuda.gridsize(1) is nv.global_size(0)"),
    "syncthreads": ("nv.barrier()", "it also makes workgroup memory writes visible"),
    "syncwarp": ("nv.subgroup.barrier()", "the subgroup is Vulkan's warp"),
    **{name: (f"nv.subgroup.{native}", "the subgroup is Vulkan's warp; the mask is ignored")
       for name, native in (("shfl_sync", "shuffle(value, lane)"),
                            ("shfl_up_sync", "shuffle_up(value, delta)"),
                            ("shfl_down_sync", "shuffle_down(value, delta)"),
                            ("shfl_xor_sync", "shuffle_xor(value, mask)"))},
    **{name: (f"nv.subgroup.{native}", "the subgroup is Vulkan's warp")
       for name, native in (("all_sync", "all(predicate)"), ("any_sync", "any(predicate)"),
                            ("eq_sync", "all_equal(predicate)"),
                            ("ballot_sync", "ballot(predicate)"),
                            ("activemask", "ballot(True)"))},
    "lanemask_lt": ("(1 << nv.lane_id()) - 1", "a mask of the lower lanes"),
    **{name: (f"nv.{name}(x)", "the same function") for name in ("popc", "brev", "clz", "ffs")},
    "match_any_sync": ("a comparison with nv.subgroup.shuffle(value, k) for each lane k",
                       "one shuffle per lane"),
    "match_all_sync": ("nv.subgroup.all_equal(value)", "its predicate"),
    "threadfence_block": ("nv.workgroup_fence()", "a fence, not a barrier"),
    "threadfence": ("nv.fence()", "device-wide"),
    "threadfence_system": ("nv.fence()", "device-wide: kernels have no wider scope"),
    "syncthreads_count": ("nv.barrier_count(predicate)", "a barrier that counts"),
    "syncthreads_and": ("nv.barrier_and(predicate)", "a barrier that combines"),
    "syncthreads_or": ("nv.barrier_or(predicate)", "a barrier that combines"),
    "cg": (None, "there are no cooperative groups: a grid-wide synchronisation is the end "
           "of one launch and the start of the next"),
    "this_grid": (None, "there are no cooperative groups: a grid-wide synchronisation is "
                  "the end of one launch and the start of the next"),
    "shared": ("nv.shared.array(shape, dtype)", "workgroup memory"),
    "local": ("nv.local.array(shape, dtype)", "memory private to each invocation"),
    "const": ("nv.const.array_like(arr)", "or read a global NumPy array in the kernel: it "
              "becomes a constant array"),
    "atomic": ("nv.atomic", "add, sub, min, max, and_, or_, xor, exch and cas"),
    "inc": ("nv.atomic.inc(array, index, value)", "it wraps to 0 at value"),
    "dec": ("nv.atomic.dec(array, index, value)", "it wraps to value at 0"),
    "compare_and_swap": ("nv.atomic.compare_and_swap(array, expected, value)", "on array[0]; "
                         "nv.atomic.cas(array, index, expected, value) takes an index"),
    "laneid": ("nv.lane_id()", "the index in the subgroup, Vulkan's warp"),
    "warpsize": ("nv.subgroup_size()", "the device's: 8 on lavapipe, 32 on NVIDIA GPUs"),
    "selp": ("nv.selp(condition, a, b)", "or a conditional expression: a if condition else b"),
    "fma": ("nv.fma(a, b, c)", "a * b + c rounded once"),
    # Python 3.10 has no math.cbrt.
    "cbrt": ("math.cbrt(x)", "Python's cube root") if hasattr(math, "cbrt") else
            ("np.cbrt(x)", "NumPy's cube root"),
    "jit": ("nv.jit", "kernels call numba.njit functions as device functions"),
    "to_device": ("nv.to_device(array)", "on the host, not in a kernel"),
    "device_array": ("nv.device_array(shape, dtype)", "on the host, not in a kernel"),
    "device_array_like": ("nv.device_array_like(array)", "on the host, not in a kernel"),
}

#: The names of CUDA_NAMES that ``numba_vulkan.cuda`` has, with numba.cuda's
#: meaning (a test checks that it does).
CUDA_MODULE_NAMES = ("threadIdx", "blockIdx", "blockDim", "gridDim", "grid", "gridsize",
                     "syncthreads", "syncthreads_count", "syncthreads_and",
                     "syncthreads_or", "threadfence", "threadfence_block",
                     "threadfence_system", "shared", "local", "const", "atomic", "jit", "to_device",
                     "device_array", "device_array_like", "laneid", "warpsize", "syncwarp",
                     "shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync",
                     "all_sync", "any_sync", "eq_sync", "ballot_sync", "activemask",
                     "lanemask_lt", "match_any_sync", "match_all_sync", "popc", "brev",
                     "clz", "ffs", "selp", "fma", "cbrt")

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: "During: typing of call at /path/file.py (12)" and "File "file.py", line 12:".
_AT = re.compile(r" at (\S[^\n]*?) \((\d+)\)\s*$", re.M)
_FILE = re.compile(r'^File "([^"]+)", line (\d+)', re.M)
_CUDA_MODULE = re.compile(r"Unknown attribute '(\w+)' of type Module\(<module 'numba\.cuda")
_OTHER_TARGET = re.compile(r"cannot find any matches for function '<intrinsic (\w+)>' for the "
                           r"current target")
_UNTYPED = re.compile(r"Untyped global name '(\w+)'")
_NUMBA_CUDA_OWN = re.compile(r"(\w+) is numba\.cuda's own, for NVIDIA's CUDA target")


def definition(pyfunc):
    """``(file, line)`` of a Python function's ``def`` (past its decorators)."""
    code = getattr(pyfunc, "__code__", None)
    if code is None:
        return None, None
    line = code.co_firstlineno
    while linecache.getline(code.co_filename, line).lstrip().startswith("@"):
        line += 1
    return code.co_filename, line


def located(pyfunc, reason):
    """A message on kernel ``pyfunc`` at its ``def`` line."""
    return message(pyfunc.__qualname__, definition(pyfunc), reason)


def message(kernel, location, reason, hint=None):
    """The text of an error on ``kernel`` at ``location`` (file, line): the
    location, the reason, the source line and a hint."""
    filename, line = location
    text = f"cannot compile kernel {kernel}: "
    if filename:
        text += f"{filename}:{line}: "
    text += reason
    source = linecache.getline(filename, line).strip() if filename else ""
    if source:
        text += f"\n    {source}"
    if hint:
        text += f"\n{hint}"
    return text


def cuda_hint(name):
    """What numba_vulkan calls numba.cuda's ``name``, as a line; None if nothing."""
    known = CUDA_NAMES.get(name)
    if known is None:
        return None
    equivalent, note = known
    if equivalent is None:
        return f"numba.cuda's {name} has no numba_vulkan equivalent: {note}"
    text = f"numba.cuda's {name} is {equivalent} in numba_vulkan ({note})"
    if name in CUDA_MODULE_NAMES:
        text += f"; 'from numba_vulkan import cuda' has cuda.{name}"
    return text


def _reason(text):
    """Numba's reason: the first line after its header (two when the first
    announces the second, as "found for signature:" does)."""
    lines = [line.strip() for line in _ANSI.sub("", text).splitlines()]
    # "- Resolution failure for literal arguments:" heads Numba's first attempt.
    lines = [line for line in lines if line and not line.startswith(("Failed in ",
                                                                      "- Resolution failure"))]
    if not lines:
        return "Numba could not compile it"
    reason = lines[0]
    if reason.endswith(":") and len(lines) > 1 and lines[1].startswith(">>>"):
        reason += " " + lines[1][3:].strip()
    return reason


def _location_in(text):
    """The first (innermost) source location Numba's message names outside
    Numba's own files (a method such as ``a.max()`` fails inside Numba's
    implementation of it, a line the user did not write); the innermost of
    all if every one is Numba's."""
    found = []
    for pattern in (_AT, _FILE):
        for m in pattern.finditer(text):
            name = m.group(1)
            # "<...>" names source held in linecache (generated code), not a file.
            found.append((m.start(), name if name.startswith("<") else os.path.abspath(name),
                          int(m.group(2))))
    if not found:
        return None
    found.sort()
    own = [item for item in found if not _in_numba(item[1])]
    _, filename, line = (own or found)[0]
    return filename, line


def _in_numba(filename):
    # Only a failing compile asks, and Numba is imported by then.
    import numba
    return filename.startswith(os.path.dirname(os.path.abspath(numba.__file__)) + os.sep)


def _loc(value):
    filename, line = getattr(value, "filename", None), getattr(value, "line", None)
    if isinstance(filename, str) and isinstance(line, int):
        return filename, line
    return None


def numba_error(pyfunc, exc):
    """The CompilerError for a ``NumbaError`` raised typing or lowering ``pyfunc``."""
    text = _ANSI.sub("", str(exc))
    location = _location_in(text) or _loc(getattr(exc, "loc", None)) or definition(pyfunc)
    hint = None
    for pattern in (_CUDA_MODULE, _OTHER_TARGET, _UNTYPED, _NUMBA_CUDA_OWN):
        m = pattern.search(text)
        if m:
            hint = cuda_hint(m.group(1))
            break
    own = _OWN_TYPING.search(text)
    if own:
        # Our own typing refused the arguments (an atomic's types, a shared
        # array's shape): its reason, not Numba's list of the candidates tried.
        error = KernelTypeError if own.group(1).startswith("nv.atomic.") else CompilerError
        return error(message(pyfunc.__qualname__, location, own.group(1), hint),
                     kernel=pyfunc.__qualname__)
    return CompilerError(message(pyfunc.__qualname__, location, _reason(text), hint),
                         kernel=pyfunc.__qualname__)


#: A typing error of numba_vulkan's kernel API (atomics, shared and local
#: arrays), which Numba reports inside its "No implementation of function"
#: text; an atomic's is a TypeError, as numba.cuda's is.
_OWN_TYPING = re.compile(r"raised a specific error:\s*TypingError: (nv\.[^\n]+)")

_BYTECODE = re.compile(r"unsupported opcode \((\w+)\) found\. Raised from (.+) \((\d+)\)")
#: What the Python bytecode Numba cannot compile comes from, and what to do.
_OPCODES = {
    "IMPORT_NAME": "an import inside the kernel: import at the top of the module, and use "
                   "the name in the kernel",
    "IMPORT_FROM": "an import inside the kernel: import at the top of the module",
}


def bytecode_error(pyfunc, exc):
    """The CompilerError for Python that Numba cannot compile
    (``UnsupportedBytecodeError``, which is no ``NumbaError``)."""
    text = str(exc)
    m = _BYTECODE.search(text)
    location = ((os.path.abspath(m.group(2)), int(m.group(3))) if m else definition(pyfunc))
    reason = (f"{_OPCODES.get(m.group(1), f'Python that kernels cannot run ({m.group(1)})')}"
              if m else text)
    return CompilerError(message(pyfunc.__qualname__, location, reason),
                         kernel=pyfunc.__qualname__)


def traceback_location(tb):
    """The innermost Numba IR location among the frames of a traceback, or
    None: the typing constraint or the lowering of the failing instruction
    has one."""
    found = None
    while tb is not None:
        frame_locals = tb.tb_frame.f_locals
        for value in (frame_locals.get("loc"), getattr(frame_locals.get("self"), "loc", None)):
            location = _loc(value)
            if location is not None:
                found = location
        tb = tb.tb_next
    return found


def attribute_error(pyfunc, exc):
    """The CompilerError for a name a module lacks or a construct the Vulkan
    target does not lower; None if ``exc`` is another AttributeError (a bug,
    not the kernel's)."""
    module, name = getattr(exc, "obj", None), getattr(exc, "name", None)
    location = traceback_location(exc.__traceback__) or definition(pyfunc)
    if type(module).__name__ == "VulkanTargetContext" and name:
        # Numba lowers the construct with a method only its CPU target has.
        return UnsupportedError(message(
            pyfunc.__qualname__, location, "kernels cannot use this construct (Numba lowers "
            f"it with {name}, which the Vulkan target does not have)"),
            kernel=pyfunc.__qualname__)
    if not isinstance(module, types.ModuleType) or not name:
        return None
    reason = f"module {module.__name__} has no attribute {name!r}"
    hint = cuda_hint(name) if module.__name__.startswith(("numba_vulkan", "numba.cuda")) else None
    return CompilerError(message(pyfunc.__qualname__, location, reason, hint),
                         kernel=pyfunc.__qualname__)
