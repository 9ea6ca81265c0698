"""Run spirv-val on generated modules before any driver sees them."""

import os
import shlex
import subprocess
import tempfile

from numba_vulkan.base import config
from numba_vulkan.base.errors import ToolError, ValidationError


def _run(tool, args, spirv, name):
    fd, path = tempfile.mkstemp(prefix="numba_vulkan_", suffix=".spv")
    with os.fdopen(fd, "wb") as f:
        f.write(spirv)
    command = [tool, *args, path]
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    except FileNotFoundError as exc:
        os.unlink(path)
        raise ToolError(tool, 127, f"{tool} was not found: install SPIRV-Tools "
                        "(Debian: apt-get install spirv-tools)") from exc
    if result.returncode != 0:
        raise ValidationError(name, result.returncode, result.stderr + result.stdout,
                              reproduce=shlex.join(command))
    os.unlink(path)
    return result.stdout


def validate(spirv, target_env):
    """Check a module with spirv-val for ``target_env`` (such as ``vulkan1.2``).

    Raises:
        ValidationError: spirv-val rejected the module; the message holds its
            output and a command (with the module saved) to reproduce it.
    """
    _run(config.spirv_val(), ["--target-env", target_env], spirv, "spirv-val")


def disassemble(spirv):
    """The module as text, from spirv-dis."""
    return _run(config.spirv_dis(), [], spirv, "spirv-dis")
