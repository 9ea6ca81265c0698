"""Invocations that cooperate: ids, workgroup memory, barriers, private
arrays and atomics, checked exactly (or to float tolerance) against NumPy."""

import numpy as np
import pytest

import numba_vulkan as nv
from tests.helpers import assert_valid_spirv, compiled_kernels

TILE = 8
GROUP = 64


@nv.jit
def where_am_i(out):
    x, y, z = nv.global_id(0), nv.global_id(1), nv.global_id(2)
    if x < out.shape[0] and y < out.shape[1] and z < out.shape[2]:
        out[x, y, z, 0] = nv.local_id(0) + 10 * nv.local_id(1) + 100 * nv.local_id(2)
        out[x, y, z, 1] = nv.group_id(0) + 10 * nv.group_id(1) + 100 * nv.group_id(2)
        out[x, y, z, 2] = nv.local_size(0) + 10 * nv.local_size(1) + 100 * nv.local_size(2)
        out[x, y, z, 3] = nv.num_groups(0) + 10 * nv.num_groups(1) + 100 * nv.num_groups(2)
        out[x, y, z, 4] = nv.global_size(0) + 10 * nv.global_size(1) + 100 * nv.global_size(2)


@nv.jit
def group_sum(x, total, partial):
    """Tree reduction in workgroup memory, one atomic per workgroup."""
    s = nv.shared.array(GROUP, x.dtype)
    t = nv.local_id(0)
    i = nv.global_id(0)
    s[t] = x[i] if i < x.shape[0] else 0
    nv.barrier()
    step = GROUP // 2
    while step > 0:
        if t < step:
            s[t] += s[t + step]
        nv.barrier()
        step //= 2
    if t == 0:
        partial[nv.group_id(0)] = s[0]
        nv.atomic.add(total, 0, s[0])


@nv.jit
def tiled_matmul(a, b, c):
    sa = nv.shared.array((TILE, TILE), np.float32)
    sb = nv.shared.array((TILE, TILE), np.float32)
    tx, ty = nv.local_id(0), nv.local_id(1)
    row = nv.group_id(1) * TILE + ty
    col = nv.group_id(0) * TILE + tx
    acc = np.float32(0)
    for t in range((a.shape[1] + TILE - 1) // TILE):
        k = t * TILE
        sa[ty, tx] = a[row, k + tx] if row < a.shape[0] and k + tx < a.shape[1] else 0
        sb[ty, tx] = b[k + ty, col] if k + ty < b.shape[0] and col < b.shape[1] else 0
        nv.barrier()
        for j in range(TILE):
            acc += sa[ty, j] * sb[j, tx]
        nv.barrier()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


@nv.jit
def histogram(x, bins):
    """Per-workgroup histogram in workgroup memory, merged with atomics."""
    h = nv.shared.array(16, np.uint32)
    t = nv.local_id(0)
    if t < 16:
        h[t] = 0
    nv.barrier()
    i = nv.global_id(0)
    if i < x.shape[0]:
        nv.atomic.add(h, x[i] % 16, 1)
    nv.barrier()
    if t < 16:
        nv.atomic.add(bins, t, h[t])


@nv.jit
def reverse_in_groups(x, out):
    """Needs the barrier: each invocation reads what another one wrote."""
    s = nv.shared.array(GROUP, np.int32)
    t = nv.local_id(0)
    i = nv.global_id(0)
    s[t] = x[i]
    nv.barrier()
    out[i] = s[GROUP - 1 - t]


@nv.jit
def sort_rows(x, out):
    """A private array per invocation, indexed at run time."""
    i = nv.global_id(0)
    if i < x.shape[0]:
        buf = nv.local.array(8, np.int32)
        for k in range(8):
            buf[k] = x[i, k]
        for k in range(8):
            for j in range(7 - k):
                if buf[j] > buf[j + 1]:
                    buf[j], buf[j + 1] = buf[j + 1], buf[j]
        for k in range(8):
            out[i, k] = buf[k]


@nv.jit
def every_atomic(vals, ints, uints, floats, old):
    i = nv.global_id(0)
    if i < vals.shape[0]:
        v = vals[i]
        old[i, 0] = nv.atomic.add(ints, 0, 1)
        old[i, 1] = nv.atomic.sub(ints, 1, v)
        old[i, 2] = nv.atomic.max(ints, 2, v)
        old[i, 3] = nv.atomic.min(ints, 3, v)
        nv.atomic.and_(ints, 4, v)
        nv.atomic.or_(ints, 5, v)
        nv.atomic.xor(ints, (6,), v)
        old[i, 4] = nv.atomic.exch(ints, -1, v)
        nv.atomic.max(uints, 0, np.uint32(v & 0xFFFF))
        nv.atomic.min(uints, 1, np.uint32(v & 0xFFFF))
        old[i, 5] = np.int32(nv.atomic.add(floats, 0, np.float32(1)))
        nv.atomic.sub(floats, 1, np.float32(v) * np.float32(0.25))
        nv.atomic.max(floats, 2, np.float32(v))
        nv.atomic.min(floats, 3, np.float32(v))
        # A ticket from compare-and-swap: retry until this invocation's
        # increment is the one that lands.
        seen = ints[8]
        while True:
            prev = nv.atomic.cas(ints, 8, seen, seen + 1)
            if prev == seen:
                old[i, 6] = seen
                break
            seen = prev
        nv.atomic.add(uints, (2,), np.uint32(i % 2))


@nv.jit
def atomics_2d(grid, counts):
    i = nv.global_id(0)
    if i < counts.shape[0]:
        nv.atomic.add(grid, (i % 3, -1 - i % 2), 1)
        nv.atomic.compare_and_swap(counts, i, np.float32(0), np.float32(i))


def _check_modules(*kernels):
    for kernel in kernels:
        compiled = compiled_kernels(kernel)
        assert compiled
        for k in compiled:
            assert_valid_spirv(k)


def test_ids_and_sizes_in_3d():
    out = np.full((6, 4, 3, 5), -1, np.int64)
    where_am_i[(2, 2, 3), (3, 2, 1)](out)
    x, y, z = np.indices(out.shape[:3])
    np.testing.assert_array_equal(out[..., 0], x % 3 + 10 * (y % 2))
    np.testing.assert_array_equal(out[..., 1], x // 3 + 10 * (y // 2) + 100 * z)
    assert (out[..., 2] == 3 + 20 + 100).all()
    assert (out[..., 3] == 2 + 20 + 300).all()
    assert (out[..., 4] == 6 + 40 + 300).all()
    _check_modules(where_am_i)


def test_workgroup_reduction_with_shared_memory_barrier_and_atomic(rng):
    ints = rng.integers(-1000, 1000, 5000).astype(np.int32)
    total, partial = np.zeros(1, np.int32), np.zeros(79, np.int32)
    group_sum[79, GROUP](ints, total, partial)
    padded = np.zeros(79 * GROUP, np.int32)
    padded[:5000] = ints
    np.testing.assert_array_equal(partial, padded.reshape(79, GROUP).sum(axis=1))
    assert total[0] == ints.sum()

    floats = rng.random(3000).astype(np.float32)
    total, partial = np.zeros(1, np.float32), np.zeros(47, np.float32)
    group_sum[47, GROUP](floats, total, partial)
    np.testing.assert_allclose(total[0], floats.sum(dtype=np.float64), rtol=1e-5)
    _check_modules(group_sum)


def test_tiled_matrix_product(rng):
    a = rng.random((45, 37)).astype(np.float32)
    b = rng.random((37, 29)).astype(np.float32)
    c = np.zeros((45, 29), np.float32)
    tiled_matmul[(4, 6), (TILE, TILE)](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    _check_modules(tiled_matmul)


def test_histogram_with_atomics(rng):
    x = rng.integers(0, 10_000, 20_000).astype(np.int32)
    bins = np.zeros(16, np.uint32)
    histogram.forall(x.size)(x, bins)
    np.testing.assert_array_equal(bins, np.bincount(x % 16, minlength=16))
    _check_modules(histogram)


def test_barrier_orders_workgroup_memory(rng):
    x = rng.integers(0, 1 << 30, 8 * GROUP).astype(np.int32)
    out = np.zeros_like(x)
    reverse_in_groups[8, GROUP](x, out)
    np.testing.assert_array_equal(out, x.reshape(8, GROUP)[:, ::-1].ravel())


def test_private_arrays(rng):
    x = rng.integers(-100, 100, (300, 8)).astype(np.int32)
    out = np.zeros_like(x)
    sort_rows.forall(300)(x, out)
    np.testing.assert_array_equal(out, np.sort(x, axis=1))
    _check_modules(reverse_in_groups, sort_rows)


def test_atomics_return_old_values(rng):
    n = 700
    vals = rng.integers(-5000, 5000, n).astype(np.int32)
    ints = np.zeros(10, np.int32)
    ints[3], ints[4], ints[-1] = 1 << 30, -1, 12345
    uints = np.array([0, 0xFFFFFFFF, 0], np.uint32)
    floats = np.array([0, 0, -1e9, 1e9], np.float32)
    old = np.zeros((n, 7), np.int32)
    every_atomic.forall(n)(vals, ints, uints, floats, old)
    # add, float add and the compare-and-swap ticket hand out each old value once.
    for column in (0, 5, 6):
        np.testing.assert_array_equal(np.sort(old[:, column]), np.arange(n))
    assert ints[0] == n and floats[0] == n and ints[8] == n
    assert ints[1] == -vals.sum() and ints[2] == vals.max() and ints[3] == vals.min()
    assert ints[4] == np.bitwise_and.reduce(vals) and ints[5] == np.bitwise_or.reduce(vals)
    assert ints[6] == np.bitwise_xor.reduce(vals)
    # exch: the old values and the final value are the n + 1 values written.
    np.testing.assert_array_equal(np.sort(np.append(old[:, 4], ints[-1])),
                                  np.sort(np.append(vals, 12345)))
    assert uints[0] == (vals & 0xFFFF).max() and uints[1] == (vals & 0xFFFF).min()
    assert uints[2] == n // 2
    np.testing.assert_allclose(floats[1], -(vals * 0.25).sum(), rtol=1e-5)
    assert floats[2] == vals.max() and floats[3] == vals.min()
    _check_modules(every_atomic)


def test_atomics_with_tuple_and_negative_indices():
    grid = np.zeros((3, 2), np.int32)
    counts = np.zeros(90, np.float32)
    counts[::3] = 7
    atomics_2d.forall(90)(grid, counts)
    np.testing.assert_array_equal(grid, [[15, 15], [15, 15], [15, 15]])
    expected = np.arange(90, dtype=np.float32)
    expected[::3] = 7
    np.testing.assert_array_equal(counts, expected)


@nv.jit
def wide_atomics(vals, ints, uints, floats, old):
    i = nv.global_id(0)
    if i < vals.shape[0]:
        v = vals[i]
        old[i] = nv.atomic.add(ints, 0, 1)
        nv.atomic.max(ints, 1, v)
        nv.atomic.min(ints, 2, v)
        nv.atomic.sub(ints, 3, v)
        nv.atomic.xor(ints, 4, v)
        seen = ints[5]
        while True:
            prev = nv.atomic.cas(ints, 5, seen, seen + 1)
            if prev == seen:
                break
            seen = prev
        nv.atomic.add(uints, 0, np.uint64(1) << np.uint64(40))
        nv.atomic.add(floats, 0, np.float64(v) * 0.5)
        nv.atomic.max(floats, 1, np.float64(v))
        s = nv.shared.array(1, np.int64)
        if nv.local_id(0) == 0:
            s[0] = 0
        nv.barrier()
        nv.atomic.add(s, 0, v)
        nv.barrier()
        if nv.local_id(0) == 0:
            nv.atomic.add(ints, 6, s[0])


def test_64_bit_atomics(rng):
    n = 500
    vals = rng.integers(-10 ** 12, 10 ** 12, n).astype(np.int64)
    ints = np.zeros(7, np.int64)
    ints[2] = 10 ** 15
    uints = np.zeros(1, np.uint64)
    floats = np.array([0.0, -1e300])
    old = np.zeros(n, np.int64)
    wide_atomics[2, 250](vals, ints, uints, floats, old)
    np.testing.assert_array_equal(np.sort(old), np.arange(n))
    assert ints[0] == n and ints[5] == n and ints[6] == vals.sum()
    assert ints[1] == vals.max() and ints[2] == vals.min() and ints[3] == -vals.sum()
    assert ints[4] == np.bitwise_xor.reduce(vals)
    assert uints[0] == n << 40
    np.testing.assert_allclose(floats[0], (vals * 0.5).sum(), rtol=1e-12)
    assert floats[1] == vals.max()
    (compiled,) = compiled_kernels(wide_atomics)
    assert "Int64Atomics" in compiled.capabilities
    assert_valid_spirv(compiled)


def test_64_bit_atomics_need_the_device_feature():
    from types import SimpleNamespace
    from numba_vulkan.api.dispatcher import _Plan
    compiled = wide_atomics.compile(
        "void(int64[::1], int64[::1], uint64[::1], float64[::1], int64[::1])")
    device = SimpleNamespace(info=SimpleNamespace(name="no atomics", features=frozenset()))
    with pytest.raises(nv.LaunchError, match="64-bit atomics"):
        _Plan(compiled, device)
