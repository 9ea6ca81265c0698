"""Helpers shared by the tests."""

import subprocess

from numba_vulkan import config


def assert_valid_spirv(compiled):
    """spirv-val accepts a compiled kernel's module for its target."""
    path = "/tmp/nv-test-module.spv"
    with open(path, "wb") as f:
        f.write(compiled.spirv)
    result = subprocess.run([config.spirv_val(), "--target-env", compiled.target.target_env,
                             path], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr + result.stdout


def compiled_kernels(dispatcher):
    """Every kernel a dispatcher compiled so far."""
    return list(dispatcher._compiled.values())
