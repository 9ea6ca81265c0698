"""Kernels compiled for a GPU target run on lavapipe and match NumPy.

A target without a loop limit gets what only GPUs get: loops of run-time
trip counts unrolled with a remainder and 32-bit copies of loops with
64-bit bounds. Lavapipe runs such modules as long as no invocation loops
65535 times.
"""

import numpy as np
import pytest

import numba_vulkan as nv
from numba import float32
from numba_vulkan.base import config
from numba_vulkan.runtime.device import current_device


@pytest.fixture
def gpu_target(monkeypatch):
    device = current_device()
    monkeypatch.setattr(device, "target", device.target.with_features(loop_limit=0))
    with config.overriding(NUMBA_VULKAN_CACHE="0"):
        yield


@nv.jit
def _tiled_matmul(a, b, c):
    ta = nv.shared.array((16, 16), float32)
    tb = nv.shared.array((16, 16), float32)
    tx, ty = nv.local_id(0), nv.local_id(1)
    col, row = nv.global_id(0), nv.global_id(1)
    n = a.shape[1]
    acc = float32(0.0)
    for tile in range((n + 15) // 16):
        k = tile * 16 + tx
        ta[ty, tx] = a[row, k] if row < a.shape[0] and k < n else float32(0.0)
        k = tile * 16 + ty
        tb[ty, tx] = b[k, col] if col < b.shape[1] and k < n else float32(0.0)
        nv.barrier()
        for j in range(16):
            acc += ta[ty, j] * tb[j, tx]
        nv.barrier()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


@nv.jit
def _csr_product(indptr, indices, data, x, y):
    row = nv.global_id(0)
    if row < y.shape[0]:
        acc = float32(0.0)
        for k in range(indptr[row], indptr[row + 1]):
            acc += data[k] * x[indices[k]]
        y[row] = acc


def test_a_tiled_matmul(gpu_target, rng):
    # Small integers: every sum is exact in float32, whatever the order.
    a = rng.integers(-4, 5, (40, 72)).astype(np.float32)
    b = rng.integers(-4, 5, (72, 56)).astype(np.float32)
    c = np.zeros((40, 56), np.float32)
    _tiled_matmul[(4, 3), (16, 16)](a, b, c)
    np.testing.assert_array_equal(c, a @ b)


@pytest.mark.parametrize("most", [0, 1, 3, 17])
def test_a_csr_product_of_every_row_length(gpu_target, rng, most):
    rows = 300
    counts = rng.integers(0, most + 1, rows)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    indices = rng.integers(0, 50, indptr[-1]).astype(np.int32)
    data = rng.integers(-3, 4, indptr[-1]).astype(np.float32)
    x = rng.integers(-3, 4, 50).astype(np.float32)
    y = np.zeros(rows, np.float32)
    _csr_product.forall(rows)(indptr, indices, data, x, y)
    expected = np.array([np.dot(data[indptr[r]:indptr[r + 1]], x[indices[indptr[r]:indptr[r + 1]]])
                         for r in range(rows)], np.float32)
    np.testing.assert_array_equal(y, expected)
