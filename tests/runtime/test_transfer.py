"""Copies through staging memory (the path for device memory the host cannot map)."""

import numpy as np

import numba_vulkan as nv
from numba_vulkan.runtime import transfer
from numba_vulkan.runtime.device import current_device
from numba_vulkan.runtime.memory import Buffer
from tests.helpers import run_python


def test_chunked_staging_round_trip(monkeypatch, rng):
    monkeypatch.setattr(transfer, "CHUNK", 4096)
    device = current_device()
    staging = transfer.Staging(device)          # chunks of 4 KiB: many per copy
    target = Buffer(device, 50_000)
    data = rng.integers(0, 256, 30_001, dtype=np.uint8)
    staging.write(target, data, 1000)
    out = np.zeros(30_001, np.uint8)
    staging.read(target, out, 1000)
    np.testing.assert_array_equal(out, data)
    part = np.zeros(5000, np.uint8)
    staging.read(target, part, 1000 + 12_345)
    np.testing.assert_array_equal(part, data[12_345:17_345])


def test_parallel_host_copy(rng):
    src = rng.integers(0, 256, (8 << 20) + 3, dtype=np.uint8)
    dst = np.zeros_like(src)
    transfer.host_copy(dst, src)
    np.testing.assert_array_equal(dst, src)


@nv.jit
def _add_one(x):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] += 1


def test_host_array_buffers_are_reused(rng):
    x = rng.random(4096)
    expected = x + 3
    for _ in range(3):
        _add_one.forall(x.size)(x)
    np.testing.assert_allclose(x, expected)
    pool = current_device().transient_buffers
    assert sum(len(v) for v in pool.values()) >= 1


def test_exit_with_a_staged_copy_in_flight():
    """A copy through staging that nobody waits for, then exit: freeing its
    buffer at exit, under the device, crashed the process (2 runs in 3)."""
    script = ("import numpy as np, numba_vulkan as nv\n"
              "src = nv.to_device(np.arange(1 << 22, dtype=np.float32))\n"
              "dst = nv.device_array_like(src)\n"
              "dst.buffer.mapped = None\n"
              "dst.copy_to_device(src.copy_to_host())\n")
    for _ in range(3):
        run = run_python("-c", script, timeout=120, check=False)
        assert run.returncode == 0, run.stderr[-2000:]
