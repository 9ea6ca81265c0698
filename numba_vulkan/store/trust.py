"""Authenticated entries on the remote tier: the team key and the MAC.

Whoever can write to the Redis server could otherwise choose the code a
reader's kernels run (a module with the same interface as the real one
passes every structural check). So writers that hold the team's key
(``NUMBA_VULKAN_REMOTE_KEY``, a file) store each value with an
HMAC-SHA256 of it and of the server key it is stored under, and readers
that hold it take only values whose MAC checks out (:func:`open_value`):
the server, or anyone who can write to it without the key, can then only
make a reader miss and compile.

Without a key the server is read only if the user chose so explicitly
(``NUMBA_VULKAN_REMOTE_TRUST=unsigned``); otherwise the tier is not used
at all, with one :class:`~numba_vulkan.base.errors.CacheWarning`
(:func:`readable`). The ``aot`` section, whose modules end up in release
directories, takes authenticated values only, in every mode.
``docs/remote.md`` ("What is trusted") is the trust model for users.
"""

import hashlib
import hmac
import os
import secrets
import threading

from numba_vulkan.base import config
from numba_vulkan.base import files

#: What starts a value that carries a MAC.
MAGIC = b"numba_vulkan mac 1\n"
_TAG_BYTES = 32
#: Shortest key accepted, in bytes (after surrounding blanks are stripped).
MIN_KEY_BYTES = 16
_KEY_LIMIT = 4096
#: Sections whose values must carry a valid MAC whatever the trust mode.
SIGNED_ONLY = frozenset({"aot"})

_lock = threading.Lock()
_keys = {}


class KeyProblem(ValueError):
    """The key file cannot be used; the message says why and names the setting."""


def team_key():
    """The team key's bytes, or None if ``NUMBA_VULKAN_REMOTE_KEY`` is unset.

    Raises:
        KeyProblem: The file cannot be read, is readable by every user, or
            is too short.
        ConfigError: The setting is set but empty.
    """
    path = config.remote_key()
    if path is None:
        return None
    try:
        st = os.stat(path)
        stamp = (path, st.st_ino, st.st_mtime_ns, st.st_size, st.st_mode)
    except OSError as exc:
        raise KeyProblem(f"NUMBA_VULKAN_REMOTE_KEY={path}: cannot read the key file: "
                         f"{exc.strerror or exc}") from None
    with _lock:
        if stamp in _keys:
            return _keys[stamp]
    try:
        key = files.read_regular(path, _KEY_LIMIT).strip()
        files.check_private(path)
    except OSError as exc:
        raise KeyProblem(f"NUMBA_VULKAN_REMOTE_KEY={path}: cannot use the key file: "
                         f"{exc.strerror or exc}") from None
    if len(key) < MIN_KEY_BYTES:
        raise KeyProblem(f"NUMBA_VULKAN_REMOTE_KEY={path}: the key has {len(key)} bytes, "
                         f"fewer than {MIN_KEY_BYTES} (make one with python -m numba_vulkan "
                         "cache keygen)")
    with _lock:
        _keys[stamp] = key
    return key


def keygen(path):
    """Write a new random team key (64 hexadecimal digits) to ``path``,
    readable by its owner only; never overwrites a file.

    Raises:
        OSError: The file exists or cannot be written.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")


def readable():
    """Why the remote tier may not be used in this process, or None if it may:
    a key that is set but unusable, or no key without
    ``NUMBA_VULKAN_REMOTE_TRUST=unsigned``."""
    try:
        key = team_key()
        mode = config.remote_trust()
    except ValueError as exc:
        return str(exc)
    if key is None and mode != "unsigned":
        return ("no NUMBA_VULKAN_REMOTE_KEY to authenticate its entries with (set it to the "
                "team's key file, or NUMBA_VULKAN_REMOTE_TRUST=unsigned to read entries anyone "
                "who can write to the server may have made)")
    return None


def _tag(key, name, data):
    return hmac.new(key, name.encode() + b"\0" + data, hashlib.sha256).digest()


def seal(name, data):
    """The value to store under the server key ``name``: ``data`` with its
    MAC if there is a team key, else ``data`` as it is."""
    key = team_key()
    if key is None:
        return data
    return MAGIC + _tag(key, name, data) + data


def open_value(section, name, value):
    """The entry bytes of a value read from the server key ``name``.

    Raises:
        ValueError: There is a team key (or the section takes authenticated
            values only) and the value's MAC is missing or wrong.
    """
    key = team_key()
    signed = value.startswith(MAGIC)
    data = value[len(MAGIC) + _TAG_BYTES:] if signed else value
    if key is None and section not in SIGNED_ONLY:
        return data
    if key is None:
        raise ValueError(f"the {section} section takes authenticated entries only, and there "
                         "is no NUMBA_VULKAN_REMOTE_KEY")
    if not signed or len(value) < len(MAGIC) + _TAG_BYTES:
        raise ValueError("an entry without a MAC")
    if not hmac.compare_digest(value[len(MAGIC):len(MAGIC) + _TAG_BYTES],
                               _tag(key, name, data)):
        raise ValueError("an entry whose MAC does not match (not written with the team key)")
    return data
