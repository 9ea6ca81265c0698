"""Reading and writing the files numba_vulkan keeps: bounded, checked, atomic.

Everything the package reads from disk that a user, another process or an
attacker may have put there (the cache directory, shipped AOT directories)
goes through :func:`read_regular`: only regular files, optionally only
inside a given directory, never more than a size cap. A FIFO, a device or
a symlink to one is refused without blocking, an oversized file without
being read. Writes go through :func:`write_atomic`: a temporary file in the
same directory, moved into place with :func:`os.replace`, so that a reader
sees the old file or the new one, never a part; the temporary files of
writers that were killed are removed by the next write to the folder, once
they are an hour old.

:func:`cache_root` is the cache directory if it can be used, else None
after one warning: a read-only home or a file in the directory's place
turns caching off instead of failing launches.
"""

import os
import stat
import threading
import time
import uuid
import warnings

from numba_vulkan.base import config
from numba_vulkan.base.errors import CacheWarning

_lock = threading.Lock()
_usable = {}

#: Prefix of the temporary files :func:`write_atomic` makes.
TEMPORARY_PREFIX = ".tmp-"


class FileProblem(OSError):
    """A file that is not read: not a regular file, outside its directory, or too large."""


def read_regular(path, limit, inside=None):
    """The contents of a regular file of at most ``limit`` bytes.

    Args:
        path: The file.
        limit: Most bytes to read; a larger file is refused unread.
        inside: A directory the file (symlinks resolved) must lie in, or None.

    Raises:
        FileNotFoundError: There is no such file.
        FileProblem: It is not a regular file, lies outside ``inside``, or is
            larger than ``limit``.
        OSError: It cannot be read.
    """
    path = os.fspath(path)
    if inside is not None:
        real, root = os.path.realpath(path), os.path.realpath(inside)
        if os.path.commonpath([real, root]) != root:
            raise FileProblem(f"{path} lies outside {inside}")
    # O_NONBLOCK: opening a FIFO for reading would wait for a writer.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileProblem(f"{path} is not a regular file")
        if st.st_size > limit:
            raise FileProblem(f"{path} is larger than {limit} bytes ({st.st_size})")
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise FileProblem(f"{path} grew past {limit} bytes while being read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def check_private(path):
    """Raise FileProblem if anyone but the owner and group of a key file may
    read or write it: a key every user of the machine can read
    authenticates nothing."""
    mode = os.stat(path).st_mode
    if mode & (stat.S_IROTH | stat.S_IWOTH):
        raise FileProblem(f"{os.fspath(path)} is readable or writable by every user (mode "
                          f"{stat.S_IMODE(mode):o}); make it private: chmod 600")


def write_atomic(path, data):
    """Replace ``path`` with a file holding ``data``, in one step.

    The file gets the permissions of any new file (``0o666`` less the
    umask), not the private ones of :func:`tempfile.mkstemp`: a cache
    directory may be shared. Raises OSError; the temporary file is removed.
    """
    folder = os.path.dirname(os.fspath(path))
    _sweep(folder)
    temporary = os.path.join(folder, f"{TEMPORARY_PREFIX}{uuid.uuid4().hex}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


#: A temporary file older than this is a killed writer's: no write takes as long.
STALE_SECONDS = 3600
_swept = set()


def _sweep(folder):
    """Remove the temporary files killed writers left in ``folder`` (once per
    folder and process)."""
    with _lock:
        if folder in _swept:
            return
        _swept.add(folder)
    try:
        names = [n for n in os.listdir(folder) if n.startswith(TEMPORARY_PREFIX)]
    except OSError:
        return
    now = time.time()
    for name in names:
        path = os.path.join(folder, name)
        try:
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and now - st.st_mtime > STALE_SECONDS:
                os.unlink(path)
        except OSError:
            pass


def cache_root():
    """The cache directory, created if missing, or None if caching is off.

    None when ``NUMBA_VULKAN_CACHE=0``, and when the directory cannot be
    created or written (read-only home, a file in its place): then with one
    :class:`CacheWarning` per directory and process, and everything that
    would be cached is computed instead.
    """
    if not config.cache_enabled():
        return None
    path = config.cache_dir()
    with _lock:
        known = _usable.get(path)
    if known is not None:
        return path if known else None
    problem = None
    try:
        os.makedirs(path, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            problem = "it is not writable"
    except OSError as exc:
        problem = exc.strerror or str(exc)
    with _lock:
        first = path not in _usable
        _usable[path] = problem is None
    if problem is not None and first:
        warnings.warn(f"the cache directory {path} cannot be used ({problem}); caching is "
                      "off in this process (set NUMBA_VULKAN_CACHE_DIR to a writable "
                      "directory, or NUMBA_VULKAN_CACHE=0 to silence this)", CacheWarning,
                      stacklevel=2)
    return path if problem is None else None


def forget_cache_roots():
    """Check the cache directory again at its next use (for tests)."""
    with _lock:
        _usable.clear()
