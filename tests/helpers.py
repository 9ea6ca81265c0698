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


def assert_round_trip(text, parse=None):
    """Printing the IR model of ``text`` (:mod:`numba_vulkan.llvmir.ir`) gives
    the module LLVM reads from ``text``. ``parse`` is the model's parser, for
    a caller that has replaced ``ir.parse`` with one that calls this."""
    import llvmlite.binding as llvm
    from numba_vulkan.llvmir import ir

    def read(text):
        # A fresh context each: a shared one renames the second copy of a named type.
        return str(llvm.parse_assembly(text, context=llvm.create_context()))
    assert read(str((parse or ir.parse)(text))) == read(text)


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
    from numba_vulkan.runtime.device import DeviceInfo
    return DeviceInfo(index=0, name=name, vendor_id=vendor, device_id=1, driver_version=1,
                      api_version=(1, 3, 0), device_type=device_type,
                      features=frozenset({"float64", "int64"}), subgroup_size=32,
                      max_workgroup_size=(1024, 1024, 64), max_workgroup_invocations=1024,
                      max_workgroup_count=(65535,) * 3, max_shared_memory=49152,
                      max_push_constants=256, max_storage_buffers=64)
