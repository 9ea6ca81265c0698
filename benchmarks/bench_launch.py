"""Steady-state cost of a tiny launch on device arrays, with and without a wait.

    python benchmarks/bench_launch.py [--rounds N] [--out FILE]

Launches are made as ``tiny[4, 256](x)``, as benchmarks/run.py makes them (the
grid converted each time), and through a launch configuration made once.
Launches without a wait are timed in bursts of :data:`BURST` with the queue
drained between bursts: on a CPU device (lavapipe) a long backlog would have
the driver's threads run kernels on the cores that the launching thread
needs, and the figure would measure that contention rather than the launch.

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

#: Launches timed together without a wait.
BURST = 32


@nv.jit
def tiny(x):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] += 1.0


def _summary(samples):
    return statistics.median(samples), min(samples), max(samples)


def _bursts_us(launch, rounds):
    """Microseconds per launch, per burst of launches made without waiting."""
    samples = []
    clock = time.perf_counter
    for _ in range(rounds):
        start = clock()
        for _ in range(BURST):
            launch()
        samples.append((clock() - start) / BURST * 1e6)
        nv.synchronize()
    return _summary(samples)


def _waited_us(launch, rounds):
    """Microseconds of each launch followed by a synchronize, as benchmarks/run.py
    times them."""
    samples = []
    clock = time.perf_counter
    for _ in range(rounds * BURST):
        start = clock()
        launch()
        nv.synchronize()
        samples.append((clock() - start) * 1e6)
    return _summary(samples)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=200,
                        help=f"bursts of {BURST} launches per row")
    parser.add_argument("--out")
    args = parser.parse_args()
    x = nv.to_device(np.zeros(1024, np.float32))
    configured = tiny[4, 256]
    configured(x)
    nv.synchronize()

    def launch():
        configured(x)

    def index_and_launch():
        tiny[4, 256](x)

    _bursts_us(index_and_launch, max(1, args.rounds // 10))
    rows = {"launch (no wait)": _bursts_us(launch, args.rounds),
            "k[g, t](x) (no wait)": _bursts_us(index_and_launch, args.rounds),
            "launch + synchronize": _waited_us(launch, args.rounds),
            "k[g, t](x) + synchronize": _waited_us(index_and_launch, args.rounds)}
    launches = 1 + BURST * (max(1, args.rounds // 10) + 4 * args.rounds)
    assert float(x.copy_to_host()[0]) == launches
    device = nv.list_devices()[0].name
    print(f"tiny kernel, 1024 float32, device arrays, on {device}")
    print(f"{'what':26} {'median us':>10} {'min':>8} {'max':>8}")
    for name, (med, lo, hi) in rows.items():
        print(f"{name:26} {med:10.1f} {lo:8.1f} {hi:8.1f}")
    result = {"device": device, "python": platform.python_version(), "burst": BURST,
              "rounds": args.rounds,
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
