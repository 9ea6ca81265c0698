"""Bad input gets a clear error, and failures of tools leave the process alive."""

import os
import re
import textwrap
import time

import numpy as np
import pytest
from llvmlite import ir as llvm_ir
from numba.core import types
from numba.core.typing.templates import AbstractTemplate, signature

import numba_vulkan as nv
from numba_vulkan.codegen import backend
from numba_vulkan.frontend import stubs
from numba_vulkan.base.errors import ToolError
from tests.helpers import run_python


@nv.jit
def copy(src, dst):
    i = nv.global_id(0)
    if i < src.shape[0]:
        dst[i] = src[i]


def test_every_error_and_warning_class_is_public():
    # Users catch what the docs name (NotReportedError, AOTWarning) as nv.<name>.
    from numba_vulkan.base import errors
    defined = {name for name, value in vars(errors).items()
               if isinstance(value, type) and issubclass(value, (Exception, Warning))
               and value.__module__ == errors.__name__}
    assert {"NotReportedError", "AOTWarning", "LaunchError"} <= defined
    assert {name for name in defined if getattr(nv, name, None) is not getattr(errors, name)} \
        == set()
    assert defined <= set(nv.__all__)


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


_VALID_IR = 'define void @main() "hlsl.shader"="compute" "hlsl.numthreads"="1,1,1" {\n  ret void\n}\n'


def test_the_backend_child_loads_neither_numba_nor_the_package():
    # Its start-up is part of a cold first call: llvmlite alone, not Numba.
    code = ("import runpy, sys; runpy.run_path(sys.argv[1], run_name='child'); "
            "print(sorted(m for m in ('numba', 'numba_vulkan', 'numpy') if m in sys.modules))")
    child = backend.backend_child.__file__
    out = run_python("-c", code, child, cwd="/")
    assert out.stdout.strip() == "[]"
    # And it serves: a module compiled through it is a SPIR-V module.
    backend.shutdown()
    backend.start()
    assert backend.emit(_VALID_IR, "spirv1.5-unknown-vulkan1.2-compute")[:4] == b"\x03\x02\x23\x07"


def test_a_forked_process_does_not_share_the_backend_child():
    # An AOT build forks its workers from a process that may have compiled.
    triple = "spirv1.5-unknown-vulkan1.2-compute"
    backend.emit(_VALID_IR, triple)
    parent_child = backend._child
    pid = os.fork()
    if pid == 0:
        ok = backend._child is None and backend.emit(_VALID_IR, triple)[:4] == b"\x03\x02\x23\x07"
        os._exit(0 if ok and backend._child is not parent_child else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert backend._child is parent_child and backend._child.alive()
    assert backend.emit(_VALID_IR, triple)[:4] == b"\x03\x02\x23\x07"


def _serve_from_spare(spares, k, triple):
    """In a forked process: whether it serves from ``spares[k]``, through a
    crash of a module, and from a child of its own once that one is killed."""
    backend.adopt(spares, k)
    valid = b"\x03\x02\x23\x07"
    ok = backend._child is spares[k] and backend._child.adopted()
    ok = ok and backend.emit(_VALID_IR, triple)[:4] == valid
    try:
        # A crash is reported through an adopted child too, which serves on.
        backend.emit(_CRASHING_IR, triple)
        return False
    except ToolError as exc:
        ok = ok and "LLVM SPIR-V backend failed" in str(exc)
    ok = ok and backend.emit(_VALID_IR, triple)[:4] == valid and backend._child is spares[k]
    # One killed between modules is replaced by one of this process's own.
    os.kill(spares[k].process.pid, 9)
    for _ in range(500):
        if not backend._child.alive():
            break
        time.sleep(0.01)
    ok = ok and not backend._child.alive()
    ok = ok and backend.emit(_VALID_IR, triple)[:4] == valid and not backend._child.adopted()
    backend.shutdown()
    return ok


def test_forked_processes_serve_from_the_spare_backend_children_started_for_them():
    # aot build -j N starts its workers' backend children before forking them.
    triple = "spirv1.5-unknown-vulkan1.2-compute"
    spares = backend.spares(2)
    pids = []
    for k in range(2):
        pid = os.fork()
        if pid == 0:
            ok = False
            try:
                ok = _serve_from_spare(spares, k, triple)
            finally:
                os._exit(0 if ok else 1)
        pids.append(pid)
    # Each spare ends with the process it serves once this one lets go of it.
    backend.release(spares, wait=True)
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert all(not spare.alive() for spare in spares)


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
    result = run_python("-c", code)
    assert result.stdout.strip() == "ok"


def test_info_command_lists_devices():
    result = run_python("-m", "numba_vulkan", "info")
    assert "[0]" in result.stdout and "float64:" in result.stdout


def test_missing_driver_says_what_to_install(tmp_path):
    code = "import numba_vulkan as nv; nv.list_devices()"
    result = run_python("-c", code, check=False,
                        env={"VK_ICD_FILENAMES": tmp_path / "none.json",
                             "VK_DRIVER_FILES": tmp_path / "none.json"})
    assert result.returncode != 0
    assert "DriverError" in result.stderr
    assert "apt-get install mesa-vulkan-drivers" in result.stderr and "docs/install.md" in result.stderr


# Names and typing errors: one short message with kernel, line and reason ------


def _line_of(function, text):
    """The line number of the first line of ``function`` that holds ``text``."""
    import inspect
    lines, first = inspect.getsourcelines(function)
    return first + next(k for k, line in enumerate(lines) if text in line)


def _compile_error(function, sig="void(float32[::1])"):
    with pytest.raises(nv.CompilerError) as info:
        nv.jit(function).compile(sig)
    return info.value


def _grid_sync(out):
    g = nv.cg.this_grid()
    g.sync()
    out[0] = 1


def test_unknown_attribute_names_kernel_line_and_attribute():
    error = _compile_error(_grid_sync)
    message = str(error)
    line = _line_of(_grid_sync, "nv.cg.this_grid()")
    assert message.startswith(f"cannot compile kernel _grid_sync: {__file__}:{line}: "
                              "module numba_vulkan has no attribute 'cg'")
    assert "    g = nv.cg.this_grid()" in message
    assert "numba.cuda's cg has no numba_vulkan equivalent" in message
    assert "cooperative groups" in message
    assert len(message.splitlines()) == 3
    assert error.kernel == "_grid_sync"
    # Numba's traceback is not printed under ours.
    assert error.__cause__ is None and error.__suppress_context__


def _thread_index(out):
    out[nv.threadIdx.x] = 1


def _sync(out):
    nv.syncthreads()


def _syncwarp(out):
    nv.syncwarp()


def _no_such(out):
    out[0] = nv.foo


@pytest.mark.parametrize("function, text, attribute, hint", [
    (_thread_index, "nv.threadIdx.x", "numba_vulkan has no attribute 'threadIdx'",
     "numba.cuda's threadIdx is nv.local_id(axis) in numba_vulkan (threadIdx.x is "
     "nv.local_id(0))"),
    (_sync, "nv.syncthreads()", "numba_vulkan has no attribute 'syncthreads'",
     "numba.cuda's syncthreads is nv.barrier() in numba_vulkan"),
    (_syncwarp, "nv.syncwarp", "numba_vulkan has no attribute 'syncwarp'",
     "numba.cuda's syncwarp is nv.subgroup.barrier() in numba_vulkan"),
    (_no_such, "nv.foo", "numba_vulkan has no attribute 'foo'", None),
], ids=lambda v: v.__name__.strip("_") if callable(v) else None)
def test_numba_cuda_names_hint_at_ours(function, text, attribute, hint):
    message = str(_compile_error(function))
    assert f"{__file__}:{_line_of(function, text)}: module {attribute}" in message
    if hint is None:
        assert "numba.cuda" not in message and len(message.splitlines()) == 2
    else:
        assert hint in message


def _cuda_kernels():
    cuda = pytest.importorskip("numba.cuda")

    def grid(out):
        out[cuda.grid(1)] = 1

    def thread_index(out):
        out[cuda.threadIdx.x] = 1

    def sync(out):
        cuda.syncthreads()

    return [(grid, "cuda.grid(1)", "nv.global_id(0)"),
            (thread_index, "cuda.threadIdx.x", "nv.local_id(0)"),
            (sync, "cuda.syncthreads()", "nv.barrier()")]


def test_names_from_numba_cuda_itself_hint_at_ours():
    for function, text, hint in _cuda_kernels():
        message = str(_compile_error(function))
        assert f"{__file__}:{_line_of(function, text)}: " in message, message
        assert hint in message, message
        assert len(message.splitlines()) == 3, message


def _bad_add(out):
    out[0] = "a" + 1


def test_typing_error_is_short_with_line_and_numba_reason():
    error = _compile_error(_bad_add)
    message = str(error)
    line = _line_of(_bad_add, '"a" + 1')
    assert message.splitlines() == [
        f"cannot compile kernel _bad_add: {__file__}:{line}: No implementation of function "
        "Function(<built-in function add>) found for signature: "
        "add(Literal[str](a), Literal[int](1))",
        '    out[0] = "a" + 1']
    assert error.__cause__ is None


def _undefined(out):
    out[0] = undefined_name + 1  # noqa: F821


def test_undefined_global_names_its_line():
    message = str(_compile_error(_undefined))
    line = _line_of(_undefined, "undefined_name")
    assert f"{__file__}:{line}: NameError: name 'undefined_name' is not defined" in message


def test_error_in_a_called_function_names_that_functions_line():
    import numba

    @numba.njit
    def concatenate(v):
        return v + "x"

    def calls(out):
        out[0] = concatenate(out[0])

    message = str(_compile_error(calls))
    assert message.startswith("cannot compile kernel test_error_in_a_called_function_names_"
                              "that_functions_line.<locals>.calls: ")
    assert f"{__file__}:{_line_of(concatenate.py_func, 'v + ')}: No implementation" in message
    assert '    return v + "x"' in message


def test_a_signature_that_does_not_fit_is_a_compiler_error():
    with pytest.raises(nv.CompilerError, match=r"copy: .*test_errors.py:\d+: it takes 2 "
                                               r"arguments, 1 types were given"):
        nv.jit(copy.py_func).compile("void(float32[::1])")


def _builds_a_list(out):
    values = [1.0, 2.0]
    out[0] = values[1]


def test_a_construct_the_target_cannot_lower_names_its_line():
    with pytest.raises(nv.UnsupportedError) as info:
        nv.jit(_builds_a_list).compile("void(float32[::1])")
    message = str(info.value)
    line = _line_of(_builds_a_list, "values = [")
    assert message.startswith(f"cannot compile kernel _builds_a_list: {__file__}:{line}: "
                              "kernels cannot use this construct")
    assert "    values = [1.0, 2.0]" in message


def _undefined_device_call():
    """Stands for a function a lowering calls but nothing defines."""


class _UndefinedCallTemplate(AbstractTemplate):
    key = _undefined_device_call

    def generic(self, args, kws):
        return signature(types.int64)


def test_a_call_nothing_defines_is_a_compile_error_not_a_module():
    # The backend turns an undefined function into an import, which spirv-val
    # accepts and lavapipe crashes the process on: it must never reach a driver.
    stubs.typing_registry.register_global(_undefined_device_call,
                                          types.Function(_UndefinedCallTemplate))

    @stubs.lowering_registry.lower(_undefined_device_call)
    def lower(context, builder, sig, args):
        fn = llvm_ir.Function(builder.module, llvm_ir.FunctionType(llvm_ir.IntType(64), []),
                              "nv_test_nowhere_defined")
        return builder.call(fn, [])

    @nv.jit
    def calls_nowhere(out):
        out[nv.global_id(0)] = _undefined_device_call()

    with pytest.raises(nv.CompilerError, match="nv_test_nowhere_defined") as info:
        calls_nowhere.compile("void(int64[:])")
    assert info.value.kernel and "calls_nowhere" in str(info.value)


def _row_max(a, out):
    out[0] = a[0].max()


def test_a_method_failing_inside_numba_names_the_kernels_line():
    # Numba's array max takes an element through a method that allocates,
    # which kernels cannot: the innermost location is Numba's own file.
    message = str(_compile_error(_row_max, "void(float64[:, ::1], float64[::1])"))
    line = _line_of(_row_max, "a[0].max()")
    first, source = message.splitlines()[:2]
    assert re.fullmatch(rf"cannot compile kernel _row_max: {re.escape(__file__)}:{line}: No "
                        r"implementation of function Function\(<function npy_max at \w+>\) "
                        r"found for signature: npy_max\(array\(float64, 1d, C\)\)", first), first
    assert source == "    out[0] = a[0].max()"


def _imports_inside(out):
    import math
    out[0] = math.pi


def test_an_import_inside_a_kernel_is_an_error_at_its_line_saying_what_to_do():
    with pytest.raises(nv.CompilerError) as caught:
        nv.jit(_imports_inside)[1, 1](np.zeros(1))
    text = str(caught.value)
    line = _imports_inside.__code__.co_firstlineno + 1
    assert f"test_errors.py:{line}: an import inside the kernel: import at the top" in text
    assert "    import math" in text and "internal error" not in text
