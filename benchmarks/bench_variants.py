"""Benchmark kernels compiled by variants of the code generator, side by side.

    python benchmarks/bench_variants.py --only matmul,spmv --variants unroll_runtime,or_to_add

Each variant (or several joined by ``+``) is a change to one codegen stage, applied while its kernels
compile; every kernel of ``--only`` runs once per variant (and on numba-cuda
where it is installed) in one process, so the ratios compare like with
like on a noisy machine. It is how a change is measured on the GPU before it
is made for good: a variant that wins becomes the code generator's way.
"""

import argparse
import contextlib
import json
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from benchmarks import backends as bk  # noqa: E402
from benchmarks import measure  # noqa: E402
from benchmarks import run as runner  # noqa: E402
from benchmarks import mathops, suite, users  # noqa: E402


@contextlib.contextmanager
def _patched(module, name, wrap):
    original = getattr(module, name)
    setattr(module, name, wrap(original))
    try:
        yield
    finally:
        setattr(module, name, original)


@contextlib.contextmanager
def unroll_runtime():
    """LLVM unrolls loops of unknown trip counts on every target (GPU targets do anyway)."""
    from numba_vulkan.codegen import optimize

    def wrap(original):
        return lambda *args, **kwargs: original(*args, **{**kwargs, "unroll_runtime": True})
    with _patched(optimize, "optimise", wrap):
        yield


@contextlib.contextmanager
def no_unroll_runtime():
    """LLVM unrolls no loop whose trip count is known only at run time."""
    from numba_vulkan.codegen import optimize

    def wrap(original):
        return lambda *args, **kwargs: original(*args, **{**kwargs, "unroll_runtime": False})
    with _patched(optimize, "optimise", wrap):
        yield


@contextlib.contextmanager
def unroll4():
    """Loops of run-time trip counts unrolled 4 times (NVPTX's choice for
    numba-cuda's kernels), not as many as LLVM's generic target picks."""
    import llvmlite.binding as llvm
    from numba_vulkan.codegen import optimize

    def wrap(original):
        def optimise(*args, **kwargs):
            llvm.set_option("", "-unroll-count=4")
            try:
                return original(*args, **kwargs)
            finally:
                llvm.set_option("", "-unroll-count=0")
        return optimise
    with _patched(optimize, "optimise", wrap):
        yield


@contextlib.contextmanager
def or_to_add():
    """``or disjoint`` (LLVM's form of an add of disjoint bits) emitted as an add."""
    from numba_vulkan.codegen import legalize

    def wrap(original):
        return lambda text, **kwargs: original(text, **kwargs).replace(" = or disjoint ",
                                                                       " = add ")
    with _patched(legalize, "legalize", wrap):
        yield


@contextlib.contextmanager
def inexact_float32():
    """float32 division and square roots left to the driver (not computed in float64)."""
    from numba_vulkan.codegen import legalize
    with _patched(legalize, "exact_float32", lambda original: (lambda module: None)):
        yield


@contextlib.contextmanager
def contract():
    """Float multiplies and adds the driver may fuse (no ``NoContraction``
    anywhere, libclc's operations too); ``fastmath={"contract"}`` fuses only
    the kernel's own, in the IR."""
    from numba_vulkan.codegen import exact

    def wrap(original):
        def decorate(binary, operations=True, special_values=True):
            return original(binary, False, special_values)
        return decorate
    with _patched(exact, "decorate", wrap):
        yield


@contextlib.contextmanager
def unfused():
    """The target's Fma treated as rounding twice: ``llvm.fma`` emulated."""
    from numba_vulkan.codegen import legalize
    with _patched(legalize, "legalize", lambda original: (lambda text, **kw: original(text))):
        yield


@contextlib.contextmanager
def writable():
    """No storage buffer decorated NonWritable (codegen.readonly off)."""
    from numba_vulkan.codegen import readonly
    with _patched(readonly, "decorate", lambda original: (lambda binary: binary)):
        yield


@contextlib.contextmanager
def full_barriers():
    """Every workgroup barrier orders storage-buffer memory too (``UniformMemory``),
    as numba.cuda's syncthreads does, not only those that can need it."""
    from numba_vulkan.codegen import barriers
    with _patched(barriers, "workgroup_only", lambda original: (lambda module: None)):
        yield


@contextlib.contextmanager
def no_carried():
    """No operation of a loop taken from its previous trip through a phi
    (``codegen/carried.py`` off): a rotated loop's test computed again at
    the top of the next trip."""
    from numba_vulkan.codegen import carried
    with _patched(carried, "carry", lambda original: (lambda module: None)):
        yield


@contextlib.contextmanager
def no_divconst():
    """Integer divisions and remainders by constants left to the driver
    (``codegen/divconst.py`` off)."""
    from numba_vulkan.codegen import divconst
    with _patched(divconst, "rewrite", lambda original: (lambda module, widths=None: False)):
        yield


@contextlib.contextmanager
def no_divconst32():
    """Only 64-bit integer divisions by constants made multiplies; 8- to
    32-bit ones left to the driver."""
    from numba_vulkan.codegen import divconst

    def wrap(original):
        return lambda module, widths=None: original(module, widths=frozenset((64,)))
    with _patched(divconst, "rewrite", wrap):
        yield


@contextlib.contextmanager
def libclc_exact():
    """libclc's own float32 divisions and square roots computed in float64
    too, as the kernel's are (what ``legalize.exact_float32`` did before it
    left them to the driver)."""
    from numba_vulkan.codegen import legalize

    def wrap(original):
        return lambda module, libclc=False: original(module, libclc=True)
    with _patched(legalize, "exact_float32", wrap):
        yield


@contextlib.contextmanager
def conversions():
    """The math library rounds to integers and converts between integers and
    floats with conversion instructions (rint, fptosi, sitofp), not by the
    shifter constant (``codegen/mathlib/common.py``)."""
    from numba_vulkan.codegen.mathlib import library

    def round_multiple(m, x, c, offset=0.0):
        kf = m.rint(m.fma(x, c, offset) if offset else x * c)
        return kf, m.to_int(kf)

    def integer_to_float(m, k, ty):
        return m.to_float(k, ty)

    # Every library module that imported the two by name, and common itself.
    import sys
    modules = [module for name, module in sys.modules.items()
               if name.startswith("numba_vulkan.codegen.mathlib.")]
    saved = [(module, name, getattr(module, name)) for module in modules
             for name in ("round_multiple", "integer_to_float") if hasattr(module, name)]
    for module, name, _ in saved:
        setattr(module, name, {"round_multiple": round_multiple,
                               "integer_to_float": integer_to_float}[name])
    library.module.cache_clear()
    try:
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)
        library.module.cache_clear()


def _exact32(shape):
    """A variant whose float32 root and quotient (``mathlib/exact32.py``)
    take their slow path another way."""
    @contextlib.contextmanager
    def variant():
        from numba_vulkan.codegen.mathlib import exact32, library
        originals = {name: library._DEFINITIONS[name] for name in (exact32.SQRT, exact32.DIVIDE)}

        def rewritten(writer):
            def write(m, *args):
                branch = m.branch
                if shape == "unguarded":
                    m.branch = lambda condition, then, otherwise: then()
                elif shape == "vote":
                    # A branch on whether every invocation of the subgroup
                    # is in range (uniform: no reconvergence to prepare),
                    # each invocation choosing its own result otherwise.
                    from llvmlite import ir
                    from numba_vulkan.llvmir import groupops
                    from numba_vulkan.spirv import opcodes as spv

                    def vote(condition, then, otherwise):
                        every = type(condition)(m, groupops.call(
                            m.b, spv.OpGroupNonUniformAll, ir.IntType(1), [condition.v]))
                        return branch(every, then,
                                      lambda: m.select(condition, then(), otherwise()))
                    m.branch = vote
                else:
                    # The ordinary path computed first, outside any branch;
                    # only the slow one is conditional.
                    def after(condition, then, otherwise):
                        value = then()
                        return branch(condition, lambda: value, otherwise)
                    m.branch = after
                try:
                    return writer(m, *args)
                finally:
                    m.branch = branch
            return write

        for name, (writer, ty, arity) in originals.items():
            library._DEFINITIONS[name] = (rewritten(writer), ty, arity)
        library.module.cache_clear()
        try:
            yield
        finally:
            library._DEFINITIONS.update(originals)
            library.module.cache_clear()
    variant.__doc__ = {"unguarded": "float32 roots and quotients without their range check and "
                                    "slow path (wrong for extreme operands: timing only).",
                       "after": "float32 roots and quotients computed before the range check, "
                                "which guards only the slow path.",
                       "vote": "float32 roots and quotients branch on whether every invocation "
                               "of the subgroup is in range (subgroup vote)."}[shape]
    return variant


exact32_unguarded = _exact32("unguarded")
exact32_after = _exact32("after")
exact32_vote = _exact32("vote")


@contextlib.contextmanager
def _library_writer(name, writer, **globals_):
    """The math library's function ``name`` written by ``writer``, and the
    module globals of its writer's module ``globals_`` replaced, while
    kernels compile."""
    import sys
    from numba_vulkan.codegen.mathlib import library
    original = library._DEFINITIONS[name]
    module = sys.modules[original[0].__module__]
    saved = {key: getattr(module, key) for key in globals_}
    library._DEFINITIONS[name] = (writer or original[0],) + original[1:]
    for key, value in globals_.items():
        setattr(module, key, value)
    library.module.cache_clear()
    try:
        yield
    finally:
        library._DEFINITIONS[name] = original
        for key, value in saved.items():
            setattr(module, key, value)
        library.module.cache_clear()


def driver_sqrt64():
    """float64 ``math.sqrt`` as the driver's ``Sqrt``, not the library's
    (``codegen/mathlib/exact64.py``; what was shipped before it)."""
    from numba_vulkan.codegen.mathlib import exact64
    return _library_writer(exact64.SQRT, lambda m, x: m.sqrt(x))


def driver_div64():
    """float64 ``/`` as the driver's ``OpFDiv``, not the library's
    (``codegen/mathlib/exact64.py``; what was shipped before it)."""
    from numba_vulkan.codegen.mathlib import exact64
    return _library_writer(exact64.DIVIDE, lambda m, a, b: m.divide(a, b))


def _sqrt64_seed(rsqrt_seed, **globals_):
    from numba_vulkan.codegen.mathlib import exact64
    return _library_writer(exact64.SQRT, None, rsqrt_seed=rsqrt_seed, **globals_)


def sqrt64_convert():
    """The library's float64 square root seeded by two conversions (float64
    to float32, ``InverseSqrt``, back to float64) instead of one and integer
    operations on the float32's bits."""
    from numba_vulkan.codegen.mathlib.dsl import F32, F64

    def rsqrt_seed(m, x):
        return m.convert(m.approximate_rsqrt(m.convert(x, F32)), F64)
    return _sqrt64_seed(rsqrt_seed)


def sqrt64_integer():
    """The library's float64 square root seeded by integer operations only:
    a float32 in ``[0.5, 2)`` made of the high word's top 20 significand
    bits and its exponent's parity, its ``InverseSqrt``, and the float64
    rebuilt from that with the exponent ``x`` needs (the library's seed
    before the conversion's, which an H200 ran slower); ``x`` in
    ``2**-900 .. 2**1020`` takes the fast path."""
    from numba_vulkan.codegen.mathlib import exact64
    from numba_vulkan.codegen.mathlib.dsl import F32

    def rsqrt_seed(m, x):
        hi = exact64._high_word(m, x)
        f = m.from_bits(((hi << 3) & 0x00FFFFFF) | 0x3F000000, F32)
        rb = m.bits(m.approximate_rsqrt(f))
        # 1/sqrt(f) times 2**-j, j = (E >> 1) - 511 for x's biased exponent E.
        top = (rb >> 3) + (((1023 - 127) + 511) << 20) - ((hi >> 1) & 0x3FF00000)
        return exact64._from_high_word(m, top)
    return _sqrt64_seed(rsqrt_seed, _LOW=(1023 - 900) << 20, _HIGH=(1023 + 1020) << 20)


def _tables(placement):
    @contextlib.contextmanager
    def variant():
        from numba_vulkan.codegen import tables
        with _patched(tables, "place", lambda original: (
                lambda binary, placement_=None: original(binary, placement))):
            yield
    variant.__doc__ = (f"libclc's constant tables as Function variables of the entry point "
                       f"({placement!r} in codegen/tables.py), not Private ones.")
    return variant


tables_function = _tables("function")
tables_function_store = _tables("function_store")


VARIANTS = {"base": contextlib.nullcontext, "writable": writable,
            "unfused": unfused, "unroll_runtime": unroll_runtime,
            "no_unroll_runtime": no_unroll_runtime, "unroll4": unroll4,
            "or_to_add": or_to_add, "inexact_float32": inexact_float32, "contract": contract,
            "full_barriers": full_barriers, "no_carried": no_carried,
            "no_divconst": no_divconst, "no_divconst32": no_divconst32,
            "libclc_exact": libclc_exact, "tables_function": tables_function,
            "conversions": conversions, "exact32_unguarded": exact32_unguarded,
            "exact32_after": exact32_after, "exact32_vote": exact32_vote,
            "driver_sqrt64": driver_sqrt64, "sqrt64_convert": sqrt64_convert,
            "sqrt64_integer": sqrt64_integer, "driver_div64": driver_div64,
            "tables_function_store": tables_function_store}


@contextlib.contextmanager
def active(variant):
    """Every part of ``variant`` (names of :data:`VARIANTS` joined by ``+``)
    in force inside the block."""
    with contextlib.ExitStack() as stack:
        for part in variant.split("+"):
            stack.enter_context(VARIANTS[part]())
        yield


def unknown_variants(variants):
    """The variants of a list that name a part :data:`VARIANTS` lacks."""
    return [v for v in variants if any(p not in VARIANTS for p in v.split("+"))]


class VariantBackend(bk.VulkanBackend):
    """numba_vulkan with a variant active while its kernels compile."""

    def __init__(self, variant):
        super().__init__()
        self.variant = variant
        self.name = f"numba_vulkan[{variant}]"

    def launch(self, kernel, groups, threads, args):
        with active(self.variant):
            kernel[groups, threads](*args)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", required=True,
                        help="comma-separated benchmark names, or families (suite, users, math)")
    parser.add_argument("--variants", default=",".join(v for v in VARIANTS if v != "base"),
                        help=f"comma-separated subset of {','.join(VARIANTS)}")
    parser.add_argument("--sizes", choices=suite.SIZES, default=None)
    parser.add_argument("--out", help="directory for variants.json")
    args = parser.parse_args(argv)
    os.environ.setdefault("NUMBA_VULKAN_CACHE", "0")
    variants = ["base"] + [v for v in args.variants.split(",") if v and v != "base"]
    unknown = unknown_variants(variants)
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {list(VARIANTS)}")
    benches = {**suite.by_name(), **{b.name: b for b in users.BENCHMARKS + mathops.BENCHMARKS}}
    # Families expand in place; a kernel named twice runs once, where first named.
    only = list(dict.fromkeys(
        n for name in args.only.split(",")
        for n in ([b.name for b in runner.FAMILIES[name]] if name in runner.FAMILIES else [name])))
    missing = [name for name in only if name not in benches]
    if missing:
        parser.error(f"unknown benchmarks {missing}; known: {', '.join(benches)}")
    backends = {v: VariantBackend(v) for v in variants}
    sizes = args.sizes or ("quick" if backends["base"].is_cpu else "full")
    cuda_ok, _ = bk.cuda_status()
    if cuda_ok:
        backends["numba_cuda"] = bk.KERNEL_BACKENDS["numba_cuda"]()
    plan = measure.PLANS[sizes]
    results = {"environment": backends["base"].environment(), "sizes": sizes, "kernels": {}}
    width = max(18, *(len(v) + 1 for v in backends))
    print(f"{'kernel':24}" + "".join(f"{v:>{width}}" for v in backends))
    for name in only:
        bench = benches[name]
        size = bench.sizes[sizes]
        host = bench.inputs(size, np.random.default_rng(1234))
        entry = {"work": None}
        row = {}
        for label, backend in backends.items():
            result = runner.run_on(backend, bench, size, host, plan, entry)
            row[label] = result
        results["kernels"][name] = row
        base = row["base"].get("kernel", {}).get("median")
        cells = []
        for label, result in row.items():
            timing = result.get("kernel") or result.get("wall")
            if result["status"] != "ok" or not timing:
                cells.append(f"{result['status']:>{width}}")
                continue
            ratio = f" ({timing['median'] / base:.2f})" if base else ""
            cells.append(f"{timing['median'] * 1e3:{width - 8}.3f}{ratio:>8}")
        print(f"{name:24}" + "".join(cells), flush=True)
        if args.out:
            # After each kernel: a run cut short keeps what it measured.
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, "variants.json"), "w") as f:
                json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
