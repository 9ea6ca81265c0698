"""Building a manifest into an AOT directory, and checking one.

A build compiles every (kernel, signature, workgroup size, profile) of a
manifest through the compile service (:mod:`numba_vulkan.api.service`), as
the JIT does, so that both make the same module of a kernel; its modules
always go through ``spirv-val``. It writes the directory:

* Incremental: an entry whose kernel code, argument types, workgroup size,
  profile, options and compiler fingerprint are those of an entry of the
  previous output is copied from it, not rebuilt.
* Parallel: with ``jobs > 1`` modules compile in that many worker processes.
* Atomic: the directory is written next to the output under a temporary
  name and swapped in with renames; a build with any failure leaves the
  previous output untouched.
* Deterministic: entries are sorted, JSON keys are sorted, and nothing
  records a path or a time, so two builds of the same sources are equal
  byte for byte wherever the checkout lives.
* Built without a Vulkan device: profiles, not the build machine, decide
  the targets.
"""

import concurrent.futures
import errno
import gc
import hashlib
import multiprocessing
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field

try:
    import fcntl
except ImportError:  # not on Windows: builds of one output are not serialised there
    fcntl = None

from numba_vulkan.base import abi
from numba_vulkan.base import config
from numba_vulkan.base import files
from numba_vulkan.base import jitoptions
from numba_vulkan.aot.build import signing as signing_keys
from numba_vulkan.aot.build import manifest as manifests
from numba_vulkan.aot.build.cluster import _run_on_cluster, check_scheduler_address, code_identity
from numba_vulkan.aot.build.remote import _REMOTE, _from_remote, _to_remote
from numba_vulkan.aot.build.worker import (_TYPED, _cpu, _timed_compile, _timed_compiles,
                                          _worker_init)
from numba_vulkan.aot.loader import index, signing
from numba_vulkan.store import keys as store_keys
from numba_vulkan.store import remote as remote_tier
from numba_vulkan.store import trust
from numba_vulkan.store import toolchain
from numba_vulkan.base.errors import AOTError, ManifestError, VulkanError

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass
class Failure:
    """A task that did not build.

    Attributes:
        task: The :class:`~numba_vulkan.aot.build.manifest.Task`.
        message: Why, with the tool's output where there is one.
    """

    task: object
    message: str

    def describe(self, manifest_path):
        t = self.task
        shared = f" shared_bytes {t.shared_bytes}" if t.shared_bytes else ""
        return (f"{manifest_path}:{t.line}: {t.kernel} {t.numba_signature} threads "
                f"{list(t.threads)}{shared} profile {t.profile.name}: {self.message}")


@dataclass
class Result:
    """What a build did.

    Attributes:
        output: The output directory.
        built: Modules compiled.
        reused: Modules copied from the previous output or, the ``remote``
            of them, taken from the remote cache.
        failures: :class:`Failure` objects; the output is unchanged if any.
        bytes: Total size of the modules.
        seconds: Wall time.
        timings: Where the time went, for a build's benchmark: ``before``
            (seconds from the start to the first compile, in this process
            alone), ``after`` (from the last compile's end to the end),
            ``parent_cpu`` (this process's CPU seconds outside compiles) and
            ``modules``: per compiled module, its kernel, signature, threads
            and profile, the ``worker`` process (numbered in order of first
            use), its ``start`` (seconds after the build's), wall
            ``seconds`` and ``cpu`` seconds (its worker's own and that of
            the tools it ran; not the backend child's, which outlives it).
    """

    output: str
    built: int = 0
    reused: int = 0
    remote: int = 0
    failures: list = field(default_factory=list)
    bytes: int = 0
    seconds: float = 0.0
    timings: dict = field(default_factory=dict)

    def summary(self):
        """The result as JSON-compatible data."""
        return {"output": self.output, "built": self.built, "reused": self.reused,
                "remote": self.remote,
                "failed": len(self.failures), "bytes": self.bytes,
                "seconds": round(self.seconds, 3),
                "failures": [f.message for f in self.failures], "timings": self.timings}


def _build_key(key, task, fingerprint):
    return store_keys.build_key(key, task.signature, task.threads, task.profile.target(),
                                task.profile.name, task.options, task.shared_bytes,
                                index.FORMAT_VERSION, fingerprint)


def _previous(output):
    """Entries of the previous output by build key, with their checked modules."""
    out = {}
    try:
        previous = index.parse(files.read_regular(os.path.join(output, index.INDEX),
                                                  index.INDEX_LIMIT), output)
    except (OSError, AOTError):
        return out
    for entry in previous["entries"]:
        try:
            data = files.read_regular(os.path.join(output, entry["spirv"]),
                                      index.MODULE_LIMIT, inside=output)
            index.check_module(data, entry, output)
        except (OSError, AOTError):
            continue
        if "build_key" in entry:
            out[entry["build_key"]] = (entry, data)
    return out


def _ours(output):
    """Files below ``output`` that a build wrote, or the first other one found.

    Returns:
        ``(files, stranger)``: relative paths of the index and the modules it
        names (or, with a damaged index, every ``spirv/<sha256>.spv``), and
        the relative path of a file or directory the build did not write, or
        None.
    """
    named = set()
    try:
        previous = index.parse(files.read_regular(os.path.join(output, index.INDEX),
                                                  index.INDEX_LIMIT), output)
        named = {e["spirv"] for e in previous["entries"]}
    except (OSError, AOTError):
        named = None
    found = []
    for folder, dirs, names in os.walk(output):
        relative = os.path.relpath(folder, output)
        for name in sorted(dirs):
            path = os.path.normpath(os.path.join(relative, name))
            if path != index.SPIRV_DIR or os.path.islink(os.path.join(folder, name)):
                return found, path + "/"
        for name in sorted(names):
            path = os.path.normpath(os.path.join(relative, name)).replace(os.sep, "/")
            if path in (index.INDEX, signing.SIGNATURE):
                found.append(path)
                continue
            digest = name[:-len(".spv")] if name.endswith(".spv") else ""
            if (relative != index.SPIRV_DIR or not _SHA256.match(digest)
                    or (named is not None and path not in named)):
                return found, path
            found.append(path)
    return found, None


def resolve_output(output):
    """The directory a build writes for ``output``: a symlinked output's target
    (the link stays a link)."""
    output = os.path.abspath(output)
    return os.path.realpath(output) if os.path.islink(output) else output


def _check_output(m, output, output_line):
    """Refuse outputs that cannot be written or are not ours to replace.

    Creates nothing: a refused build leaves the file system as it was.
    """
    line = output_line if output == m.output else None
    path = m.path if line is not None else None
    if os.path.exists(output) and not os.path.isdir(output):
        raise ManifestError(f"output {output} exists and is not a directory", path, line)
    if os.path.isdir(output) and os.listdir(output):
        if not os.path.isfile(os.path.join(output, index.INDEX)):
            raise ManifestError(f"output {output} is a directory that is not an AOT "
                                f"directory (it has no {index.INDEX}); refusing to replace "
                                "it", path, line)
        _, stranger = _ours(output)
        if stranger is not None:
            raise ManifestError(f"output {output} holds {stranger}, which no build wrote; "
                                "the build replaces the whole directory, so move it "
                                "elsewhere or choose another output", path, line)
    existing = os.path.dirname(output)
    while not os.path.exists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ManifestError(f"cannot write the output directory {output}: {existing} is not "
                            "a directory", path, line)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ManifestError(f"cannot write the output directory {output}: {existing} is not "
                            "writable", path, line)


def build(manifest_path, output=None, jobs=1, progress=None, sign=None, remote=None,
          scheduler=None):
    """Build a manifest into its output directory.

    Args:
        manifest_path: The manifest file.
        output: The output directory, instead of the manifest's.
        jobs: Worker processes compiling at once.
        progress: Called as ``progress(done, total, label)`` after each module.
        sign: An Ed25519 private key (a PEM file's path or the PEM text) to
            sign the index with (:mod:`numba_vulkan.aot.build.signing`), or None.
        remote: A Redis URL, as ``NUMBA_VULKAN_REMOTE_CACHE`` (which is used
            when this is None): modules any build already sent there are
            taken from it, after the checks a built module gets, and the
            modules this build compiles are sent there.
        scheduler: The address of a Dask distributed scheduler
            (``tcp://host:8786``) whose workers compile the modules, instead
            of ``jobs`` local processes. The workers must be able to import
            numba_vulkan and the manifest's kernels.

    Returns:
        A :class:`Result`. The output is replaced only if no module failed.

    Raises:
        ManifestError: The manifest is malformed, a kernel cannot be found,
            the output cannot be written, or the private key is unusable.
    """
    # What enters a release directory from the server must be authenticated,
    # in this process and in its workers' kernel caches, whatever the user's
    # trust mode (docs/remote.md, "What is trusted").
    settings = {"NUMBA_VULKAN_REMOTE_TRUST": "signed"}
    if remote is not None:
        # The kernel cache's tiers of this process and of its workers use it too.
        settings["NUMBA_VULKAN_REMOTE_CACHE"] = remote
    with config.overriding(**settings):
        if config.remote_cache() is not None:
            _check_team_key()
        try:
            return _build(manifest_path, output, jobs, progress, sign, scheduler)
        finally:
            # Stores still queued would find the setting gone once it ends.
            remote_tier.flush()


def _check_team_key():
    """ManifestError unless the remote cache's entries can be authenticated."""
    try:
        key = trust.team_key()
    except ValueError as exc:
        raise ManifestError(f"--remote: {exc}") from None
    if key is None:
        raise ManifestError("--remote: an AOT build takes only authenticated modules from the "
                            "remote cache; set NUMBA_VULKAN_REMOTE_KEY to the team's key file "
                            "(docs/remote.md)")


def _build(manifest_path, output, jobs, progress, sign, scheduler):
    start, cpu = time.perf_counter(), _cpu()[0]
    signer = None
    if sign is not None:
        try:
            signer = signing_keys.signer(sign)
        except AOTError as exc:
            raise ManifestError(str(exc)) from None
    m = manifests.load(manifest_path)
    output = resolve_output(output or m.output)
    _check_output(m, output, m.output_line)
    if scheduler is not None:
        check_scheduler_address(scheduler)
    tasks, dispatchers = manifests.resolve(m)
    result = Result(output)
    keys = {}
    for name, dispatcher in dispatchers.items():
        try:
            keys[name] = store_keys.content_key_parts(dispatcher)
        except AOTError as exc:
            keys[name] = exc
    fingerprint = toolchain.fingerprint()
    previous = _previous(output)
    done, pending = {}, []
    for task in tasks:
        key = keys[task.kernel]
        if isinstance(key, AOTError):
            result.failures.append(Failure(task, str(key)))
            continue
        key = key[0]
        build_key = _build_key(key, task, fingerprint)
        if build_key in previous:
            entry, data = previous[build_key]
            done[task] = (data, entry, True)
        else:
            pending.append((task, build_key))
    build_keys = dict(pending)
    pending = _from_remote(pending, done)
    # Longest first, so that no worker starts a long module when the others
    # are done: a kernel's bytecode is a fair guess at its compile time. The
    # workgroup sizes of one kernel, signature and profile follow each other,
    # so that they take Numba's result of the first (_TYPED).
    groups = {}
    for task, _ in pending:
        groups.setdefault(_group(task), len(groups))
    pending.sort(key=lambda item: (-_size(dispatchers[item[0].kernel]), groups[_group(item[0])]))
    _TYPED.clear()
    result.remote = sum(1 for _, _, how in done.values() if how == _REMOTE)
    total = len(tasks)
    count = len(done) + len(result.failures)
    if progress:
        progress(count, total, "reused")
    timed = []
    content_keys = {task: code_identity(keys[task.kernel][0], dispatchers[task.kernel])
                    for task, _ in pending}
    for task, outcome, timing in _run(pending, m, jobs, scheduler, content_keys):
        count += 1
        if timing is not None:
            timed.append((task, timing))
        if isinstance(outcome, str):
            result.failures.append(Failure(task, outcome))
        else:
            done[task] = outcome
            _to_remote(build_keys[task], outcome[0], outcome[1])
        if progress:
            shape = "x".join(str(t) for t in task.threads)
            shared = f" shared {task.shared_bytes}" if task.shared_bytes else ""
            progress(count, total, f"{task.kernel} {task.numba_signature} threads {shape}"
                                   f"{shared} {task.profile.name}")
    # Counted whether or not the output is written: a failed build's summary
    # says how many modules did compile.
    result.reused = sum(1 for _, _, reused in done.values() if reused)
    result.built = len(done) - result.reused
    if not result.failures:
        entries, modules = [], {}
        for task, (data, meta, reused) in done.items():
            # A reused entry is written afresh too, so that an incremental build
            # equals a clean one byte for byte.
            entry = _entry(task, keys[task.kernel], data, meta, fingerprint,
                           meta["build_key"] if reused is True else build_keys[task])
            entries.append(entry)
            modules[entry["spirv"]] = data
        result.bytes = sum(len(d) for d in modules.values())
        _write(m, output, entries, modules, signer)
    result.seconds = time.perf_counter() - start
    result.timings = _timings(timed, start, result.seconds, _cpu()[0] - cpu)
    return result


def _timings(timed, start, seconds, cpu):
    """:attr:`Result.timings` of a build whose compiles took ``timed``
    (``(task, timing)`` pairs) and this process ``cpu`` seconds of its own."""
    workers, modules = {}, []
    for task, (pid, begun, wall, own, tools) in sorted(timed, key=lambda item: item[1][1]):
        modules.append({"kernel": task.kernel, "signature": list(task.signature),
                        "threads": list(task.threads), "profile": task.profile.name,
                        "worker": workers.setdefault(pid, len(workers)),
                        "start": round(begun - start, 4), "seconds": round(wall, 4),
                        "cpu": round(own + tools, 4)})
    # Compiles in this process (-j 1) are the parallel part, not the serial one.
    here = sum(timing[3] for _, timing in timed if timing[0] == os.getpid())
    first = min((m["start"] for m in modules), default=seconds)
    last = max((m["start"] + m["seconds"] for m in modules), default=seconds)
    return {"before": round(first, 4), "after": round(max(seconds - last, 0.0), 4),
            "parent_cpu": round(cpu - here, 4), "modules": modules}


def _group(task):
    """What the modules that can share Numba's result have in common."""
    return (task.kernel, task.signature, task.options, task.profile.name, task.shared_bytes)


def _chunks(pending, workers):
    """``pending``, in its order, cut into runs of one :func:`_group` for the
    workers to take one run at a time: about three runs per worker, so that
    a run's modules share Numba's work and the last runs are short enough
    to even out the workers' ends."""
    size = max(1, -(-len(pending) // (3 * workers)))
    chunks = []
    for task, _ in pending:
        if chunks and len(chunks[-1]) < size and _group(chunks[-1][-1]) == _group(task):
            chunks[-1].append(task)
        else:
            chunks.append([task])
    return chunks


def _size(dispatcher):
    """Bytes of bytecode of a kernel's Python function."""
    return len(getattr(getattr(dispatcher, "py_func", None), "__code__", _NO_CODE).co_code)


_NO_CODE = (lambda: None).__code__


def _run(pending, m, jobs, scheduler=None, content_keys=None):
    """Compile pending tasks; yields ``(task, (spirv, metadata, False) or message,
    timing)``, the timing as :func:`_timed_compile` gives it or None."""
    def arguments(task):
        module_name, _, qualname = task.kernel.partition(":")
        profile = task.profile
        return (module_name, qualname, task.signature, task.threads,
                profile.target().key(), task.options, profile.name,
                task.shared_bytes)

    def outcome(value):
        (data, meta), timing = value
        return (meta if data is None else (data, meta, False)), timing

    if scheduler is not None and pending:
        yield from _run_on_cluster(pending, m, scheduler, arguments, outcome, content_keys)
        return
    if jobs <= 1 or len(pending) <= 1:
        for task, _ in pending:
            yield (task, *outcome(_timed_compile(*arguments(task))))
        return
    from numba_vulkan.codegen import backend
    # Forked workers start with Numba and the kernels' modules imported, which
    # spawned ones would spend a second or more each on. A fork does not share
    # this process's backend child (codegen.backend forgets it in the child).
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    workers = min(jobs, len(pending))
    paths = [m.directory] + [p for p in sys.path if p]
    initargs = (paths, config.overrides())
    backends = []
    if context.get_start_method() == "fork":
        # Each worker's backend child loads LLVM (0.1 s of CPU) while this
        # process sets up what the workers inherit, on cores left idle,
        # rather than beside each worker's first module.
        backends = backend.spares(workers)
        initargs += (backends, context.Value("i", 0))
        # Numba's typing and target contexts take a quarter of a second to set
        # up, the code generator's modules and LLVM's targets a tenth: once
        # here rather than in every worker.
        from numba_vulkan.codegen import optimize, pipeline  # noqa: F401
        from numba_vulkan.frontend.compile import contexts
        contexts()
        optimize.initialise()
    # The pool forks every worker at its first submit. Frozen, the objects
    # they inherit stay out of their garbage collections: a full one walked
    # Numba's hundreds of thousands (70 ms) and wrote to the page of each,
    # which the kernel then copied for the worker.
    gc.freeze()
    try:
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context,
                                                    initializer=_worker_init,
                                                    initargs=initargs) as pool:
            futures = {pool.submit(_timed_compiles, [arguments(task) for task in chunk]): chunk
                       for chunk in _chunks(pending, workers)}
            gc.unfreeze()
            backend.release(backends)
            for future in concurrent.futures.as_completed(futures):
                chunk = futures[future]
                try:
                    values = future.result()
                except Exception as exc:  # a worker died or raised outside the compile
                    for task in chunk:
                        yield (task, f"the build worker failed: {type(exc).__name__}: {exc}",
                               None)
                    continue
                for task, value in zip(chunk, values):
                    yield (task, *outcome(value))
    finally:
        gc.unfreeze()
        backend.release(backends, wait=True)


def _entry(task, key, data, meta, fingerprint, build_key):
    target = task.profile.target()
    sha = hashlib.sha256(data).hexdigest()
    key, parts = key
    return {
        "kernel": task.kernel, "key": key, "key_parts": parts, "build_key": build_key,
        "signature": list(task.signature), "numba_signature": task.numba_signature,
        "threads": list(task.threads), "profile": task.profile.name,
        "target": target.key(), "vulkan": "{}.{}".format(*target.vulkan),
        "target_env": target.target_env,
        "capabilities": meta["capabilities"], "features": index.features(meta["capabilities"]),
        "spirv": index.module_path(sha), "sha256": sha, "size": len(data),
        "params": meta["params"], "push_size": meta["push_size"],
        "abi_version": meta["abi_version"], "options": jitoptions.as_json(dict(task.options)),
        "fingerprint": fingerprint,
        **({"print": meta["print"]} if "print" in meta else {}),
        **({"exceptions": meta["exceptions"]} if "exceptions" in meta else {}),
        **({"loop_limit": meta["loop_limit"]} if "loop_limit" in meta else {}),
        **({"shared_bytes": task.shared_bytes} if task.shared_bytes else {}),
    }


#: Called with the name of each point of :func:`_write` where a kill would
#: leave files behind; tests set it to end the process there.
crash_hook = None


def _point(name):
    if crash_hook is not None:
        crash_hook(name)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a, b):
    """Swap two directories in one step (Linux ``renameat2``); False if the
    system or file system cannot."""
    if sys.platform != "linux":
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.EINVAL, errno.ENOSYS, errno.EXDEV, errno.ENOTSUP):
        return False
    raise OSError(error, os.strerror(error), b)


def _leftovers(parent, name):
    """Temporary directories of earlier builds of this output that were killed."""
    prefixes = (f".{name}.new-", f".{name}.old-")
    try:
        entries = os.listdir(parent)
    except OSError:
        return []
    return [os.path.join(parent, e) for e in sorted(entries) if e.startswith(prefixes)
            and os.path.isdir(os.path.join(parent, e))
            and not os.path.islink(os.path.join(parent, e))]


def _write(m, output, entries, modules, signer=None):
    """Write the directory under a temporary name, then swap it in.

    On Linux the swap is one ``renameat2(RENAME_EXCHANGE)``: at every moment
    the output is one complete generation, the old or the new. Elsewhere it
    is two renames, with a moment between them without an output. A build
    holds a lock beside the output, and first removes the temporary
    directories of builds that were killed.
    """
    entries.sort(key=lambda e: (e["kernel"], e["signature"], e["threads"], e["profile"],
                                e.get("shared_bytes", 0)))
    profiles = [{"name": p.name, "narrow": p.narrow, "target_env": p.target_env,
                 **({"loop_limit": p.loop_limit} if p.loop_limit else {}),
                 **({"float16": True} if p.float16 else {}),
                 **({"float16_rte": True} if p.float16_rte else {})}
                for p in m.profiles]
    data = {"format": index.FORMAT_VERSION, "abi_version": abi.ABI_VERSION,
            "profiles": profiles, "entries": entries}
    parent, name = os.path.split(output)
    os.makedirs(parent, exist_ok=True)
    # The lock is the parent directory itself: no file to leave behind.
    lock = os.open(parent, os.O_RDONLY) if fcntl is not None else None
    try:
        if lock is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        for leftover in _leftovers(parent, name):
            shutil.rmtree(leftover, ignore_errors=True)
        temporary = tempfile.mkdtemp(dir=parent, prefix=f".{name}.new-")
        _point("temporary directory made")
        try:
            os.chmod(temporary, 0o755)
            os.mkdir(os.path.join(temporary, index.SPIRV_DIR))
            for relative, blob in sorted(modules.items()):
                with open(os.path.join(temporary, relative), "wb") as f:
                    f.write(blob)
                _point("module written")
            text = index.dumps(data)
            with open(os.path.join(temporary, index.INDEX), "wb") as f:
                f.write(text)
            _point("index written")
            if signer is not None:
                with open(os.path.join(temporary, signing.SIGNATURE), "wb") as f:
                    f.write(signer(text))
                _point("signature written")
            if os.path.isdir(output):
                _, stranger = _ours(output)
                if stranger is not None:
                    raise ManifestError(f"output {output} now holds {stranger}, which no "
                                        "build wrote; refusing to replace it")
                if _exchange(temporary, output):
                    _point("swapped")
                else:
                    old = tempfile.mkdtemp(dir=parent, prefix=f".{name}.old-")
                    os.rmdir(old)
                    os.rename(output, old)
                    _point("old generation moved away")
                    try:
                        os.rename(temporary, output)
                    except OSError:
                        os.rename(old, output)
                        raise
                    temporary = old
            else:
                os.rename(temporary, output)
                temporary = None
            _point("renamed")
        finally:
            if temporary is not None:
                shutil.rmtree(temporary, ignore_errors=True)
        _point("done")
    finally:
        if lock is not None:
            os.close(lock)


def verify(directory, public_key=None):
    """Recheck an AOT directory: format version, every digest, spirv-val.

    Args:
        directory: The directory.
        public_key: An Ed25519 public key (path or PEM text) that must have
            signed the index, or None.

    Returns:
        ``(entries, problems)``: the number of entries and a list of
        messages, empty when the directory is sound.

    Raises:
        AOTError: ``public_key`` is not an Ed25519 public key.
    """
    from numba_vulkan.spirv import tools as validate
    key = signing.PublicKey(public_key) if public_key is not None else None
    try:
        data = files.read_regular(os.path.join(directory, index.INDEX), index.INDEX_LIMIT)
        if key is not None:
            try:
                signature = files.read_regular(os.path.join(directory, signing.SIGNATURE),
                                               1 << 10, inside=directory)
            except FileNotFoundError:
                signature = None
            except OSError as exc:
                return 0, [f"{directory}/{signing.SIGNATURE} cannot be read: "
                           f"{exc.strerror or exc}"]
            key.check(data, signature, directory)
        parsed = index.parse(data, directory, entries=False)
    except OSError as exc:
        return 0, [f"{directory}/{index.INDEX} cannot be read: {exc.strerror or exc}"]
    except AOTError as exc:
        return 0, [str(exc)]
    problems, listed = [], set()
    for number, entry in enumerate(parsed["entries"]):
        problem = index.entry_problem(entry)
        if problem:
            # Each damaged entry is reported by its kernel; the others are still checked.
            problems.append(f"{directory}/{index.INDEX}: {index.entry_label(entry, number)} "
                            f"{problem}")
            if isinstance(entry, dict) and isinstance(entry.get("spirv"), str):
                listed.add(entry["spirv"])
            continue
        listed.add(entry["spirv"])
        label = f"{entry['kernel']} {entry['numba_signature']} profile {entry['profile']}"
        if not index.abi_ok(entry):
            problems.append(f"{label}: built for ABI {entry['abi_version']}, this "
                            f"numba_vulkan speaks {abi.ABI_VERSION}")
        try:
            data = files.read_regular(os.path.join(directory, entry["spirv"]),
                                      index.MODULE_LIMIT, inside=directory)
            index.check_module(data, entry, directory)
            validate.validate(data, index.target_of(entry).target_env)
        except OSError as exc:
            problems.append(f"{label}: {directory}/{entry['spirv']} cannot be read: "
                            f"{exc.strerror or exc}")
        except (AOTError, VulkanError) as exc:
            problems.append(f"{label}: {exc}")
    spirv_dir = os.path.join(directory, index.SPIRV_DIR)
    extra = sorted(set(f"{index.SPIRV_DIR}/{n}" for n in (
        os.listdir(spirv_dir) if os.path.isdir(spirv_dir) else ())) - listed)
    problems.extend(f"{directory}/{name} is not in the index" for name in extra)
    return len(parsed["entries"]), problems
