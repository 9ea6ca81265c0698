"""What the cache counts and reports: this process's counters, their totals
over every process in ``stats.json``, and the ``NUMBA_VULKAN_DEBUG_CACHE`` log.

Each section of the disk (:data:`numba_vulkan.store.entry.SECTIONS`) has the
counters of :data:`COUNTERS`, the remote tier those of
:data:`REMOTE_COUNTERS` under :data:`REMOTE`.
"""

import atexit
import json
import os
import sys
import threading

try:
    import fcntl
except ImportError:  # Windows: processes add their counts without taking turns
    fcntl = None

from numba_vulkan.base import config
from numba_vulkan.base import files
from numba_vulkan.base.log import event as log_event
from numba_vulkan.store.entry import SECTIONS

#: The counters of each section.
COUNTERS = ("hits", "misses", "rejected", "stores", "store_failures", "uncacheable", "evicted")
#: The name of the remote tier in :func:`stats`.
REMOTE = "remote"
#: The remote tier's counters: ``errors`` are failed requests, ``dropped``
#: stores not sent (queue full or tier off), ``wait_ms`` milliseconds
#: lookups waited for the server (stores wait in their own thread).
REMOTE_COUNTERS = ("hits", "misses", "rejected", "errors", "stores", "dropped", "bytes_read",
                   "bytes_written", "wait_ms")
#: The file below the cache directory that adds up every process's counters.
STATS = "stats.json"
_STATS_LIMIT = 1 << 16

_lock = threading.Lock()


def _zeros():
    out = {section: dict.fromkeys(COUNTERS, 0) for section in SECTIONS}
    out[REMOTE] = dict.fromkeys(REMOTE_COUNTERS, 0)
    return out


_counters = _zeros()
#: The part of the counters already added to ``stats.json``.
_flushed = _zeros()
_exit_hook = []


def count(section, what, n=1):
    """Add ``n`` to a counter of a section (or of :data:`REMOTE`).

    The first count of a process has :func:`flush_stats` run at its exit;
    the remote tier flushes again once its queued stores are sent
    (:func:`numba_vulkan.store.remote.flush`)."""
    with _lock:
        _counters[section][what] += n
        if not _exit_hook:
            _exit_hook.append(atexit.register(flush_stats))


def log(where, outcome, name, detail=""):
    """One line on stderr while ``NUMBA_VULKAN_DEBUG_CACHE`` is set, and a
    DEBUG event of the ``numba_vulkan`` logger (:mod:`numba_vulkan.base.log`)."""
    log_event(f"cache {where}", outcome, name, detail)
    if config.debug_cache():
        line = f"numba_vulkan cache: {where} {outcome} {name}"
        sys.stderr.write(line + (f" ({detail})" if detail else "") + "\n")


def stats():
    """Lookups and stores of this process, per section.

    Returns:
        dict: ``{section: {"hits", "misses", "rejected", "stores",
        "store_failures", "uncacheable", "evicted"}}``; ``rejected`` counts
        entries found but damaged or not matching, ``uncacheable`` kernels
        that could not be keyed, ``evicted`` entries removed to keep the
        cache under ``NUMBA_VULKAN_CACHE_MAX_BYTES``. ``"remote"`` has
        :data:`REMOTE_COUNTERS`; a remote hit is a miss of its section on
        disk.
    """
    with _lock:
        return {section: dict(counts) for section, counts in _counters.items()}


def reset_stats():
    """Set every counter of :func:`stats` to zero (``stats.json`` keeps its totals)."""
    with _lock:
        for section, counts in _counters.items():
            for what in counts:
                counts[what] = 0
                _flushed[section][what] = 0


def read_totals(root):
    """The totals of ``stats.json`` below ``root``, or zeros if it is missing or damaged."""
    totals = _zeros()
    try:
        data = json.loads(files.read_regular(os.path.join(root, STATS), _STATS_LIMIT))
    except (OSError, ValueError, UnicodeError, RecursionError):
        return totals
    for section, counts in (data.get("tiers") if isinstance(data, dict) else {}).items():
        if section in totals and isinstance(counts, dict):
            for what, n in counts.items():
                if what in totals[section] and type(n) is int and n >= 0:
                    totals[section][what] = n
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
    with _lock:
        delta = {section: {w: n - _flushed[section][w] for w, n in counts.items()}
                 for section, counts in _counters.items()}
        for section, counts in _counters.items():
            _flushed[section].update(counts)
    if not any(n for counts in delta.values() for n in counts.values()):
        return
    lock = None
    try:
        if fcntl is not None:
            lock = os.open(root, os.O_RDONLY)
            fcntl.flock(lock, fcntl.LOCK_EX)
        totals = read_totals(root)
        for section, counts in delta.items():
            for what, n in counts.items():
                totals[section][what] += n
        # "tiers" is the name the file has had since before sections had theirs.
        files.write_atomic(os.path.join(root, STATS),
                           json.dumps({"format": 1, "tiers": totals}, sort_keys=True).encode())
    except OSError:
        pass
    finally:
        if lock is not None:
            os.close(lock)


def _after_fork():
    # The remote tier's writer thread counts too, and may hold the lock;
    # it is not in the child.
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
