"""``benchmarks/merge.py`` joins the result files of runs of one device's
families into one, the later run winning a benchmark both have."""

import json

import pytest

from benchmarks import merge


def _run(command, device, rows, families):
    return {"command": command, "environment": {"device": device}, "families": families,
            "benchmarks": {name: {"ratio": ratio} for name, ratio in rows},
            "rows": [{"name": name, "ratio": ratio} for name, ratio in rows],
            "targets": [{"what": command}], "cold_compile": {}}


def test_families_are_joined_and_later_runs_win(tmp_path):
    paths = []
    for i, run in enumerate([_run("suite", "H200", [("saxpy", 0.9), ("nbody", 1.1)], ["suite"]),
                             _run("math", "H200", [("exp_f32", 1.2), ("nbody", 1.0)], ["math"])]):
        paths.append(tmp_path / f"{i}.json")
        paths[-1].write_text(json.dumps(run))
    merge.main([str(tmp_path / "out.json"), *map(str, paths)])
    out = json.loads((tmp_path / "out.json").read_text())
    assert {row["name"]: row["ratio"] for row in out["rows"]} == {
        "saxpy": 0.9, "nbody": 1.0, "exp_f32": 1.2}
    assert out["benchmarks"]["nbody"] == {"ratio": 1.0}
    assert out["families"] == ["suite", "math"] and out["command"] == "suite && math"
    assert [t["what"] for t in out["targets"]] == ["suite", "math"]


def test_runs_on_two_devices_are_refused(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_run("suite", "H200", [], ["suite"])))
    b.write_text(json.dumps(_run("math", "llvmpipe", [], ["math"])))
    with pytest.raises(SystemExit, match="different devices"):
        merge.main([str(tmp_path / "out.json"), str(a), str(b)])
