"""A corpus of the programs numba.cuda users write, written plainly the way
such a user would (``nv.global_id``, ``nv.shared.array``, ``nv.barrier``,
``nv.atomic.add``), each checked against NumPy or ``numba.njit`` on seeded
inputs. The inputs are chosen so that the results are exact: integers, or
floats whose sums are integers, so no test depends on the order in which a
device adds.

Several of these failed before issue 10's fixes (complex128 workgroup tiles,
the uint8 lookup table, six 2-d arguments, loops of more than 65535 trips
on lavapipe); all pass now.
"""

import math

import numba
import numpy as np

import numba_vulkan as nv

TILE = 16
TILE_PADDED = TILE + 1


# --------------------------------------------------------------------------
# Matrix product and transpose through workgroup tiles


@nv.jit
def matmul_tiles(a, b, c):
    sa = nv.shared.array((TILE, TILE), np.float32)
    sb = nv.shared.array((TILE, TILE), np.float32)
    tx = nv.local_id(0)
    ty = nv.local_id(1)
    row = nv.group_id(1) * TILE + ty
    col = nv.group_id(0) * TILE + tx
    acc = np.float32(0)
    for start in range(0, a.shape[1], TILE):
        if row < a.shape[0] and start + tx < a.shape[1]:
            sa[ty, tx] = a[row, start + tx]
        else:
            sa[ty, tx] = 0
        if col < b.shape[1] and start + ty < b.shape[0]:
            sb[ty, tx] = b[start + ty, col]
        else:
            sb[ty, tx] = 0
        nv.barrier()
        for k in range(TILE):
            acc += sa[ty, k] * sb[k, tx]
        nv.barrier()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


@nv.jit
def matmul_tiles_complex(a, b, c):
    sa = nv.shared.array((TILE, TILE), np.complex128)
    sb = nv.shared.array((TILE, TILE), np.complex128)
    tx = nv.local_id(0)
    ty = nv.local_id(1)
    row = nv.group_id(1) * TILE + ty
    col = nv.group_id(0) * TILE + tx
    acc = 0j
    for start in range(0, a.shape[1], TILE):
        sa[ty, tx] = a[row, start + tx] if row < a.shape[0] and start + tx < a.shape[1] else 0j
        sb[ty, tx] = b[start + ty, col] if col < b.shape[1] and start + ty < b.shape[0] else 0j
        nv.barrier()
        for k in range(TILE):
            acc += sa[ty, k] * sb[k, tx]
        nv.barrier()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


def _grid(shape):
    return ((shape[1] + TILE - 1) // TILE, (shape[0] + TILE - 1) // TILE)


def test_shared_tile_matmul(rng):
    # Small integers: every partial sum is exact in float32.
    a = rng.integers(-8, 9, (37, 50)).astype(np.float32)
    b = rng.integers(-8, 9, (50, 29)).astype(np.float32)
    c = np.zeros((37, 29), np.float32)
    matmul_tiles[_grid(c.shape), (TILE, TILE)](a, b, c)
    np.testing.assert_array_equal(c, a @ b)


def test_shared_tile_matmul_complex128(rng):
    a = (rng.integers(-8, 9, (20, 35)) + 1j * rng.integers(-8, 9, (20, 35)))
    b = (rng.integers(-8, 9, (35, 18)) + 1j * rng.integers(-8, 9, (35, 18)))
    c = np.zeros((20, 18), np.complex128)
    matmul_tiles_complex[_grid(c.shape), (TILE, TILE)](a, b, c)
    np.testing.assert_array_equal(c, a @ b)


@nv.jit
def transpose_tiles(src, dst):
    # One padding column keeps the column reads off one memory bank.
    tile = nv.shared.array((TILE, TILE_PADDED), src.dtype)
    x = nv.group_id(0) * TILE + nv.local_id(0)
    y = nv.group_id(1) * TILE + nv.local_id(1)
    if y < src.shape[0] and x < src.shape[1]:
        tile[nv.local_id(1), nv.local_id(0)] = src[y, x]
    nv.barrier()
    x = nv.group_id(1) * TILE + nv.local_id(0)
    y = nv.group_id(0) * TILE + nv.local_id(1)
    if y < dst.shape[0] and x < dst.shape[1]:
        dst[y, x] = tile[nv.local_id(0), nv.local_id(1)]


def test_shared_tile_transpose(rng):
    src = rng.random((45, 70)).astype(np.float32)
    dst = np.zeros((70, 45), np.float32)
    transpose_tiles[_grid(src.shape), (TILE, TILE)](src, dst)
    np.testing.assert_array_equal(dst, src.T)


def test_shared_tile_transpose_complex128(rng):
    src = rng.random((33, 20)) + 1j * rng.random((33, 20))
    dst = np.zeros((20, 33), np.complex128)
    transpose_tiles[_grid(src.shape), (TILE, TILE)](src, dst)
    np.testing.assert_array_equal(dst, src.T)


# --------------------------------------------------------------------------
# Reductions

BLOCK = 128


@nv.jit
def block_sums(x, partial):
    """Each workgroup halves its tile until one sum is left."""
    cache = nv.shared.array(BLOCK, np.int64)
    t = nv.local_id(0)
    i = nv.group_id(0) * BLOCK * 2 + t
    v = np.int64(0)
    if i < x.shape[0]:
        v = x[i]
    if i + BLOCK < x.shape[0]:
        v += x[i + BLOCK]
    cache[t] = v
    nv.barrier()
    half = BLOCK // 2
    while half > 0:
        if t < half:
            cache[t] += cache[t + half]
        nv.barrier()
        half //= 2
    if t == 0:
        partial[nv.group_id(0)] = cache[0]


@nv.jit
def dot_product(a, b, total):
    """A grid-stride loop, a tree in workgroup memory, one atomic per group."""
    cache = nv.shared.array(BLOCK, np.float64)
    t = nv.local_id(0)
    s = 0.0
    for i in range(nv.global_id(0), a.shape[0], nv.global_size(0)):
        s += a[i] * b[i]
    cache[t] = s
    nv.barrier()
    step = BLOCK // 2
    while step > 0:
        if t < step:
            cache[t] += cache[t + step]
        nv.barrier()
        step //= 2
    if t == 0:
        nv.atomic.add(total, 0, cache[0])


def test_tree_reduction_then_reduce_the_partials(rng):
    x = rng.integers(-1000, 1000, 100_000).astype(np.int64)
    groups = (x.size + 2 * BLOCK - 1) // (2 * BLOCK)
    partial = nv.device_array(groups, np.int64)
    block_sums[groups, BLOCK](nv.to_device(x), partial)
    while groups > 1:
        # The partial sums are reduced by the same kernel, on the device.
        nxt = (groups + 2 * BLOCK - 1) // (2 * BLOCK)
        out = nv.device_array(nxt, np.int64)
        block_sums[nxt, BLOCK](partial, out)
        partial, groups = out, nxt
    assert partial.copy_to_host()[0] == x.sum()


def test_grid_stride_dot_product(rng):
    # Products of small integers: the float64 sum is exact in any order.
    a = rng.integers(-50, 50, 30_000).astype(np.float64)
    b = rng.integers(-50, 50, 30_000).astype(np.float64)
    total = np.zeros(1)
    dot_product[24, BLOCK](a, b, total)
    assert total[0] == np.dot(a, b)


# --------------------------------------------------------------------------
# Monte Carlo with counter-based random numbers


@numba.njit
def splitmix64(state):
    """One output of the splitmix64 generator for counter ``state``."""
    z = state + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit
def philox_round(c0, c1, key):
    """One round of a Philox-2x32 style bijection, in 64-bit arithmetic."""
    product = np.uint64(c0) * np.uint64(0xD256D193)
    hi = np.uint32(product >> np.uint64(32))
    lo = np.uint32(product & np.uint64(0xFFFFFFFF))
    return np.uint32(hi ^ key ^ c1), lo


@numba.njit
def hits_of(seed, i, samples):
    """How many of ``samples`` points of stream ``i`` fall in the unit circle."""
    hits = 0
    for k in range(samples):
        counter = np.uint64(seed) + np.uint64(i) * np.uint64(samples) + np.uint64(k)
        r = splitmix64(counter)
        # 24 random bits per coordinate: exact float32 in [0, 1).
        x = np.float32(r >> np.uint64(40)) * np.float32(1.0 / 16777216)
        y = np.float32((r >> np.uint64(16)) & np.uint64(0xFFFFFF)) * np.float32(1.0 / 16777216)
        if x * x + y * y <= np.float32(1.0):
            hits += 1
    return hits


@nv.jit
def monte_carlo_pi(seed, samples, hits, total):
    i = nv.global_id(0)
    if i < hits.shape[0]:
        h = hits_of(seed, i, samples)
        hits[i] = h
        nv.atomic.add(total, 0, h)


@nv.jit
def philox_uniforms(key, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        c0 = np.uint32(i)
        c1 = np.uint32(0)
        for _ in range(10):
            c0, c1 = philox_round(c0, c1, key)
            key = np.uint32(key + np.uint32(0x9E3779B9))
        out[i] = np.float64(c0) / 4294967296.0


@numba.njit
def philox_uniforms_cpu(key, n):
    out = np.zeros(n)
    k0 = key
    for i in range(n):
        key = k0
        c0 = np.uint32(i)
        c1 = np.uint32(0)
        for _ in range(10):
            c0, c1 = philox_round(c0, c1, key)
            key = np.uint32(key + np.uint32(0x9E3779B9))
        out[i] = np.float64(c0) / 4294967296.0
    return out


def test_monte_carlo_pi_with_splitmix64():
    streams, samples = 2048, 64
    hits = np.zeros(streams, np.int64)
    total = np.zeros(1, np.int64)
    monte_carlo_pi.forall(streams)(12345, samples, hits, total)
    expected = np.array([hits_of(12345, i, samples) for i in range(streams)])
    np.testing.assert_array_equal(hits, expected)
    assert total[0] == expected.sum()
    assert abs(4 * total[0] / (streams * samples) - math.pi) < 0.02


def test_philox_style_counter_rng():
    out = np.zeros(5000)
    philox_uniforms.forall(out.size)(np.uint32(0xC0FFEE), out)
    expected = philox_uniforms_cpu(np.uint32(0xC0FFEE), out.size)
    np.testing.assert_array_equal(out, expected)
    assert 0.45 < out.mean() < 0.55


# --------------------------------------------------------------------------
# Laplace iteration (Jacobi sweeps with the grid on the device)


@nv.jit
def jacobi_sweep(u, v, change):
    i = nv.global_id(1)
    j = nv.global_id(0)
    if 0 < i < u.shape[0] - 1 and 0 < j < u.shape[1] - 1:
        new = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1])
        v[i, j] = new
        nv.atomic.max(change, 0, abs(new - u[i, j]))


def test_laplace_iteration():
    n, sweeps = 40, 50
    u = np.zeros((n, n))
    u[0, :] = 1.0
    u[:, 0] = np.linspace(0, 1, n)
    du, dv = nv.to_device(u), nv.to_device(u)
    change = nv.to_device(np.zeros(1))
    groups = ((n + 15) // 16, (n + 15) // 16)
    for _ in range(sweeps):
        jacobi_sweep[groups, (16, 16)](du, dv, change)
        du, dv = dv, du
    expected = u.copy()
    last = 0.0
    for _ in range(sweeps):
        nxt = expected.copy()
        nxt[1:-1, 1:-1] = 0.25 * (expected[:-2, 1:-1] + expected[2:, 1:-1]
                                  + expected[1:-1, :-2] + expected[1:-1, 2:])
        last = max(last, np.abs(nxt - expected).max())
        expected = nxt
    np.testing.assert_array_equal(du.copy_to_host(), expected)
    assert change.copy_to_host()[0] == last


# --------------------------------------------------------------------------
# Sessionize: split each user's sorted events into sessions


@nv.jit
def mark_session_starts(user, time, gap, start):
    i = nv.global_id(0)
    if i < user.shape[0]:
        start[i] = i == 0 or user[i] != user[i - 1] or time[i] - time[i - 1] > gap


@nv.jit
def label_sessions(start, session):
    """Each event walks back to the start of its session."""
    i = nv.global_id(0)
    if i < start.shape[0]:
        k = i
        while not start[k]:
            k -= 1
        session[i] = k


def test_sessionize(rng):
    n = 5000
    user = np.sort(rng.integers(0, 60, n)).astype(np.int32)
    time = np.zeros(n, np.int64)
    for u in np.unique(user):
        rows = user == u
        time[rows] = np.cumsum(rng.integers(1, 400, rows.sum()))
    start = np.zeros(n, np.bool_)
    session = np.zeros(n, np.int64)
    mark_session_starts.forall(n)(user, time, 300, start)
    label_sessions.forall(n)(start, session)
    expected_start = np.ones(n, np.bool_)
    expected_start[1:] = (user[1:] != user[:-1]) | (np.diff(time) > 300)
    np.testing.assert_array_equal(start, expected_start)
    np.testing.assert_array_equal(session, np.maximum.accumulate(
        np.where(expected_start, np.arange(n), 0)))


# --------------------------------------------------------------------------
# Histograms of int32 data


@nv.jit
def histogram_global(data, bins):
    i = nv.global_id(0)
    if i < data.shape[0]:
        nv.atomic.add(bins, data[i] % bins.shape[0], 1)


HBINS = 64


@nv.jit
def histogram_shared(data, bins):
    local = nv.shared.array(HBINS, np.int32)
    t = nv.local_id(0)
    for k in range(t, HBINS, nv.local_size(0)):
        local[k] = 0
    nv.barrier()
    for i in range(nv.global_id(0), data.shape[0], nv.global_size(0)):
        nv.atomic.add(local, data[i] % HBINS, 1)
    nv.barrier()
    for k in range(t, HBINS, nv.local_size(0)):
        nv.atomic.add(bins, k, local[k])


def _expected_histogram(data, n):
    return np.bincount(data % n, minlength=n).astype(np.int32)


def test_histogram_of_int32_data(rng):
    data = rng.integers(-10_000, 10_000, 50_000).astype(np.int32)
    bins = np.zeros(16, np.int32)
    histogram_global.forall(data.size)(data, bins)
    np.testing.assert_array_equal(bins, _expected_histogram(data, 16))


def test_histogram_in_workgroup_memory(rng):
    data = rng.integers(0, 1 << 30, 80_000).astype(np.int32)
    bins = np.zeros(HBINS, np.int32)
    histogram_shared[32, 128](data, bins)
    np.testing.assert_array_equal(bins, _expected_histogram(data, HBINS))


# --------------------------------------------------------------------------
# Lookup tables: global NumPy arrays read in the kernel

GAMMA = np.array([round(255 * (k / 255) ** (1 / 2.2)) for k in range(256)], np.uint8)
CHEBYSHEV = np.array([0.5, -0.25, 0.125, 2.0, -1.0, 0.75])


@nv.jit
def apply_gamma(pixels, out):
    i = nv.global_id(0)
    if i < pixels.shape[0]:
        out[i] = GAMMA[pixels[i]]


@nv.jit
def chebyshev_series(x, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        # Clenshaw's recurrence over the table's coefficients.
        b1 = 0.0
        b2 = 0.0
        for k in range(CHEBYSHEV.shape[0] - 1, 0, -1):
            b1, b2 = 2.0 * x[i] * b1 - b2 + CHEBYSHEV[k], b1
        out[i] = x[i] * b1 - b2 + CHEBYSHEV[0]


@numba.njit
def chebyshev_cpu(x):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        b1 = 0.0
        b2 = 0.0
        for k in range(CHEBYSHEV.shape[0] - 1, 0, -1):
            b1, b2 = 2.0 * x[i] * b1 - b2 + CHEBYSHEV[k], b1
        out[i] = x[i] * b1 - b2 + CHEBYSHEV[0]
    return out


def test_lookup_table_uint8(rng):
    pixels = rng.integers(0, 256, 10_000).astype(np.uint8)
    out = np.zeros_like(pixels)
    apply_gamma.forall(pixels.size)(pixels, out)
    np.testing.assert_array_equal(out, GAMMA[pixels])


def test_lookup_table_float64(rng):
    # Multiples of 1/8: every step of the recurrence is exact.
    x = rng.integers(-8, 9, 3000) / 8.0
    out = np.zeros_like(x)
    chebyshev_series.forall(x.size)(x, out)
    np.testing.assert_array_equal(out, chebyshev_cpu(x))


# --------------------------------------------------------------------------
# A stencil with many arguments (a CFD-style update of six 2-d fields)


@nv.jit
def shallow_water_step(h, u, v, h_new, u_new, v_new, dt):
    i = nv.global_id(1)
    j = nv.global_id(0)
    if 0 < i < h.shape[0] - 1 and 0 < j < h.shape[1] - 1:
        dhdx = h[i, j + 1] - h[i, j - 1]
        dhdy = h[i + 1, j] - h[i - 1, j]
        u_new[i, j] = u[i, j] - dt * dhdx
        v_new[i, j] = v[i, j] - dt * dhdy
        div = (u[i, j + 1] - u[i, j - 1]) + (v[i + 1, j] - v[i - 1, j])
        h_new[i, j] = h[i, j] - dt * div


def test_stencil_with_six_2d_arrays(rng):
    n = 48
    h, u, v = (rng.integers(-64, 64, (n, n)) / 64.0 for _ in range(3))
    h_new, u_new, v_new = (np.zeros((n, n)) for _ in range(3))
    dt = 0.125
    shallow_water_step[((n + 15) // 16, (n + 15) // 16), (16, 16)](h, u, v, h_new, u_new,
                                                                   v_new, dt)
    eu, ev, eh = np.zeros((n, n)), np.zeros((n, n)), np.zeros((n, n))
    inner = (slice(1, -1), slice(1, -1))
    eu[inner] = u[inner] - dt * (h[1:-1, 2:] - h[1:-1, :-2])
    ev[inner] = v[inner] - dt * (h[2:, 1:-1] - h[:-2, 1:-1])
    eh[inner] = h[inner] - dt * ((u[1:-1, 2:] - u[1:-1, :-2]) + (v[2:, 1:-1] - v[:-2, 1:-1]))
    np.testing.assert_array_equal(u_new, eu)
    np.testing.assert_array_equal(v_new, ev)
    np.testing.assert_array_equal(h_new, eh)


# --------------------------------------------------------------------------
# Long loops: a million trips in one invocation


@nv.jit
def collatz_steps(start, out):
    """Counts the steps of many Collatz orbits: long data-dependent loops."""
    i = nv.global_id(0)
    if i < out.shape[0]:
        total = 0
        for n0 in range(start[i], start[i] + 1000):
            n = n0
            while n != 1:
                n = n // 2 if n % 2 == 0 else 3 * n + 1
                total += 1
        out[i] = total


@numba.njit
def collatz_cpu(start):
    out = np.zeros(start.shape[0], np.int64)
    for i in range(start.shape[0]):
        total = 0
        for n0 in range(start[i], start[i] + 1000):
            n = n0
            while n != 1:
                n = n // 2 if n % 2 == 0 else 3 * n + 1
                total += 1
        out[i] = total
    return out


@nv.jit
def long_sum(n, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        s = np.uint64(i)
        for k in range(n):
            s = s * np.uint64(6364136223846793005) + np.uint64(k)
        out[i] = s


@numba.njit
def long_sum_cpu(n, count):
    out = np.zeros(count, np.uint64)
    for i in range(count):
        s = np.uint64(i)
        for k in range(n):
            s = s * np.uint64(6364136223846793005) + np.uint64(k)
        out[i] = s
    return out


def test_loop_of_a_million_trips():
    out = np.zeros(8, np.uint64)
    long_sum.forall(8)(10 ** 6, out)
    np.testing.assert_array_equal(out, long_sum_cpu(10 ** 6, 8))


def test_long_data_dependent_loops():
    start = np.arange(1, 65, dtype=np.int64) * 1000
    out = np.zeros(64, np.int64)
    collatz_steps.forall(64)(start, out)
    np.testing.assert_array_equal(out, collatz_cpu(start))
