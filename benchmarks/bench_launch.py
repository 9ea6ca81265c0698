"""Steady-state cost of a tiny launch on device arrays, with and without a wait.

    python benchmarks/bench_launch.py [--repeat N] [--out FILE]

Prints a table and writes JSON (default benchmarks/results/launch_<device>.json).
"""

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np

import numba_vulkan as nv


@nv.jit
def tiny(x):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] += 1.0


def _median_us(fn, repeat, rounds=7):
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        samples.append((time.perf_counter() - start) / repeat * 1e6)
    return statistics.median(samples), min(samples), max(samples)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=500)
    parser.add_argument("--out")
    args = parser.parse_args()
    x = nv.to_device(np.zeros(1024, np.float32))
    launch = tiny[4, 256]
    launch(x)
    nv.synchronize()

    def launch_only():
        launch(x)

    def launch_and_sync():
        launch(x)
        nv.synchronize()

    rows = {}
    rows["launch (no wait)"] = _median_us(launch_only, args.repeat)
    nv.synchronize()
    rows["launch + synchronize"] = _median_us(launch_and_sync, args.repeat)
    device = nv.list_devices()[0].name
    expected = 1 + args.repeat * 7 * 2
    assert float(x.copy_to_host()[0]) == expected
    print(f"tiny kernel, 1024 float32, device arrays, on {device}")
    print(f"{'what':24} {'median us':>10} {'min':>8} {'max':>8}")
    for name, (med, lo, hi) in rows.items():
        print(f"{name:24} {med:10.1f} {lo:8.1f} {hi:8.1f}")
    result = {"device": device, "python": platform.python_version(), "repeat": args.repeat,
              "results_us": {k: {"median": v[0], "min": v[1], "max": v[2]}
                             for k, v in rows.items()}}
    out = args.out or os.path.join(os.path.dirname(__file__), "results",
                                   f"launch_{device.split()[0].lower()}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
