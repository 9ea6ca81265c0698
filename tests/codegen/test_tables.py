"""libclc's constant tables as Function variables of the entry point
(codegen/tables.py): valid for Vulkan 1.2 and 1.3, and the same results as
the Private tables the backend writes."""

import math

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.base.target import TargetDescription
from numba_vulkan.codegen import tables
from numba_vulkan.spirv import binary as spirv
from numba_vulkan.spirv import opcodes
from numba_vulkan.spirv import tools


def _kernel():
    # libclc's cbrt float32 reads three tables, cosh float64 six, sin float64
    # one (PIBITS, 64-bit words: the math library's sin takes libclc's for
    # arguments this large); a fresh dispatcher per placement, so that each
    # compiles.
    def tabled(x, y, out32, out64):
        i = nv.global_id(0)
        if i < x.shape[0]:
            out32[i] = np.cbrt(x[i])
            out64[i] = math.sin(np.float64(x[i]) * 1e6) + math.cosh(np.float64(y[i]))
    return nv.jit(tabled)


def _variables(binary):
    """Storage classes of the module's variables, and the entry point's interface."""
    _, instructions = spirv.parse(binary)
    classes = [inst[3] for inst in instructions if spirv.opcode(inst) == opcodes.OpVariable]
    entry = next(inst for inst in instructions if spirv.opcode(inst) == opcodes.OpEntryPoint)
    return classes, entry


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(77)
    x = rng.uniform(0.1, 30, 2048).astype(np.float32)
    y = rng.uniform(-8, 8, 2048).astype(np.float32)
    x[:4] = [0.0, np.inf, 1.0, 1e-30]
    y[:4] = [0.5, -1.0, np.nan, 3.0]
    return x, y


@pytest.fixture(autouse=True)
def no_cache(monkeypatch):
    # The placement is no part of a kernel's cache key: compile every time.
    monkeypatch.setenv("NUMBA_VULKAN_CACHE", "0")


def _run(placement, monkeypatch, inputs):
    monkeypatch.setattr(tables, "PLACEMENT", placement)
    x, y = inputs
    out32, out64 = np.zeros_like(x), np.zeros(x.size, np.float64)
    kernel = _kernel()
    kernel.forall(x.size)(x, y, out32, out64)
    (compiled,) = kernel._compiled.values()
    return out32, out64, compiled.spirv


@pytest.mark.parametrize("placement", ["function", "function_store"])
def test_tables_in_the_function_give_the_same_results(placement, monkeypatch, inputs):
    want32, want64, private = _run("private", monkeypatch, inputs)
    got32, got64, binary = _run(placement, monkeypatch, inputs)
    np.testing.assert_array_equal(got32, want32)
    np.testing.assert_array_equal(got64, want64)
    classes, entry = _variables(private)
    count = classes.count(opcodes.StorageClassPrivate)
    assert count == 10  # cosh's six, cbrt's three, sin's one
    classes, moved_entry = _variables(binary)
    assert opcodes.StorageClassPrivate not in classes
    assert classes.count(opcodes.StorageClassFunction) == count
    assert len(moved_entry) == len(entry) - count
    stores = [inst for inst in spirv.parse(binary)[1] if spirv.opcode(inst) == opcodes.OpStore]
    assert len(stores) == (2 if placement == "function" else 2 + count)


@pytest.mark.parametrize("vulkan", [(1, 2), (1, 3)])
@pytest.mark.parametrize("placement", ["function", "function_store"])
def test_tables_in_the_function_are_valid(vulkan, placement, monkeypatch):
    monkeypatch.setattr(tables, "PLACEMENT", placement)
    target = TargetDescription(vulkan=vulkan)
    compiled = _kernel().compile("(float32[:], float32[:], float32[:], float64[:])",
                                 threads=(64, 1, 1), target=target)
    tools.validate(compiled.spirv, target.target_env)
    classes, _ = _variables(compiled.spirv)
    assert opcodes.StorageClassPrivate not in classes


def test_private_is_the_default_and_unknown_placements_are_refused():
    assert tables.PLACEMENT == "private"
    with pytest.raises(ValueError, match="unknown table placement 'constant'"):
        tables.place(b"", "constant")
