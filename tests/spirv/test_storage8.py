"""8-bit storage buffers: int8, uint8 and bool arrays declare
``StorageBuffer8BitAccess``, which Vulkan requires for them, and a device
without ``storageBuffer8BitAccess`` refuses their launch with a LaunchError
naming the feature."""

import numpy as np
import pytest

import numba_vulkan as nv
from tests.helpers import assert_valid_spirv, run_python


@nv.jit
def _add_one(x, y):
    i = nv.global_id(0)
    if i < x.shape[0]:
        y[i] = x[i] + 1


@nv.jit
def _flip(x, y):
    i = nv.global_id(0)
    if i < x.shape[0]:
        y[i] = not x[i]


@nv.jit
def _reverse_through_bytes(x, y):
    """8-bit values in workgroup memory only: no 8-bit storage buffer."""
    tile = nv.shared.array(64, np.uint8)
    t = nv.local_id(0)
    tile[t] = np.uint8(x[nv.global_id(0)])
    nv.barrier()
    y[nv.global_id(0)] = tile[63 - t]


@pytest.mark.parametrize("kernel, sig", [
    (_add_one, "void(uint8[::1], uint8[::1])"),
    (_add_one, "void(int8[:], int8[:])"),
    (_add_one, "void(int8[::1], int32[::1])"),
    (_flip, "void(boolean[::1], boolean[::1])"),
])
def test_8_bit_arrays_declare_8_bit_storage(kernel, sig):
    compiled = kernel.compile(sig)
    assert "StorageBuffer8BitAccess" in compiled.capabilities
    assert_valid_spirv(compiled)


@pytest.mark.parametrize("kernel, sig", [
    (_add_one, "void(int32[::1], int32[::1])"),
    (_reverse_through_bytes, "void(float32[::1], float32[::1])"),
])
def test_other_kernels_declare_no_8_bit_storage(kernel, sig):
    assert "StorageBuffer8BitAccess" not in kernel.compile(sig).capabilities


def test_8_bit_arrays_compute_as_numpy(rng):
    x = rng.integers(-128, 128, 300, dtype=np.int8)
    y = np.zeros_like(x)
    _add_one.forall(x.size)(x, y)
    np.testing.assert_array_equal(y, x + np.int8(1))
    b = rng.random(300) < 0.5
    out = np.zeros_like(b)
    _flip.forall(b.size)(b, out)
    np.testing.assert_array_equal(out, ~b)


_MASKED = '''
import numpy as np
import numba_vulkan as nv

@nv.jit
def add_one(x, y):
    i = nv.global_id(0)
    if i < x.shape[0]:
        y[i] = x[i] + 1

assert "storage8" not in nv.get_current_device().info.features
x = np.arange(8, dtype=np.float32)
y = np.zeros_like(x)
add_one.forall(8)(x, y)                        # no 8-bit array: runs
assert np.array_equal(y, x + 1)
try:
    add_one.forall(8)(np.arange(8, dtype=np.uint8), np.zeros(8, np.uint8))
except nv.LaunchError as exc:
    print("LaunchError:", exc)
'''


def test_a_device_without_8_bit_storage_refuses_8_bit_arrays():
    if "storage8" not in nv.get_current_device().info.features:
        pytest.skip("the device has no 8-bit storage to mask")
    child = run_python("-c", _MASKED, env={"NUMBA_VULKAN_MASK_FEATURES": "storage8"},
                       check=False)
    assert child.returncode == 0, child.stderr[-3000:]
    line = child.stdout.strip().splitlines()[-1]
    assert line.startswith("LaunchError: add_one has int8, uint8 or bool arrays"), line
    assert "storageBuffer8BitAccess" in line
