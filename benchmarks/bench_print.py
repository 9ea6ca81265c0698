"""What ``print`` in a kernel costs a launch.

    python benchmarks/bench_print.py [--lines N] [--repeat R]

Times, as the median of ``R`` launches each followed by ``nv.synchronize()``
(device arrays, compiled beforehand), the same 1-invocation-per-element
kernel over ``N`` invocations:

* ``no print``: the kernel without its ``print``;
* ``print, not taken``: with a ``print`` that no invocation reaches (the
  launch waits, reads the buffer's header, prints nothing);
* ``print, N lines``: every invocation prints one line of an int and a
  float (written to ``os.devnull``), and so the decoding of ``N`` records.
"""

import argparse
import contextlib
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numba_vulkan as nv  # noqa: E402


@nv.jit
def plain(x, limit):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] = x[i] * 2.0 + limit


@nv.jit
def printing(x, limit):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] = x[i] * 2.0 + limit
        if i < limit:
            print("element", i, x[i])


def _median(kernel, x, limit, repeat):
    times = []
    for _ in range(repeat + 1):
        start = time.perf_counter()
        kernel.forall(x.size)(x, limit)
        nv.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    x = nv.to_device(np.zeros(args.lines, np.float32))
    rows = []
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        rows.append(("no print", _median(plain, x, 0, args.repeat)))
        rows.append(("print, not taken", _median(printing, x, 0, args.repeat)))
        rows.append((f"print, {args.lines} lines",
                     _median(printing, x, args.lines, args.repeat)))
    print(f"device: {nv.get_current_device().name}")
    for name, seconds in rows:
        print(f"{name:>24}: {seconds * 1e3:8.3f} ms")


if __name__ == "__main__":
    main()
