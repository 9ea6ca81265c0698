"""The content key of a kernel: what identifies its code on any machine, at any path.

An AOT entry is found by this key, computed from the kernel object at run
time without Numba. It is a SHA-256 of:

* the Python implementation's bytecode tag (``cpython-311``), since bytecode
  differs between versions;
* for the kernel and, recursively, every function it calls: the bytecode,
  the constants (nested code objects included), the names, the argument
  counts and flags, the default values and the values of closure cells;
* the value of every global the code reads, including the ends of attribute
  chains on modules (``np.pi``, ``mylib.helper``);
* the kernel's ``nv.jit`` options.

File names, line numbers and modification times are left out: moving a
project or touching its files keeps its kernels' keys.

Global values are keyed by a fixed rule, so that a changed value changes
the key and an unchanged one does not:

* numbers, strings, bytes, ``None`` and tuples or lists of them: their value;
* NumPy arrays: dtype, shape and bytes; NumPy scalars and dtypes: their value;
* ``@nv.jit`` and ``@numba.njit`` functions: their code, recursively;
* modules: their name; functions, classes and builtins: module and
  qualified name (the behaviour behind such a name belongs to a library
  whose version is not part of the key, and to Numba's typing of it);
* objects of types that Numba, NumPy or numba_vulkan define (Numba types
  such as ``numba.float32``, stub objects of the kernel API): their type
  and their text form.

Any other global value (a dict, an instance of an application class) has no
stable key: the kernel cannot be found in an AOT directory, and
:func:`kernel_key` raises :class:`~numba_vulkan.errors.AOTError` naming it.
"""

import builtins
import dis
import hashlib
import json
import struct
import sys
import types

import numpy as np

from numba_vulkan import jitoptions
from numba_vulkan.errors import AOTError

#: Version of the key's definition; part of every key.
KEY_VERSION = 1

_LIBRARIES = ("numba_vulkan", "numba", "numpy", "llvmlite")
_ATTRIBUTE_OPS = {"LOAD_ATTR", "LOAD_METHOD"}
_MISSING = object()


def _library_object(value):
    module = type(value).__module__ or ""
    return module.split(".")[0] in _LIBRARIES


def _jitted_function(value):
    """The Python function of an ``@nv.jit`` or Numba dispatcher, with its options."""
    from numba_vulkan.dispatcher import VulkanDispatcher
    if isinstance(value, VulkanDispatcher):
        return value.py_func, value.options
    py_func = getattr(value, "py_func", None)
    if isinstance(py_func, types.FunctionType) and type(value).__module__.startswith("numba."):
        return py_func, jitoptions.code_options(getattr(value, "targetoptions", {}))
    return None


def _options_text(options):
    """Options as canonical text; option values are bools, strings or sets of them."""
    def plain(value):
        if isinstance(value, (set, frozenset)):
            return sorted(str(v) for v in value)
        if isinstance(value, (bool, int, float, str)) or value is None:
            return value
        return f"{type(value).__module__}.{type(value).__qualname__}:{value}"
    return json.dumps({k: plain(v) for k, v in jitoptions.code_options(options).items()},
                      sort_keys=True)


class _Key:
    """Feeds a kernel's code and what it reads into one hash."""

    def __init__(self, kernel_name):
        self.hash = hashlib.sha256()
        self.kernel_name = kernel_name
        self.active = []
        #: Hashes of the parts of the key (:func:`kernel_key_parts`), and
        #: the part that what is put now belongs to.
        self.parts = {}
        self.part = None

    def put(self, tag, data=b""):
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        chunk = tag.encode() + struct.pack("<Q", len(data)) + data
        self.hash.update(chunk)
        if self.part is not None:
            self.parts.setdefault(self.part, hashlib.sha256()).update(chunk)

    def _top(self):
        """Whether what is put now is the kernel's own (not a callee's)."""
        return len(self.active) == 1

    def function(self, func, options):
        if func in self.active:
            # Recursion: the function's code is already in the key.
            self.put("back-reference", str(self.active.index(func)))
            return
        self.active.append(func)
        self.put("function", func.__qualname__)
        if self._top():
            self.part = "options"
        self.put("options", _options_text(options))
        if self._top():
            self.part = "code"
        self.code(func.__code__, func)
        for value in func.__defaults__ or ():
            self.value(value, f"a default argument of {func.__qualname__}")
        for name, value in sorted((func.__kwdefaults__ or {}).items()):
            self.put("kwdefault", name)
            self.value(value, f"a default argument of {func.__qualname__}")
        for name, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
            if self._top():
                self.part = f"closure {name}"
            self.put("freevar", name)
            try:
                value = cell.cell_contents
            except ValueError:
                value = _MISSING
            self.value(value, f"closure variable {name!r} of {func.__qualname__}")
        self.active.pop()

    def code(self, code, func):
        self.put("code", code.co_code)
        self.put("exceptions", getattr(code, "co_exceptiontable", b""))
        self.put("shape", struct.pack("<5Q", code.co_argcount, code.co_posonlyargcount,
                                      code.co_kwonlyargcount, code.co_nlocals, code.co_flags))
        for field in ("co_names", "co_varnames", "co_cellvars", "co_freevars"):
            self.put(field, "\0".join(getattr(code, field)))
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self.code(const, func)
            else:
                self.value(const, f"a constant of {func.__qualname__}")
        self.globals(code, func)

    def globals(self, code, func):
        instructions = list(dis.get_instructions(code))
        for k, ins in enumerate(instructions):
            if ins.opname != "LOAD_GLOBAL":
                continue
            name = ins.argval
            value = func.__globals__.get(name, _MISSING)
            if value is _MISSING:
                value = getattr(builtins, name, _MISSING)
            chain = [name]
            for follow in instructions[k + 1:]:
                if follow.opname not in _ATTRIBUTE_OPS or not isinstance(value, types.ModuleType):
                    break
                value = getattr(value, follow.argval, _MISSING)
                chain.append(follow.argval)
            if self._top():
                kind = "callee" if _jitted_function(value) is not None else "global"
                part = f"{kind} {'.'.join(chain)}"
                # A global read twice is one part: the count is the code's.
                self.part = None if part in self.parts else part
            self.put("global", ".".join(chain))
            self.value(value, f"global {'.'.join(chain)!r} read by {func.__qualname__}")
            if self._top():
                self.part = "code"

    def value(self, value, where):
        if value is _MISSING:
            self.put("missing")
        elif value is None or value is Ellipsis or isinstance(
                value, (bool, int, float, complex, str, bytes)):
            self.put(type(value).__name__, float.hex(value) if isinstance(value, float)
                     else repr(value))
        elif isinstance(value, (tuple, list)):
            self.put(type(value).__name__, str(len(value)))
            for item in value:
                self.value(item, where)
        elif isinstance(value, frozenset):
            # Iteration order of a set depends on string hashing, which
            # differs between processes: key each item, then sort.
            items = []
            for item in value:
                sub = _Key(self.kernel_name)
                sub.value(item, where)
                items.append(sub.hash.digest())
            self.put("frozenset", b"".join(sorted(items)))
        elif isinstance(value, np.ndarray):
            if value.dtype.hasobject:
                self._refuse(value, where)
            self.put("ndarray", f"{value.dtype.str}{value.shape}")
            self.put("data", np.ascontiguousarray(value).tobytes())
        elif isinstance(value, np.generic):
            self.put("numpy-scalar", value.dtype.str)
            self.put("data", value.tobytes())
        elif isinstance(value, np.dtype):
            self.put("dtype", value.str)
        elif isinstance(value, types.ModuleType):
            self.put("module", value.__name__)
        elif _jitted_function(value) is not None:
            self.function(*_jitted_function(value))
        elif isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
            self.put("named", f"{value.__module__}:{value.__qualname__}")
        elif _library_object(value):
            self.put("library-object", f"{type(value).__module__}.{type(value).__qualname__}")
            text = str(value)
            # A default repr holds an address, which differs between processes.
            self.put("text", "" if " at 0x" in text else text)
        else:
            self._refuse(value, where)

    def _refuse(self, value, where):
        raise AOTError(
            f"kernel {self.kernel_name}: {where} is a {type(value).__module__}."
            f"{type(value).__qualname__}, whose value has no stable key, so the kernel "
            "cannot be shipped ahead of time; pass it as an argument, or make it a "
            "number, string, tuple or NumPy array")


def kernel_key(dispatcher):
    """The content key of an ``@nv.jit`` kernel.

    Args:
        dispatcher: A :class:`~numba_vulkan.dispatcher.VulkanDispatcher`.

    Returns:
        A hexadecimal SHA-256 digest.

    Raises:
        AOTError: The kernel reads a global whose value has no stable key.
    """
    return kernel_key_parts(dispatcher)[0]


def kernel_key_parts(dispatcher):
    """The content key of a kernel and the digests of its parts.

    The parts say what a key that differs from a shipped entry's differs
    in: ``code`` (the kernel's own bytecode, constants, names and
    defaults), ``options``, ``callee NAME`` (an ``nv.jit`` function it
    calls, with everything that one reads), ``global NAME`` (a global value
    it reads, ``np.pi`` as ``global np.pi``) and ``closure NAME``.

    Returns:
        ``(key, parts)``: the key as :func:`kernel_key` gives it, and a dict
        of part names to the first 16 hex digits of their SHA-256.

    Raises:
        AOTError: The kernel reads a global whose value has no stable key.
    """
    key = _Key(dispatcher.__qualname__)
    key.put("version", str(KEY_VERSION))
    key.put("python", sys.implementation.cache_tag or sys.version)
    key.function(dispatcher.py_func, dispatcher.options)
    parts = {name: h.hexdigest()[:16] for name, h in sorted(key.parts.items())}
    return key.hash.hexdigest(), parts
