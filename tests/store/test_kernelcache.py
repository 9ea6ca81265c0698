"""The on-disk kernel cache: keys, entries, both tiers, damage, the command.

Every test points the cache at a directory of its own. Tests that need
processes of their own are in test_kernelcache_processes.py.
"""

import importlib
import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.base import config
from numba_vulkan import store as kernelcache
from numba_vulkan.base import libclcfile
from numba_vulkan.base.target import DEFAULT
from numba_vulkan.store import cli, entry as entries, toolchain

SIG = ("float32", "float32[1d,C]", "float32[1d,C]")
THREADS = (64, 1, 1)
OFFSET = 0.5


@nv.jit(cache=True)
def scaled_add(a, x, y):
    i = nv.global_id(0)
    if i < x.shape[0]:
        y[i] = a * x[i] + y[i] * OFFSET


@nv.jit(cache=True)
def cube(x, y):
    i = nv.global_id(0)
    if i < x.shape[0]:
        y[i] = x[i] * x[i] * x[i]


_built = {}


def _replace_codegen(monkeypatch, codegen):
    """Run ``codegen(compilation)`` instead of the stages from link to validate."""
    from numba_vulkan.compiler import stages
    names = stages.names()
    if "codegen" in names:  # replaced before in this test
        first = last = names.index("codegen")
    else:
        first, last = names.index("link"), names.index("validate")
    original = stages.STAGES[first:last + 1]
    monkeypatch.setattr(stages, "STAGES", stages.STAGES[:first] + (
        stages.Stage("codegen", codegen, "the code generator, replaced by a test"),)
        + stages.STAGES[last + 1:])
    return original


def _build_once(monkeypatch):
    """Make codegen run once per distinct kernel module in this file.

    These tests are about the cache, and rebuild the same kernels many
    times; LLVM's SPIR-V backend gives different bytes on each compile in a
    process and now and then an invalid module, which spirv-val rejects.
    """
    from numba_vulkan.compiler import stages
    original = None

    def shared_codegen(job):
        key = (kernelcache.normalise("\n".join(job.sources)), tuple(job.bindings),
               tuple(job.threads), job.target)
        if config.dump_dir() or key not in _built:
            done = stages.run(job, stages=original)
            _built[key] = (done.spirv, done.llvm_ir, done.loop_check)
        job.spirv, job.llvm_ir, job.loop_check = _built[key]
        return job.spirv

    original = _replace_codegen(monkeypatch, shared_codegen)


@pytest.fixture(autouse=True)
def codegen_once(monkeypatch):
    _build_once(monkeypatch)


@pytest.fixture
def pinned_package(monkeypatch):
    """Keys that must not change while other engineers edit the package."""
    monkeypatch.setattr(toolchain, "_package_part", lambda: "package:pinned")


@pytest.fixture
def cache_dir(cache_dir, pinned_package):
    """tests/conftest.py's cache directory, with the package's part of keys pinned."""
    return cache_dir


def fresh(dispatcher, **options):
    """A new dispatcher of the same function: nothing compiled in memory."""
    return nv.jit(**{**dispatcher.options, **options})(dispatcher.py_func)


def run_scaled_add(kernel, rng, n=100):
    x = rng.random(n, dtype=np.float32)
    y = rng.random(n, dtype=np.float32)
    expected = np.float32(3.0) * x + y * np.float32(OFFSET)
    kernel.forall(n)(np.float32(3.0), x, y)
    np.testing.assert_allclose(y, expected, rtol=1e-6)


def run_cube(kernel, rng, n=100):
    x = rng.random(n, dtype=np.float32)
    y = np.zeros_like(x)
    kernel.forall(n)(x, y)
    np.testing.assert_allclose(y, x * x * x, rtol=1e-6)


def counts(tier):
    stats = kernelcache.stats()[tier]
    return {k: v for k, v in stats.items() if v}


# Settings and keys -----------------------------------------------------------


def test_enabled_follows_the_environment(monkeypatch):
    assert kernelcache.ENV_VAR == "NUMBA_VULKAN_CACHE"
    monkeypatch.delenv("NUMBA_VULKAN_CACHE", raising=False)
    assert kernelcache.enabled() is True
    monkeypatch.setenv("NUMBA_VULKAN_CACHE", "0")
    assert kernelcache.enabled() is False
    monkeypatch.setenv("NUMBA_VULKAN_CACHE", "1")
    assert kernelcache.enabled() is True


_IR = textwrap.dedent('''\
    ; ModuleID = "kern$7"
    target triple = "unknown-unknown-unknown"
    @"_ZN08NumbaEnv4test4kernB2v7B46c8tJTAeGIsJ1tmCPA_2f2PFhW2oGQBEYbEOpIAakyCJTQBEd" = common global i8* null
    @".const.array.data" = internal constant [2 x double] [double 1.5, double 2.5]
    @".const.array.data.1" = internal constant [1 x double] [double 3.5]
    define i32 @"_ZN4test4kernB2v7B46c8tJTAeGIsJ1tmCPA_2f2PFhW2oGQBEYbEOpIAakyCJTQBEd"(double %x) {
      %a = call i32 @"_ZN4test6helperB3v12B46c8tJTAeGIsJ1tmCPA_2f2PFhW2oGQBEYbEOpIAakyCJTQBEd"(double %x)
      %p = getelementptr [2 x double], [2 x double]* @".const.array.data", i32 0, i32 1
      %q = getelementptr [1 x double], [1 x double]* @".const.array.data.1", i32 0, i32 0
      ret i32 0
    }
    ; ModuleID = "helper$12"
    declare i32 @"_ZN4test6helperB3v12B46c8tJTAeGIsJ1tmCPA_2f2PFhW2oGQBEYbEOpIAakyCJTQBEd"(double)
''')


def test_normalise_renumbers_counters_and_drops_module_names():
    out = kernelcache.normalise(_IR)
    assert "ModuleID" not in out
    assert "kern$7" not in out and "helper$12" not in out
    # The kernel's counter (first seen) becomes 0, the helper's 1, with the
    # length prefix of the tag rewritten; the flags tag is left alone.
    assert "_ZN4test4kernB2v0B46c8tJTAeGIsJ1tmCPA_2f2PFhW2oGQBEYbEOpIAakyCJTQBEd" in out
    assert "_ZN08NumbaEnv4test4kernB2v0B46" in out
    assert out.count("_ZN4test6helperB2v1B46c8t") == 2
    assert "v7" not in out and "v12" not in out
    assert out.count('@".const#0"') == 2 and out.count('@".const#1"') == 2


def test_normalise_equates_only_what_differs_between_processes():
    # Another process: other counters, module names and constant numbering.
    other = (_IR.replace("v7", "v3").replace("B3v12", "B2v9").replace("$12", "$9")
             .replace("$7", "$3").replace(".const.array.data.1", ".const.array.data.5"))
    assert kernelcache.normalise(other) == kernelcache.normalise(_IR)
    # A different constant, callee or body is a different kernel.
    for changed in (_IR.replace("double 3.5", "double 4.5"),
                    _IR.replace("helper", "helpes"),
                    _IR.replace("ret i32 0", "ret i32 1"),
                    _IR.replace('@".const.array.data.1", i32 0', '@".const.array.data", i32 0')):
        assert kernelcache.normalise(changed) != kernelcache.normalise(_IR)


def test_key_changes_with_source_and_every_setting():
    source = kernelcache.normalise(_IR)
    settings = [DEFAULT.key(), [64, 1, 1], ["float32", "float32"], {"fastmath": False}]
    base = kernelcache.key(source, *settings)
    assert base == kernelcache.key(source, *settings)
    assert len(base) == 64 and int(base, 16) >= 0
    keys = {base, kernelcache.key(source + " ", *settings)}
    others = [DEFAULT.with_features(float64=False).key(), [128, 1, 1], ["float64", "float32"],
              {"fastmath": True}]
    for i, changed in enumerate(others):
        keys.add(kernelcache.key(source, *settings[:i], changed, *settings[i + 1:]))
    assert len(keys) == 2 + len(settings)
    with pytest.raises(TypeError):
        kernelcache.key(source, object())


def _package_copy(tmp_path):
    copy = tmp_path / "package"
    shutil.copytree(toolchain._PACKAGE_DIR, copy,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_fingerprint_covers_each_of_its_parts(tmp_path, monkeypatch):
    base = kernelcache.fingerprint()
    assert base == kernelcache.fingerprint()
    seen = {base}

    def changed():
        value = kernelcache.fingerprint()
        assert value not in seen
        seen.add(value)

    # The package's source: a copy hashes the same; an edit does not.
    copy = _package_copy(tmp_path)
    package = toolchain._PACKAGE_DIR
    monkeypatch.setattr(toolchain, "_PACKAGE_DIR", str(copy))
    assert kernelcache.fingerprint() == base
    with open(copy / "base" / "abi.py", "a") as f:
        f.write("\n# an edit\n")
    changed()
    monkeypatch.setattr(toolchain, "_PACKAGE_DIR", package)
    assert kernelcache.fingerprint() == base

    # llvmlite, found without importing it: its version, then its library.
    site = tmp_path / "site"
    (site / "llvmlite" / "binding").mkdir(parents=True)
    (site / "llvmlite" / "binding" / "libllvmlite.so").write_bytes(b"one build")
    (site / "llvmlite-1.0.dist-info").mkdir()
    monkeypatch.setattr(toolchain, "_package_dir", lambda name: str(site / name))
    changed()
    (site / "llvmlite-1.0.dist-info").rename(site / "llvmlite-1.1.dist-info")
    changed()
    (site / "llvmlite" / "binding" / "libllvmlite.so").write_bytes(b"another build")
    changed()
    monkeypatch.undo()
    assert kernelcache.fingerprint() == base

    # The libclc file in use: which one, and its content.
    bitcode = tmp_path / "libclc.bc"
    bitcode.write_bytes(b"BC\xc0\xde one")
    monkeypatch.setattr(libclcfile, "path_in_use", lambda: str(bitcode))
    changed()
    bitcode.write_bytes(b"BC\xc0\xde other")
    changed()
    monkeypatch.undo()

    # An llc that replaces llvmlite's backend: set, then replaced.
    llc = tmp_path / "llc"
    llc.write_text("#!/bin/sh\n")
    llc.chmod(0o755)
    monkeypatch.setenv("NUMBA_VULKAN_LLC", str(llc))
    changed()
    llc.write_text("#!/bin/sh\n# another build\n")
    changed()
    monkeypatch.undo()
    assert kernelcache.fingerprint() == base


def test_fingerprint_is_part_of_both_keys(monkeypatch):
    source = kernelcache.normalise(_IR)
    before = kernelcache.key(source, 1), kernelcache.kernel_key([b"stamp"], 1)
    monkeypatch.setattr(toolchain, "fingerprint", lambda: "another")
    after = kernelcache.key(source, 1), kernelcache.kernel_key([b"stamp"], 1)
    assert before[0] != after[0] and before[1] != after[1]


# source_stamp and the functions/ tier's key -----------------------------------


def test_source_stamp(tmp_path):
    stamp = kernelcache.source_stamp(cube.py_func)
    assert isinstance(stamp, bytes) and stamp == kernelcache.source_stamp(cube.py_func)
    assert stamp != kernelcache.source_stamp(scaled_add.py_func)
    assert os.path.realpath(__file__).encode() in stamp
    namespace = {}
    exec("def f(x):\n    return x\n", namespace)
    assert kernelcache.source_stamp(namespace["f"]) is None
    assert kernelcache.source_stamp(len) is None
    # The file's modification time is part of it.
    path = tmp_path / "stamped.py"
    path.write_text("def f(x):\n    return x + 1\n")
    module = _import(tmp_path, "stamped")
    first = kernelcache.source_stamp(module.f)
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 10**9))
    assert kernelcache.source_stamp(module.f) != first


_KERNEL_MODULE = '''\
import numba_vulkan as nv
import kc_helpers
from kc_helpers import shift

SCALE = 3.0


@nv.jit
def square(v):
    return v * v * kc_helpers.GAIN


@nv.jit(cache=True)
def kern(x, y):
    i = nv.global_id(0)
    if i < x.shape[0]:
        y[i] = square(x[i]) * SCALE + shift(x[i]) + kc_helpers.OFFSET
'''

_HELPER_MODULE = '''\
import numba

OFFSET = 0.0
GAIN = 1.0


@numba.njit
def shift(v):
    return v + 1.0
'''


def _forget(directory):
    for module in [m for m, v in sys.modules.items()
                   if os.path.dirname(getattr(v, "__file__", None) or "") == str(directory)]:
        del sys.modules[module]


def _import(directory, name):
    """Import ``name`` from ``directory`` afresh (also the modules it imports
    from there), as a new process would."""
    _forget(directory)
    importlib.invalidate_caches()
    sys.path.insert(0, str(directory))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(directory))


def _edit(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    # Same-second edits must not leave Python reading stale bytecode.
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2 * 10**9))


@pytest.fixture
def kernel_files(tmp_path):
    directory = tmp_path / "kernels_src"
    directory.mkdir()
    (directory / "kc_kernel.py").write_text(_KERNEL_MODULE)
    (directory / "kc_helpers.py").write_text(_HELPER_MODULE)
    yield directory
    _forget(directory)


def test_library_objects_are_keyed_and_others_make_kernels_uncacheable(kernel_files,
                                                                         cache_dir):
    module = _import(kernel_files, "kc_kernel")
    import numba
    keys = set()
    for value in (np.sqrt, np.float32, np.dtype("f4"), numba.float32, np.float32(2)):
        module.SCALE = value
        keys.add(_function_key(module))
    assert None not in keys and len(keys) == 5, keys
    # Something whose value has no stable key makes the kernel uncacheable.
    module.SCALE = object()
    assert _function_key(module) is None
    assert kernelcache.stats()["functions"]["uncacheable"] == 1


def _function_key(module, sig=SIG, threads=THREADS, target=DEFAULT, **options):
    kernel = module.kern if not options else nv.jit(cache=True, **options)(module.kern.py_func)
    return kernelcache.function_key(kernel.py_func, kernel.options, sig, threads, target)


def test_kernel_key_changes_with_every_input(kernel_files, monkeypatch, pinned_package):
    module = _import(kernel_files, "kc_kernel")
    base = _function_key(module)
    assert base == _function_key(_import(kernel_files, "kc_kernel"))
    keys = {"base": base}
    keys["argument types"] = _function_key(module, sig=("float32", "float32[1d,A]",
                                                        "float32[1d,C]"))
    keys["workgroup size"] = _function_key(module, threads=(128, 1, 1))
    keys["narrowing"] = _function_key(module, target=DEFAULT.with_features(float64=False))
    keys["option"] = _function_key(module, fastmath=True)
    module.SCALE = 4.0
    keys["global"] = _function_key(module)
    module = _import(kernel_files, "kc_kernel")
    module.kc_helpers.OFFSET = 1.0
    keys["global of another module"] = _function_key(module)
    module = _import(kernel_files, "kc_kernel")
    module.kc_helpers.GAIN = 2.0
    keys["global of another module, read by a callee"] = _function_key(module)
    monkeypatch.setenv("NUMBA_BOUNDSCHECK", "1")
    keys["numba setting"] = _function_key(_import(kernel_files, "kc_kernel"))
    monkeypatch.delenv("NUMBA_BOUNDSCHECK")
    assert _function_key(_import(kernel_files, "kc_kernel")) == base
    # Touched only: the stamp of every function of the file changes.
    _edit(kernel_files / "kc_helpers.py", "", "")
    keys["touched file of a callee"] = _function_key(_import(kernel_files, "kc_kernel"))
    _edit(kernel_files / "kc_kernel.py", "", "")
    keys["touched file of the kernel"] = _function_key(_import(kernel_files, "kc_kernel"))
    _edit(kernel_files / "kc_helpers.py", "v + 1.0", "v + 2.0")
    keys["callee in another module"] = _function_key(_import(kernel_files, "kc_kernel"))
    _edit(kernel_files / "kc_kernel.py", "return v * v", "return v * v * v")
    keys["callee in the same module"] = _function_key(_import(kernel_files, "kc_kernel"))
    _edit(kernel_files / "kc_kernel.py", "* SCALE +", "* SCALE -")
    keys["body"] = _function_key(_import(kernel_files, "kc_kernel"))
    monkeypatch.setattr(toolchain, "fingerprint", lambda: "another")
    keys["fingerprint"] = _function_key(_import(kernel_files, "kc_kernel"))
    assert len(set(keys.values())) == len(keys), keys


def test_the_remote_name_is_the_same_in_every_checkout_of_the_same_files(
        kernel_files, cache_dir, monkeypatch, tmp_path):
    # No request is made: the names only.
    monkeypatch.setenv("NUMBA_VULKAN_REMOTE_CACHE", "redis://127.0.0.1:9/0")
    base = _function_key(_import(kernel_files, "kc_kernel"))
    assert base.remote is not None and base.remote != base.local
    # The kernel first, then what it calls, in the walk's order (by name).
    assert base.sources[0] == str(kernel_files / "kc_kernel.py")
    assert sorted(base.sources) == [str(kernel_files / "kc_helpers.py"),
                                    str(kernel_files / "kc_kernel.py"),
                                    str(kernel_files / "kc_kernel.py")]
    # Another clone: another path, other times, the same files.
    clone = tmp_path / "clone"
    shutil.copytree(kernel_files, clone)
    for path in clone.iterdir():
        os.utime(path, ns=(10**18, 10**18))
    _forget(kernel_files)
    other = _function_key(_import(clone, "kc_kernel"))
    _forget(clone)
    assert other.local != base.local and other.remote == base.remote
    assert other.sources[0] == str(clone / "kc_kernel.py")
    # Any edit of a file the key covers changes it, one a kernel's code
    # does not show too (a comment stands for an @overload in that file).
    _edit(kernel_files / "kc_helpers.py", "OFFSET = 0.0", "OFFSET = 0.0  # edited")
    edited = _function_key(_import(kernel_files, "kc_kernel"))
    assert edited.remote != base.remote
    module = _import(kernel_files, "kc_kernel")
    remotes = {edited.remote}
    for key in (_function_key(module, threads=(128, 1, 1)),
                _function_key(module, fastmath=True),
                _function_key(module, target=DEFAULT.with_features(float64=False))):
        remotes.add(key.remote)
    module.SCALE = 4.0
    remotes.add(_function_key(module).remote)
    monkeypatch.setenv("NUMBA_BOUNDSCHECK", "1")
    remotes.add(_function_key(module).remote)
    assert len(remotes) == 6
    monkeypatch.delenv("NUMBA_VULKAN_REMOTE_CACHE")
    assert _function_key(module).remote is None


def test_kernel_without_a_source_file_is_not_in_functions(cache_dir, kernel_files, rng):
    namespace = {"nv": nv}
    exec("def kern(x, y):\n"
         "    i = nv.global_id(0)\n"
         "    if i < x.shape[0]:\n"
         "        y[i] = x[i] * x[i] * x[i]\n", namespace)
    kernel = nv.jit(cache=True)(namespace["kern"])
    assert kernelcache.function_key(kernel.py_func, kernel.options, SIG[1:], THREADS,
                                    DEFAULT) is None
    # Launched, it is compiled and stored in kernels/ alone, and computes the same.
    run_cube(kernel, rng)
    assert counts("functions") == {"uncacheable": 2}
    assert counts("kernels") == {"misses": 1, "stores": 1}
    assert not (cache_dir / "functions").exists() or not any((cache_dir / "functions").iterdir())
    # A kernel in a file that calls a function without one is not stored either.
    module = _import(kernel_files, "kc_kernel")
    exec("def plain(v):\n    return v\n", namespace)
    module.SCALE = namespace["plain"]
    assert _function_key(module) is None
    assert counts("functions") == {"uncacheable": 3}


def _module_key(module, sig=SIG, target=DEFAULT, **options):
    from numba_vulkan.frontend.compile import compile_kernel, numba_types
    kernel_ir = compile_kernel(module.kern.py_func, numba_types(sig), target.narrowed,
                               options)
    bindings = [p.storage for p in kernel_ir.params if p.kind == "array"]
    return kernelcache.module_key(kernel_ir.modules, bindings, THREADS, target, options)


def test_module_key_changes_with_every_input(kernel_files, pinned_package):
    (kernel_files / "kc_kernel.py").write_text(_KERNEL_MODULE.replace(
        "import numba_vulkan as nv", "import numba\nimport numba_vulkan as nv").replace(
        "@nv.jit\ndef square", "@numba.njit\ndef square"))
    sig = ("float64[1d,C]", "float64[1d,C]")
    module = _import(kernel_files, "kc_kernel")
    base = _module_key(module, sig)
    keys = {"base": base}
    keys["argument types"] = _module_key(module, ("float32[1d,C]", "float64[1d,C]"))
    keys["narrowing"] = _module_key(module, sig, DEFAULT.with_features(float64=False))
    keys["option"] = _module_key(module, sig, fastmath=True)
    module.SCALE = 4.0
    keys["global"] = _module_key(module, sig)
    module = _import(kernel_files, "kc_kernel")
    module.kc_helpers.OFFSET = 1.0
    keys["global of another module"] = _module_key(module, sig)
    module = _import(kernel_files, "kc_kernel")
    module.kc_helpers.GAIN = 2.0
    keys["global of another module, read by a callee"] = _module_key(module, sig)
    _edit(kernel_files / "kc_helpers.py", "v + 1.0", "v + 2.0")
    keys["callee in another module"] = _module_key(_import(kernel_files, "kc_kernel"), sig)
    _edit(kernel_files / "kc_kernel.py", "* SCALE +", "* SCALE -")
    keys["body"] = _module_key(_import(kernel_files, "kc_kernel"), sig)
    assert len(set(keys.values())) == len(keys), keys
    # Touching the files changes nothing the IR shows.
    for path in kernel_files.glob("*.py"):
        _edit(path, "import", "import")
    assert _module_key(_import(kernel_files, "kc_kernel"), sig) == keys["body"]


# Entries ---------------------------------------------------------------------

# A SPIR-V header (1.5, id bound 1) and OpCapability Shader.
_SPIRV = struct.pack("<7I", 0x07230203, 0x00010500, 0, 1, 0, 0x00020011, 1)
_NAME = "ab" * 32


def test_store_and_load_round_trip(cache_dir):
    entry = {"spirv": _SPIRV, "llvm_ir": "; ir \u00e9", "capabilities": ["Shader"],
             "nested": {"a": [1, 2.5, None, True]}}
    assert kernelcache.load(_NAME) is None
    kernelcache.store(_NAME, entry)
    assert kernelcache.load(_NAME) == entry
    assert [p.name for p in (cache_dir / "kernels").iterdir()] == [_NAME + ".entry"]
    assert kernelcache.load("../" + _NAME) is None
    assert kernelcache.load(None) is None
    assert counts("kernels") == {"hits": 1, "misses": 3, "stores": 1}
    with pytest.raises(TypeError):
        kernelcache.store(_NAME, {"spirv": _SPIRV, "llvm_ir": "", "bad": object()})
    with pytest.raises(ValueError):
        kernelcache.store("not-a-name", {"spirv": _SPIRV, "llvm_ir": ""})


def _version_2_entry(name, values, blob):
    """An entry file as version 2 of the format wrote it (before issue 22):
    its header named the section "tier"."""
    import hashlib
    record = {"format": 2, "tier": "kernels", "key": name, "created": 0.0, "values": values,
              "blobs": [["spirv", "bytes", len(blob), hashlib.sha256(blob).hexdigest()]]}
    record["checksum"] = hashlib.sha256(
        json.dumps(record, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    header = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
    return b"numba_vulkan cache entry 2\n" + header + b"\n" + blob


def test_an_entry_of_the_previous_format_version_is_a_miss_and_replaced(cache_dir):
    assert entries.FORMAT_VERSION == 3
    path = cache_dir / "kernels" / (_NAME + entries.SUFFIX)
    path.parent.mkdir(parents=True)
    path.write_bytes(_version_2_entry(_NAME, {"llvm_ir": ""}, _SPIRV))
    with pytest.raises(ValueError, match="another format version"):
        entries.decode("kernels", _NAME, path.read_bytes())
    assert kernelcache.load(_NAME) is None
    assert counts("kernels") == {"rejected": 1}
    kernelcache.store(_NAME, {"spirv": _SPIRV, "llvm_ir": ""})
    assert kernelcache.load(_NAME) == {"spirv": _SPIRV, "llvm_ir": ""}
    assert path.read_bytes().startswith(b"numba_vulkan cache entry 3\n")


def test_the_public_module_is_the_specified_api():
    from numba_vulkan import kernelcache as public
    assert public.__all__ == ["ENV_VAR", "enabled", "fingerprint", "normalise", "key", "load",
                              "store", "source_stamp", "kernel_key", "load_kernel",
                              "store_kernel"]
    for name in public.__all__:
        assert getattr(public, name) is getattr(kernelcache, name)


def test_the_store_imports_no_numba_and_no_llvmlite():
    script = ("import sys, numba_vulkan.store, numba_vulkan.kernelcache\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'llvmlite')"
              " or m.startswith(('numba_vulkan.compiler', 'numba_vulkan.frontend',"
              " 'numba_vulkan.codegen'))))\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"


def test_the_store_imports_only_the_layers_below_it():
    # Function-local imports too, which importing the package does not run.
    import ast
    allowed = ("numba_vulkan.base", "numba_vulkan.spirv", "numba_vulkan.store")
    directory = os.path.dirname(kernelcache.__file__)
    found = set()
    for name in os.listdir(directory):
        if name.endswith(".py"):
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    found.update((name, a.name) for a in node.names)
                elif isinstance(node, ast.ImportFrom):
                    found.add((name, node.module))
    wrong = sorted((name, module) for name, module in found
                   if module.split(".")[0] in ("numba", "llvmlite")
                   or module.startswith("numba_vulkan") and not module.startswith(allowed))
    assert not wrong
    assert ("keys.py", "numba_vulkan.store") in found


def test_store_kernel_and_load_kernel_round_trip(cache_dir):
    compiled = fresh(cube).compile("void(float32[::1], float32[::1])")
    entry = {"spirv": compiled.spirv, "llvm_ir": compiled.llvm_ir,
             "kernel": compiled.to_metadata(), "validated": True}
    kernelcache.store_kernel(_NAME, entry)
    assert kernelcache.load_kernel(_NAME) == entry
    # The two tiers are apart.
    assert kernelcache.load(_NAME) is None
    found = kernelcache.load_compiled(_NAME, compiled.signature, compiled.local_size,
                                      compiled.target, "cube")
    assert found.spirv == compiled.spirv and found.params == compiled.params
    # Any dict round-trips; one that describes no kernel is none to the dispatcher.
    odd = dict(entry, kernel={"name": "cube"}, raw=b"\0\1", text="x" * 1000)
    kernelcache.store_kernel(_NAME, odd)
    assert kernelcache.load_kernel(_NAME) == odd
    assert kernelcache.load_compiled(_NAME, compiled.signature, compiled.local_size,
                                     compiled.target, "cube") is None
    kernelcache.store_kernel(_NAME, {"anything": [1, "two"], "blob": b"\xff"})
    assert kernelcache.load_kernel(_NAME) == {"anything": [1, "two"], "blob": b"\xff"}


def test_store_ignores_failures_to_write(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("NUMBA_VULKAN_CACHE_DIR", str(blocker / "cache"))
    kernelcache.reset_stats()
    with pytest.warns(nv.CacheWarning, match="cannot be used"):
        kernelcache.store(_NAME, {"spirv": _SPIRV, "llvm_ir": ""})
    kernelcache.store_kernel(_NAME, {"spirv": _SPIRV, "llvm_ir": "", "kernel": {}})
    assert kernelcache.load(_NAME) is None
    assert kernelcache.load_kernel(_NAME) is None
    stats = kernelcache.stats()
    assert stats["kernels"]["store_failures"] == 1 and stats["functions"]["store_failures"] == 1


def test_unvalidated_modules_are_not_used_while_validating(cache_dir):
    module = kernelcache.CachedModule(_SPIRV, "; ir", ["Shader"])
    kernelcache.store_module(_NAME, module, "label")
    # Tests always validate; this module was stored as validated.
    assert kernelcache.load_module(_NAME, "label") == module
    entry = kernelcache.load(_NAME)
    kernelcache.store(_NAME, dict(entry, validated=False))
    assert kernelcache.load_module(_NAME, "label") is None


# Both tiers, end to end --------------------------------------------------------


def test_kernels_tier_skips_codegen_with_the_same_results(cache_dir, rng, monkeypatch):
    first = fresh(scaled_add, cache=False)
    run_scaled_add(first, rng)
    assert counts("kernels") == {"misses": 1, "stores": 1}
    assert "functions" not in [p.name for p in cache_dir.iterdir()]
    def no_codegen(job):
        raise AssertionError("codegen ran on a cache hit")

    _replace_codegen(monkeypatch, no_codegen)
    second = fresh(scaled_add, cache=False)
    run_scaled_add(second, rng)
    assert counts("kernels") == {"misses": 1, "stores": 1, "hits": 1}
    (a,), (b,) = first._compiled.values(), second._compiled.values()
    assert a.spirv == b.spirv and a.llvm_ir == b.llvm_ir and a.params == b.params


def test_functions_tier_skips_numba(cache_dir, rng, monkeypatch):
    run_scaled_add(fresh(scaled_add), rng)
    assert counts("functions") == {"misses": 1, "stores": 1}
    from numba_vulkan.frontend import compile as compile_module

    def no_numba(*args, **kwargs):
        raise AssertionError("Numba ran on a cache hit")

    monkeypatch.setattr(compile_module, "compile_kernel", no_numba)
    kernel = fresh(scaled_add)
    run_scaled_add(kernel, rng)
    assert counts("functions") == {"misses": 1, "stores": 1, "hits": 1}
    assert counts("kernels") == {"misses": 1, "stores": 1}
    # compile() finds it as well, and gives what the launch used.
    compiled = fresh(scaled_add).compile("void(float32, float32[::1], float32[::1])",
                                         threads=256)
    assert compiled.spirv == next(iter(kernel._compiled.values())).spirv
    assert counts("functions")["hits"] == 2


def test_a_changed_global_is_not_served_stale(cache_dir, rng, monkeypatch):
    run_scaled_add(fresh(scaled_add), rng)
    monkeypatch.setattr(sys.modules[__name__], "OFFSET", 0.25)
    run_scaled_add(fresh(scaled_add), rng)
    run_scaled_add(fresh(scaled_add, cache=False), rng)
    assert counts("functions") == {"misses": 2, "stores": 2}
    assert counts("kernels") == {"misses": 2, "stores": 2, "hits": 1}


def test_cache_off_reads_and_writes_nothing(cache_dir, rng, monkeypatch):
    monkeypatch.setenv("NUMBA_VULKAN_CACHE", "0")
    run_cube(fresh(cube), rng)
    run_cube(fresh(cube, cache=False), rng)
    assert not cache_dir.exists() or not any(cache_dir.rglob("*.json"))
    assert not counts("kernels") and not counts("functions")


def test_dump_bypasses_the_cache(cache_dir, rng, monkeypatch, tmp_path):
    run_cube(fresh(cube), rng)
    monkeypatch.setenv("NUMBA_VULKAN_DUMP", str(tmp_path / "dump"))
    run_cube(fresh(cube), rng)
    assert list((tmp_path / "dump").glob("*.spv"))


def test_debug_log_says_one_line_per_lookup(cache_dir, rng, monkeypatch, capfd):
    monkeypatch.setenv("NUMBA_VULKAN_DEBUG_CACHE", "1")
    run_cube(fresh(cube), rng)
    run_cube(fresh(cube), rng)
    lines = [l for l in capfd.readouterr().err.splitlines() if l.startswith("numba_vulkan cache")]
    label = "cube(float32[1d,C], float32[1d,C])"
    assert [l.split(" (")[0] for l in lines] == [
        f"numba_vulkan cache: functions miss {label}",
        f"numba_vulkan cache: kernels miss {label}",
        f"numba_vulkan cache: functions hit {label}"]


def test_info_and_clear_command(cache_dir, rng, capsys):
    run_cube(fresh(cube), rng)
    capsys.readouterr()
    assert cli.main(["info", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert str(cache_dir) in out
    assert "kernels/: 1 entries" in out and "functions/: 1 entries" in out
    assert out.count("cube(float32[1d,C], float32[1d,C])") == 2
    assert cli.main(["clear", "--tier", "functions"]) == 0
    assert "removed 1 files" in capsys.readouterr().out
    cli.main(["info"])
    out = capsys.readouterr().out
    assert "kernels/: 1 entries" in out and "functions/: 0 entries" in out
    cli.main(["clear"])
    assert not any((cache_dir / "kernels").iterdir())


# Damage ------------------------------------------------------------------------

MODES = ("truncated", "random bytes", "wrong version", "empty", "directory",
         "another kernel's entry")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A cache holding both tiers' entries of cube and of scaled_add, and the
    module codegen made for cube."""
    directory = tmp_path_factory.mktemp("pristine")
    rng = np.random.default_rng(7)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMBA_VULKAN_CACHE_DIR", str(directory))
        mp.delenv("NUMBA_VULKAN_CACHE", raising=False)
        # Other engineers' edits to the package must not change keys mid-test.
        mp.setattr(toolchain, "_package_part", lambda: "package:pinned")
        _build_once(mp)
        run_cube(fresh(cube), rng)
        run_scaled_add(fresh(scaled_add), rng)
        names = {}
        for tier in entries.SECTIONS:
            for path in (directory / tier).glob("*.entry"):
                found = kernelcache.load_kernel(path.stem) if tier == "functions" \
                    else kernelcache.load(path.stem)
                kernel = found["kernel"]["name"] if tier == "functions" else found["kernel"]
                names[tier, kernel.split("(")[0]] = path.stem
        built = kernelcache.load_module(names["kernels", "cube"], "cube")
    return directory, names, built


def damage(path, mode, other):
    data = path.read_bytes()
    if mode == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif mode == "random bytes":
        path.write_bytes(np.random.default_rng(3).bytes(len(data)))
    elif mode == "wrong version":
        later = entries.FORMAT_VERSION + 1
        header, rest = data.split(b"\n", 1)
        path.write_bytes(b"numba_vulkan cache entry %d\n" % later
                         + rest.replace(b'"format":%d' % entries.FORMAT_VERSION,
                                        b'"format":%d' % later))
    elif mode == "empty":
        path.write_bytes(b"")
    elif mode == "directory":
        path.unlink()
        (path / "inside").mkdir(parents=True)
    else:
        shutil.copyfile(other, path)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tier", entries.SECTIONS)
def test_damaged_entry_is_a_miss_and_rebuilt(pristine, tier, mode, cache_dir, rng, monkeypatch):
    source, names, built = pristine
    directory = cache_dir
    shutil.copytree(source, directory)
    # The rebuild is the cache's business here, not codegen's: it gets the
    # module codegen made before.
    def codegen(job):
        job.spirv, job.llvm_ir = built.spirv, built.llvm_ir
        return job.spirv

    _replace_codegen(monkeypatch, codegen)
    name = names[tier, "cube"]
    damage(directory / tier / (name + ".entry"), mode,
           directory / tier / (names[tier, "scaled_add"] + ".entry"))
    kernelcache.reset_stats()
    # Only cache=True kernels consult functions/, and they find a kernel
    # there before they would look in kernels/.
    run_cube(fresh(cube, cache=tier == "functions"), rng)
    assert counts(tier) == {"rejected": 1, "stores": 1}
    reader = kernelcache.load_kernel if tier == "functions" else kernelcache.load
    assert reader(name) is not None


_RAISING = """\
import numba_vulkan as nv


@nv.jit(error_model="python")
def root(x, y):
    i = nv.global_id(0)
    if i < x.shape[0]:
        if x[i] < 0:
            raise ValueError("negative input")
        y[i] = x[i] ** 0.5
"""


def test_kernels_key_of_a_raising_kernel_is_the_same_in_another_checkout(tmp_path):
    """A raise's code hashes its file's name, not its path (compiler/checks.py)."""
    import importlib.util

    from numba_vulkan import store as kernelcache
    from numba_vulkan.frontend.compile import compile_kernel, numba_types
    from numba_vulkan.base.target import DEFAULT

    def key(checkout):
        checkout.mkdir()
        (checkout / "lim_raising.py").write_text(_RAISING)
        spec = importlib.util.spec_from_file_location("lim_raising", checkout / "lim_raising.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        kernel = module.root
        ir = compile_kernel(kernel.py_func, numba_types(("float32[1d,C]",) * 2), kernel.options)
        return kernelcache.module_key(ir.modules, ["float32", "float32"], (64, 1, 1), DEFAULT,
                                      kernel.options)
    assert key(tmp_path / "a") == key(tmp_path / "b")
