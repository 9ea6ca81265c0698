"""Fault injection: shipped AOT directories and caches that lie, block or break.

Every case ends in a correct result or our own clear error (an ``AOTError``
in strict mode, a warning and the JIT otherwise, a cache miss), never a
crash, a hang, unbounded memory or a wrong result. Directories are crafted
with their digests fixed up, so that only the checks behind the digest
(``numba_vulkan.spirv.modulecheck``) stand between them and the driver. Most cases
only look a kernel up; launches use one 64-thread kernel.
"""

import hashlib
import importlib.util
import json
import os
import shutil
import struct
import threading
import warnings

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.base import files
from numba_vulkan import store as kernelcache
from numba_vulkan.store import entry as entries
from numba_vulkan.store import lookup as store_lookup
from numba_vulkan.codegen import libclc
from numba_vulkan.spirv import modulecheck
from numba_vulkan.aot.build import builder as build
from numba_vulkan.aot.loader import index, lookup
from numba_vulkan.api.dispatcher import VulkanDispatcher
from numba_vulkan.base.errors import AOTWarning
from numba_vulkan.runtime import pipeline_cache
from numba_vulkan.runtime.device import current_device
from tests.helpers import run_python

KERNELS = '''
import numba_vulkan as nv


@nv.jit
def axpy(a, x, y):
    i = nv.global_id(0)
    if i < x.shape[0]:
        y[i] = a * x[i] + y[i]
'''

MANIFEST = '''
version: 1
output: aot
kernels:
  - function: trustkern:axpy
    signatures: ["void(float32, float32[:], float32[:])"]
    threads: [[64]]
'''

SIG = ("float32", "float32[1d,A]", "float32[1d,A]")
THREADS = (64, 1, 1)

# Rejections warn before they fall back or raise; the tests check the outcome.
pytestmark = pytest.mark.filterwarnings("ignore::numba_vulkan.base.errors.AOTWarning")


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """A project with one kernel, built into ``aot/``; returns the project folder."""
    root = tmp_path_factory.mktemp("trust") / "project"
    root.mkdir()
    (root / "trustkern.py").write_text(KERNELS)
    (root / "kernels.yaml").write_text(MANIFEST)
    run_python("-m", "numba_vulkan.aot", "build", "kernels.yaml", "--quiet", cwd=root,
               path=[root])
    return root


@pytest.fixture(scope="module")
def kernel_module(shipped):
    spec = importlib.util.spec_from_file_location("trustkern_copy", shipped / "trustkern.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def search(monkeypatch):
    monkeypatch.setattr(lookup, "_warned", set())

    def use(path, strict=True):
        monkeypatch.setenv("NUMBA_VULKAN_AOT_PATH", str(path))
        monkeypatch.setenv("NUMBA_VULKAN_AOT_STRICT", "1" if strict else "0")
    return use


def copy_of(shipped, tmp_path):
    target = tmp_path / "aot"
    shutil.copytree(shipped / "aot", target)
    return target


def read_index(directory):
    return json.loads((directory / index.INDEX).read_text())


def write_index(directory, data):
    (directory / index.INDEX).write_bytes(index.dumps(data))


def replace_module(directory, entry, binary):
    """Put ``binary`` in place of the entry's module, with the digests fixed up."""
    (directory / entry["spirv"]).unlink()
    sha = hashlib.sha256(binary).hexdigest()
    entry.update(sha256=sha, size=len(binary), spirv=index.module_path(sha))
    (directory / entry["spirv"]).write_bytes(binary)


def within(seconds, function):
    """Run ``function``; fail (instead of hanging the suite) if it blocks."""
    box = {}

    def target():
        try:
            box["value"] = function()
        except BaseException as exc:  # reported to the test below
            box["error"] = exc
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"blocked for more than {seconds} s"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def outcome(kernel_module, strict=True):
    """What a strict lookup of the shipped kernel gives: the kernel, or our error."""
    dispatcher = VulkanDispatcher(kernel_module.axpy.py_func)
    try:
        return lookup.find(dispatcher, SIG, THREADS, current_device().target)
    except nv.AOTError as exc:
        return exc


def run_axpy(dispatcher, rng):
    x = rng.random(64, dtype=np.float32)
    y = rng.random(64, dtype=np.float32)
    want = np.float32(3.0) * x + y
    dispatcher[1, 64](np.float32(3.0), x[::1], y)
    return y, want


# The shipped directory works --------------------------------------------------


def test_the_shipped_directory_hits_and_computes_right(shipped, kernel_module, search, rng):
    search(shipped / "aot")
    assert isinstance(outcome(kernel_module), nv.CompiledKernel)
    y, want = run_axpy(VulkanDispatcher(kernel_module.axpy.py_func), rng)
    np.testing.assert_array_equal(y, want)
    assert build.verify(str(shipped / "aot"))[1] == []


# Index entries that lie about a module whose digest matches ------------------------


def _params(entry):
    return entry["params"]


INDEX_LIES = {
    "params empty": lambda e: e.update(params=[]),
    "push size 4": lambda e: e.update(push_size=4),
    "push size negative": lambda e: e.update(push_size=-4),
    "push size string": lambda e: e.update(push_size="44"),
    "push size 2**70": lambda e: e.update(push_size=2 ** 70),
    "bindings reversed": lambda e: (_params(e)[1].update(binding=1),
                                    _params(e)[2].update(binding=0)),
    "parameter dropped": lambda e: e.update(params=_params(e)[:2]),
    "parameter added": lambda e: e.update(params=_params(e) + [dict(_params(e)[2], name="z")]),
    "binding string": lambda e: _params(e)[1].update(binding="0"),
    "binding negative": lambda e: _params(e)[1].update(binding=-3),
    "binding huge": lambda e: _params(e)[1].update(binding=2 ** 40),
    "unknown kind": lambda e: _params(e)[1].update(kind="tensor"),
    "storage object": lambda e: _params(e)[1].update(storage="object"),
    "storage float64": lambda e: _params(e)[2].update(storage="float64"),
    "dtype int32": lambda e: _params(e)[0].update(dtype="int32", storage="int32"),
    "offset moved": lambda e: _params(e)[0].update(offset=20),
    "ndim 2": lambda e: _params(e)[1].update(ndim=2),
    "layout C": lambda e: _params(e)[1].update(layout="C"),
    "extra field": lambda e: _params(e)[1].update(extra=1),
    "missing field": lambda e: _params(e)[1].pop("offset"),
    "param not an object": lambda e: e.update(params=[1, 2, 3]),
    "status buffer added": lambda e: e.update(params=_params(e) + [
        {"name": "__status", "kind": "status", "dtype": "uint32", "storage": "uint32",
         "ndim": 1, "layout": "C", "binding": 2, "offset": 0, "writable": True}]),
    "threads 256 for a 64 module": lambda e: e.update(threads=[256, 1, 1]),
    "threads 32": lambda e: e.update(threads=[32, 1, 1]),
    "capabilities dropped": lambda e: e.update(capabilities=["Shader"], features=[]),
    "features dropped": lambda e: e.update(features=[]),
    "vulkan mismatch": lambda e: e.update(vulkan="1.3"),
    "target vulkan 1.9": lambda e: e["target"].__setitem__(0, [1, 9]),
    "target string": lambda e: e.update(target="full"),
    "signature float64": lambda e: e.update(signature=["float64"] + e["signature"][1:]),
    "signature not text": lambda e: e.update(signature=[1, 2, 3]),
    "abi version 99": lambda e: e.update(abi_version=99),
}


@pytest.mark.parametrize("lie", sorted(INDEX_LIES))
def test_an_index_that_lies_is_refused_or_harmless(shipped, kernel_module, search, tmp_path,
                                                   lie, rng):
    directory = copy_of(shipped, tmp_path)
    data = read_index(directory)
    INDEX_LIES[lie](data["entries"][0])
    write_index(directory, data)
    search(directory)
    found = outcome(kernel_module)
    if isinstance(found, nv.CompiledKernel):
        # A harmless lie (a status buffer the module never writes): it must compute right.
        y, want = run_axpy(VulkanDispatcher(kernel_module.axpy.py_func), rng)
        np.testing.assert_array_equal(y, want)
        return
    assert isinstance(found, nv.AOTError), found
    assert build.verify(str(directory))[1]


# Modules that are not what their entry says (digests fixed up) -----------------------


def _set_word(index_, value):
    def edit(binary):
        words = list(struct.unpack(f"<{len(binary) // 4}I", binary))
        words[index_] = value
        return struct.pack(f"<{len(words)}I", *words)
    return edit


def _edit_instruction(opcode, change):
    """Apply ``change(words)`` to each instruction with this opcode."""
    def edit(binary):
        words = list(struct.unpack(f"<{len(binary) // 4}I", binary))
        i = 5
        while i < len(words):
            count = words[i] >> 16
            if words[i] & 0xFFFF == opcode:
                words[i:i + count] = change(words[i:i + count])
            i += count
        return struct.pack(f"<{len(words)}I", *words)
    return edit


def _with(position, value):
    def change(inst):
        inst = list(inst)
        inst[position] = value
        return inst
    return change


def _binding(old, new):
    def change(inst):
        if inst[2] == 33 and inst[3] == old:
            return inst[:3] + [new]
        return inst
    return change


MODULE_LIES = {
    "id bound 0xffffffff": _set_word(3, 0xFFFFFFFF),
    "id bound 0": _set_word(3, 0),
    "id bound past the module": _set_word(3, 1 << 20),
    "bad magic": _set_word(0, 0x07230204),
    "version 1.6 for Vulkan 1.2": _set_word(1, 0x00010600),
    "version 2.0": _set_word(1, 0x00020000),
    "version word garbage": _set_word(1, 0xDEADBEEF),
    "schema 1": _set_word(4, 1),
    "truncated": lambda b: b[:len(b) // 2 // 4 * 4],
    "one instruction too long": _set_word(5, 0xFFFF0011),
    "zero-length instruction": _set_word(5, 0x00000011),
    "odd size": lambda b: b + b"\0\0",
    "local size 256": _edit_instruction(16, lambda i: i[:3] + [256] + i[4:] if i[2] == 17 else i),
    "local size 32": _edit_instruction(16, lambda i: i[:3] + [32] + i[4:] if i[2] == 17 else i),
    "entry point renamed": _edit_instruction(
        15, lambda i: i[:3] + list(struct.unpack("<2I", b"mian\0\0\0\0")) + i[5:]),
    "vertex entry point": _edit_instruction(15, _with(1, 0)),
    "binding 1 moved to 7": _edit_instruction(71, _binding(1, 7)),
    "both buffers at binding 0": _edit_instruction(71, _binding(1, 0)),
    "descriptor set 1": _edit_instruction(71, lambda i: i[:3] + [1] if i[2] == 34 else i),
    "float buffers of 64 bits": _edit_instruction(22, _with(2, 64)),
    "unknown capability": _edit_instruction(17, lambda i: i if i[1] == 1 else [i[0], 4437]),
    "capability dropped": _edit_instruction(17, lambda i: i if i[1] == 1 else [i[0], 1]),
    "imports functions (Linkage)": _edit_instruction(17, lambda i: i if i[1] == 1 else [i[0], 5]),
    "workgroup size built-in": _edit_instruction(
        71, lambda i: i[:3] + [25] if i[2] == 11 else i),
    "storage class uniform": _edit_instruction(59, lambda i: i[:3] + [2] if i[3] == 12 else i),
    "random bytes": lambda b: b[:20] + np.random.default_rng(5).bytes(len(b) - 20),
    "empty": lambda b: b"",
}


@pytest.mark.parametrize("lie", sorted(MODULE_LIES))
def test_a_module_unlike_its_entry_never_reaches_the_driver(shipped, kernel_module, search,
                                                            tmp_path, lie):
    directory = copy_of(shipped, tmp_path)
    data = read_index(directory)
    entry = data["entries"][0]
    original = (directory / entry["spirv"]).read_bytes()
    damaged = MODULE_LIES[lie](original)
    assert damaged != original
    replace_module(directory, entry, damaged)
    write_index(directory, data)
    search(directory)
    found = outcome(kernel_module)
    assert isinstance(found, nv.AOTError), found
    assert "kernel trustkern:axpy" in str(found) or "trustkern" in str(found)
    assert build.verify(str(directory))[1]


def test_crashing_module_falls_back_in_a_fresh_process(shipped, tmp_path):
    """The module that crashed lavapipe (id bound 0xffffffff), launched for real."""
    directory = copy_of(shipped, tmp_path)
    data = read_index(directory)
    entry = data["entries"][0]
    replace_module(directory, entry, MODULE_LIES["id bound 0xffffffff"](
        (directory / entry["spirv"]).read_bytes()))
    write_index(directory, data)
    script = ("import numpy as np, warnings, trustkern\n"
              "x = np.arange(64, dtype=np.float32); y = np.ones(64, np.float32)\n"
              "with warnings.catch_warnings(record=True) as caught:\n"
              "    warnings.simplefilter('always')\n"
              "    trustkern.axpy[1, 64](np.float32(2), x[::1], y)\n"
              "assert np.array_equal(y, 2 * x + 1), y\n"
              "print([str(w.message) for w in caught])\n")
    env = {"NUMBA_VULKAN_AOT_PATH": directory}
    result = run_python("-c", script, env=env, path=[shipped], timeout=300)
    assert "id bound" in result.stdout
    strict = run_python("-c", script, env=dict(env, NUMBA_VULKAN_AOT_STRICT="1"),
                        path=[shipped], timeout=300, check=False)
    assert strict.returncode == 1 and "AOTError" in strict.stderr
    assert "id bound 4294967295" in strict.stderr


def test_a_rejected_entry_falls_back_to_a_correct_jit(shipped, kernel_module, search,
                                                      tmp_path, rng):
    directory = copy_of(shipped, tmp_path)
    data = read_index(directory)
    INDEX_LIES["bindings reversed"](data["entries"][0])
    write_index(directory, data)
    search(directory, strict=False)
    dispatcher = VulkanDispatcher(kernel_module.axpy.py_func)
    with pytest.warns(AOTWarning, match="the argument types give|not in the AOT"):
        y, want = run_axpy(dispatcher, rng)
    np.testing.assert_array_equal(y, want)


def test_spirv_val_verdicts_are_remembered(shipped, cache_dir, monkeypatch):
    module = next((shipped / "aot" / "spirv").iterdir()).read_bytes()
    monkeypatch.setattr(modulecheck, "_validated", set())
    assert modulecheck.validate_once(module, "vulkan1.2")
    markers = list((cache_dir / modulecheck.VALIDATED_DIR).iterdir())
    assert len(markers) == 1
    # A later process (a fresh in-memory set) runs no spirv-val.
    monkeypatch.setattr(modulecheck, "_validated", set())
    monkeypatch.setattr(modulecheck.subprocess, "run", None)
    assert modulecheck.validate_once(module, "vulkan1.2")
    with pytest.raises(TypeError):
        modulecheck.validate_once(module, "vulkan1.3")   # another verdict: runs spirv-val
    monkeypatch.undo()
    files.forget_cache_roots()


def test_invalid_module_with_a_sound_interface_is_refused_by_spirv_val():
    # A sound header and no entry point: spirv-val, not our checks, refuses it.
    module = struct.pack("<7I", 0x07230203, 0x00010500, 0, 1, 0, 0x00020011, 0xFFFF)
    with pytest.raises(ValueError, match="spirv-val rejects"):
        modulecheck.validate_once(module, "vulkan1.2")


# Indexes that are not JSON one can parse ------------------------------------------


INDEX_FILES = {
    "deeply nested lists": b"[" * 200_000 + b"]" * 200_000,
    "deeply nested objects": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "huge integer": b'{"format": 1, "entries": [], "n": ' + b"9" * 50_000 + b"}",
    "not utf-8": b'{"format": 1, "entries": ["\xff"]}',
    "entries not a list": b'{"format": 1, "entries": {}}',
    "entry not an object": b'{"format": 1, "entries": [7]}',
    "format 2": b'{"format": 2, "entries": []}',
    "empty": b"",
}


@pytest.mark.parametrize("case", sorted(INDEX_FILES))
def test_unparsable_index_is_our_error(shipped, kernel_module, search, tmp_path, case):
    directory = copy_of(shipped, tmp_path)
    (directory / index.INDEX).write_bytes(INDEX_FILES[case])
    search(directory)
    assert isinstance(outcome(kernel_module), nv.AOTError)
    assert build.verify(str(directory))[1]


# Files that are not regular files ---------------------------------------------------


def _fifo(path):
    path.unlink()
    os.mkfifo(path)


def _dev_zero(path):
    path.unlink()
    path.symlink_to("/dev/zero")


def _oversized(path):
    with open(path, "r+b") as f:
        f.truncate(index.INDEX_LIMIT + 1)


def _directory(path):
    path.unlink()
    path.mkdir()


def _outside(path):
    outside = path.parent.parent.parent / ("outside-" + path.name)
    shutil.copyfile(path, outside)
    path.unlink()
    path.symlink_to(outside)


FILE_KINDS = {"fifo": _fifo, "symlink to /dev/zero": _dev_zero, "oversized": _oversized,
              "directory": _directory, "symlink out of the directory": _outside}


@pytest.mark.parametrize("which", ["index", "module"])
@pytest.mark.parametrize("kind", sorted(FILE_KINDS))
def test_special_files_in_a_directory_are_refused_without_blocking(
        shipped, kernel_module, search, tmp_path, which, kind):
    directory = copy_of(shipped, tmp_path)
    entry = read_index(directory)["entries"][0]
    path = directory / (index.INDEX if which == "index" else entry["spirv"])
    if which == "index" and kind == "symlink out of the directory":
        pytest.skip("the index is found by its own path")
    FILE_KINDS[kind](path)
    search(directory)
    found = within(30, lambda: outcome(kernel_module))
    assert isinstance(found, nv.AOTError), found
    assert within(30, lambda: build.verify(str(directory))[1])


CACHE_KINDS = {"fifo": _fifo, "symlink to /dev/zero": _dev_zero, "directory": _directory}


@pytest.mark.parametrize("tier", entries.SECTIONS)
@pytest.mark.parametrize("kind", sorted(CACHE_KINDS) + ["oversized"])
def test_special_cache_entries_are_misses(cache_dir, tier, kind):
    name = "cd" * 32
    store_lookup.put(tier, name, {"spirv": b"\3\2\x23\7" + bytes(16), "n": 1})
    path = cache_dir / tier / (name + entries.SUFFIX)
    if kind == "oversized":
        with open(path, "r+b") as f:
            f.truncate(entries.MAX_BYTES + 1)
    else:
        CACHE_KINDS[kind](path)
    reader = kernelcache.load_kernel if tier == "functions" else kernelcache.load
    assert within(30, lambda: reader(name)) is None


@pytest.mark.parametrize("kind", sorted(CACHE_KINDS) + ["oversized"])
def test_special_pipeline_cache_files_are_discarded(cache_dir, kind):
    device = current_device()
    cache = pipeline_cache.for_device(device)
    path = cache_dir / "pipelines" / pipeline_cache.file_name(device.info)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"NVPC")
    if kind == "oversized":
        with open(path, "r+b") as f:
            f.truncate(pipeline_cache._LIMIT + 1)
    else:
        CACHE_KINDS[kind](path)
    fresh = within(30, lambda: pipeline_cache.PipelineCache(device, str(path)))
    assert fresh.handle is not None and cache is not None


@pytest.mark.parametrize("which", ["text", "record"])
@pytest.mark.parametrize("kind", sorted(CACHE_KINDS))
def test_special_prepared_libclc_files_are_prepared_again(tmp_path, which, kind):
    text, record = tmp_path / "prepared.ll", tmp_path / "prepared.json"
    text.write_text("; prepared")
    record.write_text(json.dumps({"format": libclc.FORMAT, "source": "x",
                                  "sha256": hashlib.sha256(b"; prepared").hexdigest()}))
    assert libclc._load("x", str(text), str(record)) == "; prepared"
    CACHE_KINDS[kind](text if which == "text" else record)
    assert within(30, lambda: libclc._load("x", str(text), str(record))) is None


# Cache entries whose checksums hold but whose kernel lies ---------------------------


def test_crafted_functions_entry_is_checked_like_a_shipped_module(cache_dir, kernel_module):
    compiled = VulkanDispatcher(kernel_module.axpy.py_func).compile(
        "void(float32, float32[:], float32[:])", threads=64)
    name = "ef" * 32
    good = {"spirv": compiled.spirv, "llvm_ir": compiled.llvm_ir,
            "kernel": compiled.to_metadata(), "validated": True}
    args = (name, compiled.signature, compiled.local_size, compiled.target, "axpy")
    kernelcache.store_kernel(name, good)
    assert kernelcache.load_compiled(*args).spirv == compiled.spirv
    lies = [lambda m: (m["params"][1].update(binding=1), m["params"][2].update(binding=0)),
            lambda m: m.update(push_size=4, params=m["params"]),
            lambda m: m.update(params=[]),
            lambda m: m.update(local_size=[256, 1, 1]),
            lambda m: m.update(capabilities=["Shader"])]
    for lie in lies:
        metadata = json.loads(json.dumps(compiled.to_metadata()))
        lie(metadata)
        kernelcache.store_kernel(name, dict(good, kernel=metadata))
        assert kernelcache.load_compiled(*args) is None
    bad = bytearray(compiled.spirv)
    bad[12:16] = b"\xff\xff\xff\xff"
    kernelcache.store_kernel(name, dict(good, spirv=bytes(bad)))
    assert kernelcache.load_compiled(*args) is None


# Cache directories that cannot be used --------------------------------------------


def _unusable(kind, tmp_path, monkeypatch):
    if kind == "a file in its place":
        path = tmp_path / "cache"
        path.write_text("not a directory")
    elif kind == "below a file":
        (tmp_path / "file").write_text("x")
        path = tmp_path / "file" / "cache"
    else:  # read-only: root ignores permissions, so os.access says no
        path = tmp_path / "ro-cache"
        path.mkdir()
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: (
            False if os.fspath(p) == str(path) else real(p, mode, **kw)))
    monkeypatch.setenv("NUMBA_VULKAN_CACHE_DIR", str(path))
    return path


@pytest.mark.parametrize("kind", ["a file in its place", "below a file", "read-only"])
def test_unusable_cache_directory_is_off_with_one_warning(kind, tmp_path, monkeypatch, rng):
    _unusable(kind, tmp_path, monkeypatch)
    before = sorted(os.listdir(tmp_path))
    files.forget_cache_roots()
    x = rng.random(64, dtype=np.float32)
    first, second = x.copy(), x.copy()
    try:
        with pytest.warns(nv.CacheWarning) as caught:
            VulkanDispatcher(_add_one.py_func, {"cache": True})[1, 64](first)
            VulkanDispatcher(_add_one_again.py_func)[1, 64](second)
        assert len([w for w in caught if w.category is nv.CacheWarning]) == 1
        np.testing.assert_array_equal(first, x + 1)
        np.testing.assert_array_equal(second, x + 1)
        assert pipeline_cache.for_device(current_device()).path is None
    finally:
        files.forget_cache_roots()
    assert sorted(os.listdir(tmp_path)) == before


@nv.jit
def _add_one(x):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] += 1


@nv.jit
def _add_one_again(x):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] = x[i] + 1


def test_cache_off_writes_nothing_anywhere(cache_dir, monkeypatch, rng):
    monkeypatch.setenv("NUMBA_VULKAN_CACHE", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error", nv.CacheWarning)
        x = rng.random(64, dtype=np.float32)
        y = x.copy()
        VulkanDispatcher(_add_one.py_func, {"cache": True})[1, 64](y)
    np.testing.assert_array_equal(y, x + 1)
    assert not cache_dir.exists()
    assert pipeline_cache.for_device(current_device()) is None


# Launch arguments -----------------------------------------------------------------


@nv.jit
def _scale(a, x, y):
    i = nv.global_id(0)
    if i < x.shape[0]:
        y[i] = a * x[i]


class _Duck:
    dtype = np.dtype(np.float32)
    shape = (64,)


@pytest.mark.parametrize("case", ["read-only output", "duck", "2**70", "-2**70"])
def test_bad_launch_arguments_name_the_parameter(case):
    x, y = np.ones(64, np.float32), np.zeros(64, np.float32)
    a = np.float32(2)
    if case == "read-only output":
        y.flags.writeable = False
        args, name = (a, x, y), "y"
    elif case == "duck":
        args, name = (a, x, _Duck()), "y"
    elif case == "2**70":
        args, name = (2 ** 70, x, y), "a"
    else:
        args, name = (-2 ** 70, x, y), "a"
    with pytest.raises((TypeError, nv.LaunchError), match=f"parameter '{name}'"):
        _scale[1, 64](*args)
    assert not y.any()


def test_a_0_d_array_where_the_kernel_indexes_one_names_the_line():
    """0-d arrays are arguments as in numba.cuda; indexing one is the kernel's
    typing error, at its line."""
    x, y = np.ones(64, np.float32), np.zeros((), np.float32)
    with pytest.raises(nv.CompilerError, match=r"test_trust\.py:\d+.*setitem"):
        _scale[1, 64](np.float32(2), x, y)
    assert not y.any()


def test_read_only_inputs_still_work(rng):
    x = rng.random(64, dtype=np.float32)
    x.flags.writeable = False
    y = np.zeros(64, np.float32)
    _scale[1, 64](np.float32(3), x, y)
    np.testing.assert_array_equal(y, np.float32(3) * x)


def test_written_bindings_follow_pointers(kernel_module):
    compiled = VulkanDispatcher(kernel_module.axpy.py_func).compile(
        "void(float32, float32[:], float32[:])", threads=64)
    assert modulecheck.written_bindings(compiled.spirv) == {1}


# Builds: kills at every point, files that are not the build's -----------------------


def project_copy(shipped, tmp_path):
    root = tmp_path / "project"
    shutil.copytree(shipped, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def assert_sound(directory):
    count, problems = build.verify(str(directory))
    assert count == 1 and problems == [], problems


def leftovers(root):
    return sorted(p.name for p in root.iterdir() if p.name.startswith((".aot.new-", ".aot.old-")))


_KILLED_BUILD = """
import os, sys
from numba_vulkan.aot.build import builder as build
def hook(point):
    if point == sys.argv[1]:
        os._exit(9)
build.crash_hook = hook
build.build("kernels.yaml")
print("not killed")
"""

POINTS = ["temporary directory made", "module written", "index written", "swapped", "renamed",
          "done"]


def test_a_build_killed_at_any_point_leaves_a_complete_directory(shipped, tmp_path):
    root = project_copy(shipped, tmp_path)
    before = (root / "aot" / index.INDEX).read_bytes()
    for point in POINTS:
        result = run_python("-c", _KILLED_BUILD, point, cwd=root, path=[root], timeout=300,
                            check=False)
        assert result.returncode == 9, (point, result.stdout, result.stderr)
        assert_sound(root / "aot")
        assert (root / "aot" / index.INDEX).read_bytes() == before
        # Each build removes the earlier killed builds' temporary directories.
        left = leftovers(root)
        assert len(left) == (0 if point == "done" else 1), (point, left)
    result = run_python("-c", _KILLED_BUILD, "index written", cwd=root, path=[root],
                        timeout=300, check=False)
    assert result.returncode == 9 and leftovers(root)
    result = build.build(str(root / "kernels.yaml"))
    assert result.reused == 1 and not result.failures
    assert leftovers(root) == []        # which the next build removed
    assert_sound(root / "aot")


def test_a_file_the_build_did_not_write_is_never_deleted(shipped, tmp_path):
    root = project_copy(shipped, tmp_path)
    for stranger in ("notes.txt", "spirv/readme", "sub/x"):
        path = root / "aot" / stranger
        path.parent.mkdir(exist_ok=True)
        path.write_text("mine")
        with pytest.raises(nv.AOTError, match="which no build wrote"):
            build.build(str(root / "kernels.yaml"))
        assert path.read_text() == "mine"
        path.unlink()
        if path.parent.name == "sub":
            path.parent.rmdir()
    assert_sound(root / "aot")


def test_output_dot_in_a_folder_with_an_index_keeps_the_manifest(shipped, tmp_path):
    root = project_copy(shipped, tmp_path)
    shutil.copy(root / "aot" / index.INDEX, root / index.INDEX)
    (root / "kernels.yaml").write_text(MANIFEST.replace("output: aot", "output: ."))
    with pytest.raises(nv.AOTError, match="which no build wrote"):
        build.build(str(root / "kernels.yaml"))
    assert (root / "kernels.yaml").exists() and (root / "trustkern.py").exists()


def test_a_symlinked_output_stays_a_link(shipped, tmp_path):
    root = project_copy(shipped, tmp_path)
    real = tmp_path / "elsewhere"
    shutil.move(root / "aot", real)
    (root / "aot").symlink_to(real)
    assert not build.build(str(root / "kernels.yaml")).failures
    assert (root / "aot").is_symlink() and os.readlink(root / "aot") == str(real)
    assert_sound(real)


def test_a_rejected_manifest_creates_nothing(shipped, tmp_path):
    root = project_copy(shipped, tmp_path)
    (root / "kernels.yaml").write_text(MANIFEST.replace("output: aot", "output: deep/er/aot")
                                       .replace("float32[:]", "flaot32[:]", 1))
    with pytest.raises(nv.AOTError):
        build.build(str(root / "kernels.yaml"))
    assert not (root / "deep").exists()


def test_readers_during_rebuilds_always_see_one_generation(shipped, kernel_module, search,
                                                           tmp_path):
    root = project_copy(shipped, tmp_path)
    output, other = root / "aot", tmp_path / "generation-b"
    shutil.copytree(output, other)
    data = read_index(other)
    entry = data["entries"][0]
    module = bytearray((other / entry["spirv"]).read_bytes())
    module[8:12] = b"\x01\x00\xff\x7f"                   # another generator word: other bytes
    replace_module(other, entry, bytes(module))
    write_index(other, data)
    assert build._exchange(str(other), str(output)) and build._exchange(str(other), str(output))
    search(output)
    stop = threading.Event()

    def rebuild():
        while not stop.is_set():
            build._exchange(str(other), str(output))
    swapper = threading.Thread(target=rebuild, daemon=True)
    swapper.start()
    try:
        found = [outcome(kernel_module) for _ in range(300)]
    finally:
        stop.set()
        swapper.join()
    errors = [f for f in found if not isinstance(f, nv.CompiledKernel)]
    assert not errors, str(errors[0])


# The command line: our errors, never a traceback ----------------------------------


@pytest.mark.parametrize("case", ["python tag", "sys.exit at import", "huge workgroup",
                                  "list without index", "inspect without index"])
def test_command_line_errors_are_messages(shipped, tmp_path, capsys, case):
    from numba_vulkan.aot.__main__ import main
    root = project_copy(shipped, tmp_path)
    manifest = root / "kernels.yaml"
    if case == "python tag":
        manifest.write_text(MANIFEST + '    options: !!python/object/apply:os.system ["x"]\n')
        argv, status = ["build", str(manifest)], 2
    elif case == "sys.exit at import":
        (root / "exits.py").write_text("import sys\nsys.exit(3)\n")
        manifest.write_text(MANIFEST.replace("trustkern:axpy", "exits:axpy"))
        argv, status = ["build", str(manifest)], 2
    elif case == "huge workgroup":
        manifest.write_text(MANIFEST.replace("[[64]]", "[[2000, 2000]]"))
        argv, status = ["build", str(manifest)], 2
    else:
        (root / "empty").mkdir()
        argv = ["list", str(root / "empty")] if case.startswith("list") else [
            "inspect", str(root / "empty"), "axpy"]
        # A folder that is not an AOT directory: a usage error.
        status = 2
    assert main(argv) == status
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err, err
    if argv[0] == "build":
        assert f"{manifest}:" in err
    else:
        assert "is not an AOT directory" in err


def test_build_off_a_terminal_prints_a_line_per_module(shipped, tmp_path, capsys):
    from numba_vulkan.aot.__main__ import main
    root = project_copy(shipped, tmp_path)
    assert main(["build", str(root / "kernels.yaml")]) == 0
    assert "[1/1] " in capsys.readouterr().err


def test_killed_writers_temporary_files_are_removed(cache_dir, monkeypatch):
    folder = cache_dir / "kernels"
    folder.mkdir(parents=True)
    stale, fresh = folder / ".tmp-stale", folder / ".tmp-fresh"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    old = stale.stat().st_mtime - 2 * files.STALE_SECONDS
    os.utime(stale, (old, old))
    monkeypatch.setattr(files, "_swept", set())
    kernelcache.store("ab" * 32, {"spirv": b"\3\2\x23\7", "n": 1})
    assert not stale.exists() and fresh.exists()   # a write may be in progress
    assert kernelcache.load("ab" * 32) == {"spirv": b"\3\2\x23\7", "n": 1}


@pytest.mark.parametrize("strict", [True, False])
def test_a_module_the_driver_refuses_falls_back(shipped, kernel_module, search, monkeypatch,
                                                 rng, strict):
    """What spirv-val and the checks miss, the driver may refuse: never a crash."""
    from numba_vulkan.api import dispatcher as dispatcher_module
    shipped_modules = {p.read_bytes() for p in (shipped / "aot" / "spirv").iterdir()}
    real = dispatcher_module.Pipeline

    def refusing(device, spirv, *args, **kwargs):
        if spirv in shipped_modules:
            raise nv.DriverError("vkCreateComputePipelines failed: VK_ERROR_UNKNOWN", -13)
        return real(device, spirv, *args, **kwargs)
    monkeypatch.setattr(dispatcher_module, "Pipeline", refusing)
    search(shipped / "aot", strict=strict)
    dispatcher = VulkanDispatcher(kernel_module.axpy.py_func)
    if strict:
        with pytest.raises(nv.AOTError, match="the driver refused"):
            run_axpy(dispatcher, rng)
        return
    with pytest.warns(AOTWarning, match="the driver refused"):
        y, want = run_axpy(dispatcher, rng)
    np.testing.assert_array_equal(y, want)
