"""benchmarks/bench_glsl.py: the committed GLSL modules of each kernel (the
matrix product, spmv, saxpy) are what its .comp compiles to, and each
computes its kernel's result through the runtime's Pipeline (the GPU
machine runs them without glslang)."""

import filecmp
import shutil

import numpy as np
import pytest


def test_committed_spirv_is_current(tmp_path):
    from benchmarks import bench_glsl
    glslang = shutil.which("glslangValidator")
    if glslang is None:
        pytest.skip("glslangValidator is not installed")
    with open(bench_glsl.VERSION_FILE) as f:
        if f.read().strip() != bench_glsl.glslang_version(glslang):
            pytest.skip("another glslang version than the one that built the .spv files")
    bench_glsl.build(glslang, str(tmp_path))
    stale = [f"{k}_{v}" for k, kernel in bench_glsl.KERNELS.items() for v in kernel.variants
             if not filecmp.cmp(bench_glsl.spv_path(v, kernel=k),
                                bench_glsl.spv_path(v, str(tmp_path), k), shallow=False)]
    assert not stale, f"rebuild with bench_glsl.py --rebuild: {stale}"


def test_every_variant_computes_the_product():
    import numba_vulkan as nv
    from numba_vulkan.base import abi
    from numba_vulkan.runtime.device import current_device
    from benchmarks import backends as bk
    from benchmarks import bench_glsl, suite
    backend = bk.VulkanBackend()
    bench = suite.by_name()["matmul"]
    # 48 is not a multiple of 16: the last tile's bounds tests matter.
    size = 48
    host = bench.inputs(size, np.random.default_rng(7))
    arrays = {name: nv.to_device(value) for name, value in host.items()}
    groups, _ = bench.grid(size)
    params, push_size = abi.layout(bench_glsl.ARGUMENTS)
    for variant in bench_glsl.VARIANTS:
        with open(bench_glsl.spv_path(variant), "rb") as f:
            module = bench_glsl.Module(current_device(), f.read(), params, push_size, variant)
        bench_glsl.prepare_module(backend, module, bench, host, arrays, groups)
        # prepare_module checks sampled rows; here every element.
        expected = host["a"].astype(np.float64) @ host["b"].astype(np.float64)
        np.testing.assert_allclose(arrays["c"].copy_to_host(), expected, rtol=1e-5,
                                   err_msg=variant)


def _on_device_at(value, offset):
    """``value`` on the device as a view that starts ``offset`` elements
    into its buffer, so that a module that drops the interface's offsets
    fails."""
    import numba_vulkan as nv
    padded = np.concatenate([np.full(offset, -7, value.dtype), value])
    return nv.to_device(padded)[offset:]


def _check_variants(name, size, offset):
    """Every GLSL variant of kernel ``name`` gives suite.py's result on
    arrays ``offset`` elements into their buffers."""
    from numba_vulkan.base import abi
    from numba_vulkan.runtime.device import current_device
    from benchmarks import backends as bk
    from benchmarks import bench_glsl, suite
    backend = bk.VulkanBackend()
    bench = suite.by_name()[name]
    kernel = bench_glsl.KERNELS[name]
    host = bench.inputs(size, np.random.default_rng(11))
    arrays = {k: _on_device_at(v, offset) for k, v in host.items()
              if isinstance(v, np.ndarray)}
    params, push_size = abi.layout(kernel.arguments)
    for variant, (macros, _) in kernel.variants.items():
        with open(bench_glsl.spv_path(variant, kernel=name), "rb") as f:
            module = bench_glsl.Module(current_device(), f.read(), params, push_size, variant)
        groups = bench_glsl.glsl_groups(bench, size, macros)
        try:
            bench_glsl.prepare_module(backend, module, bench, host, arrays, groups)
        except AssertionError as exc:
            raise AssertionError(f"{name} variant {variant}, offset {offset}: {exc}") from None


@pytest.mark.parametrize("offset", [0, 3])
def test_every_spmv_variant_computes_the_product(offset):
    # 300 rows: a partial last group; rows of 8 to 24 nonzeros leave every
    # remainder of the unrolled loops.
    _check_variants("spmv", 300, offset)


@pytest.mark.parametrize("offset", [0, 1, 4])
def test_every_saxpy_variant_computes_saxpy(offset):
    # 4099 elements: partial vectors and groups at the end; offset 1 takes
    # the vector variants' element-wise path, 4 their vector path off the
    # buffer's start.
    _check_variants("saxpy", 4099, offset)


def test_elements_per_invocation_set_the_glsl_grid():
    from benchmarks import bench_glsl, suite
    bench = suite.by_name()["saxpy"]
    for variant, expected in (("scalar", 17), ("vec4", 5), ("x4", 5), ("vec4_x4", 2)):
        macros = bench_glsl.SAXPY_VARIANTS[variant][0]
        assert bench_glsl.glsl_groups(bench, 4099, macros) == (expected,), variant
    assert bench_glsl.glsl_groups(suite.by_name()["matmul"], 48, ()) == (3, 3)


def test_driver_statistics_give_registers_and_write_representations(tmp_path, monkeypatch):
    """What bench_glsl.py takes from the driver, with executables.inspect
    answering as NVIDIA's driver names its statistics (lavapipe reports none)."""
    from numba_vulkan.base import abi
    from numba_vulkan.runtime import executables
    from benchmarks import bench_glsl
    asked = []

    def inspect(device, spirv, params, push_size, entry="main", name=None,
                representations=False):
        asked.append((name, representations))
        return [executables.Executable(
            "Compute Shader", "", ("compute",), 32,
            (executables.Statistic("Register Count", "", 40),),
            (executables.Representation("Assembly", "", "LDS.128 R4, [R2];\n"),))]

    monkeypatch.setattr(executables, "inspect", inspect)
    params, push_size = abi.layout(bench_glsl.ARGUMENTS)
    modules = {"glsl_vec4": (b"", params, push_size), "ours[or_to_add]": (b"", params, push_size)}
    stats = bench_glsl.driver_statistics(None, modules, str(tmp_path))
    assert asked == [("glsl_vec4", True), ("ours[or_to_add]", True)]
    assert stats["glsl_vec4"]["registers"] == 40
    assert stats["ours[or_to_add]"]["executables"][0]["statistics"] == {"Register Count": 40}
    # File names keep to plain characters (the GPU machine's tool drops others).
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "matmul_glsl_vec4.driver0.00-Assembly.txt", "matmul_ours_or_to_add_.driver0.00-Assembly.txt"]
    text = (tmp_path / "matmul_glsl_vec4.driver0.00-Assembly.txt").read_text()
    assert text.startswith("LDS.128")
