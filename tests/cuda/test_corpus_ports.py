"""numba.cuda programs ported by changing the import alone.

Each program is written as a numba.cuda user writes it (numba.cuda names
only, ``from numba_vulkan import cuda`` in place of ``from numba import
cuda``), run unchanged and checked against NumPy or ``numba.njit`` on seeded
inputs. Where device arithmetic may round differently from the host (the
transcendental functions, a contracted multiply-add), the check has a
tolerance; elsewhere the inputs make the results exact. The programs differ
from tests/e2e/test_corpus.py's, which use numba_vulkan's native names.
"""

import cmath
import math

import numba
import numpy as np
from numba import float32, float64, int32

from numba_vulkan import cuda
from numba_vulkan.cuda.random import create_xoroshiro128p_states, xoroshiro128p_uniform_float32

# --------------------------------------------------------------------------
# Black-Scholes: float64 through math.erf, float32 through the classic
# polynomial approximation of the normal distribution


@cuda.jit(device=True)
def norm_cdf(d):
    return 0.5 * (1.0 + math.erf(d / math.sqrt(2.0)))


@cuda.jit
def black_scholes64(call, put, price, strike, years, rate, vol):
    i = cuda.grid(1)
    if i < price.shape[0]:
        s, x, t = price[i], strike[i], years[i]
        sqrt_t = math.sqrt(t)
        d1 = (math.log(s / x) + (rate + 0.5 * vol * vol) * t) / (vol * sqrt_t)
        d2 = d1 - vol * sqrt_t
        discount = math.exp(-rate * t)
        call[i] = s * norm_cdf(d1) - x * discount * norm_cdf(d2)
        put[i] = x * discount * norm_cdf(-d2) - s * norm_cdf(-d1)


A1 = 0.31938153
A2 = -0.356563782
A3 = 1.781477937
A4 = -1.821255978
A5 = 1.330274429
RSQRT2PI = 0.39894228040143267793994605993438


@cuda.jit("float32(float32)", device=True)
def cnd32(d):
    k = float32(1.0) / (float32(1.0) + float32(0.2316419) * math.fabs(d))
    poly = k * (float32(A1) + k * (float32(A2) + k * (float32(A3) + k * (float32(A4)
                                                                          + k * float32(A5)))))
    ret = float32(RSQRT2PI) * math.exp(float32(-0.5) * d * d) * poly
    if d > 0:
        ret = float32(1.0) - ret
    return ret


@cuda.jit("void(float32[:], float32[:], float32[:], float32[:], float32[:], float32, float32)")
def black_scholes32(call, put, price, strike, years, rate, vol):
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if i >= price.shape[0]:
        return
    s = price[i]
    x = strike[i]
    t = years[i]
    sqrt_t = math.sqrt(t)
    d1 = (math.log(s / x) + (rate + float32(0.5) * vol * vol) * t) / (vol * sqrt_t)
    d2 = d1 - vol * sqrt_t
    discount = math.exp(-rate * t)
    call[i] = s * cnd32(d1) - x * discount * cnd32(d2)
    put[i] = x * discount * (float32(1.0) - cnd32(d2)) - s * (float32(1.0) - cnd32(d1))


def _black_scholes_numpy(s, x, t, r, v):
    erf = np.vectorize(math.erf)
    cdf = lambda d: 0.5 * (1.0 + erf(d / math.sqrt(2.0)))  # noqa: E731
    d1 = (np.log(s / x) + (r + 0.5 * v * v) * t) / (v * np.sqrt(t))
    d2 = d1 - v * np.sqrt(t)
    disc = np.exp(-r * t)
    return s * cdf(d1) - x * disc * cdf(d2), x * disc * cdf(-d2) - s * cdf(-d1)


def _options(rng, n):
    return (rng.uniform(5.0, 30.0, n), rng.uniform(1.0, 100.0, n), rng.uniform(0.25, 10.0, n))


def test_black_scholes_float64_with_erf(rng):
    s, x, t = _options(rng, 3000)
    call, put = np.zeros_like(s), np.zeros_like(s)
    black_scholes64.forall(s.size)(call, put, s, x, t, 0.02, 0.30)
    ec, ep = _black_scholes_numpy(s, x, t, 0.02, 0.30)
    np.testing.assert_allclose(call, ec, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(put, ep, rtol=1e-9, atol=1e-9)


def test_black_scholes_float32_eager(rng):
    s, x, t = (a.astype(np.float32) for a in _options(rng, 3000))
    d = [cuda.to_device(a) for a in (s, x, t)]
    d_call, d_put = cuda.device_array_like(s), cuda.device_array_like(s)
    tpb = 128
    black_scholes32[(s.size + tpb - 1) // tpb, tpb](d_call, d_put, *d, np.float32(0.02),
                                                     np.float32(0.30))
    ec, ep = _black_scholes_numpy(s.astype(np.float64), x, t, 0.02, 0.30)
    # The polynomial approximates the distribution to 7.5e-8.
    np.testing.assert_allclose(d_call.copy_to_host(), ec, rtol=1e-4, atol=2e-4)
    np.testing.assert_allclose(d_put.copy_to_host(), ep, rtol=1e-4, atol=2e-4)


# --------------------------------------------------------------------------
# Monte Carlo with cuda.random: pi from uniform draws, checked against the
# same generator run on the host


@cuda.jit
def pi_darts(states, samples, hits, total):
    tid = cuda.grid(1)
    if tid >= hits.shape[0]:
        return
    inside = 0
    for _ in range(samples):
        x = xoroshiro128p_uniform_float32(states, tid)
        y = xoroshiro128p_uniform_float32(states, tid)
        if x * x + y * y <= 1.0:
            inside += 1
    hits[tid] = inside
    cuda.atomic.add(total, 0, inside)


def pi_darts_cpu(states, samples):
    """The same draws on the host: the generator's functions take NumPy states."""
    hits = np.zeros(states.shape[0], np.int64)
    for tid in range(states.shape[0]):
        for _ in range(samples):
            x = xoroshiro128p_uniform_float32(states, tid)
            y = xoroshiro128p_uniform_float32(states, tid)
            if x * x + y * y <= 1.0:
                hits[tid] += 1
    return hits


def test_monte_carlo_pi_with_xoroshiro128p():
    n, samples = 256, 100
    states = create_xoroshiro128p_states(n, seed=2024)
    host_states = states.copy_to_host()
    hits = cuda.device_array(n, np.int64)
    total = cuda.to_device(np.zeros(1, np.int64))
    pi_darts[n // 64, 64](states, samples, hits, total)
    expected = pi_darts_cpu(host_states, samples)
    np.testing.assert_array_equal(hits.copy_to_host(), expected)
    assert total.copy_to_host()[0] == expected.sum()
    assert abs(4.0 * expected.sum() / (n * samples) - math.pi) < 0.05


# --------------------------------------------------------------------------
# 2-d heat equation: a shared-memory tile with a one-cell halo

HX, HY = 16, 8
HALO_X, HALO_Y = HX + 2, HY + 2


@cuda.jit
def heat_step(u, out, alpha):
    tile = cuda.shared.array(shape=(HALO_Y, HALO_X), dtype=float64)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    x, y = cuda.grid(2)
    ny, nx = u.shape
    lx, ly = tx + 1, ty + 1
    inside = x < nx and y < ny
    if inside:
        tile[ly, lx] = u[y, x]
        if tx == 0 and x > 0:
            tile[ly, 0] = u[y, x - 1]
        if tx == HX - 1 and x + 1 < nx:
            tile[ly, HX + 1] = u[y, x + 1]
        if ty == 0 and y > 0:
            tile[0, lx] = u[y - 1, x]
        if ty == HY - 1 and y + 1 < ny:
            tile[HY + 1, lx] = u[y + 1, x]
    cuda.syncthreads()
    if not inside:
        return
    if 0 < x < nx - 1 and 0 < y < ny - 1:
        lap = tile[ly, lx - 1] + tile[ly, lx + 1] + tile[ly - 1, lx] + tile[ly + 1, lx] \
            - 4.0 * tile[ly, lx]
        out[y, x] = tile[ly, lx] + alpha * lap
    else:
        out[y, x] = tile[ly, lx]


def test_heat_equation_with_a_shared_halo(rng):
    ny, nx, steps, alpha = 37, 53, 25, 0.2
    u = np.zeros((ny, nx))
    u[ny // 3:ny // 2, nx // 4:nx // 2] = 100.0
    u[0, :] = 50.0
    d_u, d_v = cuda.to_device(u), cuda.device_array_like(u)
    blocks = ((nx + HX - 1) // HX, (ny + HY - 1) // HY)
    for _ in range(steps):
        heat_step[blocks, (HX, HY)](d_u, d_v, alpha)
        d_u, d_v = d_v, d_u
    expected = u.copy()
    for _ in range(steps):
        c = expected[1:-1, 1:-1]
        lap = expected[1:-1, :-2] + expected[1:-1, 2:] + expected[:-2, 1:-1] \
            + expected[2:, 1:-1] - 4.0 * c
        expected = expected.copy()
        expected[1:-1, 1:-1] = c + alpha * lap
    np.testing.assert_allclose(d_u.copy_to_host(), expected, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------
# Image filters on uint8 images with clamped borders


@cuda.jit
def sobel(img, out):
    x, y = cuda.grid(2)
    h, w = img.shape
    if x >= w or y >= h:
        return
    xm, xp = max(x - 1, 0), min(x + 1, w - 1)
    ym, yp = max(y - 1, 0), min(y + 1, h - 1)
    gx = (int(img[ym, xp]) + 2 * int(img[y, xp]) + int(img[yp, xp])
          - int(img[ym, xm]) - 2 * int(img[y, xm]) - int(img[yp, xm]))
    gy = (int(img[yp, xm]) + 2 * int(img[yp, x]) + int(img[yp, xp])
          - int(img[ym, xm]) - 2 * int(img[ym, x]) - int(img[ym, xp]))
    out[y, x] = min(abs(gx) + abs(gy), 255)


GAUSS = np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]], np.int32)


@cuda.jit
def gaussian_blur(img, out):
    x, y = cuda.grid(2)
    h, w = img.shape
    if x < w and y < h:
        weights = cuda.const.array_like(GAUSS)
        acc = 0
        for dy in range(-1, 2):
            yy = min(max(y + dy, 0), h - 1)
            for dx in range(-1, 2):
                xx = min(max(x + dx, 0), w - 1)
                acc += weights[dy + 1, dx + 1] * img[yy, xx]
        out[y, x] = (acc + 8) // 16


def _clamped_neighbours(img):
    p = np.pad(img.astype(np.int64), 1, mode="edge")
    h, w = img.shape
    return lambda dy, dx: p[1 + dy:1 + dy + h, 1 + dx:1 + dx + w]


def test_sobel_and_gaussian_filters_on_uint8(rng):
    img = rng.integers(0, 256, (45, 70)).astype(np.uint8)
    img[10:30, 20:50] = 200
    edges, blurred = np.zeros_like(img), np.zeros_like(img)
    blocks = ((img.shape[1] + 15) // 16, (img.shape[0] + 15) // 16)
    d_img = cuda.to_device(img)
    sobel[blocks, (16, 16)](d_img, edges)
    gaussian_blur[blocks, (16, 16)](d_img, blurred)
    n = _clamped_neighbours(img)
    gx = n(-1, 1) + 2 * n(0, 1) + n(1, 1) - n(-1, -1) - 2 * n(0, -1) - n(1, -1)
    gy = n(1, -1) + 2 * n(1, 0) + n(1, 1) - n(-1, -1) - 2 * n(-1, 0) - n(-1, 1)
    np.testing.assert_array_equal(edges, np.minimum(np.abs(gx) + np.abs(gy), 255))
    acc = sum(GAUSS[dy + 1, dx + 1] * n(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1))
    np.testing.assert_array_equal(blurred, (acc + 8) // 16)


# --------------------------------------------------------------------------
# k-means: assignment with a private array of distances, atomic counts and
# sums per cluster

K, DIM = 5, 3


@cuda.jit
def kmeans_assign(points, centroids, labels, counts, sums):
    i = cuda.grid(1)
    if i >= points.shape[0]:
        return
    dist = cuda.local.array(K, dtype=float32)
    for k in range(K):
        acc = float32(0.0)
        for d in range(DIM):
            diff = points[i, d] - centroids[k, d]
            acc += diff * diff
        dist[k] = acc
    best = 0
    for k in range(1, K):
        if dist[k] < dist[best]:
            best = k
    labels[i] = best
    cuda.atomic.add(counts, best, 1)
    for d in range(DIM):
        cuda.atomic.add(sums, (best, d), points[i, d])


def test_kmeans_iterations(rng):
    n = 2000
    centres = rng.uniform(-10, 10, (K, DIM))
    # Coordinates in 1/8: the per-cluster sums are exact in float32.
    points = np.round((centres[rng.integers(0, K, n)] + rng.normal(0, 1.5, (n, DIM))) * 8) / 8
    points = points.astype(np.float32)
    d_points = cuda.to_device(points)
    labels = cuda.device_array(n, np.int32)
    centroids = points[:K].copy()
    for _ in range(4):
        counts = cuda.to_device(np.zeros(K, np.int32))
        sums = cuda.to_device(np.zeros((K, DIM), np.float32))
        kmeans_assign.forall(n)(d_points, cuda.to_device(centroids), labels, counts, sums)
        got = labels.copy_to_host()
        dist = ((points[:, None, :].astype(np.float64) - centroids[None]) ** 2).sum(axis=2)
        chosen = dist[np.arange(n), got]
        # The label is a nearest centroid (up to float32 rounding of the distances).
        assert (chosen <= dist.min(axis=1) * (1 + 1e-5) + 1e-5).all()
        np.testing.assert_array_equal(counts.copy_to_host(), np.bincount(got, minlength=K))
        expected_sums = np.zeros((K, DIM))
        np.add.at(expected_sums, got, points)
        np.testing.assert_array_equal(sums.copy_to_host(), expected_sums)
        c = counts.copy_to_host()
        centroids = np.where(c[:, None] > 0, sums.copy_to_host() / np.maximum(c, 1)[:, None],
                             centroids).astype(np.float32)


# --------------------------------------------------------------------------
# Bitonic sort: one launch per compare-exchange step, from a host loop


@cuda.jit
def bitonic_step(keys, values, j, k):
    i = cuda.grid(1)
    partner = i ^ j
    if i < keys.size and partner > i:
        ascending = (i & k) == 0
        a, b = keys[i], keys[partner]
        if (a > b) == ascending and a != b:
            keys[i], keys[partner] = b, a
            values[i], values[partner] = values[partner], values[i]


def test_bitonic_sort_from_a_host_loop(rng):
    n = 1024
    keys = rng.integers(-500, 500, n).astype(np.float32)
    d_keys, d_vals = cuda.to_device(keys), cuda.to_device(np.arange(n, dtype=np.int32))
    k = 2
    while k <= n:
        j = k // 2
        while j > 0:
            bitonic_step[n // 128, 128](d_keys, d_vals, j, k)
            j //= 2
        k *= 2
    got, perm = d_keys.copy_to_host(), d_vals.copy_to_host()
    np.testing.assert_array_equal(got, np.sort(keys))
    np.testing.assert_array_equal(keys[perm], got)
    assert sorted(perm) == list(range(n))


# --------------------------------------------------------------------------
# Conway's game of life on a torus: neighbours by the modulo of negatives


@cuda.jit
def life_step(board, out):
    r, c = cuda.grid(2)
    rows, cols = board.shape
    if r < rows and c < cols:
        n = 0
        for dr in range(-1, 2):
            for dc in range(-1, 2):
                if dr == 0 and dc == 0:
                    continue
                n += board[(r + dr) % rows, (c + dc) % cols]
        out[r, c] = 1 if n == 3 or (n == 2 and board[r, c] == 1) else 0


def test_game_of_life_with_wraparound(rng):
    board = (rng.random((30, 41)) < 0.3).astype(np.uint8)
    a, b = cuda.to_device(board), cuda.device_array_like(board)
    blocks = ((30 + 7) // 8, (41 + 7) // 8)
    expected = board.astype(np.int64)
    for _ in range(20):
        life_step[blocks, (8, 8)](a, b)
        a, b = b, a
        n = sum(np.roll(np.roll(expected, dr, 0), dc, 1)
                for dr in (-1, 0, 1) for dc in (-1, 0, 1) if (dr, dc) != (0, 0))
        expected = ((n == 3) | ((n == 2) & (expected == 1))).astype(np.int64)
    np.testing.assert_array_equal(a.copy_to_host(), expected)


# --------------------------------------------------------------------------
# Blelloch's exclusive scan in shared memory, then the block offsets

SCAN_THREADS = 64
SCAN_BLOCK = 2 * SCAN_THREADS


@cuda.jit
def scan_blocks(x, out, block_sums):
    temp = cuda.shared.array(SCAN_BLOCK, dtype=int32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * SCAN_BLOCK
    for k in (2 * t, 2 * t + 1):
        temp[k] = x[base + k] if base + k < x.size else 0
    offset = 1
    d = SCAN_BLOCK >> 1
    while d > 0:
        cuda.syncthreads()
        if t < d:
            ai = offset * (2 * t + 1) - 1
            bi = offset * (2 * t + 2) - 1
            temp[bi] += temp[ai]
        offset *= 2
        d >>= 1
    if t == 0:
        block_sums[cuda.blockIdx.x] = temp[SCAN_BLOCK - 1]
        temp[SCAN_BLOCK - 1] = 0
    d = 1
    while d < SCAN_BLOCK:
        offset >>= 1
        cuda.syncthreads()
        if t < d:
            ai = offset * (2 * t + 1) - 1
            bi = offset * (2 * t + 2) - 1
            temp[ai], temp[bi] = temp[bi], temp[ai] + temp[bi]
        d *= 2
    cuda.syncthreads()
    for k in (2 * t, 2 * t + 1):
        if base + k < x.size:
            out[base + k] = temp[k]


@cuda.jit
def add_block_offsets(out, offsets):
    i = cuda.grid(1)
    if i < out.size:
        out[i] += offsets[i // SCAN_BLOCK]


def test_blelloch_prefix_sum(rng):
    x = rng.integers(-100, 100, 3000).astype(np.int32)
    blocks = (x.size + SCAN_BLOCK - 1) // SCAN_BLOCK
    out = cuda.device_array_like(x)
    sums = cuda.device_array(blocks, np.int32)
    scan_blocks[blocks, SCAN_THREADS](cuda.to_device(x), out, sums)
    offsets = np.concatenate([[0], np.cumsum(sums.copy_to_host())[:-1]]).astype(np.int32)
    add_block_offsets.forall(x.size)(out, cuda.to_device(offsets))
    expected = np.concatenate([[0], np.cumsum(x)[:-1]])
    np.testing.assert_array_equal(out.copy_to_host(), expected)


# --------------------------------------------------------------------------
# Warp-shuffle reduction: lanes, then warps of a block, then one atomic

RED_THREADS = 128


@cuda.jit
def shuffle_sum(x, total):
    warp_totals = cuda.shared.array(RED_THREADS, dtype=cuda.int64)
    i = cuda.grid(1)
    lane = cuda.laneid
    warp = cuda.threadIdx.x // cuda.warpsize
    v = 0
    for k in range(i, x.size, cuda.gridsize(1)):
        v += x[k]
    offset = cuda.warpsize // 2
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if lane == 0:
        warp_totals[warp] = v
    cuda.syncthreads()
    if warp == 0:
        nwarps = cuda.blockDim.x // cuda.warpsize
        s = 0
        for w in range(lane, nwarps, cuda.warpsize):
            s += warp_totals[w]
        offset = cuda.warpsize // 2
        while offset > 0:
            s += cuda.shfl_xor_sync(0xFFFFFFFF, s, offset)
            offset //= 2
        if lane == 0:
            cuda.atomic.add(total, 0, s)


def test_warp_shuffle_reduction(rng):
    x = rng.integers(-1000, 1000, 20_000).astype(np.int32)
    total = np.zeros(1, np.int64)
    shuffle_sum[8, RED_THREADS](x, total)
    assert total[0] == x.astype(np.int64).sum()


# --------------------------------------------------------------------------
# Histogram of floats: bins by int(), out-of-range values and NaN skipped


@cuda.jit
def float_histogram(x, lo, hi, counts, weights, w):
    i = cuda.grid(1)
    nbins = counts.shape[0]
    if i < x.shape[0]:
        v = x[i]
        if v >= lo and v < hi:
            b = int((v - lo) / (hi - lo) * nbins)
            b = min(b, nbins - 1)
            cuda.atomic.add(counts, b, 1)
            cuda.atomic.add(weights, b, w[i])


def test_histogram_of_floats(rng):
    # Multiples of 1/256 in a range of width 8 with 32 bins: every bin index exact.
    x = (rng.integers(-1200, 1200, 20_000) / 256).astype(np.float32)
    x[::97] = np.nan
    x[::101] = np.inf
    x[5::103] = -np.inf
    w = (rng.integers(1, 16, x.size) / 4).astype(np.float64)
    counts = np.zeros(32, np.int32)
    weights = np.zeros(32)
    float_histogram.forall(x.size)(x, np.float32(-4.0), np.float32(4.0), counts, weights, w)
    ok = (x >= -4) & (x < 4)
    bins = ((x[ok].astype(np.float64) + 4) / 8 * 32).astype(np.int64)
    np.testing.assert_array_equal(counts, np.bincount(bins, minlength=32))
    np.testing.assert_array_equal(weights, np.bincount(bins, w[ok], minlength=32))


# --------------------------------------------------------------------------
# Ray casting: device functions returning tuples, the nearest of several
# spheres, Lambert shading


@cuda.jit(device=True)
def dot3(ax, ay, az, bx, by, bz):
    return ax * bx + ay * by + az * bz


@cuda.jit(device=True)
def normalise3(x, y, z):
    n = math.sqrt(dot3(x, y, z, x, y, z))
    return x / n, y / n, z / n


@cuda.jit(device=True)
def ray_sphere(ox, oy, oz, dx, dy, dz, sphere):
    """The distance along the ray to the sphere, or -1.0 if it misses."""
    lx, ly, lz = ox - sphere[0], oy - sphere[1], oz - sphere[2]
    b = dot3(lx, ly, lz, dx, dy, dz)
    c = dot3(lx, ly, lz, lx, ly, lz) - sphere[3] * sphere[3]
    disc = b * b - c
    if disc < 0.0:
        return False, -1.0
    root = math.sqrt(disc)
    t = -b - root
    if t < 0.0:
        t = -b + root
    return t >= 0.0, t


@cuda.jit
def render(spheres, light, depth, shade, which):
    px, py = cuda.grid(2)
    h, w = depth.shape
    if px >= w or py >= h:
        return
    dx, dy, dz = normalise3((px + 0.5) / w - 0.5, (py + 0.5) / h - 0.5, 1.0)
    nearest, hit = math.inf, -1
    for s in range(spheres.shape[0]):
        ok, t = ray_sphere(0.0, 0.0, 0.0, dx, dy, dz, spheres[s])
        if ok and t < nearest:
            nearest, hit = t, s
    which[py, px] = hit
    if hit < 0:
        depth[py, px] = 0.0
        shade[py, px] = 0.0
        return
    hx, hy, hz = nearest * dx, nearest * dy, nearest * dz
    nx, ny, nz = normalise3(hx - spheres[hit, 0], hy - spheres[hit, 1], hz - spheres[hit, 2])
    depth[py, px] = nearest
    shade[py, px] = max(0.0, dot3(nx, ny, nz, light[0], light[1], light[2]))


def _render_numpy(spheres, light, h, w):
    px, py = np.meshgrid(np.arange(w), np.arange(h))
    d = np.stack([(px + 0.5) / w - 0.5, (py + 0.5) / h - 0.5, np.ones((h, w))], -1)
    d /= np.sqrt((d * d).sum(-1))[..., None]
    best = np.full((h, w), np.inf)
    which = np.full((h, w), -1)
    for s, (cx, cy, cz, r) in enumerate(spheres):
        lo = -np.array([cx, cy, cz])
        b = d @ lo
        disc = b * b - (lo @ lo - r * r)
        root = np.sqrt(np.maximum(disc, 0))
        t = np.where(-b - root >= 0, -b - root, -b + root)
        hit = (disc >= 0) & (t >= 0) & (t < best)
        best = np.where(hit, t, best)
        which = np.where(hit, s, which)
    depth = np.where(which >= 0, best, 0.0)
    n = depth[..., None] * d - spheres[np.maximum(which, 0), :3]
    n /= np.sqrt((n * n).sum(-1))[..., None]
    shade = np.where(which >= 0, np.maximum(0.0, n @ light), 0.0)
    return depth, shade, which


def test_ray_sphere_rendering():
    spheres = np.array([[0.0, 0.0, 5.0, 1.0], [1.2, 0.4, 6.0, 1.0], [-1.0, -0.8, 4.0, 0.5],
                        [0.0, 0.0, -3.0, 1.0]])
    light = np.array([0.0, -1.0, -1.0]) / math.sqrt(2.0)
    h, w = 48, 64
    depth, shade = np.zeros((h, w)), np.zeros((h, w))
    which = np.zeros((h, w), np.int32)
    render[((w + 15) // 16, (h + 7) // 8), (16, 8)](spheres, light, depth, shade, which)
    e_depth, e_shade, e_which = _render_numpy(spheres, light, h, w)
    np.testing.assert_array_equal(which, e_which)
    assert (which >= 0).sum() > h * w // 10
    np.testing.assert_allclose(depth, e_depth, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(shade, e_shade, rtol=1e-9, atol=1e-12)


# --------------------------------------------------------------------------
# Complex numbers: a Julia set and complex functions on complex64


@cuda.jit
def julia(z0, c, max_iter, counts, final):
    i, j = cuda.grid(2)
    if i < z0.shape[0] and j < z0.shape[1]:
        z = z0[i, j]
        n = 0
        while n < max_iter and abs(z) <= 2.0:
            z = z * z + c
            n += 1
        counts[i, j] = n
        final[i, j] = z


@numba.njit
def julia_cpu(z0, c, max_iter):
    counts = np.zeros(z0.shape, np.int32)
    final = np.zeros_like(z0)
    for i in range(z0.shape[0]):
        for j in range(z0.shape[1]):
            z = z0[i, j]
            n = 0
            while n < max_iter and abs(z) <= 2.0:
                z = z * z + c
                n += 1
            counts[i, j] = n
            final[i, j] = z
    return counts, final


@cuda.jit
def complex_functions(z, out):
    i = cuda.grid(1)
    if i < z.size:
        w = z[i]
        out[i, 0] = cmath.exp(w) * w.conjugate()
        out[i, 1] = cmath.sqrt(w) + abs(w)
        out[i, 2] = w / (1 + 2j) - 1j * w
        out[i, 3] = complex(w.imag, w.real) ** 2 - w.real


def test_julia_set_on_complex64():
    # Points on a grid of 1/16 and c with few bits: one iteration is exact
    # in float32 for a while; the counts of the chaotic points may then
    # differ by rounding (a contracted multiply-add), so those are compared
    # by agreement, the rest exactly.
    xs = np.arange(-24, 24) / 16
    z0 = (xs[None, :] + 1j * xs[:, None] * 0.75).astype(np.complex64)
    c = np.complex64(-0.75 + 0.125j)
    counts = np.zeros(z0.shape, np.int32)
    final = np.zeros_like(z0)
    julia[(6, 6), (8, 8)](z0, c, 64, counts, final)
    e_counts, e_final = julia_cpu(z0, c, 64)
    assert (counts == e_counts).mean() > 0.97
    early = e_counts < 8
    np.testing.assert_array_equal(counts[early], e_counts[early])
    np.testing.assert_allclose(final[early], e_final[early], rtol=1e-5)


def test_complex64_functions(rng):
    z = (rng.normal(0, 2, 500) + 1j * rng.normal(0, 2, 500)).astype(np.complex64)
    out = np.zeros((z.size, 4), np.complex64)
    complex_functions.forall(z.size)(z, out)
    z = z.astype(np.complex128)
    expected = np.stack([np.exp(z) * z.conj(), np.sqrt(z) + np.abs(z), z / (1 + 2j) - 1j * z,
                         (z.imag + 1j * z.real) ** 2 - z.real], axis=1)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------
# Particles in a structured array: integrate, bounce off the walls, count
# bounces; the same device function is numba.njit'd for the reference

PARTICLE = np.dtype([("x", np.float32), ("y", np.float32), ("vx", np.float32),
                     ("vy", np.float32), ("mass", np.float32), ("bounces", np.int32)])


def _advance(p, gravity, dt):
    p.vy -= gravity * dt
    p.x += p.vx * dt
    p.y += p.vy * dt
    if p.x < 0:
        p.x, p.vx = -p.x, -p.vx
        p.bounces += 1
    elif p.x > 1:
        p.x, p.vx = 2 - p.x, -p.vx
        p.bounces += 1
    if p.y < 0:
        p.y, p.vy = -p.y, -p.vy * 0.5
        p.bounces += 1


advance = cuda.jit(device=True)(_advance)
advance_cpu = numba.njit(_advance)


@cuda.jit
def step_particles(particles, gravity, dt, energy):
    i = cuda.grid(1)
    if i < particles.shape[0]:
        p = particles[i]
        advance(p, gravity, dt)
        e = 0.5 * p.mass * (p.vx * p.vx + p.vy * p.vy)
        cuda.atomic.add(energy, 0, e)


@numba.njit
def step_particles_cpu(particles, gravity, dt):
    for i in range(particles.shape[0]):
        advance_cpu(particles[i], gravity, dt)


def test_particles_in_a_record_array(rng):
    n = 1000
    p = np.zeros(n, PARTICLE)
    # Multiples of 1/64 and steps of 1/16: positions stay exact in float32.
    p["x"] = rng.integers(0, 65, n) / 64
    p["y"] = rng.integers(0, 65, n) / 64
    p["vx"] = rng.integers(-64, 65, n) / 64
    p["vy"] = rng.integers(-64, 65, n) / 64
    p["mass"] = rng.integers(1, 5, n)
    d_p = cuda.to_device(p)
    expected = p.copy()
    energy = cuda.device_array(1, np.float64)
    for _ in range(12):
        energy.copy_to_device(np.zeros(1))
        step_particles.forall(n)(d_p, np.float32(0.5), np.float32(1 / 16), energy)
        step_particles_cpu(expected, np.float32(0.5), np.float32(1 / 16))
    got = d_p.copy_to_host()
    for field in PARTICLE.names:
        np.testing.assert_array_equal(got[field], expected[field], err_msg=field)
    assert got["bounces"].sum() > 0
    e = 0.5 * expected["mass"] * (expected["vx"] ** 2 + expected["vy"] ** 2)
    np.testing.assert_allclose(energy.copy_to_host()[0], e.astype(np.float64).sum(), rtol=1e-6)


# --------------------------------------------------------------------------
# Grid-stride loops with negative and computed indices, int64 arithmetic


@cuda.jit
def reverse_and_gather(x, out, perm_out, mult):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    n = x.shape[0]
    for i in range(start, n, stride):
        out[i] = x[-1 - i] * 2
        # A multiplicative hash of i: int64 products far beyond 2^32.
        j = (i * mult + 12345) % n
        perm_out[i] = x[j - n]


def test_grid_stride_loop_with_negative_indices(rng):
    n = 10_007
    x = rng.integers(-2**40, 2**40, n).astype(np.int64)
    out, perm_out = np.zeros_like(x), np.zeros_like(x)
    mult = 2654435761
    reverse_and_gather[7, 64](x, out, perm_out, mult)
    np.testing.assert_array_equal(out, x[::-1] * 2)
    i = np.arange(n, dtype=np.int64)
    np.testing.assert_array_equal(perm_out, x[(i * mult + 12345) % n])


# --------------------------------------------------------------------------
# A 3-d volume: a 7-point Laplacian through cuda.grid(3), and a fill by a
# 3-d grid-stride loop


@cuda.jit
def laplacian3d(v, out):
    x, y, z = cuda.grid(3)
    nz, ny, nx = v.shape
    if 0 < x < nx - 1 and 0 < y < ny - 1 and 0 < z < nz - 1:
        out[z, y, x] = (v[z, y, x - 1] + v[z, y, x + 1] + v[z, y - 1, x] + v[z, y + 1, x]
                        + v[z - 1, y, x] + v[z + 1, y, x] - 6 * v[z, y, x])


@cuda.jit
def fill3d(out):
    x0, y0, z0 = cuda.grid(3)
    sx, sy, sz = cuda.gridsize(3)
    for z in range(z0, out.shape[0], sz):
        for y in range(y0, out.shape[1], sy):
            for x in range(x0, out.shape[2], sx):
                out[z, y, x] = x * y - z


def test_volume_laplacian_3d(rng):
    v = rng.integers(-100, 100, (13, 17, 22)).astype(np.int32)
    out = np.zeros_like(v)
    laplacian3d[(3, 5, 4), (8, 4, 4)](v, out)
    e = np.zeros_like(v)
    e[1:-1, 1:-1, 1:-1] = (v[1:-1, 1:-1, :-2] + v[1:-1, 1:-1, 2:] + v[1:-1, :-2, 1:-1]
                           + v[1:-1, 2:, 1:-1] + v[:-2, 1:-1, 1:-1] + v[2:, 1:-1, 1:-1]
                           - 6 * v[1:-1, 1:-1, 1:-1])
    np.testing.assert_array_equal(out, e)
    filled = cuda.device_array((9, 11, 30), np.int64)
    fill3d[(2, 1, 2), (4, 4, 2)](filled)
    z, y, x = np.meshgrid(np.arange(9), np.arange(11), np.arange(30), indexing="ij")
    np.testing.assert_array_equal(filled.copy_to_host(), x * y - z)


# --------------------------------------------------------------------------
# Boolean masks: threshold, then compaction through an atomic cursor


@cuda.jit
def threshold(x, limit, mask):
    i = cuda.grid(1)
    if i < x.size:
        mask[i] = x[i] > limit and not math.isnan(x[i])


@cuda.jit
def compact(x, mask, out, cursor):
    i = cuda.grid(1)
    if i < x.size and mask[i]:
        slot = cuda.atomic.add(cursor, 0, 1)
        out[slot] = x[i]


def test_boolean_mask_and_compaction(rng):
    x = rng.normal(size=5000)
    x[::50] = np.nan
    mask = cuda.device_array(x.size, np.bool_)
    d_x = cuda.to_device(x)
    threshold.forall(x.size)(d_x, 0.5, mask)
    out = cuda.device_array(x.size, np.float64)
    cursor = cuda.to_device(np.zeros(1, np.int32))
    compact.forall(x.size)(d_x, mask, out, cursor)
    expected = x > 0.5
    np.testing.assert_array_equal(mask.copy_to_host(), expected)
    count = cursor.copy_to_host()[0]
    assert count == expected.sum()
    np.testing.assert_array_equal(np.sort(out.copy_to_host()[:count]), np.sort(x[expected]))


# --------------------------------------------------------------------------
# Control flow: early returns, break and continue in nested loops, while
# loops with compound conditions


@cuda.jit
def first_match(rows, target, first):
    r = cuda.grid(1)
    if r >= rows.shape[0]:
        return
    first[r] = -1
    for c in range(rows.shape[1]):
        if rows[r, c] < 0:
            continue
        if rows[r, c] == target:
            first[r] = c
            break


@cuda.jit
def count_primes_below(limits, counts):
    i = cuda.grid(1)
    if i >= limits.size:
        return
    count = 0
    for n in range(2, limits[i]):
        if n > 2 and n % 2 == 0:
            continue
        prime = True
        d = 3
        while d * d <= n:
            if n % d == 0:
                prime = False
                break
            d += 2
        if prime:
            count += 1
    counts[i] = count


@cuda.jit
def search_sorted(haystack, needles, where, found):
    i = cuda.grid(1)
    if i < needles.size:
        lo, hi = 0, haystack.size
        hit = False
        while lo < hi and not hit:
            mid = (lo + hi) // 2
            if haystack[mid] < needles[i]:
                lo = mid + 1
            elif haystack[mid] > needles[i] or (mid > 0 and haystack[mid - 1] == needles[i]):
                hi = mid
            else:
                lo, hit = mid, True
        where[i] = lo
        found[i] = hit


def test_break_continue_and_early_returns(rng):
    rows = rng.integers(-3, 10, (300, 40)).astype(np.int32)
    first = np.zeros(300, np.int32)
    first_match.forall(300)(rows, 7, first)
    hit = rows == 7
    np.testing.assert_array_equal(first, np.where(hit.any(axis=1), hit.argmax(axis=1), -1))
    limits = rng.integers(0, 600, 64).astype(np.int64)
    counts = np.zeros(64, np.int64)
    count_primes_below.forall(64)(limits, counts)
    sieve = np.ones(600, bool)
    sieve[:2] = False
    for p in range(2, 25):
        sieve[p * p::p] = False
    np.testing.assert_array_equal(counts, [sieve[:n].sum() for n in limits])


def test_while_loop_with_compound_condition(rng):
    haystack = np.sort(rng.integers(0, 500, 1000)).astype(np.int32)
    needles = rng.integers(-10, 510, 777).astype(np.int32)
    where = np.zeros(needles.size, np.int64)
    found = np.zeros(needles.size, np.bool_)
    search_sorted.forall(needles.size)(haystack, needles, where, found)
    np.testing.assert_array_equal(found, np.isin(needles, haystack))
    np.testing.assert_array_equal(where, np.searchsorted(haystack, needles))


# --------------------------------------------------------------------------
# The math module on special values, in float32 and float64

MATH_COLUMNS = 12


@cuda.jit
def math_table(x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        a, b = x[i], y[i]
        out[i, 0] = math.atan2(a, b)
        out[i, 1] = math.hypot(a, b)
        out[i, 2] = math.fmod(a, b)
        out[i, 3] = math.floor(a)
        out[i, 4] = math.ceil(a)
        out[i, 5] = math.copysign(b, a)
        out[i, 6] = math.isnan(a)
        out[i, 7] = math.isinf(b)
        out[i, 8] = math.trunc(a)
        out[i, 9] = math.fabs(a) ** 0.5
        out[i, 10] = math.expm1(a / 100)
        out[i, 11] = math.isfinite(a + b)


def _special_pairs(rng, dtype):
    x = rng.normal(0, 50, 400)
    y = rng.normal(0, 5, 400)
    x[:12] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -1.5, 2.5, -2.5, 7.0, -7.0, 1e30]
    y[:12] = [1.0, -1.0, 2.0, np.inf, 3.0, -np.inf, np.nan, 0.5, -0.5, 2.0, 2.0, -3.0]
    return x.astype(dtype), y.astype(dtype)


def _check_math_table(out, x, y, rtol):
    e = _math_table_numpy(x, y).astype(out.dtype)
    # math.floor, ceil and trunc return ints, as in Python: of infinities,
    # NaN and values beyond int64 they are undefined, as in numba.njit.
    ints = np.isfinite(x) & (np.abs(x) < 2.0 ** 62)
    np.testing.assert_array_equal(out[ints][:, [3, 4, 8]], e[ints][:, [3, 4, 8]])
    exact = [2, 5, 6, 7, 11]
    np.testing.assert_array_equal(out[:, exact], e[:, exact])
    rounded = [0, 1, 9, 10]
    np.testing.assert_allclose(out[:, rounded], e[:, rounded], rtol=rtol, atol=0)


def _math_table_numpy(x, y):
    with np.errstate(all="ignore"):
        return np.stack([np.arctan2(x, y), np.hypot(x, y), np.fmod(x, y), np.floor(x), np.ceil(x),
                         np.copysign(y, x), np.isnan(x), np.isinf(y), np.trunc(x),
                         np.abs(x) ** 0.5, np.expm1(x / 100), np.isfinite(x + y)], axis=1)


def test_math_functions_float64(rng):
    x, y = _special_pairs(rng, np.float64)
    out = np.zeros((x.size, MATH_COLUMNS))
    math_table.forall(x.size)(x, y, out)
    _check_math_table(out, x, y, rtol=1e-14)


def test_math_functions_float32(rng):
    x, y = _special_pairs(rng, np.float32)
    out = np.zeros((x.size, MATH_COLUMNS), np.float32)
    math_table.forall(x.size)(x, y, out)
    _check_math_table(out, x, y, rtol=2e-6)


# --------------------------------------------------------------------------
# Python's integer and float division and modulo of negatives; min and max
# of mixed types; tuple unpacking and swaps


@cuda.jit
def python_division(a, b, q, r, fq, fr):
    i = cuda.grid(1)
    if i < a.size:
        q[i], r[i] = a[i] // b[i], a[i] % b[i]
        fa, fb = a[i] / 4.0, b[i] / 8.0
        fq[i] = fa // fb
        fr[i] = fa % fb


def test_division_and_modulo_of_negatives(rng):
    for dtype in (np.int64, np.int32):
        a = rng.integers(-1000, 1000, 2000).astype(dtype)
        b = rng.integers(-30, 30, 2000).astype(dtype)
        b[b == 0] = 7
        a[:4], b[:4] = [-7, 7, -7, 7], [2, -2, -2, 2]
        q, r = np.zeros_like(a), np.zeros_like(a)
        fq, fr = np.zeros(a.size), np.zeros(a.size)
        python_division.forall(a.size)(a, b, q, r, fq, fr)
        np.testing.assert_array_equal(q, a // b)
        np.testing.assert_array_equal(r, a % b)
        np.testing.assert_array_equal(fq, (a / 4.0) // (b / 8.0))
        np.testing.assert_array_equal(fr, (a / 4.0) % (b / 8.0))
        assert list(q[:4]) == [-4, -4, 3, 3] and list(r[:4]) == [1, -1, -1, 1]


@cuda.jit
def mixed_extremes(ints, floats, out):
    i = cuda.grid(1)
    if i < ints.size:
        out[i, 0] = max(ints[i], 0)
        out[i, 1] = min(ints[i], floats[i])
        out[i, 2] = max(floats[i], ints[i], 2.5)
        out[i, 3] = min(i, ints.size - i, 100)
        out[i, 4] = max(abs(ints[i]), abs(floats[i]))


def test_min_and_max_of_mixed_types(rng):
    ints = rng.integers(-50, 50, 300).astype(np.int32)
    floats = (rng.integers(-200, 200, 300) / 4).astype(np.float32)
    out = np.zeros((300, 5))
    mixed_extremes.forall(300)(ints, floats, out)
    i = np.arange(300)
    expected = np.stack([np.maximum(ints, 0), np.minimum(ints, floats),
                         np.maximum(np.maximum(floats, ints), 2.5),
                         np.minimum(np.minimum(i, 300 - i), 100),
                         np.maximum(np.abs(ints), np.abs(floats))], axis=1)
    np.testing.assert_array_equal(out, expected)


@cuda.jit(device=True)
def sort3(a, b, c):
    if a > b:
        a, b = b, a
    if b > c:
        b, c = c, b
    if a > b:
        a, b = b, a
    return a, b, c


@cuda.jit
def swaps(pairs, gcds, fib, sorted3):
    i = cuda.grid(1)
    if i < pairs.shape[0]:
        a, b = pairs[i, 0], pairs[i, 1]
        while b != 0:
            a, b = b, a % b
        gcds[i] = abs(a)
        f0, f1 = 0, 1
        for _ in range(i % 90):
            f0, f1 = f1, (f0 + f1) % 1000003
        fib[i] = f0
        lo, mid, hi = sort3(pairs[i, 0], pairs[i, 1], pairs[i, 2])
        sorted3[i, 0], sorted3[i, 1], sorted3[i, 2] = lo, mid, hi


def test_tuple_unpacking_and_swaps(rng):
    n = 500
    pairs = rng.integers(-10**6, 10**6, (n, 3)).astype(np.int64)
    gcds, fib = np.zeros(n, np.int64), np.zeros(n, np.int64)
    sorted3 = np.zeros((n, 3), np.int64)
    swaps.forall(n)(pairs, gcds, fib, sorted3)
    np.testing.assert_array_equal(gcds, np.gcd(pairs[:, 0], pairs[:, 1]))
    f = [0, 1]
    while len(f) < 90:
        f.append((f[-1] + f[-2]) % 1000003)
    np.testing.assert_array_equal(fib, [f[i % 90] for i in range(n)])
    np.testing.assert_array_equal(sorted3, np.sort(pairs, axis=1))


# --------------------------------------------------------------------------
# float16 with cuda.fp16


@cuda.jit
def half_ops(a, x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i, 0] = cuda.fp16.hfma(a, x[i], y[i])
        out[i, 1] = cuda.fp16.hmul(x[i], y[i])
        out[i, 2] = cuda.fp16.hsub(cuda.fp16.habs(x[i]), y[i])
        out[i, 3] = cuda.fp16.hmax(cuda.fp16.hneg(x[i]), y[i])
        out[i, 4] = x[i] * a + y[i]


def test_float16_with_fp16_functions(rng):
    x = rng.normal(0, 4, 1000).astype(np.float16)
    y = rng.normal(0, 4, 1000).astype(np.float16)
    a = np.float16(1.375)
    out = np.zeros((1000, 5), np.float16)
    half_ops.forall(1000)(a, x, y, out)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    # One rounding of the exact a*x+y: float64 holds it exactly.
    np.testing.assert_array_equal(out[:, 0], (float(a) * x64 + y64).astype(np.float16))
    np.testing.assert_array_equal(out[:, 1], x * y)
    np.testing.assert_array_equal(out[:, 2], np.abs(x) - y)
    np.testing.assert_array_equal(out[:, 3], np.maximum(-x, y))
    np.testing.assert_array_equal(out[:, 4], x * a + y)


# --------------------------------------------------------------------------
# Streams: chunks copied in, computed and copied back on two streams, timed
# with events; the device buffers are reused by every chunk of a stream


@cuda.jit
def polynomial(x, out):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        out[i] = ((2.0 * v - 3.0) * v + 0.5) * v - 1.0


def test_stream_pipeline_timed_with_events(rng):
    chunks, size = 6, 4096
    x = (rng.integers(-64, 64, chunks * size) / 16).astype(np.float64)
    result = cuda.pinned_array(x.shape, np.float64)
    streams = [cuda.stream(), cuda.stream()]
    buffers = [(cuda.device_array(size), cuda.device_array(size)) for _ in streams]
    start, end = cuda.event(timing=True), cuda.event(timing=True)
    start.record(streams[0])
    for c in range(chunks):
        s = streams[c % 2]
        d_in, d_out = buffers[c % 2]
        part = slice(c * size, (c + 1) * size)
        cuda.to_device(x[part], stream=s, to=d_in)
        polynomial[size // 128, 128, s](d_in, d_out)
        d_out.copy_to_host(result[part], stream=s)
    end_stream = streams[1]
    end_stream.wait_event(cuda.event())  # an event never recorded: no wait
    for s in streams:
        s.synchronize()
    end.record(streams[0])
    end.synchronize()
    # Multiples of 1/16: the polynomial is exact in float64.
    np.testing.assert_array_equal(result, ((2.0 * x - 3.0) * x + 0.5) * x - 1.0)
    assert cuda.event_elapsed_time(start, end) >= 0


# --------------------------------------------------------------------------
# Eager compilation for two signatures; forall; a device function of the
# Horner scheme


@cuda.jit(device=True)
def horner(coeffs, v):
    acc = coeffs[0] * 0
    for k in range(coeffs.size):
        acc = acc * v + coeffs[k]
    return acc


@cuda.jit(["void(float32[:], float32[:], float32[:])", "void(float64[:], float64[:], float64[:])"])
def evaluate(coeffs, x, out):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        out[i] = horner(coeffs, x[i])


def test_eager_signatures_and_forall(rng):
    coeffs = np.array([0.5, -1.0, 0.25, 2.0, -0.125])
    x = rng.integers(-32, 32, 3000) / 8
    for dtype in (np.float32, np.float64):
        out = np.zeros(x.size, dtype)
        evaluate.forall(x.size)(coeffs.astype(dtype), x.astype(dtype), out)
        expected = np.zeros(x.size)
        for c in coeffs:
            expected = expected * x + c
        np.testing.assert_allclose(out, expected, rtol=1e-6 if dtype == np.float32 else 1e-15)


# --------------------------------------------------------------------------
# A hash table built with compare-and-swap: linear probing, one slot per key

EMPTY = -1


@cuda.jit
def hash_insert(keys, table, values):
    i = cuda.grid(1)
    if i >= keys.size:
        return
    key = keys[i]
    slot = (key * 2654435761) % table.size
    while True:
        old = cuda.atomic.cas(table, slot, EMPTY, key)
        if old == EMPTY or old == key:
            cuda.atomic.add(values, slot, 1)
            return
        slot = (slot + 1) % table.size


@cuda.jit
def hash_lookup(queries, table, values, counts):
    i = cuda.grid(1)
    if i < queries.size:
        key = queries[i]
        slot = (key * 2654435761) % table.size
        counts[i] = 0
        for _ in range(table.size):
            if table[slot] == EMPTY:
                break
            if table[slot] == key:
                counts[i] = values[slot]
                break
            slot = (slot + 1) % table.size


def test_hash_table_with_compare_and_swap(rng):
    keys = rng.integers(0, 700, 1500).astype(np.int64)
    table = cuda.to_device(np.full(2048, EMPTY, np.int64))
    values = cuda.to_device(np.zeros(2048, np.int32))
    hash_insert.forall(keys.size)(keys, table, values)
    t = table.copy_to_host()
    stored = t[t != EMPTY]
    np.testing.assert_array_equal(np.sort(stored), np.unique(keys))
    queries = np.arange(-5, 705, dtype=np.int64)
    counts = np.zeros(queries.size, np.int32)
    hash_lookup.forall(queries.size)(queries, table, values, counts)
    expected = np.array([(keys == q).sum() for q in queries])
    np.testing.assert_array_equal(counts, expected)


# --------------------------------------------------------------------------
# N-body accelerations in float32 through shared-memory tiles

NB_TILE = 64


@cuda.jit
def nbody_accel(pos, mass, acc, soft2):
    sp = cuda.shared.array((NB_TILE, 3), float32)
    sm = cuda.shared.array(NB_TILE, float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    n = pos.shape[0]
    px = pos[i, 0] if i < n else float32(0)
    py = pos[i, 1] if i < n else float32(0)
    pz = pos[i, 2] if i < n else float32(0)
    ax = ay = az = float32(0)
    for tile in range(0, n, NB_TILE):
        j = tile + t
        if j < n:
            sp[t, 0], sp[t, 1], sp[t, 2] = pos[j, 0], pos[j, 1], pos[j, 2]
            sm[t] = mass[j]
        else:
            sp[t, 0] = sp[t, 1] = sp[t, 2] = float32(0)
            sm[t] = float32(0)
        cuda.syncthreads()
        for k in range(NB_TILE):
            dx = sp[k, 0] - px
            dy = sp[k, 1] - py
            dz = sp[k, 2] - pz
            r2 = dx * dx + dy * dy + dz * dz + soft2
            inv = float32(1.0) / (r2 * math.sqrt(r2))
            ax += sm[k] * dx * inv
            ay += sm[k] * dy * inv
            az += sm[k] * dz * inv
        cuda.syncthreads()
    if i < n:
        acc[i, 0], acc[i, 1], acc[i, 2] = ax, ay, az


def test_nbody_with_shared_tiles(rng):
    n = 300
    pos = rng.normal(size=(n, 3)).astype(np.float32)
    mass = rng.uniform(0.5, 1.5, n).astype(np.float32)
    acc = np.zeros_like(pos)
    nbody_accel[(n + NB_TILE - 1) // NB_TILE, NB_TILE](pos, mass, acc, np.float32(0.01))
    d = pos[None, :, :].astype(np.float64) - pos[:, None, :]
    r2 = (d * d).sum(-1) + 0.01
    expected = (mass[None, :, None] * d / (r2 * np.sqrt(r2))[..., None]).sum(axis=1)
    np.testing.assert_allclose(acc, expected, rtol=1e-3, atol=1e-3 * np.abs(expected).max())


# --------------------------------------------------------------------------
# Row-wise softmax: row views, iteration over a row, NumPy's scalar
# functions in the kernel, a slice assignment


@cuda.jit(device=True)
def row_max(row):
    m = -math.inf
    for v in row:
        m = max(m, v)
    return m


@cuda.jit
def softmax_rows(x, out):
    i = cuda.grid(1)
    n, m = x.shape
    if i >= n:
        return
    row = x[i]
    if row_max(row) == -math.inf:
        out[i, :] = 0.0
        return
    top = row_max(row)
    total = 0.0
    for j in range(len(row)):
        e = np.exp(row[j] - top)
        out[i, j] = e
        total += e
    for j in range(m):
        out[i, j] /= total


def test_softmax_rows_with_row_views(rng):
    x = rng.normal(0, 3, (200, 37)).astype(np.float32)
    x[5] = -np.inf
    out = np.full_like(x, np.nan)
    softmax_rows.forall(200)(x, out)
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        expected = e / e.sum(axis=1, keepdims=True)
    expected[5] = 0.0
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-30)


# --------------------------------------------------------------------------
# Arguments that are not contiguous: a transposed matrix, a strided vector


@cuda.jit
def column_sums(a, sums):
    j = cuda.grid(1)
    if j < a.shape[1]:
        s = 0
        for i in range(a.shape[0]):
            s += a[i, j]
        sums[j] = s


@cuda.jit
def scale_strided(x, factor):
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] *= factor


def test_non_contiguous_arguments(rng):
    a = rng.integers(-100, 100, (30, 50)).astype(np.int64)
    sums = np.zeros(30, np.int64)
    column_sums.forall(30)(a.T, sums)
    np.testing.assert_array_equal(sums, a.sum(axis=1))
    f = np.asfortranarray(a)
    sums2 = np.zeros(50, np.int64)
    column_sums.forall(50)(f, sums2)
    np.testing.assert_array_equal(sums2, a.sum(axis=0))
    x = rng.integers(-50, 50, 300).astype(np.float64)
    expected = x.copy()
    expected[1::3] *= 2.5
    scale_strided.forall(100)(x[1::3], 2.5)
    np.testing.assert_array_equal(x, expected)


# --------------------------------------------------------------------------
# Quantisation: round() (half to even, as Python's), powers, int8 results


@cuda.jit
def quantise(x, scale, q, err):
    i = cuda.grid(1)
    if i < x.size:
        v = round(x[i] / scale)
        v = min(max(v, -128), 127)
        q[i] = v
        back = v * scale
        err[i] = (x[i] - back) ** 2 + pow(abs(x[i] - back), 3) * 0


def test_quantisation_with_round_half_to_even(rng):
    x = (rng.integers(-600, 600, 2000) / 4).astype(np.float64)
    x[:6] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5]
    q = np.zeros(x.size, np.int8)
    err = np.zeros(x.size)
    quantise.forall(x.size)(x, 1.0, q, err)
    expected = np.clip(np.round(x), -128, 127)
    np.testing.assert_array_equal(q, expected.astype(np.int8))
    assert list(q[:6]) == [0, 2, 2, 0, -2, -2]
    np.testing.assert_array_equal(err, (x - expected) ** 2)


# --------------------------------------------------------------------------
# Bits: Morton codes, popcount, arithmetic shifts of negatives, a uint32
# xorshift hash that wraps


@cuda.jit(device=True)
def spread_bits(v):
    v &= np.uint32(0x3FF)
    v = (v | (v << np.uint32(16))) & np.uint32(0x030000FF)
    v = (v | (v << np.uint32(8))) & np.uint32(0x0300F00F)
    v = (v | (v << np.uint32(4))) & np.uint32(0x030C30C3)
    v = (v | (v << np.uint32(2))) & np.uint32(0x09249249)
    return v


@cuda.jit
def bit_tricks(xyz, signed, morton, pops, shifted, hashed):
    i = cuda.grid(1)
    if i < xyz.shape[0]:
        code = (spread_bits(xyz[i, 0]) | (spread_bits(xyz[i, 1]) << np.uint32(1))
                | (spread_bits(xyz[i, 2]) << np.uint32(2)))
        morton[i] = code
        pops[i] = cuda.popc(code)
        s = signed[i]
        shifted[i, 0] = s >> 3
        shifted[i, 1] = ~s
        shifted[i, 2] = (s << 2) ^ (s >> 1)
        h = np.uint32(code)
        h ^= h << np.uint32(13)
        h ^= h >> np.uint32(17)
        h ^= h << np.uint32(5)
        hashed[i] = h * np.uint32(2654435761)


@numba.njit
def xorshift_cpu(codes):
    # Numba computes uint32 shifts in 64 bits, on the device as here: the
    # bits above 32 reach the later steps before the store truncates.
    out = np.zeros(codes.size, np.uint32)
    for i in range(codes.size):
        h = np.uint32(codes[i])
        h ^= h << np.uint32(13)
        h ^= h >> np.uint32(17)
        h ^= h << np.uint32(5)
        out[i] = h * np.uint32(2654435761)
    return out


def _spread_numpy(v):
    out = np.zeros_like(v, dtype=np.uint64)
    for b in range(10):
        out |= ((v.astype(np.uint64) >> b) & 1) << (3 * b)
    return out


def test_bit_manipulation(rng):
    n = 1000
    xyz = rng.integers(0, 1024, (n, 3)).astype(np.uint32)
    signed = rng.integers(-2**31, 2**31, n).astype(np.int32)
    morton, pops, hashed = (np.zeros(n, np.uint32), np.zeros(n, np.int32),
                            np.zeros(n, np.uint32))
    shifted = np.zeros((n, 3), np.int32)
    bit_tricks.forall(n)(xyz, signed, morton, pops, shifted, hashed)
    e = _spread_numpy(xyz[:, 0]) | (_spread_numpy(xyz[:, 1]) << 1) | (_spread_numpy(xyz[:, 2]) << 2)
    np.testing.assert_array_equal(morton, e.astype(np.uint32))
    np.testing.assert_array_equal(pops, [bin(int(v)).count("1") for v in e])
    np.testing.assert_array_equal(shifted[:, 0], signed >> 3)
    np.testing.assert_array_equal(shifted[:, 1], ~signed)
    np.testing.assert_array_equal(shifted[:, 2], (signed << 2) ^ (signed >> 1))
    np.testing.assert_array_equal(hashed, xorshift_cpu(e.astype(np.uint32)))


# --------------------------------------------------------------------------
# Scalars of several kinds: a bool, a complex; a global tuple read at a
# run-time index; launch sizes that are NumPy integers (a tuple argument,
# which numba.cuda takes, is a limitation: tests/e2e/test_limitations.py)

WEIGHTS = (0.5, 0.25, 0.125, 0.0625)


@cuda.jit
def weighted(x, lo, hi, flip, rotate, out):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i] * WEIGHTS[i % len(WEIGHTS)] + lo
        if flip:
            v = hi - v
        z = rotate * v
        out[i] = z.real + z.imag


def test_bool_and_complex_scalar_arguments(rng):
    x = rng.integers(-100, 100, 513).astype(np.float64)
    out = np.zeros_like(x)
    blocks = np.int64(math.ceil(x.size / 64))
    weighted[blocks, np.int32(64)](x, 1.0, 3.0, True, 0.5 + 0.25j, out)
    v = 3.0 - (x * np.array(WEIGHTS)[np.arange(x.size) % 4] + 1.0)
    np.testing.assert_array_equal(out, 0.5 * v + 0.25 * v)
    weighted[(int(blocks),), (64,)](x, 0.0, 0.0, False, 1j, out)
    np.testing.assert_array_equal(out, x * np.array(WEIGHTS)[np.arange(x.size) % 4])


# --------------------------------------------------------------------------
# A 3x3 median filter: a private array sorted by insertion per pixel


@cuda.jit
def median3x3(img, out):
    x, y = cuda.grid(2)
    h, w = img.shape
    if x >= w or y >= h:
        return
    window = cuda.local.array(9, dtype=np.uint8)
    k = 0
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            window[k] = img[min(max(y + dy, 0), h - 1), min(max(x + dx, 0), w - 1)]
            k += 1
    for a in range(1, 9):
        v = window[a]
        b = a - 1
        while b >= 0 and window[b] > v:
            window[b + 1] = window[b]
            b -= 1
        window[b + 1] = v
    out[y, x] = window[4]


def test_median_filter_with_a_private_array(rng):
    img = rng.integers(0, 256, (33, 47)).astype(np.uint8)
    out = np.zeros_like(img)
    median3x3[(3, 3), (16, 16)](img, out)
    p = np.pad(img, 1, mode="edge")
    stack = np.stack([p[1 + dy:34 + dy, 1 + dx:48 + dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1)])
    np.testing.assert_array_equal(out, np.median(stack, axis=0).astype(np.uint8))


# --------------------------------------------------------------------------
# cuda.reduce and atomics that return the old value


@cuda.reduce
def max_reduce(a, b):
    return max(a, b)


@cuda.jit
def ticket_max(x, best, tickets):
    i = cuda.grid(1)
    if i < x.size:
        old = cuda.atomic.max(best, 0, x[i])
        tickets[i] = x[i] > old
        cuda.atomic.add(best, 1, 1.0)


def test_reduce_and_atomics_returning_the_old_value(rng):
    x = rng.normal(size=4000).astype(np.float32)
    assert max_reduce(x) == x.max()
    assert max_reduce(cuda.to_device(x), init=np.float32(10.0)) == np.float32(10.0)
    best = np.array([-np.inf, 0.0], np.float32)
    tickets = np.zeros(x.size, np.bool_)
    ticket_max.forall(x.size)(x, best, tickets)
    assert best[0] == x.max() and best[1] == x.size
    # The invocation holding the maximum saw a smaller old value.
    assert tickets[np.argmax(x)] and 1 <= tickets.sum() <= x.size


# --------------------------------------------------------------------------
# Batched small linear solves: Gaussian elimination with partial pivoting in
# private 2-d arrays, one system per thread

NSYS = 4
NCOLS = NSYS + 1


@cuda.jit
def batched_solve(a, b, x, singular):
    s = cuda.grid(1)
    if s >= a.shape[0]:
        return
    m = cuda.local.array((NSYS, NCOLS), dtype=float64)
    for r in range(NSYS):
        for c in range(NSYS):
            m[r, c] = a[s, r, c]
        m[r, NSYS] = b[s, r]
    singular[s] = False
    for col in range(NSYS):
        pivot = col
        for r in range(col + 1, NSYS):
            if abs(m[r, col]) > abs(m[pivot, col]):
                pivot = r
        if m[pivot, col] == 0.0:
            singular[s] = True
            return
        if pivot != col:
            for c in range(NSYS + 1):
                m[col, c], m[pivot, c] = m[pivot, c], m[col, c]
        for r in range(NSYS):
            if r == col:
                continue
            f = m[r, col] / m[col, col]
            for c in range(col, NSYS + 1):
                m[r, c] -= f * m[col, c]
    for r in range(NSYS - 1, -1, -1):
        x[s, r] = m[r, NSYS] / m[r, r]


def test_batched_gaussian_elimination(rng):
    n = 300
    a = rng.normal(size=(n, NSYS, NSYS))
    a[7] = 0.0
    a[11, :, 2] = 0.0
    b = rng.normal(size=(n, NSYS))
    x = np.zeros((n, NSYS))
    singular = np.zeros(n, np.bool_)
    batched_solve.forall(n)(a, b, x, singular)
    expected_singular = np.zeros(n, bool)
    expected_singular[[7, 11]] = True
    np.testing.assert_array_equal(singular, expected_singular)
    ok = ~expected_singular
    np.testing.assert_allclose(x[ok], np.linalg.solve(a[ok], b[ok][..., None])[..., 0],
                               rtol=1e-8, atol=1e-8)


# --------------------------------------------------------------------------
# Label propagation inside a block until nothing changes: syncthreads_or,
# a shared array declared in a device function

CC_THREADS = 64


@cuda.jit(device=True)
def block_count(predicate):
    """How many threads of the block have ``predicate``, through a shared
    counter of this device function's own."""
    counter = cuda.shared.array(1, dtype=int32)
    if cuda.threadIdx.x == 0:
        counter[0] = 0
    cuda.syncthreads()
    if predicate:
        cuda.atomic.add(counter, 0, 1)
    cuda.syncthreads()
    total = counter[0]
    cuda.syncthreads()
    return total


@cuda.jit
def propagate_labels(mask, labels, rounds, members):
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    inside = i < mask.size and mask[i] > 0
    label = i if inside else -1
    lab = cuda.shared.array(CC_THREADS, dtype=cuda.int64)
    lab[t] = label
    cuda.syncthreads()
    changed = True
    count = 0
    while changed:
        best = lab[t]
        if best >= 0:
            if t > 0 and lab[t - 1] >= 0:
                best = min(best, lab[t - 1])
            if t + 1 < CC_THREADS and lab[t + 1] >= 0:
                best = min(best, lab[t + 1])
        cuda.syncthreads()
        mine = best != lab[t]
        lab[t] = best
        changed = cuda.syncthreads_or(mine)
        count += 1
    if i < labels.size:
        labels[i] = lab[t]
    roots = block_count(inside and lab[t] == i)
    if t == 0:
        rounds[cuda.blockIdx.x] = count
        members[cuda.blockIdx.x] = roots


def test_label_propagation_until_no_change(rng):
    n = 300
    mask = (rng.random(n) < 0.7).astype(np.int32)
    labels = np.zeros(n, np.int64)
    blocks = (n + CC_THREADS - 1) // CC_THREADS
    rounds = np.zeros(blocks, np.int64)
    roots = np.zeros(blocks, np.int64)
    propagate_labels[blocks, CC_THREADS](mask, labels, rounds, roots)
    expected = np.full(n, -1)
    longest = np.zeros(blocks, np.int64)
    for i in range(n):
        if mask[i]:
            start = i
            while start > 0 and mask[start - 1] and (start - 1) // CC_THREADS == i // CC_THREADS:
                start -= 1
            expected[i] = start
            longest[i // CC_THREADS] = max(longest[i // CC_THREADS], i - start)
    np.testing.assert_array_equal(labels, expected)
    # One round per step of the longest run, and one that changes nothing.
    np.testing.assert_array_equal(rounds, longest + 1)
    # The runs of each block, counted by the starts that label themselves.
    starts = np.nonzero(expected == np.arange(n))[0]
    np.testing.assert_array_equal(roots, np.bincount(starts // CC_THREADS, minlength=blocks))


# --------------------------------------------------------------------------
# Per-block float sums through atomics on shared memory, and device-array
# views as kernel arguments

SEG_THREADS = 128


@cuda.jit
def segment_sums(values, segment, sums):
    partial = cuda.shared.array(8, dtype=float32)
    t = cuda.threadIdx.x
    if t < 8:
        partial[t] = 0
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < values.size:
        cuda.atomic.add(partial, segment[i], values[i])
    cuda.syncthreads()
    if t < 8:
        cuda.atomic.add(sums, (cuda.blockIdx.x % 2, t), partial[t])


@cuda.jit
def add_one(view):
    i, j = cuda.grid(2)
    if i < view.shape[0] and j < view.shape[1]:
        view[i, j] += 1


def test_shared_float_atomics_and_device_views(rng):
    values = (rng.integers(-64, 64, 5000) / 8).astype(np.float32)
    segment = rng.integers(0, 8, 5000).astype(np.int32)
    sums = cuda.to_device(np.zeros((2, 8), np.float32))
    blocks = (values.size + SEG_THREADS - 1) // SEG_THREADS
    segment_sums[blocks, SEG_THREADS](values, segment, sums)
    parity = (np.arange(values.size) // SEG_THREADS) % 2
    expected = np.zeros((2, 8))
    np.add.at(expected, (parity, segment), values)
    np.testing.assert_array_equal(sums.copy_to_host(), expected)
    # Views of a device array: a block of rows and columns, and a column.
    base = np.arange(60, dtype=np.int64).reshape(6, 10)
    d = cuda.to_device(base)
    add_one[(1, 1), (8, 8)](d[1:4, 2:7])
    add_one[(1, 1), (8, 8)](d[:, 9:])
    expected = base.copy()
    expected[1:4, 2:7] += 1
    expected[:, 9:] += 1
    np.testing.assert_array_equal(d.copy_to_host(), expected)
    np.testing.assert_array_equal(d[2].copy_to_host(), expected[2])


# --------------------------------------------------------------------------
# Narrow integers: int16 and uint16 images, wrapping stores, float to int
# conversions of negatives, booleans counted as ints


@cuda.jit
def narrow_ints(img, a, b, out16, out8, counts):
    i = cuda.grid(1)
    if i < img.size:
        out16[i, 0] = img[i] * 3
        out16[i, 1] = a[i] * b[i]
        out16[i, 2] = int(a[i] / 3.0)
        out8[i, 0] = img[i]
        out8[i, 1] = -a[i] // 5
        c = 0
        for k in range(8, 0, -3):
            c += (img[i] >> k) & 1 == 1
        counts[i] = c + (a[i] < 0) + (b[i] > 0)


def test_narrow_integer_types(rng):
    n = 2000
    img = rng.integers(0, 65536, n).astype(np.uint16)
    a = rng.integers(-2**15, 2**15, n).astype(np.int16)
    b = rng.integers(-2**15, 2**15, n).astype(np.int16)
    out16 = np.zeros((n, 3), np.int16)
    out8 = np.zeros((n, 2), np.int8)
    counts = np.zeros(n, np.int32)
    narrow_ints.forall(n)(img, a, b, out16, out8, counts)
    i64 = lambda v: v.astype(np.int64)  # noqa: E731
    np.testing.assert_array_equal(out16[:, 0], (i64(img) * 3).astype(np.int16))
    np.testing.assert_array_equal(out16[:, 1], (i64(a) * i64(b)).astype(np.int16))
    np.testing.assert_array_equal(out16[:, 2], np.trunc(a / 3.0).astype(np.int16))
    np.testing.assert_array_equal(out8[:, 0], img.astype(np.int8))
    np.testing.assert_array_equal(out8[:, 1], ((-i64(a)) // 5).astype(np.int8))
    bits = sum((i64(img) >> k) & 1 for k in (8, 5, 2))
    np.testing.assert_array_equal(counts, bits + (a < 0) + (b > 0))


# --------------------------------------------------------------------------
# NumPy arrays launched on a stream inside auto_synchronize; dynamic shared
# memory split into two views


@cuda.jit
def pairwise_dynamic(x, y, out):
    buf = cuda.shared.array(0, dtype=float32)
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
    xs = buf[:n]
    ys = buf[n:2 * n]
    i = cuda.grid(1)
    xs[t] = x[i] if i < x.size else 0
    ys[t] = y[i] if i < y.size else 0
    cuda.syncthreads()
    if i < out.size:
        out[i] = xs[t] * ys[n - 1 - t]


def test_numpy_arrays_on_a_stream_with_dynamic_shared_memory(rng):
    x = rng.integers(-50, 50, 1000).astype(np.float32)
    y = rng.integers(-50, 50, 1000).astype(np.float32)
    out = np.zeros_like(x)
    stream = cuda.stream()
    threads = 64
    with stream.auto_synchronize():
        d_y = cuda.to_device(y, stream=stream)
        pairwise_dynamic[(x.size + threads - 1) // threads, threads, stream,
                         2 * threads * 4](x, d_y, out)
    blocks = np.arange(x.size) // threads
    t = np.arange(x.size) % threads
    partner = blocks * threads + threads - 1 - t
    expected = x * np.where(partner < y.size, y[np.minimum(partner, y.size - 1)], 0)
    np.testing.assert_array_equal(out, expected)


# --------------------------------------------------------------------------
# Records with array fields: rigid transforms of bodies, a structured
# device array made on the device

BODY = np.dtype([("pos", np.float64, (3,)), ("vel", np.float32, (3,)), ("id", np.int32),
                 ("flags", np.uint8)])


@cuda.jit
def transform_bodies(bodies, rot, shift, moved):
    i = cuda.grid(1)
    if i >= bodies.shape[0]:
        return
    b = bodies[i]
    p = cuda.local.array(3, dtype=float64)
    for r in range(3):
        p[r] = rot[r, 0] * b.pos[0] + rot[r, 1] * b.pos[1] + rot[r, 2] * b.pos[2]
    for r in range(3):
        b.pos[r] = p[r] + shift[r]
        b.vel[r] = -b.vel[r]
    b.flags |= 1 if b.pos[2] > 0 else 2
    if b.flags & 2:
        cuda.atomic.add(moved, 0, 1)
    bodies[i]["id"] = b.id * 10


def test_records_with_array_fields(rng):
    n = 400
    bodies = np.zeros(n, BODY)
    bodies["pos"] = rng.integers(-8, 9, (n, 3))
    bodies["vel"] = rng.integers(-8, 9, (n, 3)) / 4
    bodies["id"] = np.arange(n)
    bodies["flags"] = rng.integers(0, 2, n) * 4
    # A rotation by 90 degrees about x, and a shift: exact in float64.
    rot = np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]])
    shift = np.array([0.5, -1.0, 0.25])
    d_bodies = cuda.to_device(bodies)
    moved = cuda.to_device(np.zeros(1, np.int32))
    transform_bodies.forall(n)(d_bodies, rot, shift, moved)
    got = d_bodies.copy_to_host()
    pos = bodies["pos"] @ rot.T + shift
    np.testing.assert_array_equal(got["pos"], pos)
    np.testing.assert_array_equal(got["vel"], -bodies["vel"])
    flags = bodies["flags"] | np.where(pos[:, 2] > 0, 1, 2).astype(np.uint8)
    np.testing.assert_array_equal(got["flags"], flags)
    np.testing.assert_array_equal(got["id"], np.arange(n) * 10)
    assert moved.copy_to_host()[0] == (pos[:, 2] <= 0).sum()


# --------------------------------------------------------------------------
# Device functions with keyword and default arguments, nested three deep
# with early returns; integer powers and divmod


@cuda.jit(device=True)
def lerp(a, b, t=0.5):
    return a + (b - a) * t


@cuda.jit(device=True)
def classify(v, lo=0, hi=100):
    if v < lo:
        return -1
    if v >= hi:
        return 1
    return 0


@cuda.jit(device=True)
def score(v, weight):
    c = classify(v, hi=50)
    if c != 0:
        return c * weight ** 2
    q, r = divmod(v, 7)
    return q * 2 ** r - weight


@cuda.jit
def keywords_and_powers(values, weights, out, mid):
    i = cuda.grid(1)
    if i < values.size:
        out[i, 0] = score(values[i], weights[i])
        out[i, 1] = lerp(values[i], weights[i])
        out[i, 2] = lerp(values[i], weights[i], t=0.25)
        out[i, 3] = lerp(b=values[i], a=weights[i], t=mid)


def _score_py(v, w):
    c = -1 if v < 0 else (1 if v >= 50 else 0)
    if c != 0:
        return c * w ** 2
    q, r = divmod(v, 7)
    return q * 2 ** r - w


def test_keyword_arguments_and_integer_powers(rng):
    values = rng.integers(-20, 80, 600).astype(np.int64)
    weights = rng.integers(-9, 10, 600).astype(np.int64)
    out = np.zeros((600, 4))
    keywords_and_powers.forall(600)(values, weights, out, 0.75)
    np.testing.assert_array_equal(out[:, 0], [_score_py(int(v), int(w))
                                              for v, w in zip(values, weights)])
    np.testing.assert_array_equal(out[:, 1], values + (weights - values) * 0.5)
    np.testing.assert_array_equal(out[:, 2], values + (weights - values) * 0.25)
    np.testing.assert_array_equal(out[:, 3], weights + (values - weights) * 0.75)


# --------------------------------------------------------------------------
# An image histogram of 256 bins in shared memory, indexed by uint8 pixels;
# a kernel cached on disk and one compiled with fastmath


@cuda.jit(cache=True)
def histogram256(img, bins):
    local = cuda.shared.array(256, dtype=int32)
    t = cuda.threadIdx.x
    for k in range(t, 256, cuda.blockDim.x):
        local[k] = 0
    cuda.syncthreads()
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for k in range(start, img.size, stride):
        cuda.atomic.add(local, img[k], 1)
    cuda.syncthreads()
    for k in range(t, 256, cuda.blockDim.x):
        if local[k]:
            cuda.atomic.add(bins, k, local[k])


@cuda.jit(fastmath=True)
def normalise_fast(v, out):
    i = cuda.grid(1)
    if i < v.shape[0]:
        n = math.sqrt(v[i, 0] * v[i, 0] + v[i, 1] * v[i, 1] + v[i, 2] * v[i, 2])
        inv = 1.0 / n
        for k in range(3):
            out[i, k] = v[i, k] * inv


def test_shared_histogram_of_pixels_cached_and_fastmath(rng):
    img = rng.integers(0, 256, 50_000).astype(np.uint8)
    img[:1000] = 255
    bins = np.zeros(256, np.int32)
    histogram256[16, 128](img, bins)
    np.testing.assert_array_equal(bins, np.bincount(img, minlength=256))
    v = rng.normal(size=(1000, 3)).astype(np.float32)
    out = np.zeros_like(v)
    normalise_fast.forall(1000)(v, out)
    np.testing.assert_allclose(out, v / np.linalg.norm(v, axis=1, keepdims=True), rtol=1e-5)


# --------------------------------------------------------------------------
# Debug prints of one line per block; extrema per row by int64 atomics on a
# 2-d array


@cuda.jit
def row_extrema(x, ext):
    r, c = cuda.grid(2)
    if r < x.shape[0] and c < x.shape[1]:
        cuda.atomic.min(ext, (r, 0), x[r, c])
        cuda.atomic.max(ext, (r, 1), x[r, c])
        cuda.atomic.exch(ext, (r, 2), r)
    if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0:
        print("block", cuda.blockIdx.x, cuda.blockIdx.y, "of", cuda.gridDim.x * cuda.gridDim.y)


def test_row_extrema_with_debug_prints(rng, capfd):
    x = rng.integers(-2**40, 2**40, (20, 30)).astype(np.int64)
    ext = np.zeros((20, 3), np.int64)
    ext[:, 0] = np.iinfo(np.int64).max
    ext[:, 1] = np.iinfo(np.int64).min
    row_extrema[(3, 4), (8, 8)](x, ext)
    np.testing.assert_array_equal(ext[:, 0], x.min(axis=1))
    np.testing.assert_array_equal(ext[:, 1], x.max(axis=1))
    np.testing.assert_array_equal(ext[:, 2], np.arange(20))
    lines = sorted(capfd.readouterr().out.splitlines())
    assert lines == sorted(f"block {bx} {by} of 12" for bx in range(3) for by in range(4))


# --------------------------------------------------------------------------
# Warp-level code: an inclusive scan by shfl_up_sync, warp-aggregated
# atomics through match_any_sync, a loop left when no lane is active


@cuda.jit
def warp_scan(x, out, warp_totals):
    i = cuda.grid(1)
    lane = cuda.laneid
    v = x[i] if i < x.size else 0
    d = 1
    while d < cuda.warpsize:
        up = cuda.shfl_up_sync(0xFFFFFFFF, v, d)
        if lane >= d:
            v += up
        d *= 2
    if i < x.size:
        out[i] = v
    if lane == cuda.warpsize - 1:
        warp_totals[i // cuda.warpsize] = v


@cuda.jit
def aggregated_histogram(keys, bins, leaders):
    i = cuda.grid(1)
    if i < keys.size:
        key = keys[i]
        peers = cuda.match_any_sync(cuda.activemask(), key)
        leader = cuda.ffs(peers) - 1
        if cuda.laneid == leader:
            cuda.atomic.add(bins, key, cuda.popc(peers))
            cuda.atomic.add(leaders, 0, 1)


@cuda.jit
def halving_steps(x, steps):
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0
    n = 0
    active = v > 1
    while cuda.any_sync(0xFFFFFFFF, active):
        if active:
            v = v // 2
            n += 1
            active = v > 1
    if i < x.size:
        steps[i] = n


def test_warp_scan_aggregated_atomics_and_votes(rng):
    n = 1000
    x = rng.integers(-50, 50, n).astype(np.int32)
    out = np.zeros(n, np.int64)
    warps = cuda.device_array(n, np.int64)
    warp_scan.forall(n)(x, out, warps)
    lanes = _lanes()
    groups = np.arange(n) // lanes
    expected = np.concatenate([np.cumsum(x[groups == g]) for g in np.unique(groups)])
    np.testing.assert_array_equal(out, expected)
    keys = rng.integers(0, 6, n).astype(np.int32)
    bins = np.zeros(6, np.int32)
    leaders = np.zeros(1, np.int32)
    aggregated_histogram[(n + 63) // 64, 64](keys, bins, leaders)
    np.testing.assert_array_equal(bins, np.bincount(keys, minlength=6))
    # One leader per distinct key of each warp.
    assert leaders[0] == sum(len(np.unique(keys[g * lanes:(g + 1) * lanes]))
                             for g in range((n + lanes - 1) // lanes))
    values = rng.integers(0, 10_000, n).astype(np.int64)
    steps = np.zeros(n, np.int64)
    halving_steps.forall(n)(values, steps)
    np.testing.assert_array_equal(steps, [int(v).bit_length() - 1 if v > 1 else 0
                                          for v in values])


def _lanes():
    """The subgroup size a kernel sees as cuda.warpsize."""
    @cuda.jit
    def read(out):
        out[0] = cuda.warpsize

    out = np.zeros(1, np.int32)
    read[1, 1](out)
    return int(out[0])


# --------------------------------------------------------------------------
# Launch shapes at the edges: more groups than a dimension's limit, a block
# of 1024 threads in three dimensions, a mapped array written in place


@cuda.jit
def mark_groups(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = cuda.blockIdx.x


@cuda.jit
def block_volume_sum(out):
    tile = cuda.shared.array((4, 16, 16), dtype=int32)
    tx, ty, tz = cuda.threadIdx.x, cuda.threadIdx.y, cuda.threadIdx.z
    tile[tz, ty, tx] = tx + 16 * ty + 256 * tz
    cuda.syncthreads()
    if tx == 0 and ty == 0 and tz == 0:
        s = 0
        for z in range(4):
            for y in range(16):
                for x in range(16):
                    s += tile[z, y, x]
        out[cuda.blockIdx.x] = s


def test_launch_shapes_at_the_edges():
    # As many workgroups along x as the device allows (65535 on lavapipe);
    # one more is a LaunchError (tests/api/test_launch_limits.py).
    groups = min(cuda.get_current_device().info.max_workgroup_count[0], 1 << 20)
    out = cuda.device_array(groups, np.int32)
    mark_groups[groups, 1](out)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(groups))
    sums = cuda.mapped_array(3, np.int64)
    sums[:] = 0
    block_volume_sum[3, (16, 16, 4)](sums)
    cuda.synchronize()
    np.testing.assert_array_equal(sums, [sum(range(1024))] * 3)


# --------------------------------------------------------------------------
# Control flow in device functions shared with numba.njit: a return from
# inside a loop, a byte-level state machine, a for loop with an else


def _find_in_row(row, target):
    for k in range(row.shape[0]):
        if row[k] == target:
            return k
        if row[k] < 0:
            return -2
    return -1


@numba.njit
def is_letter(c):
    # A numba.njit function: the host calls it, and kernels as a device function.
    return (65 <= c <= 90) or (97 <= c <= 122)


def _scan_text(text, start, end):
    """Words, numbers and the longest word of ``text[start:end]``; '#'
    comments run to the end of the line."""
    words = numbers = longest = 0
    i = start
    while i < end:
        c = text[i]
        if is_letter(c):
            n = 0
            while i < end and is_letter(text[i]):
                n += 1
                i += 1
            words += 1
            longest = max(longest, n)
            continue
        if 48 <= c <= 57:
            while i < end and 48 <= text[i] <= 57:
                i += 1
            numbers += 1
            continue
        if c == 35:
            while i < end and text[i] != 10:
                i += 1
            continue
        i += 1
    return words, numbers, longest


def _march(ox, oy, dx, dy, max_steps):
    """Sphere tracing to circles of radius 1/4 around the integer points:
    the distance, -1 past 50, -2 when the steps run out."""
    t = 0.0
    for _ in range(max_steps):
        px, py = ox + t * dx, oy + t * dy
        d = math.hypot(px - math.floor(px + 0.5), py - math.floor(py + 0.5)) - 0.25
        if d < 1e-6:
            break
        t += d
        if t > 50.0:
            t = -1.0
            break
    else:
        t = -2.0
    return t


find_in_row, scan_text, march = (cuda.jit(device=True)(f)
                                 for f in (_find_in_row, _scan_text, _march))
find_in_row_cpu, scan_text_cpu, march_cpu = (numba.njit(f)
                                             for f in (_find_in_row, _scan_text, _march))


@cuda.jit
def control_flow(rows, target, text, starts, found, counts, rays, dist):
    i = cuda.grid(1)
    if i < rows.shape[0]:
        found[i] = find_in_row(rows[i], target)
    if i < starts.shape[0] - 1:
        counts[i, 0], counts[i, 1], counts[i, 2] = scan_text(text, starts[i], starts[i + 1])
    if i < rays.shape[0]:
        dist[i] = march(rays[i, 0], rays[i, 1], rays[i, 2], rays[i, 3], 64)


def test_control_flow_shared_with_njit(rng):
    rows = rng.integers(0, 20, (200, 30)).astype(np.int32)
    rows[::7, 10] = -1
    text = np.frombuffer(b"hello world 42 times # not this 99\nfoo12bar 7 x\n" * 20, np.uint8)
    starts = np.sort(rng.integers(0, text.size, 50))
    starts[0], starts[-1] = 0, text.size
    angle = rng.uniform(0, 2 * np.pi, 300)
    rays = np.stack([rng.uniform(0.4, 0.6, 300), rng.uniform(0.4, 0.6, 300),
                     np.cos(angle), np.sin(angle)], axis=1)
    found = np.zeros(200, np.int64)
    counts = np.zeros((49, 3), np.int64)
    dist = np.zeros(300)
    control_flow.forall(300)(rows, 7, text.copy(), starts, found, counts, rays, dist)
    np.testing.assert_array_equal(found, [find_in_row_cpu(r, 7) for r in rows])
    np.testing.assert_array_equal(counts, [scan_text_cpu(text, starts[k], starts[k + 1])
                                           for k in range(49)])
    expected = np.array([march_cpu(*r, 64) for r in rays])
    np.testing.assert_array_equal(dist < 0, expected < 0)
    assert (expected == -2).any() and (expected > 0).any()
    np.testing.assert_allclose(dist, expected, rtol=1e-9)


# --------------------------------------------------------------------------
# Atomics of four types on shared memory, a 2-d global table read directly


SCALE = np.float32(8.0)
OFFSETS = np.array([[0.0, 1.0], [2.0, 3.0]])


@cuda.jit
def shared_atomic_kinds(x, keys, out):
    s64 = cuda.shared.array(4, float64)
    i64 = cuda.shared.array(4, cuda.int64)
    u32 = cuda.shared.array(4, cuda.uint32)
    f32 = cuda.shared.array(4, float32)
    t = cuda.threadIdx.x
    if t < 4:
        s64[t] = OFFSETS[t // 2, t % 2]
        i64[t] = 0
        u32[t] = 0
        f32[t] = -np.inf
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < x.size:
        k = keys[i]
        cuda.atomic.add(s64, k, x[i])
        cuda.atomic.max(i64, k, np.int64(x[i] * SCALE) << 35)
        cuda.atomic.inc(u32, k, np.uint32(1000))
        cuda.atomic.max(f32, k, np.float32(x[i]))
    cuda.syncthreads()
    if t < 4:
        cuda.atomic.add(out, (t, 0), s64[t])
        cuda.atomic.max(out, (t, 1), float64(i64[t] >> 35))
        cuda.atomic.add(out, (t, 2), float64(u32[t]))
        cuda.atomic.max(out, (t, 3), float64(f32[t]))


def test_shared_memory_atomics_of_four_types(rng):
    n, threads = 3000, 128
    x = rng.integers(-64, 64, n) / 8
    keys = rng.integers(0, 4, n).astype(np.int32)
    out = np.zeros((4, 4))
    out[:, [1, 3]] = -1e300
    blocks = (n + threads - 1) // threads
    shared_atomic_kinds[blocks, threads](x, keys, out)
    block = np.arange(n) // threads
    for k in range(4):
        mine = keys == k
        assert out[k, 0] == x[mine].sum() + blocks * OFFSETS.ravel()[k]
        assert out[k, 1] == (x[mine] * 8).max() and out[k, 3] == x[mine].max()
        # inc wraps past 1000: no block has that many.
        assert out[k, 2] == sum((mine & (block == b)).sum() for b in range(blocks))
