"""The benchmarks: each kernel written once, with its inputs, checks and work.

A kernel is Python source text in numba_vulkan's style (``nv.global_id``,
``nv.shared.array``, ``nv.barrier``, ``nv.atomic.add``); the backends turn
it into a numba_vulkan kernel as it is and into a numba-cuda kernel by
rewriting only those calls (:mod:`benchmarks.backends`). ``real`` stands
for the benchmark's float type, so one Mandelbrot source serves float32
and float64. The CPU backend runs a loop form of the same logic under
``numba.njit(parallel=True)``; the backend binds ``real`` in it too.
"""

import math
import re
from dataclasses import dataclass

import numpy as np
from numba import prange

#: Problem sizes: "full" is the GPU run (issue 14), "quick" fits lavapipe on
#: two cores in a few minutes, "tiny" is a smoke test (and small enough for
#: numba's CUDA simulator).
SIZES = ("full", "quick", "tiny")


@dataclass
class Benchmark:
    """One kernel benchmark.

    Attributes:
        name: Identifier used in the JSON and on the command line.
        kind: ``memory`` (bound by bandwidth), ``compute`` (bound by
            arithmetic) or ``latency`` (bound by launch overhead).
        source: The kernel as source text; the function named ``name``'s
            kernel is the one defined in it.
        cpu: The loop form for ``numba.njit(parallel=True)``, same arguments.
        ndim: Dimensions of the launch grid.
        sizes: Problem size per entry of :data:`SIZES`.
        real: The float type ``real`` stands for in the source.
    """

    name: str
    kind: str
    source: str
    cpu: object
    ndim: int
    sizes: dict
    real: str = "float32"
    threads: tuple = (256,)
    #: For a plainly written variant, the name of the benchmark it rewrites.
    tuned: str = None
    #: Names of the arrays the kernel writes (a class attribute, not a field).
    written = ()

    @property
    def function(self):
        """Name of the function the source defines."""
        return re.search(r"^def (\w+)", self.source, re.M).group(1)

    def describe(self, size):
        """A short human description of the problem at ``size``."""
        raise NotImplementedError

    def inputs(self, size, rng):
        """Host arrays (and scalars) by argument name."""
        raise NotImplementedError

    def arguments(self):
        """Argument names in the kernel's order: the parameters of the source's function."""
        return tuple(re.search(r"^def \w+\(([^)]*)\)", self.source, re.M).group(1)
                     .replace(" ", "").split(","))

    def outputs(self):
        """Names of the arrays the kernel writes."""
        return self.written

    def grid(self, size):
        """``(groups, threads)`` of the launch, as tuples."""
        threads = self.threads
        extent = self.extent(size)
        groups = tuple(-(-e // t) for e, t in zip(extent, threads))
        return groups, threads

    def extent(self, size):
        """Invocations needed along each launch axis: ``size`` along each by default."""
        return (size,) * self.ndim

    def check(self, inputs, results):
        """Raise AssertionError unless ``results`` (host arrays) are right."""
        raise NotImplementedError

    def work(self, size, inputs, results):
        """``{"bytes": ..., "flops": ...}`` one launch moves and computes."""
        raise NotImplementedError


def _pow2(n):
    k = int(round(math.log2(n)))
    return f"2^{k}" if 2 ** k == n else str(n)


# --- saxpy -------------------------------------------------------------------

SAXPY = """
def saxpy(a, x, y):
    i = nv.global_id(0)
    if i < x.shape[0]:
        y[i] = a * x[i] + y[i]
"""


def saxpy_cpu(a, x, y):
    for i in prange(x.shape[0]):
        y[i] = a * x[i] + y[i]


class Saxpy(Benchmark):
    written = ("y",)

    def describe(self, size):
        return f"{_pow2(size)} float32"

    def inputs(self, size, rng):
        return {"a": np.float32(2.0), "x": rng.random(size, dtype=np.float32),
                "y": rng.random(size, dtype=np.float32)}

    def check(self, inputs, results):
        expected = inputs["a"] * inputs["x"] + inputs["y"]
        np.testing.assert_allclose(results["y"], expected, rtol=1e-6)

    def work(self, size, inputs, results):
        return {"bytes": 3 * 4 * size, "flops": 2 * size}


# --- sum reduction -------------------------------------------------------------

REDUCE = """
def reduce_sum(x, out):
    partial = nv.shared.array(256, float32)
    tid = nv.local_id(0)
    i = nv.global_id(0)
    value = float32(0.0)
    if i < x.shape[0]:
        value = x[i]
    partial[tid] = value
    nv.barrier()
    step = 128
    while step > 0:
        if tid < step:
            partial[tid] += partial[tid + step]
        nv.barrier()
        step //= 2
    if tid == 0:
        nv.atomic.add(out, 0, partial[0])
"""


REDUCE_SUBGROUP = """
def reduce_subgroup(x, out):
    # One slot per subgroup: 256 invocations in subgroups of 8 or more.
    partial = nv.shared.array(32, float32)
    i = nv.global_id(0)
    value = float32(0.0)
    if i < x.shape[0]:
        value = x[i]
    offset = nv.subgroup.size() // 2
    while offset > 0:
        value += nv.subgroup.shuffle_down(value, offset)
        offset //= 2
    if nv.subgroup.local_id() == 0:
        partial[nv.subgroup.id()] = value
    nv.barrier()
    if nv.local_id(0) == 0:
        total = float32(0.0)
        for k in range(nv.local_size(0) // nv.subgroup.size()):
            total += partial[k]
        nv.atomic.add(out, 0, total)
"""


def reduce_cpu(x, out):
    total = np.float32(0.0)
    for i in prange(x.shape[0]):
        total += x[i]
    out[0] += total


class Reduce(Benchmark):
    written = ("out",)

    def describe(self, size):
        return f"{_pow2(size)} float32"

    def inputs(self, size, rng):
        return {"x": rng.random(size, dtype=np.float32), "out": np.zeros(1, np.float32)}

    def check(self, inputs, results):
        expected = np.sum(inputs["x"], dtype=np.float64)
        np.testing.assert_allclose(results["out"][0], expected, rtol=1e-3)

    def work(self, size, inputs, results):
        return {"bytes": 4 * size, "flops": size}


# --- tiled matrix product -----------------------------------------------------------

MATMUL = """
def matmul(a, b, c):
    ta = nv.shared.array((16, 16), float32)
    tb = nv.shared.array((16, 16), float32)
    tx = nv.local_id(0)
    ty = nv.local_id(1)
    col = nv.global_id(0)
    row = nv.global_id(1)
    n = a.shape[1]
    acc = float32(0.0)
    for tile in range((n + 15) // 16):
        k = tile * 16 + tx
        if row < a.shape[0] and k < n:
            ta[ty, tx] = a[row, k]
        else:
            ta[ty, tx] = float32(0.0)
        k = tile * 16 + ty
        if col < b.shape[1] and k < n:
            tb[ty, tx] = b[k, col]
        else:
            tb[ty, tx] = float32(0.0)
        nv.barrier()
        for j in range(16):
            acc += ta[ty, j] * tb[j, tx]
        nv.barrier()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc
"""


def matmul_cpu(a, b, c):
    n = a.shape[1]
    for row in prange(a.shape[0]):
        for col in range(b.shape[1]):
            c[row, col] = 0.0
        for k in range(n):
            value = a[row, k]
            for col in range(b.shape[1]):
                c[row, col] += value * b[k, col]


class Matmul(Benchmark):
    written = ("c",)

    def describe(self, size):
        return f"{size}x{size} float32"

    def inputs(self, size, rng):
        return {"a": rng.random((size, size), dtype=np.float32),
                "b": rng.random((size, size), dtype=np.float32),
                "c": np.zeros((size, size), np.float32)}

    def check(self, inputs, results):
        size = inputs["a"].shape[0]
        rows = np.unique(np.linspace(0, size - 1, 32).astype(int))
        expected = inputs["a"][rows].astype(np.float64) @ inputs["b"].astype(np.float64)
        np.testing.assert_allclose(results["c"][rows], expected, rtol=1e-4)

    def work(self, size, inputs, results):
        return {"bytes": 3 * 4 * size * size, "flops": 2 * size ** 3}


# --- Mandelbrot ---------------------------------------------------------------

MANDELBROT = """
def mandelbrot(counts, x0, y0, step, max_iter):
    col = nv.global_id(0)
    row = nv.global_id(1)
    if row < counts.shape[0] and col < counts.shape[1]:
        cr = x0 + real(col) * step
        ci = y0 + real(row) * step
        zr = real(0.0)
        zi = real(0.0)
        n = 0
        while n < max_iter:
            zr2 = zr * zr
            zi2 = zi * zi
            if zr2 + zi2 > real(4.0):
                break
            zi = real(2.0) * zr * zi + ci
            zr = zr2 - zi2 + cr
            n += 1
        counts[row, col] = n
"""


def mandelbrot_cpu(counts, x0, y0, step, max_iter):
    for row in prange(counts.shape[0]):
        ci = y0 + real(row) * step
        for col in range(counts.shape[1]):
            cr = x0 + real(col) * step
            zr = real(0.0)
            zi = real(0.0)
            n = 0
            while n < max_iter:
                zr2 = zr * zr
                zi2 = zi * zi
                if zr2 + zi2 > real(4.0):
                    break
                zi = real(2.0) * zr * zi + ci
                zr = zr2 - zi2 + cr
                n += 1
            counts[row, col] = n


#: Arithmetic operations per Mandelbrot iteration (3 multiplies, 2 adds for
#: the test, 2 multiplies and 1 add for z's update, less the shared terms).
MANDELBROT_FLOPS = 8
MAX_ITER = 256


class Mandelbrot(Benchmark):
    written = ("counts",)

    def describe(self, size):
        return f"{size}x{size} {self.real}, {MAX_ITER} iter"

    def inputs(self, size, rng):
        real = np.dtype(self.real).type
        return {"counts": np.zeros((size, size), np.int32), "x0": real(-2.0),
                "y0": real(-1.25), "step": real(2.5 / size), "max_iter": np.int32(MAX_ITER)}

    def check(self, inputs, results):
        counts = inputs["counts"]
        rows = np.unique(np.linspace(0, counts.shape[0] - 1, 32).astype(int))
        expected = mandelbrot_rows(rows, counts.shape[1], inputs["x0"], inputs["y0"],
                                   inputs["step"], int(inputs["max_iter"]))
        got = results["counts"][rows]
        # Points next to the set's edge may escape an iteration earlier or
        # later when a compiler contracts a*b+c into a fused multiply-add.
        mismatch = np.mean(got != expected)
        limit = 0.02 if self.real == "float32" else 0.005
        assert mismatch <= limit, (f"{mismatch:.2%} of sampled pixels differ from NumPy's "
                                   f"(allowed {limit:.1%})")

    def work(self, size, inputs, results):
        iterations = int(np.sum(results["counts"], dtype=np.int64))
        return {"bytes": 4 * size * size, "flops": MANDELBROT_FLOPS * iterations,
                "iterations": iterations}


def mandelbrot_rows(rows, width, x0, y0, step, max_iter):
    """Escape counts of the given rows, computed by NumPy in x0's float type."""
    real = type(x0)
    cr = (x0 + np.arange(width).astype(real) * step)[None, :].repeat(len(rows), 0)
    ci = (y0 + np.asarray(rows).astype(real) * step)[:, None].repeat(width, 1)
    zr = np.zeros_like(cr)
    zi = np.zeros_like(cr)
    counts = np.zeros(cr.shape, np.int32)
    active = np.ones(cr.shape, bool)
    for _ in range(max_iter):
        zr2 = zr * zr
        zi2 = zi * zi
        active &= ~(zr2 + zi2 > real(4.0))
        if not active.any():
            break
        new_zi = real(2.0) * zr * zi + ci
        new_zr = zr2 - zi2 + cr
        zr = np.where(active, new_zr, zr)
        zi = np.where(active, new_zi, zi)
        counts += active
    return counts


# --- 5-point stencil ---------------------------------------------------------------

STENCIL = """
def stencil(a, b):
    col = nv.global_id(0)
    row = nv.global_id(1)
    if row >= 1 and row < a.shape[0] - 1 and col >= 1 and col < a.shape[1] - 1:
        b[row, col] = float32(0.2) * (a[row, col] + a[row - 1, col] + a[row + 1, col]
                                      + a[row, col - 1] + a[row, col + 1])
"""


def stencil_cpu(a, b):
    for row in prange(1, a.shape[0] - 1):
        for col in range(1, a.shape[1] - 1):
            b[row, col] = np.float32(0.2) * (a[row, col] + a[row - 1, col] + a[row + 1, col]
                                             + a[row, col - 1] + a[row, col + 1])


class Stencil(Benchmark):
    written = ("b",)

    def describe(self, size):
        return f"{size}x{size} float32"

    def inputs(self, size, rng):
        return {"a": rng.random((size, size), dtype=np.float32),
                "b": np.zeros((size, size), np.float32)}

    def check(self, inputs, results):
        a = inputs["a"]
        expected = np.zeros_like(a)
        expected[1:-1, 1:-1] = np.float32(0.2) * (a[1:-1, 1:-1] + a[:-2, 1:-1] + a[2:, 1:-1]
                                                  + a[1:-1, :-2] + a[1:-1, 2:])
        np.testing.assert_allclose(results["b"], expected, rtol=1e-6, atol=1e-7)

    def work(self, size, inputs, results):
        return {"bytes": 2 * 4 * size * size, "flops": 5 * size * size}


# --- histogram ---------------------------------------------------------------

HISTOGRAM = """
def histogram(data, bins):
    i = nv.global_id(0)
    if i < data.shape[0]:
        nv.atomic.add(bins, data[i], 1)
"""


def histogram_cpu(data, bins):
    chunks = 64
    per_chunk = np.zeros((chunks, bins.shape[0]), np.int32)
    step = (data.shape[0] + chunks - 1) // chunks
    for c in prange(chunks):
        for i in range(c * step, min(data.shape[0], (c + 1) * step)):
            per_chunk[c, data[i]] += 1
    for c in range(chunks):
        for b in range(bins.shape[0]):
            bins[b] += per_chunk[c, b]


class Histogram(Benchmark):
    written = ("bins",)

    def describe(self, size):
        return f"{_pow2(size)} int32, 256 bins"

    def inputs(self, size, rng):
        return {"data": rng.integers(0, 256, size, dtype=np.int32),
                "bins": np.zeros(256, np.int32)}

    def check(self, inputs, results):
        expected = np.bincount(inputs["data"], minlength=256).astype(np.int32)
        np.testing.assert_array_equal(results["bins"], expected)

    def work(self, size, inputs, results):
        return {"bytes": 4 * size, "flops": 0}


# --- tiny launch ---------------------------------------------------------------

TINY = """
def tiny(x):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] = x[i] + float32(1.0)
"""


def tiny_cpu(x):
    for i in prange(x.shape[0]):
        x[i] = x[i] + np.float32(1.0)


class Tiny(Benchmark):
    written = ("x",)

    def describe(self, size):
        return f"{size} float32: launch + synchronize"

    def inputs(self, size, rng):
        return {"x": rng.random(size, dtype=np.float32)}

    def check(self, inputs, results):
        np.testing.assert_array_equal(results["x"], inputs["x"] + np.float32(1.0))

    def work(self, size, inputs, results):
        return {"bytes": 2 * 4 * size, "flops": size}


# --- the same kernels, written plainly ----------------------------------------
#
# How a newcomer writes them: ``nv.grid`` and tuple unpacking, chained
# comparisons, early returns, int64 counters, bounds and indices (a Python
# int argument is int64), tuple assignment, the block size read from
# ``nv.local_size``, 16x16 groups where the tuned kernel has 32x8. Each
# computes what its tuned twin computes, in the same float type, so that
# ``plain_vs_tuned`` measures the code generator and not the arithmetic.

SAXPY_PLAIN = """
def saxpy_plain(a, x, y):
    i = nv.grid(1)
    if i >= len(x):
        return
    y[i] = a * x[i] + y[i]
"""

REDUCE_PLAIN = """
def reduce_sum_plain(x, out):
    partial = nv.shared.array(256, float32)
    tid = nv.local_id(0)
    i = nv.grid(1)
    partial[tid] = x[i] if i < len(x) else float32(0.0)
    nv.barrier()
    s = nv.local_size(0) // 2
    while s > 0:
        if tid < s:
            partial[tid] += partial[tid + s]
        nv.barrier()
        s //= 2
    if tid == 0:
        nv.atomic.add(out, 0, partial[0])
"""

MATMUL_PLAIN = """
def matmul_plain(a, b, c):
    sa = nv.shared.array((16, 16), float32)
    sb = nv.shared.array((16, 16), float32)
    x, y = nv.grid(2)
    tx = nv.local_id(0)
    ty = nv.local_id(1)
    n = a.shape[1]
    acc = float32(0.0)
    for t in range(nv.num_groups(0)):
        sa[ty, tx] = 0
        sb[ty, tx] = 0
        if y < a.shape[0] and t * 16 + tx < n:
            sa[ty, tx] = a[y, t * 16 + tx]
        if x < b.shape[1] and t * 16 + ty < n:
            sb[ty, tx] = b[t * 16 + ty, x]
        nv.barrier()
        for k in range(16):
            acc += sa[ty, k] * sb[k, tx]
        nv.barrier()
    if y < c.shape[0] and x < c.shape[1]:
        c[y, x] = acc
"""

MANDELBROT_PLAIN = """
def mandelbrot_plain(counts, x0, y0, step, max_iter):
    x, y = nv.grid(2)
    height, width = counts.shape
    if x >= width or y >= height:
        return
    cr, ci = x0 + real(x) * step, y0 + real(y) * step
    zr, zi = real(0.0), real(0.0)
    n = 0
    while n < max_iter and zr * zr + zi * zi <= 4.0:
        zr, zi = zr * zr - zi * zi + cr, real(2.0) * zr * zi + ci
        n += 1
    counts[y, x] = n
"""

STENCIL_PLAIN = """
def stencil_plain(a, b):
    x, y = nv.grid(2)
    n, m = a.shape
    if 0 < y < n - 1 and 0 < x < m - 1:
        b[y, x] = 0.2 * (a[y, x] + a[y - 1, x] + a[y + 1, x] + a[y, x - 1] + a[y, x + 1])
"""

# numba.cuda's documentation indexes an array as ``a[i, j]`` with
# ``i, j = cuda.grid(2)``: the first (x) axis, whose neighbours share a
# warp, walks down a column, so a warp's loads hit 16 rows.
STENCIL_PLAIN_IJ = """
def stencil_plain_ij(a, b):
    i, j = nv.grid(2)
    n, m = a.shape
    if 0 < i < n - 1 and 0 < j < m - 1:
        b[i, j] = 0.2 * (a[i, j] + a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1])
"""

HISTOGRAM_PLAIN = """
def histogram_plain(data, bins):
    i = nv.grid(1)
    if i >= len(data):
        return
    nv.atomic.add(bins, data[i], 1)
"""

TINY_PLAIN = """
def tiny_plain(x):
    i = nv.grid(1)
    if i < len(x):
        x[i] += 1.0
"""


class MandelbrotPlain(Mandelbrot):
    def inputs(self, size, rng):
        # The bound as a user passes it: a Python int, typed int64.
        return dict(super().inputs(size, rng), max_iter=MAX_ITER)


# --- kernels users run ---------------------------------------------------------

CONV2D = """
def conv2d(image, weights, out):
    x, y = nv.grid(2)
    rows, cols = image.shape
    if y >= rows or x >= cols:
        return
    r = weights.shape[0] // 2
    acc = float32(0.0)
    for di in range(-r, r + 1):
        for dj in range(-r, r + 1):
            yy, xx = y + di, x + dj
            if 0 <= yy < rows and 0 <= xx < cols:
                acc += weights[di + r, dj + r] * image[yy, xx]
    out[y, x] = acc
"""


def conv2d_cpu(image, weights, out):
    rows, cols = image.shape
    r = weights.shape[0] // 2
    for y in prange(rows):
        for x in range(cols):
            acc = np.float32(0.0)
            for di in range(-r, r + 1):
                for dj in range(-r, r + 1):
                    yy, xx = y + di, x + dj
                    if 0 <= yy < rows and 0 <= xx < cols:
                        acc += weights[di + r, dj + r] * image[yy, xx]
            out[y, x] = acc


class Conv2d(Benchmark):
    """A 5x5 filter over an image, zero outside it."""

    written = ("out",)


    def describe(self, size):
        return f"{size}x{size} float32, 5x5 filter"

    def inputs(self, size, rng):
        return {"image": rng.random((size, size), dtype=np.float32),
                "weights": rng.random((5, 5), dtype=np.float32),
                "out": np.zeros((size, size), np.float32)}

    def check(self, inputs, results):
        image = inputs["image"].astype(np.float64)
        weights = inputs["weights"].astype(np.float64)
        r = weights.shape[0] // 2
        padded = np.pad(image, r)
        rows, cols = image.shape
        expected = np.zeros_like(image)
        for di in range(2 * r + 1):
            for dj in range(2 * r + 1):
                expected += weights[di, dj] * padded[di:di + rows, dj:dj + cols]
        np.testing.assert_allclose(results["out"], expected, rtol=1e-5)

    def work(self, size, inputs, results):
        taps = inputs["weights"].size
        return {"bytes": 2 * 4 * size * size, "flops": 2 * taps * size * size}


TRANSPOSE = """
def transpose(a, out):
    tile = nv.shared.array((32, 33), float32)
    tx = nv.local_id(0)
    ty = nv.local_id(1)
    rows, cols = a.shape
    x = nv.group_id(0) * 32 + tx
    y = nv.group_id(1) * 32 + ty
    for k in range(0, 32, 8):
        if x < cols and y + k < rows:
            tile[ty + k, tx] = a[y + k, x]
    nv.barrier()
    x = nv.group_id(1) * 32 + tx
    y = nv.group_id(0) * 32 + ty
    for k in range(0, 32, 8):
        if x < rows and y + k < cols:
            out[y + k, x] = tile[tx, ty + k]
"""


def transpose_cpu(a, out):
    for i in prange(a.shape[0]):
        for j in range(a.shape[1]):
            out[j, i] = a[i, j]


class Transpose(Benchmark):
    """32x32 tiles through workgroup memory, 32x8 groups of 4 rows each."""

    written = ("out",)


    def describe(self, size):
        return f"{size}x{size} float32, 32x32 tiles"

    def inputs(self, size, rng):
        return {"a": rng.random((size, size), dtype=np.float32),
                "out": np.zeros((size, size), np.float32)}

    def extent(self, size):
        return (size, -(-size // 32) * 8)

    def check(self, inputs, results):
        np.testing.assert_array_equal(results["out"], inputs["a"].T)

    def work(self, size, inputs, results):
        return {"bytes": 2 * 4 * size * size, "flops": 0}


SCAN = """
def scan(x, out, totals):
    temp = nv.shared.array(256, int32)
    tid = nv.local_id(0)
    i = nv.grid(1)
    temp[tid] = x[i] if i < len(x) else 0
    nv.barrier()
    offset = 1
    while offset < nv.local_size(0):
        v = temp[tid - offset] if tid >= offset else 0
        nv.barrier()
        temp[tid] += v
        nv.barrier()
        offset *= 2
    if i < len(x):
        out[i] = temp[tid]
    if tid == nv.local_size(0) - 1:
        totals[nv.group_id(0)] = temp[tid]
"""


def scan_cpu(x, out, totals):
    for g in prange(totals.shape[0]):
        acc = 0
        for i in range(g * 256, min(x.shape[0], (g + 1) * 256)):
            acc += x[i]
            out[i] = acc
        totals[g] = acc


class Scan(Benchmark):
    """Inclusive prefix sums within each 256-element block, and each block's total."""

    written = ("out", "totals")


    def describe(self, size):
        return f"{_pow2(size)} int32, 256-blocks"

    def inputs(self, size, rng):
        return {"x": rng.integers(0, 100, size, dtype=np.int32),
                "out": np.zeros(size, np.int32),
                "totals": np.zeros(-(-size // 256), np.int32)}

    def check(self, inputs, results):
        x = inputs["x"]
        blocks = np.zeros(len(inputs["totals"]) * 256, np.int32)
        blocks[:x.size] = x
        sums = np.cumsum(blocks.reshape(-1, 256), axis=1, dtype=np.int32)
        np.testing.assert_array_equal(results["out"], sums.ravel()[:x.size])
        np.testing.assert_array_equal(results["totals"], sums[:, -1])

    def work(self, size, inputs, results):
        return {"bytes": 2 * 4 * size, "flops": size * 8}


NBODY = """
def nbody(pos, vel, new_pos, new_vel, dt, eps2):
    i = nv.grid(1)
    n = pos.shape[0]
    if i >= n:
        return
    xi, yi, zi = pos[i, 0], pos[i, 1], pos[i, 2]
    ax, ay, az = float32(0.0), float32(0.0), float32(0.0)
    for j in range(n):
        dx, dy, dz = pos[j, 0] - xi, pos[j, 1] - yi, pos[j, 2] - zi
        d2 = dx * dx + dy * dy + dz * dz + eps2
        s = pos[j, 3] / (d2 * math.sqrt(d2))
        ax += dx * s
        ay += dy * s
        az += dz * s
    vx, vy, vz = vel[i, 0] + dt * ax, vel[i, 1] + dt * ay, vel[i, 2] + dt * az
    new_vel[i, 0], new_vel[i, 1], new_vel[i, 2] = vx, vy, vz
    new_pos[i, 0], new_pos[i, 1], new_pos[i, 2] = xi + dt * vx, yi + dt * vy, zi + dt * vz
    new_pos[i, 3] = pos[i, 3]
"""


def nbody_cpu(pos, vel, new_pos, new_vel, dt, eps2):
    n = pos.shape[0]
    for i in prange(n):
        xi, yi, zi = pos[i, 0], pos[i, 1], pos[i, 2]
        ax, ay, az = np.float32(0.0), np.float32(0.0), np.float32(0.0)
        for j in range(n):
            dx, dy, dz = pos[j, 0] - xi, pos[j, 1] - yi, pos[j, 2] - zi
            d2 = dx * dx + dy * dy + dz * dz + eps2
            s = pos[j, 3] / (d2 * np.sqrt(d2))
            ax += dx * s
            ay += dy * s
            az += dz * s
        vx, vy, vz = vel[i, 0] + dt * ax, vel[i, 1] + dt * ay, vel[i, 2] + dt * az
        new_vel[i, 0], new_vel[i, 1], new_vel[i, 2] = vx, vy, vz
        new_pos[i, 0], new_pos[i, 1], new_pos[i, 2] = xi + dt * vx, yi + dt * vy, zi + dt * vz
        new_pos[i, 3] = pos[i, 3]


#: Float operations per body pair in the n-body step (3 subtractions, 6 for
#: the softened square distance, a square root, a multiply and a divide, 6
#: for the accelerations), counting the root and the divide as one each.
NBODY_FLOPS = 19


class Nbody(Benchmark):
    """One explicit step of softened gravity between every pair of bodies."""

    written = ("new_pos", "new_vel")


    def describe(self, size):
        return f"{size} bodies float32, all pairs"

    def inputs(self, size, rng):
        pos = rng.random((size, 4), dtype=np.float32)
        pos[:, 3] = rng.random(size, dtype=np.float32) / size
        return {"pos": pos, "vel": rng.random((size, 4), dtype=np.float32) - np.float32(0.5),
                "new_pos": np.zeros((size, 4), np.float32),
                "new_vel": np.zeros((size, 4), np.float32),
                "dt": np.float32(0.01), "eps2": np.float32(1e-3)}

    def check(self, inputs, results):
        pos = inputs["pos"].astype(np.float64)
        n = pos.shape[0]
        rows = np.unique(np.linspace(0, n - 1, 64).astype(int))
        d = pos[None, :, :3] - pos[rows, None, :3]
        d2 = np.sum(d * d, axis=2) + float(inputs["eps2"])
        acc = np.sum(d * (pos[None, :, 3] / (d2 * np.sqrt(d2)))[:, :, None], axis=1)
        dt = float(inputs["dt"])
        vel = inputs["vel"][rows, :3].astype(np.float64) + dt * acc
        got_vel = results["new_vel"][rows, :3]
        scale = np.abs(vel).max()
        np.testing.assert_allclose(got_vel, vel, rtol=1e-4, atol=1e-4 * scale)
        np.testing.assert_allclose(results["new_pos"][rows, :3], pos[rows, :3] + dt * vel,
                                   rtol=1e-4, atol=1e-4 * scale)
        np.testing.assert_array_equal(results["new_pos"][:, 3], inputs["pos"][:, 3])

    def work(self, size, inputs, results):
        return {"bytes": 4 * 4 * 4 * size, "flops": NBODY_FLOPS * size * size}


SPMV = """
def spmv(indptr, indices, data, x, y):
    row = nv.grid(1)
    if row < len(y):
        acc = float32(0.0)
        for k in range(indptr[row], indptr[row + 1]):
            acc += data[k] * x[indices[k]]
        y[row] = acc
"""


def spmv_cpu(indptr, indices, data, x, y):
    for row in prange(y.shape[0]):
        acc = np.float32(0.0)
        for k in range(indptr[row], indptr[row + 1]):
            acc += data[k] * x[indices[k]]
        y[row] = acc


#: Mean nonzeros per row of the sparse matrix.
SPMV_ROW = 16


class Spmv(Benchmark):
    """``y = A @ x`` for a random CSR matrix, one row per invocation."""

    written = ("y",)


    def describe(self, size):
        return f"{_pow2(size)} rows, ~{SPMV_ROW}/row, float32 CSR"

    def inputs(self, size, rng):
        lengths = rng.integers(SPMV_ROW // 2, SPMV_ROW * 3 // 2 + 1, size)
        indptr = np.zeros(size + 1, np.int32)
        np.cumsum(lengths, out=indptr[1:])
        nnz = int(indptr[-1])
        return {"indptr": indptr, "indices": rng.integers(0, size, nnz, dtype=np.int32),
                "data": rng.random(nnz, dtype=np.float32),
                "x": rng.random(size, dtype=np.float32), "y": np.zeros(size, np.float32)}

    def check(self, inputs, results):
        indptr = inputs["indptr"]
        rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        expected = np.zeros(len(indptr) - 1)
        np.add.at(expected, rows, inputs["data"].astype(np.float64)
                  * inputs["x"][inputs["indices"]].astype(np.float64))
        np.testing.assert_allclose(results["y"], expected, rtol=1e-5)

    def work(self, size, inputs, results):
        nnz = int(inputs["indptr"][-1])
        return {"bytes": 4 * (2 * nnz + 3 * size), "flops": 2 * nnz}


def _mib(n):
    return n * 2 ** 20


BENCHMARKS = [
    Saxpy("saxpy", "memory", SAXPY, saxpy_cpu, 1,
          {"full": 2 ** 26, "quick": 2 ** 22, "tiny": 4096}),
    Reduce("reduce_sum", "memory", REDUCE, reduce_cpu, 1,
           {"full": 2 ** 26, "quick": 2 ** 22, "tiny": 4096}),
    Reduce("reduce_subgroup", "memory", REDUCE_SUBGROUP, reduce_cpu, 1,
           {"full": 2 ** 26, "quick": 2 ** 22, "tiny": 4096}),
    Matmul("matmul", "compute", MATMUL, matmul_cpu, 2,
           {"full": 4096, "quick": 256, "tiny": 32}, threads=(16, 16)),
    Mandelbrot("mandelbrot_f32", "compute", MANDELBROT, mandelbrot_cpu, 2,
               {"full": 4096, "quick": 256, "tiny": 32}, real="float32", threads=(16, 16)),
    Mandelbrot("mandelbrot_f64", "compute", MANDELBROT, mandelbrot_cpu, 2,
               {"full": 4096, "quick": 256, "tiny": 32}, real="float64", threads=(16, 16)),
    Stencil("stencil", "memory", STENCIL, stencil_cpu, 2,
            {"full": 8192, "quick": 1024, "tiny": 32}, threads=(32, 8)),
    Histogram("histogram", "memory", HISTOGRAM, histogram_cpu, 1,
              {"full": 2 ** 26, "quick": 2 ** 22, "tiny": 4096}),
    Tiny("tiny", "latency", TINY, tiny_cpu, 1,
         {"full": 1024, "quick": 1024, "tiny": 1024}),
    Conv2d("conv2d", "memory", CONV2D, conv2d_cpu, 2,
           {"full": 8192, "quick": 1024, "tiny": 32}, threads=(16, 16)),
    Transpose("transpose", "memory", TRANSPOSE, transpose_cpu, 2,
              {"full": 8192, "quick": 1024, "tiny": 64}, threads=(32, 8)),
    Scan("scan", "memory", SCAN, scan_cpu, 1,
         {"full": 2 ** 26, "quick": 2 ** 22, "tiny": 4096}),
    Nbody("nbody", "compute", NBODY, nbody_cpu, 1,
          {"full": 65536, "quick": 2048, "tiny": 256}),
    Spmv("spmv", "memory", SPMV, spmv_cpu, 1,
         {"full": 2 ** 22, "quick": 2 ** 18, "tiny": 4096}),
]


def _plain(tuned, name, source, threads=None, cls=None):
    """The plainly written twin of the benchmark ``tuned``: same problem,
    checks and work, its own source (and group shape)."""
    base = next(b for b in BENCHMARKS if b.name == tuned)
    return (cls or type(base))(name, base.kind, source, base.cpu, base.ndim, base.sizes,
                               real=base.real, threads=threads or base.threads, tuned=tuned)


#: The plainly written variants, each after its tuned twin in the run.
PLAIN = [
    _plain("saxpy", "saxpy_plain", SAXPY_PLAIN),
    _plain("reduce_sum", "reduce_sum_plain", REDUCE_PLAIN),
    _plain("matmul", "matmul_plain", MATMUL_PLAIN),
    _plain("mandelbrot_f32", "mandelbrot_f32_plain", MANDELBROT_PLAIN, cls=MandelbrotPlain),
    _plain("mandelbrot_f64", "mandelbrot_f64_plain", MANDELBROT_PLAIN, cls=MandelbrotPlain),
    _plain("stencil", "stencil_plain", STENCIL_PLAIN, threads=(16, 16)),
    _plain("stencil", "stencil_plain_ij", STENCIL_PLAIN_IJ, threads=(16, 16)),
    _plain("histogram", "histogram_plain", HISTOGRAM_PLAIN),
    _plain("tiny", "tiny_plain", TINY_PLAIN),
]
BENCHMARKS = [b for tuned in BENCHMARKS for b in [tuned] + [p for p in PLAIN
                                                             if p.tuned == tuned.name]]

#: Bytes of each host<->device copy.
TRANSFER_BYTES = {"full": _mib(256), "quick": _mib(16), "tiny": _mib(1)}


def by_name():
    """The benchmarks by name."""
    return {b.name: b for b in BENCHMARKS}
