"""Every module the code generator parses into the IR model prints back to
the module LLVM reads from it, for kernels that between them reach every
pass: workgroup memory and atomics, libclc's math, complex numbers, loops
with ``break`` and 64-bit bounds, float16, contraction, subgroups,
``print``, error checks, device functions, and targets with a loop limit,
without float64 and int64, and with float16.

Only these kernels are checked in every run; ``pytest --ir-round-trip``
checks every parse of every test (tests/conftest.py), at the price of
parsing each module through LLVM twice more."""

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.base.target import LAVAPIPE_LOOP_LIMIT, TargetDescription
from numba_vulkan.llvmir import ir
from tests.helpers import checking_round_trips

GPU = TargetDescription()
LAVAPIPE = TargetDescription(loop_limit=LAVAPIPE_LOOP_LIMIT)
NARROW = TargetDescription(float64=False, int64=False)
FLOAT16 = TargetDescription(float16=True, float16_rte=True)

pytestmark = pytest.mark.filterwarnings("ignore::numba_vulkan.base.errors.NarrowingWarning")


def shared_and_atomics(a, out, hist):
    tile = nv.shared.array(64, np.float32)
    t = nv.local_id(0)
    i = nv.global_id(0)
    tile[t] = a[i] if i < a.shape[0] else np.float32(0)
    nv.barrier()
    s = np.float32(0)
    for j in range(8):
        s += tile[(t + j) % 64]
    nv.atomic.add(hist, i % 4, 1)
    if i < out.shape[0]:
        out[i] = s + tile[(t + 1) % 64]


def math_switch(a, out):
    i = nv.global_id(0)
    if i < a.shape[0]:
        x = a[i]
        k = i % 4
        if k == 0:
            v = np.sin(x)
        elif k == 1:
            v = np.exp(x) * 2
        elif k == 2:
            v = x ** 3
        else:
            v = -1.0
        out[i] = v


def complex_tuples(a, out):
    i = nv.global_id(0)
    if i < a.shape[0]:
        z = a[i]
        pair = (z.real, z.imag)
        out[i] = z * z.conjugate() + pair[1]


def searching_loop(a, n, out):
    i = nv.global_id(0)
    total = 0
    for j in range(n):
        v = a[(i + j) % a.shape[0]]
        if v < 0:
            break
        if v == 3:
            continue
        total += v
    if i < out.shape[0]:
        out[i] = total


def half_arithmetic(x, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        out[i] = x[i] * np.float16(1.5) + np.float16(0.25)


def muladd(x, y, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = x[i] * y[i] + x[i]


def subgroup_scan(x, out):
    i = nv.global_id(0)
    out[i] = nv.subgroup.inclusive_add(x[i]) + nv.subgroup.shuffle_up(x[i], 1)


def printing(x):
    i = nv.global_id(0)
    if i == 0:
        print("first", x[0], x.shape[0])


def checked_gather(x, index, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = twice(x[index[i]])


@nv.jit
def twice(v):
    return v + v


CASES = {
    "shared and atomics": (shared_and_atomics, {},
                           "void(float32[::1], float32[::1], int32[::1])", LAVAPIPE),
    "math and a switch": (math_switch, {}, "void(float64[::1], float64[::1])", GPU),
    "math and a switch, narrowed": (math_switch, {}, "void(float64[::1], float64[::1])", NARROW),
    "complex tuples": (complex_tuples, {}, "void(complex128[::1], complex128[::1])", GPU),
    "loop with break, GPU": (searching_loop, {}, "void(int64[::1], int64, int64[::1])", GPU),
    "loop with break, lavapipe": (searching_loop, {}, "void(int64[::1], int64, int64[::1])",
                                  LAVAPIPE),
    "float16": (half_arithmetic, {}, "void(float16[::1], float16[::1])", FLOAT16),
    "float16, emulated": (half_arithmetic, {}, "void(float16[::1], float16[::1])", GPU),
    "contraction": (muladd, {"fastmath": {"contract"}},
                    "void(float32[::1], float32[::1], float32[::1])",
                    GPU.with_features(fused_fma=True)),
    "subgroups": (subgroup_scan, {}, "void(int32[::1], int32[::1])", GPU),
    "print": (printing, {}, "void(float32[::1])", GPU),
    "error checks and a device function": (checked_gather, {"boundscheck": True},
                                           "void(float32[::1], int32[::1], float32[::1])",
                                           LAVAPIPE),
}


@pytest.mark.parametrize("case", CASES)
def test_every_module_parsed_for_a_kernel_round_trips(case, monkeypatch):
    function, options, sig, target = CASES[case]
    seen = []
    monkeypatch.setattr(ir, "parse", checking_round_trips(ir.parse, seen))
    monkeypatch.setenv("NUMBA_VULKAN_CACHE", "0")
    # A dispatcher of its own: none compiled this kernel before in the process.
    nv.jit(**options)(function).compile(sig, target=target)
    assert seen, "the kernel compiled without the IR model parsing a module"
