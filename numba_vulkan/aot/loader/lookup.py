"""Finding kernels in shipped AOT directories at run time.

The dispatcher asks :func:`find` before it compiles anything. The search
path is the directories of ``NUMBA_VULKAN_AOT_PATH`` (in order), then those
added with :func:`register` (in the order they were added). A kernel is
found by its content key (:func:`numba_vulkan.store.keys.content_key`), its
argument types, its workgroup size and the profile that fits the target, so a hit
runs no Numba typing or lowering and no LLVM: this module imports neither.

A miss falls back to the JIT with one :class:`~numba_vulkan.base.errors.AOTWarning`
per kernel, argument types and workgroup size, naming the manifest lines to
add; with ``NUMBA_VULKAN_AOT_STRICT=1`` it raises
:class:`~numba_vulkan.base.errors.AOTError` instead. A damaged index or a module
whose SHA-256 does not match is never used.
"""

import importlib
import importlib.resources
import importlib.util
import json
import os
import pathlib
import sys
import threading
import warnings
import weakref

from numba_vulkan.base import config
from numba_vulkan.base import files
from numba_vulkan.base import log
from numba_vulkan.spirv import modulecheck
from numba_vulkan.aot.loader import index, signing
from numba_vulkan.base.errors import AOTError, AOTWarning
from numba_vulkan.store import codehash
from numba_vulkan.store import keys

_lock = threading.RLock()
_registered = []
_env_directories = {}
_warned = set()
_keys = weakref.WeakKeyDictionary()
_stats = {"hits": 0, "misses": 0, "rejected": 0, "fallbacks": 0}
_environment_keys = {}


class Directory:
    """One AOT directory on the search path, its index read on first use.

    Attributes:
        label: The directory as the user named it, for messages.
    """

    def __init__(self, label, root, public_key=None):
        self.label = label
        self.root = root
        #: The :class:`~numba_vulkan.aot.loader.signing.PublicKey` that must have
        #: signed the index, or None for ``NUMBA_VULKAN_AOT_PUBLIC_KEY``'s.
        self.public_key = public_key
        self.problem = None
        self._load_lock = threading.Lock()
        self._loaded = False
        self._by_key = {}
        self._by_kernel = {}

    def _load(self):
        with self._load_lock:
            if not self._loaded:
                self._read_index()
                self._loaded = True

    def _read_file(self, relative, limit):
        """A file of the directory: on disk a regular file inside it, of at
        most ``limit`` bytes (no FIFO, device or link out of it)."""
        if isinstance(self.root, pathlib.Path):
            return files.read_regular(self.root.joinpath(relative), limit, inside=self.root)
        data = self.root.joinpath(relative).read_bytes()
        if len(data) > limit:
            raise files.FileProblem(f"{relative} is larger than {limit} bytes")
        return data

    def _signature(self):
        try:
            return self._read_file(signing.SIGNATURE, 1 << 10)
        except FileNotFoundError:
            return None

    def _signed_index(self):
        """The index's bytes, checked against the signature if a key is set."""
        key = self.public_key or _environment_key()
        data = self._read_file(index.INDEX, index.INDEX_LIMIT)
        if key is None:
            return data
        for _ in range(_RELOADS):
            signature = self._signature()
            # A build swaps the directory in one step, but between reading the
            # index and its signature: read the index again to pair them.
            again = self._read_file(index.INDEX, index.INDEX_LIMIT)
            if again == data:
                break
            data = again
        key.check(data, signature, self.label)
        return data

    def _read_index(self):
        try:
            data = self._signed_index()
            parsed = index.parse(data, self.label)
        except FileNotFoundError:
            self.problem = (f"AOT directory {self.label} holds no {index.INDEX} (build it "
                            "with python -m numba_vulkan.aot build MANIFEST)")
        except OSError as exc:
            self.problem = f"AOT directory {self.label} cannot be read ({exc})"
        except AOTError as exc:
            self.problem = str(exc)
        if self.problem:
            _warn_once(("index", self.label), f"{self.problem}; the directory is skipped")
            return
        for entry in parsed["entries"]:
            self._by_key.setdefault(entry["key"], []).append(entry)
            self._by_kernel.setdefault(entry["kernel"], []).append(entry)

    def require(self, key):
        """Require ``key``'s signature from now on (the index is read again)."""
        with self._load_lock:
            self.public_key = key
            self.problem = None
            self._by_key, self._by_kernel = {}, {}
            self._loaded = False

    def reload(self):
        """Read the index again (a build replaced the directory since)."""
        with self._load_lock:
            self.problem = None
            self._by_key, self._by_kernel = {}, {}
            self._read_index()
            self._loaded = True

    def entries(self, key):
        """Entries built from code with this content key."""
        if not self._loaded:
            self._load()
        return self._by_key.get(key, [])

    def entries_named(self, kernel):
        """Entries of a kernel (``module:qualname``), whatever code they were built from."""
        if not self._loaded:
            self._load()
        return self._by_kernel.get(kernel, [])

    def read(self, entry):
        """The entry's module, checked against its digest; raises AOTError."""
        try:
            data = self._read_file(entry["spirv"], index.MODULE_LIMIT)
        except FileNotFoundError as exc:
            raise _Vanished(f"{self.label}/{entry['spirv']} cannot be read: {exc}") from None
        except OSError as exc:
            raise AOTError(f"{self.label}/{entry['spirv']} cannot be read: {exc}") from None
        index.check_module(data, entry, self.label)
        try:
            modulecheck.validate_once(data, index.target_of(entry).target_env)
        except ValueError as exc:
            raise AOTError(f"{self.label}/{entry['spirv']} (kernel {entry['kernel']}) is "
                           f"invalid SPIR-V: {exc}") from None
        return data


class _Vanished(AOTError):
    """A module the index names is gone: a build swapped the directory in between."""


def _environment_key():
    """The key ``NUMBA_VULKAN_AOT_PUBLIC_KEY`` names, or None; AOTError if unusable."""
    path = config.aot_public_key()
    if path is None:
        return None
    with _lock:
        key = _environment_keys.get(path)
    if key is None:
        try:
            key = signing.PublicKey(path)
        except AOTError as exc:
            key = AOTError(f"{exc} (from NUMBA_VULKAN_AOT_PUBLIC_KEY)")
        with _lock:
            _environment_keys[path] = key
    if isinstance(key, AOTError):
        raise key
    return key


def register(location, public_key=None):
    """Add an AOT directory to the lookup path.

    Args:
        location: A directory (``str`` or path), or a package (a module or
            its dotted name) that carries one as package data: the package's
            own directory if it holds ``index.json``, else its ``aot``
            subdirectory. Packages are read with :mod:`importlib.resources`.
        public_key: An Ed25519 public key (a PEM file's path, or the PEM
            text) that must have signed the directory's index; an unsigned
            or differently signed directory is then refused like a damaged
            one. Without it, ``NUMBA_VULKAN_AOT_PUBLIC_KEY``'s key, if set.

    Returns:
        The label under which the directory appears in messages and
        :func:`stats`.

    A directory without an index (not built yet) is skipped, with a
    warning, when a kernel is looked up.

    Raises:
        AOTError: ``location`` is neither a directory nor an importable package,
            or ``public_key`` is not an Ed25519 public key.
    """
    key = signing.PublicKey(public_key) if public_key is not None else None
    directory = None
    if isinstance(location, (str, os.PathLike)) and os.path.isdir(location):
        directory = Directory(os.fspath(location), pathlib.Path(os.path.abspath(location)))
        if not directory.root.joinpath(index.INDEX).is_file() and _is_package(location):
            # A package's name that is also a directory in the working
            # directory (an app run from its source tree) means the package.
            directory = None
    if directory is None:
        directory = _package_directory(location)
    directory.public_key = key
    with _lock:
        for known in _registered:
            if str(known.root) == str(directory.root):
                # A key given again (or for the first time) applies: the
                # directory registered earlier must not bypass it.
                if key is not None:
                    known.require(key)
                return known.label
        _registered.append(directory)
    return directory.label


def _is_package(name):
    if not isinstance(name, str) or not all(p.isidentifier() for p in name.split(".")):
        return False
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.submodule_search_locations is not None


def _package_directory(package):
    name = package.__name__ if hasattr(package, "__name__") else str(package)
    try:
        root = importlib.resources.files(package)
    except (ImportError, TypeError, ValueError) as exc:
        raise AOTError(f"{name!r} is neither a directory nor an importable package: "
                       f"{type(exc).__name__}: {exc}") from None
    if root.joinpath(index.INDEX).is_file():
        return Directory(name, root)
    # Also while the app's own AOT build imports it, before the directory exists.
    return Directory(f"{name}/aot", root.joinpath("aot"))


def unregister(label):
    """Remove a directory added with :func:`register` (by the label it returned)."""
    with _lock:
        _registered[:] = [d for d in _registered if d.label != label]


def directories():
    """The search path: ``NUMBA_VULKAN_AOT_PATH`` first, then registered directories."""
    out = []
    with _lock:
        for path in config.aot_path():
            directory = _env_directories.get(path)
            if directory is None:
                directory = Directory(path, pathlib.Path(os.path.abspath(path)))
                _env_directories[path] = directory
            out.append(directory)
        out.extend(_registered)
    return out


def stats():
    """What the AOT lookup did in this process.

    Returns:
        A dict: ``hits`` (kernels found in an AOT directory), ``misses``
        (kernels in none of them), ``rejected`` (entries refused because a
        module or the index was damaged), ``fallbacks`` (kernels compiled by
        the JIT after a miss or a rejection) and ``directories`` (the search
        path).
    """
    with _lock:
        out = dict(_stats)
    out["directories"] = [d.label for d in directories()]
    return out


def kernel_name(dispatcher):
    """``module:qualname`` of a kernel, as a manifest names it.

    A kernel in a module run with ``python -m`` is named by the module's
    import name rather than ``__main__``.
    """
    module = dispatcher.py_func.__module__
    if module == "__main__":
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if spec is not None and spec.name:
            module = spec.name
    return f"{module}:{dispatcher.__qualname__}"


def _key(dispatcher):
    """The content key of a kernel and its parts, computed once per kernel object."""
    with _lock:
        key = _keys.get(dispatcher)
        if key is None:
            try:
                key = keys.content_key_parts(dispatcher)
            except AOTError as exc:
                key = exc
            _keys[dispatcher] = key
    if isinstance(key, AOTError):
        raise key
    return key


def _device_features(target):
    """Features of the calling thread's current device if it is the one
    ``target`` describes.

    Only looks: a compile for an explicit target must not open a device.
    """
    device = sys.modules.get("numba_vulkan.runtime.device")
    current = device.opened_device() if device is not None else None
    if current is not None and current.target == target:
        return current.info.features
    return None


def _usable(entry, sig, threads, target, features, shared_bytes=0):
    """The rank of an entry for a launch (lower is better), or None."""
    if tuple(entry["threads"]) != tuple(threads) or not index.abi_ok(entry):
        return None
    if entry.get("shared_bytes", 0) != shared_bytes:
        return None
    built = index.target_of(entry)
    if index.profile_for(built) != index.profile_for(target):
        return None
    if built.vulkan > tuple(target.vulkan) or entry["push_size"] > target.max_push_constants:
        return None
    if (built.fused_fma and not target.fused_fma) or \
            (built.nvidia_rsqrt and not target.nvidia_rsqrt):
        return None
    if features is not None and not set(entry["features"]) <= set(features):
        return None
    if (built.float16 and not target.float16) or (built.float16_rte and not target.float16_rte):
        return None
    distance = index.signature_distance(tuple(sig), tuple(entry["signature"]))
    if distance is None:
        return None
    # An entry built for the device's loop limit (lavapipe's) first: one
    # built without cannot report reaching it, one built with checks for it
    # where no device needs that. Then one computing float16 as the device
    # can (an entry without float16 arithmetic runs anywhere, in float32),
    # and rounding float16 as the device can.
    return (distance, built.loop_limit != target.loop_limit, built.float16 != target.float16,
            built.float16_rte != target.float16_rte, tuple(-v for v in built.vulkan))


def _manifest_lines(name, sig, threads, shared_bytes=0):
    lines = [f"  - function: {name}", f"    signatures: [\"{index.numba_signature(sig)}\"]"]
    shape = list(threads)
    while len(shape) > 1 and shape[-1] == 1:
        shape.pop()
    if tuple(threads) != index.DEFAULT_THREADS:
        lines.append(f"    threads: [{shape}]")
    if shared_bytes:
        lines.append(f"    shared_bytes: [{shared_bytes}]")
    return "\n".join(lines)


def _warn_once(token, message):
    with _lock:
        if token in _warned:
            return
        _warned.add(token)
    # Point the warning at the user's code, outside this package.
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_globals.get("__name__", "").startswith("numba_vulkan"):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, AOTWarning, stacklevel=level)


def _record(name, sig, threads, shared_bytes=0):
    path = config.aot_record()
    if not path:
        return
    record = {"function": name, "signature": index.numba_signature(sig),
              "threads": list(threads)}
    if shared_bytes:
        record["shared_bytes"] = shared_bytes
    line = json.dumps(record, sort_keys=True)
    with _lock, open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def find(dispatcher, sig, threads, target, search=None, strict=None, features=None,
         shared_bytes=0):
    """The shipped :class:`~numba_vulkan.spirv.compiled.CompiledKernel` for a launch, or None.

    Args:
        dispatcher: The :class:`~numba_vulkan.api.dispatcher.VulkanDispatcher`.
        sig: Argument types in text form.
        threads: The workgroup size ``(x, y, z)``.
        target: The :class:`~numba_vulkan.base.target.TargetDescription` of the device.
        search: The :class:`Directory` objects to search, instead of
            :func:`directories`.
        strict: Whether a miss raises, instead of ``NUMBA_VULKAN_AOT_STRICT``.
        features: The launching device's features: entries needing others
            are skipped. By default those of the calling thread's current
            device where it is the one ``target`` describes, else none are
            checked.
        shared_bytes: The launch's bytes of dynamic shared memory: only an
            entry built for exactly that many fits (0: one built without).

    Raises:
        AOTError: In strict mode, when no AOT directory has a usable entry.
    """
    search = directories() if search is None else search
    strict = config.aot_strict() if strict is None else strict
    name = kernel_name(dispatcher)
    if not search and not strict:
        _record(name, sig, threads, shared_bytes)
        return None
    reasons = []
    try:
        key, parts = _key(dispatcher)
    except AOTError as exc:
        key = None
        reasons.append(str(exc))
    if key is not None:
        if features is None:
            features = _device_features(target)
        for directory in search:
            kernel, ranked = _search(directory, key, sig, threads, target, features, reasons,
                                     shared_bytes, _source_file(dispatcher))
            if kernel is not None:
                return kernel
            if directory.problem:
                reasons.append(f"{directory.problem}, so the directory was skipped")
            elif not ranked and directory.entries(key):
                reasons.append(f"{directory.label} has {name} built from this code, but "
                               + _nearest_launch(directory.entries(key), sig, threads,
                                                 target, shared_bytes))
            elif not ranked and directory.entries_named(name):
                named = directory.entries_named(name)
                bytecode = _bytecode_miss(named, parts)
                reasons.append(f"{directory.label} has {name} built on another Python: "
                               + bytecode if bytecode else
                               f"{directory.label} has {name} built from other code: "
                               + _changed_parts(named, parts) + "; rebuild the directory")
    return _miss(name, sig, threads, target, search, strict, reasons, shared_bytes)


def _describe_part(part):
    if part == "code":
        return "the kernel's own code"
    if part.startswith("python "):
        return f"the Python version its bytecode was keyed with ({part[7:]})"
    if part == "options":
        return "its nv.jit options"
    kind, _, what = part.partition(" ")
    return f"{kind} {what}" if kind in ("callee", "global") else f"closure variable {what}"


def _python_version(tag):
    """``3.12`` of ``cpython-312``, else the tag itself."""
    digits = tag.rpartition("-")[2]
    return f"{digits[0]}.{digits[1:]}" if digits.isdigit() and len(digits) > 1 else tag


def _bytecode_miss(entries, parts):
    """Why an entry keyed by another Python's bytecode is a miss, or None."""
    ours = {p.partition(" ")[2] for p in parts if p.startswith("python ")}
    for entry in entries:
        shipped = entry.get("key_parts")
        if not isinstance(shipped, dict):
            continue
        tags = {p.partition(" ")[2] for p in shipped if p.startswith("python ")}
        if tags and tags != ours:
            (tag,) = sorted(tags)[:1]
            here = codehash.BYTECODE_TAG
            return (f"its entries were keyed by the bytecode of Python {_python_version(tag)} "
                    f"({tag}), because the build could not read the kernel's source, and "
                    f"bytecode differs between Python versions; this is Python "
                    f"{_python_version(here)}: ship the kernel's source (.py files) so "
                    f"that one build serves every Python, or build the directory with "
                    f"this Python too (python{_python_version(here)} -m numba_vulkan.aot "
                    f"build MANIFEST -o ANOTHER_DIR) and register both")
    return None


def _changed_parts(entries, parts):
    """What differs between a kernel's key and the nearest shipped entry's."""
    best = None
    for entry in entries:
        shipped = entry.get("key_parts")
        if not isinstance(shipped, dict):
            continue
        changed = sorted(p for p in set(parts) | set(shipped) if parts.get(p) != shipped.get(p))
        if best is None or len(changed) < len(best[0]):
            best = changed, shipped
    if best is None or not best[0]:
        return ("the kernel, a function it calls or a global it reads changed since the "
                "build")
    words = []
    for part in best[0]:
        if part not in best[1]:
            words.append(f"{_describe_part(part)} is new")
        elif part not in parts:
            words.append(f"{_describe_part(part)} is no longer read")
        else:
            words.append(f"{_describe_part(part)} changed")
    return ", ".join(words) + " since the build"


#: Scalar types a Python number becomes, and the NumPy type that passes a
#: narrower one.
_PYTHON_SCALARS = {"float64": ("a Python float", "float"), "int64": ("a Python int", "int"),
                   "complex128": ("a Python complex", "complex")}


def _scalar_advice(wanted, offered):
    """Where only scalars a Python number makes differ from an entry's: how
    to pass the entry's types (``np.float32(x)``), which the shipped module
    takes as it is."""
    if len(wanted) != len(offered):
        return ""
    advice = []
    for position, (ours, theirs) in enumerate(zip(wanted, offered)):
        if ours == theirs:
            continue
        python = _PYTHON_SCALARS.get(ours)
        if python is None or not theirs.startswith(python[1]) or "[" in theirs:
            return ""
        advice.append(f"argument {position + 1} is {ours} (as {python[0]} is), the entry's "
                      f"is {theirs}: pass np.{theirs}(value)")
    return f" ({'; '.join(advice)}, and the shipped module runs)" if advice else ""


def _nearest_launch(entries, sig, threads, target, shared_bytes=0):
    """What differs between a launch and the nearest entry built from its code."""
    profile = index.profile_for(target)

    def differences(entry):
        out = []
        if index.signature_distance(tuple(sig), tuple(entry["signature"])) is None:
            out.append(f"argument types ({', '.join(entry['signature'])})"
                       + _scalar_advice(sig, entry["signature"]))
        if tuple(entry["threads"]) != tuple(threads):
            out.append(f"threads {tuple(entry['threads'])}")
        if entry.get("shared_bytes", 0) != shared_bytes:
            out.append(f"{entry.get('shared_bytes', 0)} bytes of dynamic shared memory")
        try:
            built = index.profile_for(index.target_of(entry))
        except ValueError:
            built = "?"
        if built != profile:
            out.append(f"profile {built}")
        if not out:
            out.append(f"needs Vulkan {entry['vulkan']} and features "
                       f"{', '.join(entry['features']) or 'none'}, ABI "
                       f"{entry['abi_version']}, push constants {entry['push_size']} bytes")
        return out

    nearest = min((differences(e) for e in entries), key=len)
    return "the nearest entry differs: it was built for " + ", ".join(nearest)


#: Times a lookup reads a directory's index again when a build replaced the
#: directory between reading the index and a module. Each costs only an
#: index read, and builds swapping without pause (the test's) beat 3.
_RELOADS = 20


def _source_file(dispatcher):
    """The file a kernel's function was loaded from, or None."""
    code = getattr(dispatcher.py_func, "__code__", None)
    return getattr(code, "co_filename", None)


def _search(directory, key, sig, threads, target, features, reasons, shared_bytes=0,
            source=None):
    """``(kernel or None, ranked entries)`` of one directory; ``source``:
    the file of the kernel's function, by which the files its error
    messages name are found."""
    for attempt in range(_RELOADS + 1):
        ranked = []
        for entry in directory.entries(key):
            rank = _usable(entry, sig, threads, target, features, shared_bytes)
            if rank is not None:
                ranked.append((rank, entry["sha256"], entry))
        vanished = False
        for _, _, entry in sorted(ranked, key=lambda r: r[:2]):
            try:
                root = source and index.source_root(entry["kernel"].partition(":")[0], source)
                kernel = index.compiled_kernel(entry, directory.read(entry), root)
            except _Vanished as exc:
                if attempt < _RELOADS:
                    vanished = True
                    break
                reasons.append(str(exc))
                continue
            except AOTError as exc:
                log.event("aot", "rejected", entry["kernel"], str(exc))
                with _lock:
                    _stats["rejected"] += 1
                _warn_once(("rejected", directory.label, entry["sha256"]),
                           f"{exc}; the entry is not used")
                reasons.append(str(exc))
                continue
            with _lock:
                _stats["hits"] += 1
            return kernel, ranked
        if not vanished:
            return None, ranked
        directory.reload()
    return None, ranked


def refused_by_driver(kernel, error):
    """A shipped kernel whose pipeline the driver would not create.

    Raises:
        AOTError: In strict mode. Otherwise warns once; the caller compiles.
    """
    aot = kernel.metadata.get("aot", {})
    message = (f"the driver refused the AOT module {aot.get('sha256', '?')[:16]} of "
               f"{aot.get('kernel', kernel.name)} ({error}); rebuild the directory")
    with _lock:
        _stats["rejected"] += 1
    if config.aot_strict():
        raise AOTError(message + " (NUMBA_VULKAN_AOT_STRICT is set, so nothing is compiled)")
    with _lock:
        _stats["fallbacks"] += 1
    _warn_once(("driver", aot.get("sha256")), message + "; compiling it now")


def _strict_reason():
    """Why a strict lookup compiled nothing: the setting, or the caller's request."""
    return (" (NUMBA_VULKAN_AOT_STRICT is set, so nothing is compiled)" if config.aot_strict()
            else " (a strict lookup, so nothing is compiled)")


def _miss(name, sig, threads, target, search, strict, reasons, shared_bytes=0):
    """Count a miss; raise in strict mode, else warn once and return None."""
    log.event("aot", "miss", name, "; ".join(reasons) or "no entry")
    with _lock:
        _stats["misses"] += 1
    _record(name, sig, threads, shared_bytes)
    where = ", ".join(d.label for d in search) or "no AOT directory is registered"
    shared = f", {shared_bytes} bytes of dynamic shared memory" if shared_bytes else ""
    message = (f"{name} with argument types ({', '.join(sig)}), threads {tuple(threads)}"
               f"{shared} and profile {index.profile_for(target)} is not in the AOT "
               f"directories ({where})")
    if reasons:
        message += ": " + "; ".join(reasons)
    hint = ("\nTo ship it, add to the manifest's kernels:\n"
            + _manifest_lines(name, sig, threads, shared_bytes))
    if strict:
        raise AOTError(message + _strict_reason() + hint)
    with _lock:
        _stats["fallbacks"] += 1
    _warn_once(("miss", name, tuple(sig), tuple(threads), index.profile_for(target),
                shared_bytes),
               message + "; compiling it now." + hint)
    return None
