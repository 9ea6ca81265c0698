"""GPU ufuncs against the kernels one would write by hand.

    python benchmarks/bench_ufuncs.py [--size N] [--rounds R]

Times, on device arrays, a float32 ``a * b + 1`` as an ``nv.vectorize``
ufunc with ``out=`` and as the equivalent ``@nv.jit`` kernel, and a sum and
a max of the same elements by ``nv.reduce``; each the median of ``R``
calls after a warm-up, each call followed by a synchronize. Prints a table.
"""

import argparse
import statistics
import time

import numpy as np

import numba_vulkan as nv


@nv.vectorize(["float32(float32, float32)"])
def mad(a, b):
    return a * b + 1.0


@nv.jit
def mad_kernel(a, b, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = a[i] * b[i] + 1.0


sum_reduce = nv.reduce(lambda a, b: a + b)
max_reduce = nv.reduce(lambda a, b: max(a, b))


def _median_ms(call, rounds):
    call()
    nv.synchronize()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        nv.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10 ** 6)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    x = np.random.default_rng(0).random(args.size).astype(np.float32)
    dx = nv.to_device(x)
    out = nv.device_array_like(dx)
    rows = [
        ("vectorize a * b + 1, out=", lambda: mad(dx, dx, out=out)),
        ("nv.jit a * b + 1, forall", lambda: mad_kernel.forall(args.size)(dx, dx, out)),
        ("reduce sum", lambda: sum_reduce(dx)),
        ("reduce max", lambda: max_reduce(dx)),
    ]
    print(f"{args.size} float32 device elements, median of {args.rounds} calls")
    for name, call in rows:
        print(f"{name:28} {_median_ms(call, args.rounds):9.3f} ms")


if __name__ == "__main__":
    main()
