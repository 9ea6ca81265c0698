"""Run generated control-flow programs on Vulkan and compare with numba.njit.

A batch puts several generated functions into one kernel: invocation ``i``
calls function ``inp[i, 3]`` on the inputs ``inp[i, :3]``, so one compile
and one launch check many programs over many inputs. A batch that fails to
compile is split, down to single functions, to name the programs at fault.

By hand (many more cases than CI runs)::

    python -m tests.fuzz.fuzzrun --seed 7 --cases 2000
"""

import argparse
import linecache
import os
import sys
import time

import numba
import numpy as np

import numba_vulkan as nv
from tests.fuzz.fuzzgen import TABLE_SIZE, function_source

#: Inputs per generated function.
INPUTS = 24


def _exec_source(source, filename, namespace):
    # Registered with linecache so that Numba's messages quote the program.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)


def batch_source(seed, indices):
    """Source of a module with the functions ``indices`` of ``seed`` and a
    kernel ``kernel(inp, out)`` that dispatches between them."""
    parts = ["import numba", "import numba_vulkan as nv", ""]
    for k, index in enumerate(indices):
        parts.append("@numba.njit")
        parts.append(function_source(seed, index, f"f{k}"))
    body = ["def kernel(inp, tab, out):",
            "    i = nv.global_id(0)",
            "    if i < inp.shape[0]:",
            "        a = inp[i, 0]",
            "        b = inp[i, 1]",
            "        c = inp[i, 2]",
            "        s = inp[i, 3]"]
    for k in range(len(indices)):
        keyword = "if" if k == 0 else "elif"
        body.append(f"        {keyword} s == {k}:")
        body.append(f"            out[i] = f{k}(a, b, c, tab)")
    parts.append("\n".join(body) + "\n")
    return "\n".join(parts)


def make_inputs(rng, count):
    """Inputs for ``count`` functions: mostly small values (so equality
    tests hit), some wide ones."""
    inp = rng.integers(-10, 11, size=(count * INPUTS, 4), dtype=np.int64)
    wide = rng.random(len(inp)) < 0.2
    inp[wide, :3] = rng.integers(-600, 600, size=(int(wide.sum()), 3))
    inp[:, 3] = np.arange(len(inp)) % count
    return inp


class Outcome:
    """What happened to each program of a run."""

    def __init__(self):
        self.cases = 0
        self.failures = []

    def fail(self, seed, index, reason):
        self.failures.append((seed, index, reason))

    def __repr__(self):
        return f"{self.cases} cases, {len(self.failures)} failed"


def run_batch(seed, indices, outcome, rng):
    """Compile and run one batch; record each program's outcome."""
    filename = f"<fuzz seed={seed} indices={indices[0]}..{indices[-1]}>"
    namespace = {}
    _exec_source(batch_source(seed, indices), filename, namespace)
    kernel = nv.jit(namespace["kernel"])
    inp = make_inputs(rng, len(indices))
    tab = rng.integers(-512, 512, TABLE_SIZE, dtype=np.int64)
    out = np.zeros(len(inp), np.int64)
    try:
        kernel.forall(len(inp))(inp, tab, out)
    except (nv.VulkanError, numba.core.errors.NumbaError) as exc:
        if len(indices) == 1:
            outcome.cases += 1
            outcome.fail(seed, indices[0], f"{type(exc).__name__}: {str(exc)[:2000]}")
            return
        half = len(indices) // 2
        run_batch(seed, indices[:half], outcome, rng)
        run_batch(seed, indices[half:], outcome, rng)
        return
    for k, index in enumerate(indices):
        fn = namespace[f"f{k}"]
        rows = inp[:, 3] == k
        args = [tuple(int(v) for v in row[:3]) for row in inp[rows]]
        expected = np.array([fn(*a, tab) for a in args], np.int64)
        got = out[rows]
        outcome.cases += 1
        # The interpreter must agree with numba.njit, or the program left the
        # range where their integer semantics coincide (a generator bug).
        python = np.array([fn.py_func(*a, [int(t) for t in tab]) for a in args], np.int64)
        if not np.array_equal(python, expected):
            outcome.fail(seed, index, "numba.njit and Python disagree: generator bug")
        elif not np.array_equal(got, expected):
            bad = np.flatnonzero(got != expected)[0]
            outcome.fail(seed, index, f"f{args[bad]}: Vulkan {got[bad]}, "
                                      f"numba.njit {expected[bad]}")


def run(seed, cases, batch=10, start=0):
    """Run ``cases`` programs of ``seed`` in batches; return the :class:`Outcome`."""
    outcome = Outcome()
    rng = np.random.default_rng(seed)
    for first in range(start, start + cases, batch):
        run_batch(seed, list(range(first, min(first + batch, start + cases))), outcome, rng)
    return outcome


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--batch", type=int, default=10)
    args = parser.parse_args(argv)
    # Every program compiles afresh unless the caller asks for the cache.
    os.environ.setdefault("NUMBA_VULKAN_CACHE", "0")
    began = time.perf_counter()
    outcome = run(args.seed, args.cases, args.batch, args.start)
    for seed, index, reason in outcome.failures:
        print(f"FAIL seed={seed} index={index}: {reason}\n"
              f"  source: python -m tests.fuzz.fuzzgen {seed} {index}")
    print(f"seed {args.seed}: {outcome} in {time.perf_counter() - began:.0f} s")
    return 1 if outcome.failures else 0


if __name__ == "__main__":
    sys.exit(main())
