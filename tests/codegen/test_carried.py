"""Operations a loop's previous trip computed already, carried through a phi
(codegen/carried.py): on hand-written IR, and kernels giving numba.njit's results."""

import llvmlite.binding as llvm
import numba
import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.base import config
from numba_vulkan.codegen import carried
from numba_vulkan.llvmir import ir
from tests.helpers import assert_valid_spirv, compiled_kernels, rewritten

# A rotated loop: the test's product %t is what the next trip's %sq computes.
LOOP = """define void @k(double %c, double %z0, i64 %n, i1 %b, ptr %p) {
entry:
  br label %loop

loop:
  %z = phi double [ %z0, %entry ], [ %z2, %latch ]
  %k = phi i64 [ 0, %entry ], [ %k2, %latch ]
  %sq = fmul double %z, %z
  %z2 = fadd double %sq, %c
  %k2 = add i64 %k, 1
  br label %latch

latch:
  %t = fmul double %z2, %z2
  %in = fcmp olt double %t, 4.000000e+00
  %more = icmp slt i64 %k2, %n
  %go = and i1 %in, %more
  br i1 %go, label %loop, label %exit

exit:
  store double %sq, ptr %p
  ret void
}
"""


def _carry(text):
    out = rewritten(carried.carry, text)
    llvm.parse_assembly(out).verify()
    return out


def _instructions(text):
    return {inst.name: str(inst) for inst in ir.parse(text).function("@k").instructions()
            if inst.name}


def test_a_product_of_the_next_trip_comes_through_a_phi():
    out = _instructions(_carry(LOOP))
    assert out["%sq"] == "%sq = phi double [ %nv.carry.1, %entry ], [ %t, %latch ]"
    assert out["%nv.carry.1"] == "%nv.carry.1 = fmul double %z0, %z0"
    block = next(b for b in ir.parse(_carry(LOOP)).function("@k").blocks if b.label == "entry")
    assert [i.name for i in block.instructions] == ["%nv.carry.1", None]
    # Only the one: nothing else recomputes a value of the previous trip.
    assert sum(line.split()[2] == "fmul" for line in out.values()) == 2


def test_a_start_of_constants_is_folded():
    out = _instructions(_carry(LOOP.replace("[ %z0, %entry ]", "[ 1.500000e+00, %entry ]")))
    assert out["%sq"] == "%sq = phi double [ 0x4002000000000000, %entry ], [ %t, %latch ]"
    assert "%nv.carry.1" not in out
    # A float32 start is rounded to float32 (0.1 * 0.1 in float32).
    text = (LOOP.replace("double", "float").replace("4.000000e+00", "4.0")
            .replace("[ %z0, %entry ]", "[ 0x3FB99999A0000000, %entry ]"))
    product = float(np.float32(0.1) * np.float32(0.1))
    assert _instructions(_carry(text))["%sq"] == (
        f"%sq = phi float [ 0x{np.float64(product).view(np.uint64):016X}, %entry ], "
        "[ %t, %latch ]")
    # Subnormal results are left to the device.
    tiny = _instructions(_carry(LOOP.replace("[ %z0, %entry ]", "[ 1.0e-200, %entry ]")))
    assert tiny["%nv.carry.1"] == "%nv.carry.1 = fmul double 1.0e-200, 1.0e-200"


def test_a_chain_of_integer_operations_and_a_compare_is_carried():
    text = """define i64 @k(i64 %n) {
entry:
  br label %loop

loop:
  %k = phi i64 [ 3, %entry ], [ %k2, %loop ]
  %m = mul nsw i64 %k, %k
  %lt = icmp slt i64 %m, %n
  %s = select i1 %lt, i64 %m, i64 %n
  %k2 = add nsw i64 %k, %s
  %m2 = mul nsw i64 %k2, %k2
  %lt2 = icmp slt i64 %m2, %n
  br i1 %lt2, label %loop, label %exit

exit:
  ret i64 %k2
}
"""
    out = _instructions(_carry(text))
    assert out["%m"] == "%m = phi i64 [ %nv.carry.1, %entry ], [ %m2, %loop ]"
    assert out["%nv.carry.1"] == "%nv.carry.1 = mul nsw i64 3, 3"
    # The compare of the carried product is the latch's compare of its twin.
    assert out["%lt"] == "%lt = phi i1 [ %nv.carry.2, %entry ], [ %lt2, %loop ]"
    assert out["%nv.carry.2"] == "%nv.carry.2 = icmp slt i64 %nv.carry.1, %n"


@pytest.mark.parametrize("change", [
    ("%t = fmul double", "%t = fmul nnan double"),
    ("%t = fmul double %z2, %z2", "%t = fmul double %z2, %c"),
    ("%sq = fmul double %z, %z", "%sq = fmul double %z, %c"),
], ids=["other flags", "other operands", "not the translation"])
def test_other_flags_or_operands_are_not_the_same_operation(change):
    text = LOOP.replace(*change)
    assert not carried.carry(ir.parse(text))


def test_a_header_with_three_predecessors_is_left_alone():
    text = (LOOP.replace("entry:\n  br label %loop",
                         "entry:\n  br i1 %b, label %loop, label %side\n\n"
                         "side:\n  br label %loop")
            .replace("[ %z0, %entry ],", "[ %z0, %entry ], [ %c, %side ],")
            .replace("[ 0, %entry ],", "[ 0, %entry ], [ 1, %side ],"))
    llvm.parse_assembly(text).verify()
    assert not carried.carry(ir.parse(text))


def test_a_product_that_not_every_trip_computes_is_not_reused():
    branchy = LOOP.replace(
        "  br label %latch\n\nlatch:\n  %t = fmul double %z2, %z2\n",
        "  br i1 %b, label %then, label %latch\n\nthen:\n  %t = fmul double %z2, %z2\n"
        "  br label %latch\n\nlatch:\n  %tt = phi double [ %t, %then ], [ 0.0, %loop ]\n"
    ).replace("fcmp olt double %t,", "fcmp olt double %tt,")
    llvm.parse_assembly(branchy).verify()
    assert not carried.carry(ir.parse(branchy))
    # In a block every trip passes, after the branch joins, it is.
    joined = LOOP.replace(
        "  br label %latch\n\nlatch:\n",
        "  br i1 %b, label %then, label %latch\n\nthen:\n  br label %latch\n\nlatch:\n")
    assert "%sq = phi double [ %nv.carry.1, %entry ], [ %t, %latch ]" in _carry(joined)


def test_a_product_in_an_inner_loop_is_reused_where_it_dominates_the_latch():
    # The inner loop's header runs last on the latch's values: reused.
    header = LOOP.replace(
        "  br label %latch\n\nlatch:\n  %t = fmul double %z2, %z2\n",
        "  br label %inner\n\ninner:\n  %w = phi double [ %z2, %loop ], [ %w2, %body ]\n"
        "  %t = fmul double %w, %w\n  br i1 %b, label %body, label %latch\n\n"
        "body:\n  %w2 = fadd double %w, %c\n  br label %inner\n\nlatch:\n"
    ).replace("[ %z2, %latch ]", "[ %w, %latch ]")
    out = _instructions(_carry(header))
    assert out["%sq"] == "%sq = phi double [ %nv.carry.1, %entry ], [ %t, %latch ]"
    # Its body does not run on the way out: not reused.
    body = header.replace("  %t = fmul double %w, %w\n", "").replace(
        "  %w2 = fadd double %w, %c\n", "  %w2 = fadd double %w, %c\n  %t = fmul double %w, %w\n"
    ).replace("%in = fcmp olt double %t,", "%in = fcmp olt double %w,")
    llvm.parse_assembly(body).verify()
    assert not carried.carry(ir.parse(body))


# Kernels ---------------------------------------------------------------------

def _mandelbrot_kernel(real):
    def mandelbrot_plain(counts, x0, y0, step, max_iter):
        x, y = nv.grid(2)
        height, width = counts.shape
        if x >= width or y >= height:
            return
        cr, ci = x0 + real(x) * step, y0 + real(y) * step
        zr, zi = real(0.0), real(0.0)
        n = 0
        while n < max_iter and zr * zr + zi * zi <= 4.0:
            zr, zi = zr * zr - zi * zi + cr, real(2.0) * zr * zi + ci
            n += 1
        counts[y, x] = n
    return mandelbrot_plain


def _mandelbrot_cpu(real):
    @numba.njit
    def mandelbrot(counts, x0, y0, step, max_iter):
        height, width = counts.shape
        for y in range(height):
            for x in range(width):
                cr, ci = x0 + real(x) * step, y0 + real(y) * step
                zr, zi = real(0.0), real(0.0)
                n = 0
                while n < max_iter and zr * zr + zi * zi <= 4.0:
                    zr, zi = zr * zr - zi * zi + cr, real(2.0) * zr * zi + ci
                    n += 1
                counts[y, x] = n
    return mandelbrot


def _running_product(x, limit, counts, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        acc = 1.0
        k = 0
        while k < 400 and acc * x[i] < limit:
            acc = acc * x[i]
            k += 1
        counts[i] = k
        out[i] = acc


@numba.njit
def _running_product_cpu(x, limit, counts, out):
    for i in range(x.shape[0]):
        acc = 1.0
        k = 0
        while k < 400 and acc * x[i] < limit:
            acc = acc * x[i]
            k += 1
        counts[i] = k
        out[i] = acc


@pytest.fixture(scope="module")
def rewrites():
    """How many modules compiled in this file the pass changed."""
    original = carried.carry
    changed = []

    def spy(module):
        out = original(module)
        changed.append(out)
        return out
    carried.carry = spy
    with config.overriding(NUMBA_VULKAN_CACHE="0"):
        yield changed
    carried.carry = original


@pytest.mark.parametrize("real", [np.float32, np.float64])
def test_plain_mandelbrot_counts_match_njit(rewrites, real):
    before = len(rewrites)
    kernel = nv.jit(_mandelbrot_kernel(real))
    counts = np.zeros((24, 40), np.int64)
    args = (real(-2.1), real(-1.2), real(0.075), 300)
    kernel[(3, 2), (16, 16)](counts, *args)
    expected = np.zeros_like(counts)
    _mandelbrot_cpu(real)(expected, *args)
    assert rewrites[before:] == [True]
    np.testing.assert_array_equal(counts, expected)
    # Both a short and a long trip count occur, points inside the set too.
    assert expected.min() < 5 and (expected == 300).sum() > 20
    assert_valid_spirv(compiled_kernels(kernel)[0])


def test_running_product_matches_njit(rewrites, rng):
    before = len(rewrites)
    x = rng.uniform(1.0001, 1.2, 200)
    limit = 1e5
    counts, out = np.zeros(200, np.int64), np.zeros(200)
    kernel = nv.jit(_running_product)
    kernel.forall(200)(x, limit, counts, out)
    expected_counts, expected = np.zeros_like(counts), np.zeros_like(out)
    _running_product_cpu(x, limit, expected_counts, expected)
    assert rewrites[before:] == [True]
    np.testing.assert_array_equal(counts, expected_counts)
    np.testing.assert_array_equal(out, expected)
    assert expected_counts.min() < 100 and expected_counts.max() == 400
    assert_valid_spirv(compiled_kernels(kernel)[0])


def _mixed(x, n, out_i, out_f):
    i = nv.global_id(0)
    if i < x.shape[0]:
        h = i + 1
        k = 0
        while k < n and (h * 31 ^ (h << 3)) % 1000 != 7:
            h = (h * 31 ^ (h << 3)) % 100003 + k
            k += 1
        out_i[i] = h * 1000 + k
        total = 0.0
        for j in range(3):
            v = x[i] + j * 0.25
            t = 0
            while t < n and abs(v * v - 2.0) > 0.05:
                v = abs(v * v - 2.0) * 0.9 + 0.1
                t += 1
            total += v + t
        out_f[i] = total


@numba.njit
def _mixed_one(i, x, n, out_i, out_f):
    h = i + 1
    k = 0
    while k < n and (h * 31 ^ (h << 3)) % 1000 != 7:
        h = (h * 31 ^ (h << 3)) % 100003 + k
        k += 1
    out_i[i] = h * 1000 + k
    total = 0.0
    for j in range(3):
        v = x[i] + j * 0.25
        t = 0
        while t < n and abs(v * v - 2.0) > 0.05:
            v = abs(v * v - 2.0) * 0.9 + 0.1
            t += 1
        total += v + t
    out_f[i] = total


def test_integer_and_nested_loops_match_njit(rewrites, rng):
    before = len(rewrites)
    x = rng.uniform(0.0, 1.5, 96)
    out_i, out_f = np.zeros(96, np.int64), np.zeros(96)
    kernel = nv.jit(_mixed)
    kernel.forall(96)(x, 300, out_i, out_f)
    expected_i, expected_f = np.zeros_like(out_i), np.zeros_like(out_f)
    for i in range(96):
        _mixed_one(i, x, 300, expected_i, expected_f)
    assert rewrites[before:] == [True]
    np.testing.assert_array_equal(out_i, expected_i)
    np.testing.assert_array_equal(out_f, expected_f)
    # Loops left early and loops that ran every trip, in both parts.
    trips = expected_i % 1000
    assert trips.min() < 50 and trips.max() == 300
    assert len(set(np.floor(expected_f).tolist())) > 10
    assert_valid_spirv(compiled_kernels(kernel)[0])


# Random loops, run before and after on the host through LLVM's JIT -----------

_INT_OPS = ("add", "sub", "mul", "and", "or", "xor")
_FLOAT_OPS = ("fadd", "fsub", "fmul")
_STARTS = {"%p0": ("i64", "%a"), "%p1": ("i64", "%b"), "%q0": ("double", "%x"),
           "%q1": ("double", "%y")}


def _random_expression(rng, pick):
    """``(type, template, operands)`` of one random operation."""
    choice = rng.random()
    if choice < 0.35:
        op = _INT_OPS[int(rng.integers(len(_INT_OPS)))]
        return "i64", op + " i64 {0}, {1}", [pick("i64"), pick("i64")]
    if choice < 0.45:
        return "i64", f"shl i64 {{0}}, {int(rng.integers(1, 5))}", [pick("i64")]
    if choice < 0.75:
        op = _FLOAT_OPS[int(rng.integers(len(_FLOAT_OPS)))]
        return "double", op + " double {0}, {1}", [pick("double"), pick("double")]
    if choice < 0.8:
        return "double", "fneg double {0}", [pick("double")]
    if choice < 0.85:
        return "double", "call double @llvm.fabs.f64(double {0})", [pick("double")]
    if choice < 0.9:
        return ("double", "call double @llvm.fma.f64(double {0}, double {1}, double {2})",
                [pick("double"), pick("double"), pick("double")])
    if choice < 0.95:
        return "i1", "icmp slt i64 {0}, {1}", [pick("i64"), pick("i64")]
    return "i1", "fcmp olt double {0}, {1}", [pick("double"), pick("double")]


def _random_loop(rng):
    """A function of one loop whose latch computes again, on the next
    trip's values, some of what the loop computes on its phis: in the latch
    itself, in a single-block loop, in an inner loop, or in a branch that
    not every trip takes; a few twins have their operands swapped."""
    types = {"%a": "i64", "%b": "i64", "%x": "double", "%y": "double", "7": "i64",
             "-3": "i64", "5.000000e-01": "double"}
    types.update({phi: ty for phi, (ty, _) in _STARTS.items()})

    def pick(ty):
        pool = [v for v, t in types.items() if t == ty]
        return pool[int(rng.integers(len(pool)))]

    exprs = {}
    for k in range(int(rng.integers(4, 10))):
        exprs[f"%e{k}"] = _random_expression(rng, pick)
        types[f"%e{k}"] = exprs[f"%e{k}"][0]
    nexts = {}
    for phi, (ty, _) in _STARTS.items():
        made = [e for e, (t, _, _) in exprs.items() if t == ty]
        nexts[phi] = made[int(rng.integers(len(made)))] if made else phi
    shape = ("latch", "single", "inner", "branch")[int(rng.integers(4))]
    translated, twins, side = dict(nexts), [], []
    for name, (ty, template, args) in exprs.items():
        if rng.random() < 0.3 or not all(a in translated or not a.startswith("%e")
                                         for a in args):
            continue
        new = [translated.get(a, a) for a in args]
        if rng.random() < 0.15:
            new = new[::-1]
        if shape == "branch" and rng.random() < 0.5 and not any(a.startswith("%e")
                                                                 for a in args):
            side.append(f"  {name}s = {template.format(*new)}")
        else:
            twins.append(f"  {name}t = {template.format(*new)}")
            translated[name] = f"{name}t"
    body = [f"  {name} = {template.format(*args)}" for name, (_, template, args) in exprs.items()]
    latch = "loop" if shape == "single" else "latch"
    phis = [f"  %c = phi i64 [ 0, %entry ], [ %c1, %{latch} ]"] + [
        f"  {phi} = phi {ty} [ {start}, %entry ], [ {nexts[phi]}, %{latch} ]"
        for phi, (ty, start) in _STARTS.items()]
    go = ["  %c1 = add i64 %c, 1", "  %go0 = icmp slt i64 %c1, %n"]
    tests = [f"{n}t" for n, (ty, _, _) in exprs.items()
             if ty == "i1" and translated.get(n) == f"{n}t"]
    if tests:
        go.append(f"  %go = and i1 %go0, {tests[0]}")
    back = [f"  br i1 {'%go' if tests else '%go0'}, label %loop, label %exit"]
    if shape == "single":
        loop = phis + body + twins + go + back
    elif shape == "latch":
        loop = phis + body + ["  br label %latch", "", "latch:"] + twins + go + back
    elif shape == "inner":
        loop = (phis + body + ["  br label %inner", "", "inner:",
                               "  %ic = phi i64 [ 0, %loop ], [ %ic1, %inner ]"] + twins
                + ["  %ic1 = add i64 %ic, 1", "  %iq = icmp slt i64 %ic1, 3",
                   "  br i1 %iq, label %inner, label %latch", "", "latch:"] + go + back)
    else:
        # The side's twins are computed on the trips that take the branch only.
        loop = (phis + body + ["  %flip = trunc i64 %c to i1",
                               "  br i1 %flip, label %side, label %latch", "", "side:"]
                + side + ["  br label %latch", "", "latch:"] + twins + go + back)
    results = list(nexts.values()) + [e for e, (t, _, _) in exprs.items() if t != "i1"][:3]
    exit_code, acc = [], "0"
    for k, value in enumerate(results):
        if types[value] == "double":
            exit_code += [f"  %u{k} = fcmp uno double {value}, 0.0",
                          f"  %s{k} = select i1 %u{k}, double 0x7FF8000000000000, "
                          f"double {value}",
                          f"  %v{k} = bitcast double %s{k} to i64"]
            value = f"%v{k}"
        exit_code += [f"  %r{k} = xor i64 {acc}, {value}", f"  %m{k} = mul i64 %r{k}, 1000003"]
        acc = f"%m{k}"
    return "\n".join(
        ["define i64 @f(i64 %a, i64 %b, double %x, double %y, i64 %n) {", "entry:",
         "  br label %loop", "", "loop:"] + loop + ["", "exit:"] + exit_code
        + [f"  ret i64 {acc}", "}", "", "declare double @llvm.fabs.f64(double)",
           "declare double @llvm.fma.f64(double, double, double)", ""])


def _host_function(text):
    import ctypes
    module = llvm.parse_assembly(text)
    module.verify()
    # The engine owns its target machine: one each.
    machine = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    kind = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_double,
                            ctypes.c_double, ctypes.c_int64)
    return engine, kind(engine.get_function_address("f"))


def test_random_loops_give_the_same_results_on_the_host():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    rng = np.random.default_rng(2024)
    inputs = [(int(a), int(b), float(x), float(y), n)
              for (a, b), (x, y), n in zip(rng.integers(-50, 50, (6, 2)),
                                          rng.uniform(-1.5, 1.5, (6, 2)), (0, 1, 2, 5, 13, 40))]
    changed = 0
    for _ in range(120):
        text = _random_loop(rng)
        module = ir.parse(text)
        if not carried.carry(module):
            continue
        out = str(module)
        changed += 1
        # The engines own the code: they must outlive the calls.
        (keep, before), (keep_too, after) = _host_function(text), _host_function(out)
        for args in inputs:
            assert after(*args) == before(*args), (text, args)
    assert changed > 60
