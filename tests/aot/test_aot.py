"""AOT builds end to end: build, ship, look up without compiling, refuse what is stale or damaged.

One project (the repository's examples and manifest, plus a module of test
kernels) is built once per module in a temporary directory; the tests run
fresh processes on it, copy it elsewhere, rebuild it and tamper with copies
of its output.
"""

import hashlib
import importlib.util
import json
import os
import shutil
import struct
import sys
import warnings

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.aot.loader import index, lookup
from numba_vulkan.aot.__main__ import main
from numba_vulkan.base.errors import AOTWarning
from numba_vulkan.base.target import TargetDescription
from tests.helpers import ROOT, run_python

TEST_KERNELS = '''
import numba
import numpy as np
import numba_vulkan as nv

OFFSET = 0.5


@numba.njit
def twice(v):
    return v * 2


@nv.jit
def shift(x, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        out[i] = twice(x[i]) + OFFSET


@nv.jit
def fill(out, value):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = value + i


@nv.jit
def stencil(a, b, c, d, e, f, g, h, out, alpha, beta, bias):
    """Nine 2-d arrays and three scalars: more than 128 bytes of arguments."""
    i, j = nv.global_id(0), nv.global_id(1)
    if 0 < i < out.shape[0] - 1 and 0 < j < out.shape[1] - 1:
        s = a[i - 1, j] + b[i + 1, j] + c[i, j - 1] + d[i, j + 1] - 4.0 * e[i, j]
        out[i, j] = alpha * s + beta * (f[i, j] - g[i, j]) * h[i, j] + bias


@nv.jit
def reverse_block(x):
    """Each block reversed through dynamic shared memory, plus its length."""
    tile = nv.shared.array(0, "float32")
    t = nv.local_id(0)
    i = nv.global_id(0)
    tile[t] = x[i]
    nv.barrier()
    x[i] = tile[nv.local_size(0) - 1 - t] + len(tile)


def check():
    rng = np.random.default_rng(7)
    blocks = np.arange(64, dtype=np.float32)
    reverse_block[2, 32, 128](blocks)                  # 128 bytes: 32 float32
    want = np.arange(64, dtype=np.float32).reshape(2, 32)[:, ::-1].reshape(64) + 32
    assert np.array_equal(blocks, want), "reverse_block"
    x = rng.random(1000, dtype=np.float32)
    out = np.zeros_like(x)
    shift.forall(x.size)(x, out)                       # contiguous: uses the strided entry
    assert np.allclose(out, 2 * x + 0.5), "shift"
    base = rng.random(3000, dtype=np.float32)
    target = np.zeros(3000, np.float32)
    shift.forall(1000)(base[::3], target[1::3])        # strided views
    assert np.allclose(target[1::3], 2 * base[::3] + 0.5), "shift strided"
    assert not target[::3].any()
    values = np.zeros(300, np.int32)
    fill[(300 + 63) // 64, 64](values, np.int32(-7))
    assert np.array_equal(values, np.arange(300, dtype=np.int32) - 7), "fill"
    grids = [rng.random((20, 30), dtype=np.float32) for _ in range(8)]
    out = np.zeros((20, 30), np.float32)
    stencil[(3, 4), (8, 8)](*grids, out, np.float32(0.5), 0.25, 3)
    a, b, c, d, e, f, g, h = (x.astype(np.float64) for x in grids)
    want = np.zeros((20, 30))
    want[1:-1, 1:-1] = (0.5 * (a[:-2, 1:-1] + b[2:, 1:-1] + c[1:-1, :-2] + d[1:-1, 2:]
                               - 4.0 * e[1:-1, 1:-1])
                        + 0.25 * (f - g)[1:-1, 1:-1] * h[1:-1, 1:-1] + 3)
    assert np.allclose(out, want, rtol=1e-5, atol=1e-6), "stencil"
'''

EXTRA_ENTRIES = '''
  - function: aotkern:shift
    signatures: ["void(float32[:], float32[:])"]
  - function: aotkern:fill
    signatures: ["void(int32[::1], int32)"]
    threads: [[64]]
  - function: aotkern:stencil
    signatures: ["void(float32[:, ::1], float32[:, ::1], float32[:, ::1], float32[:, ::1], float32[:, ::1], float32[:, ::1], float32[:, ::1], float32[:, ::1], float32[:, ::1], float32, float64, int64)"]
    threads: [[8, 8]]
  - function: aotkern:reverse_block
    signatures: ["void(float32[::1])"]
    threads: [[32]]
    shared_bytes: [128]
'''

CHECK = '''
import json, sys
import numba_vulkan as nv
from examples import mandelbrot, saxpy
saxpy.main()
mandelbrot.main()
examples_only = [m for m in ("numba", "llvmlite") if m in sys.modules]
if "--all" in sys.argv:
    import aotkern
    aotkern.check()
loaded = [m for m in sys.modules if m.startswith(("numba_vulkan.compiler",
                                                  "numba_vulkan.codegen"))]
print(json.dumps({"stats": nv.aot.stats(), "loaded": loaded, "examples_only": examples_only}))
'''

N_ENTRIES = 7


#: A child's settings: not the AOT search path a test set in this process.
CHILD = {"NUMBA_VULKAN_AOT_PATH": None}
#: A child that runs the examples from the built directory alone.
STRICT = dict(CHILD, NUMBA_VULKAN_CACHE="0", NUMBA_VULKAN_AOT_STRICT="1",
              NUMBA_VULKAN_AOT_PATH="aot")


def tree(path):
    """Every file below ``path`` with its bytes, by relative name."""
    out = {}
    for folder, _, files in os.walk(path):
        for name in files:
            full = os.path.join(folder, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, path)] = f.read()
    return out


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The examples, the repository's manifest plus test kernels, built into aot/."""
    root = tmp_path_factory.mktemp("aot-project") / "project"
    shutil.copytree(os.path.join(ROOT, "examples"), root / "examples",
                    ignore=shutil.ignore_patterns("__pycache__", "app"))
    (root / "aotkern.py").write_text(TEST_KERNELS)
    (root / "check.py").write_text(CHECK)
    with open(os.path.join(ROOT, "kernels.yaml")) as f:
        manifest = f.read()
    (root / "kernels.yaml").write_text(manifest.rstrip("\n") + "\n" + EXTRA_ENTRIES)
    # No Vulkan driver: the build must not need a device.
    run_python("-m", "numba_vulkan.aot", "build", "kernels.yaml", "-j", "2", "--quiet", cwd=root,
               env=dict(CHILD, VK_ICD_FILENAMES="/nonexistent/icd.json",
                        VK_DRIVER_FILES="/nonexistent/icd.json"))
    return root


@pytest.fixture(scope="module")
def entries(project):
    with open(project / "aot" / index.INDEX, "rb") as f:
        return index.parse(f.read(), "aot")["entries"]


@pytest.fixture(scope="module")
def kernels(project):
    """The test kernels, imported in this process under a name of their own."""
    spec = importlib.util.spec_from_file_location("aotkern_test_copy", project / "aotkern.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def search(monkeypatch):
    """Set the AOT search path of this process for one test."""
    # Warnings come once per kernel and signature in a process: start afresh.
    monkeypatch.setattr(lookup, "_warned", set())

    def use(path, strict=False):
        monkeypatch.setenv("NUMBA_VULKAN_AOT_PATH", str(path))
        monkeypatch.setenv("NUMBA_VULKAN_AOT_STRICT", "1" if strict else "0")
    return use


def test_index_lists_each_entry_with_digest_and_requirements(project, entries):
    assert len(entries) == N_ENTRIES
    by_kernel = {e["kernel"] for e in entries}
    assert {"examples.saxpy:saxpy", "examples.mandelbrot:mandelbrot", "aotkern:shift",
            "aotkern:fill"} <= by_kernel
    for e in entries:
        with open(project / "aot" / e["spirv"], "rb") as f:
            data = f.read()
        assert hashlib.sha256(data).hexdigest() == e["sha256"] and len(data) == e["size"]
        assert e["vulkan"] == "1.2" and e["profile"] == "full"
        assert "Shader" in e["capabilities"]
        assert set(e["features"]) == set(index.features(e["capabilities"]))
    mandelbrot = next(e for e in entries if e["kernel"].endswith(":mandelbrot"))
    assert mandelbrot["threads"] == [16, 16, 1] and mandelbrot["options"] == {"fastmath": True}
    assert "float64" in mandelbrot["features"]
    fill = next(e for e in entries if e["kernel"] == "aotkern:fill")
    assert fill["signature"] == ["int32[1d,C]", "int32"] and fill["threads"] == [64, 1, 1]


def test_directory_is_data_without_paths_or_debug_names(project):
    files = tree(project / "aot")
    assert set(files) == {index.INDEX} | {f"spirv/{n}" for n in os.listdir(project / "aot/spirv")}
    for name, data in files.items():
        assert str(project).encode() not in data and ROOT.encode() not in data, name
        assert b"/tmp/" not in data and b"/home/" not in data, name
        if name.endswith(".spv"):
            words = struct.unpack(f"<{len(data) // 4}I", data)
            opcodes, i = set(), 5
            while i < len(words):
                opcodes.add(words[i] & 0xFFFF)
                i += words[i] >> 16
            # OpSource, OpString, OpName, OpMemberName, OpLine: none.
            assert not opcodes & {3, 5, 6, 7, 8}, name
    assert b"pickle" not in files[index.INDEX]


def test_fresh_process_runs_every_example_from_the_directory_only(project):
    result = run_python("check.py", "--all", cwd=project, env=STRICT)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    # No Numba typing or lowering and no LLVM ran: the compiler and codegen were
    # never imported, and the examples alone imported neither Numba nor llvmlite
    # (the test kernels import numba themselves, for their njit helper).
    assert report["loaded"] == []
    assert report["examples_only"] == []
    assert report["stats"]["hits"] == 7 and report["stats"]["misses"] == 0
    assert "results match NumPy" in result.stdout and "0 differ from NumPy" in result.stdout


@pytest.fixture(scope="module")
def relocated(project, tmp_path_factory):
    """The built project copied to another path, every file's mtime changed."""
    copy = tmp_path_factory.mktemp("elsewhere") / "deeper" / "copy"
    shutil.copytree(project, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for folder, _, files in os.walk(copy):
        for name in files:
            os.utime(os.path.join(folder, name), (1_000_000_000, 1_000_000_000))
    return copy


def test_relocated_project_with_new_mtimes_still_hits(relocated):
    result = run_python("check.py", "--all", cwd=relocated, env=STRICT)
    assert json.loads(result.stdout.strip().splitlines()[-1])["stats"]["hits"] == N_ENTRIES


def test_builds_from_two_paths_are_byte_identical(project, relocated):
    # Built back to back: the entries record the compiler's fingerprint, which
    # an edit to numba_vulkan between the two builds would change.
    for where in (project, relocated):
        run_python("-m", "numba_vulkan.aot", "build", "kernels.yaml", "-o", "rebuilt", "--quiet",
                   cwd=where, env=CHILD)
    rebuilt = tree(project / "rebuilt")
    assert len(rebuilt) == N_ENTRIES + 1 and tree(relocated / "rebuilt") == rebuilt
    # The fixture built aot/ with -j 2: workers change nothing either.
    assert tree(project / "aot") == rebuilt


def test_unchanged_build_reuses_and_a_change_rebuilds_only_its_kernel(relocated):
    run_python("-m", "numba_vulkan.aot", "build", "kernels.yaml", "--quiet", cwd=relocated,
                       env=CHILD)
    again = run_python("-m", "numba_vulkan.aot", "build", "kernels.yaml", "--json", cwd=relocated,
                       env=CHILD)
    summary = json.loads(again.stdout)
    assert (summary["built"], summary["reused"], summary["failed"]) == (0, N_ENTRIES, 0)
    source = (relocated / "aotkern.py").read_text()
    (relocated / "aotkern.py").write_text(source.replace("OFFSET = 0.5", "OFFSET = 0.25"))
    changed = run_python("-m", "numba_vulkan.aot", "build", "kernels.yaml", "--json", cwd=relocated,
                       env=CHILD)
    summary = json.loads(changed.stdout)
    assert (summary["built"], summary["reused"]) == (1, N_ENTRIES - 1)
    # What a benchmark reads of where the time went: the one compile, timed.
    timings = summary["timings"]
    [module] = timings["modules"]
    assert module["kernel"].startswith("aotkern:") and module["worker"] == 0
    assert 0 < module["cpu"] and 0 < module["seconds"] <= summary["seconds"]
    assert timings["before"] + module["seconds"] + timings["after"] <= summary["seconds"] + 1e-3
    assert timings["parent_cpu"] >= 0


def _variant(project, name, old, new):
    source = TEST_KERNELS.replace(old, new)
    assert source != TEST_KERNELS or old == new
    path = project / f"{name}.py"
    path.write_text(source)
    # Named as the built module, as an edited copy of it would be.
    spec = importlib.util.spec_from_file_location("aotkern", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name, old, new, hit", [
    ("same_code", "", "", True),
    ("changed_body", "+ OFFSET", "- OFFSET", False),
    ("changed_helper", "return v * 2", "return v * 3", False),
    ("changed_global", "OFFSET = 0.5", "OFFSET = 0.75", False),
])
def test_changed_code_is_a_miss_not_a_stale_hit(project, search, name, old, new, hit):
    module = _variant(project, f"aotkern_{name}", old, new)
    search(project / "aot")
    sig = ("float32[1d,A]", "float32[1d,A]")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = lookup.find(module.shift, sig, (256, 1, 1), TargetDescription())
    assert (found is not None) == hit
    if not hit:
        assert any("built from other code" in str(w.message) for w in caught)
        search(project / "aot", strict=True)
        with pytest.raises(nv.AOTError, match="NUMBA_VULKAN_AOT_STRICT"):
            lookup.find(module.shift, sig, (256, 1, 1), TargetDescription())


def test_contiguous_launch_uses_a_strided_entry_but_not_the_reverse(project, kernels, search):
    search(project / "aot")
    target = TargetDescription()
    found = lookup.find(kernels.shift, ("float32[1d,C]", "float32[1d,C]"), (256, 1, 1), target)
    assert found.signature == ("float32[1d,A]", "float32[1d,A]")
    assert found.llvm_ir == "" and found.spirv[:4] == b"\x03\x02\x23\x07"
    with pytest.warns(AOTWarning, match="signatures:"):
        assert lookup.find(kernels.fill, ("int32[1d,A]", "int32"), (64, 1, 1), target) is None


def test_other_threads_or_profile_is_a_miss_naming_the_manifest_lines(project, kernels, search):
    search(project / "aot")
    with pytest.warns(AOTWarning) as caught:
        assert lookup.find(kernels.fill, ("int32[1d,C]", "int32"), (128, 1, 1),
                           TargetDescription()) is None
    message = str(caught[0].message)
    assert "  - function: aotkern_test_copy:fill" in message
    assert 'signatures: ["void(int32[::1], int32)"]' in message and "threads: [[128]]" in message
    narrow = TargetDescription(float64=False, int64=False)
    with pytest.warns(AOTWarning, match="profile narrow"):
        assert lookup.find(kernels.fill, ("int32[1d,C]", "int32"), (64, 1, 1), narrow) is None
    # A Vulkan 1.3 device runs the modules built for 1.2 (1.2 is the oldest
    # Vulkan there is a target for).
    assert lookup.find(kernels.fill, ("int32[1d,C]", "int32"), (64, 1, 1),
                       TargetDescription(vulkan=(1, 3))) is not None


def test_dynamic_shared_memory_entries_serve_their_size_only(project, entries, kernels,
                                                            search):
    """A manifest's shared_bytes builds a variant per size; a launch with
    that many bytes of dynamic shared memory finds it, in strict mode too,
    and one with another size (or none) is a miss naming the lines to add."""
    entry, = (e for e in entries if e["kernel"] == "aotkern:reverse_block")
    assert entry["shared_bytes"] == 128
    assert all("shared_bytes" not in e for e in entries if e is not entry)
    search(project / "aot", strict=True)
    sig, threads = ("float32[1d,C]",), (32, 1, 1)
    found = lookup.find(kernels.reverse_block, sig, threads, TargetDescription(),
                        shared_bytes=128)
    assert found.metadata["shared_bytes"] == 128 and found.llvm_ir == ""
    x = np.arange(64, dtype=np.float32)
    kernels.reverse_block[2, 32, 128](x)
    np.testing.assert_array_equal(x, np.arange(64, dtype=np.float32).reshape(2, 32)[:, ::-1]
                                  .reshape(64) + 32)
    with pytest.raises(nv.AOTError) as raised:
        lookup.find(kernels.reverse_block, sig, threads, TargetDescription(), shared_bytes=64)
    message = str(raised.value)
    assert "64 bytes of dynamic shared memory" in message
    assert "it was built for 128 bytes of dynamic shared memory" in message
    assert "    shared_bytes: [64]" in message
    with pytest.raises(nv.AOTError, match="built for 128 bytes of dynamic shared memory"):
        lookup.find(kernels.reverse_block, sig, threads, TargetDescription())


def test_many_argument_entry_spills_past_128_bytes_and_runs_on_any_device(entries, kernels,
                                                                          search, project):
    entry = next(e for e in entries if e["kernel"] == "aotkern:stencil")
    spilled = [p["name"] for p in entry["params"] if p["spilled"]]
    assert entry["push_size"] <= 128 and spilled[-3:] == ["alpha", "beta", "bias"]
    assert entry["params"][-1]["kind"] == "args"
    sig, threads = tuple(entry["signature"]), (8, 8, 1)
    search(project / "aot", strict=True)
    for push in (128, 256):
        found = lookup.find(kernels.stencil, sig, threads, TargetDescription(max_push_constants=push))
        assert found.push_size == entry["push_size"] and found.params[-1].kind == "args"
    # An entry built for 256 bytes that needs more than 128 is no match for a
    # 128-byte device: the launch compiles instead (an error in strict mode).
    wide = dict(entry, push_size=220, target=TargetDescription(max_push_constants=256).key())
    assert lookup._usable(wide, sig, threads, TargetDescription(max_push_constants=256),
                          None) is not None
    assert lookup._usable(wide, sig, threads, TargetDescription(), None) is None


def test_entry_of_the_previous_abi_is_a_miss(project, kernels, search, tmp_path):
    """ABI 1 put every argument in the push constant block: its entries must
    not reach a runtime that reads some from the argument buffer."""
    copy = tmp_path / "old-abi"
    shutil.copytree(project / "aot", copy)
    data = json.loads((copy / index.INDEX).read_text())
    entry = next(e for e in data["entries"] if e["kernel"] == "aotkern:stencil")
    entry["abi_version"] = 1
    (copy / index.INDEX).write_text(json.dumps(data))
    sig = tuple(entry["signature"])
    search(copy)
    with pytest.warns(AOTWarning, match="not in the AOT directories"):
        assert lookup.find(kernels.stencil, sig, (8, 8, 1), TargetDescription()) is None
    search(copy, strict=True)
    with pytest.raises(nv.AOTError, match="NUMBA_VULKAN_AOT_STRICT"):
        lookup.find(kernels.stencil, sig, (8, 8, 1), TargetDescription())


def test_tampered_module_is_rejected(project, kernels, search, tmp_path, capsys):
    copy = tmp_path / "tampered"
    shutil.copytree(project / "aot", copy)
    entry = next(e for e in json.loads((copy / index.INDEX).read_text())["entries"]
                 if e["kernel"] == "aotkern:fill")
    module = copy / entry["spirv"]
    data = bytearray(module.read_bytes())
    data[-8] ^= 0x01
    module.write_bytes(bytes(data))
    search(copy)
    before = nv.aot.stats()["rejected"]
    with pytest.warns(AOTWarning, match="does not match its SHA-256"):
        assert lookup.find(kernels.fill, ("int32[1d,C]", "int32"), (64, 1, 1),
                           TargetDescription()) is None
    assert nv.aot.stats()["rejected"] == before + 1
    search(copy, strict=True)
    with pytest.raises(nv.AOTError, match="does not match its SHA-256"):
        lookup.find(kernels.fill, ("int32[1d,C]", "int32"), (64, 1, 1), TargetDescription())
    assert main(["verify", str(copy)]) == 1
    assert "does not match its SHA-256" in capsys.readouterr().err


@pytest.mark.parametrize("damage, message", [
    (lambda text: text[: len(text) // 2], "is damaged"),
    (lambda text: text.replace('"format": 1', '"format": 99'), "has format 99"),
    (lambda text: text.replace('"sha256"', '"sha257"', 1), "has no valid 'sha256'"),
    (lambda text: text.replace('"target": [\n', '"target": [[9, 9],\n', 1), "is damaged: target"),
    (lambda text: text.replace('"threads": [\n', '"threads": [0,\n', 1), "is damaged: threads"),
    (lambda text: text.replace('"int32[1d,C]"', '"int32[1d,X]"', 1), "is damaged: not a kernel"),
])
def test_damaged_index_is_never_used(project, kernels, search, tmp_path, capsys, damage,
                                     message):
    copy = tmp_path / "damaged"
    shutil.copytree(project / "aot", copy)
    (copy / index.INDEX).write_text(damage((copy / index.INDEX).read_text()))
    search(copy)
    with pytest.warns(AOTWarning, match=message):
        assert lookup.find(kernels.fill, ("int32[1d,C]", "int32"), (64, 1, 1),
                           TargetDescription()) is None
    assert main(["verify", str(copy)]) == 1
    assert message in capsys.readouterr().err


def test_verify_names_the_kernel_of_each_damaged_entry(project, tmp_path, capsys):
    copy = tmp_path / "crafted"
    shutil.copytree(project / "aot", copy)
    index_json = json.loads((copy / index.INDEX).read_text())
    entries = index_json["entries"]
    entries[0]["threads"] = [0, 1, 1]
    entries[-1]["sha256"] = 42
    (copy / index.INDEX).write_text(json.dumps(index_json))
    assert main(["verify", str(copy)]) == 1
    err = capsys.readouterr().err
    assert f"entry 0 (kernel {entries[0]['kernel']}) is damaged: threads" in err
    assert (f"entry {len(entries) - 1} (kernel {entries[-1]['kernel']}) has no valid "
            "'sha256'") in err
    assert f"2 problem(s) in {len(entries)} entries" in err


def test_verify_list_and_inspect(project, capsys):
    assert main(["verify", str(project / "aot")]) == 0
    assert f"{N_ENTRIES} entries" in capsys.readouterr().out
    assert main(["list", str(project / "aot")]) == 0
    listing = capsys.readouterr().out
    assert "aotkern:fill" in listing and "void(int32[::1], int32)" in listing
    assert "64x1x1" in listing
    assert main(["inspect", str(project / "aot"), "saxpy",
                 "--signature", "void(float32, float32[::1], float32[::1])"]) == 0
    text = capsys.readouterr().out
    assert "OpEntryPoint GLCompute" in text and "LocalSize 256 1 1" in text
    assert main(["inspect", str(project / "aot"), "saxpy", "--signature", "void()"]) == 2
    assert "has no entry for saxpy" in capsys.readouterr().err


def test_failing_build_keeps_the_previous_directory(project):
    before = tree(project / "aot")
    source = TEST_KERNELS + "\n\n@nv.jit\ndef broken(x):\n    return x[0]\n"
    (project / "aotkern_broken.py").write_text(source)
    manifest = (project / "kernels.yaml").read_text() + (
        "  - function: aotkern_broken:broken\n    signatures: ['void(float32[::1])']\n")
    (project / "kernels_broken.yaml").write_text(manifest)
    result = run_python("-m", "numba_vulkan.aot", "build", "kernels_broken.yaml", cwd=project,
                        env=CHILD, check=False)
    assert result.returncode == 1
    line = manifest.count("\n")
    assert f"kernels_broken.yaml:{line}: aotkern_broken:broken void(float32[::1])" in result.stderr
    assert "returns" in result.stderr and "output unchanged" in result.stderr
    # The summary counts what did compile or was reused, though nothing is written.
    assert f"reused {N_ENTRIES}, failed 1: output unchanged" in result.stderr
    assert tree(project / "aot") == before
    assert not [n for n in os.listdir(project) if n.startswith(".aot.")]


def test_the_summary_names_the_output_as_given(tmp_path, monkeypatch, capsys):
    from numba_vulkan.aot.__main__ import main
    from numba_vulkan.aot.build import builder
    output = str(tmp_path / "elsewhere" / "aot")
    done = builder.Result(output=output, built=3, reused=1, bytes=2048, seconds=0.5)
    monkeypatch.setattr(builder, "build", lambda *args: done)
    assert main(["build", "kernels.yaml", "-o", output]) == 0
    assert capsys.readouterr().out == (f"built 3, reused 1, failed 0: 2.0 KiB in {output} "
                                       f"(0.5 s)\n")


def test_record_writes_a_manifest_that_builds(project, tmp_path):
    program = ("import numpy as np, aotkern\n"
               "v = np.zeros(100, np.int32)\n"
               "aotkern.fill[2, 64](v, np.int32(1))\n"
               "aotkern.fill.forall(100)(v, np.int32(2))\n")
    manifest = tmp_path / "recorded.yaml"
    run_python("-m", "numba_vulkan.aot", "record", "-o", manifest, "--",
               sys.executable, "-c", program, cwd=project, env=CHILD)
    recorded = manifest.read_text()
    assert "aotkern:fill" in recorded and "void(int32[::1], int32)" in recorded
    assert "[64]" in recorded and "[256]" in recorded
    program2 = program.replace("np.int32)", "np.int32)[::2]").replace("100)(", "50)(")
    result = run_python("-m", "numba_vulkan.aot", "record", "-o", manifest, "--",
                        sys.executable, "-c", program2, cwd=project, env=CHILD)
    assert "1 new" in result.stdout
    assert "void(int32[:], int32)" in manifest.read_text()
    (tmp_path / "aotkern.py").write_text(TEST_KERNELS)
    built = run_python("-m", "numba_vulkan.aot", "build", manifest, "--json", cwd=tmp_path,
                       env=CHILD)
    assert json.loads(built.stdout)["built"] == 4


def test_register_a_directory_and_count_hits(project, kernels, monkeypatch):
    monkeypatch.delenv("NUMBA_VULKAN_AOT_PATH", raising=False)
    label = nv.aot.register(str(project / "aot"))
    assert nv.aot.register(project / "aot") == label       # once on the path
    try:
        hits = nv.aot.stats()["hits"]
        assert nv.aot.stats()["directories"].count(str(project / "aot")) == 1
        values = np.zeros(70, np.int32)
        kernels.fill[2, 64](values, np.int32(3))
        assert np.array_equal(values[:70], np.arange(70) + 3)
        assert nv.aot.stats()["hits"] == hits + 1
    finally:
        nv.aot.unregister(label)
    with pytest.raises(nv.AOTError, match="neither a directory nor an importable package"):
        nv.aot.register(str(project / "no-such-dir"))
