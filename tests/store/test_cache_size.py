"""The kernel cache's size cap (least recently used eviction) and its persistent hit rates."""

import hashlib
import json
import os

import pytest

from numba_vulkan.base import config
from numba_vulkan.base import files
from numba_vulkan import store as kernelcache
from numba_vulkan.store import counters, disk, entry as entries
from tests.helpers import run_python

BLOB = 10_000


def name(i):
    return hashlib.sha256(b"entry %d" % i).hexdigest()


def stored(i, when):
    """Store entry ``i`` (about BLOB bytes) and date its last use ``when``."""
    kernelcache.store(name(i), {"spirv": bytes([i]) * BLOB, "n": i})
    path = os.path.join(disk.directory("kernels"), name(i) + entries.SUFFIX)
    os.utime(path, (when, when))
    return path


def present(count):
    return [i for i in range(count)
            if os.path.exists(os.path.join(disk.directory("kernels"),
                                           name(i) + entries.SUFFIX))]


@pytest.mark.parametrize("text, value", [
    (None, 1 << 30), ("123", 123), ("0", 0), ("500M", 500 << 20), ("2G", 2 << 30),
    ("2GiB", 2 << 30), ("64k", 64 << 10), ("10 MB", 10 << 20)])
def test_the_cap_is_read_with_units(monkeypatch, text, value):
    if text is None:
        monkeypatch.delenv("NUMBA_VULKAN_CACHE_MAX_BYTES", raising=False)
    else:
        monkeypatch.setenv("NUMBA_VULKAN_CACHE_MAX_BYTES", text)
    assert config.cache_max_bytes() == value


@pytest.mark.parametrize("text", ["x", "1.5.5G", "-3", "12Q"])
def test_a_malformed_cap_is_a_clear_error(monkeypatch, text):
    monkeypatch.setenv("NUMBA_VULKAN_CACHE_MAX_BYTES", text)
    with pytest.raises(ValueError, match="NUMBA_VULKAN_CACHE_MAX_BYTES"):
        config.cache_max_bytes()


def test_a_store_over_the_cap_evicts_the_least_recently_used(cache_dir, monkeypatch):
    for i in range(8):
        stored(i, 1_000_000 + i)
    assert present(8) == list(range(8))
    # A hit renews entry 1: it is now the most recently used.
    assert kernelcache.load(name(1))["n"] == 1
    monkeypatch.setenv("NUMBA_VULKAN_CACHE_MAX_BYTES", str(5 * BLOB + 2000))
    kernelcache.store(name(8), {"spirv": b"\x08" * BLOB, "n": 8})
    # Nine entries of ~10 kB over a ~52 kB cap: trimmed to 90% of it (four
    # entries), oldest use first: 0, 2, 3, 4, 5 go; 1 (hit), 6, 7, 8 stay.
    assert present(9) == [1, 6, 7, 8]
    assert kernelcache.stats()["kernels"]["evicted"] == 5
    assert kernelcache.load(name(1))["spirv"] == b"\x01" * BLOB


def test_the_entry_just_stored_is_kept_even_over_the_cap(cache_dir, monkeypatch):
    stored(0, 1_000_000)
    monkeypatch.setenv("NUMBA_VULKAN_CACHE_MAX_BYTES", str(BLOB // 2))
    kernelcache.store(name(1), {"spirv": b"\x01" * BLOB})
    assert present(2) == [1]


def test_no_cap_evicts_nothing(cache_dir, monkeypatch):
    monkeypatch.setenv("NUMBA_VULKAN_CACHE_MAX_BYTES", "0")
    for i in range(5):
        stored(i, 1_000_000 + i)
    assert present(5) == list(range(5))
    assert kernelcache.evict() == 0


def test_eviction_spans_both_tiers_and_ignores_other_files(cache_dir, monkeypatch):
    stored(0, 1_000_000)
    functions = cache_dir / "functions"
    functions.mkdir()
    old = functions / (name(9) + entries.SUFFIX)
    old.write_bytes(b"x" * BLOB)
    os.utime(old, (999_999, 999_999))
    other = cache_dir / "kernels" / "notes.txt"
    other.write_bytes(b"y" * 5 * BLOB)
    os.utime(other, (1, 1))
    monkeypatch.setenv("NUMBA_VULKAN_CACHE_MAX_BYTES", str(int(2.5 * BLOB)))
    stored(1, 1_000_001)
    assert not old.exists() and other.exists() and present(2) == [0, 1]


_PROCESS = """
import sys
from numba_vulkan import store as kernelcache
name = "ab" * 32
if kernelcache.load(name) is None:
    kernelcache.store(name, {"spirv": b"module"})
print(kernelcache.stats()["kernels"]["hits"])
"""


def test_cache_info_shows_hit_rates_over_every_process(cache_dir, tmp_path):
    # The children inherit the cache directory cache_dir set.
    outputs = [run_python("-c", _PROCESS, timeout=120).stdout.strip() for _ in range(3)]
    assert outputs == ["0", "1", "1"]
    totals = json.loads((cache_dir / counters.STATS).read_text())["tiers"]["kernels"]
    assert (totals["hits"], totals["misses"], totals["stores"]) == (2, 1, 1)
    result = run_python("-m", "numba_vulkan", "cache", "info", timeout=120)
    line = next(x for x in result.stdout.splitlines() if x.startswith("kernels/"))
    assert "1 entries" in line and "2 hits, 1 misses, 0 rejected: hit rate 67%" in line, line
    assert "size cap: 1024 MiB" in result.stdout
    # A damaged stats.json starts counting again instead of failing.
    (cache_dir / counters.STATS).write_text("{not json")
    run_python("-c", _PROCESS, timeout=120)
    totals = json.loads((cache_dir / counters.STATS).read_text())["tiers"]["kernels"]
    assert (totals["hits"], totals["misses"]) == (1, 0)
