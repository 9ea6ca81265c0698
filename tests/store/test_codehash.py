"""One code hash for the cache's functions/ tier and AOT keys (numba_vulkan.store.codehash).

An edit that changes what the kernel's code is changes both keys. The
functions/ key also holds the source stamps (file name, size, time) of the
functions the walk reaches, so an edit the code does not show (a comment, a
touch, a move, an @overload in the kernel's file) changes it and keeps the
AOT key. Nothing here compiles a kernel.
"""

import importlib
import linecache
import os
import shutil
import sys

import numba
import pytest

import numba_vulkan as nv
from numba_vulkan.store import codehash
from numba_vulkan import store as kernelcache
from numba_vulkan.base.target import DEFAULT
from numba_vulkan.store import keys, toolchain
from tests.helpers import run_python

SIG = ("float32[1d,C]",)
THREADS = (64, 1, 1)

_KERNEL = '''\
import numba_vulkan as nv
from ch_helpers import twice

SCALE = 2.0
FACTOR = 3.0


def make(factor):
    @nv.jit(cache=True)
    def kern(x):
        # scale each element
        i = nv.global_id(0)
        if i < x.shape[0]:
            x[i] = twice(x[i]) * SCALE + factor
    return kern


kern = make(FACTOR)
'''

_HELPERS = '''\
import numba_vulkan as nv


@nv.jit
def twice(v):
    return v + v
'''


def _forget():
    for name in ("ch_kernel", "ch_helpers"):
        sys.modules.pop(name, None)


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setattr(toolchain, "_package_part", lambda: "package:pinned")
    monkeypatch.delenv("NUMBA_VULKAN_CACHE", raising=False)
    directory = tmp_path / "src"
    directory.mkdir()
    (directory / "ch_kernel.py").write_text(_KERNEL)
    (directory / "ch_helpers.py").write_text(_HELPERS)
    yield directory
    _forget()


def _keys(directory):
    """(functions/ key, AOT key) of ``kern`` imported afresh from ``directory``."""
    _forget()
    importlib.invalidate_caches()
    sys.path.insert(0, str(directory))
    try:
        kern = importlib.import_module("ch_kernel").kern
    finally:
        sys.path.remove(str(directory))
    cache = kernelcache.function_key(kern.py_func, kern.options, SIG, THREADS, DEFAULT)
    assert cache is not None
    return cache, keys.content_key(kern)


def _edit(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    # A later modification time, so that Python does not read stale bytecode.
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2 * 10**9))


@pytest.mark.parametrize("file, old, new", [
    ("ch_helpers.py", "return v + v", "return v * 2.0"),     # a called device function
    ("ch_kernel.py", "SCALE = 2.0", "SCALE = 2.5"),          # a global constant
    ("ch_kernel.py", "FACTOR = 3.0", "FACTOR = 4.0"),        # a closure variable
    ("ch_kernel.py", "* SCALE +", "* SCALE -"),              # the kernel's own code
])
def test_code_changes_change_both_keys(project, file, old, new):
    cache, aot = _keys(project)
    _edit(project / file, old, new)
    cache2, aot2 = _keys(project)
    assert cache2 != cache and aot2 != aot


@pytest.mark.parametrize("file, old, new", [
    ("ch_kernel.py", "# scale each element", "# scales every element"),   # a comment
    ("ch_kernel.py", "\n\ndef make", "\n\n# lines above\n# move the kernel\n\ndef make"),
    ("ch_helpers.py", "\n\n@nv.jit", "\n# a helper\n\n@nv.jit"),
    ("ch_helpers.py", "return v + v", "return v + v  # twice"),
    ("ch_kernel.py", "", ""),                                               # touched only
])
def test_edits_that_keep_the_code_recompile_but_keep_the_aot_key(project, file, old, new):
    cache, aot = _keys(project)
    _edit(project / file, old, new)
    cache2, aot2 = _keys(project)
    assert aot2 == aot and cache2 != cache


def test_a_moved_project_recompiles_but_keeps_the_aot_key(project, tmp_path):
    cache, aot = _keys(project)
    moved = tmp_path / "elsewhere" / "src"
    shutil.copytree(project, moved, copy_function=shutil.copy2)
    cache2, aot2 = _keys(moved)
    assert aot2 == aot and cache2 != cache


def test_the_walk_reaches_the_kernel_and_what_it_calls_once_each(project):
    _keys(project)
    kern = sys.modules["ch_kernel"].kern
    twice = sys.modules["ch_helpers"].twice
    found = codehash.walk(kern.py_func, kern.options)
    assert found.functions == (kern.py_func, twice.py_func)
    assert (found.key, found.parts) == codehash.code_key_parts(kern.py_func, kern.options)
    # nv.global_id, a library function keyed by name, is not among them.
    assert b"ch_helpers.py" in kernelcache.source_stamp(found.functions[1])


_OVERLOADED = '''\
from numba.extending import overload

import numba_vulkan as nv


def bump(v):
    raise NotImplementedError


@overload(bump, target="generic")
def _bump(v):
    def impl(v):
        return v + 1.0
    return impl


@nv.jit(cache=True)
def kern(x):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] = bump(x[i])
'''


def test_an_edited_overload_in_the_kernels_file_recompiles(project):
    (project / "ch_kernel.py").write_text(_OVERLOADED)
    cache, aot = _keys(project)
    _edit(project / "ch_kernel.py", "v + 1.0", "v + 2.0")
    cache2, aot2 = _keys(project)
    # The AOT key cannot see it (docs/limitations.md); the functions/ key must.
    assert cache2 != cache
    assert aot2 == aot


def test_unkeyable_values_are_refused_by_both(project):
    _keys(project)
    module = sys.modules["ch_kernel"]
    module.SCALE = {"a": 1}
    kern = module.kern
    assert kernelcache.function_key(kern.py_func, kern.options, SIG, THREADS, DEFAULT) is None
    with pytest.raises(nv.AOTError,
                       match="global 'SCALE' read by make.<locals>.kern is a builtins.dict"):
        keys.content_key(kern)


def _namespace(source, **env):
    namespace = dict(env)
    exec(source, namespace)
    return namespace


def test_plain_python_functions_are_followed():
    one = _namespace("def f(v):\n    return v + 1\n")["f"]
    two = _namespace("def f(v):\n    return v + 2\n")["f"]
    kernel = "def k(x):\n    x[0] = f(x[0])\n"
    assert (codehash.code_key(_namespace(kernel, f=one)["k"])
            != codehash.code_key(_namespace(kernel, f=two)["k"]))


def test_shared_callees_are_hashed_once():
    # 25 levels, each calling the next twice: 2**25 paths, 26 functions.
    env = {"f0": numba.njit(lambda v: v)}
    for level in range(1, 26):
        env[f"f{level}"] = numba.njit(_namespace(
            f"def f(v):\n    return g(v) + g(v + 1)\n", g=env[f"f{level - 1}"])["f"])
    top = _namespace("def k(x):\n    x[0] = f25(x[0])\n", **env)["k"]
    assert len(codehash.code_key(top)) == 64
    # A change at the bottom reaches the top.
    env2 = dict(env, f0=numba.njit(lambda v: -v))
    for level in range(1, 26):
        env2[f"f{level}"] = numba.njit(_namespace(
            f"def f(v):\n    return g(v) + g(v + 1)\n", g=env2[f"f{level - 1}"])["f"])
    other = _namespace("def k(x):\n    x[0] = f25(x[0])\n", **env2)["k"]
    assert codehash.code_key(other) != codehash.code_key(top)


def test_too_many_functions_are_refused():
    helpers = tuple(numba.njit(_namespace(f"def f(v):\n    return v + {n}\n")["f"])
                    for n in range(codehash.MAX_FUNCTIONS))
    top = _namespace("def k(x):\n    x[0] = HELPERS[0](x[0])\n", HELPERS=helpers)["k"]
    with pytest.raises(codehash.Unkeyable, match="reaches more than 256 functions"):
        codehash.code_key(top)
    fewer = _namespace("def k(x):\n    x[0] = HELPERS[0](x[0])\n", HELPERS=helpers[1:])["k"]
    assert len(codehash.code_key(fewer)) == 64


def test_deep_call_chains_are_refused_not_a_recursion_error():
    previous = numba.njit(lambda v: v)
    for _ in range(codehash.MAX_DEPTH):
        previous = numba.njit(_namespace("def f(v):\n    return g(v)\n", g=previous)["f"])
    top = _namespace("def k(x):\n    x[0] = f(x[0])\n", f=previous)["k"]
    with pytest.raises(codehash.Unkeyable, match="calls nested more than 32 deep"):
        codehash.code_key(top)
    nested = 1
    for _ in range(10000):
        nested = (nested,)
    with pytest.raises(codehash.Unkeyable, match="nested too deeply"):
        codehash.code_key(_namespace("def k(x):\n    x[0] = T\n", T=nested)["k"])


def test_mutual_recursion_terminates_and_is_stable():
    source = ("def a(v):\n    return b(v - 1) if v > 0 else v\n"
              "def b(v):\n    return a(v - 1) if v > 0 else v\n"
              "def k(x):\n    x[0] = a(x[0]) + b(x[0])\n")

    def key():
        namespace = _namespace(source)
        for name in ("a", "b"):
            namespace[name] = numba.njit(namespace[name])
        return codehash.code_key(namespace["k"])
    assert key() == key()


def test_keys_do_not_depend_on_the_process(project):
    script = ("from ch_kernel import kern\n"
              "from numba_vulkan.store import codehash\n"
              "print(codehash.code_key(kern.py_func, kern.options))\n")
    _keys(project)
    kern = sys.modules["ch_kernel"].kern
    result = run_python("-c", script, path=[project], env={"PYTHONHASHSEED": "7"})
    assert result.stdout.strip() == codehash.code_key(kern.py_func, kern.options)


def test_importing_the_hasher_imports_no_numba():
    result = run_python("-c", "import sys, numba_vulkan.store.codehash\n"
                              "print([m for m in ('numba', 'llvmlite') if m in sys.modules])")
    assert result.stdout.strip() == "[]"


def _from_source(source, filename, optimize=-1, **env):
    """The namespace of ``source`` compiled as a file whose text linecache has."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = dict(env)
    exec(compile(source, filename, "exec", optimize=optimize), namespace)
    return namespace


_PORTABLE = '''
def helper(v):
    """Doubles."""
    return v * 2.0


def k(x):
    i = 0
    x[i] = helper(x[i]) + sum([v for v in (1.0, 2.0)])
'''


def test_the_key_is_the_source_not_the_bytecode():
    """What one Python version's bytecode differs in from another's leaves the
    key: here bytecode compiled with docstrings stripped (optimize=2)."""
    one = _from_source(_PORTABLE, "<portable one>")
    two = _from_source(_PORTABLE, "<portable two>", optimize=2)
    assert one["helper"].__code__.co_consts != two["helper"].__code__.co_consts
    key, parts = codehash.code_key_parts(one["k"])
    assert key == codehash.code_key(two["k"])
    assert not [p for p in parts if p.startswith("python ")], parts
    # Comments, blank lines and docstrings are not code; an edit is.
    edited = _PORTABLE.replace('"""Doubles."""', "# doubles\n\n")
    assert codehash.code_key(_from_source(edited, "<portable three>")["k"]) == key
    changed = _PORTABLE.replace("v * 2.0", "v * 3.0")
    assert codehash.code_key(_from_source(changed, "<portable four>")["k"]) != key


def test_code_without_source_is_keyed_by_its_python_versions_bytecode():
    function = _namespace("def k(x):\n    x[0] = 1\n")["k"]
    parts = codehash.code_key_parts(function)[1]
    assert f"python {codehash.BYTECODE_TAG}" in parts


def test_a_miss_from_another_pythons_bytecode_says_how_to_build_for_this_one():
    from numba_vulkan.aot.loader import lookup
    shipped = [{"key_parts": {"code": "1", "python cpython-399": "2"}}]
    message = lookup._bytecode_miss(shipped, {"code": "3"})
    assert "keyed by the bytecode of Python 3.99 (cpython-399)" in message
    assert "could not read the kernel's source" in message
    assert "ship the kernel's source" in message and "-m numba_vulkan.aot build" in message
    assert lookup._bytecode_miss([{"key_parts": {"code": "1"}}], {"code": "3"}) is None
