"""What the drivers compiled each benchmark kernel into, side by side.

    python benchmarks/bench_pipeline_stats.py --only matmul,matmul_plain --out /tmp/pstats

For each kernel of ``--only`` (default: every kernel of ``suite.py``, ``users.py``
and ``mathops.py``), once
per code generator variant of ``--variants`` (as in ``bench_variants.py``;
``base`` always), it compiles the kernel for the arguments and workgroup
size the benchmark launches with, and asks the Vulkan driver what it made
of it (``VK_KHR_pipeline_executable_properties``: statistics such as
registers, and internal representations such as the disassembly). Where
numba-cuda and a CUDA GPU are present it compiles the same source there and
reports the registers, shared and local memory numba-cuda gives, its PTX,
and its SASS where nvdisasm is installed. Nothing is timed.

It prints one line per kernel and backend and, with ``--out DIR``, writes
``DIR/pipeline_stats.json`` (everything), and per kernel
``DIR/NAME/VARIANT/`` holding the SPIR-V as text (``kernel.spvasm``, with
spirv-dis) and each internal representation the driver gave
(``NN-NAME.txt``), and ``DIR/NAME/numba_cuda/`` its ``kernel.ptx`` and
``kernel.sass``. A device without the extension (lavapipe of Mesa 22) gets
its note in place of statistics, and the run goes on.
"""

import argparse
import json
import os
import re
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from benchmarks import backends as bk  # noqa: E402
from benchmarks import bench_variants  # noqa: E402
from benchmarks import mathops, suite, users  # noqa: E402

#: numba-cuda's per-kernel questions, by the name the JSON gives the answer.
CUDA_QUESTIONS = {"registers_per_thread": "get_regs_per_thread",
                  "shared_memory_per_block": "get_shared_mem_per_block",
                  "local_memory_per_thread": "get_local_mem_per_thread",
                  "max_threads_per_block": "get_max_threads_per_block"}


def _file_name(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "representation"


def _write(directory, name, text):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def _one(answer):
    """numba-cuda answers a lazily compiled kernel's questions by signature:
    the answer for its one signature."""
    if isinstance(answer, dict):
        return next(iter(answer.values())) if len(answer) == 1 else {
            str(k): v for k, v in answer.items()}
    return answer


def vulkan_entry(bench, variant, host, out):
    """The driver's statistics of ``bench`` compiled under ``variant``."""
    from numba_vulkan.base.errors import NotReportedError, VulkanError
    backend = bench_variants.VariantBackend(variant)
    _, threads = bench.grid(bench.sizes["tiny"])
    entry = {"threads": list(threads)}
    kernel = backend.make(bench)
    args = [backend.device_value(host[name]) for name in bench.arguments()]
    from numba_vulkan.base import signature
    try:
        with bench_variants.active(variant):
            compiled = kernel.compile(tuple(map(signature.of_value, args)), threads=threads)
            found = kernel.pipeline_statistics(*args, threads=threads,
                                               internal_representations=out is not None)
    except NotReportedError as exc:
        entry.update(status="not reported", note=str(exc))
        found = []
    except VulkanError as exc:
        entry.update(status="failed", note=f"{type(exc).__name__}: {exc}")
        return entry
    else:
        entry["status"] = "ok"
    entry["signature"] = list(compiled.signature)
    entry["executables"] = found
    if out is not None:
        directory = os.path.join(out, bench.name, _file_name(variant))
        try:
            _write(directory, "kernel.spvasm", compiled.disassemble())
        except VulkanError as exc:
            entry["spirv_note"] = f"no disassembly: {exc}"
        for k, executable in enumerate(found):
            for representation in executable["internal_representations"]:
                name = f"{k:02d}-{_file_name(representation['name'])}.txt"
                path = _write(directory, name, representation["text"])
                # The JSON keeps the statistics; the texts live in their files.
                representation["text"] = os.path.relpath(path, out)
    return entry


def cuda_entry(bench, host, out):
    """numba-cuda's own account of the same kernel."""
    backend = bk.CudaBackend()
    groups, threads = bench.grid(bench.sizes["tiny"])
    try:
        kernel = backend.make(bench)
        args = [backend.device_value(host[name]) for name in bench.arguments()]
        backend.launch(kernel, groups, threads, args)
        backend.synchronize()
    except Exception as exc:  # numba-cuda's errors are its own; report and go on
        return {"status": "failed", "note": f"{type(exc).__name__}: {exc}"}
    entry = {"status": "ok", "threads": list(threads)}
    for key, method in CUDA_QUESTIONS.items():
        try:
            entry[key] = _one(getattr(kernel, method)())
        except Exception as exc:
            entry[key] = None
            entry.setdefault("notes", {})[key] = f"{type(exc).__name__}: {exc}"
    directory = os.path.join(out, bench.name, "numba_cuda") if out is not None else None
    for key, method, name in (("ptx", "inspect_asm", "kernel.ptx"),
                              ("sass", "inspect_sass", "kernel.sass")):
        try:
            text = _one(getattr(kernel, method)())
        except Exception as exc:  # inspect_sass needs nvdisasm, which may be missing
            entry.setdefault("notes", {})[key] = f"{type(exc).__name__}: {exc}"
            continue
        if directory is not None:
            entry[f"{key}_file"] = os.path.relpath(_write(directory, name, text), out)
    return entry


def _summary(entry):
    if entry.get("status") != "ok":
        return f"{entry.get('status')}: {entry.get('note', '')}"
    if "executables" not in entry:
        return "  ".join(f"{k}={entry.get(k)}" for k in CUDA_QUESTIONS)
    return " | ".join("  ".join(f"{n}={v}" for n, v in e["statistics"].items())
                      for e in entry["executables"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=None,
                        help="comma-separated benchmark names (default: every kernel)")
    parser.add_argument("--variants", default="",
                        help="comma-separated code generator variants of bench_variants.py "
                             f"({','.join(bench_variants.VARIANTS)}); base always runs")
    parser.add_argument("--out", help="directory for pipeline_stats.json and the "
                                      "internal representations")
    args = parser.parse_args(argv)
    os.environ.setdefault("NUMBA_VULKAN_CACHE", "0")
    # Every family's kernels: the suite's, users' (benchmarks/users.py) and
    # the math functions' (benchmarks/mathops.py).
    benches = {**suite.by_name(), **{b.name: b for b in users.BENCHMARKS + mathops.BENCHMARKS}}
    names = args.only.split(",") if args.only else list(benches)
    missing = [n for n in names if n not in benches]
    if missing:
        parser.error(f"unknown benchmarks {missing}; known: {','.join(benches)}")
    variants = ["base"] + [v for v in args.variants.split(",") if v and v != "base"]
    unknown = bench_variants.unknown_variants(variants)
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {list(bench_variants.VARIANTS)}")
    cuda_ok, cuda_note = bk.cuda_status()
    environment = bk.VulkanBackend().environment()
    if cuda_ok:
        environment["numba_cuda"] = bk.CudaBackend().environment()
    results = {"environment": environment, "variants": variants,
               "numba_cuda": None if cuda_ok else cuda_note, "kernels": {}}
    print(f"device: {environment['device']} (driver {environment['driver_version']})"
          + ("" if cuda_ok else f"; numba-cuda: {cuda_note}"), flush=True)
    for name in names:
        bench = benches[name]
        host = bench.inputs(bench.sizes["tiny"], np.random.default_rng(1234))
        row = {}
        for variant in variants:
            row[variant] = vulkan_entry(bench, variant, host, args.out)
            print(f"{name:22} {variant:16} {_summary(row[variant])}", flush=True)
        if cuda_ok:
            row["numba_cuda"] = cuda_entry(bench, host, args.out)
            print(f"{name:22} {'numba_cuda':16} {_summary(row['numba_cuda'])}", flush=True)
        results["kernels"][name] = row
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, "pipeline_stats.json")
        with open(path, "w") as f:
            json.dump(results, f, indent=1)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
