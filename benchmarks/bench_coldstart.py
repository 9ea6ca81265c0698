"""Where a cold first call's time goes: per compile stage, wall and CPU.

    python benchmarks/bench_coldstart.py [--only tiny,saxpy,...] [--repeat N] [--out FILE]

Each measurement is a fresh process that does what benchmarks/run.py's
first-call timing does (every cache off or empty; NumPy, Numba and
numba_vulkan imported, the device opened and the arguments on it before
the clock starts) and then times the first launch plus synchronize, split
into the compiler's stages (``numba_vulkan.compiler.stages.STAGES``), the
pipeline's creation and the launch (on lavapipe the driver compiles the
shader there). Wall time is what a user waits; CPU time (this process's,
all threads) is what a loaded machine measures more steadily. Also timed,
before the clock: importing numba_vulkan and opening the device.

Prints medians over ``--repeat`` processes per kernel and writes JSON
(default benchmarks/results/coldstart_<device>.json).
"""

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: Columns of the table: what each one adds up.
GROUPS = {
    "numba": ("numba",),
    "link": ("link",),
    "passes": ("optimize", "logical", "unroll", "reoptimize", "structurize", "int32",
               "markers", "narrow", "workarounds", "legalize", "repair", "exact"),
    "emit": ("emit",),
    "validate": ("validate",),
    "plan": ("plan",),
    "launch": ("launch",),
}


def child(name):
    """In the fresh process: one first call, as ``COLDSTART {json}``."""
    start = time.perf_counter()
    import numpy as np
    import numba  # noqa: F401  (run.py's suite imports it before its clock too)
    import numba_vulkan as nv
    imported = time.perf_counter()
    from benchmarks import suite
    from numba_vulkan.compiler import stages
    from numba_vulkan.runtime.device import current_device
    opening = time.perf_counter()
    current_device()
    opened = time.perf_counter()
    bench = suite.by_name()[name]
    size = bench.sizes["tiny"]
    host = bench.inputs(size, np.random.default_rng(1))
    arrays = {k: nv.to_device(v) if isinstance(v, np.ndarray) else v for k, v in host.items()}
    args = [arrays[n] for n in bench.arguments()]
    groups, threads = bench.grid(size)
    nv.synchronize()
    from benchmarks import backends
    phases = {}
    clock = [0.0, 0.0]

    def lap(key):
        wall, cpu = time.perf_counter(), time.process_time()
        entry = phases.setdefault(key, [0.0, 0.0])
        entry[0] += wall - clock[0]
        entry[1] += cpu - clock[1]
        clock[:] = wall, cpu

    def timed(stage):
        def run(job):
            result = stage.run(job)
            lap(stage.name)
            return result
        return stage._replace(run=run)

    stages.STAGES = tuple(timed(s) for s in stages.STAGES)
    from numba_vulkan.api import dispatcher
    plan_class = dispatcher._Plan

    class TimedPlan(plan_class):
        def __init__(self, *a, **k):
            lap("before plan")
            super().__init__(*a, **k)
            lap("plan")

    dispatcher._Plan = TimedPlan
    collections = [0.0, 0.0]

    def collector(phase, info):
        if phase == "start":
            collections[1] = time.perf_counter()
        else:
            collections[0] += time.perf_counter() - collections[1]

    gc.callbacks.append(collector)
    scope = {"nv": nv, **backends._numba_types(bench.real)}
    clock[:] = time.perf_counter(), time.process_time()
    first, first_cpu = clock
    kernel = nv.jit(backends.define(bench.source, bench.function, scope, bench.name))
    kernel[groups, threads](*args)
    nv.synchronize()
    lap("launch")
    entry = {"first_call": time.perf_counter() - first,
             "first_call_cpu": time.process_time() - first_cpu,
             "import": imported - start, "device_open": opened - opening,
             "gc": collections[0], "stages": phases}
    print("COLDSTART " + json.dumps(entry), flush=True)


def measure(name):
    with tempfile.TemporaryDirectory(prefix="nv-coldstart-") as cache:
        env = dict(os.environ, NUMBA_VULKAN_CACHE="0", NUMBA_VULKAN_PIPELINE_CACHE="0",
                   NUMBA_VULKAN_CACHE_DIR=cache, MESA_SHADER_CACHE_DISABLE="true",
                   __GL_SHADER_DISK_CACHE="0", NUMBA_CACHE_DIR=cache)
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name],
                              env=env, capture_output=True, text=True, timeout=300)
    for line in proc.stdout.splitlines():
        if line.startswith("COLDSTART "):
            return json.loads(line[len("COLDSTART "):])
    raise RuntimeError(f"{name}: exit status {proc.returncode}: {proc.stderr[-2000:]}")


def summary(entries):
    """Medians (ms) of each column over the processes of one kernel."""
    def med(values):
        return round(1000 * statistics.median(values), 1)
    out = {"first_call": med([e["first_call"] for e in entries]),
           "first_call_cpu": med([e["first_call_cpu"] for e in entries]),
           "import": med([e["import"] for e in entries]),
           "device_open": med([e["device_open"] for e in entries]),
           "gc": med([e["gc"] for e in entries])}
    for group, names in GROUPS.items():
        for k, suffix in ((0, ""), (1, "_cpu")):
            out[group + suffix] = med([sum(e["stages"].get(n, (0, 0))[k] for n in names)
                                       for e in entries])
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", help="comma-separated benchmark names (default: all)")
    parser.add_argument("--repeat", type=int, default=3, help="processes per kernel")
    parser.add_argument("--out")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    from benchmarks import suite
    names = (args.only.split(",") if args.only
             else [b.name for b in suite.BENCHMARKS if not b.tuned])
    rows = {}
    # The backend and spirv-val run in child processes: their wall time.
    columns = ["first_call", "first_call_cpu", "numba_cpu", "link_cpu", "passes_cpu", "emit",
               "validate", "plan_cpu", "launch_cpu", "gc"]
    print(f"{'ms (median)':16}" + "".join(f"{c.replace('first_call', 'first'):>13}"
                                           for c in columns))
    for name in names:
        entries = [measure(name) for _ in range(args.repeat)]
        rows[name] = {"median_ms": summary(entries), "runs": entries}
        med = rows[name]["median_ms"]
        print(f"{name:16}" + "".join(f"{med[c]:13.0f}" for c in columns), flush=True)
    import numba_vulkan as nv
    device = nv.list_devices()[0].name
    result = {"device": device, "python": sys.version.split()[0], "repeat": args.repeat,
              "note": "fresh process per run; imports and device opening before the clock "
                      "(as benchmarks/run.py's first-call time); X is wall, X_cpu this "
                      "process's CPU time, both ms",
              "kernels": rows}
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                   f"coldstart_{device.split()[0].lower()}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
