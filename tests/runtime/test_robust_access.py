"""Devices are opened with robustBufferAccess where they offer it (NUMBA_VULKAN_ROBUST_ACCESS)."""

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.base import config
from numba_vulkan.runtime import vk
from numba_vulkan.runtime.device import current_device
from tests.helpers import run_python


def _offered(device):
    v = vk.module()
    features = vk.new("VkPhysicalDeviceFeatures*")
    v.lib.vkGetPhysicalDeviceFeatures(device.physical, features)
    return bool(features.robustBufferAccess)


def test_the_device_has_robust_access_where_offered():
    device = current_device()
    assert device.robust_access == (_offered(device) and config.robust_access())


def test_the_setting_turns_it_off():
    script = ("from numba_vulkan.runtime.device import current_device\n"
              "print(current_device().robust_access)\n")
    result = run_python("-c", script, env={"NUMBA_VULKAN_ROBUST_ACCESS": "0"}, timeout=120)
    assert result.stdout.strip() == "False"


@nv.jit
def _write_past_the_end(a, past):
    i = nv.global_id(0)
    if i < a.shape[0]:
        a[i] = i + 1.0
        a[i + past] = -1.0


def test_writes_past_an_arrays_end_leave_other_arrays_alone():
    device = current_device()
    if not device.robust_access:
        pytest.skip("the device is opened without robustBufferAccess")
    n = 256
    before = np.arange(4 * n, dtype=np.float32)
    neighbours = [nv.to_device(before) for _ in range(2)]
    a = nv.device_array(n, np.float32)
    neighbours += [nv.to_device(before) for _ in range(2)]
    _write_past_the_end[4, 64](a, n)
    np.testing.assert_array_equal(a.copy_to_host(), np.arange(1, n + 1, dtype=np.float32))
    for d in neighbours:
        np.testing.assert_array_equal(d.copy_to_host(), before)
