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


def pytest_addoption(parser):
    parser.addoption("--ir-round-trips", action="store_true",
                     help="check that every module the IR model parses, in any test, "
                          "prints back to the module LLVM reads from it (twice the "
                          "parsing, through LLVM too)")


@pytest.fixture(autouse=True, scope="session")
def _ir_round_trips(request):
    """With ``--ir-round-trips``, every module parsed into the IR model is
    checked with :func:`helpers.assert_round_trip`; tests/test_ir.py checks
    those of a few kernels always."""
    if not request.config.getoption("ir_round_trips"):
        yield
        return
    from numba_vulkan.llvmir import ir
    from helpers import assert_round_trip
    parse = ir.parse

    def checked(text):
        assert_round_trip(text, parse)
        return parse(text)
    ir.parse = checked
    yield
    ir.parse = parse
