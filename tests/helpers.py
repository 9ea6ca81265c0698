"""Helpers shared by the tests."""

import subprocess
import tempfile

from numba_vulkan.base import config


def assert_valid_spirv(compiled):
    """spirv-val accepts a compiled kernel's module for its target."""
    # A file of its own: test runs side by side must not validate each
    # other's modules.
    with tempfile.NamedTemporaryFile(suffix=".spv") as f:
        f.write(compiled.spirv)
        f.flush()
        result = subprocess.run([config.spirv_val(), "--target-env", compiled.target.target_env,
                                 f.name], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr + result.stdout


def compiled_kernels(dispatcher):
    """Every kernel a dispatcher compiled so far."""
    return list(dispatcher._compiled.values())


def device_info(name, vendor, device_type):
    """A :class:`DeviceInfo` of a made-up device with float64 and int64, for
    tests of what a target description makes of a device."""
    from numba_vulkan.runtime.device import DeviceInfo
    return DeviceInfo(index=0, name=name, vendor_id=vendor, device_id=1, driver_version=1,
                      api_version=(1, 3, 0), device_type=device_type,
                      features=frozenset({"float64", "int64"}), subgroup_size=32,
                      max_workgroup_size=(1024, 1024, 64), max_workgroup_invocations=1024,
                      max_workgroup_count=(65535,) * 3, max_shared_memory=49152,
                      max_push_constants=256, max_storage_buffers=64)
