"""Each plainly written kernel against its tuned twin, timed round robin.

    python benchmarks/bench_plain.py [--only mandelbrot_f32_plain,...] [--repeat 15]
                                     [--sizes quick] [--json FILE]

For every plain variant of ``suite.py`` (or those named), both kernels are
compiled and checked, then launched in turns, ``--repeat`` rounds of three
launches each, device time from Vulkan timestamp queries; prints the
median time of each and the median of the per-round ratios plain/tuned.
Alternating the two in one process keeps the ratio meaningful on a CPU
shared with other work, where ``run.py``'s separate loops are not
(lavapipe's times moved by 2-4x between its loops in one run here).
"""

import argparse
import json
import os
import statistics
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from benchmarks import backends as bk  # noqa: E402
from benchmarks import measure  # noqa: E402
from benchmarks import suite  # noqa: E402


def prepare(backend, bench, size, kernel=None):
    """Launch ``bench``'s kernel (``kernel``, or the backend's make of it) once
    on seeded inputs and check the result; return a function that launches it
    again on the same arrays."""
    host = bench.inputs(size, np.random.default_rng(1234))
    if kernel is None:
        kernel = backend.make(bench)
    arrays = {k: backend.to_device(v) if isinstance(v, np.ndarray) else v
              for k, v in host.items()}
    args = [arrays[name] for name in bench.arguments()]
    groups, threads = bench.grid(size)
    backend.launch(kernel, groups, threads, args)
    backend.synchronize()
    bench.check(host, {name: backend.to_host(arrays[name]) for name in bench.outputs()})
    return lambda: backend.launch(kernel, groups, threads, args)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated plain variants")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--sizes", choices=suite.SIZES, default="quick")
    parser.add_argument("--json", help="file to write the times to")
    args = parser.parse_args(argv)
    backend = bk.VulkanBackend()
    benches = suite.by_name()
    only = args.only.split(",") if args.only else [b.name for b in suite.PLAIN]
    results = {}
    print(f"{'plain variant':22} {'tuned ms':>10} {'plain ms':>10} {'plain/tuned':>12}")
    for name in only:
        plain = benches[name]
        tuned = benches[plain.tuned]
        runs = [prepare(backend, b, b.sizes[args.sizes]) for b in (tuned, plain)]
        times = measure.round_robin([(backend.kernel_times, run) for run in runs], args.repeat)
        ratio = statistics.median(p / t for t, p in zip(*times))
        results[name] = {"tuned": plain.tuned, "tuned_s": statistics.median(times[0]),
                         "plain_s": statistics.median(times[1]), "plain_vs_tuned": ratio,
                         "rounds": args.repeat}
        print(f"{name:22} {results[name]['tuned_s'] * 1e3:>10.3f} "
              f"{results[name]['plain_s'] * 1e3:>10.3f} {ratio:>11.2f}x", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": backend.environment()["device"], "sizes": args.sizes,
                       "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
