"""A kernel binding more storage buffers than the device allows is a LaunchError, not a crash.

Lavapipe allows 32 per kernel and crashes beyond (a segfault at 34 before
the check); GPUs allow far more. Tests with a faked low limit run anywhere.
"""

import dataclasses

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.runtime.device import current_device


def _add3(a, b, c):
    i = nv.global_id(0)
    if i < a.shape[0]:
        a[i] = b[i] + c[i]


@pytest.fixture
def limit(monkeypatch):
    """Set the current device's storage buffer limit for this test."""
    device = current_device()

    def set_limit(count):
        monkeypatch.setattr(device, "info",
                            dataclasses.replace(device.info, max_storage_buffers=count))
    return set_limit


def _arrays(rng):
    b = rng.standard_normal(16).astype(np.float32)
    c = rng.standard_normal(16).astype(np.float32)
    return np.zeros(16, np.float32), b, c


def test_more_arrays_than_the_limit_is_a_launch_error(limit, rng):
    kernel = nv.jit(_add3)
    a, b, c = _arrays(rng)
    limit(2)
    with pytest.raises(nv.LaunchError, match=r"kernel _add3 binds 3 storage buffers "
                       r"\(3 array arguments\), but device .* allows 2 per kernel"):
        kernel[1, 16](a, b, c)
    # At the limit it runs.
    limit(3)
    kernel = nv.jit(_add3)
    kernel[1, 16](a, b, c)
    np.testing.assert_array_equal(a, b + c)


def test_the_status_buffer_counts(limit, rng):
    kernel = nv.jit(_add3, boundscheck=True)
    a, b, c = _arrays(rng)
    limit(3)
    with pytest.raises(nv.LaunchError, match=r"binds 4 storage buffers \(3 array arguments, "
                       r"its status buffer\), but device .* allows 3"):
        kernel[1, 16](a, b, c)


def _many(count):
    """A kernel of ``count`` arrays: out[i] = sum of the others."""
    names = [f"a{k}" for k in range(count)]
    source = (f"def many({', '.join(names)}):\n"
              "    i = nv.global_id(0)\n"
              "    if i < a0.shape[0]:\n"
              f"        a0[i] = {' + '.join(n + '[i]' for n in names[1:])}\n")
    namespace = {"nv": nv}
    exec(source, namespace)
    return nv.jit(namespace["many"])


def test_the_devices_own_limit():
    real = current_device().info.max_storage_buffers
    if not 24 <= real <= 64:
        pytest.skip(f"the device allows {real} storage buffers: compiling that many is "
                    "slow, or so few arrays may not need the argument buffer")
    # The arguments of this many arrays do not fit the push constants, so the
    # argument buffer takes one more binding: real - 1 arrays fill the limit.
    inputs = [np.full(8, k, np.float32) for k in range(1, real - 1)]
    out = np.zeros(8, np.float32)
    _many(real - 1)[1, 8](out, *inputs)
    np.testing.assert_array_equal(out, np.sum(inputs, axis=0))
    with pytest.raises(nv.LaunchError, match=f"kernel many binds {real + 1} storage buffers "
                       rf"\({real} array arguments, the argument buffer\), but device .* "
                       f"allows {real} per kernel"):
        _many(real)[1, 8](out, *inputs, inputs[0])
