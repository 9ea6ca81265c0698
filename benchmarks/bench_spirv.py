"""What each benchmark kernel compiles to: counts of its SPIR-V, variant beside variant.

    python benchmarks/bench_spirv.py [--only stencil,stencil_plain] [--target gpu|device]
                                     [--dump DIR] [--json FILE] [--family suite,users,math]

For every kernel of ``suite.py`` (the tuned ones and their plainly written
twins; ``--family users,math`` or ``all`` for issue 23's kernels, as the exact
``numba_vulkan`` backend builds them), compiled for the argument types and group shape the benchmark
launches with, prints the number of instructions in its function, blocks
(``OpLabel``), phis, loops (``OpLoopMerge``), instructions inside loops,
and the instructions whose result is a 64-bit integer or a float64 (the
64-bit integer ones cost two or more 32-bit steps on a GPU). Plain rows
also show their instruction and 64-bit counts over the tuned twin's. Last,
each innermost loop's instructions and 64-bit ones: a loop whose counter
is bounded by a 64-bit value appears twice, its 32-bit copy (the one that
runs when the bound fits) and the original.
``--target gpu`` (the default) compiles for a Vulkan 1.3 GPU with int64,
float64 and float atomics and no loop limit, as on the H200, without
needing one; ``device`` for the current device (lavapipe adds its
loop-limit counting). ``--dump`` writes each module's disassembly there.
Nothing is launched.
"""

import argparse
import json
import os
import subprocess
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from benchmarks import backends as bk  # noqa: E402
from benchmarks import suite  # noqa: E402

COLUMNS = ("instructions", "blocks", "phis", "loops", "in_loops", "int64", "float64")


def disassemble(binary):
    from numba_vulkan.base import config
    tool = config.spirv_dis()
    proc = subprocess.run([tool, "--raw-id", "-"], input=binary, capture_output=True,
                          check=True)
    return proc.stdout.decode()


def counts(text):
    """The counts of :data:`COLUMNS` for a disassembled module with one
    function, and ``loops_detail``: ``[instructions, int64]`` of each
    innermost loop, in the module's order."""
    wide_int, wide_float = set(), set()
    body = []
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 4 and words[2] == "OpTypeInt" and words[3] == "64":
            wide_int.add(words[0])
        if len(words) >= 4 and words[2] == "OpTypeFloat" and words[3] == "64":
            wide_float.add(words[0])
        if body or (len(words) > 2 and words[2] == "OpFunction"):
            body.append(words)
    out = dict.fromkeys(COLUMNS, 0)
    # Blocks of a loop lie between its header and its merge block in the
    # module's order (the structured order LLVM's backend writes).
    stack, loops = [], []
    block = [0, 0]  # instructions and 64-bit ones since the block's label
    for words in body:
        if not words or words[0] == "OpFunctionEnd" or words[2:3] == ["OpFunction"]:
            continue
        if words[2:3] == ["OpLabel"]:
            out["blocks"] += 1
            while stack and stack[-1][0] == words[0]:
                stack.pop()
            block = [0, 0]
            continue
        out["instructions"] += 1
        op = words[2] if len(words) > 2 and words[1] == "=" else words[0]
        wide = words[1:2] == ["="] and len(words) > 3 and words[3] in wide_int
        block[0] += 1
        block[1] += wide
        if stack:
            out["in_loops"] += 1
            stack[-1][1][0] += 1
            stack[-1][1][1] += wide
        if op == "OpPhi":
            out["phis"] += 1
        if op == "OpLoopMerge":
            out["loops"] += 1
            # The header block belongs to the loop, from its label on.
            if stack:
                stack[-1][1][2] = False
            else:
                out["in_loops"] += block[0]
            entry = [block[0], block[1], True]
            loops.append(entry)
            stack.append((words[1], entry))
        if wide:
            out["int64"] += 1
        elif words[1:2] == ["="] and len(words) > 3 and words[3] in wide_float:
            out["float64"] += 1
    out["loops_detail"] = [entry[:2] for entry in loops if entry[2]]
    return out


def gpu_target():
    from numba_vulkan.base.target import TargetDescription
    return TargetDescription(vulkan=(1, 3), float32_atomic_add=True)


def _argument(value):
    """``value``, generator states made on the device (the type is what counts)."""
    if isinstance(value, bk.RngStates):
        from numba_vulkan.cuda import random
        return random.create_xoroshiro128p_states(value.n, seed=value.seed)
    return value


def compile_benchmark(bench, target):
    """The SPIR-V binary of ``bench``'s kernel for its launch's argument types
    (a users' or math kernel as the exact ``numba_vulkan`` backend builds it)."""
    import numba_vulkan as nv
    from numba_vulkan.base import signature
    host = bench.inputs(bench.sizes["tiny"], np.random.default_rng(1))
    types = tuple(signature.of_value(_argument(host[name])) for name in bench.arguments())
    if getattr(bench, "style", "nv") == "cuda":
        from numba_vulkan import cuda
        kernel = cuda.jit(bk.define(bench.source, bench.function,
                                    bk._cuda_scope(cuda, bench.real), bench.name),
                          fastmath=set())
    else:
        scope = {"nv": nv, **bk._numba_types(bench.real)}
        kernel = nv.jit(bk.define(bench.source, bench.function, scope, bench.name))
    threads = tuple(bench.threads) + (1,) * (3 - len(bench.threads))
    return kernel.compile(types, threads=threads, target=target).spirv


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated benchmark names")
    parser.add_argument("--target", choices=("gpu", "device"), default="gpu")
    parser.add_argument("--dump", help="directory for each module's disassembly")
    parser.add_argument("--json", help="file to write the counts to")
    parser.add_argument("--family", default="suite",
                        help="comma-separated families: suite, users, math (or all)")
    args = parser.parse_args(argv)
    os.environ.setdefault("NUMBA_VULKAN_CACHE", "0")
    target = gpu_target() if args.target == "gpu" else None
    only = set(args.only.split(",")) if args.only else None
    results = {}
    print(f"{'kernel':22}" + "".join(f" {c:>9}" for c in COLUMNS) + f" {'instr/tuned':>11}"
          f" {'int64/tuned':>11}  innermost loops: instructions/int64")
    from benchmarks import run as runner
    families = list(runner.FAMILIES) if args.family == "all" else args.family.split(",")
    for bench in [b for family in families for b in runner.FAMILIES[family]]:
        if only and bench.name not in only:
            continue
        try:
            text = disassemble(compile_benchmark(bench, target))
        except Exception as exc:
            print(f"{bench.name:22} failed: {type(exc).__name__}: {exc}"[:300])
            continue
        if args.dump:
            os.makedirs(args.dump, exist_ok=True)
            with open(os.path.join(args.dump, bench.name + ".spvasm"), "w") as f:
                f.write(text)
        row = results[bench.name] = counts(text)
        line = f"{bench.name:22}" + "".join(f" {row[c]:>9}" for c in COLUMNS)
        twin = results.get(bench.tuned)
        if twin:
            line += f" {row['instructions'] / twin['instructions']:>10.2f}x"
            line += (f" {row['int64'] / twin['int64']:>10.2f}x" if twin["int64"]
                     else f" {row['int64'] - twin['int64']:>+10d} ")
        else:
            line += " " * 24
        line += "  " + " ".join(f"{n}/{w}" for n, w in row["loops_detail"])
        print(line, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"target": args.target, "kernels": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
