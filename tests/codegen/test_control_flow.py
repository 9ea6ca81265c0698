"""Control flow of every shape gives numba.njit's results on Vulkan.

Each shape here is one the SPIR-V backend's own structurizer got wrong
before :mod:`numba_vulkan.codegen.structurize` reshaped it: early returns
from kernels and from nested loops, ``break``/``continue`` in nested loops,
``while`` loops, short circuits whose second operand reads memory,
conditional expressions and loop ``else`` clauses.
"""

import numba
import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.runtime.device import current_device
from tests.helpers import assert_valid_spirv, compiled_kernels


@numba.njit
def search_2d(grid, target):
    """Index of the first occurrence of ``target`` (return from two loops)."""
    for r in range(grid.shape[0]):
        for c in range(grid.shape[1]):
            if grid[r, c] == target:
                return r * grid.shape[1] + c
    return -1


@numba.njit
def collatz_steps(n, limit):
    """A ``while`` loop with a compound condition and an early exit."""
    steps = 0
    while n != 1 and steps < limit:
        if n % 2 == 0:
            n //= 2
        else:
            n = 3 * n + 1
        steps += 1
        if n == 16:
            return steps + 4
    return steps


@numba.njit
def nested_break_continue(a, b):
    """``break`` and ``continue`` in both loops of a nest, and a loop else."""
    total = 0
    for i in range(a):
        if i == b:
            continue
        for j in range(b + 3):
            if (i + j) % 4 == 3:
                continue
            if j > i + 2:
                break
            total += i * j + 1
        else:
            total += 100
        if total > 500:
            break
    return total


@numba.njit
def short_circuit(x, k, lo, hi):
    """``and``/``or`` whose later operands read the array (not speculated)."""
    n = x.shape[0]
    count = 0
    for j in range(n):
        if (k + j < n and x[k + j] > lo) or (j > 0 and x[j - 1] < hi and not x[j] == lo):
            count += 1
        elif j % 3 == 0 and x[j] != hi:
            count += 10
    return count


@numba.njit
def triple_exit(a, b, c):
    """Flags, several exit levels and conditional expressions."""
    found = False
    acc = 0
    for i in range(a):
        for j in range(b):
            for k in range(c):
                acc += (i ^ j) if k % 2 else (j - k)
                if acc > 40 and (i + k) % 5 == 1:
                    found = True
                    break
                if acc < -30:
                    return acc * 2
            if found:
                break
        if found:
            break
    return acc if found else -acc


@nv.jit
def run_search(grids, targets, out):
    i = nv.global_id(0)
    if i >= out.shape[0]:
        return
    out[i] = search_2d(grids[i], targets[i])


@nv.jit
def run_scalar_programs(args, out):
    i = nv.global_id(0)
    if i >= args.shape[0]:
        return
    a, b, c = args[i, 0], args[i, 1], args[i, 2]
    out[i, 0] = collatz_steps(a, b + 20)
    out[i, 1] = nested_break_continue(a % 9, b % 7)
    out[i, 2] = triple_exit(a % 6, b % 6, c % 6)
    if a < 0:
        return
    out[i, 3] = 1


@nv.jit
def run_short_circuit(x, ks, los, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = short_circuit(x, ks[i], los[i], los[i] + 0.5)


def _check_modules(kernel):
    for compiled in compiled_kernels(kernel):
        assert_valid_spirv(compiled)


def test_return_from_nested_loops(rng):
    grids = rng.integers(0, 40, size=(300, 7, 9)).astype(np.int32)
    targets = rng.integers(0, 45, size=300).astype(np.int32)
    out = np.zeros(300, np.int64)
    run_search.forall(300)(grids, targets, out)
    expected = [search_2d(g, t) for g, t in zip(grids, targets)]
    np.testing.assert_array_equal(out, expected)
    assert (out == -1).any() and (out >= 0).any()
    _check_modules(run_search)


def test_while_break_continue_and_multi_level_exits(rng):
    args = rng.integers(1, 60, size=(500, 3)).astype(np.int64)
    args[::7, 0] *= -1
    out = np.full((500, 4), -7, np.int64)
    run_scalar_programs.forall(500)(args, out)
    for row, (a, b, c) in zip(out, args):
        assert row[0] == collatz_steps(a, b + 20)
        assert row[1] == nested_break_continue(a % 9, b % 7)
        assert row[2] == triple_exit(a % 6, b % 6, c % 6)
        assert row[3] == (-7 if a < 0 else 1)
    _check_modules(run_scalar_programs)


def test_short_circuit_with_memory_operands(rng):
    x = rng.integers(0, 5, size=64).astype(np.float64)
    ks = rng.integers(-3, 70, size=200).astype(np.int64)
    los = rng.integers(0, 5, size=200).astype(np.float64)
    out = np.zeros(200, np.int64)
    run_short_circuit.forall(200)(x, ks, los, out)
    np.testing.assert_array_equal(
        out, [short_circuit(x, k, lo, lo + 0.5) for k, lo in zip(ks, los)])
    _check_modules(run_short_circuit)


@nv.jit
def counted_loop(x, out, n):
    i = nv.global_id(0)
    if i < x.shape[0]:
        acc = 0.0
        for k in range(n):
            if x[i] > k:
                acc += k
            else:
                acc -= x[i]
        out[i] = acc


def test_structured_code_keeps_its_shape(rng):
    """A counted loop with an if/else needs no flags or selectors; the
    short-circuit kernel does, and gets them. (Compiled for a target without
    a loop limit: on lavapipe's, the loop is unrolled and counted.)"""
    x = rng.random(100) * 6
    out = np.zeros(100)
    counted_loop.forall(100)(x, out, 5)
    expected = [sum(k if v > k else -v for k in range(5)) for v in x]
    np.testing.assert_allclose(out, expected)
    plain = counted_loop.compile("void(float64[::1], float64[::1], int64)",
                                 target=current_device().target.with_features(loop_limit=0))
    assert not any(f"%nv.{kind}." in plain.llvm_ir for kind in ("latch", "dispatch", "edge"))
    (restructured,) = compiled_kernels(run_short_circuit)
    assert "%nv.dispatch." in restructured.llvm_ir or "%nv.latch." in restructured.llvm_ir


@nv.jit
def take_tickets(counter, tickets):
    i = nv.global_id(0)
    if i < tickets.shape[0]:
        while True:
            seen = nv.atomic.add(counter, 0, 0)
            prev = nv.atomic.cas(counter, 0, seen, seen + 1)
            if prev == seen:
                break
        tickets[i] = prev


def test_value_from_a_divergent_loop_keeps_each_lanes_last_value():
    """Lavapipe recomputes a loop body's atomics for lanes that already left
    the loop: the value must reach its use through a phi after the loop."""
    counter = np.zeros(1, np.int32)
    tickets = np.full(300, -1, np.int32)
    take_tickets[5, 64](counter, tickets)
    assert counter[0] == 300
    np.testing.assert_array_equal(np.sort(tickets), np.arange(300))
    _check_modules(take_tickets)


@numba.njit
def escape_time(cr, ci, max_iter):
    zr = 0.0
    zi = 0.0
    n = 0
    while n < max_iter:
        zr2 = zr * zr
        zi2 = zi * zi
        if zr2 + zi2 > 4.0:
            return n
        zi = 2.0 * zr * zi + ci
        zr = zr2 - zi2 + cr
        n += 1
    return max_iter


@nv.jit
def mandelbrot(out, x0, y0, step, max_iter):
    row, col = nv.global_id(1), nv.global_id(0)
    if row >= out.shape[0] or col >= out.shape[1]:
        return
    out[row, col] = escape_time(x0 + col * step, y0 + row * step, max_iter)


def test_mandelbrot_with_while_loop_and_early_exit():
    out = np.zeros((48, 72), np.int32)
    mandelbrot[(9, 6), (8, 8)](out, -2.2, -1.2, 0.05, 200)
    rows, cols = np.indices(out.shape)
    expected = np.vectorize(escape_time)(-2.2 + cols * 0.05, -1.2 + rows * 0.05, 200)
    np.testing.assert_array_equal(out, expected)
    assert (out == 200).any() and (out < 5).any()
    _check_modules(mandelbrot)


def test_a_module_the_backend_leaves_unmerged_is_rebuilt_with_exit_flags(monkeypatch):
    # No kernel known today makes the backend emit a switch without a merge
    # once only innermost loops take breaks; the first module is made to
    # look so, and the rebuild must send every exit through a flag.
    from numba_vulkan.spirv import binary as spirv
    from numba_vulkan.codegen import structurize
    from numba_vulkan.compiler import stages
    original = spirv.unmerged_switch
    breaks = []
    restructure = structurize.structurize

    def spy(module, tm, entry, flag_free, **options):
        breaks.append(flag_free)
        return restructure(module, tm, entry, flag_free, **options)

    # Built here, not found in a kernel cache that an earlier run filled.
    monkeypatch.setenv("NUMBA_VULKAN_CACHE", "0")
    monkeypatch.setattr(structurize, "structurize", spy)
    monkeypatch.setattr(stages.spirv, "unmerged_switch", lambda binary: len(breaks) == 1)

    @nv.jit
    def steps(n, limit, out):
        i = nv.global_id(0)
        if i < n.shape[0]:
            out[i] = collatz_steps(n[i], limit)

    n = np.arange(1, 200, dtype=np.int64)
    out = np.zeros_like(n)
    steps.forall(n.size)(n, 60, out)
    np.testing.assert_array_equal(out, [collatz_steps(v, 60) for v in n])
    assert breaks == [True, False]
    (compiled,) = compiled_kernels(steps)
    assert not original(compiled.spirv)
    assert_valid_spirv(compiled)


@numba.njit
def first_above(x, start, limit):
    """``while True`` left by a data-dependent break."""
    k = start
    while True:
        if x[k % x.shape[0]] > limit:
            break
        k += 1
    return k


@numba.njit
def digits_until(n, stop):
    """``while True`` left by a break or a return, in a counted loop."""
    total = 0
    for _ in range(3):
        while True:
            total += n % 10
            n = n // 10 + 7
            if total > stop:
                return -total
            if n % 3 == 0:
                break
    return total


@nv.jit
def run_endless_with_breaks(x, starts, out):
    i = nv.global_id(0)
    if i < starts.shape[0]:
        out[i, 0] = first_above(x, starts[i], 0.9)
        out[i, 1] = digits_until(starts[i] + 11, 60 + starts[i] % 50)


def test_while_true_left_by_break_or_return(rng):
    x = rng.random(64)
    starts = rng.integers(0, 1000, 96)
    out = np.zeros((starts.size, 2), np.int64)
    run_endless_with_breaks.forall(starts.size)(x, starts, out)
    expected = [[first_above(x, s, 0.9), digits_until(s + 11, 60 + s % 50)] for s in starts]
    np.testing.assert_array_equal(out, expected)
    _check_modules(run_endless_with_breaks)


def _endless_forever(x, out):
    i = nv.global_id(0)
    while True:
        out[i] += 1


def _endless_proved(x, out):
    # k only grows: LLVM proves the break is never taken.
    i = nv.global_id(0)
    k = 0
    while True:
        k += 1
        if k < 0:
            break
    out[i] = k


def _endless_around_a_loop(x, out):
    i = nv.global_id(0)
    while True:
        for j in range(3):
            out[i] += j


def _endless_in_a_branch(x, out):
    i = nv.global_id(0)
    if x[i] > 0:
        while True:
            out[i] += 1
    out[i] = 3


def _endless_after_a_return(x, out):
    i = nv.global_id(0)
    if i >= out.shape[0]:
        return
    for k in range(4):
        if x[k] > 0.5:
            while True:
                out[i] += k
        out[i] += 1


@pytest.mark.parametrize("function", [_endless_forever, _endless_proved, _endless_around_a_loop,
                                      _endless_in_a_branch, _endless_after_a_return],
                         ids=lambda f: f.__name__.strip("_"))
def test_endless_loops_compile_to_valid_modules(function, monkeypatch):
    # Never launched: a loop that does not end would hang a GPU.
    monkeypatch.setenv("NUMBA_VULKAN_CACHE", "0")
    compiled = nv.jit(function).compile("void(float64[::1], int64[::1])")
    assert_valid_spirv(compiled)
    assert "OpLoopMerge" in compiled.disassemble()
