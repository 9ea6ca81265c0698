"""Fixtures shared by every test folder. Plain functions that test modules
import (the subprocess runner, the repository root) are in tests/helpers.py."""

import os
import tempfile

import numpy as np
import pytest

# Tests never touch the user's cache, and always validate generated SPIR-V.
os.environ.setdefault("NUMBA_VULKAN_CACHE_DIR", tempfile.mkdtemp(prefix="nv-test-cache-"))
os.environ["NUMBA_VULKAN_VALIDATE"] = "1"


def pytest_addoption(parser):
    parser.addoption("--ir-round-trip", action="store_true",
                     help="check that every module any test parses into the IR model prints "
                          "back to the module LLVM reads (tests/llvmir/test_roundtrip.py "
                          "checks representative kernels in every run)")


def pytest_configure(config):
    # Off by default: it makes every parse three, through LLVM twice.
    if config.getoption("ir_round_trip"):
        from numba_vulkan.llvmir import ir
        from tests.helpers import checking_round_trips
        ir.parse = checking_round_trips(ir.parse)


@pytest.fixture
def rng():
    """A random generator seeded per test, so failures reproduce."""
    return np.random.default_rng(12345)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """An empty cache directory of this test's own (not yet created), with the
    cache on and its default size cap, no dumps, and zeroed counters. It is
    NUMBA_VULKAN_CACHE_DIR of this process, so child processes use it too."""
    from numba_vulkan.base import files
    from numba_vulkan import store as kernelcache
    directory = tmp_path / "cache"
    monkeypatch.setenv("NUMBA_VULKAN_CACHE_DIR", str(directory))
    for name in ("NUMBA_VULKAN_CACHE", "NUMBA_VULKAN_CACHE_MAX_BYTES", "NUMBA_VULKAN_DUMP"):
        monkeypatch.delenv(name, raising=False)
    # The cache checks a directory once per process: check this one afresh.
    files.forget_cache_roots()
    kernelcache.reset_stats()
    yield directory
    files.forget_cache_roots()

