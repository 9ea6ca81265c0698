"""Storage buffers a kernel never writes are decorated NonWritable, and a
launch that binds one array both there and where the kernel writes runs the
module without those decorations."""

import dataclasses

import numpy as np

import numba_vulkan as nv
from numba_vulkan.spirv import binary as spirv
from tests.helpers import assert_valid_spirv


@nv.jit
def scale_add(src, weights, dst):
    i = nv.global_id(0)
    if i < dst.shape[0]:
        dst[i] = src[i] * weights[0] + dst[i]


@nv.jit
def bump(counts, values):
    i = nv.global_id(0)
    if i < values.shape[0]:
        nv.atomic.add(counts, 0, values[i])


def _only_plan(kernel):
    (plan,) = kernel._plans.values()
    return plan


def _readonly_names(kernel):
    plan = _only_plan(kernel)
    names = {p.binding: p.name for p in plan.kernel.params if p.kind == "array"}
    return sorted(names[b] for b in spirv.nonwritable_bindings(plan.kernel.spirv))


def test_arrays_the_kernel_never_writes_are_decorated_nonwritable():
    src = np.arange(64, dtype=np.float32)
    dst = np.ones(64, np.float32)
    scale_add[1, 64](src, np.float32([2]), dst)
    np.testing.assert_array_equal(dst, src * 2 + 1)
    assert_valid_spirv(_only_plan(scale_add).kernel)
    assert _readonly_names(scale_add) == ["src", "weights"]
    # An atomic writes: only the values are read-only.
    values = np.arange(32, dtype=np.int32)
    counts = np.zeros(1, np.int32)
    bump[1, 32](counts, values)
    assert counts[0] == values.sum()
    assert _readonly_names(bump) == ["values"]


def test_a_launch_binding_one_array_read_only_and_written_runs_without_the_decorations():
    host = np.arange(256, dtype=np.float32)
    weights = nv.to_device(np.float32([3]))
    a, other = nv.to_device(host), nv.to_device(host)
    scale_add[4, 64](other, weights, a)
    pipeline = _only_plan(scale_add).pipeline
    assert pipeline._aliased is None
    np.testing.assert_array_equal(a.copy_to_host(), host * 4)
    # The same array read (src) and written (dst); weights, read-only
    # twice over, would need nothing.
    scale_add[4, 64](a, weights, a)
    np.testing.assert_array_equal(a.copy_to_host(), host * 16)
    aliased = pipeline._aliased
    assert aliased is not None and aliased._readonly == ()
    kernel = _only_plan(scale_add).kernel
    stripped = spirv.without_nonwritable(kernel.spirv)
    assert spirv.nonwritable_bindings(stripped) == set()
    assert_valid_spirv(dataclasses.replace(kernel, spirv=stripped))
    # Two read-only bindings of one buffer keep the decorated module.
    before = aliased
    ones = nv.to_device(np.ones(256, np.float32))
    scale_add[4, 64](ones, ones, a)
    assert pipeline._aliased is before
    np.testing.assert_array_equal(a.copy_to_host(), host * 16 + 1)
