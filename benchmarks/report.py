"""Turning results into a table, targets, JSON and a chart."""

import json
import os

BACKEND_ORDER = ("numba_vulkan", "numba_vulkan_fastmath", "numba_vulkan_contract", "numba_cuda",
                 "cpu", "ceiling")


def _ms(seconds):
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f}us"
    if seconds < 10:
        return f"{seconds * 1e3:.3f}ms"
    return f"{seconds:.2f}s"


def _ratio(value, percent=False):
    if value is None:
        return "-"
    return f"{value:.0%}" if percent else f"{value:.2f}x"


def _rate(bench, seconds):
    if not seconds or bench["kind"] == "latency":
        return "-"
    work = bench.get("work") or {}
    if bench["kind"] == "compute" and work.get("flops"):
        return f"{work['flops'] / seconds / 1e9:.1f} GFLOP/s"
    if work.get("bytes"):
        return f"{work['bytes'] / seconds / 1e9:.1f} GB/s"
    return "-"


def _ratio_columns(backends):
    """The ratio columns that the run's backends can fill: (key, label)."""
    columns = []
    if "numba_cuda" in backends:
        columns.append(("vulkan_vs_cuda", "vk/cuda"))
        if "numba_vulkan_fastmath" in backends:
            columns.append(("vulkan_fastmath_vs_cuda", "fm/cuda"))
        if "numba_vulkan_contract" in backends:
            columns.append(("vulkan_contract_vs_cuda", "ct/cuda"))
    if "cpu" in backends:
        columns.append(("vulkan_vs_cpu", "vk/cpu"))
    return columns


def time_of(result, which="wall"):
    """Median seconds of a backend's result (``wall`` or ``kernel``), or None."""
    if not result or result.get("status") not in ("ok", "wrong"):
        return None
    stats = result.get(which)
    return stats["median"] if stats else None


def plain_ratio(bench, backend="numba_vulkan"):
    """A plain variant's time over its tuned twin's on ``backend``: device
    time where measured, else wall time; None for a tuned benchmark."""
    ratio = (bench.get("ratios", {}).get("plain_vs_tuned") or {}).get(backend) or {}
    return ratio.get("kernel", ratio.get("wall"))


def table(results):
    """The results as fixed-width text."""
    backends = [b for b in BACKEND_ORDER if b in results["backends"]]
    header = f"{'benchmark':20} {'size':28}"
    labels = {name: name + (" wall/kernel" if name != "ceiling" else "") for name in backends}
    widths = {name: max(20, len(label)) for name, label in labels.items()}
    for name in backends:
        header += f" {labels[name]:>{widths[name]}}"
    ratio_keys = _ratio_columns(backends)
    header += "".join(f" {label:>8}" for _, label in ratio_keys)
    header += f" {'vk of ceil':>10} {'vk rate':>16} {'plain/tuned':>11}"
    lines = [header, "-" * len(header)]
    for name, bench in results["benchmarks"].items():
        line = f"{name:20} {bench['size']:28}"
        for backend in backends:
            result = bench["results"].get(backend)
            if backend == "ceiling":
                cell = _ms(result.get("time")) if result else "-"
            elif result is None or result.get("status") not in ("ok", "wrong"):
                cell = (result or {}).get("status", "-")
            else:
                cell = f"{_ms(time_of(result))}/{_ms(time_of(result, 'kernel'))}"
                if result["status"] == "wrong":
                    cell = "WRONG " + cell
            line += f" {cell:>{widths[backend]}}"
        ratios = bench.get("ratios", {})
        vk = time_of(bench["results"].get("numba_vulkan"))
        line += "".join(f" {_ratio(ratios.get(key, {}).get('wall')):>8}"
                        for key, _ in ratio_keys)
        line += (f" {_ratio(ratios.get('vulkan_of_ceiling', {}).get('wall'), True):>10}"
                 f" {_rate(bench, vk):>16}")
        if bench.get("tuned"):
            line += f" {_ratio(plain_ratio(bench)):>11}"
        lines.append(line)
    return "\n".join(lines)


#: Titles of the benchmark families' tables.
FAMILY_TITLES = {"suite": "The suite's kernels",
                 "users": "Kernels as numba.cuda users write them",
                 "math": "Math functions, 64 applications per element"}


def markdown_table(results):
    """The main results as Markdown tables (for the README), one per family
    of benchmarks (a run of the suite alone: one table, untitled): device
    time where a backend measured it (kernels), else wall time (copies), and
    the launch-and-wait time of the latency benchmarks, which is what they
    measure."""
    families = {}
    for name, bench in results["benchmarks"].items():
        families.setdefault(bench.get("family", "suite"), {})[name] = bench
    if list(families) in ([], ["suite"]):
        return _markdown_family(results, results["benchmarks"])
    return "\n\n".join(f"**{FAMILY_TITLES.get(family, family)}**\n\n"
                        + _markdown_family(results, benches, family == "suite")
                        for family, benches in families.items())


def _markdown_family(results, benchmarks, suite=True):
    backends = [b for b in BACKEND_ORDER if b in results["backends"]]
    ratio_keys = _ratio_columns(backends)
    head = ["benchmark", "size"] + [f"{b} (ms)" for b in backends] + [
        label for _, label in ratio_keys] + (["vk of ceiling", "vk plain/tuned"] if suite else [])
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, bench in benchmarks.items():
        cells = [name, bench["size"]]
        wall = bench["kind"] == "latency"
        for backend in backends:
            result = bench["results"].get(backend)
            if backend == "ceiling":
                seconds = result.get("time") if result else None
            else:
                seconds = (not wall and time_of(result, "kernel")) or time_of(result)
            if seconds is None:
                cells.append((result or {}).get("status", "-") if backend != "ceiling" else "-")
            else:
                cells.append(f"{seconds * 1e3:.3f}")
        ratios = bench.get("ratios", {})
        cells += [_ratio(_device_first(ratios.get(key), wall)) for key, _ in ratio_keys]
        if suite:
            cells.append(_ratio(_device_first(ratios.get("vulkan_of_ceiling"), wall), True))
            cells.append(_ratio(plain_ratio(bench)) if bench.get("tuned") else "")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _device_first(ratio, wall=False):
    ratio = ratio or {}
    return ratio.get("wall") if wall else ratio.get("kernel", ratio.get("wall"))


def cold_table(results):
    cold = results.get("cold_compile") or {}
    if not cold:
        return ""
    backends = sorted({b for per in cold.values() for b in per},
                      key=lambda b: BACKEND_ORDER.index(b) if b in BACKEND_ORDER else 99)
    lines = [f"{'first call (cold compile)':26}" + "".join(f" {b:>14}" for b in backends)]
    for name, per in cold.items():
        cells = []
        for backend in backends:
            entry = per.get(backend) or {}
            seconds = entry.get("first_call")
            cells.append(f"{seconds:.2f}s" if seconds is not None else entry.get("status", "-"))
        lines.append(f"{name:26}" + "".join(f" {c:>14}" for c in cells))
    return "\n".join(lines)


def targets_text(results):
    lines = []
    for target in results.get("targets", []):
        mark = {True: "met", False: "MISSED", None: "n/a"}[target["met"]]
        lines.append(f"  [{mark:6}] {target['what']}: {target['value']}")
    return "\n".join(lines)


def problems_text(results):
    lines = []
    for name, bench in results["benchmarks"].items():
        for backend, result in bench["results"].items():
            if result and result.get("status") not in ("ok", None) and result.get("note"):
                lines.append(f"  {name} on {backend}: {result['status']}: {result['note']}")
    for name, per in (results.get("cold_compile") or {}).items():
        for backend, entry in per.items():
            if entry.get("status") != "ok" and entry.get("note"):
                lines.append(f"  first call of {name} on {backend}: {entry['note']}")
    for name, note in results["backends"].items():
        if not note.get("available"):
            lines.append(f"  backend {name} skipped: {note.get('note')}")
    return "\n".join(lines)


def write_json(results, path):
    """Write atomically, so a crash mid-run leaves the previous file whole."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1, sort_keys=False, default=_plain)
        f.write("\n")
    os.replace(tmp, path)


def _plain(value):
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def chart(results, path):
    """A PNG of each benchmark's kernel time per backend (log scale).

    Returns None, or why no chart was drawn.
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"matplotlib is missing ({exc}); pip install -r requirements-bench.txt"
    names = list(results["benchmarks"])
    backends = [b for b in BACKEND_ORDER if b in results["backends"]]
    if not any(_chart_seconds(results["benchmarks"][n]["results"].get(b), b, False)
               for n in names for b in backends):
        return "nothing was measured: no chart"
    height = 0.8 / max(1, len(backends))
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(names) * max(2, len(backends)) / 2 + 1.5))
    for k, backend in enumerate(backends):
        values, ys = [], []
        for i, name in enumerate(names):
            bench = results["benchmarks"][name]
            seconds = _chart_seconds(bench["results"].get(backend), backend,
                                     bench["kind"] == "latency")
            if seconds:
                values.append(seconds * 1e3)
                ys.append(i + (k - (len(backends) - 1) / 2) * height)
        ax.barh(ys, values, height=height, label=backend)
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels([f"{n}\n{results['benchmarks'][n]['size']}" for n in names], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("milliseconds (median; device time where measured, launch + wait for "
                  "latency benchmarks and where it is not)")
    device = results["environment"].get("numba_vulkan", {}).get("device", "?")
    ax.set_title(f"Kernel time per backend: {device} ({results['sizes']} sizes)", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(axis="x", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def _chart_seconds(result, backend, wall):
    """The seconds the chart shows: as the tables do, launch and wait for a
    latency benchmark (a Vulkan timestamp and a CUDA event do not measure
    the same span of a tiny launch), device time elsewhere where measured."""
    if backend == "ceiling":
        return (result or {}).get("time")
    return (not wall and time_of(result, "kernel")) or time_of(result)
