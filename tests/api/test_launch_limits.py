"""Launch grids and array sizes are checked against what the device and the
ABI can take before anything is submitted (issue 25)."""

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.base.errors import LaunchError


@nv.jit
def fill(x):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] = 1.0


@pytest.mark.parametrize("axis", range(3))
def test_a_grid_past_the_device_limit_names_the_kernel_and_the_limit(axis):
    limit = nv.get_current_device().info.max_workgroup_count
    groups = [1, 1, 1]
    groups[axis] = limit[axis] + 1
    x = np.zeros(4, np.float32)
    with pytest.raises(LaunchError, match=rf"kernel fill: {limit[axis] + 1} workgroups along "
                                          rf"{'xyz'[axis]} .*exceed the limit of device .*, "
                                          rf"{limit[axis]} \(maxComputeWorkGroupCount"):
        fill[tuple(groups), 1](x)
    assert not x.any()


def test_the_grid_that_hung():
    # [2**31, 64]: past every device's x limit (at most 2**31 - 1).
    with pytest.raises(LaunchError, match="kernel fill: 2147483648 workgroups along x"):
        fill[(2**31, 64), 1](np.zeros(4, np.float32))


def test_a_grid_at_the_limit_runs():
    x = np.zeros(4, np.float32)
    # 65535: the least maxComputeWorkGroupCount Vulkan allows, along y.
    fill[(1, 65535), 4](x)
    assert x.all()


def test_an_array_past_two_to_the_31_elements_names_the_parameter():
    # A view of one element repeated: nothing of that size is allocated.
    huge = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), shape=(2**31,),
                                           strides=(0,))
    with pytest.raises(LaunchError, match=r"fill\(\): parameter 'x' is an array of "
                                          r"2147483648 elements"):
        fill[1, 64](huge)
