"""Workgroup, private and global constant arrays in kernels, against NumPy
and numba.njit: constant indices, lookup tables, arrays a phi chooses
between, 2-d private arrays and complex elements (issue 10, items 2-5)."""

import numba
import numpy as np

import numba_vulkan as nv

GROUP = 16

TABLE_F64 = np.linspace(-2.0, 3.0, 16)
TABLE_U8 = (np.arange(40, dtype=np.uint8) * 37) % 251
GRID_F64 = np.arange(12, dtype=np.float64).reshape(3, 4) * 0.25 - 1.0
GRID_U8 = (np.arange(20, dtype=np.uint8) * 13).reshape(4, 5)
GRID_I32 = (np.arange(12, dtype=np.int32) - 6).reshape(4, 3) * 1000


@nv.jit
def tile_sum(a, out):
    """Thread 0 sums the tile at constant indices (item 2)."""
    sm = nv.shared.array(GROUP, np.float32)
    t = nv.local_id(0)
    g = nv.group_id(0)
    sm[t] = a[g * GROUP + t]
    nv.barrier()
    if t == 0:
        s = np.float32(0)
        for j in range(GROUP):
            s += sm[j]
        out[g] = s + sm[3] * np.float32(100)


def test_workgroup_array_at_constant_indices(rng):
    # Quarters: every partial sum is exact in float32.
    a = rng.integers(-64, 64, 4 * GROUP).astype(np.float32) / 4
    out = np.zeros(4, np.float32)
    tile_sum[4, GROUP](a, out)
    tiles = a.reshape(4, GROUP)
    np.testing.assert_array_equal(out, tiles.sum(axis=1) + tiles[:, 3] * 100)


def _lookups(a, out):
    for i in range(a.shape[0]):
        k = a[i]
        out[i, 0] = TABLE_F64[k % 16]
        out[i, 1] = TABLE_U8[k % 40]
        out[i, 2] = GRID_F64[k % 3, (k // 3) % 4]
        out[i, 3] = GRID_U8[k % 4, k % 5]
        out[i, 4] = GRID_I32[(k // 2) % 4, k % 3]
        out[i, 5] = TABLE_F64[3] + TABLE_U8[7]


@nv.jit
def lookups(a, out):
    """Global NumPy arrays read as lookup tables (item 3)."""
    i = nv.global_id(0)
    if i < a.shape[0]:
        k = a[i]
        out[i, 0] = TABLE_F64[k % 16]
        out[i, 1] = TABLE_U8[k % 40]
        out[i, 2] = GRID_F64[k % 3, (k // 3) % 4]
        out[i, 3] = GRID_U8[k % 4, k % 5]
        out[i, 4] = GRID_I32[(k // 2) % 4, k % 3]
        out[i, 5] = TABLE_F64[3] + TABLE_U8[7]


def test_global_arrays_as_lookup_tables(rng):
    a = rng.integers(0, 1000, 100).astype(np.int32)
    out = np.zeros((100, 6))
    lookups.forall(100)(a, out)
    expected = np.zeros_like(out)
    numba.njit(_lookups)(a, expected)
    np.testing.assert_array_equal(out, expected)


@nv.jit
def const_tables(a, out):
    """numba.cuda's cuda.const.array_like."""
    i = nv.global_id(0)
    if i < a.shape[0]:
        table = nv.const.array_like(TABLE_F64)
        grid = nv.const.array_like(GRID_U8)
        out[i] = table[a[i] % 16] * grid[a[i] % 4, a[i] % 5]


def test_const_array_like(rng):
    a = rng.integers(0, 1000, 70).astype(np.int32)
    out = np.zeros(70)
    const_tables.forall(70)(a, out)
    np.testing.assert_array_equal(out, TABLE_F64[a % 16] * GRID_U8[a % 4, a % 5])


@nv.jit
def insertion_sort(a, out):
    """Item 5: the optimiser splits the private array into scalars that a
    phi chooses between."""
    i = nv.global_id(0)
    if i < a.shape[0]:
        buf = nv.local.array(8, np.float32)
        for k in range(8):
            buf[k] = a[i, k]
        for k in range(1, 8):
            v = buf[k]
            j = k - 1
            while j >= 0 and buf[j] > v:
                buf[j + 1] = buf[j]
                j -= 1
            buf[j + 1] = v
        for k in range(8):
            out[i, k] = buf[k]


def test_insertion_sort_on_a_private_array(rng):
    a = rng.standard_normal((50, 8)).astype(np.float32)
    a[3] = a[3, 0]
    out = np.zeros_like(a)
    insertion_sort.forall(50)(a, out)
    np.testing.assert_array_equal(out, np.sort(a, axis=1))


def _private_2d(a, out):
    for i in range(a.shape[0]):
        m = np.empty((3, 4), np.int32)
        for r in range(3):
            for c in range(4):
                m[r, c] = a[i] * (r + 1) - c
        r, c = a[i] % 3, (a[i] // 3) % 4
        m[r, c] += 1000
        s = 0
        for q in range(4):
            s += m[r, q] * (q + 1) + m[(r + 1) % 3, c]
        out[i] = s


@nv.jit
def private_2d(a, out):
    """A 2-d private array indexed at run time (item 5)."""
    i = nv.global_id(0)
    if i < a.shape[0]:
        m = nv.local.array((3, 4), np.int32)
        for r in range(3):
            for c in range(4):
                m[r, c] = a[i] * (r + 1) - c
        r, c = a[i] % 3, (a[i] // 3) % 4
        m[r, c] += 1000
        s = 0
        for q in range(4):
            s += m[r, q] * (q + 1) + m[(r + 1) % 3, c]
        out[i] = s


def test_private_2d_array_at_run_time_indices(rng):
    a = rng.integers(0, 500, 90).astype(np.int32)
    out = np.zeros(90, np.int32)
    private_2d.forall(90)(a, out)
    expected = np.zeros_like(out)
    numba.njit(_private_2d)(a, expected)
    np.testing.assert_array_equal(out, expected)


@nv.jit
def complex_tiles(a, b, out):
    """complex128 values in a workgroup array, complex64 in a private one
    (item 4), read back at computed indices."""
    sm = nv.shared.array(GROUP, np.complex128)
    t = nv.local_id(0)
    i = nv.global_id(0)
    sm[t] = a[i]
    nv.barrier()
    buf = nv.local.array(4, np.complex64)
    for k in range(4):
        buf[k] = b[i] * np.float32(k + 1)
    j = i % 4
    buf[j] = buf[(j + 1) % 4] + buf[j]
    out[i] = sm[GROUP - 1 - t] * 2 + buf[j] + buf[(j + 3) % 4]


def test_complex_workgroup_and_private_arrays(rng):
    n = 2 * GROUP
    # Small integers: every product and sum is exact.
    a = rng.integers(-8, 8, n) + 1j * rng.integers(-8, 8, n)
    b = (rng.integers(-8, 8, n) + 1j * rng.integers(-8, 8, n)).astype(np.complex64)
    out = np.zeros(n, np.complex128)
    complex_tiles[2, GROUP](a, b, out)
    mirrored = a.reshape(2, GROUP)[:, ::-1].ravel()
    j = np.arange(n) % 4
    parts = b[:, None].astype(np.complex128) * np.arange(1, 5)
    rows = np.arange(n)
    mixed = parts[rows, (j + 1) % 4] + parts[rows, j]
    np.testing.assert_array_equal(out, mirrored * 2 + mixed + parts[rows, (j + 3) % 4])


def _large_private(a, out):
    for i in range(a.shape[0]):
        buf = np.empty(1000, np.float32)
        for k in range(1000):
            buf[k] = 0
        for k in range(1000):
            buf[(k * 7 + i) % 1000] += a[i] * k
        copy = np.empty(64, np.int32)
        for k in range(64):
            copy[k] = np.int32(buf[k * 15])
        s = np.float32(0)
        for k in range(0, 1000, 100):
            s += buf[k]
        out[i] = s + copy[i % 64]


@nv.jit
def large_private(a, out):
    """A 1000-element private array filled and another copied in loops
    (item 4: Numba's zero fill became a memset Vulkan cannot express)."""
    i = nv.global_id(0)
    if i < a.shape[0]:
        buf = nv.local.array(1000, np.float32)
        for k in range(1000):
            buf[k] = 0
        for k in range(1000):
            buf[(k * 7 + i) % 1000] += a[i] * k
        copy = nv.local.array(64, np.int32)
        for k in range(64):
            copy[k] = np.int32(buf[k * 15])
        s = np.float32(0)
        for k in range(0, 1000, 100):
            s += buf[k]
        out[i] = s + copy[i % 64]


def test_large_private_arrays_filled_in_loops(rng):
    # Small integers: every float32 sum is exact.
    a = rng.integers(-9, 9, 40).astype(np.float32)
    out = np.zeros(40, np.float32)
    large_private.forall(40)(a, out)
    expected = np.zeros_like(out)
    numba.njit(_large_private)(a, expected)
    np.testing.assert_array_equal(out, expected)


@nv.jit
def chosen_arrays(a, out):
    """A select between two workgroup arrays and between two private ones:
    one array each, indexed, since Vulkan has no choice between pointers."""
    x = nv.shared.array(GROUP, np.float32)
    y = nv.shared.array(GROUP, np.float32)
    t = nv.local_id(0)
    x[t] = a[t]
    y[t] = -a[t]
    nv.barrier()
    p = nv.local.array(4, np.float32)
    q = nv.local.array(4, np.float32)
    for k in range(4):
        p[k] = a[t] + k
        q[k] = a[t] - k
    shared = x if t % 2 == 0 else y
    private = p if a[t] > 4 else q
    out[t] = shared[(t + 1) % GROUP] * 100 + private[t % 4]


def test_pointer_chosen_between_arrays(rng):
    a = rng.integers(0, 9, GROUP).astype(np.float32)
    out = np.zeros(GROUP, np.float32)
    chosen_arrays[1, GROUP](a, out)
    t = np.arange(GROUP)
    shared = np.where(t % 2 == 0, a[(t + 1) % GROUP], -a[(t + 1) % GROUP])
    private = np.where(a > 4, a + t % 4, a - t % 4)
    np.testing.assert_array_equal(out, shared * 100 + private)


_PHI_OF_CONSTANTS = """
@tile = internal unnamed_addr addrspace(3) global [16 x float] undef, align 16

define void @main(i32 %n) {
entry:
  switch i32 %n, label %join [
    i32 0, label %join
    i32 1, label %other
  ]
other:
  br label %join
join:
  %p = phi ptr [ getelementptr (i8, ptr addrspacecast (ptr addrspace(3) @tile to ptr), i64 8), %entry ], [ getelementptr (i8, ptr addrspacecast (ptr addrspace(3) @tile to ptr), i64 8), %entry ], [ addrspacecast (ptr addrspace(3) @tile to ptr), %other ]
  store float 1.0, ptr %p, align 4
  ret void
}
"""


def test_constant_expressions_in_a_phi_become_instructions():
    """A block branching twice to a phi gives it one value (LLVM's rule),
    also once constant expressions over a workgroup array are instructions."""
    from llvmlite import binding as llvm
    from numba_vulkan.codegen import logical
    from tests.helpers import rewritten
    text = rewritten(logical.rewrite, _PHI_OF_CONSTANTS, [])
    llvm.parse_assembly(text, context=llvm.create_context()).verify()
    assert "addrspacecast (" not in text
    assert "@__nv.element.3.1(ptr addrspace(3) @tile" in text


#: Bytes that LLVM's c"..." strings escape: a backslash (\\) and a quote (\22).
ESCAPED_BYTES = np.array([92, 92, 34, 92, 0, 255, 97, 34, 92, 92, 34, 1, 92, 34, 2, 92], np.uint8)
ESCAPED_INT16 = np.frombuffer(ESCAPED_BYTES.tobytes(), dtype=np.int16)


@nv.jit
def escaped_tables(a, out):
    i = nv.global_id(0)
    if i < a.shape[0]:
        out[i] = ESCAPED_BYTES[a[i] % 16] * 100000 + ESCAPED_INT16[a[i] % 8]


def test_tables_of_escaped_bytes(rng):
    a = rng.integers(0, 100, 40).astype(np.int32)
    out = np.zeros(40, np.int64)
    escaped_tables.forall(40)(a, out)
    expected = ESCAPED_BYTES[a % 16].astype(np.int64) * 100000 + ESCAPED_INT16[a % 8]
    np.testing.assert_array_equal(out, expected)
