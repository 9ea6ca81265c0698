import os
import tempfile

import numpy as np
import pytest

# Tests never touch the user's cache, and always validate generated SPIR-V.
os.environ.setdefault("NUMBA_VULKAN_CACHE_DIR", tempfile.mkdtemp(prefix="nv-test-cache-"))
os.environ["NUMBA_VULKAN_VALIDATE"] = "1"


@pytest.fixture
def rng():
    """A random generator seeded per test, so failures reproduce."""
    return np.random.default_rng(12345)


@pytest.fixture(autouse=True, scope="session")
def _ir_round_trips():
    """Every module a codegen pass parses into the IR model, in any test,
    prints back to the module LLVM reads from it (tests/test_ir.py)."""
    from numba_vulkan.llvmir import ir
    from test_ir import assert_round_trip
    parse = ir.parse

    def checked(text):
        assert_round_trip(text)
        return parse(text)
    ir.parse = checked
    yield
    ir.parse = parse
