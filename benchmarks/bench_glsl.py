"""Benchmark kernels as hand-written GLSL, beside our compiled kernel and numba-cuda's.

    python benchmarks/bench_glsl.py [--kernel matmul|spmv|saxpy] [--sizes full|quick|tiny]
                                    [--repeat 10] [--variants scalar,vec4]
                                    [--ours base,or_to_add] [--spirv-opt PATH] [--no-cuda]
                                    [--no-ceiling] [--json FILE] [--dump DIR] [--rebuild]

``benchmarks/glsl/KERNEL.comp`` is suite.py's kernel of that name written
in GLSL against numba_vulkan's binding interface: the tiled matrix product
(``matmul``, the default), the CSR sparse matrix-vector product (``spmv``)
and saxpy. Each variant of a kernel's :class:`Kernel` ``variants`` is one
set of its macros, compiled by glslangValidator (Vulkan 1.2, SPIR-V 1.5)
into ``benchmarks/glsl/KERNEL_<variant>.spv``. The .spv files are
committed, so that a machine without glslang (the GPU machine) runs them;
``--rebuild`` compiles them again first (glslangValidator must be on the
PATH).

Every module is launched through the runtime's own
:class:`~numba_vulkan.runtime.pipeline.Pipeline` on suite.py's inputs of
the kernel, checked against NumPy (the arrays it writes reset before each
check), then all of them, with our kernel as the normal launch path
compiles it (``ours``; ``ours[VARIANT]`` compiled under a codegen variant
of bench_variants.py, ``ours_fastmath`` with ``fastmath=True``), our module
after ``spirv-opt -O`` (``ours_opt``, where spirv-opt is found: ``--spirv-opt``,
``.device/bin/spirv-opt``, the PATH) and numba-cuda's kernel where CUDA is
available, are timed round robin: ``--repeat`` rounds of three launches
each, device time (Vulkan timestamps, CUDA events). The table shows each
one's median and the median per-round ratios to ``ours`` and numba-cuda;
for the memory-bound kernels (spmv, saxpy) also the bandwidth of suite.py's
count of bytes and its share of a device-to-device copy's, measured in the
same process (torch or cupy where present; ``--no-ceiling`` leaves it out).
The driver's statistics of each Vulkan module (registers per invocation,
where it reports VK_KHR_pipeline_executable_properties) and numba-cuda's
registers per thread go into the table and the JSON. ``--dump`` writes the
disassembly of every Vulkan module run, the driver's internal
representations where it gives them, and numba-cuda's PTX and SASS.
"""

import argparse
import concurrent.futures
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


class Kernel:
    """One benchmark kernel written in GLSL: ``KERNEL.comp`` beside this
    script's ``glsl`` directory, the suite.py benchmark it stands for (of
    the same name), its variants (macros and what the variant's time
    tells, against another's), what the other rows tell, its arguments as
    abi.layout takes them, and the forms of our kernel run by default."""

    def __init__(self, name, variants, others, arguments, ours):
        self.name = name
        self.variants = variants
        self.others = others
        self.arguments = arguments
        self.ours = ours

    @property
    def source(self):
        return os.path.join(GLSL_DIR, f"{self.name}.comp")

    @staticmethod
    def per_invocation(macros):
        """Elements one invocation computes: the product of the values of
        the VEC and X macros (saxpy's), 1 without them."""
        count = 1
        for macro in macros:
            name, _, value = macro.partition("=")
            if name in ("VEC", "X"):
                count *= int(value)
        return count


#: The matrix product's variants: its macros (matmul.comp says what each
#: does) and what its time against another's tells.
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

#: The sparse product's variants (spmv.comp says what each macro does).
#: ``plain`` is the loop as GLSL is written, without contraction as ours;
#: the others each add or remove one trait of it.
SPMV_VARIANTS = {
    "plain": (("PRECISE",),
              "int indices, no wraparound, the loop left to the driver: against ours, "
              "what glslang's SPIR-V of the same loop gains as a whole"),
    "like_ours": (("PRECISE", "WRAP", "I64", "GUARD", "UNROLL_OURS"),
                  "plain with every trait of our module (wraparound selects, 64-bit row "
                  "test, lavapipe guard, our unrolling): near ours_raw, else something "
                  "else in our module costs"),
    "wrap": (("PRECISE", "WRAP"),
             "plain with Numba's negative-index wraparound selects: their cost"),
    "guard": (("PRECISE", "GUARD"),
              "plain with the never-taken groups.x == 0 path around the loop: its cost"),
    "unroll_ours": (("PRECISE", "UNROLL_OURS"),
                    "plain unrolled as our module is (remainder first, four steps in "
                    "order): whether our unrolling helps or hurts against the driver's"),
    "unroll4": (("PRECISE", "UNROLL4"),
                "plain unrolled by four, the four indices' and data's loads first: "
                "whether more loads in flight per invocation help"),
    "vec4": (("PRECISE", "VEC4"),
             "plain with indices and data read as 128-bit loads, four nonzeros each: "
             "whether the number of storage-buffer load instructions is the limit"),
    "no_unroll": (("PRECISE", "NO_UNROLL"),
                  "plain marked dont_unroll: what the driver's own unrolling gains"),
    "uint": (("PRECISE", "UINT"),
             "plain with all address arithmetic unsigned: whether signed 32-bit indices "
             "cost the driver sign extensions"),
    "readonly": (("PRECISE", "READONLY"),
                 "plain with the inputs readonly restrict: what read-only loads gain"),
    "fma": ((), "plain, contraction allowed (as NVVM fuses): what fusing gains"),
    "best": (("UINT", "UNROLL4", "READONLY"),
             "unsigned, unrolled with loads first, read-only, contracted: the best this "
             "GLSL does; against numba-cuda, whether Vulkan can reach it at all"),
}

#: saxpy's variants (saxpy.comp says what each macro does).
SAXPY_VARIANTS = {
    "scalar": ((), "one element per invocation, as ours: against ours, what glslang's "
                   "SPIR-V gains; against the copy, what one element per invocation reaches"),
    "like_ours": (("I64",), "scalar with our 64-bit i < len(x) test: its cost"),
    "readonly": (("READONLY",), "scalar with x readonly restrict, y restrict"),
    "vec2": (("VEC=2",), "two elements per invocation as one 64-bit load of x and of y"),
    "vec4": (("VEC=4",), "four elements per invocation as one 128-bit load of x and of y, "
                         "a quarter of the invocations: what wider loads gain"),
    "x4": (("X=4",), "four scalar elements per invocation, a group apart: whether more "
                     "loads in flight per invocation, not wider ones, gain the same"),
    "vec4_x4": (("VEC=4", "X=4"), "four 128-bit loads per invocation, a group apart: "
                                  "both at once"),
}

#: What the other rows tell, for every kernel.
OTHERS = {
    "ours": "our kernel through the dispatcher, as users launch it",
    "ours_raw": "our module through this script's launch path: the control for the rest",
    "ours_opt": "our module after spirv-opt -O: what a SPIR-V optimiser finds",
    "ours_fastmath": "our kernel with fastmath=True (contraction allowed)",
    "ours[or_to_add]": "our kernel with `or disjoint` as add: ta's index ty*16|j as ty*16+j",
    "numba_cuda": "numba-cuda's kernel of the same source (NVVM, contracted)",
}


def _arrays(dtype, ndim, *names):
    return [(name, "array", dtype, ndim, "C") for name in names]


#: The arguments of matmul(a, b, c), as abi.layout takes them.
ARGUMENTS = _arrays("float32", 2, "a", "b", "c")

KERNELS = {
    "matmul": Kernel("matmul", VARIANTS, OTHERS, ARGUMENTS, "base,or_to_add,fastmath"),
    "spmv": Kernel("spmv", SPMV_VARIANTS, OTHERS,
                   _arrays("int32", 1, "indptr", "indices") + _arrays(
                       "float32", 1, "data", "x", "y"), "base,fastmath"),
    "saxpy": Kernel("saxpy", SAXPY_VARIANTS, OTHERS,
                    [("a", "scalar", "float32", 0, "C")] + _arrays("float32", 1, "x", "y"),
                    "base"),
}


def spv_path(variant, directory=GLSL_DIR, kernel="matmul"):
    return os.path.join(directory, f"{kernel}_{variant}.spv")


#: The glslang that compiled the committed .spv files (its ``--version``'s first line).
VERSION_FILE = os.path.join(GLSL_DIR, "glslang_version.txt")


def glslang_version(glslang="glslangValidator"):
    proc = subprocess.run([glslang, "--version"], capture_output=True, text=True, check=True)
    return proc.stdout.splitlines()[0].strip()


def build(glslang="glslangValidator", directory=GLSL_DIR, kernels=None):
    """Compile every variant's .spv of ``kernels`` (names; None: all) from
    its .comp into ``directory``, and record the compiler's version there."""
    with open(os.path.join(directory, os.path.basename(VERSION_FILE)), "w") as f:
        f.write(glslang_version(glslang) + "\n")
    commands = [[glslang, "-V", "--target-env", "vulkan1.2", *(f"-D{m}" for m in macros),
                 "-o", spv_path(variant, directory, name), KERNELS[name].source]
                for name in kernels or KERNELS
                for variant, (macros, _) in KERNELS[name].variants.items()]
    # One glslang per core at a time: the test that the files are current builds all.
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        procs = list(pool.map(lambda c: subprocess.run(c, capture_output=True, text=True),
                              commands))
    for command, proc in zip(commands, procs):
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
    from numba_vulkan.base import config
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
    :func:`numba_vulkan.base.abi.layout`, or a compiled kernel's); a status
    buffer it declares (lavapipe's loop limit) is bound and read after the
    check.
    """

    def __init__(self, device, spirv, params, push_size, name):
        import numba_vulkan as nv
        from numba_vulkan.base import abi
        from numba_vulkan.runtime.pipeline import Pipeline
        if any(p.kind == "print" for p in params):
            raise ValueError(f"{name}: modules with a print buffer are not supported here")
        self.pipeline = Pipeline(device, spirv, params, push_size, name=name)
        self.status = [nv.to_device(np.zeros(abi.STATUS_WORDS, np.uint32), device=device)
                       for p in params if p.kind == "status"]

    def runner(self, groups, args):
        """A launcher of ``groups`` workgroups on ``args``, the kernel's
        arguments in order: device arrays and scalars."""
        flat = [*groups]
        for arg in args:
            if hasattr(arg, "launch_fields"):
                flat += arg.launch_fields
            else:
                flat.append(arg)
        push = self.pipeline.pack(flat)
        buffers = [a.buffer for a in args if hasattr(a, "launch_fields")] + [
            s.buffer for s in self.status]
        return lambda: self.pipeline.launch(groups, buffers, push)

    def status_words(self):
        return [int(w) for s in self.status for w in s.copy_to_host()]


def _write(directory, name, text):
    # Plain names only: the device tool leaves out files with others.
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "w" if isinstance(text, str) else "wb") as f:
        f.write(text)


def driver_statistics(device, modules, dump=None, kernel="matmul"):
    """What the driver compiled each module into (VK_KHR_pipeline_executable_properties),
    by label: ``registers`` per invocation where it says, every statistic,
    and with ``dump`` its internal representations written there (named
    after ``kernel``); or a ``note`` where the device does not tell."""
    from numba_vulkan.base.errors import NotReportedError, VulkanError
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
                _write(dump, f"{kernel}_{label}.driver{k}.{n:02d}-{representation['name']}.txt",
                       representation["text"])
    return out


def cuda_account(kernel, dump=None, name="matmul"):
    """numba-cuda's registers per thread of its kernel and, with ``dump``,
    its PTX and SASS (which shows, for the matrix product, whether NVVM
    merged the shared loads), named after ``name``."""
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
        _write(dump, f"{name}_numba_cuda.{suffix}", text)
    return entry


def prepare_module(backend, module, bench, host, arrays, groups):
    """Check one module's result on the shared arrays (``host``'s values on
    the device; scalars are taken from ``host``); return its launcher."""
    for name in bench.outputs():
        arrays[name].copy_to_device(host[name])
    run = module.runner(tuple(groups) + (1,) * (3 - len(groups)),
                        [arrays.get(name, host[name]) for name in bench.arguments()])
    run()
    backend.synchronize()
    bench.check(host, {name: arrays[name].copy_to_host() for name in bench.outputs()})
    status = module.status_words()
    if any(status):
        raise AssertionError(f"status buffer reports {status}")
    return run


def glsl_groups(bench, size, macros):
    """Workgroups of a GLSL variant's launch: the benchmark's, with the x
    count divided by the elements each invocation computes."""
    groups, threads = bench.grid(size)
    per = Kernel.per_invocation(macros)
    if per == 1:
        return groups
    return (-(-bench.extent(size)[0] // (threads[0] * per)),) + tuple(groups[1:])


def copy_ceiling(vulkan, sizes):
    """``(bytes per second, source)`` of a device-to-device copy of the
    ceiling's framework (torch, cupy; NumPy where the Vulkan device is the
    CPU), as benchmarks/run.py measures it, or ``(None, why not)``."""
    ceiling, notes = bk.make_ceiling(vulkan.is_cpu)
    if ceiling is None:
        return None, "; ".join(notes)
    try:
        return ceiling.copy_bandwidth(2 ** 30 if sizes == "full" else 2 ** 26), ceiling.source
    except Exception as exc:  # the framework's own errors; the ceiling is informative only
        return None, f"{ceiling.source} copy failed: {type(exc).__name__}: {exc}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", choices=KERNELS, default="matmul",
                        help="the benchmark kernel (default: matmul)")
    parser.add_argument("--sizes", choices=suite.SIZES, default=None,
                        help="default: full, or quick on a CPU Vulkan device")
    parser.add_argument("--repeat", type=int, default=10, help="rounds of three launches")
    parser.add_argument("--variants", default=None,
                        help="GLSL variants (default: all of the kernel's): "
                             + "; ".join(f"{k}: {','.join(v.variants)}"
                                         for k, v in KERNELS.items()))
    parser.add_argument("--ours", default=None,
                        help="our kernel's forms: base, fastmath and codegen variants of "
                             f"bench_variants.py ({','.join(bench_variants.VARIANTS)}); "
                             "default: " + "; ".join(f"{k}: {v.ours}"
                                                     for k, v in KERNELS.items()))
    parser.add_argument("--spirv-opt", help="spirv-opt program (default: .device/bin, PATH)")
    parser.add_argument("--no-cuda", action="store_true", help="leave numba-cuda out")
    parser.add_argument("--no-ceiling", action="store_true",
                        help="leave out the copy bandwidth of the memory-bound kernels")
    parser.add_argument("--rebuild", action="store_true",
                        help="compile the .spv files with glslangValidator first")
    parser.add_argument("--json", help="file to write the times to")
    parser.add_argument("--dump", help="directory for each Vulkan module's disassembly")
    args = parser.parse_args(argv)
    # Codegen variants change the module without changing the kernel cache's key.
    os.environ.setdefault("NUMBA_VULKAN_CACHE", "0")
    kernel_name = args.kernel
    glsl = KERNELS[kernel_name]
    variants = [v for v in (args.variants or ",".join(glsl.variants)).split(",") if v]
    ours = [v for v in (args.ours or glsl.ours).split(",") if v]
    unknown = [v for v in variants if v not in glsl.variants] + [
        v for v in ours if v != "fastmath" and any(
            part not in bench_variants.VARIANTS for part in v.split("+"))]
    if unknown:
        parser.error(f"unknown variants {unknown}")
    if args.rebuild:
        build()

    from numba_vulkan.base import abi
    from numba_vulkan.base import signature
    vulkan = bk.VulkanBackend()
    bench = suite.by_name()[kernel_name]
    sizes = args.sizes or ("quick" if vulkan.is_cpu else "full")
    size = bench.sizes[sizes]
    groups, threads = bench.grid(size)
    host = bench.inputs(size, np.random.default_rng(1234))
    arrays = {name: vulkan.to_device(value) for name, value in host.items()
              if isinstance(value, np.ndarray)}

    entries, notes, modules = [], {}, {}

    def add(label, backend, make):
        try:
            entries.append((label, backend, make()))
        except Exception as exc:  # a variant that fails is reported, not fatal
            notes[label] = f"{type(exc).__name__}: {exc}"[:500]
            print(f"{label}: {notes[label]}", flush=True)

    types = tuple(signature.of_value(arrays.get(name, host[name]))
                  for name in bench.arguments())
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
            made = kernel.compile(types, threads=tuple(threads) + (1,) * (3 - len(threads)))
            modules[label] = (made.spirv, made.params, made.push_size)
            if label == "ours":
                compiled = made
    tool = find_spirv_opt(args.spirv_opt)
    if compiled is not None:
        def make_raw(binary, name):
            module = Module(vulkan.device, binary, compiled.params, compiled.push_size, name)
            return prepare_module(vulkan, module, bench, host, arrays, groups)
        add("ours_raw", vulkan, lambda: make_raw(compiled.spirv,
                                                 f"{kernel_name} (ours, raw launch)"))
        if tool is None:
            notes["ours_opt"] = "no spirv-opt (give --spirv-opt, or copy it to .device/bin)"
            print(f"ours_opt: skipped, {notes['ours_opt']}", flush=True)
        else:
            def make_opt():
                binary = spirv_opt(tool, compiled.spirv)
                modules["ours_opt"] = (binary, compiled.params, compiled.push_size)
                return make_raw(binary, f"{kernel_name} (ours, spirv-opt -O)")
            add("ours_opt", vulkan, make_opt)
    params, push_size = abi.layout(glsl.arguments)
    for variant in variants:
        def make_glsl(variant=variant):
            with open(spv_path(variant, kernel=kernel_name), "rb") as f:
                binary = f.read()
            modules[f"glsl_{variant}"] = (binary, params, push_size)
            module = Module(vulkan.device, binary, params, push_size,
                            f"{kernel_name}_{variant}.spv")
            return prepare_module(vulkan, module, bench, host, arrays,
                                  glsl_groups(bench, size, glsl.variants[variant][0]))
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

    stats = driver_statistics(vulkan.device, modules, args.dump, kernel_name)
    if cuda_kernel is not None and "numba_cuda" in (e[0] for e in entries):
        stats["numba_cuda"] = cuda_account(cuda_kernel, args.dump, kernel_name)
    if args.dump:
        for label, (binary, _, _) in modules.items():
            text = disassemble(binary)
            if text is not None:
                _write(args.dump, f"{kernel_name}_{label}.spvasm", text)

    times = measure.round_robin([(backend.kernel_times, run) for _, backend, run in entries],
                                args.repeat)
    labels = [label for label, _, _ in entries]
    samples = dict(zip(labels, times))
    memory = bench.kind == "memory"
    nbytes = bench.work(size, host, None)["bytes"] if memory else None
    copy_bandwidth, copy_source = None, None
    if memory and not args.no_ceiling:
        copy_bandwidth, copy_source = copy_ceiling(vulkan, sizes)
        if copy_bandwidth is None:
            notes["copy"] = copy_source

    def ratio(label, other):
        if other not in samples:
            return None
        return statistics.median(a / b for a, b in zip(samples[label], samples[other]))

    results = {}
    print(f"\n{kernel_name} {bench.describe(size)}, {args.repeat} rounds, device time")
    if copy_bandwidth:
        print(f"device copy ({copy_source}): {copy_bandwidth / 1e9:.0f} GB/s")
    print(f"\n{'module':26} {'ms':>9} {'/ours':>7} {'/cuda':>7}"
          + (f" {'GB/s':>6} {'copy':>5}" if memory else "") + f" {'regs':>5}  what it tells")
    for label in labels:
        median = statistics.median(samples[label])
        entry = results[label] = {"median_s": median, "rounds_s": samples[label],
                                  "vs_ours": ratio(label, "ours"),
                                  "vs_cuda": ratio(label, "numba_cuda"),
                                  "driver": stats.get(label)}
        if label.startswith("glsl_"):
            macros, meaning = glsl.variants[label[5:]]
            entry.update(macros=list(macros), meaning=meaning,
                         per_invocation=Kernel.per_invocation(macros))
        else:
            entry["meaning"] = glsl.others.get(label, "")
        cells = "".join(f" {r:>6.3f}x" if r is not None else f" {'-':>7}"
                        for r in (entry["vs_ours"], entry["vs_cuda"]))
        if memory:
            entry["bandwidth"] = nbytes / median
            entry["of_copy"] = entry["bandwidth"] / copy_bandwidth if copy_bandwidth else None
            cells += f" {entry['bandwidth'] / 1e9:>6.4g}"
            cells += f" {entry['of_copy']:>5.0%}" if entry["of_copy"] else f" {'-':>5}"
        registers = (stats.get(label) or {}).get("registers")
        cells += f" {registers if registers is not None else '-':>5}"
        print(f"{label:26} {median * 1e3:>9.3f}{cells}  {entry.get('meaning', '')}",
              flush=True)
    unreported = sorted({v["note"] for v in stats.values() if v.get("note")})
    for note in unreported:
        print(f"driver statistics: {note}")
    for label, note in notes.items():
        print(f"{label}: not run: {note}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": vulkan.environment(), "kernel": kernel_name,
                       "sizes": sizes, "size": size, "rounds": args.repeat,
                       "bytes": nbytes, "copy_bandwidth": copy_bandwidth,
                       "copy_source": copy_source if copy_bandwidth else None,
                       "spirv_opt": tool, "results": results, "not_run": notes}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
