"""AOT builds shared through a Redis server, and on a Dask cluster.

    python benchmarks/bench_remote.py [--modules 200] [--jobs 2] [--label NAME] [--out DIR]

A generated manifest of ``--modules`` modules (distinct kernels, four
signatures each) is built three ways, each into a fresh output with an
empty kernel cache:

* ``cold``: machine A, ``-j JOBS`` local processes, ``--remote`` to a
  redis-server this script starts on 127.0.0.1 (so A's modules reach it);
* ``second machine``: machine B, ``--remote`` to the same server, which
  has every module: nothing is compiled;
* ``cluster``: ``--scheduler`` on a Dask ``LocalCluster`` of ``JOBS``
  worker processes, no remote cache.

The three outputs are compared byte for byte. Prints a table and writes
``remote_LABEL.json`` to ``--out`` (``benchmarks/results/``), with the
machine's load average before and after (the times are of a machine
shared with whatever else runs). Goal: the
second machine at least 10 times faster than cold. Needs ``redis-server``
(``scripts/setup.sh`` installs it) and the ``distributed`` package.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Bodies of the generated kernels; each is used with several constants.
_BODIES = [
    "y[i] = x[i] * {a} + {b}",
    "y[i] = (x[i] - {a}) * (x[i] + {b})",
    "y[i] = x[i] / ({a} + x[i] * x[i]) - {b}",
    "y[i] = max(x[i], {a}) - min(x[i], {b})",
]
_SIGNATURES = ["void(float32[::1], float32[::1])", "void(float64[::1], float64[::1])",
               "void(float32[:], float32[:])", "void(float64[:], float64[:])"]


def _project(directory, modules):
    kernels = -(-modules // len(_SIGNATURES))
    source = ["import numba_vulkan as nv\n"]
    manifest = ["version: 1", "output: out", "kernels:"]
    for k in range(kernels):
        body = _BODIES[k % len(_BODIES)].format(a=f"{1 + k * 0.25}", b=f"{k * 0.5}")
        source.append(f"\n@nv.jit\ndef k{k}(x, y):\n    i = nv.global_id(0)\n"
                      f"    if i < x.shape[0]:\n        {body}\n")
        manifest.append(f"  - function: bench_kernels:k{k}")
        manifest.append(f"    signatures: {json.dumps(_SIGNATURES)}")
    with open(os.path.join(directory, "bench_kernels.py"), "w") as f:
        f.write("\n".join(source))
    with open(os.path.join(directory, "kernels.yaml"), "w") as f:
        f.write("\n".join(manifest) + "\n")
    return kernels * len(_SIGNATURES)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _build(directory, name, *args):
    env = dict(os.environ, NUMBA_VULKAN_CACHE_DIR=os.path.join(directory, "cache-" + name),
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH"))
                                          if p))
    env.pop("NUMBA_VULKAN_REMOTE_CACHE", None)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "numba_vulkan.aot", "build", "kernels.yaml",
                           "-o", "out-" + name, "--json", *args], cwd=directory, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"the {name} build failed:\n{done.stdout}{done.stderr[-3000:]}")
    summary = json.loads(done.stdout)
    return {"seconds": round(seconds, 2), "built": summary["built"],
            "remote": summary["remote"]}


def _tree(path):
    out = {}
    for folder, _, names in os.walk(path):
        for name in names:
            full = os.path.join(folder, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, path)] = f.read()
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--modules", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--label", default="lavapipe")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        sys.exit("redis-server is not installed (scripts/setup.sh installs it)")
    import distributed

    load_before = [round(n, 2) for n in os.getloadavg()]
    directory = tempfile.mkdtemp(prefix="nv-bench-remote-")
    modules = _project(directory, args.modules)
    port = _free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                               "--dir", directory, "--save", "", "--appendonly", "no"],
                              stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        time.sleep(0.5)
        rows = {"cold": _build(directory, "cold", "-j", str(args.jobs), "--remote", url),
                "second machine": _build(directory, "second", "--remote", url)}
        with distributed.LocalCluster(n_workers=args.jobs, threads_per_worker=1,
                                      processes=True, dashboard_address=None,
                                      scheduler_port=0, host="127.0.0.1",
                                      silence_logs=50) as cluster:
            rows["cluster"] = _build(directory, "cluster", "--scheduler",
                                     cluster.scheduler_address)
    finally:
        server.kill()
        server.wait()
    reference = _tree(os.path.join(directory, "out-cold"))
    identical = all(_tree(os.path.join(directory, "out-" + n)) == reference
                    for n in ("second", "cluster"))
    shutil.rmtree(directory, ignore_errors=True)
    cold = rows["cold"]["seconds"]
    print(f"{modules} modules, -j {args.jobs} / {args.jobs} cluster workers")
    print(f"{'build':<16}{'seconds':>9}{'built':>7}{'remote':>8}{'vs cold':>9}")
    for name, row in rows.items():
        print(f"{name:<16}{row['seconds']:>9.2f}{row['built']:>7}{row['remote']:>8}"
              f"{cold / row['seconds']:>8.1f}x")
    print(f"outputs byte-identical: {identical}")
    load = {"cpus": os.cpu_count(), "before": load_before,
            "after": [round(n, 2) for n in os.getloadavg()]}
    print(f"load average (1, 5, 15 min) on {load['cpus']} CPUs: before {load['before']}, "
          f"after {load['after']}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"remote_{args.label}.json"), "w") as f:
        json.dump({"modules": modules, "jobs": args.jobs, "builds": rows,
                   "identical": identical, "load_average": load,
                   "date": time.strftime("%Y-%m-%d", time.gmtime())}, f, indent=1,
                  sort_keys=True)
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
