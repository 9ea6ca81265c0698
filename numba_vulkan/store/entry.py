"""The one format of a cache entry, on disk and on the remote tier alike.

An entry is a dict of str keys whose values are bytes or JSON data. Its
encoding is one file, ``NAME.entry``: a line naming the format and its
version, a line of JSON (the section and name, the entry's JSON values,
the size and SHA-256 of each bytes value and long text value, and a
checksum of the line itself), then those values raw, in the order the line
lists them. One file, because LLVM's backend does not give the same bytes
twice for the same IR: separate files written by two processes at once
could pair one's metadata with the other's module.

Decoding parses JSON and compares hashes, nothing else; whatever does not
check out raises one of :data:`DAMAGED`, which every reader treats as a
miss. An entry of another :data:`FORMAT_VERSION` is such a miss too, never
an error: the version is part of every key as well, so a newer package does
not even look for an older one's entries.
"""

import hashlib
import json
import re
import time

#: Version of the entry format. 3: the store split into modules (issue 22);
#: entries of version 2 are misses.
FORMAT_VERSION = 3

#: The sections of the cache, each a directory on disk and a namespace on the
#: remote tier: ``kernels`` holds modules found by their IR
#: (:mod:`numba_vulkan.store.kernels`), ``functions`` whole compiled kernels
#: found by their Python code (:mod:`numba_vulkan.store.functions`). The
#: remote tier has a third, ``aot``, of modules an AOT build made.
SECTIONS = ("kernels", "functions")

#: Suffix of entry files.
SUFFIX = ".entry"
#: Entries larger than this are not read (a damaged size field must not
#: make a lookup read gigabytes).
MAX_BYTES = 256 << 20

#: What reading, decoding or checking a damaged or mismatched entry raises.
DAMAGED = (OSError, ValueError, TypeError, KeyError, AttributeError, UnicodeError,
           RecursionError, OverflowError)

_NAME = re.compile(r"^[0-9a-f]{64}$")
_MAGIC_PREFIX = b"numba_vulkan cache entry "
_MAGIC = _MAGIC_PREFIX + b"%d\n" % FORMAT_VERSION
#: Text values longer than this are stored raw after the header, not as JSON.
_TEXT_BLOB = 256


def is_name(name):
    """Whether ``name`` is an entry name: 64 lowercase hexadecimal digits."""
    return isinstance(name, str) and _NAME.match(name) is not None


def _checksum(record):
    body = {k: v for k, v in record.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"))
                          .encode()).hexdigest()


def encode(section, name, entry):
    """The bytes of an entry file holding ``entry`` under ``section/name``.

    Raises:
        ValueError: ``name`` is not an entry name.
        TypeError: ``entry`` is not a dict of str keys and JSON-serialisable
            values or bytes (a caller's bug, found before anything is written).
    """
    if not is_name(name):
        raise ValueError(f"{name!r} is not a cache entry name")
    if not isinstance(entry, dict) or not all(isinstance(k, str) for k in entry):
        raise TypeError("a cache entry is a dict with str keys")
    values, blobs, contents = {}, [], []
    for key, value in sorted(entry.items()):
        if isinstance(value, (bytes, bytearray, memoryview)):
            content, kind = bytes(value), "bytes"
        elif isinstance(value, str) and len(value) > _TEXT_BLOB:
            content, kind = value.encode("utf-8"), "text"
        else:
            values[key] = value
            continue
        blobs.append([key, kind, len(content), hashlib.sha256(content).hexdigest()])
        contents.append(content)
    record = {"format": FORMAT_VERSION, "section": section, "key": name, "created": time.time(),
              "values": values, "blobs": blobs}
    try:
        json.dumps(record)
    except (ValueError, RecursionError) as exc:
        raise TypeError(f"a cache entry's values must be JSON-serialisable: {exc}") from None
    record["checksum"] = _checksum(record)
    header = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
    return b"".join([_MAGIC, header, b"\n", *contents])


def decode(section, name, data):
    """The entry that an entry file's bytes hold, or raise ValueError why not.

    The entry must be the one of ``section/name`` and of this format version.
    """
    if not data.startswith(_MAGIC_PREFIX):
        raise ValueError("not a cache entry")
    if not data.startswith(_MAGIC):
        raise ValueError("entry of another format version")
    end = data.find(b"\n", len(_MAGIC))
    if end < 0:
        raise ValueError("truncated header")
    record = json.loads(data[len(_MAGIC):end])
    if not isinstance(record, dict):
        raise ValueError("malformed header")
    if record.get("format") != FORMAT_VERSION:
        raise ValueError(f"format {record.get('format')!r}, expected {FORMAT_VERSION}")
    if record.get("section") != section or record.get("key") != name:
        raise ValueError("entry of another kernel")
    if record.get("checksum") != _checksum(record):
        raise ValueError("header does not match its checksum")
    values, blobs = record.get("values"), record.get("blobs")
    if not isinstance(values, dict) or not isinstance(blobs, list):
        raise ValueError("malformed header")
    entry, pos = dict(values), end + 1
    for blob in blobs:
        if (not isinstance(blob, list) or len(blob) != 4 or not isinstance(blob[0], str)
                or blob[1] not in ("bytes", "text") or type(blob[2]) is not int
                or blob[2] < 0 or blob[0] in entry):
            raise ValueError("malformed header")
        key, kind, size, digest = blob
        content = data[pos:pos + size]
        if len(content) != size or hashlib.sha256(content).hexdigest() != digest:
            raise ValueError("content does not match its hash")
        entry[key] = content if kind == "bytes" else content.decode("utf-8")
        pos += size
    if pos != len(data):
        raise ValueError("trailing data")
    return entry
