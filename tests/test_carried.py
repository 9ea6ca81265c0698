"""Operations a loop's previous trip computed already, carried through a phi
(codegen/carried.py): on hand-written IR, and kernels giving numba.njit's results."""

import llvmlite.binding as llvm
import numba
import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan import config
from numba_vulkan.codegen import carried, ir
from helpers import assert_valid_spirv, compiled_kernels

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
    out = carried.carry(text)
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
    assert carried.carry(text) is text


def test_a_header_with_three_predecessors_is_left_alone():
    text = (LOOP.replace("entry:\n  br label %loop",
                         "entry:\n  br i1 %b, label %loop, label %side\n\n"
                         "side:\n  br label %loop")
            .replace("[ %z0, %entry ],", "[ %z0, %entry ], [ %c, %side ],")
            .replace("[ 0, %entry ],", "[ 0, %entry ], [ 1, %side ],"))
    llvm.parse_assembly(text).verify()
    assert carried.carry(text) is text


def test_a_product_that_not_every_trip_computes_is_not_reused():
    branchy = LOOP.replace(
        "  br label %latch\n\nlatch:\n  %t = fmul double %z2, %z2\n",
        "  br i1 %b, label %then, label %latch\n\nthen:\n  %t = fmul double %z2, %z2\n"
        "  br label %latch\n\nlatch:\n  %tt = phi double [ %t, %then ], [ 0.0, %loop ]\n"
    ).replace("fcmp olt double %t,", "fcmp olt double %tt,")
    llvm.parse_assembly(branchy).verify()
    assert carried.carry(branchy) is branchy
    # In a block every trip passes, after the branch joins, it is.
    joined = LOOP.replace(
        "  br label %latch\n\nlatch:\n",
        "  br i1 %b, label %then, label %latch\n\nthen:\n  br label %latch\n\nlatch:\n")
    assert "%sq = phi double [ %nv.carry.1, %entry ], [ %t, %latch ]" in _carry(joined)


def test_a_product_in_an_inner_loop_is_not_reused():
    # %t dominates the latch but runs on every trip of the inner loop, the
    # last of which need not have computed it on the latch's values.
    inner = LOOP.replace(
        "  br label %latch\n\nlatch:\n  %t = fmul double %z2, %z2\n",
        "  br label %inner\n\ninner:\n  %t = fmul double %z2, %z2\n"
        "  br i1 %b, label %inner, label %latch\n\nlatch:\n")
    llvm.parse_assembly(inner).verify()
    assert carried.carry(inner) is inner


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

    def spy(text):
        out = original(text)
        changed.append(out is not text)
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
