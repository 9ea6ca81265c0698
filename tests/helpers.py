"""Helpers shared by the tests: plain functions that test modules import
(fixtures live in tests/conftest.py)."""

import os
import subprocess
import sys
import tempfile

from numba_vulkan.base import config
from numba_vulkan.llvmir import ir

#: The repository's root: the checkout the tests run against.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The parser itself, even where a check (--ir-round-trip) wraps ir.parse.
_PARSE = ir.parse


def child_env(env=None, path=()):
    """The environment of a child Python process: this process's settings
    (:func:`config.child_environment`), with ``env``'s values set (None
    removes a variable), and a PYTHONPATH of ``path``, then the repository
    root, then the inherited PYTHONPATH, so that the child imports this
    checkout of numba_vulkan whether or not it is installed."""
    environment = config.child_environment()
    inherited = [p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p]
    environment["PYTHONPATH"] = os.pathsep.join([*map(str, path), ROOT, *inherited])
    for name, value in (env or {}).items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = str(value)
    return environment


def run_python(*args, env=None, path=(), cwd=None, input=None, timeout=600, check=True,
               python=sys.executable):
    """Run ``python *args`` (``-c CODE``, ``-m MODULE ...`` or a script) in a
    child process with :func:`child_env`'s environment; return the finished
    process, its output as text. With ``check`` the test fails on a nonzero
    exit status, showing the child's output."""
    result = subprocess.run([str(python), *map(str, args)], env=child_env(env, path), cwd=cwd,
                            input=input, capture_output=True, text=True, timeout=timeout)
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


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


def rewritten(rewrite, text, *args, **kwargs):
    """The module ``text`` after the codegen pass ``rewrite`` (which changes
    an IR model in place), printed."""
    from numba_vulkan.llvmir import ir
    module = ir.parse(text)
    rewrite(module, *args, **kwargs)
    return str(module)


def compiled_kernels(dispatcher):
    """Every kernel a dispatcher compiled so far."""
    return list(dispatcher._compiled.values())


def device_info(name, vendor, device_type):
    """A :class:`DeviceInfo` of a made-up device with float64 and int64, for
    tests of what a target description makes of a device."""
    from numba_vulkan.runtime.instance import DeviceInfo
    return DeviceInfo(index=0, name=name, vendor_id=vendor, device_id=1, driver_version=1,
                      api_version=(1, 3, 0), device_type=device_type,
                      features=frozenset({"float64", "int64"}), subgroup_size=32,
                      max_workgroup_size=(1024, 1024, 64), max_workgroup_invocations=1024,
                      max_workgroup_count=(65535,) * 3, max_shared_memory=49152,
                      max_push_constants=256, max_storage_buffers=64)


def llvm_text(text):
    """The module LLVM reads from ``text``, as LLVM prints it."""
    import llvmlite.binding as llvm
    # A fresh context each: a shared one renames the second copy of a named type.
    return str(llvm.parse_assembly(text, context=llvm.create_context()))


def assert_round_trip(text):
    """Printing the IR model of ``text`` gives the module LLVM reads from it."""
    assert llvm_text(str(_PARSE(text))) == llvm_text(text)


def checking_round_trips(parse, seen=None):
    """``parse`` (ir.parse), checking that every text it reads round-trips
    (:func:`assert_round_trip`) and, given a list ``seen``, recording it there."""
    def checked(text):
        assert_round_trip(text)
        if seen is not None:
            seen.append(text)
        return parse(text)
    return checked
