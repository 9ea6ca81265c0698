"""The remote tier of the kernel cache: entries shared through a Redis server.

With ``NUMBA_VULKAN_REMOTE_CACHE=redis://host:port/db`` (or ``rediss://``;
a password in the URL or in ``NUMBA_VULKAN_REMOTE_CACHE_PASSWORD``) a
lookup that misses the local disk asks the server, and every store is sent
there too (:class:`RemoteTier`, under :func:`numba_vulkan.store.keys.remote_key`).
What travels is the entry file itself, byte for byte, after a MAC made with
the team's key (:mod:`numba_vulkan.store.trust`, which also decides whether
the server may be read at all); the lookup (:mod:`numba_vulkan.store.lookup`)
gives it the checks a file from disk gets, and those of untrusted input.
This module only moves bytes and keeps the tier from ever costing much:

* Every request has a :data:`TIMEOUT`; the first one that fails (refused,
  timed out, a reply that is not Redis's protocol) turns the tier off for
  the rest of the process, with one :class:`~numba_vulkan.base.errors.CacheWarning`;
  so do lookups in a row, each slower than :data:`SLOW`, that waited more
  than :data:`TIMEOUT` together.
  A lookup then costs nothing, and a compile never fails because of the server.
* Reads are bounded: ``GETRANGE`` asks for at most the caller's limit.
* Stores go to a queue that one background thread drains, so a compile
  never waits for the network. A full queue drops the store (the entry
  is still on the local disk). At exit the queue gets :data:`FLUSH_SECONDS`
  to drain, no more.

The ``redis`` package is imported only when the tier is configured.
"""

import atexit
import os
import queue
import threading
import time
import urllib.parse
import warnings

from numba_vulkan.base import config
from numba_vulkan.base.bounded import call_within
from numba_vulkan.base.errors import CacheWarning
from numba_vulkan.store import counters, keys, trust
from numba_vulkan.store.counters import REMOTE
from numba_vulkan.store.entry import MAX_BYTES
from numba_vulkan.store.tier import Tier

#: Seconds one request (connecting included) may take before the tier is off.
TIMEOUT = 1.0
#: Lookups in a row that each took longer than this (without timing out)
#: and together more than :data:`TIMEOUT` turn the tier off as well: a
#: server that always answers just in time would cost that much on every
#: lookup. One alone is not enough: a loaded machine may keep a lookup
#: waiting for its thread now and then (a few tenths of a second once in
#: some hundreds of lookups, on two cores shared by a dozen processes).
SLOW = 0.1
#: Stores waiting for the writer thread; further ones are dropped.
QUEUE_LIMIT = 1024
#: Seconds the process waits at exit for queued stores to be sent.
FLUSH_SECONDS = 5.0

_lock = threading.Lock()
_state = {"url": None, "client": None, "off": None, "queue": None, "writer": None,
          "exit_hook": False, "slow": 0.0}


def url():
    """The configured server's URL with any password masked, or None."""
    value = config.remote_cache()
    if value is None:
        return None
    try:
        parts = urllib.parse.urlsplit(value)
    except ValueError:
        return "(a malformed URL)"
    if parts.password is None:
        return value
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    user = f"{parts.username}:" if parts.username else ":"
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}***@{host}"))


def off_reason():
    """Why the tier is off in this process, or None while it is usable."""
    with _lock:
        return _state["off"]


def _turn_off(reason):
    counters.count(REMOTE, "errors")
    with _lock:
        first = _state["off"] is None
        if first:
            _state["off"] = reason
            _state["client"] = None
    if first:
        warnings.warn(f"the remote kernel cache {url()} is off in this process: {reason} "
                      "(kernels are compiled or read from the local cache instead)",
                      CacheWarning, stacklevel=3)


def _client():
    """The Redis client, made on first use, or None if the tier is off or unset."""
    wanted = config.remote_cache()
    with _lock:
        if wanted is None or _state["off"] is not None:
            return None
        if _state["client"] is not None and _state["url"] == wanted:
            return _state["client"]
    try:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ImportError:
        _turn_off("the redis package is not installed")
        return None
    options = {"socket_timeout": TIMEOUT, "socket_connect_timeout": TIMEOUT,
               # A retry would double the one timeout the tier may cost.
               "retry": Retry(NoBackoff(), 0), "retry_on_timeout": False,
               "health_check_interval": 0,
               # No CLIENT SETINFO round trips before the first request.
               "driver_info": None}
    password = config.remote_cache_password()
    if password is not None:
        options["password"] = password
    try:
        client = redis.Redis.from_url(wanted, **options)
    except (ValueError, TypeError, redis.RedisError) as exc:
        _turn_off(f"{type(exc).__name__}: {exc}")
        return None
    with _lock:
        _state["url"], _state["client"] = wanted, client
    return client


def _failed(exc):
    """Handle a request's exception: True if it is about this key only."""
    import redis
    if isinstance(exc, redis.ResponseError) and not str(exc).startswith(("NOAUTH", "WRONGPASS",
                                                                         "NOPERM")):
        # WRONGTYPE, OOM and the like: the server works, this request did not.
        counters.count(REMOTE, "errors")
        return True
    _turn_off(f"{type(exc).__name__}: {exc}")
    return False


def get(key, limit):
    """The value stored under ``key``, or None (missing, too large, or tier off).

    At most ``limit`` bytes are transferred; a longer value counts as rejected.
    """
    client = _client()
    if client is None:
        return None
    start = time.monotonic()
    try:
        value = _within(TIMEOUT, client.getrange, key, 0, limit)
    except Exception as exc:  # the client's errors, and whatever a garbage reply raises
        _failed(exc)
        return None
    finally:
        waited = time.monotonic() - start
        counters.count(REMOTE, "wait_ms", round(1000 * waited))
    with _lock:
        slow = _state["slow"] = _state["slow"] + waited if waited > SLOW else 0.0
    if slow > TIMEOUT:
        _turn_off(f"lookups in a row took {slow:.1f} s to answer, each over {SLOW} s")
    if not isinstance(value, bytes) or not value:
        counters.count(REMOTE, "misses")
        return None
    counters.count(REMOTE, "bytes_read", len(value))
    if len(value) > limit:
        counters.count(REMOTE, "rejected")
        return None
    return value


class _Late(TimeoutError):
    pass


def _within(seconds, function, *args):
    """``function(*args)`` if it returns within ``seconds``; else raise
    :class:`_Late` (the tier is off then, nothing waits for the request)."""
    return call_within(seconds, lambda: _Late(f"no complete answer within {seconds:.1f} s"),
                       "numba_vulkan remote lookup", function, *args)


def put(key, data):
    """Send ``data`` under ``key`` from the background thread; never blocks."""
    if config.remote_cache() is None:
        return
    with _lock:
        off = _state["off"] is not None
    if off:
        counters.count(REMOTE, "dropped")
        return
    with _lock:
        if _state["queue"] is None:
            _state["queue"] = queue.Queue(QUEUE_LIMIT)
        writer = _state["writer"]
        if writer is None or not writer.is_alive():
            writer = _state["writer"] = threading.Thread(
                target=_write, args=(_state["queue"],), name="numba_vulkan remote cache",
                daemon=True)
            writer.start()
        if not _state["exit_hook"]:
            _state["exit_hook"] = True
            atexit.register(_at_exit)
        pending = _state["queue"]
    try:
        pending.put_nowait((key, bytes(data)))
    except queue.Full:
        counters.count(REMOTE, "dropped")


def _write(pending):
    while True:
        item = pending.get()
        try:
            if item is None:
                return
            key, data = item
            client = _client()
            if client is None:
                counters.count(REMOTE, "dropped")
                continue
            try:
                client.set(key, data)
            except Exception as exc:  # as in get: never out of this thread
                _failed(exc)
                continue
            counters.count(REMOTE, "stores")
            counters.count(REMOTE, "bytes_written", len(data))
        finally:
            pending.task_done()


def flush(timeout=FLUSH_SECONDS):
    """Wait up to ``timeout`` seconds for the queued stores to be sent.

    Returns:
        bool: True if nothing is left in the queue.
    """
    with _lock:
        pending, writer = _state["queue"], _state["writer"]
    if pending is None or writer is None or not writer.is_alive():
        return pending is None or pending.unfinished_tasks == 0
    deadline = time.monotonic() + timeout
    while pending.unfinished_tasks and time.monotonic() < deadline:
        time.sleep(0.01)
    return pending.unfinished_tasks == 0


def _at_exit():
    # The counts of the last stores go to stats.json once they are sent.
    flush()
    counters.flush_stats()


def ping():
    """Whether the server answers, as a short text for ``cache info``."""
    with warnings.catch_warnings():
        # The answer says it already.
        warnings.simplefilter("ignore", CacheWarning)
        client = _client()
        if client is None:
            return off_reason() or "not configured"
        try:
            client.ping()
            entries = client.dbsize()
        except Exception as exc:  # reported, not raised
            _failed(exc)
            return off_reason() or f"{type(exc).__name__}: {exc}"
    return f"reachable, {entries} keys in its database"


def forget():
    """Start afresh: the next request connects again (for tests)."""
    with _lock:
        _state.update(url=None, client=None, off=None, slow=0.0)


def _after_fork():
    # The writer thread is not in the child, and the lock may be held by it.
    global _lock
    _lock = threading.Lock()
    _state.update(client=None, queue=None, writer=None)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class RemoteTier(Tier):
    """The remote tier as the lookup loop sees it: asked under entries'
    portable names, counted under ``"remote"``."""

    portable = True
    shared = True

    def usable(self):
        if config.remote_cache() is None:
            return False
        reason = trust.readable()
        if reason is not None:
            _turn_off(reason)
            return False
        return True

    def where(self, section):
        return REMOTE

    def get(self, section, name):
        """The entry bytes under ``section/name``, or None.

        Raises:
            ValueError: The value is not authenticated as it must be
                (:func:`numba_vulkan.store.trust.open_value`).
        """
        key = keys.remote_key(section, name)
        value = get(key, MAX_BYTES + len(trust.MAGIC) + 32)
        return None if value is None else trust.open_value(section, key, value)

    def put(self, section, name, data, copy=False):
        key = keys.remote_key(section, name)
        put(key, trust.seal(key, data))

    def count(self, section, what):
        # get counts its own misses, with the errors and bytes behind them.
        if what != "misses":
            counters.count(REMOTE, what)
