"""The content hash of a Python function's code: one rule for every key that needs it.

The kernel cache's ``functions/`` section
(:func:`numba_vulkan.store.keys.function_key`) and AOT directories (:func:`numba_vulkan.store.keys.content_key_parts`)
find a compiled kernel by what its Python code is, without running Numba.
Both use this walk (:func:`walk`), so an edit to the code that changes one
key changes the other. The ``functions/`` key adds the source stamps of the
functions the walk reaches (:func:`numba_vulkan.store.keys.source_stamp`:
file name, size and time), as Numba's ``cache=True`` does, and its name on
a remote cache's server the SHA-256 of their source files instead; AOT keys
add neither, since a directory is built on another machine, whose file
times mean nothing here, and ships without its sources.

The hash is a SHA-256 of:

* :data:`KEY_VERSION`;
* for the function and, recursively, every function it calls: its qualified
  name, its source as Python's parser reads it (:func:`source_text`: the
  syntax tree without positions, decorators or docstring, nested functions
  and lambdas included), the default values and the values of its closure
  cells;
* the value of every global the code reads (found in its bytecode, nested
  code objects included, each once, in order of name), including the ends
  of attribute chains on modules (``np.pi``, ``mylib.helper``);
* the code-changing ``nv.jit`` options (:data:`numba_vulkan.base.jitoptions.CODE_OPTIONS`)
  of the function and of every jitted function it calls.

Left out: file names, line numbers, modification times, comments, the
module's name and the Python version. Moving a project, touching its files,
editing comments or adding lines above a function keeps this key; a kernel
run as ``python -m pkg.mod`` has the key it has when imported; and an AOT
directory built on one Python serves every other, although their bytecode
differs. A function whose source cannot be read (defined with ``exec``
without registering its text in :mod:`linecache`, or shipped as ``.pyc``
alone) is keyed by its bytecode instead, with the bytecode tag
(``cpython-311``) as a part of its own (``python cpython-311``), so that
such a key serves only the Python version that made it and says so.
The source is read when a key is first computed: a file edited after its
module was imported, and not re-imported, gives the key of the new text.

Values are keyed by a fixed rule, so that a changed value changes the key
and an unchanged one does not:

* numbers, strings, bytes, ``None`` and tuples, lists and frozensets of
  them: their type and value;
* NumPy arrays: dtype, shape and bytes; NumPy scalars and dtypes: their value;
* jitted functions (``@nv.jit``, ``@numba.njit``: an object of Numba or this
  package with a ``py_func``) and plain Python functions outside the
  libraries below: their code and what it reads, recursively;
* modules: their name; classes, functions written in C (``math.sin``,
  ``len``) and functions of NumPy, Numba, llvmlite and this package: module
  and qualified name (what such a name does is the library's, whose version
  other parts of a key cover);
* other objects of those libraries' types (Numba types such as
  ``numba.float32``, the kernel API's stubs): their type and text form.

Any other value (a dict, an instance of an application class) has no stable
key, nor has a function that reaches more than :data:`MAX_FUNCTIONS`
functions, nests calls more than :data:`MAX_DEPTH` deep or reads a value
nested deeper than Python's recursion limit: :func:`code_key_parts` raises
:class:`Unkeyable` saying which.

This module imports neither Numba nor the dispatcher: it recognises jitted
functions by their ``py_func`` and reads their options from ``options``
(``nv.jit``) or ``targetoptions`` (Numba).
"""

import ast
import builtins
import collections
import dis
import functools
import hashlib
import json
import linecache
import struct
import sys
import types

import numpy as np

from numba_vulkan.base import jitoptions

#: Version of the hash's definition; part of every key.
KEY_VERSION = 3

#: The Python bytecode tag, part of a key only where a function's source
#: could not be read and its bytecode stands in.
BYTECODE_TAG = sys.implementation.cache_tag or sys.version

#: Most functions one key may hash (one reached along several paths counts
#: once, unless it recurses): beyond it a kernel is deemed too entangled.
MAX_FUNCTIONS = 256

#: Most functions nested in one chain of calls (the kernel's counts).
MAX_DEPTH = 32

#: Top-level packages whose functions and objects are keyed by name and
#: text, not by code (functions written in C, such as ``math.sin``, always are).
LIBRARIES = frozenset({"numba_vulkan", "numba", "numpy", "llvmlite"})

_JIT_PACKAGES = ("numba", "numba_vulkan")
_ATTRIBUTE_OPS = {"LOAD_ATTR", "LOAD_METHOD"}
_MISSING = object()


class Unkeyable(ValueError):
    """A function reads something whose value has no stable key.

    Attributes:
        where: What it is, as a phrase: ``global 'SCALE' read by kern``.
        kind: The type of the value (``module.qualname``), or None when the
            function reaches too many functions or too deep.
    """

    def __init__(self, where, kind=None):
        self.where = where
        self.kind = kind
        super().__init__(f"{where} is a {kind}, whose value has no stable key"
                         if kind else where)


def _library(module_name):
    return (module_name or "").split(".")[0] in LIBRARIES


def _jitted(value):
    """``(py_func, options)`` of a jitted function (``nv.jit`` or Numba), else None."""
    py_func = getattr(value, "py_func", None)
    if not isinstance(py_func, types.FunctionType):
        return None
    if (type(value).__module__ or "").split(".")[0] not in _JIT_PACKAGES:
        return None
    options = getattr(value, "options", None)
    if not isinstance(options, dict):
        options = getattr(value, "targetoptions", None)
    return py_func, options if isinstance(options, dict) else {}


def _options_text(options):
    """Code-changing options as canonical text (values: bools, strings, sets of them)."""
    return json.dumps(jitoptions.as_json(options), sort_keys=True)


class _Sink:
    """One hash being fed; the top function's also keeps its parts."""

    def __init__(self, parts):
        self.hash = hashlib.sha256()
        #: Hashes of the parts of the key, and the part fed now.
        self.parts = {} if parts else None
        self.part = None

    def put(self, tag, data=b""):
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        chunk = tag.encode() + struct.pack("<Q", len(data)) + data
        self.hash.update(chunk)
        if self.parts is not None and self.part is not None:
            self.parts.setdefault(self.part, hashlib.sha256()).update(chunk)

    def section(self, part):
        """Feed ``part`` from now on (the top function's sink only)."""
        if self.parts is not None:
            self.part = part


class _Walk:
    """Feeds a function's code and what it reads into sinks, recursively."""

    def __init__(self):
        #: Functions being hashed, outermost first.
        self.active = []
        #: Functions hashed already: (id, options) -> (function, digest).
        self.done = {}
        #: Functions entered, each time: bounded by MAX_FUNCTIONS.
        self.entered = 0
        #: Lowest position in ``active`` that a back-reference named since
        #: the current function was entered.
        self.lowest = None
        #: Every function entered, once each, in the order first entered.
        self.reached = {}

    def callee(self, sink, func, options):
        """Feed a called function as its digest (computed once per walk)."""
        for position, active in enumerate(self.active):
            if active is func:
                # Recursion: counted from the innermost function, so that a
                # digest holding it does not depend on where it was computed.
                sink.put("back-reference", str(len(self.active) - 1 - position))
                self.lowest = position if self.lowest is None else min(self.lowest, position)
                return
        memo = (id(func), _options_text(options))
        if memo in self.done:
            digest = self.done[memo][1]
        else:
            depth, outer = len(self.active), self.lowest
            self.lowest = None
            own = _Sink(parts=False)
            self.function(own, func, options)
            digest = own.hash.digest()
            inner = self.lowest
            # A digest that refers to a function further out is valid only
            # where it was computed; such a reference concerns the outer
            # functions too.
            if inner is None or inner >= depth:
                self.done[memo] = (func, digest)
                inner = None
            named = [p for p in (outer, inner) if p is not None]
            self.lowest = min(named) if named else None
        sink.put("function", digest)

    def function(self, sink, func, options):
        self.entered += 1
        if self.entered > MAX_FUNCTIONS:
            raise Unkeyable(f"{self.active[0].__qualname__} reaches more than "
                            f"{MAX_FUNCTIONS} functions")
        if len(self.active) >= MAX_DEPTH:
            raise Unkeyable(f"{self.active[0].__qualname__} has calls nested more than "
                            f"{MAX_DEPTH} deep")
        self.active.append(func)
        self.reached.setdefault(id(func), func)
        sink.put("function", func.__qualname__)
        sink.section("options")
        sink.put("options", _options_text(options))
        sink.section("code")
        text = source_text(func.__code__)
        if text is None:
            sink.section(f"python {BYTECODE_TAG}")
            sink.put("python", BYTECODE_TAG)
            sink.section("code")
            self.code(sink, func.__code__)
        else:
            sink.put("source", text)
        self.globals(sink, func)
        sink.section("code")
        for value in func.__defaults__ or ():
            self.value(sink, value, f"a default argument of {func.__qualname__}")
        for name, value in sorted((func.__kwdefaults__ or {}).items()):
            sink.put("kwdefault", name)
            self.value(sink, value, f"a default argument of {func.__qualname__}")
        for name, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
            sink.section(f"closure {name}")
            sink.put("freevar", name)
            try:
                value = cell.cell_contents
            except ValueError:
                value = _MISSING
            self.value(sink, value, f"closure variable {name!r} of {func.__qualname__}")
        self.active.pop()

    def code(self, sink, code):
        """Feed a code object's bytecode, constants and names, nested ones included."""
        sink.put("code", code.co_code)
        sink.put("exceptions", getattr(code, "co_exceptiontable", b""))
        sink.put("shape", struct.pack("<5Q", code.co_argcount, code.co_posonlyargcount,
                                      code.co_kwonlyargcount, code.co_nlocals, code.co_flags))
        for field in ("co_names", "co_varnames", "co_cellvars", "co_freevars"):
            sink.put(field, "\0".join(getattr(code, field)))
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self.code(sink, const)
            else:
                self.value(sink, const, f"a constant of {code.co_name}")

    def globals(self, sink, func):
        """Feed every global a function's code reads, once each, in order of name.

        Bytecode orders and nests them differently in each Python version
        (3.12 inlines comprehensions); the set of names read is the same."""
        for chain, value in sorted(_globals_read(func).items()):
            text = ".".join(chain)
            if sink.parts is not None:
                sink.section(f"{'callee' if _has_code(value) else 'global'} {text}")
            sink.put("global", text)
            self.value(sink, value, f"global {text!r} read by {func.__qualname__}")

    def value(self, sink, value, where):
        if value is _MISSING:
            sink.put("missing")
        elif value is None or value is Ellipsis or isinstance(
                value, (bool, int, float, complex, str, bytes)):
            sink.put(type(value).__name__, float.hex(value) if isinstance(value, float)
                     else repr(value))
        elif isinstance(value, (tuple, list)):
            sink.put(type(value).__name__, str(len(value)))
            for item in value:
                self.value(sink, item, where)
        elif isinstance(value, frozenset):
            # Iteration order of a set depends on string hashing, which
            # differs between processes: key each item, then sort.
            items = []
            for item in value:
                sub = _Sink(parts=False)
                self.value(sub, item, where)
                items.append(sub.hash.digest())
            sink.put("frozenset", b"".join(sorted(items)))
        elif isinstance(value, np.ndarray):
            if value.dtype.hasobject:
                raise Unkeyable(where, "NumPy array of objects")
            sink.put("ndarray", f"{value.dtype.str}{value.shape}")
            sink.put("data", np.ascontiguousarray(value).tobytes())
        elif isinstance(value, np.generic):
            sink.put("numpy-scalar", value.dtype.str)
            sink.put("data", value.tobytes())
        elif isinstance(value, np.dtype):
            sink.put("dtype", value.str)
        elif isinstance(value, types.ModuleType):
            sink.put("module", value.__name__)
        elif _jitted(value) is not None:
            self.callee(sink, *_jitted(value))
        elif isinstance(value, types.FunctionType) and not _library(value.__module__):
            self.callee(sink, value, {})
        elif isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
            sink.put("named", f"{value.__module__}:{value.__qualname__}")
        elif _library(type(value).__module__):
            sink.put("library-object", f"{type(value).__module__}.{type(value).__qualname__}")
            text = str(value)
            # A default repr holds an address, which differs between processes.
            sink.put("text", "" if " at 0x" in text else text)
        else:
            raise Unkeyable(where, f"{type(value).__module__}.{type(value).__qualname__}")


def _globals_read(func):
    """``{attribute chain: value}`` of the globals a function's code reads."""
    found = {}
    pending = [func.__code__]
    while pending:
        code = pending.pop()
        pending.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        instructions = list(dis.get_instructions(code))
        for k, ins in enumerate(instructions):
            if ins.opname != "LOAD_GLOBAL":
                continue
            value = func.__globals__.get(ins.argval, _MISSING)
            if value is _MISSING:
                value = getattr(builtins, ins.argval, _MISSING)
            chain = [ins.argval]
            for follow in instructions[k + 1:]:
                if follow.opname not in _ATTRIBUTE_OPS or not isinstance(value, types.ModuleType):
                    break
                value = getattr(value, follow.argval, _MISSING)
                chain.append(follow.argval)
            found[tuple(chain)] = value
    return found


def _tree_text(node):
    """A syntax tree as text, the same in every Python version that parses it alike.

    Positions are not fields; empty fields are left out, since newer
    versions add fields that are empty for older syntax (``type_params``)."""
    if isinstance(node, ast.AST):
        fields = []
        for name in node._fields:
            value = getattr(node, name, None)
            if value is None or value == []:
                continue
            fields.append(f"{name}={_tree_text(value)}")
        return f"{type(node).__name__}({','.join(fields)})"
    if isinstance(node, list):
        return f"[{','.join(_tree_text(item) for item in node)}]"
    if isinstance(node, float):
        return float.hex(node)
    return f"{type(node).__name__}:{node!r}"


def _without_docstring(body):
    first = body[0] if body else None
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str) and len(body) > 1):
        return body[1:]
    return body


def source_text(code):
    """The normalised syntax tree of a function's source, as text, or None.

    The source file is read through :mod:`linecache` (which also holds
    generated sources such as GPU ufuncs') and parsed once per process; the
    function is the ``def`` or lambda that starts on its code's first line.
    A ``def`` is its arguments, return annotation and body, without
    decorators (options are keyed apart) or docstring; a lambda is every
    lambda starting on that line, since a line's lambdas cannot be told
    apart the same way in every Python version. None where the source
    cannot be read or parsed, or where the names the code uses are not all
    in the text found (the file was edited since the code was loaded).
    """
    linecache.checkcache(code.co_filename)
    lines = linecache.getlines(code.co_filename)
    if not lines:
        return None
    found = _definitions(code.co_filename, "".join(lines)).get(code.co_firstlineno, ())
    if code.co_name == "<lambda>":
        nodes = [n for n in found if isinstance(n, ast.Lambda)]
        text = "|".join(_tree_text(n) for n in nodes)
    else:
        nodes = [n for n in found if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.name == code.co_name][:1]
        text = "|".join(f"{_tree_text(n.args)}|{_tree_text(n.returns)}|"
                        f"{_tree_text(_without_docstring(n.body))}" for n in nodes)
    if not nodes or not _code_names(code) <= _identifiers(nodes):
        return None
    return text


def _code_names(code):
    """The names a code object and its nested ones use, but the compiler's own."""
    names = set()
    pending = [code]
    while pending:
        code = pending.pop()
        pending.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        names.update(code.co_names, code.co_varnames, code.co_cellvars, code.co_freevars)
    return {n for n in names if n.isidentifier() and not n.startswith("__")}


def _identifiers(nodes):
    """Every name written in syntax trees (dotted import names split)."""
    out = set()
    for top in nodes:
        for node in ast.walk(top):
            for field in ("id", "attr", "arg", "name", "asname", "module"):
                value = getattr(node, field, None)
                if isinstance(value, str):
                    out.update(value.split("."))
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                out.update(node.names)
    return out


@functools.lru_cache(maxsize=64)
def _definitions(filename, text):
    """``{first line: [def and lambda nodes]}`` of a source file's text.

    A decorated function's code starts at its first decorator."""
    try:
        tree = ast.parse(text, filename)
    except (SyntaxError, ValueError):
        return {}
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            out.setdefault(first, []).append(node)
        elif isinstance(node, ast.Lambda):
            out.setdefault(node.lineno, []).append(node)
    return out


def _has_code(value):
    """Whether a value's key is the code of a function (a callee, not a global)."""
    return _jitted(value) is not None or (isinstance(value, types.FunctionType)
                                         and not _library(value.__module__))


#: What :func:`walk` finds: the content key, its parts and the functions hashed.
CodeKey = collections.namedtuple("CodeKey", "key parts functions")


def walk(function, options=None):
    """Hash a function's code and everything it reads.

    Args:
        function: A Python function (a kernel's ``py_func``).
        options: Its ``nv.jit`` options; only the code-changing ones count.

    Returns:
        CodeKey: ``key``, the hexadecimal SHA-256; ``parts``, a dict naming
        what the key is made of, each with the first 16 hex digits of its own
        SHA-256: ``code`` (the function's own source and defaults),
        ``python TAG`` (only where the source could not be read and the
        bytecode of Python TAG stands in), ``options``, ``callee NAME`` (a function it calls, with
        everything that one reads), ``global NAME`` (a global value it
        reads, ``np.pi`` as ``global np.pi``) and ``closure NAME``;
        ``functions``, the Python functions whose code is in the key, once
        each, ``function`` first: the jitted and plain Python functions it
        calls, recursively (the libraries' are keyed by name, so not among
        them).

    Raises:
        Unkeyable: It reads a value that has no stable key, or reaches too
            many functions or too deep.
    """
    sink = _Sink(parts=True)
    sink.put("version", str(KEY_VERSION))
    walker = _Walk()
    try:
        walker.function(sink, function, options or {})
    except RecursionError:
        raise Unkeyable(f"{function.__qualname__} reads a value nested too deeply") from None
    parts = {name: h.hexdigest()[:16] for name, h in sorted(sink.parts.items())}
    return CodeKey(sink.hash.hexdigest(), parts, tuple(walker.reached.values()))


def code_key_parts(function, options=None):
    """The content key of a function and the digests of its parts.

    Returns:
        ``(key, parts)`` as :func:`walk` gives them.

    Raises:
        Unkeyable: As :func:`walk`.
    """
    found = walk(function, options)
    return found.key, found.parts


def code_key(function, options=None):
    """The content key of a function: :func:`code_key_parts`' key alone."""
    return code_key_parts(function, options)[0]


def code_digest(code):
    """A digest of one code object alone: its bytecode, constants and names.

    Nothing it reads is followed; :func:`numba_vulkan.store.keys.source_stamp`
    pairs it with the source file's name, size and modification time.
    """
    sink = _Sink(parts=False)
    _Walk().code(sink, code)
    return sink.hash.hexdigest()
