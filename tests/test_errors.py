"""Bad input gets a clear error, and failures of tools leave the process alive."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.codegen import backend
from numba_vulkan.errors import ToolError


@nv.jit
def copy(src, dst):
    i = nv.global_id(0)
    if i < src.shape[0]:
        dst[i] = src[i]


def test_wrong_argument_type_names_parameter():
    with pytest.raises(TypeError, match="parameter 'dst'"):
        copy.forall(4)(np.zeros(4), "not an array")


def test_wrong_argument_count():
    with pytest.raises(TypeError, match="takes 2 arguments"):
        copy.forall(4)(np.zeros(4))


def test_unsupported_construct_names_source_line():
    @nv.jit
    def uses_dict(x):
        d = {"a": object()}
        x[0] = 1

    with pytest.raises(nv.CompilerError, match="uses_dict") as info:
        uses_dict.forall(1)(np.zeros(1))
    assert "test_errors.py" in str(info.value)


def test_kernel_returning_value_is_rejected():
    @nv.jit
    def returns(x):
        return x[0]

    with pytest.raises(nv.CompilerError, match="must not return a value"):
        returns.forall(1)(np.zeros(1))


def test_calling_kernel_directly_explains_launch():
    with pytest.raises(nv.LaunchError, match=r"copy\[groups, threads\]"):
        copy(np.zeros(1), np.zeros(1))


def test_bad_launch_configuration():
    with pytest.raises(nv.LaunchError, match="threads"):
        copy[1, 0](np.zeros(1), np.zeros(1))
    with pytest.raises(nv.LaunchError, match="exceeds"):
        copy[1, (2048, 1, 1)](np.zeros(1), np.zeros(1))


def test_unknown_option():
    with pytest.raises(TypeError, match="unknown nv.jit option"):
        nv.jit(fast=True)


# IR that makes LLVM's SPIR-V backend abort (byte offsets into a float buffer).
_CRASHING_IR = textwrap.dedent("""
    @n = private unnamed_addr constant [2 x i8] c"a\\00"
    declare target("spirv.VulkanBuffer", [0 x float], 12, 1) @llvm.spv.resource.handlefrombinding.tspirv.VulkanBuffer_a0f32_12_1t(i32, i32, i32, i32, ptr)
    declare ptr addrspace(11) @llvm.spv.resource.getpointer.p11.tspirv.VulkanBuffer_a0f32_12_1t(target("spirv.VulkanBuffer", [0 x float], 12, 1), i32)
    define void @main() "hlsl.shader"="compute" "hlsl.numthreads"="1,1,1" {
      %h = call target("spirv.VulkanBuffer", [0 x float], 12, 1) @llvm.spv.resource.handlefrombinding.tspirv.VulkanBuffer_a0f32_12_1t(i32 0, i32 0, i32 1, i32 0, ptr @n)
      %b = call ptr addrspace(11) @llvm.spv.resource.getpointer.p11.tspirv.VulkanBuffer_a0f32_12_1t(target("spirv.VulkanBuffer", [0 x float], 12, 1) %h, i32 0)
      %g = addrspacecast ptr addrspace(11) %b to ptr
      %p = getelementptr i8, ptr %g, i64 2
      %v = load float, ptr %p
      store float %v, ptr %g
      ret void
    }
""")


def test_backend_crash_raises_and_interpreter_survives():
    with pytest.raises(ToolError) as info:
        backend.emit(_CRASHING_IR, "spirv1.5-unknown-vulkan1.2-compute")
    message = str(info.value)
    assert "LLVM SPIR-V backend failed" in message
    assert "To reproduce:" in message and "numba_vulkan.codegen.backend" in message
    # The child died, this process did not: the next compile works.
    x = np.arange(8, dtype=np.float64)
    y = np.zeros(8)
    copy.forall(8)(x, y)
    np.testing.assert_array_equal(x, y)


def test_import_opens_no_vulkan_library():
    code = textwrap.dedent("""
        import sys
        import numba_vulkan
        loaded = open('/proc/self/maps').read()
        assert 'libvulkan' not in loaded, 'libvulkan was loaded'
        assert 'vulkan' not in sys.modules, 'the vulkan package was imported'
        numba_vulkan.list_devices()
        assert 'libvulkan' in open('/proc/self/maps').read()
        print('ok')
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_info_command_lists_devices():
    result = subprocess.run([sys.executable, "-m", "numba_vulkan", "info"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "[0]" in result.stdout and "float64:" in result.stdout


def test_missing_driver_says_what_to_install(tmp_path):
    code = "import numba_vulkan as nv; nv.list_devices()"
    env = dict(__import__("os").environ, VK_ICD_FILENAMES=str(tmp_path / "none.json"),
               VK_DRIVER_FILES=str(tmp_path / "none.json"))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env)
    assert result.returncode != 0
    assert "DriverError" in result.stderr
    assert "apt-get install libvulkan1 mesa-vulkan-drivers" in result.stderr
