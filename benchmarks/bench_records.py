"""What a record (structured) array's layout costs a kernel.

    python benchmarks/bench_records.py [--n N] [--repeat R]

Times, as the median of ``R`` launches each followed by ``nv.synchronize()``
(device arrays, compiled beforehand), one particle step over ``N``
particles, ``x += vx * dt`` and ``y += vy * dt``, in four layouts:

* ``separate arrays``: four float32 arrays (no record);
* ``float32 record``: ``x, y, vx, vy`` and an int32 id, 20 bytes: a buffer
  of 32-bit words, one load or store per field;
* ``aligned, with a bool``: the same plus a bool flag, ``align=True``
  (24 bytes): still words; the flag (read only here) is shifted out of its
  word;
* ``packed, with a bool``: the same dtype packed (21 bytes): the buffer is
  one of bytes and every field access is four byte accesses.
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numba_vulkan as nv  # noqa: E402

FIELDS = [("x", "f4"), ("y", "f4"), ("vx", "f4"), ("vy", "f4"), ("id", "i4")]


@nv.jit
def separate(x, y, vx, vy, dt):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] += vx[i] * dt
        y[i] += vy[i] * dt


@nv.jit
def step(p, dt):
    i = nv.global_id(0)
    if i < p.shape[0]:
        p[i].x += p[i].vx * dt
        p[i].y += p[i].vy * dt


@nv.jit
def step_alive(p, dt):
    i = nv.global_id(0)
    if i < p.shape[0] and p[i].alive:
        p[i].x += p[i].vx * dt
        p[i].y += p[i].vy * dt


def timed(launch, repeat):
    launch()
    nv.synchronize()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        launch()
        nv.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 20)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)
    n, dt = args.n, np.float32(0.01)
    rng = np.random.default_rng(0)
    cases = []
    arrays = [nv.to_device(rng.random(n, dtype=np.float32)) for _ in range(4)]
    cases.append(("separate arrays", lambda: separate.forall(n)(*arrays, dt)))
    for label, fields, aligned, kernel in (
            ("float32 record", FIELDS, False, step),
            ("aligned, with a bool", FIELDS + [("alive", "?")], True, step_alive),
            ("packed, with a bool", FIELDS + [("alive", "?")], False, step_alive)):
        host = np.zeros(n, np.dtype(fields, align=aligned))
        for name in ("x", "y", "vx", "vy"):
            host[name] = rng.random(n)
        if "alive" in host.dtype.names:
            host["alive"] = True
        d = nv.to_device(host)
        cases.append((f"{label} ({host.dtype.itemsize} B)",
                      lambda kernel=kernel, d=d: kernel.forall(n)(d, dt)))
    print(f"{n} particles on {nv.get_current_device().info.name}, median of {args.repeat}")
    for label, launch in cases:
        print(f"  {label:32s} {timed(launch, args.repeat) * 1e3:8.2f} ms")


if __name__ == "__main__":
    main()
