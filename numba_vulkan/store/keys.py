"""Every key of the cache, and of AOT directories: one recipe each, in one place.

* :func:`key` and :func:`module_key`: a module in the ``kernels`` section,
  by the IR Numba lowered after :func:`normalise` and the settings of code
  generation. Numba's pipeline runs every time, which is what makes this
  safe: a change to a kernel, to a function it calls or to a global it
  reads changes the IR.
* :func:`kernel_key` and :func:`function_key`: a whole compiled kernel in
  the ``functions`` section (``@nv.jit(cache=True)``), by its Python code,
  which skips Numba's pipeline too: the source files' stamps
  (:func:`source_stamp`) and the content key, and, for the remote tier, a
  portable name of the files' content (:class:`FunctionKey`).
* :func:`content_key`: what identifies a kernel's code on any machine, at
  any path (:mod:`numba_vulkan.store.codehash`); AOT directories find
  entries by it, without Numba.
* :func:`build_key`: a module an AOT build makes, for reusing a previous
  build's output and the remote tier's ``aot`` section.
* :func:`remote_key`: where the remote tier keeps an entry.

Every cache key covers the entry format's version and
:func:`numba_vulkan.store.toolchain.fingerprint`, so a change to this
package or its tools never finds an old entry.
"""

import hashlib
import json
import os
import re
from collections import namedtuple

from numba_vulkan.base import abi
from numba_vulkan.base import config
from numba_vulkan.base import jitoptions
from numba_vulkan.base.errors import AOTError
from numba_vulkan.store import codehash
from numba_vulkan.store import counters
from numba_vulkan.store import toolchain
from numba_vulkan.store.entry import FORMAT_VERSION


def _json_default(value):
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"cache key setting of type {type(value).__name__} is not data: {value!r}")


def _settings_text(settings):
    return json.dumps(list(settings), sort_keys=True, separators=(",", ":"),
                      default=_json_default)


def _digest(section, parts, settings):
    h = hashlib.sha256(f"{section}\0{FORMAT_VERSION}\0{toolchain.fingerprint()}\0".encode())
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    h.update(_settings_text(settings).encode())
    return h.hexdigest()


# The kernels section ------------------------------------------------------

_MODULE_ID = re.compile(r"^(; ModuleID = .*|source_filename = .*)$\n?", re.MULTILINE)
_MANGLED = re.compile(r"_ZN(?=\d)")
_UID_TAG = re.compile(r"^v\d+$")
_CONST = re.compile(r'@(?:"(\.const\.[^"]*)"|(\.const\.[-\w$.]*))')


def _renumber_uids(text):
    """Numba's mangled names carry an ABI tag ``v<N>`` from a per-process
    counter: number those in order of appearance instead."""
    numbers = {}
    out, pos = [], 0
    for m in _MANGLED.finditer(text):
        if m.start() < pos:
            continue
        i = m.end()
        while i < len(text) and text[i].isdigit():
            j = i
            while j < len(text) and text[j].isdigit():
                j += 1
            i = j + int(text[i:j])
        out.append(text[pos:i])
        pos = i
        while i < len(text) and text[i] == "B" and i + 1 < len(text) and text[i + 1].isdigit():
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            end = j + int(text[i + 1:j])
            tag = text[j:end]
            if _UID_TAG.match(tag):
                tag = "v%d" % numbers.setdefault(tag, len(numbers))
            out.append(f"B{len(tag)}{tag}")
            i = pos = end
    out.append(text[pos:])
    return "".join(out)


def _renumber_constants(text):
    names = {}

    def canonical(m):
        name = m.group(1) or m.group(2)
        return '@".const#%d"' % names.setdefault(name, len(names))

    return _CONST.sub(canonical, text)


def normalise(source):
    """Remove what differs between processes from unoptimised LLVM IR.

    Args:
        source (str): The IR of all modules of a kernel.

    Returns:
        str: The IR with Numba's per-process function counters renumbered in
        order of appearance and module names removed; constant arrays
        (``.const.*`` globals) are numbered in order of appearance too.
    """
    return _renumber_constants(_renumber_uids(_MODULE_ID.sub("", source)))


def key(source, *settings):
    """Name of the cache entry for a kernel.

    The digest covers :func:`~numba_vulkan.store.toolchain.fingerprint` as
    well, so a change to this package or its tools never finds an old entry.

    Args:
        source (str): Unoptimised LLVM IR of all modules of the kernel,
            after :func:`normalise` and with constant arrays numbered
            canonically.
        *settings: Everything else that affects code generation, such as the
            narrowing mode (JSON-compatible values).

    Returns:
        str: A hexadecimal digest.
    """
    return _digest("kernels", [source.encode()], settings)


def module_key(modules, bindings, local_size, target, options):
    """The ``kernels`` name of a kernel's module, or None if caching is off.

    Args:
        modules: IR text of the kernel's modules, as Numba lowered them.
        bindings: Storage dtype of each descriptor binding.
        local_size: Workgroup size ``(x, y, z)``.
        target: The :class:`~numba_vulkan.base.target.TargetDescription`.
        options: The kernel's ``nv.jit`` options.
    """
    if not config.cache_enabled():
        return None
    source = normalise("\n; ----\n".join(modules))
    return key(source, target.key(), list(local_size), list(bindings),
               jitoptions.code_options(options), abi.ABI_VERSION)


# The functions section ----------------------------------------------------


def source_stamp(function):
    """What identifies a Python function's code across processes.

    Args:
        function (function): A Python function.

    Returns:
        bytes or None: Its bytecode with the name, size and modification
        time of its source file, or None if it has no source file (it was
        defined interactively or with ``exec``), and cannot be cached.

    A touched or edited file changes the stamps of all its functions, and
    so the key of every kernel calling one of them: an edit the code's
    content does not show (an ``@overload`` implementation in the kernel's
    own file) recompiles too.
    """
    code = getattr(function, "__code__", None)
    if code is None or code.co_filename.startswith("<"):
        return None
    try:
        path = os.path.realpath(code.co_filename)
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return "\0".join([path, str(st.st_size), str(st.st_mtime_ns),
                      getattr(function, "__qualname__", code.co_name),
                      codehash.code_digest(code)]).encode()


def kernel_key(stamps, *settings):
    """Name of the cache entry for a compiled kernel.

    Args:
        stamps (list of bytes): :func:`source_stamp` of the kernel and of
            every function it calls.
        *settings: Argument types, grid, narrowing mode and options
            (JSON-compatible values); :func:`function_key` adds the content
            key of :func:`numba_vulkan.store.codehash.walk`.

    Returns:
        str: A hexadecimal digest.
    """
    return _digest("functions", list(stamps), settings)


def content_stamp(function):
    """:func:`source_stamp` with the source file's content in place of its
    name, size and time: the same in every checkout of the same files."""
    code = function.__code__
    path = os.path.realpath(code.co_filename)
    return "\0".join([toolchain.file_digest(path), function.__qualname__,
                      codehash.code_digest(code)]).encode()


def _uncacheable(function, why):
    counters.log("functions", "uncacheable", getattr(function, "__qualname__", "?"), why)
    counters.count("functions", "uncacheable")


#: The names of a ``cache=True`` kernel's entry (:func:`function_key`):
#: ``local`` on the disk, ``remote`` on the remote tier's server (None when
#: there is none), and ``sources``, the source file of each function the
#: key covers, in the walk's order.
FunctionKey = namedtuple("FunctionKey", "local remote sources")


def function_key(function, options, sig, local_size, target):
    """The :class:`FunctionKey` of a ``cache=True`` kernel, or None if caching
    is off or the kernel cannot be keyed.

    The local name holds :func:`source_stamp` of the kernel and of every
    function :func:`numba_vulkan.store.codehash.walk` reaches from it, and the
    walk's content key, the one AOT directories use: the stamps see what a
    file's time says (any edit), the content key what no file says (globals
    and closure values set at run time). A kernel the walk cannot key
    (:class:`~numba_vulkan.store.codehash.Unkeyable`), or which calls a function
    without a source file (or is one), is counted ``uncacheable``.

    The remote name, made only while ``NUMBA_VULKAN_REMOTE_CACHE`` is set,
    holds the same but for the stamps: the SHA-256 of each of those source
    files' content instead of its path, size and time (:func:`content_stamp`),
    and Numba's install by its RECORD
    (:func:`~numba_vulkan.store.toolchain.portable_numba_versions`), so
    that every checkout of the same files finds it. Any edit of those files
    changes it, as it changes their times.
    """
    if not config.cache_enabled():
        return None
    try:
        found = codehash.walk(function, options)
    except codehash.Unkeyable as exc:
        _uncacheable(function, str(exc))
        return None
    stamps = []
    for reached in found.functions:
        stamp = source_stamp(reached)
        if stamp is None:
            _uncacheable(function, f"{reached.__qualname__} has no source file")
            return None
        stamps.append(stamp)
    settings = [found.key, list(sig), list(local_size), target.key(),
                jitoptions.code_options(options), abi.ABI_VERSION]
    local = kernel_key(stamps, *settings, toolchain.numba_versions(), config.numba_settings())
    if config.remote_cache() is None:
        return FunctionKey(local, None, None)
    try:
        contents = [content_stamp(reached) for reached in found.functions]
    except OSError:
        # A source file gone since it was stamped: this process keeps the kernel.
        return FunctionKey(local, None, None)
    remote = _digest("functions", [b"content", *contents],
                     [*settings, toolchain.portable_numba_versions(), config.numba_settings()])
    sources = tuple(os.path.realpath(f.__code__.co_filename) for f in found.functions)
    return FunctionKey(local, remote, sources)


# AOT directories ----------------------------------------------------------


def content_key(dispatcher):
    """The content key of an ``@nv.jit`` kernel, by which an AOT directory's
    entry is found.

    It is :func:`numba_vulkan.store.codehash.code_key_parts` of the kernel's
    Python function and options; that module says what is in it and what is
    not (file names, line numbers, modification times). The ``functions``
    key holds it too, with the source files' stamps added
    (:func:`source_stamp`), which this key leaves out: a directory is built
    on another machine, and its file times do not travel with it.

    Args:
        dispatcher: A :class:`~numba_vulkan.api.dispatcher.VulkanDispatcher`.

    Returns:
        str: A hexadecimal SHA-256 digest.

    Raises:
        AOTError: The kernel reads a global whose value has no stable key
            (a dict, an instance of an application class).
    """
    return content_key_parts(dispatcher)[0]


def content_key_parts(dispatcher):
    """The content key of a kernel and the digests of its parts.

    The parts (:func:`numba_vulkan.store.codehash.code_key_parts`) say what a key
    that differs from a shipped entry's differs in: ``code``, ``options``,
    ``callee NAME``, ``global NAME`` and ``closure NAME``.

    Returns:
        ``(key, parts)``: the key as :func:`content_key` gives it, and a dict
        of part names to the first 16 hex digits of their SHA-256.

    Raises:
        AOTError: The kernel reads a global whose value has no stable key.
    """
    try:
        return codehash.code_key_parts(dispatcher.py_func, dispatcher.options)
    except codehash.Unkeyable as exc:
        advice = ("pass it as an argument, or make it a number, string, tuple or NumPy array"
                  if exc.kind else "call fewer functions")
        raise AOTError(f"kernel {dispatcher.__qualname__}: {exc}, so the kernel cannot be "
                       f"shipped ahead of time; {advice}") from None


#: Version of :func:`build_key`'s recipe.
_BUILD_VERSION = 1


def build_key(content, signature, threads, target, profile, options, shared_bytes,
              index_format, fingerprint):
    """The key of a module an AOT build makes.

    Args:
        content: The kernel's :func:`content_key`.
        signature: Argument types, as text.
        threads: Workgroup size ``(x, y, z)``.
        target: The profile's :class:`~numba_vulkan.base.target.TargetDescription`.
        profile: The profile's name.
        options: The kernel's ``nv.jit`` options.
        shared_bytes: Dynamic shared memory in bytes (0: none).
        index_format: The AOT directory's format version.
        fingerprint: :func:`numba_vulkan.store.toolchain.fingerprint`, which
            the build computes once.

    Returns:
        str: A hexadecimal SHA-256 digest.
    """
    data = [_BUILD_VERSION, index_format, abi.ABI_VERSION, content, list(signature),
            list(threads), target.key(), profile,
            [list(o) for o in jitoptions.as_json(dict(options)).items()], fingerprint]
    if shared_bytes:
        # Only then: the keys of modules without dynamic shared memory stay.
        data.append(["shared_bytes", shared_bytes])
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


# The remote tier ----------------------------------------------------------


def remote_key(section, name):
    """The key of an entry on the remote cache's server.

    Namespaced by the entry format and the fingerprint, so that servers
    shared by several versions of the package never mix their entries (the
    name covers both as well)."""
    return f"numba_vulkan:{FORMAT_VERSION}:{toolchain.fingerprint()}:{section}:{name}"
