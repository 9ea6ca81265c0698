"""The local tier: entry files below the cache directory, kept under a size cap.

Each section is a directory (``kernels/``, ``functions/``) of ``NAME.entry``
files. Reads go through :func:`numba_vulkan.base.files.read_regular` (a
regular file of bounded size) and writes through
:func:`numba_vulkan.base.files.write_atomic` (a temporary file moved into
place), so a reader sees a whole entry or none. A cache directory that
cannot be created or written turns the cache off with one warning
(:func:`numba_vulkan.base.files.cache_root`).

Entries of every section are kept under ``NUMBA_VULKAN_CACHE_MAX_BYTES``:
a hit renews an entry's modification time, and a store over the cap
evicts the least recently used ones (:func:`evict`).
"""

import os
import shutil

from numba_vulkan.base import log
from numba_vulkan.base import config
from numba_vulkan.base import files
from numba_vulkan.store import counters
from numba_vulkan.store.entry import MAX_BYTES, SECTIONS, SUFFIX
from numba_vulkan.store.tier import Tier

#: Eviction trims the cache to this fraction of its cap, so that not every
#: store after the cap is reached evicts.
_TRIM = 0.9


def directory(section):
    """The directory of a section's entries (not created)."""
    return os.path.join(config.cache_dir(), section)


def path(section, name):
    """The file of an entry (which may not exist)."""
    return os.path.join(directory(section), name + SUFFIX)


def read(section, name):
    """An entry file's bytes.

    Raises:
        FileNotFoundError: There is none.
        OSError: It is not a regular file, or larger than
            :data:`~numba_vulkan.store.entry.MAX_BYTES`.
    """
    return files.read_regular(path(section, name), MAX_BYTES)


def write(section, name, data):
    """Write an entry file atomically, then evict what is over the cap.

    Raises:
        OSError: The cache directory cannot be used or written.
    """
    root = files.cache_root()
    if root is None:
        raise OSError("the cache directory cannot be used")
    folder = os.path.join(root, section)
    os.makedirs(folder, exist_ok=True)
    target = os.path.join(folder, name + SUFFIX)
    if os.path.isdir(target) and not os.path.islink(target):
        # A directory where an entry file belongs would refuse every later
        # store under this name.
        shutil.rmtree(target, ignore_errors=True)
    files.write_atomic(target, data)
    evict(root, keep=target)


def _entry_files(root):
    """``(mtime, size, section, path)`` of every entry file below ``root``."""
    out = []
    for section in SECTIONS:
        try:
            with os.scandir(os.path.join(root, section)) as it:
                for e in it:
                    if not e.name.endswith(SUFFIX):
                        continue
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    out.append((st.st_mtime, st.st_size, section, e.path))
        except OSError:
            continue
    return out


def evict(root=None, keep=None):
    """Remove least recently used entries while the cache is over its cap.

    The cap is ``NUMBA_VULKAN_CACHE_MAX_BYTES`` over every section; once
    over it, entries go, oldest use (modification time) first, until the
    rest fit in 90% of it. Called after each store.

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
    for _, size, section, entry_path in sorted(found):
        if total <= cap * _TRIM:
            break
        if entry_path == keep:
            continue
        try:
            os.unlink(entry_path)
        except FileNotFoundError:
            pass
        except OSError:
            continue
        total -= size
        removed += 1
        counters.count(section, "evicted")
    return removed


def listing(section):
    """Paths of everything in a section's directory, sorted; empty if there is none."""
    folder = directory(section)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(os.path.join(folder, n) for n in names)


def clear(sections=SECTIONS):
    """Delete everything in the given sections' directories; returns how many went."""
    removed = 0
    for section in sections:
        for found in listing(section):
            try:
                if os.path.isdir(found) and not os.path.islink(found):
                    shutil.rmtree(found)
                else:
                    os.unlink(found)
                removed += 1
            except FileNotFoundError:
                pass
    return removed


class DiskTier(Tier):
    """The local tier as the lookup loop sees it; counts per section."""

    def usable(self):
        return True

    def where(self, section):
        return section

    def get(self, section, name):
        try:
            return read(section, name)
        except FileNotFoundError:
            return None

    def put(self, section, name, data, copy=False):
        try:
            write(section, name, data)
        except OSError as exc:
            if not copy:
                counters.count(section, "store_failures")
            counters.log(section, "store failed", name[:16], str(exc))
            return
        if not copy:
            counters.count(section, "stores")
        # The logger only: NUMBA_VULKAN_DEBUG_CACHE's lines are lookups.
        log.event(f"cache {section}", "stored", name[:16])

    def used(self, section, name):
        try:
            # The modification time orders entries for eviction: least
            # recently used first. One system call; a read-only cache keeps
            # its order.
            os.utime(path(section, name))
        except OSError:
            pass

    def count(self, section, what):
        counters.count(section, what)
