"""The compile service: one lookup order for the JIT, ufuncs and the AOT build."""

import pytest

import numba_vulkan as nv
from numba_vulkan import store
from numba_vulkan.aot.loader import lookup
from numba_vulkan.api import service
from numba_vulkan.base.request import KernelRequest
from numba_vulkan.compiler import stages


def _copy(x, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        out[i] = x[i]


SIG = ("float32[1d,C]", "float32[1d,C]")


@pytest.fixture
def asked(monkeypatch):
    """Where the service looked, in order; every place misses but the compiler."""
    order = []

    def miss(name, value=None):
        def look(*args, **kwargs):
            order.append(name)
            return value
        return look

    monkeypatch.setattr(lookup, "find", miss("aot"))
    monkeypatch.setattr(store, "function_key", miss("functions key", "key"))
    monkeypatch.setattr(store, "load_compiled", miss("functions"))
    monkeypatch.setattr(store, "module_key", miss("kernels key", "key"))
    monkeypatch.setattr(store, "load_module", miss("kernels"))
    monkeypatch.setattr(store, "store_module", miss("store kernels"))
    monkeypatch.setattr(store, "store_compiled", miss("store functions"))
    for name in ("lower", "generate"):
        monkeypatch.setattr(stages, name, _recorded(order, name, getattr(stages, name)))
    return order


def _recorded(order, name, function):
    def run(*args, **kwargs):
        order.append(name)
        return function(*args, **kwargs)
    return run


def test_one_order_memory_aot_functions_kernels_compile(asked):
    dispatcher = nv.jit(cache=True)(_copy)
    request = KernelRequest(_copy, SIG, (64, 1, 1), nv.TargetDescription(), {"cache": True})
    memory = {}
    first = service.kernel(dispatcher, request, memory)
    assert asked == ["aot", "functions key", "functions", "lower", "kernels key", "kernels",
                     "generate", "store kernels", "store functions"]
    asked.clear()
    assert service.kernel(dispatcher, request, memory) is first
    assert asked == []


def test_the_aot_build_and_shared_memory_variants_skip_what_cannot_hold_them(asked):
    dispatcher = nv.jit(cache=True)(_copy)
    # The AOT build makes the AOT directories: it does not search them.
    request = KernelRequest(_copy, SIG, (64, 1, 1), nv.TargetDescription(), {"cache": True})
    service.kernel(dispatcher, request, shipped=False)
    assert asked[:2] == ["functions key", "functions"]
    asked.clear()
    # The functions/ tier's key does not tell sizes of dynamic shared memory apart.
    service.kernel(dispatcher, KernelRequest(_copy, SIG, (64, 1, 1), nv.TargetDescription(),
                                             {"cache": True}, shared_bytes=256))
    assert asked[:3] == ["aot", "lower", "kernels key"]


def test_a_kernels_tier_hit_is_the_compiled_module(asked, monkeypatch):
    request = KernelRequest(_copy, SIG, (64, 1, 1), nv.TargetDescription())
    compiled = stages.compile(request)
    monkeypatch.setattr(store, "load_module", lambda key, label, make: make(store.CachedModule(
        compiled.spirv, compiled.llvm_ir, compiled.capabilities, False)))
    asked.clear()
    found = service.kernel(nv.jit(_copy), request)
    assert asked == ["aot", "lower", "kernels key"]
    assert found == compiled


_VECTORIZE_AFTER_A_COMPILE = """
import numpy as np
import numba_vulkan as nv

@nv.jit
def fill(out):
    out[nv.global_id(0)] = 2.0

out = np.zeros(8, np.float32)
fill.forall(8)(out)
import numba

@numba.vectorize(["float32(float32)"], target="vulkan")
def twice(x):
    return x * 2

print(out.sum(), twice(np.arange(4, dtype=np.float32)).tolist())
"""


def test_numba_vectorize_takes_the_vulkan_target_after_a_first_compile():
    """Numba was not loaded when numba_vulkan was imported: the first compile
    registers ``target="vulkan"`` with Numba's ufunc builders."""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", _VECTORIZE_AFTER_A_COMPILE],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["16.0", "[0.0,", "2.0,", "4.0,", "6.0]"]


def test_nv_jit_takes_signatures_and_compiles_them_when_decorating():
    import numpy as np

    @nv.jit(["void(float32[::1])", "void(int32[::1])"])
    def double(a):
        i = nv.global_id(0)
        if i < a.shape[0]:
            a[i] = 2 * a[i]

    assert len(double._compiled) == 2
    x = np.arange(5, dtype=np.float32)
    double.forall(5)(x)
    np.testing.assert_array_equal(x, 2 * np.arange(5, dtype=np.float32))
    one = nv.jit("void(float32[::1])")(double.py_func)
    assert len(one._compiled) == 1
