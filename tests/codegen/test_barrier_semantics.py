"""Workgroup barriers order storage-buffer memory only where the program can need it.

``numba_vulkan/codegen/barriers.py`` gives a barrier ``AcquireRelease |
WorkgroupMemory`` (0x108) unless a buffer write can come before it, or a
buffer write after it while a buffer load before it is not settled into
workgroup memory; those keep ``UniformMemory`` too (0x148). The modules are
compiled for a GPU target (no loop limit, as on the H200), without a GPU;
the kernels that need buffer ordering also run on lavapipe.
"""

import numpy as np
import pytest

import numba_vulkan as nv
from numba import float32, int32
from numba_vulkan.base import config
from numba_vulkan.spirv import binary as spirv
from numba_vulkan.spirv import opcodes as spv
from numba_vulkan.codegen import barriers
from numba_vulkan.llvmir import ir
from numba_vulkan.base.target import TargetDescription
from tests.base.test_gpu_target import _tiled_matmul

WORKGROUP = 0x108
FULL = 0x148
GPU = TargetDescription(vulkan=(1, 3), float32_atomic_add=True)


def semantics(binary):
    """The memory semantics of each OpControlBarrier of a module, in order."""
    _, instructions = spirv.parse(binary)
    constants = {i[2]: i[3] for i in instructions if (i[0] & 0xFFFF) == spv.OpConstant}
    return [constants[i[3]] for i in instructions
            if (i[0] & 0xFFFF) == spv.OpControlBarrier]


@pytest.fixture(scope="module", autouse=True)
def _uncached():
    with config.overriding(NUMBA_VULKAN_CACHE="0"):
        yield


def gpu_semantics(kernel, sig, threads=(64, 1, 1)):
    return semantics(kernel.compile(sig, threads=threads, target=GPU).spirv)


#: The 16x16 tiled product of test_gpu_target, as a plain function to compile
#: under each variant.
_tiled = _tiled_matmul.py_func


@nv.jit
def _transpose(a, out):
    tile = nv.shared.array((32, 33), float32)
    tx, ty = nv.local_id(0), nv.local_id(1)
    x = nv.group_id(0) * 32 + tx
    y = nv.group_id(1) * 32 + ty
    for k in range(0, 32, 8):
        if x < a.shape[1] and y + k < a.shape[0]:
            tile[ty + k, tx] = a[y + k, x]
    nv.barrier()
    x = nv.group_id(1) * 32 + tx
    y = nv.group_id(0) * 32 + ty
    for k in range(0, 32, 8):
        if x < a.shape[0] and y + k < a.shape[1]:
            out[y + k, x] = tile[tx, ty + k]


@nv.jit
def _scan(x, out):
    # The loaded value stays in a register past the first barrier too; the
    # store into workgroup memory before it settles the load all the same.
    temp = nv.shared.array(64, int32)
    tid = nv.local_id(0)
    i = nv.global_id(0)
    temp[tid] = x[i] if i < x.shape[0] else 0
    nv.barrier()
    offset = 1
    while offset < 64:
        v = temp[tid - offset] if tid >= offset else 0
        nv.barrier()
        temp[tid] += v
        nv.barrier()
        offset *= 2
    if i < x.shape[0]:
        out[i] = temp[tid]


@nv.jit
def _raw_through_global(a, out):
    # Each invocation reads what its neighbour in the group wrote to a buffer.
    i = nv.global_id(0)
    a[i] = i * 3 + 1
    nv.barrier()
    size = nv.local_size(0)
    out[i] = a[nv.group_id(0) * size + (nv.local_id(0) + 1) % size]


@nv.jit
def _shift(a):
    # In place: every read must happen before any neighbour's write.
    i = nv.global_id(0)
    v = a[i - 1] if nv.local_id(0) > 0 else a[i]
    nv.barrier()
    a[i] = v


@nv.jit
def _store_later_in_loop(x, out):
    tile = nv.shared.array(64, float32)
    t = nv.local_id(0)
    for k in range(x.shape[0] // 64):
        nv.barrier()
        tile[t] = float32(k)
        nv.barrier()
        out[k * 64 + t] = tile[63 - t]


@nv.jit
def _count(out):
    c = nv.barrier_count(nv.local_id(0) % 3 == 0)
    out[nv.global_id(0)] = c


@nv.jit
def _count_after_store(flags, out):
    flags[nv.global_id(0)] = 1
    c = nv.barrier_count(nv.local_id(0) % 3 == 0)
    out[nv.global_id(0)] = c


_F2 = "float32[:, ::1]"


def test_tiled_matmul_transpose_and_scan_order_workgroup_memory_only():
    tiled = nv.jit(_tiled)
    assert gpu_semantics(tiled, f"void({_F2}, {_F2}, {_F2})", (16, 16, 1)) == [WORKGROUP] * 2
    assert gpu_semantics(_transpose, f"void({_F2}, {_F2})", (32, 8, 1)) == [WORKGROUP]
    found = gpu_semantics(_scan, "void(int32[::1], int32[::1])")
    assert found and set(found) == {WORKGROUP}


def test_a_buffer_write_before_the_barrier_keeps_buffer_ordering():
    assert gpu_semantics(_raw_through_global, "void(int32[::1], int32[::1])") == [FULL]
    # Through the back edge: the store after the second barrier comes before
    # the next trip's first; every barrier of the loop may be the next.
    assert set(gpu_semantics(_store_later_in_loop, "void(float32[::1], float32[::1])")) == {FULL}


def test_a_load_still_in_a_register_keeps_buffer_ordering():
    assert gpu_semantics(_shift, "void(int32[::1])") == [FULL]


def test_counted_barriers_take_the_same_rule():
    assert gpu_semantics(_count, "void(int64[::1])") == [WORKGROUP] * 4
    assert gpu_semantics(_count_after_store, "void(int32[::1], int64[::1])") == [FULL] * 4


def test_the_full_barriers_variant_keeps_buffer_ordering_everywhere():
    from benchmarks import bench_variants
    with bench_variants.active("full_barriers"):
        found = gpu_semantics(nv.jit(_tiled), f"void({_F2}, {_F2}, {_F2})", (16, 16, 1))
    assert found == [FULL] * 2


def test_what_needs_buffer_ordering_runs_right_on_lavapipe():
    a = np.zeros(256, np.int32)
    out = np.zeros(256, np.int32)
    _raw_through_global[4, 64](a, out)
    written = np.arange(256, dtype=np.int32) * 3 + 1
    np.testing.assert_array_equal(a, written)
    np.testing.assert_array_equal(out, np.roll(written.reshape(4, 64), -1, axis=1).ravel())

    values = np.random.default_rng(7).integers(-1000, 1000, 256).astype(np.int32)
    shifted = values.copy()
    _shift[4, 64](shifted)
    expected = values.reshape(4, 64).copy()
    expected[:, 1:] = values.reshape(4, 64)[:, :-1]
    np.testing.assert_array_equal(shifted, expected.ravel())


# The analysis on IR: what it cannot see through keeps the barrier whole.

_IR = """\
target triple = "spirv1.6-unknown-vulkan1.3-compute"

@tile = internal addrspace(3) global [64 x float] undef, align 4

declare void @llvm.spv.group.memory.barrier.with.group.sync() #0

declare void @{callee}(ptr)

define void @main(ptr addrspace(11) %buf) {{
entry:
  %p = alloca float, align 4
  store float 1.0, ptr %p, align 4
  {call}
  %x = load float, ptr addrspace(11) %buf, align 4
  br i1 true, label %keep, label %skip
keep:
  store float %x, ptr addrspace(3) @tile, align 4
  br label %skip
skip:
  {settle}
  call void @llvm.spv.group.memory.barrier.with.group.sync()
  store float 2.0, ptr addrspace(11) %buf, align 4
  ret void
}}

attributes #0 = {{ convergent nounwind }}
"""


def _barriers_after(text):
    module = ir.parse(text)
    barriers.workgroup_only(module)
    return [inst.callee for inst in module.function("@main").instructions()
            if inst.callee in (barriers.BARRIER, barriers.PLACEHOLDER)]


def test_private_stores_and_settled_loads_need_no_buffer_ordering():
    settled = "store float %x, ptr addrspace(3) @tile, align 4"
    assert _barriers_after(_IR.format(callee="f", call="", settle=settled)) == \
        [barriers.PLACEHOLDER]


def test_a_load_settled_on_one_path_only_keeps_buffer_ordering():
    assert _barriers_after(_IR.format(callee="f", call="", settle="")) == [barriers.BARRIER]


def test_an_unknown_call_keeps_buffer_ordering():
    settled = "store float %x, ptr addrspace(3) @tile, align 4"
    text = _IR.format(callee="mystery", call="call void @mystery(ptr %p)", settle=settled)
    assert _barriers_after(text) == [barriers.BARRIER]


_PIPELINED = """\
target triple = "spirv1.6-unknown-vulkan1.3-compute"

@tile = internal addrspace(3) global [64 x float] undef, align 4

declare void @llvm.spv.group.memory.barrier.with.group.sync() #0

define void @main(ptr addrspace(11) %buf) {{
entry:
  br label %loop
loop:
  %p = phi float [ 0.0, %entry ], [ %x, %loop ]
  %x = load float, ptr addrspace(11) %buf, align 4
  store float {stored}, ptr addrspace(3) @tile, align 4
  call void @llvm.spv.group.memory.barrier.with.group.sync()
  %c = fcmp olt float %p, 1.0
  br i1 %c, label %loop, label %exit
exit:
  store float 2.0, ptr addrspace(11) %buf, align 4
  ret void
}}

attributes #0 = {{ convergent nounwind }}
"""


def test_a_load_stored_only_on_the_next_trip_keeps_buffer_ordering():
    # %p holds the previous trip's load: this trip's is still in flight.
    assert _barriers_after(_PIPELINED.format(stored="%p")) == [barriers.BARRIER]
    assert _barriers_after(_PIPELINED.format(stored="%x")) == [barriers.PLACEHOLDER]


@nv.jit
def _shared_histogram(data, bins):
    counts = nv.shared.array(16, int32)
    t = nv.local_id(0)
    if t < 16:
        counts[t] = 0
    nv.barrier()
    i = nv.global_id(0)
    if i < data.shape[0]:
        nv.atomic.add(counts, data[i] % 16, 1)
    nv.barrier()
    if t < 16:
        nv.atomic.add(bins, t, counts[t])


def test_a_load_settled_by_an_atomic_at_its_address():
    # The workgroup atomic cannot be made before the loaded bin is there,
    # but an invocation with i >= data.shape[0] skips it: no load, nothing
    # in flight, either way.
    assert gpu_semantics(_shared_histogram, "void(int32[::1], int32[::1])") == [WORKGROUP] * 2
