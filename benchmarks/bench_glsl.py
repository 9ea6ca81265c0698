"""The tiled matrix product as hand-written GLSL, beside our compiled kernel and numba-cuda's.

    python benchmarks/bench_glsl.py [--sizes full|quick|tiny] [--repeat 10] [--variants scalar,vec4]
                                    [--ours base,or_to_add] [--spirv-opt PATH] [--no-cuda]
                                    [--json FILE] [--dump DIR] [--rebuild]

``benchmarks/glsl/matmul.comp`` is suite.py's MATMUL written in GLSL
against numba_vulkan's binding interface; each variant of :data:`VARIANTS`
is one set of its macros, compiled by glslangValidator (Vulkan 1.2, SPIR-V
1.5) into ``benchmarks/glsl/matmul_<variant>.spv``. The .spv files are
committed, so that a machine without glslang (the GPU machine) runs them;
``--rebuild`` compiles them again first (glslangValidator must be on the
PATH).

Every module is launched through the runtime's own
:class:`~numba_vulkan.runtime.pipeline.Pipeline` on suite.py's Matmul
inputs, checked against NumPy (the result array zeroed before each check),
then all of them, with our kernel as the normal launch path compiles it
(``ours``; ``ours[VARIANT]`` compiled under a codegen variant of
bench_variants.py, ``ours_fastmath`` with ``fastmath=True``), our module
after ``spirv-opt -O`` (``ours_opt``, where spirv-opt is found: ``--spirv-opt``,
``.device/bin/spirv-opt``, the PATH) and numba-cuda's kernel where CUDA is
available, are timed round robin: ``--repeat`` rounds of three launches
each, device time (Vulkan timestamps, CUDA events). The table shows each
one's median and the median per-round ratios to ``ours`` and numba-cuda.
The driver's statistics of each Vulkan module (registers per invocation,
where it reports VK_KHR_pipeline_executable_properties) and numba-cuda's
registers per thread go into the table and the JSON. ``--dump`` writes the
disassembly of every Vulkan module run, the driver's internal
representations where it gives them, and numba-cuda's PTX and SASS.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from benchmarks import backends as bk  # noqa: E402
from benchmarks import bench_plain  # noqa: E402
from benchmarks import bench_variants  # noqa: E402
from benchmarks import measure  # noqa: E402
from benchmarks import suite  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GLSL_DIR = os.path.join(ROOT, "benchmarks", "glsl")
SOURCE = os.path.join(GLSL_DIR, "matmul.comp")

#: Each GLSL variant: its macros (matmul.comp says what each does) and what
#: its time against another's tells.
VARIANTS = {
    "scalar": (("PRECISE",),
               "GLSL as our kernel is written: 32-bit shared loads, no contraction; "
               "against ours: what glslang's SPIR-V gains over ours as a whole"),
    "scalar_fma": ((), "scalar, contraction allowed: what fusing gains in GLSL"),
    "scalar_i64": (("PRECISE", "I64"),
                   "scalar with our 64-bit tile counter and k < n tests: their cost"),
    "scalar_barrier": (("PRECISE", "BUFFER_BARRIER"),
                       "scalar with our barrier semantics (buffer memory too): their cost"),
    "flat": (("PRECISE", "FLAT"),
             "scalar with flat tiles indexed as ours ((ty << 4) | j): whether the driver "
             "still sees a row of ta as contiguous"),
    "like_ours": (("PRECISE", "I64", "BUFFER_BARRIER", "FLAT"),
                  "scalar with all three of our traits: near ours, else something else "
                  "differs"),
    "base": (("PRECISE", "BASE"),
             "scalar with element offsets stepped per tile: the tile loop's address "
             "arithmetic"),
    "readonly": (("PRECISE", "READONLY"),
                 "scalar with a and b readonly restrict: what read-only loads gain"),
    "vec4": (("PRECISE", "VEC4"),
             "ta read as four 128-bit shared loads per tile: the LDS.128 hypothesis"),
    "vec4_fma": (("VEC4",), "vec4 with contraction: against numba-cuda, NVVM's code"),
    "best": (("VEC4", "BASE", "READONLY"),
             "every change at once, contraction allowed: the best this GLSL does"),
}

#: What the other rows tell.
OTHERS = {
    "ours": "our kernel through the dispatcher, as users launch it",
    "ours_raw": "our module through this script's launch path: the control for the rest",
    "ours_opt": "our module after spirv-opt -O: what a SPIR-V optimiser finds",
    "ours_fastmath": "our kernel with fastmath=True (contraction allowed)",
    "ours[or_to_add]": "our kernel with `or disjoint` as add: ta's index ty*16|j as ty*16+j",
    "numba_cuda": "numba-cuda's kernel of the same source (NVVM, contracted)",
}

#: The arguments of matmul(a, b, c), as abi.layout takes them.
ARGUMENTS = [(name, "array", "float32", 2, "C") for name in ("a", "b", "c")]


def spv_path(variant, directory=GLSL_DIR):
    return os.path.join(directory, f"matmul_{variant}.spv")


#: The glslang that compiled the committed .spv files (its ``--version``'s first line).
VERSION_FILE = os.path.join(GLSL_DIR, "glslang_version.txt")


def glslang_version(glslang="glslangValidator"):
    proc = subprocess.run([glslang, "--version"], capture_output=True, text=True, check=True)
    return proc.stdout.splitlines()[0].strip()


def build(glslang="glslangValidator", directory=GLSL_DIR):
    """Compile every variant's .spv from matmul.comp into ``directory``, and
    record the compiler's version there."""
    with open(os.path.join(directory, os.path.basename(VERSION_FILE)), "w") as f:
        f.write(glslang_version(glslang) + "\n")
    for variant, (macros, _) in VARIANTS.items():
        command = [glslang, "-V", "--target-env", "vulkan1.2",
                   *(f"-D{m}" for m in macros), "-o", spv_path(variant, directory), SOURCE]
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"{' '.join(command)} failed:\n{proc.stdout}{proc.stderr}")


def find_spirv_opt(given=None):
    """The spirv-opt to run, or None: ``given``, the one carried to the GPU
    machine in ``.device/bin``, or the PATH's."""
    for candidate in (given, os.path.join(ROOT, ".device", "bin", "spirv-opt")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("spirv-opt")


def spirv_opt(tool, binary):
    """``binary`` after ``spirv-opt -O``."""
    with tempfile.TemporaryDirectory() as tmp:
        source, result = os.path.join(tmp, "in.spv"), os.path.join(tmp, "out.spv")
        with open(source, "wb") as f:
            f.write(binary)
        proc = subprocess.run([tool, "-O", source, "-o", result], capture_output=True,
                              text=True)
        if proc.returncode:
            raise RuntimeError(f"spirv-opt -O failed: {proc.stderr.strip()}")
        with open(result, "rb") as f:
            return f.read()


def disassemble(binary):
    """The module's text, or None where spirv-dis is missing."""
    from numba_vulkan import config
    try:
        proc = subprocess.run([config.spirv_dis(), "--raw-id", "-"], input=binary,
                              capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return proc.stdout.decode()


class Module:
    """A SPIR-V module launched on the benchmark's device arrays through
    the runtime's Pipeline, bypassing the dispatcher.

    ``params`` and ``push_size`` are the module's binding interface (from
    :func:`numba_vulkan.abi.layout`, or a compiled kernel's); a status
    buffer it declares (lavapipe's loop limit) is bound and read after the
    check.
    """

    def __init__(self, device, spirv, params, push_size, name):
        import numba_vulkan as nv
        from numba_vulkan import abi
        from numba_vulkan.runtime.pipeline import Pipeline
        if any(p.kind == "print" for p in params):
            raise ValueError(f"{name}: modules with a print buffer are not supported here")
        self.pipeline = Pipeline(device, spirv, params, push_size, name=name)
        self.status = [nv.to_device(np.zeros(abi.STATUS_WORDS, np.uint32), device=device)
                       for p in params if p.kind == "status"]

    def runner(self, groups, arrays):
        flat = [*groups]
        for array in arrays:
            flat += array.launch_fields
        push = self.pipeline.pack(flat)
        buffers = [a.buffer for a in arrays] + [s.buffer for s in self.status]
        return lambda: self.pipeline.launch(groups, buffers, push)

    def status_words(self):
        return [int(w) for s in self.status for w in s.copy_to_host()]


def _write(directory, name, text):
    # Plain names only: the device tool leaves out files with others.
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "w" if isinstance(text, str) else "wb") as f:
        f.write(text)


def driver_statistics(device, modules, dump=None):
    """What the driver compiled each module into (VK_KHR_pipeline_executable_properties),
    by label: ``registers`` per invocation where it says, every statistic,
    and with ``dump`` its internal representations written there; or a
    ``note`` where the device does not tell."""
    from numba_vulkan.errors import NotReportedError, VulkanError
    from numba_vulkan.runtime import executables
    out = {}
    for label, (binary, params, push_size) in modules.items():
        try:
            found = executables.inspect(device, binary, params, push_size, name=label,
                                        representations=dump is not None)
        except (NotReportedError, VulkanError) as exc:
            out[label] = {"note": f"{type(exc).__name__}: {exc}"}
            continue
        entry = out[label] = {"executables": [e.to_json() for e in found]}
        try:
            entry["registers"] = executables.quantity(found, "registers", kernel=label)
        except NotReportedError as exc:
            entry["registers"] = None
            entry["note"] = str(exc)
        for k, executable in enumerate(entry["executables"]):
            for n, representation in enumerate(executable.pop("internal_representations")):
                _write(dump, f"matmul_{label}.driver{k}.{n:02d}-{representation['name']}.txt",
                       representation["text"])
    return out


def cuda_account(kernel, dump=None):
    """numba-cuda's registers per thread of its kernel and, with ``dump``,
    its PTX and SASS (which shows whether NVVM merged the shared loads)."""
    entry = {}
    try:
        answer = kernel.get_regs_per_thread()
        entry["registers"] = next(iter(answer.values())) if isinstance(answer, dict) else answer
    except Exception as exc:  # numba-cuda's own errors; informative only
        entry["note"] = f"registers: {type(exc).__name__}: {exc}"
    for method, suffix in (("inspect_asm", "ptx"), ("inspect_sass", "sass")):
        if dump is None:
            break
        try:
            answer = getattr(kernel, method)()
        except Exception as exc:  # inspect_sass needs nvdisasm, which may be missing
            entry[f"{suffix}_note"] = f"{type(exc).__name__}: {exc}"
            continue
        text = next(iter(answer.values())) if isinstance(answer, dict) else answer
        _write(dump, f"matmul_numba_cuda.{suffix}", text)
    return entry


def prepare_module(backend, module, bench, host, arrays, groups):
    """Check one module's result on the shared arrays; return its launcher."""
    arrays["c"].copy_to_device(host["c"])
    run = module.runner(tuple(groups) + (1,) * (3 - len(groups)),
                        [arrays[name] for name in bench.arguments()])
    run()
    backend.synchronize()
    bench.check(host, {"c": arrays["c"].copy_to_host()})
    status = module.status_words()
    if any(status):
        raise AssertionError(f"status buffer reports {status}")
    return run


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", choices=suite.SIZES, default=None,
                        help="default: full, or quick on a CPU Vulkan device")
    parser.add_argument("--repeat", type=int, default=10, help="rounds of three launches")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"GLSL variants, of {','.join(VARIANTS)}")
    parser.add_argument("--ours", default="base,or_to_add,fastmath",
                        help="our kernel's forms: base, fastmath and codegen variants of "
                             f"bench_variants.py ({','.join(bench_variants.VARIANTS)})")
    parser.add_argument("--spirv-opt", help="spirv-opt program (default: .device/bin, PATH)")
    parser.add_argument("--no-cuda", action="store_true", help="leave numba-cuda out")
    parser.add_argument("--rebuild", action="store_true",
                        help="compile the .spv files with glslangValidator first")
    parser.add_argument("--json", help="file to write the times to")
    parser.add_argument("--dump", help="directory for each Vulkan module's disassembly")
    args = parser.parse_args(argv)
    # Codegen variants change the module without changing the kernel cache's key.
    os.environ.setdefault("NUMBA_VULKAN_CACHE", "0")
    variants = [v for v in args.variants.split(",") if v]
    ours = [v for v in args.ours.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS] + [
        v for v in ours if v != "fastmath" and any(
            part not in bench_variants.VARIANTS for part in v.split("+"))]
    if unknown:
        parser.error(f"unknown variants {unknown}")
    if args.rebuild:
        build()

    from numba_vulkan import abi, signature
    vulkan = bk.VulkanBackend()
    bench = suite.by_name()["matmul"]
    sizes = args.sizes or ("quick" if vulkan.is_cpu else "full")
    size = bench.sizes[sizes]
    groups, threads = bench.grid(size)
    host = bench.inputs(size, np.random.default_rng(1234))
    arrays = {name: vulkan.to_device(value) for name, value in host.items()}

    entries, notes, modules = [], {}, {}

    def add(label, backend, make):
        try:
            entries.append((label, backend, make()))
        except Exception as exc:  # a variant that fails is reported, not fatal
            notes[label] = f"{type(exc).__name__}: {exc}"[:500]
            print(f"{label}: {notes[label]}", flush=True)

    types = tuple(signature.of_value(arrays[name]) for name in bench.arguments())
    compiled = None
    for form in ours:
        backend = (vulkan if form == "base" else bk.VulkanFastmathBackend()
                   if form == "fastmath" else bench_variants.VariantBackend(form))
        label = "ours" if form == "base" else f"ours_{form}" if form == "fastmath" \
            else f"ours[{form}]"
        kernel = backend.make(bench)
        add(label, backend, lambda b=backend, k=kernel: bench_plain.prepare(b, bench, size, k))
        if label in (e[0] for e in entries):
            # The module that launch compiled, which the dispatcher keeps.
            made = kernel.compile(types, threads=tuple(threads) + (1,))
            modules[label] = (made.spirv, made.params, made.push_size)
            if label == "ours":
                compiled = made
    tool = find_spirv_opt(args.spirv_opt)
    if compiled is not None:
        def make_raw(binary, name):
            module = Module(vulkan.device, binary, compiled.params, compiled.push_size, name)
            return prepare_module(vulkan, module, bench, host, arrays, groups)
        add("ours_raw", vulkan, lambda: make_raw(compiled.spirv, "matmul (ours, raw launch)"))
        if tool is None:
            notes["ours_opt"] = "no spirv-opt (give --spirv-opt, or copy it to .device/bin)"
            print(f"ours_opt: skipped, {notes['ours_opt']}", flush=True)
        else:
            def make_opt():
                binary = spirv_opt(tool, compiled.spirv)
                modules["ours_opt"] = (binary, compiled.params, compiled.push_size)
                return make_raw(binary, "matmul (ours, spirv-opt -O)")
            add("ours_opt", vulkan, make_opt)
    params, push_size = abi.layout(ARGUMENTS)
    for variant in variants:
        def make_glsl(variant=variant):
            with open(spv_path(variant), "rb") as f:
                binary = f.read()
            modules[f"glsl_{variant}"] = (binary, params, push_size)
            module = Module(vulkan.device, binary, params, push_size, f"matmul_{variant}.spv")
            return prepare_module(vulkan, module, bench, host, arrays, groups)
        add(f"glsl_{variant}", vulkan, make_glsl)
    cuda_kernel = None
    cuda_ok, cuda_note = bk.cuda_status()
    if cuda_ok and not args.no_cuda:
        cuda = bk.CudaBackend()
        if cuda.has_kernel_times:
            cuda_kernel = cuda.make(bench)
            add("numba_cuda", cuda, lambda: bench_plain.prepare(cuda, bench, size, cuda_kernel))
        else:
            notes["numba_cuda"] = "no CUDA events (numba's CUDA simulator)"
    elif not args.no_cuda:
        notes["numba_cuda"] = cuda_note

    stats = driver_statistics(vulkan.device, modules, args.dump)
    if cuda_kernel is not None and "numba_cuda" in (e[0] for e in entries):
        stats["numba_cuda"] = cuda_account(cuda_kernel, args.dump)
    if args.dump:
        for label, (binary, _, _) in modules.items():
            text = disassemble(binary)
            if text is not None:
                _write(args.dump, f"matmul_{label}.spvasm", text)

    times = measure.round_robin([(backend.kernel_times, run) for _, backend, run in entries],
                                args.repeat)
    labels = [label for label, _, _ in entries]
    samples = dict(zip(labels, times))

    def ratio(label, other):
        if other not in samples:
            return None
        return statistics.median(a / b for a, b in zip(samples[label], samples[other]))

    results = {}
    print(f"\nmatmul {bench.describe(size)}, {args.repeat} rounds, device time\n")
    print(f"{'module':26} {'ms':>9} {'/ours':>7} {'/cuda':>7} {'regs':>5}  what it tells")
    for label in labels:
        entry = results[label] = {"median_s": statistics.median(samples[label]),
                                  "rounds_s": samples[label],
                                  "vs_ours": ratio(label, "ours"),
                                  "vs_cuda": ratio(label, "numba_cuda"),
                                  "driver": stats.get(label)}
        if label.startswith("glsl_"):
            macros, meaning = VARIANTS[label[5:]]
            entry.update(macros=list(macros), meaning=meaning)
        else:
            entry["meaning"] = OTHERS.get(label, "")
        cells = "".join(f" {r:>6.3f}x" if r is not None else f" {'-':>7}"
                        for r in (entry["vs_ours"], entry["vs_cuda"]))
        registers = (stats.get(label) or {}).get("registers")
        cells += f" {registers if registers is not None else '-':>5}"
        print(f"{label:26} {entry['median_s'] * 1e3:>9.3f}{cells}  {entry.get('meaning', '')}",
              flush=True)
    unreported = sorted({v["note"] for v in stats.values() if v.get("note")})
    for note in unreported:
        print(f"driver statistics: {note}")
    for label, note in notes.items():
        print(f"{label}: not run: {note}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": vulkan.environment(), "sizes": sizes, "size": size,
                       "rounds": args.repeat, "spirv_opt": tool, "results": results,
                       "not_run": notes}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
