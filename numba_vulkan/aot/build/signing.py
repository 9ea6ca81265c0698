"""Signed AOT directories, the build's side: making key pairs and signing an index.

The format of a signature and the check a reader makes are in
:mod:`numba_vulkan.aot.loader.signing`.
"""

import os

from numba_vulkan.aot.loader.signing import (CONTEXT, PublicKey, crypto, is_pem, key_label,
                                             pem_bytes)
from numba_vulkan.base import files
from numba_vulkan.base.errors import AOTError


def signer(private_key):
    """A function signing an index's bytes with a private key.

    Args:
        private_key: An unencrypted Ed25519 private key: a PEM file's path
            or the PEM text.

    Raises:
        AOTError: The key cannot be read or is not an Ed25519 private key.
    """
    serialization, ed25519, _ = crypto()
    label = key_label(private_key)
    data = pem_bytes(private_key, "private key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise AOTError(f"the private key {label} is not an unencrypted PEM private key: "
                       f"{exc}") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise AOTError(f"the private key {label} is a {type(key).__name__}, not an Ed25519 "
                       "key (make one with python -m numba_vulkan.aot keygen)")
    if not is_pem(private_key):
        try:
            files.check_private(private_key)
        except OSError as exc:
            raise AOTError(f"the private key {label} cannot be used: {exc}") from None
    return lambda index_bytes: key.sign(CONTEXT + index_bytes)


def keygen(private_path, public_path):
    """Write a new Ed25519 key pair as PEM files.

    The private key is created readable by its owner only and never
    overwrites a file; the public one is meant to ship with the app.

    Raises:
        AOTError: A file exists already or cannot be written.
    """
    serialization, ed25519, _ = crypto()
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    for path in (private_path, public_path):
        if os.path.lexists(path):
            raise AOTError(f"{path} exists; keygen never overwrites a key")
    written = []
    try:
        for path, data, mode in ((private_path, private, 0o600), (public_path, public, 0o644)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            written.append(path)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
    except OSError as exc:
        for path in written:
            os.unlink(path)
        raise AOTError(f"cannot write the key pair: {exc.strerror or exc}") from None
    return PublicKey(public).fingerprint
