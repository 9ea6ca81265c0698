"""AOT: first launch from a shipped directory against a cold JIT compile, and build throughput.

    python benchmarks/bench_aot.py [--repeat N] [--label NAME] [--out DIR]

For each example kernel, a fresh process launches it once on small device
arrays (so that the launch, not the work, is measured) and synchronizes; the time of that first launch (lookup or compile,
pipeline creation, the dispatch itself) is measured after the device is
created, in three situations:

* ``jit cold``: no AOT directory, kernel cache off, empty driver caches;
* ``aot first``: the kernel from an AOT directory (strict mode, kernel cache
  off), the first process on the machine: empty pipeline cache and empty
  Mesa shader cache;
* ``aot later``: the same, once an earlier process filled those caches
  (median of ``--repeat`` processes);
* ``pipeline cache only``: later processes with the driver's own on-disk
  shader cache off (Mesa's, NVIDIA's), so only our pipeline cache helps;
* ``no caches``: later processes with neither: what the driver's compile
  costs every time.

``steady`` is a second launch in the same process, so ``first - steady`` is
what being first costs. Build throughput is the repository's example
kernels with more signatures, built with ``-j 1`` and ``-j 2``, kernel cache
off. Prints a table and writes ``aot_LABEL.json`` to ``--out``
(``benchmarks/results/``).
Targets: ``aot later`` at least 20 times faster than ``jit cold`` and under
20 ms beyond device creation on lavapipe.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

KERNELS = {
    "saxpy": "examples.saxpy:saxpy",
    "mandelbrot": "examples.mandelbrot:mandelbrot",
}

#: The examples with more signatures and workgroup sizes, for build throughput.
THROUGHPUT_MANIFEST = """version: 1
output: aot
kernels:
  - function: examples.saxpy:saxpy
    signatures:
      - void(float32, float32[::1], float32[::1])
      - void(float64, float64[::1], float64[::1])
      - void(float32, float32[:], float32[:])
      - void(float64, float64[:], float64[:])
    threads: [[64], [256]]
  - function: examples.mandelbrot:mandelbrot
    signatures:
      - void(uint16[:, ::1], float64, float64, float64, int32)
      - void(uint16[:, :], float64, float64, float64, int32)
    threads: [[16, 16], [8, 8]]
"""


def child(name):
    """Runs in a fresh process: time the first and a second launch of one kernel."""
    start = time.perf_counter()
    import numpy as np
    import numba_vulkan as nv
    from numba_vulkan.runtime.device import current_device
    from examples.mandelbrot import mandelbrot
    from examples.saxpy import saxpy
    imported = time.perf_counter()
    current_device()
    device = time.perf_counter()
    if name == "saxpy":
        x = nv.to_device(np.ones(1 << 16, np.float32))
        y = nv.to_device(np.ones(1 << 16, np.float32))

        def launch():
            saxpy[(1 << 16) // 256, 256](np.float32(2.0), x, y)
    else:
        image = nv.device_array((64, 64), np.uint16)

        def launch():
            mandelbrot[(4, 4), (16, 16)](image, -2.0, -1.5, 3.0 / 64, np.int32(100))
    nv.synchronize()
    t0 = time.perf_counter()
    launch()
    nv.synchronize()
    t1 = time.perf_counter()
    launch()
    nv.synchronize()
    t2 = time.perf_counter()
    print(json.dumps({"import": imported - start, "device": device - imported,
                      "first": t1 - t0, "steady": t2 - t1, "aot": nv.aot.stats()}))


def _run_child(name, env):
    result = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name],
                            cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{name} child failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


#: Settings the situations decide; tool paths and the rest pass through.
_CACHING = {"NUMBA_VULKAN_CACHE", "NUMBA_VULKAN_CACHE_DIR", "NUMBA_VULKAN_AOT_PATH",
            "NUMBA_VULKAN_AOT_STRICT", "NUMBA_VULKAN_AOT_RECORD", "NUMBA_VULKAN_PIPELINE_CACHE",
            "MESA_SHADER_CACHE_DISABLE", "__GL_SHADER_DISK_CACHE"}


def _environment(caches, driver_cache=True, **settings):
    """Settings for a child whose caches (ours and the driver's) live in ``caches``."""
    env = {k: v for k, v in os.environ.items() if k not in _CACHING}
    env.update(NUMBA_VULKAN_CACHE_DIR=os.path.join(caches, "numba_vulkan"),
               XDG_CACHE_HOME=os.path.join(caches, "xdg"),
               MESA_SHADER_CACHE_DIR=os.path.join(caches, "mesa"),
               __GL_SHADER_DISK_CACHE_PATH=os.path.join(caches, "nvidia"), **settings)
    if not driver_cache:
        # The drivers' own on-disk shader caches (Mesa's, NVIDIA's), which
        # would hide what the pipeline cache does.
        env.update(MESA_SHADER_CACHE_DISABLE="true", __GL_SHADER_DISK_CACHE="0")
    return env


def _median(runs):
    out = {k: statistics.median(r[k] for r in runs)
           for k in ("import", "device", "first", "steady")}
    out["aot"] = runs[-1]["aot"]
    return out


def first_launches(aot_dir, repeat, scratch):
    """Per kernel and situation, the child's timings (the median where repeated)."""
    out = {}
    aot = {"NUMBA_VULKAN_CACHE": "0", "NUMBA_VULKAN_AOT_STRICT": "1",
           "NUMBA_VULKAN_AOT_PATH": aot_dir}
    for name in KERNELS:
        rows = {}
        cold = tempfile.mkdtemp(dir=scratch)
        rows["jit cold"] = _run_child(name, _environment(cold, NUMBA_VULKAN_CACHE="0"))
        caches = tempfile.mkdtemp(dir=scratch)
        rows["aot first"] = _run_child(name, _environment(caches, **aot))
        rows["aot later"] = _median([_run_child(name, _environment(caches, **aot))
                                     for _ in range(repeat)])
        caches = tempfile.mkdtemp(dir=scratch)
        only_ours = _environment(caches, driver_cache=False, **aot)
        _run_child(name, only_ours)
        rows["pipeline cache only"] = _median([_run_child(name, only_ours)
                                               for _ in range(repeat)])
        no_cache = _environment(tempfile.mkdtemp(dir=scratch), driver_cache=False,
                                NUMBA_VULKAN_PIPELINE_CACHE="0", **aot)
        rows["no caches"] = _median([_run_child(name, no_cache) for _ in range(repeat)])
        for situation, row in rows.items():
            if situation != "jit cold" and row["aot"]["hits"] != 1:
                raise RuntimeError(f"{name}: {situation} did not hit the AOT directory")
        out[name] = rows
    return out


def build_throughput(scratch):
    """Seconds to build the throughput manifest cold with -j 1 and -j 2."""
    project = tempfile.mkdtemp(dir=scratch)
    os.symlink(os.path.join(ROOT, "examples"), os.path.join(project, "examples"))
    manifest = os.path.join(project, "kernels.yaml")
    with open(manifest, "w") as f:
        f.write(THROUGHPUT_MANIFEST)
    out = {}
    for jobs in (1, 2):
        caches = tempfile.mkdtemp(dir=scratch)
        start = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "numba_vulkan.aot", "build", manifest, "-j", str(jobs),
             "-o", os.path.join(project, f"aot-j{jobs}"), "--json"],
            cwd=project, env=_environment(caches, NUMBA_VULKAN_CACHE="0"),
            capture_output=True, text=True)
        wall = time.perf_counter() - start
        if result.returncode != 0:
            raise RuntimeError(f"build -j {jobs} failed:\n{result.stderr}")
        summary = json.loads(result.stdout)
        out[f"-j {jobs}"] = {"modules": summary["built"], "seconds": wall,
                             "modules_per_second": summary["built"] / wall}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="processes for 'aot later'")
    parser.add_argument("--label", default=None, help="name of the results file")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"),
                        help="directory of the results file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, ROOT)
        return child(args.child)
    with tempfile.TemporaryDirectory(prefix="nv-bench-aot-") as scratch:
        aot_dir = os.path.join(scratch, "aot")
        subprocess.run([sys.executable, "-m", "numba_vulkan.aot", "build", "kernels.yaml",
                        "-o", aot_dir, "--quiet"], cwd=ROOT, check=True,
                       env=_environment(tempfile.mkdtemp(dir=scratch)))
        launches = first_launches(aot_dir, args.repeat, scratch)
        throughput = build_throughput(scratch)
    probe = subprocess.run([sys.executable, "-c", "import numba_vulkan as nv; "
                            "print(nv.list_devices()[0].name)"],
                           capture_output=True, text=True, check=True)
    device = probe.stdout.strip()
    label = args.label or ("lavapipe" if "llvmpipe" in device else
                           "_".join(re.findall(r"[a-z0-9]+", device.lower())[:3]))

    print(f"First launch in a fresh process, after device creation ({device}), ms")
    print(f"{'kernel':<12}{'situation':<21}{'first':>9}{'steady':>9}{'first-steady':>14}"
          f"{'device':>9}{'speed-up':>10}")
    verdicts = []
    for name, rows in launches.items():
        cold = rows["jit cold"]["first"]
        for situation, r in rows.items():
            speedup = cold / r["first"]
            print(f"{name:<12}{situation:<21}{r['first'] * 1e3:9.1f}{r['steady'] * 1e3:9.1f}"
                  f"{(r['first'] - r['steady']) * 1e3:14.1f}{r['device'] * 1e3:9.1f}"
                  f"{speedup:9.1f}x")
        later = rows["aot later"]
        verdicts.append((name, cold / later["first"] >= 20, later["first"] < 0.020))
    print("\nBuild throughput (kernel cache off, fresh output)")
    for jobs, r in throughput.items():
        print(f"  {jobs}: {r['modules']} modules in {r['seconds']:.1f} s "
              f"({r['modules_per_second']:.2f} modules/s)")
    print("\nTargets for 'aot later': >= 20x faster than 'jit cold', < 20 ms")
    for name, fast, quick in verdicts:
        print(f"  {name:<12} 20x: {'met' if fast else 'MISSED'}   "
              f"< 20 ms: {'met' if quick else 'MISSED'}")
    results = {"device": device, "repeat": args.repeat, "first_launch": launches,
               "build_throughput": throughput,
               "targets": {n: {"20x": f, "under_20ms": q} for n, f, q in verdicts}}
    path = os.path.join(args.out, f"aot_{label}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
