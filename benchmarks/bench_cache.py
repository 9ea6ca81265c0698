"""First-call time of kernels with a cold cache and with each tier warm.

    python benchmarks/bench_cache.py [--repeat N] [--out FILE]

Each measurement is a fresh process that launches one ``cache=True`` kernel
once on device arrays and waits for it; the time from the launch until the
synchronize returns is the first-call time (compile or cache lookup,
pipeline creation, the launch itself). Three cache states:

* cold: an empty cache (libclc already prepared: that happens once per
  machine and is reported on its own line);
* warm ``kernels/``: the kernel's SPIR-V is cached, ``functions/`` is empty,
  so Numba runs and codegen is skipped;
* warm ``functions/``: the whole compiled kernel is cached; Numba is not
  even imported.

Prints a table and writes JSON (default benchmarks/results/cache_<device>.json,
``cache_lavapipe.json`` on lavapipe).
"""

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import numba_vulkan as nv

N = 1 << 16
GROUP = 256


@nv.jit(cache=True)
def saxpy(a, x, y):
    i = nv.global_id(0)
    if i < x.shape[0]:
        y[i] = a * x[i] + y[i]


@nv.jit(cache=True)
def math64(x, y):
    i = nv.global_id(0)
    if i < x.shape[0]:
        v = x[i]
        y[i] = math.sqrt(v * v + 1.0) / (v + 2.0) + math.exp(-v) * v


@nv.jit(cache=True)
def reduce_shared(x, partial):
    buf = nv.shared.array(256, np.float32)
    t = nv.local_id(0)
    i = nv.global_id(0)
    buf[t] = x[i] if i < x.shape[0] else np.float32(0.0)
    nv.barrier()
    s = 128
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        nv.barrier()
        s //= 2
    if t == 0:
        partial[nv.group_id(0)] = buf[0]


@nv.jit(cache=True)
def reduce_loop(x, partial, chunk):
    i = nv.global_id(0)
    if i < partial.shape[0]:
        acc = np.float32(0.0)
        start = i * chunk
        for k in range(start, min(start + chunk, x.shape[0])):
            acc += x[k]
        partial[i] = acc


def _shared_memory():
    """Whether the kernel API has shared memory and barriers yet."""
    return hasattr(nv, "shared") and hasattr(nv, "barrier")


def _launch(name):
    """Launch kernel ``name`` once; return (seconds, whether the result is right)."""
    rng = np.random.default_rng(0)
    if name == "saxpy":
        x, y = rng.random(N, dtype=np.float32), rng.random(N, dtype=np.float32)
        dx, dy = nv.to_device(x), nv.to_device(y)
        start = time.perf_counter()
        saxpy[N // GROUP, GROUP](np.float32(2.0), dx, dy)
        nv.synchronize()
        seconds = time.perf_counter() - start
        return seconds, np.allclose(dy.copy_to_host(), 2 * x + y, rtol=1e-6)
    if name == "math64":
        x = rng.random(N) * 4
        dx, dy = nv.to_device(x), nv.device_array(N, np.float64)
        start = time.perf_counter()
        math64[N // GROUP, GROUP](dx, dy)
        nv.synchronize()
        seconds = time.perf_counter() - start
        expected = np.sqrt(x * x + 1) / (x + 2) + np.exp(-x) * x
        return seconds, np.allclose(dy.copy_to_host(), expected, rtol=1e-12)
    x = rng.random(N, dtype=np.float32)
    groups = N // GROUP
    dx, dp = nv.to_device(x), nv.device_array(groups, np.float32)
    start = time.perf_counter()
    if _shared_memory():
        reduce_shared[groups, GROUP](dx, dp)
    else:
        reduce_loop[1, groups](dx, dp, np.int64(GROUP))
    nv.synchronize()
    seconds = time.perf_counter() - start
    return seconds, np.allclose(dp.copy_to_host(), x.reshape(groups, GROUP).sum(1), rtol=1e-4)


def child(name):
    """Run in the measured process: print one JSON line."""
    from numba_vulkan import store as kernelcache
    if name == "libclc":
        from numba_vulkan.codegen import libclc
        start = time.perf_counter()
        libclc.library()
        print(json.dumps({"seconds": time.perf_counter() - start}))
        return
    nv.to_device(np.zeros(1, np.float32))   # open the device before timing
    seconds, ok = _launch(name)
    print(json.dumps({"seconds": seconds, "ok": bool(ok), "stats": kernelcache.stats(),
                      "numba_imported": "numba" in sys.modules}))


def _measure(name, cache):
    env = dict(os.environ, NUMBA_VULKAN_CACHE_DIR=cache)
    env.pop("NUMBA_VULKAN_CACHE", None)
    result = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name],
                            env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{name} failed in a fresh process:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _copy(source, work, label, without=()):
    target = os.path.join(work, label)
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(*without))
    return target


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3, help="processes per measurement")
    parser.add_argument("--out")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    load_before = os.getloadavg()[0]
    work = tempfile.mkdtemp(prefix="nv-bench-cache-")
    try:
        base = os.path.join(work, "base")
        libclc_seconds = _measure("libclc", base)["seconds"]
        reduction = "reduce_shared" if _shared_memory() else "reduce_loop"
        rows = {}
        for name in ("saxpy", "math64", "reduction"):
            samples = {"cold": [], "warm kernels/": [], "warm functions/": []}
            populated = None
            for _ in range(args.repeat):
                populated = _copy(base, work, "cold")
                samples["cold"].append(_measure(name, populated))
            for _ in range(args.repeat):
                cache = _copy(populated, work, "kernels", without=("functions",))
                samples["warm kernels/"].append(_measure(name, cache))
                samples["warm functions/"].append(_measure(name, populated))
            for state, runs in samples.items():
                assert all(r["ok"] for r in runs), f"{name} gave a wrong result ({state})"
            hits = samples["warm functions/"][-1]["stats"]["functions"]["hits"]
            assert hits == 1 and not samples["warm functions/"][-1]["numba_imported"]
            assert samples["warm kernels/"][-1]["stats"]["kernels"]["hits"] == 1
            rows[name] = {state: statistics.median(r["seconds"] for r in runs)
                          for state, runs in samples.items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    device = nv.list_devices()[0].name
    print(f"first-call time in a fresh process, median of {args.repeat}, on {device}")
    print(f"(reduction: {reduction}"
          + ("" if reduction == "reduce_shared" else
             ", a loop per invocation: nv.shared / nv.barrier do not exist yet") + ")")
    print(f"{'kernel':10} {'cold ms':>9} {'kernels/ ms':>12} {'ratio':>6} "
          f"{'functions/ ms':>14} {'ratio':>6}")
    for name, row in rows.items():
        cold = row["cold"]
        print(f"{name:10} {cold * 1e3:9.1f} {row['warm kernels/'] * 1e3:12.1f} "
              f"{row['warm kernels/'] / cold:6.3f} {row['warm functions/'] * 1e3:14.1f} "
              f"{row['warm functions/'] / cold:6.3f}")
    print(f"libclc preparation (once per machine and libclc file): {libclc_seconds * 1e3:.0f} ms")
    load = [load_before, os.getloadavg()[0]]
    print(f"load average before and after: {load[0]:.1f}, {load[1]:.1f} "
          f"on {os.cpu_count()} CPUs (other work inflates the times)")
    result = {"device": device, "python": platform.python_version(), "repeat": args.repeat,
              "n": N, "reduction": reduction, "libclc_preparation_s": libclc_seconds,
              "first_call_s": rows, "load_average": load, "cpus": os.cpu_count(),
              "targets": {"warm kernels/ / cold": 0.5, "warm functions/ / cold": 0.1}}
    label = "lavapipe" if "llvmpipe" in device.lower() else device.split()[0].lower()
    out = args.out or os.path.join(os.path.dirname(__file__), "results", f"cache_{label}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
