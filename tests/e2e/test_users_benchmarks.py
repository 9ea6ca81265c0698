"""benchmarks/users.py and mathops.py (issue 23): every kernel, written as a
numba.cuda user writes it, compiles through ``numba_vulkan.cuda`` and
computes NumPy's result at its tiny size, and run.py puts the families'
rows (name, family, device times, ratio) into its results."""

import numpy as np
import pytest

from benchmarks import mathops, users


@pytest.fixture(scope="module")
def backend():
    from benchmarks import backends
    return backends.VulkanBackend()


def _run(backend, bench):
    size = bench.sizes["tiny"]
    host = bench.inputs(size, np.random.default_rng(5))
    arrays = {name: backend.device_value(value) for name, value in host.items()}
    groups, threads = bench.grid(size)
    backend.launch(backend.make(bench), groups, threads,
                   [arrays[name] for name in bench.arguments()])
    backend.synchronize()
    bench.check(host, {name: backend.to_host(arrays[name]) for name in bench.outputs()})


@pytest.mark.parametrize("bench", users.BENCHMARKS, ids=lambda b: b.name)
def test_user_kernel_computes_numpys_result(backend, bench):
    _run(backend, bench)


@pytest.mark.parametrize("bench", mathops.BENCHMARKS, ids=lambda b: b.name)
def test_math_kernel_computes_numpys_result(backend, bench):
    _run(backend, bench)


def test_families_are_the_issues():
    assert len(users.BENCHMARKS) >= 15
    assert {b.family for b in users.BENCHMARKS} == {"users"}
    ops = {b.op for b in mathops.BENCHMARKS}
    assert ops == {"div", "sqrt", "exp", "log", "erf", "sin", "cos", "pow", "tanh", "atan2",
                   "idiv9"}
    assert len(mathops.BENCHMARKS) == 2 * (len(ops) - 1) + 1


def test_a_wrong_result_fails_the_check():
    bench = mathops.MathOp("exp", "float32")
    host = bench.inputs(64, np.random.default_rng(1))
    with pytest.raises(AssertionError):
        bench.check(host, {"out": np.zeros(64, np.float32)})


def test_run_writes_the_families_rows(tmp_path):
    from benchmarks import run
    assert run.main(["--family", "users,math", "--only", "gather,div_f32", "--sizes", "tiny",
                     "--backends", "numba_vulkan", "--no-cold", "--out", str(tmp_path),
                     "--label", "t"]) == 0
    import json
    results = json.loads((tmp_path / "t.json").read_text())
    rows = {row["name"]: row for row in results["rows"]}
    assert set(rows) == {"gather", "div_f32"}
    assert rows["gather"]["family"] == "users" and rows["div_f32"]["family"] == "math"
    assert rows["gather"]["numba_vulkan_s"] > 0
    # No numba-cuda here: no ratio to give.
    assert rows["gather"]["ratio"] is None
    assert results["benchmarks"]["gather"]["family"] == "users"
    table = run.report.markdown_table(results)
    assert "| gather |" in table and "| div_f32 |" in table
