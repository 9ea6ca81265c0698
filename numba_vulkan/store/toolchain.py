"""What of the installed software shapes a compiled kernel, as text for keys.

:func:`fingerprint` covers what turns IR into SPIR-V: this package's source,
llvmlite (and with it LLVM), the libclc file in use and an ``llc`` that
replaces llvmlite's backend. :func:`numba_versions` and
:func:`portable_numba_versions` cover what shapes Numba's lowering, for the
keys of whole compiled kernels (:func:`numba_vulkan.store.keys.function_key`).

Nothing here imports Numba or loads LLVM: a cache hit must not need them.
Installed packages are named by their installer's RECORD where it matches
the files (the same on every machine that installed the same wheel, which
a remote cache's users share), else by their files' sizes and times.
"""

import hashlib
import importlib.util
import os
import shutil
import sys

from numba_vulkan.base import config
from numba_vulkan.base import files
from numba_vulkan.base import libclcfile
from numba_vulkan.store import entry

#: The package whose source the fingerprint hashes: numba_vulkan.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_digests = {}
_portable_numba = {}


def file_digest(path):
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
    found = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        found.extend(os.path.join(root, n) for n in sorted(names)
                     if not n.endswith((".pyc", ".pyo")))
    h = hashlib.sha256()
    for path in found:
        h.update(os.path.relpath(path, directory).encode() + b"\0")
        h.update(file_digest(path).encode())
    return h.hexdigest()


def _package_part():
    return "package:" + _tree_digest(_PACKAGE_DIR)


def _dist_info(package_dir, distribution):
    """The name of the installer's dist-info directory of a distribution,
    beside ``package_dir``, or None if there is not exactly one."""
    try:
        infos = [n for n in os.listdir(os.path.dirname(package_dir))
                 if n.startswith(distribution + "-") and n.endswith(".dist-info")]
    except OSError:
        return None
    return infos[0] if len(infos) == 1 else None


def _record_text(package_dir, distribution):
    """The installer's RECORD of a distribution whose dist-info lies beside
    ``package_dir``, or "" if there is none."""
    info = _dist_info(package_dir, distribution)
    if info is None:
        return ""
    try:
        return files.read_regular(os.path.join(os.path.dirname(package_dir), info, "RECORD"),
                                  1 << 20).decode()
    except (OSError, UnicodeError):
        return ""


def recorded(package_dir, distribution, text=None):
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


def _package_dir(name):
    """The directory of an installed package, found without importing it; None if absent."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return None
    return os.path.dirname(spec.origin)


def llvmlite_part():
    """llvmlite as the fingerprint names it.

    The version (in its dist-info's name; a build from source without one
    by its ``_version.py``) pins LLVM's for llvmlite's own builds; the
    library's hash in the installer's RECORD or, where the file is not the
    recorded one, its size and mtime catch one rebuilt against another
    LLVM. llvmlite is not imported: its binding loads LLVM, which a cache
    hit must not need, and an AOT loader may run where it is not installed.
    """
    package = _package_dir("llvmlite")
    if package is None:
        return "llvmlite:missing"
    info = _dist_info(package, "llvmlite")
    if info is not None:
        version = info[len("llvmlite-"):-len(".dist-info")]
    else:
        version = "source:" + file_digest(os.path.join(package, "_version.py"))
    record = recorded(package, "llvmlite")
    library = ""
    directory = os.path.join(package, "binding")
    for name in sorted(os.listdir(directory)):
        if name.startswith("libllvmlite"):
            st = os.stat(os.path.join(directory, name))
            digest, size = record.get(f"llvmlite/binding/{name}", ("", ""))
            if digest and size == str(st.st_size):
                library += f"{name}:{digest}"
            else:
                library += f"{name}:{st.st_size}:{st.st_mtime_ns}"
    return f"llvmlite:{version}:{library}"


def _libclc_part():
    path = libclcfile.path_in_use()
    if not path:
        return "libclc:none"
    return f"libclc:{os.path.abspath(path)}:{file_digest(path)}"


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
    llvmlite's backend; and the entry format's version.

    Returns:
        str: A hexadecimal digest.
    """
    parts = [f"format:{entry.FORMAT_VERSION}", _package_part(), llvmlite_part(),
             _libclc_part(), _llc_part()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _installed_version(package):
    """A package's version, read without importing it (as Numba, on a hit)."""
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


def numba_versions():
    """Versions of what shapes Numba's lowering, as this machine has them."""
    import numpy
    return [_installed_version("numba"), numpy.__version__, sys.implementation.cache_tag]


def portable_numba_versions():
    """:func:`numba_versions` as every machine with the same install has them.

    Numba is named by a digest of its installer's RECORD, which lists the
    hash of each of its files, instead of its files' times. Where Numba's
    ``__init__.py`` is not the file the RECORD lists (edited, or installed
    without one), its size and time stand in, as in :func:`numba_versions`,
    and only this machine finds the entries.
    """
    import numpy
    spec = importlib.util.find_spec("numba")
    if spec is None or not spec.origin:
        return ["missing", numpy.__version__, sys.implementation.cache_tag]
    st = os.stat(spec.origin)
    stamp = (spec.origin, st.st_size, st.st_mtime_ns)
    numba_part = _portable_numba.get(stamp)
    if numba_part is None:
        package = os.path.dirname(spec.origin)
        text = _record_text(package, "numba")
        _, size = recorded(package, "numba", text).get("numba/__init__.py", ("", ""))
        if text and size == str(st.st_size):
            numba_part = "record:" + hashlib.sha256(text.encode()).hexdigest()
        else:
            numba_part = _installed_version("numba")
        _portable_numba[stamp] = numba_part
    return [numba_part, numpy.__version__, sys.implementation.cache_tag]
