"""Signed AOT directories, the reader's side: checking the index's Ed25519 signature.

The index names every module by its SHA-256, and the loader checks each
module against it, so a signature of the index bytes covers the whole
directory: with a public key configured, whoever can write the directory
still cannot make the app run SPIR-V the key's holder did not build.

The signature (``index.json.sig``) is the 64 raw bytes of an Ed25519
signature of :data:`CONTEXT` followed by the index's bytes; the context
keeps a signature made for anything else from passing as one of an index.

Keys are PEM files (PKCS#8 private, SubjectPublicKeyInfo public), written
by ``python -m numba_vulkan.aot keygen`` (:mod:`numba_vulkan.aot.build.signing`,
the build side, which signs). The ``cryptography`` package is imported only
here, and only when a key is used.
"""

import hashlib
import os

from numba_vulkan.base import files
from numba_vulkan.base.errors import AOTError

#: The signature's file, beside the index.
SIGNATURE = "index.json.sig"

#: Bytes signed before the index's: what the signature is for.
CONTEXT = b"numba_vulkan AOT index signature 1\n"

_SIGNATURE_SIZE = 64
_KEY_LIMIT = 64 << 10
_PEM = b"-----BEGIN"


def crypto():
    """``(serialization, ed25519, InvalidSignature)`` of the ``cryptography``
    package; AOTError if it is not installed."""
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as exc:
        raise AOTError(f"signed AOT directories need the cryptography package ({exc}); "
                       "install it with pip install cryptography") from None
    return serialization, ed25519, InvalidSignature


def is_pem(source):
    """Whether ``source`` is PEM text rather than a path."""
    if isinstance(source, str):
        return source.lstrip().startswith(_PEM.decode())
    return isinstance(source, bytes) and source.lstrip().startswith(_PEM)


def pem_bytes(source, what):
    """PEM bytes from PEM text (``str`` or ``bytes``) or a path to a PEM file."""
    if is_pem(source):
        return source.encode("ascii", "replace") if isinstance(source, str) else source
    if not isinstance(source, (str, bytes, os.PathLike)):
        raise AOTError(f"the {what} must be a path or PEM text, not "
                       f"{type(source).__name__}")
    try:
        return files.read_regular(source, _KEY_LIMIT)
    except OSError as exc:
        raise AOTError(f"the {what} {os.fsdecode(source)} cannot be read: "
                       f"{exc.strerror or exc}") from None


def key_label(source):
    """Where a key came from (its path, or that it was PEM text), for messages."""
    if is_pem(source):
        return "given as PEM text"
    try:
        return os.fsdecode(source)
    except TypeError:
        return repr(source)


class PublicKey:
    """An Ed25519 public key that checks index signatures.

    Attributes:
        label: Where the key came from, for messages.
        fingerprint: The first 16 hex digits of the SHA-256 of its raw bytes.
    """

    def __init__(self, source):
        """Load a key from a PEM file's path or PEM text; raises AOTError."""
        serialization, ed25519, _ = crypto()
        self.label = key_label(source)
        data = pem_bytes(source, "public key")
        try:
            key = serialization.load_pem_public_key(data)
        except (ValueError, TypeError) as exc:
            raise AOTError(f"the public key {self.label} is not a PEM public key: "
                           f"{exc}") from None
        if not isinstance(key, ed25519.Ed25519PublicKey):
            raise AOTError(f"the public key {self.label} is a {type(key).__name__}, not an "
                           "Ed25519 key (make one with python -m numba_vulkan.aot keygen)")
        self._key = key
        raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.fingerprint = hashlib.sha256(raw).hexdigest()[:16]

    def check(self, index_bytes, signature, where):
        """Raise AOTError unless ``signature`` signs ``index_bytes`` with this key.

        Args:
            index_bytes: The index as read.
            signature: The signature file's bytes, or None if there is none.
            where: The directory, for messages.
        """
        if signature is None:
            raise AOTError(f"AOT directory {where} is not signed (it has no {SIGNATURE}), "
                           f"and a public key ({self.label}) is required; build it with "
                           "python -m numba_vulkan.aot build MANIFEST --sign PRIVATE_KEY")
        _, _, invalid = crypto()
        try:
            if len(signature) != _SIGNATURE_SIZE:
                raise invalid()
            self._key.verify(signature, CONTEXT + index_bytes)
        except invalid:
            raise AOTError(f"AOT directory {where} is not signed by the public key "
                           f"{self.label} (fingerprint {self.fingerprint}): its index was "
                           "changed after signing, or another key signed it") from None
