"""The AOT content key: every input changes it, paths and times do not."""

import types

import numba
import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.store.keys import content_key
from tests.helpers import run_python

KERNEL = '''
import numba_vulkan as nv

def kernel(x, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        out[i] = helper(x[i]) * SCALE + OFFSET[0]
'''


def make(source=KERNEL, filename="kernels.py", options=None, **env):
    """The kernel ``kernel`` of ``source``, with ``env`` as its module globals."""
    namespace = {"__name__": "generated", "SCALE": 2.0, "OFFSET": (1.0,),
                 "helper": numba.njit(lambda v: v + 1)}
    namespace.update(env)
    exec(compile(source, filename, "exec"), namespace)
    return nv.jit(namespace["kernel"], **(options or {}))


def njit_helper(source):
    namespace = {}
    exec(compile(source, "helpers.py", "exec"), namespace)
    return numba.njit(namespace["helper"])


def key_of(**kwargs):
    return content_key(make(**kwargs))


def test_same_code_same_key_whatever_the_file_and_line():
    base = key_of()
    assert key_of(filename="/elsewhere/entirely/kernels.py") == base
    assert key_of(source="\n\n# moved down\n" + KERNEL) == base


@pytest.mark.parametrize("change", [
    KERNEL.replace("* SCALE", "/ SCALE"),                 # bytecode
    KERNEL.replace("OFFSET[0]", "OFFSET[1]"),             # a constant
    KERNEL.replace("nv.global_id", "nv.local_id"),        # a name
    KERNEL.replace("def kernel(x, out):", "def kernel(x, out, n=3):"),  # arguments
    KERNEL + "\n    def inner():\n        return 1\n",   # a nested code object...
])
def test_code_changes_change_the_key(change):
    assert key_of(source=change) != key_of()


def test_nested_code_constants_are_part_of_the_key():
    nested = KERNEL + "\n    def inner():\n        return {}\n"
    assert key_of(source=nested.format(1)) != key_of(source=nested.format(2))


def test_called_function_code_and_options_change_the_key():
    one = njit_helper("def helper(v):\n    return v + 1\n")
    two = njit_helper("def helper(v):\n    return v + 2\n")
    assert key_of(helper=one) == key_of(helper=njit_helper("def helper(v):\n    return v + 1\n"))
    assert key_of(helper=one) != key_of(helper=two)
    fast = numba.njit(fastmath=True)(one.py_func)
    assert key_of(helper=one) != key_of(helper=fast)


def test_called_nv_jit_function_is_followed():
    first = nv.jit(njit_helper("def helper(v):\n    return v * 3\n").py_func)
    second = nv.jit(njit_helper("def helper(v):\n    return v * 4\n").py_func)
    assert key_of(helper=first) != key_of(helper=second)


def test_functions_called_by_called_functions_are_followed():
    inner_a = numba.njit(lambda v: v - 1)
    inner_b = numba.njit(lambda v: v - 2)
    outer = "def helper(v):\n    return inner(v)\n"
    namespace_a, namespace_b = {"inner": inner_a}, {"inner": inner_b}
    exec(compile(outer, "h.py", "exec"), namespace_a)
    exec(compile(outer, "h.py", "exec"), namespace_b)
    assert (key_of(helper=numba.njit(namespace_a["helper"]))
            != key_of(helper=numba.njit(namespace_b["helper"])))


def test_recursive_functions_terminate():
    namespace = {}
    exec("def helper(v):\n    return helper(v - 1) if v > 0 else v\n", namespace)
    namespace["helper"] = numba.njit(namespace["helper"])
    assert len(key_of(helper=namespace["helper"])) == 64


@pytest.mark.parametrize("name, first, second", [
    ("SCALE", 2.0, 2.5),
    ("SCALE", 2, 2.0),                          # same value, other type
    ("SCALE", 0.0, -0.0),
    ("SCALE", np.float32(2), np.float64(2)),
    ("SCALE", "a", "b"),
    ("OFFSET", (1.0,), (1.0, 2.0)),
    ("OFFSET", np.array([1, 2], np.int32), np.array([1, 3], np.int32)),
    ("OFFSET", np.array([1, 2], np.int32), np.array([1, 2], np.int64)),
    ("OFFSET", np.arange(6).reshape(2, 3), np.arange(6).reshape(3, 2)),
    ("OFFSET", np.float32, np.float64),
    ("OFFSET", np.dtype("f4"), np.dtype("f8")),
])
def test_global_values_change_the_key(name, first, second):
    assert key_of(**{name: first}) != key_of(**{name: second})


def test_equal_global_values_give_equal_keys():
    a = key_of(OFFSET=np.array([1.5, 2.5]))
    assert key_of(OFFSET=np.array([1.5, 2.5])) == a


def test_module_attribute_chains_are_values():
    source = KERNEL.replace("SCALE", "settings.SCALE")
    module_a = types.ModuleType("settings")
    module_a.SCALE = 1.0
    module_b = types.ModuleType("settings")
    module_b.SCALE = 3.0
    assert key_of(source=source, settings=module_a) != key_of(source=source, settings=module_b)


def test_closure_values_change_the_key():
    source = ("import numba_vulkan as nv\n"
              "def factory(scale):\n"
              "    def kernel(x):\n"
              "        x[nv.global_id(0)] *= scale\n"
              "    return kernel\n")
    namespace = {}
    exec(source, namespace)
    a = nv.jit(namespace["factory"](2.0))
    b = nv.jit(namespace["factory"](3.0))
    assert content_key(a) != content_key(b)


def test_kernel_options_change_the_key():
    assert key_of(options={"fastmath": True}) != key_of()
    # Whether the JIT caches on disk does not change the code.
    assert key_of(options={"cache": True}) == key_of()


@pytest.mark.parametrize("value", [{"a": 1}, object(), [1, {2}]])
def test_globals_without_a_stable_value_are_refused(value):
    with pytest.raises(nv.AOTError, match="global 'SCALE' read by kernel"):
        key_of(SCALE=value)


def test_key_is_the_same_in_other_processes_and_directories(tmp_path):
    script = ("from examples.saxpy import saxpy\n"
              "from numba_vulkan.store.keys import content_key\n"
              "print(content_key(saxpy))\n")
    keys = set()
    for seed in ("1", "2"):
        result = run_python("-c", script, cwd=tmp_path, env={"PYTHONHASHSEED": seed})
        keys.add(result.stdout.strip())
    from examples.saxpy import saxpy
    assert keys == {content_key(saxpy)}
