"""Helpers shared by the tests."""

import subprocess
import tempfile

from numba_vulkan import config


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
