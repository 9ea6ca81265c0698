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
