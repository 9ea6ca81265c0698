"""The functions a kernel calls to learn where it runs and to cooperate.

These are markers: the compiler replaces each call with the matching SPIR-V
built-in. Called from ordinary Python they raise, because there is no
workgroup to ask.
"""


def _device_only(name):
    def stub(*args, **kwargs):
        raise RuntimeError(f"numba_vulkan.{name}() can only be called inside a kernel")
    stub.__name__ = name
    stub.__qualname__ = name
    stub.__module__ = "numba_vulkan"
    return stub


global_id = _device_only("global_id")
global_id.__doc__ = """Index of this invocation in the whole launch along ``axis`` (0, 1 or 2)."""

local_id = _device_only("local_id")
local_id.__doc__ = """Index of this invocation inside its workgroup along ``axis``."""

group_id = _device_only("group_id")
group_id.__doc__ = """Index of this invocation's workgroup along ``axis``."""

local_size = _device_only("local_size")
local_size.__doc__ = """Number of invocations in a workgroup along ``axis``."""

num_groups = _device_only("num_groups")
num_groups.__doc__ = """Number of workgroups in the launch along ``axis``."""

global_size = _device_only("global_size")
global_size.__doc__ = """Number of invocations in the launch along ``axis``."""
