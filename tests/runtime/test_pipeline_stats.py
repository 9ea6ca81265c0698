"""What the driver compiled a kernel into (VK_KHR_pipeline_executable_properties).

Where the device has the extension (NVIDIA's driver, newer Mesa), the
statistics of a small kernel come back from the driver itself. Where it
lacks it (lavapipe of Mesa 22), it says so. Either way, a stand-in for the
extension's three functions, answering as a driver does, checks how the
runtime enumerates executables, statistics and internal representations,
and how numba.cuda's ``get_regs_per_thread`` and friends read them; and the
pipelines launches use are built without the capture flags.
"""

import numpy as np
import pytest

from numba_vulkan import cuda
from numba_vulkan.base.errors import NotReportedError
from numba_vulkan.runtime import executables, pipeline, vk
from numba_vulkan.runtime.device import current_device

SIGNATURE = "void(float32[::1], float32)"


def _add(x, a):
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] = x[i] * a + 1.0


@pytest.fixture(scope="module")
def kernel():
    """One kernel for the module, compiled once (for 64 threads)."""
    return cuda.jit(SIGNATURE)(_add)


def _run(kernel, n=200):
    x = np.arange(n, dtype=np.float32)
    d = cuda.to_device(x)
    kernel[(n + 63) // 64, 64](d, np.float32(3.0))
    np.testing.assert_array_equal(d.copy_to_host(), x * np.float32(3.0) + np.float32(1.0))


has_extension = pytest.mark.skipif(not current_device().pipeline_executables,
                                   reason="the device lacks VK_KHR_pipeline_executable_properties")
lacks_extension = pytest.mark.skipif(current_device().pipeline_executables,
                                     reason="the device has VK_KHR_pipeline_executable_properties")


@has_extension
def test_the_driver_reports_statistics_of_a_small_kernel(kernel):
    found = kernel.pipeline_statistics(signature=SIGNATURE, internal_representations=True)
    assert len(found) >= 1
    compute = [e for e in found if "compute" in e["stages"]]
    assert compute, found
    statistics = compute[0]["statistics"]
    assert statistics and set(statistics) == set(compute[0]["statistic_descriptions"])
    for name, value in statistics.items():
        assert isinstance(value, (int, float, bool)), (name, value)
    info = current_device().info
    assert 0 < compute[0]["subgroup_size"] <= 128
    for representation in compute[0]["internal_representations"]:
        assert representation["name"] and isinstance(representation["text"], str)
    try:
        registers = kernel.get_regs_per_thread()
    except NotReportedError as exc:
        assert info.name in str(exc)
    else:
        assert 1 <= registers <= 255
    _run(kernel)


@lacks_extension
def test_a_device_without_the_extension_says_so(kernel):
    name = current_device().info.name
    with pytest.raises(NotReportedError, match="VK_KHR_pipeline_executable_properties") as exc:
        kernel.pipeline_statistics(signature=SIGNATURE)
    assert name in str(exc.value)
    for method in (kernel.get_regs_per_thread, kernel.get_shared_mem_per_block,
                   kernel.get_local_mem_per_thread, kernel.get_max_threads_per_block):
        with pytest.raises(NotReportedError, match="does not report"):
            method()
    _run(kernel)


# A stand-in driver -------------------------------------------------------------

_STATISTICS = [("Register Count", "Registers per thread", "uint64", 40),
               ("Binary Size", "Bytes of machine code", "uint64", 1234),
               ("Spilled", "Whether registers spill", "bool32", 0),
               ("Occupancy", "A ratio", "float64", 0.625),
               ("Delta", "A signed count", "int64", -3)]
_ASSEMBLY = "MOV R1, c[0x0][0x28];\nEXIT;\n"
_BINARY = b"\x01\x00\xfe\x7f"


class _FakeDriver:
    """The extension's three functions as a driver answers them: the
    two-call enumerations, VK_INCOMPLETE-free, each struct's sType checked."""

    def __init__(self):
        self.ffi = vk.ffi()
        self.problems = []
        self.pipelines = []
        v = vk.module()
        self.v = v
        ffi = self.ffi
        self.functions = [
            ffi.callback("PFN_vkGetPipelineExecutablePropertiesKHR", self.properties),
            ffi.callback("PFN_vkGetPipelineExecutableStatisticsKHR", self.statistics),
            ffi.callback("PFN_vkGetPipelineExecutableInternalRepresentationsKHR",
                         self.representations)]

    def _expect(self, ok, what):
        if not ok:
            self.problems.append(what)

    def properties(self, device, info, count, out):
        self._expect(info.sType == self.v.VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, "info sType")
        self.pipelines.append(info.pipeline)
        if out == self.ffi.NULL:
            count[0] = 1
            return 0
        self._expect(count[0] == 1, "properties count")
        self._expect(out[0].sType == self.v.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR,
                     "properties sType")
        out[0].stages = self.v.VK_SHADER_STAGE_COMPUTE_BIT
        out[0].name = b"Compute Shader"
        out[0].description = b"The kernel"
        out[0].subgroupSize = 32
        return 0

    def statistics(self, device, which, count, out):
        self._expect(which.executableIndex == 0, "executable index")
        if out == self.ffi.NULL:
            count[0] = len(_STATISTICS)
            return 0
        self._expect(count[0] == len(_STATISTICS), "statistics count")
        v = self.v
        formats = {"bool32": v.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR,
                   "int64": v.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR,
                   "uint64": v.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR,
                   "float64": v.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR}
        fields = {"bool32": "b32", "int64": "i64", "uint64": "u64", "float64": "f64"}
        for k, (name, description, kind, value) in enumerate(_STATISTICS):
            self._expect(out[k].sType == v.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR,
                         "statistic sType")
            out[k].name = name.encode()
            out[k].description = description.encode()
            out[k].format = formats[kind]
            setattr(out[k].value, fields[kind], value)
        return 0

    def representations(self, device, which, count, out):
        ffi = self.ffi
        if out == ffi.NULL:
            count[0] = 2
            return 0
        self._expect(count[0] == 2, "representations count")
        data = [_ASSEMBLY.encode() + b"\0", _BINARY]
        kind = self.v.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR
        for k, (name, text) in enumerate([("Assembly", True), ("Binary", False)]):
            item = out[k]
            self._expect(item.sType == kind, "representation sType")
            item.name = name.encode()
            item.description = b"what the driver made"
            item.isText = text
            if item.pData == ffi.NULL:
                item.dataSize = len(data[k])
            else:
                self._expect(item.dataSize == len(data[k]), "representation size")
                ffi.memmove(item.pData, data[k], len(data[k]))
        return 0


@pytest.fixture
def fake_driver(monkeypatch):
    """The stand-in answering for the current device. The pipeline built for
    the question is built as the device allows: with the capture flags
    where the device has the extension, else without (lavapipe would be
    handed flags of an extension it did not enable). Every build's flags are
    recorded."""
    device = current_device()
    driver = _FakeDriver()
    driver.builds = []
    build = pipeline.Objects.build

    def recording(self, dev, spirv, bound, push_size, entry="main", cache=None, flags=0):
        driver.builds.append(flags)
        if not device.pipeline_executables:
            flags = 0
        return build(self, dev, spirv, bound, push_size, entry, cache, flags)

    monkeypatch.setattr(pipeline.Objects, "build", recording)
    monkeypatch.setattr(device, "pipeline_executables", True)
    monkeypatch.setattr(executables, "_functions", lambda dev: driver.functions)
    yield driver
    assert not driver.problems, driver.problems


def test_statistics_and_representations_through_the_extensions_calls(fake_driver):
    kernel = cuda.jit(_add)
    found = kernel.pipeline_statistics(signature=SIGNATURE, threads=32,
                                       internal_representations=True)
    assert found == [{
        "name": "Compute Shader", "description": "The kernel", "stages": ["compute"],
        "subgroup_size": 32,
        "statistics": {"Register Count": 40, "Binary Size": 1234, "Spilled": False,
                       "Occupancy": 0.625, "Delta": -3},
        "statistic_descriptions": {n: d for n, d, _, _ in _STATISTICS},
        "internal_representations": [
            {"name": "Assembly", "description": "what the driver made", "text": _ASSEMBLY},
            {"name": "Binary", "description": "what the driver made", "text": _BINARY.hex()}]}]
    assert all(p != vk.ffi().NULL for p in fake_driver.pipelines)
    v = vk.module()
    assert fake_driver.builds == [v.VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR
                                  | v.VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR]
    # Asked again without representations: the answer is kept, nothing is built.
    assert kernel.pipeline_statistics(signature=SIGNATURE, threads=32)[0]["statistics"] \
        == found[0]["statistics"]
    assert len(fake_driver.builds) == 1


def test_launches_build_their_pipelines_without_capture_flags(fake_driver):
    kernel = cuda.jit(_add)
    _run(kernel)
    assert fake_driver.builds == [0]
    found = kernel.pipeline_statistics(np.zeros(4, np.float32), np.float32(1.0))
    assert found[0]["statistics"]["Register Count"] == 40
    assert fake_driver.builds == [0, vk.module().VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR]
    # The launch after the question reuses its pipeline, and computes what it did.
    _run(kernel)
    assert len(fake_driver.builds) == 2


def test_cuda_methods_read_the_drivers_statistics(fake_driver):
    kernel = cuda.jit(SIGNATURE)(_add)
    assert kernel.get_regs_per_thread() == 40
    assert kernel.get_regs_per_thread(SIGNATURE) == 40
    for method in (kernel.get_shared_mem_per_block, kernel.get_local_mem_per_thread,
                   kernel.get_max_threads_per_block):
        with pytest.raises(NotReportedError, match="'Register Count', 'Binary Size'"):
            method()
    unspecialized = cuda.jit(_add)
    assert unspecialized.get_regs_per_thread() == {}
    _run(unspecialized)
    assert unspecialized.get_regs_per_thread() == {("float32[1d,C]", "float32"): 40}


def _executable(subgroup, **statistics):
    return executables.Executable(
        "cs", "", ("compute",), subgroup,
        tuple(executables.Statistic(n.replace("_", " "), "", v) for n, v in statistics.items()))


def test_each_drivers_names_give_the_quantities():
    nvidia = [_executable(32, Register_Count=72, Binary_Size=4096)]
    assert executables.quantity(nvidia, "registers") == 72
    radv = [_executable(64, SGPRs=30, VGPRs=24, LDS_size=2048, Scratch_size=512)]
    assert executables.quantity(radv, "registers") == 24
    assert executables.quantity(radv, "shared_memory") == 2048
    assert executables.quantity(radv, "local_memory") == 8      # bytes per subgroup / 64
    anv = [_executable(16, Workgroup_Memory_Size=1024)]
    assert executables.quantity(anv, "shared_memory") == 1024
    with pytest.raises(NotReportedError, match="does not report registers per invocation of k"
                                               ".*it reports 'Workgroup Memory Size'"):
        executables.quantity(anv, "registers", kernel="k")
    flag = [_executable(32, Register_Count=True)]
    with pytest.raises(NotReportedError):
        executables.quantity(flag, "registers")


def test_the_benchmark_script_writes_the_drivers_account(fake_driver, tmp_path, monkeypatch):
    """benchmarks/bench_pipeline_stats.py on one kernel and one variant: the
    statistics into its JSON, each representation and the SPIR-V into files."""
    import json
    from benchmarks import bench_pipeline_stats
    monkeypatch.setenv("NUMBA_VULKAN_CACHE", "0")
    bench_pipeline_stats.main(["--only", "saxpy", "--variants", "contract",
                               "--out", str(tmp_path)])
    results = json.loads((tmp_path / "pipeline_stats.json").read_text())
    row = results["kernels"]["saxpy"]
    for variant in ("base", "contract"):
        entry = row[variant]
        assert entry["status"] == "ok" and entry["threads"] == [256]
        executable, = entry["executables"]
        assert executable["statistics"]["Register Count"] == 40
        assembly, binary = executable["internal_representations"]
        assert (tmp_path / assembly["text"]).read_text() == _ASSEMBLY
        assert (tmp_path / binary["text"]).read_text() == _BINARY.hex()
        assert "OpEntryPoint GLCompute" in (tmp_path / "saxpy" / variant
                                            / "kernel.spvasm").read_text()
    # contract drops NoContraction: the two modules differ where it matters.
    base, contract = ((tmp_path / "saxpy" / v / "kernel.spvasm").read_text()
                      for v in ("base", "contract"))
    assert "NoContraction" in base and "NoContraction" not in contract
