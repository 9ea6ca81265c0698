"""On-disk cache of compiled kernels.

Turning a kernel's LLVM IR into SPIR-V (linking libclc, optimising,
restructuring, running the backend) is the larger part of compiling it. The
result depends only on the IR that Numba's lowering produces and on this
package, so it is stored under a hash of both and reused by later processes.
Numba's own pipeline still runs every time, which is what makes the cache
safe: a change to a kernel, to a function it calls or to a global it reads
changes the IR and therefore the hash.

Entries live in ``kernels/`` below the cache directory
(:func:`numba_vulkan.base.config.cache_dir`) and can be deleted at any time. Setting ``NUMBA_VULKAN_CACHE=0`` turns the
cache off.

Kernels compiled with ``@nv.jit(cache=True)`` are stored whole as well, in
``functions/``, which skips Numba's pipeline too. They are found by their
bytecode, the timestamps of their source files and those of the ``@nv.jit``
functions they call, as with Numba's ``cache=True`` (:func:`source_stamp`),
and by the content of their code and of the globals it reads
(:mod:`numba_vulkan.store.codehash`, the key of AOT directories too); see
:meth:`numba_vulkan.api.dispatcher.VulkanDispatcher.compile`. A kernel without
a source file (defined with ``exec`` or interactively) is not stored there.

An entry is one file, ``NAME.entry``: a line naming the format and its
version, a line of JSON (the key, the entry's JSON values, the size and
SHA-256 of each bytes value and long text value, and a checksum of the line
itself), then those values raw, in the order the line lists them. One file,
because LLVM's backend does not give the same bytes twice for the same IR:
separate files written by two processes at once could pair one's metadata
with the other's module. Any dict of JSON values and bytes round-trips.
The file is written to a temporary file in the same directory and moved
into place with :func:`os.replace`. Reading an entry reads a regular file of
bounded size, parses JSON and compares hashes, nothing else; anything that
does not check out is a miss. A module from the ``functions/`` tier is
checked against the kernel's interface before it is used
(:mod:`numba_vulkan.spirv.modulecheck`), as a shipped one is.

A cache directory that cannot be created or written turns the cache off
with one warning (:func:`numba_vulkan.base.files.cache_root`).

With ``NUMBA_VULKAN_REMOTE_CACHE`` set, a lookup that misses the disk asks
a Redis server (:mod:`numba_vulkan.store.remote`) under :func:`remote_key`;
what it returns is an entry file's bytes, read and checked as one from disk
and then written to the disk. Stores are sent there from a background
thread. A ``functions/`` entry has a name of its own there, of its source
files' content rather than their paths and times, so that every checkout
of the same files finds it (:func:`function_key`). ``docs/remote.md`` says
what this trusts.

Entries of both tiers are kept under ``NUMBA_VULKAN_CACHE_MAX_BYTES``:
a hit renews an entry's modification time, and a store over the cap evicts
the least recently used ones (:func:`evict`). Each process adds its
counters to ``stats.json`` at exit.

Run ``python -m numba_vulkan cache info`` to see the cache's size, entries
and hit rates, and ``python -m numba_vulkan cache clear`` to empty it.
"""

import atexit
import hashlib
import json
import os
import re
import shutil
import sys
import threading
import time
from collections import namedtuple

try:
    import fcntl
except ImportError:  # Windows: processes add their counts without taking turns
    fcntl = None

from numba_vulkan.base import abi
from numba_vulkan.store import codehash
from numba_vulkan.base import config
from numba_vulkan.base import files
from numba_vulkan.base import jitoptions
from numba_vulkan.base import libclc_file
from numba_vulkan.spirv import modulecheck
from numba_vulkan.store import remote as remotecache

#: The environment variable that turns the cache off when set to 0.
ENV_VAR = "NUMBA_VULKAN_CACHE"

#: Version of the entry format; part of every key, so a new format never
#: reads an old entry.
FORMAT_VERSION = 2

#: The two tiers: directory names below the cache directory.
TIERS = ("kernels", "functions")
#: The name of the remote tier in :func:`stats` (:mod:`numba_vulkan.store.remote`).
REMOTE = "remote"

_NAME = re.compile(r"^[0-9a-f]{64}$")
_MAGIC_PREFIX = b"numba_vulkan cache entry "
_MAGIC = _MAGIC_PREFIX + b"%d\n" % FORMAT_VERSION
#: Suffix of entry files.
SUFFIX = ".entry"
#: Entries larger than this are not read (a damaged size field must not
#: make a lookup read gigabytes).
_MAX_FILE = 256 << 20
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_lock = threading.Lock()
_counters = {tier: {"hits": 0, "misses": 0, "rejected": 0, "stores": 0, "store_failures": 0,
                    "uncacheable": 0, "evicted": 0} for tier in TIERS}
#: The part of ``_counters`` already added to the cache's ``stats.json``.
_flushed = {tier: dict.fromkeys(counts, 0) for tier, counts in _counters.items()}
_flushed[REMOTE] = dict.fromkeys(remotecache.COUNTERS, 0)
_exit_hook = []
_digests = {}


# Settings and the fingerprint ---------------------------------------------


def enabled():
    """Whether kernels are cached on disk.

    Returns:
        bool: False when ``NUMBA_VULKAN_CACHE`` is ``0``.
    """
    return config.cache_enabled()


def _file_digest(path):
    """SHA-256 of a file's content, remembered while its size and mtime stay."""
    st = os.stat(path)
    stamp = ("file", path, st.st_size, st.st_mtime_ns)
    digest = _digests.get(stamp)
    if digest is None:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        digest = _digests[stamp] = h.hexdigest()
    return digest


def _tree_digest(directory):
    """Hash of every file below ``directory`` except compiled bytecode."""
    files = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        files.extend(os.path.join(root, n) for n in sorted(names)
                     if not n.endswith((".pyc", ".pyo")))
    h = hashlib.sha256()
    for path in files:
        h.update(os.path.relpath(path, directory).encode() + b"\0")
        h.update(_file_digest(path).encode())
    return h.hexdigest()


def _package_part():
    return "package:" + _tree_digest(_PACKAGE_DIR)


def _record_text(package_dir, distribution):
    """The installer's RECORD of a distribution whose dist-info lies beside
    ``package_dir``, or "" if there is none."""
    site = os.path.dirname(package_dir)
    try:
        infos = sorted(n for n in os.listdir(site)
                       if n.startswith(distribution + "-") and n.endswith(".dist-info"))
        if len(infos) != 1:
            return ""
        return files.read_regular(os.path.join(site, infos[0], "RECORD"), 1 << 20).decode()
    except (OSError, UnicodeError):
        return ""


def _recorded(package_dir, distribution, text=None):
    """``{path: (hash, size)}`` from the installer's RECORD of a distribution
    whose dist-info lies beside ``package_dir``; empty if there is none."""
    if text is None:
        text = _record_text(package_dir, distribution)
    out = {}
    for line in text.splitlines():
        path, _, rest = line.partition(",")
        digest, _, size = rest.partition(",")
        if digest:
            out[path] = (digest, size)
    return out


def _llvmlite_part():
    # The version pins LLVM's for llvmlite's own builds; the library's hash
    # in the installer's RECORD (the same on every machine that installed
    # the same wheel, which a remote cache's users share) or, where the
    # file is not the recorded one, its size and mtime catch one rebuilt
    # against another LLVM. llvmlite.binding is not imported: that loads
    # LLVM, which a cache hit must not need.
    import llvmlite
    package = os.path.dirname(llvmlite.__file__)
    recorded = _recorded(package, "llvmlite")
    library = ""
    directory = os.path.join(package, "binding")
    for name in sorted(os.listdir(directory)):
        if name.startswith("libllvmlite"):
            st = os.stat(os.path.join(directory, name))
            digest, size = recorded.get(f"llvmlite/binding/{name}", ("", ""))
            if digest and size == str(st.st_size):
                library += f"{name}:{digest}"
            else:
                library += f"{name}:{st.st_size}:{st.st_mtime_ns}"
    return f"llvmlite:{llvmlite.__version__}:{library}"


def _libclc_part():
    path = libclc_file.path_in_use()
    if not path:
        return "libclc:none"
    return f"libclc:{os.path.abspath(path)}:{_file_digest(path)}"


def _llc_part():
    llc = config.llc()
    if not llc:
        return "llc:none"
    path = shutil.which(llc)
    if path is None:
        return f"llc:missing:{llc}"
    # Hashing a whole LLVM tool each process costs more than it is worth;
    # a replaced binary changes its size or modification time.
    path = os.path.realpath(path)
    st = os.stat(path)
    return f"llc:{path}:{st.st_size}:{st.st_mtime_ns}"


def fingerprint():
    """Hash of everything besides a kernel's IR that shapes its SPIR-V.

    That is the source of this package, the version of llvmlite (and with it
    of LLVM), the libclc file in use, and the ``llc`` program if one replaces
    llvmlite's backend.

    Returns:
        str: A hexadecimal digest.
    """
    parts = [f"format:{FORMAT_VERSION}", _package_part(), _llvmlite_part(), _libclc_part(),
             _llc_part()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


# Keys of the kernels/ tier -------------------------------------------------

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


def _json_default(value):
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"cache key setting of type {type(value).__name__} is not data: {value!r}")


def _settings_text(settings):
    return json.dumps(list(settings), sort_keys=True, separators=(",", ":"),
                      default=_json_default)


def _digest(tier, parts, settings):
    h = hashlib.sha256(f"{tier}\0{FORMAT_VERSION}\0{fingerprint()}\0".encode())
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    h.update(_settings_text(settings).encode())
    return h.hexdigest()


def key(source, *settings):
    """Name of the cache entry for a kernel.

    The digest covers :func:`fingerprint` as well, so a change to this
    package or its tools never finds an old entry.

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


# Keys of the functions/ tier -----------------------------------------------


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


# Entries -------------------------------------------------------------------


def _count(tier, what):
    with _lock:
        _counters[tier][what] += 1
        if not _exit_hook:
            _exit_hook.append(atexit.register(_at_exit))


def _at_exit():
    # The remote tier's last stores first, so that their count is added too.
    remotecache.flush()
    flush_stats()


def stats():
    """Lookups and stores of this process, per tier.

    Returns:
        dict: ``{tier: {"hits", "misses", "rejected", "stores",
        "store_failures", "uncacheable", "evicted"}}``; ``rejected`` counts
        entries found but damaged or not matching, ``uncacheable`` kernels
        that could not be keyed, ``evicted`` entries removed to keep the
        cache under ``NUMBA_VULKAN_CACHE_MAX_BYTES``. The ``"remote"`` tier
        has ``hits``, ``misses``, ``rejected``, ``errors``, ``stores`` and
        the others of :func:`numba_vulkan.store.remote.counts`; a remote
        hit is a miss of its local tier.
    """
    with _lock:
        out = {tier: dict(counts) for tier, counts in _counters.items()}
    out[REMOTE] = remotecache.counts()
    return out


def reset_stats():
    """Set every counter of :func:`stats` to zero (``stats.json`` keeps its totals)."""
    with _lock:
        for tier, counts in _counters.items():
            for what in counts:
                counts[what] = 0
                _flushed[tier][what] = 0
        _flushed[REMOTE] = dict.fromkeys(remotecache.COUNTERS, 0)
    remotecache.reset_counts()


#: The file below the cache directory that adds up every process's counters.
STATS = "stats.json"
_STATS_LIMIT = 1 << 16


def _read_totals(root):
    """The totals of ``stats.json``, or zeros if it is missing or damaged."""
    totals = {tier: dict.fromkeys(_counters[tier], 0) for tier in TIERS}
    totals[REMOTE] = dict.fromkeys(remotecache.COUNTERS, 0)
    try:
        data = json.loads(files.read_regular(os.path.join(root, STATS), _STATS_LIMIT))
    except (OSError, ValueError, UnicodeError, RecursionError):
        return totals
    for tier, counts in (data.get("tiers") if isinstance(data, dict) else {}).items():
        if tier in totals and isinstance(counts, dict):
            for what, n in counts.items():
                if what in totals[tier] and type(n) is int and n >= 0:
                    totals[tier][what] = n
    return totals


def flush_stats():
    """Add this process's counters since the last flush to the cache's ``stats.json``.

    Runs at exit once anything was counted; ``cache info`` shows the totals.
    Processes take turns through a lock on the cache directory; a failure
    to write is ignored (the counts are only lost).
    """
    root = files.cache_root()
    if root is None:
        return
    remote = remotecache.counts()
    with _lock:
        current = dict(_counters, **{REMOTE: remote})
        delta = {tier: {w: n - _flushed[tier][w] for w, n in counts.items()}
                 for tier, counts in current.items()}
        for tier, counts in current.items():
            _flushed[tier].update(counts)
    if not any(n for counts in delta.values() for n in counts.values()):
        return
    lock = None
    try:
        if fcntl is not None:
            lock = os.open(root, os.O_RDONLY)
            fcntl.flock(lock, fcntl.LOCK_EX)
        totals = _read_totals(root)
        for tier, counts in delta.items():
            for what, n in counts.items():
                totals[tier][what] += n
        files.write_atomic(os.path.join(root, STATS),
                           json.dumps({"format": 1, "tiers": totals}, sort_keys=True).encode())
    except OSError:
        pass
    finally:
        if lock is not None:
            os.close(lock)


def _log(tier, outcome, name, detail=""):
    if config.debug_cache():
        line = f"numba_vulkan cache: {tier} {outcome} {name}"
        sys.stderr.write(line + (f" ({detail})" if detail else "") + "\n")


def tier_directory(tier):
    """The directory of a tier's entries (not created)."""
    return os.path.join(config.cache_dir(), tier)


def _checksum(record):
    body = {k: v for k, v in record.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"))
                          .encode()).hexdigest()


def _entry_path(tier, name):
    return os.path.join(tier_directory(tier), name + SUFFIX)


def _read_entry(tier, name):
    """The entry as stored, or raise (OSError, ValueError) why not."""
    return _parse_entry(tier, name, files.read_regular(_entry_path(tier, name), _MAX_FILE))


def _parse_entry(tier, name, data):
    """The entry an entry file's bytes hold, or raise ValueError why not."""
    if not data.startswith(_MAGIC_PREFIX):
        raise ValueError("not a cache entry")
    if not data.startswith(_MAGIC):
        raise ValueError("entry of another format version")
    end = data.find(b"\n", len(_MAGIC))
    if end < 0:
        raise ValueError("truncated header")
    record = json.loads(data[len(_MAGIC):end])
    if not isinstance(record, dict):
        raise ValueError("malformed header")
    if record.get("format") != FORMAT_VERSION:
        raise ValueError(f"format {record.get('format')!r}, expected {FORMAT_VERSION}")
    if record.get("tier") != tier or record.get("key") != name:
        raise ValueError("entry of another kernel")
    if record.get("checksum") != _checksum(record):
        raise ValueError("header does not match its checksum")
    values, blobs = record.get("values"), record.get("blobs")
    if not isinstance(values, dict) or not isinstance(blobs, list):
        raise ValueError("malformed header")
    entry, pos = dict(values), end + 1
    for blob in blobs:
        if (not isinstance(blob, list) or len(blob) != 4 or not isinstance(blob[0], str)
                or blob[1] not in ("bytes", "text") or type(blob[2]) is not int
                or blob[2] < 0 or blob[0] in entry):
            raise ValueError("malformed header")
        key, kind, size, digest = blob
        content = data[pos:pos + size]
        if len(content) != size or hashlib.sha256(content).hexdigest() != digest:
            raise ValueError("content does not match its hash")
        entry[key] = content if kind == "bytes" else content.decode("utf-8")
        pos += size
    if pos != len(data):
        raise ValueError("trailing data")
    return entry


#: The remote name of :func:`_lookup` and :func:`_write_entry` by default:
#: the server's entry has the disk's name.
_SAME = object()


def _lookup(tier, name, label=None, check=None, remote=_SAME):
    """Read an entry, count and log the lookup; None on any failure.

    ``remote`` is the server's name of the entry and a function that makes
    what the server holds this machine's entry (raising ValueError if it
    cannot), or None for no lookup on the server."""
    label = label or name
    if not enabled():
        return None
    if not isinstance(name, str) or not _NAME.match(name):
        _count(tier, "misses")
        _log(tier, "miss", label, "not an entry name")
        return None
    try:
        entry = _read_entry(tier, name)
        if check is not None:
            check(entry)
    except FileNotFoundError:
        _count(tier, "misses")
        _log(tier, "miss", label, name[:16])
        return _remote_lookup(tier, name, label, check, remote)
    except _DAMAGED as exc:
        _count(tier, "rejected")
        _log(tier, "rejected", label, f"{name[:16]}: {exc}")
        return _remote_lookup(tier, name, label, check, remote)
    _count(tier, "hits")
    _log(tier, "hit", label, name[:16])
    try:
        # The modification time orders entries for eviction: least recently
        # used first. One system call; a read-only cache keeps its order.
        os.utime(_entry_path(tier, name))
    except OSError:
        pass
    return entry


#: What reading or checking a damaged or mismatched entry raises.
_DAMAGED = (OSError, ValueError, TypeError, KeyError, AttributeError, UnicodeError,
            RecursionError, OverflowError)


def remote_key(tier, name):
    """The key of an entry on the remote cache's server.

    Namespaced by the entry format and :func:`fingerprint`, so that servers
    shared by several versions of the package never mix their entries (the
    name covers both as well)."""
    return f"numba_vulkan:{FORMAT_VERSION}:{fingerprint()}:{tier}:{name}"


def _remote_lookup(tier, name, label, check, remote=_SAME):
    """The entry from the remote tier, checked as one from disk and then
    written there; None if there is none or it does not check out."""
    if config.remote_cache() is None or remote is None:
        return None
    theirs, adapt = (name, None) if remote is _SAME else remote
    data = remotecache.get(remote_key(tier, theirs), _MAX_FILE)
    if data is None:
        _log(REMOTE, "miss", label, theirs[:16])
        return None
    try:
        entry = _parse_entry(tier, theirs, data)
        if adapt is not None:
            adapt(entry)
            # Before the check, which adds what is not data.
            data = _encode_entry(tier, name, entry)
        if check is not None:
            check(entry)
    except _DAMAGED as exc:
        remotecache.count("rejected")
        _log(REMOTE, "rejected", label, f"{name[:16]}: {exc}")
        return None
    remotecache.count("hits")
    _log(REMOTE, "hit", label, name[:16])
    try:
        root = files.cache_root()
        if root is not None:
            os.makedirs(os.path.join(root, tier), exist_ok=True)
            files.write_atomic(os.path.join(root, tier, name + SUFFIX), data)
            evict(root, keep=_entry_path(tier, name))
    except OSError as exc:
        _log(tier, "store failed", name[:16], str(exc))
    return entry


def remote_load(tier, name, check=None):
    """An entry of the remote tier alone, for what has no local tier (AOT
    builds keep modules in their previous output).

    Args:
        tier: A namespace of the server's keys, such as ``"aot"``.
        name: A 64-digit hexadecimal name.
        check: Called with the entry; raising ValueError rejects it.

    Returns:
        dict or None: As passed to :func:`remote_store`, checked as an entry
        file is; None if there is none, it does not check out, or the tier
        is off or unset.
    """
    if not enabled() or config.remote_cache() is None or not _NAME.match(name):
        return None
    data = remotecache.get(remote_key(tier, name), _MAX_FILE)
    if data is None:
        return None
    try:
        entry = _parse_entry(tier, name, data)
        if check is not None:
            check(entry)
    except _DAMAGED as exc:
        remotecache.count("rejected")
        _log(REMOTE, "rejected", name[:16], str(exc))
        return None
    remotecache.count("hits")
    return entry


def remote_store(tier, name, entry):
    """Send an entry to the remote tier alone (see :func:`remote_load`); never blocks."""
    if enabled() and config.remote_cache() is not None:
        remotecache.put(remote_key(tier, name), _encode_entry(tier, name, entry))


#: Text values longer than this are stored raw after the header, not as JSON.
_TEXT_BLOB = 256


def _encode_entry(tier, name, entry):
    """The bytes of an entry file holding ``entry``.

    Raises:
        ValueError: ``name`` is not an entry name.
        TypeError: ``entry`` is not a dict of str keys and JSON-serialisable
            values or bytes (a caller's bug, found before anything is written).
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"{name!r} is not a cache entry name")
    if not isinstance(entry, dict) or not all(isinstance(k, str) for k in entry):
        raise TypeError("a cache entry is a dict with str keys")
    values, blobs, contents = {}, [], []
    for key_, value in sorted(entry.items()):
        if isinstance(value, (bytes, bytearray, memoryview)):
            content, kind = bytes(value), "bytes"
        elif isinstance(value, str) and len(value) > _TEXT_BLOB:
            content, kind = value.encode("utf-8"), "text"
        else:
            values[key_] = value
            continue
        blobs.append([key_, kind, len(content), hashlib.sha256(content).hexdigest()])
        contents.append(content)
    record = {"format": FORMAT_VERSION, "tier": tier, "key": name, "created": time.time(),
              "values": values, "blobs": blobs}
    try:
        json.dumps(record)
    except (ValueError, RecursionError) as exc:
        raise TypeError(f"a cache entry's values must be JSON-serialisable: {exc}") from None
    record["checksum"] = _checksum(record)
    header = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
    return b"".join([_MAGIC, header, b"\n", *contents])


def _write_entry(tier, name, entry, remote=_SAME):
    """Store ``entry``, and send it to the server under the name ``remote``
    (None: not at all); False if it could not be written.

    Raises:
        ValueError, TypeError: As :func:`_encode_entry`.
    """
    data = _encode_entry(tier, name, entry)
    if not enabled():
        return False
    if config.remote_cache() is not None and remote is not None:
        theirs = name if remote is _SAME else remote
        remotecache.put(remote_key(tier, theirs),
                        data if theirs == name else _encode_entry(tier, theirs, entry))
    try:
        root = files.cache_root()
        if root is None:
            raise OSError("the cache directory cannot be used")
        directory = os.path.join(root, tier)
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, name + SUFFIX)
        if os.path.isdir(path) and not os.path.islink(path):
            # A directory where an entry file belongs would refuse every
            # later store under this name.
            shutil.rmtree(path, ignore_errors=True)
        files.write_atomic(path, data)
    except OSError as exc:
        _count(tier, "store_failures")
        _log(tier, "store failed", name[:16], str(exc))
        return False
    _count(tier, "stores")
    evict(root, keep=path)
    return True


#: Eviction trims the cache to this fraction of its cap, so that not every
#: store after the cap is reached evicts.
_TRIM = 0.9


def _entry_files(root):
    """``(mtime, size, tier, path)`` of every entry file below ``root``."""
    out = []
    for tier in TIERS:
        try:
            with os.scandir(os.path.join(root, tier)) as it:
                for e in it:
                    if not e.name.endswith(SUFFIX):
                        continue
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    out.append((st.st_mtime, st.st_size, tier, e.path))
        except OSError:
            continue
    return out


def evict(root=None, keep=None):
    """Remove least recently used entries while the cache is over its cap.

    The cap is ``NUMBA_VULKAN_CACHE_MAX_BYTES`` over both tiers; once over
    it, entries go, oldest use (modification time) first, until the rest
    fit in 90% of it. Called after each store.

    Args:
        root: The cache directory (default: the configured one, if usable).
        keep: An entry file never to remove (the one just stored).

    Returns:
        int: How many entries were removed.
    """
    cap = config.cache_max_bytes()
    root = root or files.cache_root()
    if not cap or root is None:
        return 0
    found = _entry_files(root)
    total = sum(size for _, size, _, _ in found)
    if total <= cap:
        return 0
    removed = 0
    for _, size, tier, path in sorted(found):
        if total <= cap * _TRIM:
            break
        if path == keep:
            continue
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:
            continue
        total -= size
        removed += 1
        _count(tier, "evicted")
    return removed


def load(name):
    """Read an entry.

    Args:
        name (str): Name of the entry, from :func:`key`.

    Returns:
        dict or None: The entry as passed to :func:`store` (as JSON gives it
        back: tuples become lists), or None if there is none, it is damaged
        or the cache is off.
    """
    return _lookup("kernels", name)


def store(name, entry):
    """Write an entry; failures to write are ignored.

    Args:
        name (str): Name of the entry, from :func:`key`.
        entry (dict): str keys; values that are bytes or JSON-serialisable.
            Kernels store ``spirv`` (bytes), ``llvm_ir`` (str) and metadata.

    Raises:
        ValueError: ``name`` is not an entry name.
        TypeError: A value is neither bytes nor JSON-serialisable.
    """
    _write_entry("kernels", name, entry)


def load_kernel(name):
    """Read a cached kernel.

    Args:
        name (str): From :func:`kernel_key`.

    Returns:
        dict or None: As passed to :func:`store_kernel` (as JSON gives it
        back), or None if there is none or it cannot be read.
    """
    return _lookup("functions", name)


def store_kernel(name, entry):
    """Write a cached kernel; failures to write are ignored.

    Args:
        name (str): From :func:`kernel_key`.
        entry (dict): str keys; values that are bytes or JSON-serialisable.
            The dispatcher stores ``spirv`` (bytes), ``llvm_ir`` (str),
            ``kernel`` (:meth:`CompiledKernel.to_metadata`) and ``validated``.

    Raises:
        ValueError: ``name`` is not an entry name.
        TypeError: A value is neither bytes nor JSON-serialisable.
    """
    _write_entry("functions", name, entry)


# What the dispatcher calls --------------------------------------------------

#: A module found in the ``kernels/`` tier.
CachedModule = namedtuple("CachedModule", "spirv llvm_ir capabilities loop_check",
                          defaults=(False,))


def _options(options):
    return jitoptions.code_options(options)


def module_key(modules, bindings, local_size, target, options):
    """The ``kernels/`` name of a kernel's module, or None if caching is off.

    Args:
        modules: IR text of the kernel's modules, as Numba lowered them.
        bindings: Storage dtype of each descriptor binding.
        local_size: Workgroup size ``(x, y, z)``.
        target: The :class:`~numba_vulkan.base.target.TargetDescription`.
        options: The kernel's ``nv.jit`` options.
    """
    if not enabled():
        return None
    source = normalise("\n; ----\n".join(modules))
    return key(source, target.key(), list(local_size), list(bindings), _options(options),
               abi.ABI_VERSION)


def _check_module(entry):
    capabilities = entry["capabilities"]
    if not isinstance(capabilities, list) or not all(isinstance(c, str) for c in capabilities):
        raise ValueError("malformed capabilities")
    if not isinstance(entry["spirv"], bytes) or not isinstance(entry["llvm_ir"], str):
        raise ValueError("no module")
    modulecheck.check_header(entry["spirv"])
    if config.validate() and entry.get("validated") is not True:
        # Validation is on but this module never went through spirv-val.
        raise ValueError("not validated")


def load_module(name, label):
    """The :class:`CachedModule` stored under ``name``, or None.

    None as well while ``NUMBA_VULKAN_DUMP`` is set: dumping asks for the
    code generator to run."""
    if name is None or config.dump_dir():
        return None
    entry = _lookup("kernels", name, label, _check_module)
    if entry is None:
        return None
    return CachedModule(entry["spirv"], entry["llvm_ir"], entry["capabilities"],
                        entry.get("loop_check") is True)


def store_module(name, module, label):
    """Store a module the compiler built (:mod:`numba_vulkan.compiler.stages`)."""
    if name is None:
        return
    store(name, {"spirv": module.spirv, "llvm_ir": module.llvm_ir,
                 "capabilities": list(module.capabilities), "kernel": label,
                 "loop_check": bool(module.loop_check),
                 "validated": config.validate()})


def _installed_version(package):
    """A package's version, read without importing it (as Numba, on a hit)."""
    import importlib.util
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        return "missing"
    # importlib.metadata scans every entry of sys.path, which costs more
    # than the rest of a cache hit; the dist-info directory sits beside the
    # package and names the version.
    site = os.path.dirname(os.path.dirname(spec.origin))
    infos = sorted(n for n in os.listdir(site)
                   if n.startswith(package + "-") and n.endswith((".dist-info", ".egg-info")))
    st = os.stat(spec.origin)
    return f"{','.join(infos)}:{st.st_size}:{st.st_mtime_ns}"


def _versions():
    """Versions of what shapes Numba's lowering."""
    import numpy
    return [_installed_version("numba"), numpy.__version__, sys.implementation.cache_tag]


_portable_versions_memo = {}


def _portable_versions():
    """:func:`_versions` as every machine with the same install has them.

    Numba is named by a digest of its installer's RECORD, which lists the
    hash of each of its files, instead of its files' times. Where Numba's
    ``__init__.py`` is not the file the RECORD lists (edited, or installed
    without one), its size and time stand in, as in :func:`_versions`, and
    only this machine finds the entries.
    """
    import importlib.util
    import numpy
    spec = importlib.util.find_spec("numba")
    if spec is None or not spec.origin:
        return ["missing", numpy.__version__, sys.implementation.cache_tag]
    st = os.stat(spec.origin)
    stamp = (spec.origin, st.st_size, st.st_mtime_ns)
    numba_part = _portable_versions_memo.get(stamp)
    if numba_part is None:
        package = os.path.dirname(spec.origin)
        text = _record_text(package, "numba")
        _, size = _recorded(package, "numba", text).get("numba/__init__.py", ("", ""))
        if text and size == str(st.st_size):
            numba_part = "record:" + hashlib.sha256(text.encode()).hexdigest()
        else:
            numba_part = _installed_version("numba")
        _portable_versions_memo[stamp] = numba_part
    return [numba_part, numpy.__version__, sys.implementation.cache_tag]


def _content_stamp(function):
    """:func:`source_stamp` with the source file's content in place of its
    name, size and time: the same in every checkout of the same files."""
    code = function.__code__
    path = os.path.realpath(code.co_filename)
    return "\0".join([_file_digest(path), function.__qualname__,
                      codehash.code_digest(code)]).encode()


def _uncacheable(function, why):
    _log("functions", "uncacheable", getattr(function, "__qualname__", "?"), why)
    _count("functions", "uncacheable")


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
    files' content instead of its path, size and time (:func:`_content_stamp`),
    and Numba's install by its RECORD (:func:`_portable_versions`), so that
    every checkout of the same files finds it. Any edit of those files
    changes it, as it changes their times.
    """
    if not enabled():
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
    settings = [found.key, list(sig), list(local_size), target.key(), _options(options),
                abi.ABI_VERSION]
    local = kernel_key(stamps, *settings, _versions(), config.numba_settings())
    if config.remote_cache() is None:
        return FunctionKey(local, None, None)
    try:
        contents = [_content_stamp(reached) for reached in found.functions]
    except OSError:
        # A source file gone since it was stamped: this process keeps the kernel.
        return FunctionKey(local, None, None)
    remote = _digest("functions", [b"content", *contents],
                     [*settings, _portable_versions(), config.numba_settings()])
    sources = tuple(os.path.realpath(f.__code__.co_filename) for f in found.functions)
    return FunctionKey(local, remote, sources)


def _from_elsewhere(key):
    """What makes an entry from the server, another checkout's, this one's:
    its source files named by this machine's paths (in its list of them and
    where its ``raise`` statements report them); ValueError if it lists
    none, or not as many as the kernel has."""
    def adapt(entry):
        theirs = entry.get("sources")
        if (not isinstance(theirs, list) or len(theirs) != len(key.sources)
                or not all(isinstance(path, str) for path in theirs)):
            raise ValueError("no list of the kernel's source files")
        ours = dict(zip(theirs, key.sources))
        entry["sources"] = list(key.sources)
        exceptions = entry["kernel"]["metadata"].get("exceptions", {})
        for description in exceptions.values():
            if description.get("file") in ours:
                description["file"] = ours[description["file"]]
    return adapt


def load_compiled(key, sig, local_size, target, label):
    """The :class:`~numba_vulkan.spirv.compiled.CompiledKernel` stored under ``key``
    (a :class:`FunctionKey`, or an entry name that the server has the entry
    under too) for exactly this signature, workgroup size and target, or
    None (also while ``NUMBA_VULKAN_DUMP`` is set).

    The disk is asked under the local name, the server under the remote one;
    an entry from the server is made this checkout's (:func:`_from_elsewhere`)
    and then gets every check one from the disk gets."""
    if key is None or config.dump_dir():
        return None
    from numba_vulkan.spirv.compiled import CompiledKernel

    def check(entry):
        if not isinstance(entry["spirv"], bytes) or not isinstance(entry["kernel"], dict):
            raise ValueError("not a compiled kernel")
        kernel = CompiledKernel.from_metadata(entry["kernel"], entry["spirv"], entry["llvm_ir"])
        if (kernel.signature != tuple(sig) or kernel.local_size != tuple(local_size)
                or kernel.target != target):
            raise ValueError("entry of another signature, workgroup size or target")
        # The module must be the kernel the runtime will bind, whatever the file says.
        modulecheck.check_params(kernel.signature, entry["kernel"]["params"],
                                 kernel.push_size, target.narrowed,
                                 target.max_push_constants)
        found = modulecheck.check_interface(kernel.spirv, kernel.params, kernel.push_size,
                                            kernel.local_size, target.vulkan)
        if found.capabilities != kernel.capabilities:
            raise ValueError("capabilities differ from the module's")
        if config.validate() and entry.get("validated") is not True:
            raise ValueError("not validated")
        entry["compiled"] = kernel

    if isinstance(key, str):
        entry = _lookup("functions", key, label, check)
    else:
        remote = None if key.remote is None else (key.remote, _from_elsewhere(key))
        entry = _lookup("functions", key.local, label, check, remote)
    return None if entry is None else entry["compiled"]


def store_compiled(key, kernel, validated):
    """Store a compiled kernel in the ``functions/`` tier.

    Args:
        key: From :func:`function_key` (the server, if any, gets the entry
            under the remote name), or an entry name; nothing is stored if None.
        kernel: The :class:`~numba_vulkan.spirv.compiled.CompiledKernel`.
        validated: Whether its module went through spirv-val.
    """
    if key is None:
        return
    entry = {"spirv": kernel.spirv, "llvm_ir": kernel.llvm_ir,
             "kernel": kernel.to_metadata(), "validated": bool(validated)}
    if isinstance(key, str):
        _write_entry("functions", key, entry)
        return
    if key.sources is not None:
        entry["sources"] = list(key.sources)
    _write_entry("functions", key.local, entry, key.remote)


# The command ---------------------------------------------------------------


def _entries(tier):
    directory = tier_directory(tier)
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(os.path.join(directory, n) for n in names)


def _size(path):
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _rate(counts):
    looked = counts["hits"] + counts["misses"] + counts["rejected"]
    if not looked:
        return "no lookups yet"
    return (f"{counts['hits']} hits, {counts['misses']} misses, {counts['rejected']} "
            f"rejected: hit rate {100 * counts['hits'] / looked:.0f}%; {counts['stores']} "
            f"stores, {counts['evicted']} evicted")


def info(verbose=False, out=None):
    """Print the cache's location and cap, and per tier its entries, size and
    hit rate (over every process, from ``stats.json``)."""
    out = out or sys.stdout
    flush_stats()
    cap = config.cache_max_bytes()
    print(f"cache directory: {config.cache_dir()}"
          + ("" if enabled() else f" (off: {ENV_VAR}=0)"), file=out)
    print(f"size cap: {f'{cap / (1 << 20):.0f} MiB' if cap else 'none'} "
          "(NUMBA_VULKAN_CACHE_MAX_BYTES), least recently used entries evicted", file=out)
    totals = _read_totals(config.cache_dir())
    for tier in TIERS:
        paths = _entries(tier)
        names = [os.path.basename(p)[:-len(SUFFIX)] for p in paths if p.endswith(SUFFIX)]
        size = sum(_size(p) for p in paths)
        print(f"{tier}/: {len(names)} entries, {size / 1e6:.2f} MB; {_rate(totals[tier])}",
              file=out)
        if not verbose:
            continue
        for name in names:
            try:
                entry = _read_entry(tier, name)
            except (OSError, ValueError, TypeError, KeyError, UnicodeError,
                    RecursionError) as exc:
                print(f"  {name[:16]}  damaged, will be rebuilt ({exc})", file=out)
                continue
            kernel = entry.get("kernel")
            if isinstance(kernel, dict):
                kernel = f"{kernel.get('name')}({', '.join(kernel.get('signature', []))})"
            size = len(entry.get("spirv") or b"")
            print(f"  {name[:16]}  {size:>8} bytes  {kernel}", file=out)
    _remote_info(totals[REMOTE], out)
    return 0


def _remote_info(counts, out):
    where = remotecache.url()
    if where is None:
        print("remote: none (NUMBA_VULKAN_REMOTE_CACHE)", file=out)
    else:
        print(f"remote: {where}: {remotecache.ping()}", file=out)
    looked = counts["hits"] + counts["misses"] + counts["rejected"]
    if not looked and not counts["stores"] and not counts["errors"]:
        print("  no lookups yet", file=out)
        return
    rate = f": hit rate {100 * counts['hits'] / looked:.0f}%" if looked else ""
    print(f"  {counts['hits']} hits, {counts['misses']} misses, {counts['rejected']} "
          f"rejected{rate}; {counts['errors']} errors; {counts['stores']} stores, "
          f"{counts['dropped']} dropped; {counts['bytes_read'] / 1e6:.2f} MB read, "
          f"{counts['bytes_written'] / 1e6:.2f} MB written", file=out)


def clear(tiers=TIERS):
    """Delete every entry of the given tiers; returns how many files went."""
    removed = 0
    for tier in tiers:
        for path in _entries(tier):
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
                removed += 1
            except FileNotFoundError:
                pass
    return removed


def main(argv=None):
    """``python -m numba_vulkan cache {info,clear}``."""
    import argparse
    parser = argparse.ArgumentParser(prog="python -m numba_vulkan cache",
                                     description="Show or clear the on-disk kernel cache.")
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("info", help="location, entries and size of each tier")
    show.add_argument("-v", "--verbose", action="store_true", help="list every entry")
    empty = sub.add_parser("clear", help="delete the cached kernels")
    empty.add_argument("--tier", choices=TIERS, help="only this tier (default: both)")
    args = parser.parse_args(argv)
    if args.command == "info":
        return info(args.verbose)
    try:
        removed = clear((args.tier,) if args.tier else TIERS)
    except OSError as exc:
        print(f"cannot clear the cache: {exc}", file=sys.stderr)
        return 1
    print(f"removed {removed} files from {config.cache_dir()}")
    return 0
