"""What lavapipe's loop limit costs: unrolled loops and the per-invocation count.

    python benchmarks/bench_loop_limit.py [--repeat N] [--out FILE]

On a device with a loop limit (lavapipe), each kernel is compiled three
ways and timed (launch plus synchronize, device arrays, median):

* ``none``: for a target without the limit (neither unrolled nor counted:
  what ran before; a loop past 65535 trips is cut silently);
* ``count``: loops counted and checked, not unrolled;
* ``unroll+count``: what kernels for lavapipe get (innermost loops unrolled
  16 times, counted and checked).

Prints a table and writes JSON (default benchmarks/results/loop_limit_<device>.json).
"""

import argparse
import json
import os
import platform
import statistics
import time

# Every variant is compiled here: a cached module of another variant must
# not stand in for it.
os.environ["NUMBA_VULKAN_CACHE"] = "0"

import numpy as np  # noqa: E402
from numba import float32  # noqa: E402

import numba_vulkan as nv  # noqa: E402
from numba_vulkan.codegen import looplimit  # noqa: E402
from numba_vulkan.runtime.device import current_device  # noqa: E402


def mandelbrot(counts, x0, y0, step, max_iter):
    col = nv.global_id(0)
    row = nv.global_id(1)
    if row < counts.shape[0] and col < counts.shape[1]:
        cr = x0 + float32(col) * step
        ci = y0 + float32(row) * step
        zr = float32(0.0)
        zi = float32(0.0)
        n = 0
        while n < max_iter:
            zr2 = zr * zr
            zi2 = zi * zi
            if zr2 + zi2 > float32(4.0):
                break
            zi = float32(2.0) * zr * zi + ci
            zr = zr2 - zi2 + cr
            n += 1
        counts[row, col] = n


def matvec(a, x, y):
    i = nv.global_id(0)
    if i < y.shape[0]:
        acc = float32(0.0)
        for j in range(a.shape[1]):
            acc += a[i, j] * x[j]
        y[i] = acc


def naive_matmul(a, b, c):
    col = nv.global_id(0)
    row = nv.global_id(1)
    if row < c.shape[0] and col < c.shape[1]:
        acc = float32(0.0)
        for k in range(a.shape[1]):
            acc += a[row, k] * b[k, col]
        c[row, col] = acc


def _cases(rng):
    side = 512
    counts = nv.to_device(np.zeros((side, side), np.uint16))
    a = nv.to_device(rng.random((2048, 2048), dtype=np.float32))
    x = nv.to_device(rng.random(2048, dtype=np.float32))
    y = nv.to_device(np.zeros(2048, np.float32))
    m = nv.to_device(rng.random((256, 256), dtype=np.float32))
    c = nv.to_device(np.zeros((256, 256), np.float32))
    return [
        ("mandelbrot 512^2, 256 iter", mandelbrot, ((side // 16, side // 16), (16, 16)),
         (counts, np.float32(-2.0), np.float32(-1.5), np.float32(3.0 / side), 256)),
        ("matvec 2048^2", matvec, (8, 256), (a, x, y)),
        ("naive matmul 256^2", naive_matmul, ((16, 16), (16, 16)), (m, m, c)),
    ]


def _once(launch, args):
    start = time.perf_counter()
    launch(*args)
    nv.synchronize()
    return time.perf_counter() - start


def _compiled(function, grid, args, device, target, factor):
    """A launch of ``function`` compiled for ``target``, unrolling ``factor`` times."""
    saved, unroll = device.target, looplimit.UNROLL
    device.target, looplimit.UNROLL = target, factor
    try:
        launch = nv.jit(function)[grid]
        _once(launch, args)
    finally:
        device.target, looplimit.UNROLL = saved, unroll
    return launch


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--out")
    options = parser.parse_args()
    device = current_device()
    base = device.target
    if not base.loop_limit:
        raise SystemExit(f"{device.info.name} has no loop limit: nothing to measure")
    unroll = looplimit.UNROLL
    variants = {"none": (0, unroll), "count": (base.loop_limit, 1),
                "unroll+count": (base.loop_limit, unroll)}
    rows = []
    for label, function, grid, args in _cases(np.random.default_rng(7)):
        launches = {v: _compiled(function, grid, args, device, base.with_features(loop_limit=lim),
                                 factor)
                    for v, (lim, factor) in variants.items()}
        samples = {v: [] for v in variants}
        # Round robin, so that a change in the host's load hits every variant.
        for _ in range(options.repeat):
            for v, launch in launches.items():
                samples[v].append(_once(launch, args))
        row = {"kernel": label}
        for v in variants:
            row[v] = {"median_s": statistics.median(samples[v]), "min_s": min(samples[v])}
        rows.append(row)
        print(f"{label:28s}" + "".join(
            f"  {v}: {row[v]['median_s'] * 1e3:8.2f} ms" for v in variants) +
            f"  ({row['unroll+count']['median_s'] / row['none']['median_s']:.2f}x of none)")
    out = options.out or os.path.join(
        os.path.dirname(__file__), "results",
        f"loop_limit_{device.info.name.split()[0].lower()}.json")
    with open(out, "w") as f:
        json.dump({"device": device.info.name, "cpu": platform.processor() or platform.machine(),
                   "repeat": options.repeat, "rows": rows}, f, indent=1)
        f.write("\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
