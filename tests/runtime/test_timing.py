"""Kernel-only times from Vulkan timestamp queries (numba_vulkan.runtime.timing)."""

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.base.errors import LaunchError
from numba_vulkan.runtime.timing import KernelTimer


@nv.jit
def _add_one(x):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] = x[i] + 1


def test_timer_times_each_launch_and_keeps_results(rng):
    host = rng.integers(0, 1000, 4096).astype(np.int32)
    x = nv.to_device(host)
    launch = _add_one.forall(host.size)
    with KernelTimer(capacity=2) as timer:
        for _ in range(3):
            launch(x)
            nv.synchronize()
        for _ in range(3):          # more launches in flight than the capacity
            launch(x)
    nv.synchronize()
    launch(x)                        # outside the block: not timed
    nv.synchronize()
    assert len(timer.times) == 6
    assert all(0 < t < 1.0 for t in timer.times)
    np.testing.assert_array_equal(x.copy_to_host(), host + 7)


def test_timers_do_not_nest():
    with KernelTimer():
        with pytest.raises(LaunchError, match="nest"):
            with KernelTimer():
                pass
