"""The compiler's table of stages: one order for the JIT and the AOT build,
dumps by stage name, and every failure a CompilerError naming the stage."""

import os
import re

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.base.request import KernelRequest
from numba_vulkan.compiler import stages
from tests.helpers import ROOT, assert_valid_spirv, run_python

SIG = "void(float32[::1], float32[::1])"
DOCS = os.path.join(ROOT, "docs")


@nv.jit
def scale(x, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        total = np.float32(0)
        for k in range(i % 4):
            total += x[k]
        out[i] = 2 * x[i] + total


@nv.jit
def add_and_max(x, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        nv.atomic.add(out, 0, x[i])
        nv.atomic.max(out, 1, x[i])


with open(__file__) as _source:
    DEF_LINE = next(k for k, line in enumerate(_source, 1) if line.startswith("def scale("))


def expected_scale(x):
    return np.array([2 * x[i] + x[:i % 4].sum(dtype=np.float32) for i in range(x.size)],
                    np.float32)


@pytest.fixture
def uncached(monkeypatch):
    """Every compile runs every stage: nothing comes from a kernel cache."""
    monkeypatch.setenv("NUMBA_VULKAN_CACHE", "0")


@pytest.fixture
def record(monkeypatch):
    """The names of the stages run, in order, by every compile in the test."""
    ran = []

    def recorded(stage):
        def run(job):
            ran.append(stage.name)
            return stage.run(job)
        return stage._replace(run=run)

    monkeypatch.setattr(stages, "STAGES", tuple(recorded(s) for s in stages.STAGES))
    return ran


@pytest.fixture
def typings(monkeypatch):
    """The argument types of every Numba typing from here on (compile_kernel calls)."""
    from numba_vulkan.frontend import compile as compiler
    seen = []
    real = compiler.compile_kernel

    def counted(*args, **kwargs):
        seen.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(compiler, "compile_kernel", counted)
    return seen


def test_a_kernel_launched_with_another_workgroup_size_is_not_typed_again(uncached, typings,
                                                                         rng):
    kernel = nv.jit(scale.py_func)
    x = rng.random(100).astype(np.float32)
    for threads in (64, 32, 128):
        out = np.zeros_like(x)
        kernel[-(-x.size // threads), threads](x, out)
        np.testing.assert_allclose(out, expected_scale(x), rtol=1e-6)
    assert len(typings) == 1
    kernel[4, 32](x.astype(np.float64), np.zeros(100))
    assert len(typings) == 2


def test_design_doc_lists_exactly_the_stages():
    with open(os.path.join(DOCS, "design.md")) as f:
        text = f.read()
    section = text.split("## Compile stages", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([^`]+)` \|", section, re.M)
    assert listed == stages.names()
    assert len(set(listed)) == len(listed)


def test_jit_and_aot_build_run_the_same_table(uncached, record, rng):
    from numba_vulkan.aot.build import worker as build
    x = rng.random(100).astype(np.float32)
    out = np.zeros_like(x)
    nv.jit(scale.py_func).forall(x.size)(x, out)
    np.testing.assert_allclose(out, expected_scale(x), rtol=1e-6)
    jit_ran = list(record)
    assert jit_ran == stages.names()
    record.clear()
    target = nv.TargetDescription()
    binary, meta = build._compile(__name__, "scale", ("float32[1d,C]", "float32[1d,C]"),
                                  (64, 1, 1), target.key(), {}, "test")
    assert binary is not None, meta
    assert record == jit_ran


def test_jit_and_aot_build_make_the_same_bytes(uncached):
    # Numba's per-process names (debug instructions) differ between two
    # compiles in one process: the table drops them for both.
    from numba_vulkan.aot.build import worker as build
    target = nv.TargetDescription()
    jit = nv.jit(scale.py_func).compile(SIG, target=target)
    binary, meta = build._compile(__name__, "scale", jit.signature, jit.local_size,
                                  target.key(), {}, "test")
    assert binary is not None, meta
    assert binary == jit.spirv
    assert meta["capabilities"] == jit.capabilities


def test_a_compile_request_is_frozen_and_keys_a_dict():
    request = KernelRequest(scale.py_func, ["float32[1d,C]"] * 2, [64, 1, 1],
                                   nv.TargetDescription(), {"fastmath": {"contract"}})
    same = KernelRequest(scale.py_func, ("float32[1d,C]",) * 2, (64, 1, 1),
                                nv.TargetDescription(), {"fastmath": frozenset({"contract"})})
    assert {request: 1}[same] == 1
    assert request.name == "scale" and request.options.fastmath_flags == {"contract"}
    with pytest.raises(AttributeError):
        request.threads = (32, 1, 1)


def test_the_options_fastmath_is_the_compilations(uncached, monkeypatch):
    # Where the options say it, the flags are not read back out of the IR.
    from numba_vulkan.base.jitoptions import FAST_MATH_FLAGS
    from numba_vulkan.codegen import exact
    read = exact.fast_math_flags
    monkeypatch.setattr(exact, "fast_math_flags", lambda module: pytest.fail("read the IR"))
    sig, target = ("float32[1d,C]",) * 2, nv.TargetDescription()
    fast = stages.generate(stages.lower(KernelRequest(scale.py_func, sig, (64, 1, 1),
                                                             target, {"fastmath": True})))
    assert fast.fastmath == FAST_MATH_FLAGS
    assert "SignedZeroInfNanPreserve" not in stages.artifact(fast).capabilities
    monkeypatch.setattr(exact, "fast_math_flags", read)
    exact_ = stages.compile(KernelRequest(scale.py_func, sig, (64, 1, 1), target))
    assert "SignedZeroInfNanPreserve" in exact_.capabilities


def test_typed_results_serve_other_workgroup_sizes_only(uncached, typings):
    # The AOT build types a kernel and signature once for all its workgroup sizes.
    target = nv.TargetDescription()
    sig = ("float32[1d,C]", "float32[1d,C]")
    typed = {}
    def request(threads, sig=sig, target=target):
        return KernelRequest(scale.py_func, sig, (threads, 1, 1), target)

    shared = [stages.compile(request(t), typed=typed) for t in (64, 128)]
    assert len(typings) == 1
    # Another signature or target feature is typed afresh.
    stages.compile(request(64, ("float32[1d,A]", "float32[1d,A]")), typed=typed)
    other = target.with_features(float32_atomic_add=not target.float32_atomic_add)
    stages.compile(request(64, target=other), typed=typed)
    assert len(typings) == 3
    fresh = [stages.compile(request(t)) for t in (64, 128)]
    assert len(typings) == 5
    assert shared[0].spirv != shared[1].spirv
    assert [c.spirv for c in shared] == [c.spirv for c in fresh]


def test_a_kernels_tier_hit_runs_only_numba(record, cache_dir):
    first = nv.jit(scale.py_func).compile(SIG)
    record.clear()
    second = nv.jit(scale.py_func).compile(SIG)
    assert record == ["numba"]
    assert second.spirv == first.spirv and second.llvm_ir == first.llvm_ir


def test_every_stage_dumps_its_result_by_name(uncached, tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_VULKAN_DUMP", str(tmp_path))
    monkeypatch.setenv("NUMBA_VULKAN_DUMP_STAGES", "all")
    compiled = nv.jit(scale.py_func).compile(SIG)
    binaries = {"emit", "repair", "exact", "debuginfo", "validate"}
    for name in stages.names():
        ll, spv = tmp_path / f"scale.{name}.ll", tmp_path / f"scale.{name}.spv"
        if name in binaries:
            assert spv.read_bytes()[:4] == b"\x03\x02\x23\x07", name
        else:
            assert re.search(r"define void @\"?main\"?\(\)", ll.read_text()), name
    assert "llvm.spv.resource.getpointer" in (tmp_path / "scale.logical.ll").read_text()
    assert "llvm.spv.resource.getpointer" not in (tmp_path / "scale.optimize.ll").read_text()
    assert (tmp_path / "scale.legalize.ll").read_text() == compiled.llvm_ir
    assert (tmp_path / "scale.validate.spv").read_bytes() == compiled.spirv
    # Without a stage list: the IR handed to the backend and the module.
    assert (tmp_path / "scale.ll").read_text() == compiled.llvm_ir
    assert (tmp_path / "scale.spv").read_bytes() == compiled.spirv


def test_only_the_named_stages_dump(uncached, tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_VULKAN_DUMP", str(tmp_path))
    monkeypatch.setenv("NUMBA_VULKAN_DUMP_STAGES", "logical, structurize")
    nv.jit(scale.py_func).compile(SIG)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "scale.ll", "scale.logical.ll", "scale.spv", "scale.structurize.ll"]


def test_an_unknown_stage_name_lists_the_stages(uncached, tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_VULKAN_DUMP", str(tmp_path))
    monkeypatch.setenv("NUMBA_VULKAN_DUMP_STAGES", "logical,structurise")
    with pytest.raises(ValueError, match="structurise.*the stages are numba, link"):
        nv.jit(scale.py_func).compile(SIG)


def test_an_unexpected_exception_in_a_stage_is_a_compiler_error(uncached, monkeypatch):
    def broken(job):
        raise KeyError("nv.block.7")

    table = tuple(s._replace(run=broken) if s.name == "int32" else s for s in stages.STAGES)
    monkeypatch.setattr(stages, "STAGES", table)
    with pytest.raises(nv.CompilerError) as info:
        nv.jit(scale.py_func).compile(SIG)
    message = str(info.value)
    assert message.splitlines() == [
        f"cannot compile kernel scale: {__file__}:{DEF_LINE}: internal error in stage int32: "
        "KeyError: 'nv.block.7'",
        "    def scale(x, out):"]
    assert isinstance(info.value.__cause__, KeyError)
    assert info.value.stage == "int32" and info.value.kernel == "scale"


def test_a_pass_error_names_kernel_line_and_stage(uncached, monkeypatch):
    def unsupported(job):
        raise nv.UnsupportedError("a construct Vulkan cannot express")

    table = tuple(s._replace(run=unsupported) if s.name == "legalize" else s
                  for s in stages.STAGES)
    monkeypatch.setattr(stages, "STAGES", table)
    with pytest.raises(nv.UnsupportedError) as info:
        nv.jit(scale.py_func).compile(SIG)
    assert str(info.value) == (f"cannot compile kernel scale: {__file__}:{DEF_LINE}: stage "
                               "legalize: a construct Vulkan cannot express")
    assert info.value.stage == "legalize"


def test_a_backend_failure_is_a_compiler_error(uncached, monkeypatch):
    from numba_vulkan.base.errors import ToolError

    def crash(job):
        raise ToolError("LLVM SPIR-V backend", -6, "LLVM ERROR: a test's abort")

    table = tuple(s._replace(run=crash) if s.name == "emit" else s for s in stages.STAGES)
    monkeypatch.setattr(stages, "STAGES", table)
    with pytest.raises(nv.CompilerError, match=r"^cannot compile kernel scale: .*: stage emit: "
                                               r"LLVM SPIR-V backend failed") as info:
        nv.jit(scale.py_func).compile(SIG)
    assert "a test's abort" in str(info.value)
    assert isinstance(info.value.__cause__, ToolError)


def test_mixed_float_atomics_go_back_to_numba_without_native_adds(uncached, record):
    native = nv.TargetDescription(vulkan=(1, 3), float32_atomic_add=True)
    compiled = nv.jit(add_and_max.py_func).compile(SIG, target=native)
    names = stages.names()
    logical = names.index("logical")
    assert record == names[:logical + 1] + names
    assert "AtomicFloat32AddEXT" not in compiled.capabilities
    # The kernel is the one asked for, for the target asked for.
    assert compiled.target == native
    assert_valid_spirv(compiled)


def test_every_setting_config_reads_is_documented_and_every_documented_one_is_read():
    from numba_vulkan.base import config
    with open(config.__file__) as f:
        read = set(re.findall(r'"(NUMBA_VULKAN_[A-Z0-9_]+)"', f.read()))
    with open(os.path.join(DOCS, "settings.md")) as f:
        documented = set(re.findall(r"^\| `(NUMBA_VULKAN_[A-Z0-9_]+)` \|", f.read(), re.M))
    assert "NUMBA_VULKAN_DUMP_STAGES" in read
    assert read <= documented, sorted(read - documented)
    assert documented <= read, sorted(documented - read)


def test_a_first_launch_prepares_the_compiler_while_the_device_opens():
    script = (
        "import numpy as np, numba_vulkan as nv\n"
        "from numba_vulkan.compiler import stages\n"
        "from numba_vulkan.runtime import device\n"
        "@nv.jit\n"
        "def twice(x, y):\n"
        "    i = nv.global_id(0)\n"
        "    if i < x.shape[0]:\n"
        "        y[i] = 2 * x[i] + 1\n"
        "x = np.arange(64, dtype=np.float32)\n"
        "y = np.zeros_like(x)\n"
        "assert device.opened_device() is None and stages._preparing is None\n"
        "twice[1, 64](x, y)\n"
        "assert stages._preparing is not None and not stages._preparing.is_alive()\n"
        "assert (y == 2 * x + 1).all(), y\n"
        "print('ok')\n")
    result = run_python("-c", script, timeout=120, env={"NUMBA_VULKAN_CACHE": "0"})
    assert "ok" in result.stdout, result.stderr


def test_only_a_launch_certain_to_compile_prepares_the_compiler(monkeypatch, tmp_path):
    from numba_vulkan.aot.loader import lookup
    prepared = []
    monkeypatch.setattr(stages, "prepare_in_background", lambda: prepared.append(True))
    monkeypatch.delenv("NUMBA_VULKAN_CACHE", raising=False)
    nv.jit(scale.py_func)._open_device()
    assert prepared == [True]
    # The functions/ tier may hold the kernel: Numba may not be needed.
    nv.jit(cache=True)(scale.py_func)._open_device()
    assert prepared == [True]
    monkeypatch.setenv("NUMBA_VULKAN_CACHE", "0")
    nv.jit(cache=True)(scale.py_func)._open_device()
    assert prepared == [True, True]
    # So may an AOT directory.
    label = lookup.register(tmp_path)
    try:
        nv.jit(scale.py_func)._open_device()
    finally:
        lookup.unregister(label)
    assert prepared == [True, True]


def test_a_failed_preparation_fails_the_next_compile_once(uncached, monkeypatch):
    monkeypatch.setattr(stages, "_preparing", stages.threading.Thread(target=lambda: None))
    stages._preparing.start()
    monkeypatch.setattr(stages, "_prepare_errors", [ImportError("a test's broken install")])
    with pytest.raises(nv.CompilerError, match="stage numba: ImportError: a test's broken"):
        nv.jit(scale.py_func).compile(SIG)
    assert nv.jit(scale.py_func).compile(SIG).spirv


@pytest.mark.parametrize("setting, frozen", [("1", True), ("0", False)])
def test_the_compilers_set_up_takes_numbas_objects_out_of_garbage_collections(setting, frozen):
    script = ("import gc\n"
              "from numba_vulkan.frontend.compile import contexts\n"
              "assert gc.get_freeze_count() == 0\n"
              "contexts()\n"
              "print(gc.get_freeze_count())\n")
    result = run_python("-c", script, timeout=120, env={"NUMBA_VULKAN_FREEZE_IMPORTS": setting})
    count = int(result.stdout.split()[-1])
    # Numba's typing and target contexts alone are tens of thousands of objects.
    assert (count > 10000) if frozen else count == 0, count
