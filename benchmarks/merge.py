"""Join result files of ``run.py`` runs on one device into one file.

    python benchmarks/merge.py results/h200.json suite.json users.json math.json

A run of every family takes longer than one call of a lent GPU may, so the
families run in calls of their own, back to back on the same machine, and
are joined here: the first file gives the environment and timing settings,
each later one adds its benchmarks, rows, targets and first-call timings
(a benchmark in two files keeps the later run's), and ``command`` lists
every run's command.
"""

import argparse
import json
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import report  # noqa: E402


def merge(results):
    """One result dict from the result dicts ``results`` (in run order)."""
    out = dict(results[0])
    out["benchmarks"] = dict(out["benchmarks"])
    out["cold_compile"] = dict(out.get("cold_compile") or {})
    rows = {row["name"]: row for row in out.get("rows", [])}
    families, commands = list(out.get("families", [])), [out.get("command", "")]
    targets = list(out.get("targets", []))
    for later in results[1:]:
        if later["environment"].get("device") != out["environment"].get("device"):
            raise SystemExit(f"runs on different devices: {out['environment'].get('device')} "
                             f"and {later['environment'].get('device')}")
        out["benchmarks"].update(later["benchmarks"])
        out["cold_compile"].update(later.get("cold_compile") or {})
        rows.update({row["name"]: row for row in later.get("rows", [])})
        families += [f for f in later.get("families", []) if f not in families]
        commands.append(later.get("command", ""))
        targets += later.get("targets", [])
    out["rows"] = list(rows.values())
    out["families"] = families
    out["targets"] = targets
    out["command"] = " && ".join(c for c in commands if c)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args(argv)
    results = []
    for path in args.runs:
        with open(path) as f:
            results.append(json.load(f))
    report.write_json(merge(results), args.out)


if __name__ == "__main__":
    main()
