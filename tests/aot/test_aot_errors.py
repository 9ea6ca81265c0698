"""Errors that kernels report, from shipped AOT directories and stored kernels.

A kernel with error checks (``boundscheck``, ``error_model="python"``) that
raises, and a kernel of a loop-limit profile that reaches the limit, give
the same exception from an AOT directory (in strict mode: nothing is
compiled) as from the JIT. What an index or a ``functions/`` entry says
about them is checked before use: a damaged or crafted table is refused.
One project of two kernels is built once for the module.
"""

import hashlib
import importlib.util
import json
import os
import re
import shutil

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.base import config
from numba_vulkan.base import files
from numba_vulkan import store as kernelcache
from numba_vulkan.store import entry as store_entry
from numba_vulkan.store import lookup as store_lookup
from numba_vulkan.aot.build import builder as build
from numba_vulkan.aot.build import manifest as manifests
from numba_vulkan.aot.build import remote
from numba_vulkan.aot.loader import index, lookup
from numba_vulkan.spirv.compiled import check_errors
from numba_vulkan.api.dispatcher import VulkanDispatcher
from numba_vulkan.runtime.device import current_device
from tests.helpers import run_python

KERNELS = '''
import numba_vulkan as nv


@nv.jit(boundscheck=True)
def gather(x, idx, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        if idx[i] < -1:
            raise ValueError("an index below -1")
        out[i] = x[idx[i]]


@nv.jit
def spin(out, n):
    s = 0
    for k in range(n):
        s = (s * 31 + k) & 0xFFFFFF
    out[0] = s
'''

MANIFEST = '''
version: 1
output: aot
profiles:
  - name: full
  - name: lavapipe
    loop_limit: 65535
kernels:
  - function: errkern:gather
    signatures: ["void(uint8[::1], int32[::1], uint8[::1])"]
    threads: [[64]]
    profiles: [full]
  - function: errkern:spin
    signatures: ["void(int64[::1], int64)"]
    threads: [[1]]
    profiles: [lavapipe]
'''

GATHER = ("uint8[1d,C]", "int32[1d,C]", "uint8[1d,C]")
SPIN = ("int64[1d,C]", "int64")
X = np.arange(10, dtype=np.uint8) * 3

pytestmark = pytest.mark.filterwarnings("ignore::numba_vulkan.base.errors.AOTWarning")


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("aot-errors") / "project"
    root.mkdir()
    (root / "errkern.py").write_text(KERNELS)
    (root / "kernels.yaml").write_text(MANIFEST)
    run_python("-m", "numba_vulkan.aot", "build", "kernels.yaml", "-j", "2", "--quiet",
               cwd=root, path=[root])
    return root


@pytest.fixture(scope="module")
def module(project):
    spec = importlib.util.spec_from_file_location("errkern_copy", project / "errkern.py")
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


@pytest.fixture(scope="module")
def jit(module):
    """The kernels compiled by the JIT (no AOT directory searched)."""
    saved = {name: os.environ.pop(name, None)
             for name in ("NUMBA_VULKAN_AOT_PATH", "NUMBA_VULKAN_AOT_STRICT")}
    kernels = {name: VulkanDispatcher(getattr(module, name).py_func,
                                      getattr(module, name).options)
               for name in ("gather", "spin")}
    kernels["gather"].compile(GATHER, threads=64)
    kernels["spin"].compile(SPIN, threads=1)
    os.environ.update({k: v for k, v in saved.items() if v is not None})
    return kernels


@pytest.fixture
def strict(monkeypatch):
    """Search only ``path`` from now on, in strict mode."""
    monkeypatch.setattr(lookup, "_warned", set())

    def use(path):
        monkeypatch.setenv("NUMBA_VULKAN_AOT_PATH", str(path))
        monkeypatch.setenv("NUMBA_VULKAN_AOT_STRICT", "1")
    return use


def _entries(directory):
    return json.loads((directory / index.INDEX).read_text())["entries"]


def _entry(entries, kernel):
    return next(e for e in entries if e["kernel"] == f"errkern:{kernel}")


def _error(launch):
    with pytest.raises(Exception) as caught:
        launch()
    return type(caught.value), str(caught.value)


def _gather(kernel, idx):
    out = np.zeros(len(idx), np.uint8)
    return lambda: kernel[1, 64](X, np.array(idx, np.int32), out)


@pytest.mark.parametrize("idx, kind, message", [
    ([1, 2, 3, 40], IndexError, r"^index is out of bounds \(in kernel gather, invocation "
                                r"\(3, 0, 0\)\)$"),
    ([1, -5, 2, 3], ValueError, r"^an index below -1 \(in kernel gather, invocation "
                                r"\(1, 0, 0\), .*errkern\.py:10\)$"),
])
def test_a_shipped_kernel_raises_what_the_jit_raises(project, module, jit, strict, idx, kind,
                                                     message):
    want = _error(_gather(jit["gather"], idx))
    assert want[0] is kind and re.match(message, want[1]), want
    strict(project / "aot")
    shipped = VulkanDispatcher(module.gather.py_func, module.gather.options)
    hits = nv.aot.stats()["hits"]
    assert _error(_gather(shipped, idx)) == want
    assert nv.aot.stats()["hits"] == hits + 1
    (compiled,) = shipped._compiled.values()
    assert "aot" in compiled.metadata
    # A launch without errors after one with: the status was reset.
    out = np.zeros(3, np.uint8)
    shipped[1, 64](X, np.array([0, 9, -1], np.int32), out)
    np.testing.assert_array_equal(out, X[[0, 9, -1]])


def test_a_shipped_loop_limit_entry_reports_the_limit_as_the_jit_does(project, module, jit,
                                                                      strict):
    if not current_device().target.loop_limit:
        pytest.skip("the device has no loop limit")
    out = np.zeros(1, np.int64)
    want = _error(lambda: jit["spin"][1, 1](out, 3_000_000))
    assert want[0] is nv.LaunchError and "hit the device's loop limit" in want[1]
    strict(project / "aot")
    shipped = VulkanDispatcher(module.spin.py_func, module.spin.options)
    assert _error(lambda: shipped[1, 1](out, 3_000_000)) == want
    (compiled,) = shipped._compiled.values()
    assert compiled.metadata["aot"]["profile"] == "lavapipe"
    shipped[1, 1](out, 1000)
    s = 0
    for k in range(1000):
        s = (s * 31 + k) & 0xFFFFFF
    assert out[0] == s


def test_the_index_keeps_the_tables_without_build_paths(project):
    text = (project / "aot" / index.INDEX).read_text()
    assert str(project) not in text
    entries = _entries(project / "aot")
    gather, spin = _entry(entries, "gather"), _entry(entries, "spin")
    raised = {d["type"]: d for d in gather["exceptions"].values()}
    assert set(raised) == {"IndexError", "ValueError"}
    assert raised["ValueError"]["file"] == "errkern.py"
    assert raised["ValueError"]["line"] == 10
    assert "loop_limit" not in gather and "exceptions" not in spin
    assert spin["loop_limit"] == 65535
    # uint8 arrays: 8-bit storage, which the index names as a device feature.
    assert "StorageBuffer8BitAccess" in gather["capabilities"]
    assert {"int8", "storage8"} <= set(gather["features"])


def test_error_codes_do_not_depend_on_the_checkout(tmp_path):
    """The same source in two folders: the same codes, so the same module."""
    compiled = []
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "errkern.py").write_text(KERNELS)
        spec = importlib.util.spec_from_file_location(f"errkern_{folder}",
                                                      tmp_path / folder / "errkern.py")
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        compiled.append(VulkanDispatcher(loaded.gather.py_func, loaded.gather.options)
                        .compile(GATHER, threads=64))
    a, b = compiled
    assert a.metadata["exceptions"].keys() == b.metadata["exceptions"].keys()
    assert a.spirv == b.spirv
    files_named = {d["file"] for d in b.metadata["exceptions"].values()} - {None}
    assert files_named == {str(tmp_path / "b" / "errkern.py")}


def _first(entry):
    return next(iter(entry["exceptions"].values()))


def _rename(entry, code):
    entry["exceptions"][code] = entry["exceptions"].pop(next(iter(entry["exceptions"])))


TABLE_LIES = {
    "table a list": ("gather", lambda e: e.update(exceptions=[])),
    "table a string": ("gather", lambda e: e.update(exceptions="IndexError")),
    "description a string": ("gather", lambda e: e["exceptions"].update(
        {k: "boom" for k in e["exceptions"]})),
    "code zero": ("gather", lambda e: _rename(e, "0")),
    "code of the loop limit": ("gather", lambda e: _rename(e, "2")),
    "code not a number": ("gather", lambda e: _rename(e, "x17")),
    "code with a leading zero": ("gather", lambda e: _rename(e, "01234")),
    "code past 32 bits": ("gather", lambda e: _rename(e, str(2 ** 32))),
    "type empty": ("gather", lambda e: _first(e).update(type="")),
    "type with blanks": ("gather", lambda e: _first(e).update(type="Index Error\n")),
    "type a number": ("gather", lambda e: _first(e).update(type=7)),
    "message huge": ("gather", lambda e: _first(e).update(message="m" * 100_000)),
    "message a list": ("gather", lambda e: _first(e).update(message=["m"])),
    "file a number": ("gather", lambda e: _first(e).update(file=3)),
    "line text": ("gather", lambda e: _first(e).update(line="9")),
    "line true": ("gather", lambda e: _first(e).update(line=True)),
    "line negative": ("gather", lambda e: _first(e).update(line=-1)),
    "field missing": ("gather", lambda e: _first(e).pop("function")),
    "field added": ("gather", lambda e: _first(e).update(extra=1)),
    "too many raise sites": ("gather", lambda e: e.update(exceptions={
        str(1024 + k): _first(e) for k in range(5000)})),
    "loop limit on a target without": ("gather", lambda e: e.update(loop_limit=65535)),
    "loop limit not the target's": ("spin", lambda e: e.update(loop_limit=1000)),
    "loop limit text": ("spin", lambda e: e.update(loop_limit="65535")),
    "loop limit zero": ("spin", lambda e: e.update(loop_limit=0)),
}


@pytest.mark.parametrize("lie", sorted(TABLE_LIES))
def test_a_tampered_error_table_is_refused(project, module, strict, tmp_path, lie):
    directory = tmp_path / "aot"
    shutil.copytree(project / "aot", directory)
    data = json.loads((directory / index.INDEX).read_text())
    kernel, change = TABLE_LIES[lie]
    entry = _entry(data["entries"], kernel)
    change(entry)
    (directory / index.INDEX).write_bytes(index.dumps(data))
    strict(directory)
    dispatcher = VulkanDispatcher(getattr(module, kernel).py_func,
                                  getattr(module, kernel).options)
    sig, threads = (GATHER, (64, 1, 1)) if kernel == "gather" else (SPIN, (1, 1, 1))
    with pytest.raises(nv.AOTError, match="is damaged"):
        lookup.find(dispatcher, sig, threads, index.target_of(entry))
    assert build.verify(str(directory))[1]


def test_a_module_from_the_remote_tier_keeps_its_tables_and_they_are_checked(
        project, monkeypatch):
    """What an AOT build takes from the server (``aot`` tier) with the error
    table and loop limit it was stored with, checked as a built module is."""
    monkeypatch.syspath_prepend(str(project))
    tasks, _ = manifests.resolve(manifests.load(str(project / "kernels.yaml")))
    entries = _entries(project / "aot")
    served = {}

    def get(section, name):
        return store_entry.encode(section, name, served[name])

    monkeypatch.delenv("NUMBA_VULKAN_CACHE", raising=False)
    monkeypatch.setattr(config, "remote_cache", lambda: "redis://127.0.0.1:1/0")
    monkeypatch.setattr(store_lookup.REMOTE, "get", get)
    # The team key's check is test_trust.py's; here the server is taken as authenticated.
    monkeypatch.setattr(store_lookup.REMOTE, "usable", lambda: True)
    for task in tasks:
        name = hashlib.sha256(task.kernel.encode()).hexdigest()
        entry = _entry(entries, task.kernel.partition(":")[2])
        meta = {k: entry[k] for k in ("capabilities", "params", "push_size", "abi_version",
                                      "exceptions", "loop_limit") if k in entry}
        data = (project / "aot" / entry["spirv"]).read_bytes()
        served[name] = {"spirv": data, "meta": meta}
        done = {}
        assert remote._from_remote([(task, name)], done) == []
        assert done[task][1] == meta
        lie = json.loads(json.dumps(meta))
        if "exceptions" in lie:
            _first(lie).update(line="9")
        else:
            lie["loop_limit"] = 7
        served[name] = {"spirv": data, "meta": lie}
        assert remote._from_remote([(task, name)], {}) == [(task, name)]


def test_an_exception_class_defined_in_a_function_passes_the_check(jit):
    """Its type is ``module.function.<locals>.Class``: a class name, not damage."""
    compiled = jit["gather"].compile(GATHER, threads=64)
    metadata = json.loads(json.dumps(compiled.metadata))
    next(iter(metadata["exceptions"].values()))["type"] = "app.make.<locals>.Oops"
    check_errors(compiled.params, metadata, compiled.target)


def test_a_stored_kernel_keeps_its_error_table_and_a_crafted_one_is_a_miss(jit, cache_dir):
    compiled = jit["gather"].compile(GATHER, threads=64)
    name = "ab" * 32
    good = {"spirv": compiled.spirv, "llvm_ir": compiled.llvm_ir,
            "kernel": compiled.to_metadata(), "validated": True}
    args = (name, compiled.signature, compiled.local_size, compiled.target, "gather")
    kernelcache.store_kernel(name, good)
    assert kernelcache.load_compiled(*args).metadata["exceptions"] == \
        compiled.metadata["exceptions"]
    lies = [lambda m: m.update(exceptions={"0": {}}),
            lambda m: next(iter(m["exceptions"].values())).update(line="9"),
            lambda m: m.update(exceptions=["IndexError"]),
            lambda m: m.update(loop_limit=7)]
    for lie in lies:
        metadata = json.loads(json.dumps(compiled.to_metadata()))
        lie(metadata["metadata"])
        kernelcache.store_kernel(name, dict(good, kernel=metadata))
        assert kernelcache.load_compiled(*args) is None


def test_workers_take_runs_of_one_kernel_and_signature_in_order():
    # A run shares Numba's result of its first module; about three per worker.
    from types import SimpleNamespace
    full, narrow = SimpleNamespace(name="full"), SimpleNamespace(name="narrow")

    def task(kernel, signature, threads, profile=full):
        return SimpleNamespace(kernel=kernel, signature=signature, threads=threads,
                               options=(), profile=profile, shared_bytes=0)
    tasks = ([task("m:a", ("f8",), t) for t in range(7)] + [task("m:a", ("f8",), 0, narrow)]
             + [task("m:b", ("f4",), t) for t in range(4)])
    chunks = build._chunks([(t, None) for t in tasks], 2)
    assert [t for chunk in chunks for t in chunk] == tasks
    assert [len(chunk) for chunk in chunks] == [2, 2, 2, 1, 1, 2, 2]
    assert all(len({build._group(t) for t in chunk}) == 1 for chunk in chunks)
    assert [len(c) for c in build._chunks([(t, None) for t in tasks], 16)] == [1] * len(tasks)
