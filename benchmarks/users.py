"""Kernels written as numba.cuda users write them (issue 23's ``users`` family).

Each source is plain numba.cuda code: ``cuda.grid``, ``cuda.threadIdx``,
``cuda.shared.array``, ``cuda.atomic.add``, ``cuda.shfl_down_sync``,
``math.*``, Python float constants (float64 arithmetic, as Numba types
them), int64 indices, chained comparisons and early returns. Nothing is
rewritten: the numba_vulkan backends bind ``cuda`` to
``numba_vulkan.cuda`` and the numba-cuda backend to ``numba.cuda``, and
apply that module's ``cuda.jit`` (numba_vulkan's with the options of the
backend: ``fastmath=set()`` for the exact build, its default
``{"contract"}`` for the contracted one). A source is its kernel without
the ``@cuda.jit`` line; the names a user imports (``math``, ``np``,
``float32``..., and ``numba.cuda.random``'s functions) are in its scope.

Every kernel is checked against NumPy before it is timed (sampled
elements where the reference is costly at full size).
"""

import math

import numpy as np

from benchmarks.suite import Benchmark, _pow2

#: The generator states a kernel takes: made on each backend by its own
#: ``create_xoroshiro128p_states`` (numba.cuda's are a record array).
RNG_SEED = 1234


class RngStates:
    """A placeholder input for ``n`` xoroshiro128+ states seeded ``seed``."""

    def __init__(self, n, seed=RNG_SEED):
        self.n = n
        self.seed = seed


class UserBenchmark(Benchmark):
    """A kernel in numba.cuda's spelling, run as written on every GPU backend."""

    family = "users"
    #: The source uses ``cuda.`` names (not ``nv.``): backends bind ``cuda``.
    style = "cuda"

    def __init__(self, name, kind, source, ndim, sizes, threads=(256,), real="float32"):
        super().__init__(name, kind, source, None, ndim, sizes, real=real, threads=threads)


def _sample(n, count=4096):
    """Indices of up to ``count`` elements spread over ``n`` (the ends included)."""
    return np.unique(np.linspace(0, n - 1, min(n, count)).astype(np.int64))


# --- finance --------------------------------------------------------------------

BLACK_SCHOLES = """
def black_scholes(call, put, S, X, T, R, V):
    i = cuda.grid(1)
    if i >= S.shape[0]:
        return
    sqrt_t = math.sqrt(T[i])
    d1 = (math.log(S[i] / X[i]) + (R + 0.5 * V * V) * T[i]) / (V * sqrt_t)
    d2 = d1 - V * sqrt_t
    cnd1 = 0.5 * (1.0 + math.erf(d1 / math.sqrt(2.0)))
    cnd2 = 0.5 * (1.0 + math.erf(d2 / math.sqrt(2.0)))
    discount = math.exp(-R * T[i])
    call[i] = S[i] * cnd1 - X[i] * discount * cnd2
    put[i] = X[i] * discount * (1.0 - cnd2) - S[i] * (1.0 - cnd1)
"""


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


class BlackScholes(UserBenchmark):
    written = ("call", "put")

    def describe(self, size):
        return f"{_pow2(size)} options, float32"

    def inputs(self, size, rng):
        f = np.float32
        return {"call": np.zeros(size, f), "put": np.zeros(size, f),
                "S": rng.uniform(5, 30, size).astype(f), "X": rng.uniform(1, 100, size).astype(f),
                "T": rng.uniform(0.25, 10, size).astype(f), "R": 0.02, "V": 0.30}

    def check(self, inputs, results):
        k = _sample(inputs["S"].shape[0])
        S, X, T = (inputs[n][k].astype(np.float64) for n in "SXT")
        R, V = inputs["R"], inputs["V"]
        d1 = (np.log(S / X) + (R + 0.5 * V * V) * T) / (V * np.sqrt(T))
        d2 = d1 - V * np.sqrt(T)
        c1, c2 = 0.5 * (1 + _erf(d1 / math.sqrt(2))), 0.5 * (1 + _erf(d2 / math.sqrt(2)))
        disc = np.exp(-R * T)
        np.testing.assert_allclose(results["call"][k], S * c1 - X * disc * c2, rtol=1e-4,
                                   atol=1e-4)
        np.testing.assert_allclose(results["put"][k], X * disc * (1 - c2) - S * (1 - c1),
                                   rtol=1e-4, atol=1e-4)

    def work(self, size, inputs, results):
        return {"bytes": 4 * 5 * size, "flops": 40 * size}


# --- stencils -------------------------------------------------------------------

STENCIL_2D = """
def stencil_2d(a, out):
    j, i = cuda.grid(2)
    if 0 < i < a.shape[0] - 1 and 0 < j < a.shape[1] - 1:
        out[i, j] = np.float32(0.25) * (a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1])
"""


class Stencil2d(UserBenchmark):
    written = ("out",)

    def describe(self, size):
        return f"{size}x{size} float32, 16x16 groups"

    def inputs(self, size, rng):
        return {"a": rng.random((size, size), dtype=np.float32),
                "out": np.zeros((size, size), np.float32)}

    def check(self, inputs, results):
        a = inputs["a"]
        expected = np.zeros_like(a)
        expected[1:-1, 1:-1] = np.float32(0.25) * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2]
                                                   + a[1:-1, 2:])
        np.testing.assert_allclose(results["out"], expected, rtol=1e-6)

    def work(self, size, inputs, results):
        return {"bytes": 2 * 4 * size * size, "flops": 4 * size * size}


STENCIL_3D = """
def stencil_3d(a, out, c0, c1):
    i, j, k = cuda.grid(3)
    nz, ny, nx = a.shape
    if 0 < i < nx - 1 and 0 < j < ny - 1 and 0 < k < nz - 1:
        out[k, j, i] = c0 * a[k, j, i] + c1 * (
            a[k, j, i - 1] + a[k, j, i + 1] + a[k, j - 1, i] + a[k, j + 1, i]
            + a[k - 1, j, i] + a[k + 1, j, i])
"""


class Stencil3d(UserBenchmark):
    written = ("out",)

    def describe(self, size):
        return f"{size}^3 float32, 32x4x2 groups"

    def inputs(self, size, rng):
        return {"a": rng.random((size,) * 3, dtype=np.float32),
                "out": np.zeros((size,) * 3, np.float32), "c0": 0.4, "c1": 0.1}

    def check(self, inputs, results):
        a = inputs["a"].astype(np.float64)
        c = a[1:-1, 1:-1, 1:-1]
        expected = np.zeros_like(a)
        expected[1:-1, 1:-1, 1:-1] = inputs["c0"] * c + inputs["c1"] * (
            a[1:-1, 1:-1, :-2] + a[1:-1, 1:-1, 2:] + a[1:-1, :-2, 1:-1] + a[1:-1, 2:, 1:-1]
            + a[:-2, 1:-1, 1:-1] + a[2:, 1:-1, 1:-1])
        np.testing.assert_allclose(results["out"], expected, rtol=1e-5, atol=1e-6)

    def work(self, size, inputs, results):
        return {"bytes": 2 * 4 * size ** 3, "flops": 8 * size ** 3}


# --- physics ----------------------------------------------------------------------

NBODY = """
def nbody(pos, acc, eps2):
    i = cuda.grid(1)
    n = pos.shape[0]
    if i >= n:
        return
    xi = pos[i, 0]
    yi = pos[i, 1]
    zi = pos[i, 2]
    ax = 0.0
    ay = 0.0
    az = 0.0
    for j in range(n):
        dx = pos[j, 0] - xi
        dy = pos[j, 1] - yi
        dz = pos[j, 2] - zi
        d2 = dx * dx + dy * dy + dz * dz + eps2
        s = pos[j, 3] * (1.0 / (d2 * math.sqrt(d2)))
        ax += dx * s
        ay += dy * s
        az += dz * s
    acc[i, 0] = ax
    acc[i, 1] = ay
    acc[i, 2] = az
"""


class Nbody(UserBenchmark):
    written = ("acc",)

    def describe(self, size):
        return f"{size} bodies float32 (float64 sums)"

    def inputs(self, size, rng):
        pos = rng.random((size, 4), dtype=np.float32)
        pos[:, 3] = rng.uniform(0.5, 1.0, size).astype(np.float32)
        return {"pos": pos, "acc": np.zeros((size, 3), np.float32), "eps2": np.float32(0.01)}

    def check(self, inputs, results):
        pos = inputs["pos"].astype(np.float64)
        k = _sample(pos.shape[0], 256)
        d = pos[None, :, :3] - pos[k, None, :3]
        d2 = (d * d).sum(-1) + float(inputs["eps2"])
        s = pos[None, :, 3] / (d2 * np.sqrt(d2))
        expected = (d * s[..., None]).sum(1)
        np.testing.assert_allclose(results["acc"][k], expected, rtol=1e-4, atol=1e-3)

    def work(self, size, inputs, results):
        return {"bytes": 16 * size, "flops": 20 * size * size}


# --- machine learning ----------------------------------------------------------

SOFTMAX = """
def softmax(x, out):
    row = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    buf = cuda.shared.array(256, float32)
    n = x.shape[1]
    m = -math.inf
    for j in range(tid, n, 256):
        m = max(m, x[row, j])
    buf[tid] = m
    cuda.syncthreads()
    s = 128
    while s > 0:
        if tid < s:
            buf[tid] = max(buf[tid], buf[tid + s])
        cuda.syncthreads()
        s //= 2
    m = buf[0]
    cuda.syncthreads()
    total = 0.0
    for j in range(tid, n, 256):
        total += math.exp(x[row, j] - m)
    buf[tid] = total
    cuda.syncthreads()
    s = 128
    while s > 0:
        if tid < s:
            buf[tid] += buf[tid + s]
        cuda.syncthreads()
        s //= 2
    total = buf[0]
    for j in range(tid, n, 256):
        out[row, j] = math.exp(x[row, j] - m) / total
"""


class RowBenchmark(UserBenchmark):
    """One 256-invocation group per row of a (rows, ROW) float32 matrix."""

    written = ("out",)
    row = 1024

    def describe(self, size):
        return f"{size}x{self.row} float32, a group per row"

    def grid(self, size):
        return (size,), (256,)

    def work(self, size, inputs, results):
        return {"bytes": 2 * 4 * size * self.row, "flops": 5 * size * self.row}


class Softmax(RowBenchmark):
    def inputs(self, size, rng):
        return {"x": rng.standard_normal((size, self.row), dtype=np.float32) * 4,
                "out": np.zeros((size, self.row), np.float32)}

    def check(self, inputs, results):
        x = inputs["x"].astype(np.float64)
        e = np.exp(x - x.max(1, keepdims=True))
        np.testing.assert_allclose(results["out"], e / e.sum(1, keepdims=True), rtol=1e-4,
                                   atol=1e-7)


LAYER_NORM = """
def layer_norm(x, gamma, beta, out):
    row = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    buf = cuda.shared.array(256, float32)
    n = x.shape[1]
    total = float32(0.0)
    for j in range(tid, n, cuda.blockDim.x):
        total += x[row, j]
    buf[tid] = total
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            buf[tid] += buf[tid + s]
        cuda.syncthreads()
        s //= 2
    mean = buf[0] / n
    cuda.syncthreads()
    total = float32(0.0)
    for j in range(tid, n, cuda.blockDim.x):
        d = x[row, j] - mean
        total += d * d
    buf[tid] = total
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            buf[tid] += buf[tid + s]
        cuda.syncthreads()
        s //= 2
    inv = 1.0 / math.sqrt(buf[0] / n + 1e-5)
    for j in range(tid, n, cuda.blockDim.x):
        out[row, j] = (x[row, j] - mean) * inv * gamma[j] + beta[j]
"""


class LayerNorm(RowBenchmark):
    def inputs(self, size, rng):
        return {"x": rng.standard_normal((size, self.row), dtype=np.float32) + 1,
                "gamma": rng.uniform(0.5, 1.5, self.row).astype(np.float32),
                "beta": rng.uniform(-1, 1, self.row).astype(np.float32),
                "out": np.zeros((size, self.row), np.float32)}

    def check(self, inputs, results):
        x = inputs["x"].astype(np.float64)
        mean = x.mean(1, keepdims=True)
        var = ((x - mean) ** 2).mean(1, keepdims=True)
        expected = (x - mean) / np.sqrt(var + 1e-5) * inputs["gamma"] + inputs["beta"]
        np.testing.assert_allclose(results["out"], expected, rtol=1e-4, atol=1e-4)


# --- imaging ----------------------------------------------------------------------

HISTOGRAM = """
def histogram(x, bins):
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(bins, x[i], 1)
"""


class Histogram(UserBenchmark):
    written = ("bins",)

    def describe(self, size):
        return f"{_pow2(size)} uint8, 256 int32 bins"

    def inputs(self, size, rng):
        return {"x": rng.integers(0, 256, size, dtype=np.uint8),
                "bins": np.zeros(256, np.int32)}

    def check(self, inputs, results):
        np.testing.assert_array_equal(results["bins"],
                                      np.bincount(inputs["x"], minlength=256))

    def work(self, size, inputs, results):
        return {"bytes": size, "flops": 0}


BOX_BLUR = """
def box_blur(img, out):
    x, y = cuda.grid(2)
    h, w = img.shape
    if y >= h or x >= w:
        return
    s = 0
    for dy in range(-1, 2):
        for dx in range(-1, 2):
            yy = min(max(y + dy, 0), h - 1)
            xx = min(max(x + dx, 0), w - 1)
            s += img[yy, xx]
    out[y, x] = s // 9
"""


class BoxBlur(UserBenchmark):
    written = ("out",)

    def describe(self, size):
        return f"{size}x{size} uint8, 16x16 groups"

    def inputs(self, size, rng):
        return {"img": rng.integers(0, 256, (size, size), dtype=np.uint8),
                "out": np.zeros((size, size), np.uint8)}

    def check(self, inputs, results):
        padded = np.pad(inputs["img"].astype(np.int64), 1, mode="edge")
        h, w = inputs["img"].shape
        total = sum(padded[dy:dy + h, dx:dx + w] for dy in range(3) for dx in range(3))
        np.testing.assert_array_equal(results["out"], (total // 9).astype(np.uint8))

    def work(self, size, inputs, results):
        return {"bytes": 2 * size * size, "flops": 9 * size * size}


# --- data movement ----------------------------------------------------------------

GATHER = """
def gather(src, idx, out):
    i = cuda.grid(1)
    if i < idx.shape[0]:
        out[i] = src[idx[i]]
"""

SCATTER = """
def scatter(src, idx, out):
    i = cuda.grid(1)
    if i < idx.shape[0]:
        out[idx[i]] = src[i]
"""


class Gather(UserBenchmark):
    """``out[i] = src[idx[i]]`` (or the scatter) through a random int64 permutation."""

    written = ("out",)

    def describe(self, size):
        return f"{_pow2(size)} float32, int64 permutation"

    def inputs(self, size, rng):
        return {"src": rng.random(size, dtype=np.float32),
                "idx": rng.permutation(size).astype(np.int64),
                "out": np.zeros(size, np.float32)}

    def check(self, inputs, results):
        expected = np.zeros_like(inputs["src"])
        if self.name == "scatter":
            expected[inputs["idx"]] = inputs["src"]
        else:
            expected = inputs["src"][inputs["idx"]]
        np.testing.assert_array_equal(results["out"], expected)

    def work(self, size, inputs, results):
        return {"bytes": 16 * size, "flops": 0}


AXPBY = """
def axpby(a, x, b, y):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = a * x[i] + b * y[i]
"""


class Axpby(UserBenchmark):
    written = ("y",)

    def describe(self, size):
        return f"{_pow2(size)} float64"

    def inputs(self, size, rng):
        return {"a": 2.5, "x": rng.random(size), "b": -0.5, "y": rng.random(size)}

    def check(self, inputs, results):
        # A fused multiply-add (contracted builds, numba-cuda's default) rounds
        # once where NumPy rounds twice: a few ulps of the terms, not of a
        # difference that cancels.
        terms = 2.5 * np.abs(inputs["x"]) + 0.5 * np.abs(inputs["y"])
        error = np.abs(results["y"] - (2.5 * inputs["x"] - 0.5 * inputs["y"]))
        assert (error <= 4 * np.finfo(np.float64).eps * terms).all()

    def work(self, size, inputs, results):
        return {"bytes": 24 * size, "flops": 3 * size}


# --- random numbers ----------------------------------------------------------------

MONTE_CARLO_PI = """
def monte_carlo_pi(states, hits, samples):
    i = cuda.grid(1)
    if i >= hits.shape[0]:
        return
    inside = 0
    for _ in range(samples):
        x = xoroshiro128p_uniform_float32(states, i)
        y = xoroshiro128p_uniform_float32(states, i)
        if x * x + y * y <= 1.0:
            inside += 1
    hits[i] = inside
"""


class MonteCarloPi(UserBenchmark):
    """Points in the quarter circle, ``SAMPLES`` per invocation, each invocation
    its own xoroshiro128+ stream (``numba.cuda.random``)."""

    written = ("hits",)
    samples = 256

    def describe(self, size):
        return f"{_pow2(size)} streams x {self.samples} points"

    def inputs(self, size, rng):
        return {"states": RngStates(size), "hits": np.zeros(size, np.int32),
                "samples": self.samples}

    def check(self, inputs, results):
        hits = results["hits"]
        assert hits.min() >= 0 and hits.max() <= self.samples, "hit counts out of range"
        n = hits.size * self.samples
        estimate = 4 * hits.sum() / n
        # Binomial standard deviation of the estimate, 6 of them.
        sigma = 4 * math.sqrt(math.pi / 4 * (1 - math.pi / 4) / n)
        assert abs(estimate - math.pi) < 6 * sigma, f"pi estimated as {estimate}"

    def work(self, size, inputs, results):
        return {"bytes": 20 * size, "flops": 10 * size * self.samples}


# --- reductions and signals ------------------------------------------------------

WARP_SUM = """
def warp_sum(x, out):
    i = cuda.grid(1)
    v = float32(0.0)
    if i < x.shape[0]:
        v = x[i]
    offset = cuda.warpsize // 2
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        cuda.atomic.add(out, 0, v)
"""


class WarpSum(UserBenchmark):
    written = ("out",)

    def describe(self, size):
        return f"{_pow2(size)} float32, shuffles + an atomic per warp"

    def inputs(self, size, rng):
        return {"x": rng.random(size, dtype=np.float32), "out": np.zeros(1, np.float32)}

    def check(self, inputs, results):
        np.testing.assert_allclose(results["out"][0], inputs["x"].sum(dtype=np.float64),
                                   rtol=1e-3)

    def work(self, size, inputs, results):
        return {"bytes": 4 * size, "flops": size}


CONV1D = """
def conv1d(signal, taps, out):
    i = cuda.grid(1)
    n = signal.shape[0]
    if i >= n:
        return
    r = taps.shape[0] // 2
    acc = float32(0.0)
    for k in range(taps.shape[0]):
        j = i + k - r
        if 0 <= j < n:
            acc += taps[k] * signal[j]
    out[i] = acc
"""


class Conv1d(UserBenchmark):
    written = ("out",)
    taps = 15

    def describe(self, size):
        return f"{_pow2(size)} float32, {self.taps} taps"

    def inputs(self, size, rng):
        return {"signal": rng.standard_normal(size, dtype=np.float32),
                "taps": rng.random(self.taps, dtype=np.float32),
                "out": np.zeros(size, np.float32)}

    def check(self, inputs, results):
        expected = np.convolve(inputs["signal"].astype(np.float64),
                               inputs["taps"][::-1].astype(np.float64), mode="same")
        np.testing.assert_allclose(results["out"], expected, rtol=1e-4, atol=1e-4)

    def work(self, size, inputs, results):
        return {"bytes": 8 * size, "flops": 2 * self.taps * size}


MATVEC = """
def matvec(A, x, y):
    i = cuda.grid(1)
    if i < A.shape[0]:
        acc = float32(0.0)
        for j in range(A.shape[1]):
            acc += A[i, j] * x[j]
        y[i] = acc
"""


class Matvec(UserBenchmark):
    written = ("y",)

    def describe(self, size):
        return f"{size}x{size} float32, a row per invocation"

    def inputs(self, size, rng):
        return {"A": rng.random((size, size), dtype=np.float32),
                "x": rng.random(size, dtype=np.float32), "y": np.zeros(size, np.float32)}

    def check(self, inputs, results):
        expected = inputs["A"].astype(np.float64) @ inputs["x"].astype(np.float64)
        np.testing.assert_allclose(results["y"], expected, rtol=1e-4)

    def work(self, size, inputs, results):
        return {"bytes": 4 * size * size, "flops": 2 * size * size}


CLASSIFY = """
def classify(x, labels, lo, hi):
    i = cuda.grid(1)
    if i >= x.shape[0]:
        return
    v = x[i]
    if math.isnan(v):
        labels[i] = -1
        return
    if v < lo:
        labels[i] = 0
        return
    if v > hi:
        labels[i] = 2
        return
    labels[i] = 1
"""


class Classify(UserBenchmark):
    """Early returns: a label per element of a float32 array with NaNs."""

    written = ("labels",)

    def describe(self, size):
        return f"{_pow2(size)} float32 -> int32 labels"

    def inputs(self, size, rng):
        x = rng.standard_normal(size, dtype=np.float32)
        x[rng.random(size) < 0.05] = np.nan
        return {"x": x, "labels": np.zeros(size, np.int32), "lo": -1.0, "hi": 1.0}

    def check(self, inputs, results):
        x = inputs["x"]
        expected = np.where(np.isnan(x), -1, np.where(x < -1, 0, np.where(x > 1, 2, 1)))
        np.testing.assert_array_equal(results["labels"], expected)

    def work(self, size, inputs, results):
        return {"bytes": 8 * size, "flops": 2 * size}


def _one(size_full, size_quick, size_tiny):
    return {"full": size_full, "quick": size_quick, "tiny": size_tiny}


BENCHMARKS = [
    BlackScholes("black_scholes", "compute", BLACK_SCHOLES, 1, _one(2 ** 24, 2 ** 16, 1000)),
    Stencil2d("stencil_2d", "memory", STENCIL_2D, 2, _one(8192, 512, 37), threads=(16, 16)),
    Stencil3d("stencil_3d", "memory", STENCIL_3D, 3, _one(384, 64, 13), threads=(32, 4, 2)),
    Nbody("nbody_users", "compute", NBODY, 1, _one(65536, 2048, 300)),
    Softmax("softmax", "memory", SOFTMAX, 1, _one(16384, 256, 5)),
    LayerNorm("layer_norm", "memory", LAYER_NORM, 1, _one(16384, 256, 5)),
    Histogram("histogram_u8", "memory", HISTOGRAM, 1, _one(2 ** 26, 2 ** 20, 5000)),
    BoxBlur("box_blur_u8", "memory", BOX_BLUR, 2, _one(8192, 512, 37), threads=(16, 16)),
    Gather("gather", "memory", GATHER, 1, _one(2 ** 24, 2 ** 20, 3000)),
    Gather("scatter", "memory", SCATTER, 1, _one(2 ** 24, 2 ** 20, 3000)),
    Axpby("axpby_f64", "memory", AXPBY, 1, _one(2 ** 25, 2 ** 20, 3000)),
    MonteCarloPi("monte_carlo_pi", "compute", MONTE_CARLO_PI, 1, _one(2 ** 20, 2 ** 14, 512)),
    WarpSum("warp_sum", "memory", WARP_SUM, 1, _one(2 ** 26, 2 ** 20, 3000)),
    Conv1d("conv1d", "memory", CONV1D, 1, _one(2 ** 25, 2 ** 20, 3000)),
    Matvec("matvec", "memory", MATVEC, 1, _one(16384, 1024, 70)),
    Classify("classify", "memory", CLASSIFY, 1, _one(2 ** 26, 2 ** 20, 3000)),
]
