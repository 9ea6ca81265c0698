"""Compiling an AOT build's modules on a Dask cluster (``--scheduler``).

Every call to the scheduler is bounded in time, and a worker that compiled
other code than the build's (a long-lived worker keeps the module it
imported first) fails the build naming the kernel.
"""

import re
import sys
import time
import uuid

from numba_vulkan.base import config
from numba_vulkan.base.bounded import call_within
from numba_vulkan.aot.build.worker import _import_kernel, _timed_compile, _worker_init
from numba_vulkan.store import keys as store_keys
from numba_vulkan.store import codehash
from numba_vulkan.base.errors import AOTError, ManifestError


#: Seconds a cluster build waits for the scheduler to accept it, for any one
#: answer of the scheduler, and for a cluster without workers to get one.
CLUSTER_TIMEOUT = 30.0


#: Seconds between looks at the cluster while no module is done.
_CLUSTER_POLL = 2.0


_ADDRESS = re.compile(r"^(?:(tcp|tls|ucx|inproc|ws|wss)://)?(\[[0-9a-fA-F:.]+\]|[\w.-]+)"
                      r":(\d{1,5})$")


def _cluster_compile(paths, *arguments):
    """:func:`_timed_compile` on a cluster's worker, with the manifest's paths
    importable, and the content key of the kernel the worker compiled: a
    long-lived worker keeps the module it imported first, which may be
    older than the build's."""
    _worker_init(paths, {})
    # Whatever the worker's own setting: its module goes into a release directory.
    with config.overriding(NUMBA_VULKAN_REMOTE_TRUST="signed"):
        value = _timed_compile(*arguments)
    try:
        dispatcher = _import_kernel(*arguments[:2])
        key = code_identity(store_keys.content_key_parts(dispatcher)[0], dispatcher)
    except Exception:  # the compile's own failure says why
        key = None
    return value, key


def code_identity(content_key, dispatcher):
    """What tells the code a process compiles from another's: the content
    key, which reads the kernel's source file (so a worker that imported an
    older file, and has its text cached, differs), and the bytecode of the
    kernel itself, which tells a worker that read the new file but runs the
    module it imported before, where both run one Python (bytecode differs
    between versions)."""
    return (content_key, sys.implementation.cache_tag,
            codehash.code_digest(dispatcher.py_func.__code__))


def _same_code(worker, build):
    """Whether a worker's :func:`code_identity` is the build's."""
    if worker is None or worker[0] != build[0]:
        return False
    return worker[1] != build[1] or worker[2] == build[2]


def _bounded(seconds, what, function, *args):
    """``function(*args)``, or AOTError saying ``what`` did not answer within
    ``seconds`` (the call is left running in a daemon thread)."""
    return call_within(seconds, lambda: AOTError(f"{what} did not answer within {seconds:.0f} s"),
                       "numba_vulkan cluster call", function, *args)


def check_scheduler_address(address):
    """ManifestError unless ``address`` is a scheduler address:
    ``[tcp://]host:port`` (or ``tls://``, ``ucx://``, ``ws://``, ``wss://``)."""
    match = _ADDRESS.match(address) if isinstance(address, str) else None
    if match is None or not 0 < int(match.group(3)) < 65536:
        raise ManifestError(f"--scheduler {address!r} is not a Dask scheduler address: "
                            "expected tcp://HOST:PORT (such as tcp://scheduler.example:8786)")


def _run_on_cluster(pending, m, scheduler, arguments, outcome, content_keys):
    try:
        import distributed
    except ImportError:
        raise AOTError("--scheduler needs the distributed package (pip install "
                       "distributed)") from None
    paths = [m.directory] + [p for p in sys.path if p]
    where = f"the Dask scheduler {scheduler}"
    try:
        # Distributed's own timeout bounds each step of connecting, not all of
        # them: a scheduler that accepts and never answers would hang it.
        client = _bounded(CLUSTER_TIMEOUT, where, lambda: distributed.Client(
            scheduler, timeout=0.8 * CLUSTER_TIMEOUT, set_as_default=False))
    except AOTError:
        raise AOTError(f"cannot reach {where}: no answer within {CLUSTER_TIMEOUT:.0f} s") \
            from None
    except Exception as exc:  # whatever connecting raises: refused, timed out, garbage
        raise AOTError(f"cannot reach {where}: {type(exc).__name__}: {exc}") from None
    try:
        futures = {client.submit(_cluster_compile, paths, *arguments(task), pure=False,
                                 key=f"numba_vulkan-aot-{build_key}-{uuid.uuid4().hex}"): task
                   for task, build_key in pending}
        yield from _collect(client, futures, where, outcome, content_keys)
    except AOTError:
        raise
    except Exception as exc:  # the scheduler went away, or answered what it should not
        raise AOTError(f"the cluster build failed: {where}: {type(exc).__name__}: {exc}") \
            from None
    finally:
        try:
            _bounded(10, where, client.close, 5)
        except Exception:  # closing a lost client: nothing left to do
            pass


def _collect(client, futures, where, outcome, content_keys):
    """Yield each module of ``futures`` as it is done; AOTError if the
    scheduler stops answering or has no worker for :data:`CLUSTER_TIMEOUT`."""
    remaining, workerless, looked = set(futures), None, time.monotonic()
    while remaining:
        # A future's state is this process's: asking it waits on nothing.
        done = [future for future in remaining if future.done()]
        for future in done:
            remaining.discard(future)
            task = futures[future]
            try:
                value, key = _bounded(CLUSTER_TIMEOUT, where, future.result)
            except AOTError:
                raise
            except Exception as exc:  # a worker died or raised outside the compile
                yield task, f"the cluster worker failed: {type(exc).__name__}: {exc}", None
                continue
            if not _same_code(key, content_keys[task]):
                yield task, (f"kernel {task.kernel}: the cluster worker compiled other code "
                             f"than this build has (its content key "
                             f"{str(key and key[0])[:16]}, the build's "
                             f"{content_keys[task][0][:16]}): a long-lived worker keeps "
                             "the module it imported first; restart the workers, and give "
                             "them the build's files"), None
                continue
            yield (task, *outcome(value))
        if done:
            workerless = None
            continue
        time.sleep(0.05)
        if time.monotonic() - looked < _CLUSTER_POLL:
            continue
        looked = time.monotonic()
        if client.status not in ("running", "connecting", "newly-created"):
            raise AOTError(f"lost the connection to {where} (client {client.status}) with "
                           f"{len(remaining)} module(s) left")
        workers = _bounded(CLUSTER_TIMEOUT, where, client.nthreads)
        if workers:
            workerless = None
        elif workerless is None:
            workerless = looked
        elif looked - workerless > CLUSTER_TIMEOUT:
            raise AOTError(f"{where} has had no workers for {CLUSTER_TIMEOUT:.0f} s with "
                           f"{len(remaining)} module(s) left to compile")
