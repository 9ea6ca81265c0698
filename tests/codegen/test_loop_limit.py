"""Lavapipe's loop limit: long loops give numba.njit's results, or a LaunchError.

Lavapipe leaves every loop of a SIMD group of invocations after 65535 loop
trips, all loops together (see numba_vulkan/codegen/looplimit.py). Kernels
for a target with that limit unroll innermost loops 16 times and count what
the driver counts; a launch that reaches the limit raises. On a device
without the limit the same kernels simply run.
"""

import math

import numba
import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.aot.build import manifest
from numba_vulkan.base.errors import ManifestError
from numba_vulkan.runtime.device import current_device
from numba_vulkan.base.target import LAVAPIPE_LOOP_LIMIT, TargetDescription

from numba_vulkan.llvmir import ir
from tests.helpers import device_info, rewritten

_ONES = np.ones(8, np.int64)


def _limited():
    return current_device().target.loop_limit > 0


def _hash_loop(x, n):
    s = 0
    for k in range(n):
        s = (s * 31 + x[k & 7] + k) & 0xFFFFFF
    return s


def _nested(x, n, m):
    s = 0
    for a in range(n):
        for b in range(m):
            s = (s * 7 + x[(a + b) & 7] + b) & 0xFFFFFF
    return s


def _collatz_total(x, start):
    # A while loop whose trip count only the data decides: the total number
    # of Collatz steps of start, start + 1, ... until 10**6 steps are done.
    steps = 0
    v = start
    c = start
    while steps < 10 ** 6:
        if v == 1:
            c += x[c & 7]
            v = c
        elif v % 2 == 0:
            v //= 2
        else:
            v = 3 * v + 1
        steps += 1
    return c * 1000 + v


_njit = {f: numba.njit(f) for f in (_hash_loop, _nested, _collatz_total)}
_device = {f: nv.jit(f).device_function() for f in (_hash_loop, _nested, _collatz_total)}
_hash_dev, _nested_dev, _collatz_dev = (_device[f] for f in (_hash_loop, _nested, _collatz_total))


@nv.jit
def _run_hash(out, x, n):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = _hash_dev(x, n + i)


@nv.jit
def _run_nested(out, x, n, m):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = _nested_dev(x, n, m + i)


@nv.jit
def _run_collatz(out, x, start):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = _collatz_dev(x, start + i)


def test_million_trip_loop_matches_njit():
    out = np.zeros(4, np.int64)
    _run_hash[1, 4](out, _ONES, 10 ** 6)
    assert out.tolist() == [_njit[_hash_loop](_ONES, 10 ** 6 + i) for i in range(4)]


def test_nested_300_by_300_matches_njit():
    out = np.zeros(4, np.int64)
    _run_nested[1, 4](out, _ONES, 300, 300)
    assert out.tolist() == [_njit[_nested](_ONES, 300, 300 + i) for i in range(4)]


def test_million_trip_while_loop_matches_njit():
    out = np.zeros(2, np.int64)
    _run_collatz[1, 2](out, _ONES, 27)
    assert out.tolist() == [_njit[_collatz_total](_ONES, 27 + i) for i in range(2)]


@pytest.mark.parametrize("kernel, args", [
    (_run_hash, (3 * 10 ** 6,)),
    (_run_nested, (3000, 3000)),
])
def test_beyond_the_raised_limit_raises(kernel, args):
    if not _limited():
        pytest.skip("the device has no loop limit")
    out = np.zeros(1, np.int64)
    with pytest.raises(nv.LaunchError, match=r"loop limit in invocation \(0, 0, 0\).*"
                                             r"results are incomplete"):
        kernel[1, 1](out, _ONES, *args)


@nv.jit
def _never_taken_inner_loop(out, x, n, flag):
    s = 0
    for k in range(n):
        s += x[k & 7]
        if s == flag:
            for j in range(x[k & 7] + 2):
                s += x[j & 7]
    out[0] = s


def test_loops_no_lane_enters_count_too():
    # Lavapipe runs a loop in an arm no lane takes once, and counts that
    # trip: 40000 outer trips with two loops inside (the unrolled inner loop
    # and its remainder) are 120000 counted trips, though no lane ever
    # enters them. 20000 outer trips stay below the limit.
    out = np.zeros(1, np.int64)
    _never_taken_inner_loop[1, 1](out, _ONES, 20000, -1)
    assert out[0] == 20000
    if not _limited():
        pytest.skip("the device has no loop limit")
    with pytest.raises(nv.LaunchError, match="loop limit"):
        _never_taken_inner_loop[1, 1](out, _ONES, 40000, -1)


@nv.jit(boundscheck=True)
def _checked_sum(out, x, n):
    s = 0
    for k in range(n):
        s += x[k & 7]
    out[nv.global_id(0)] = s


def test_loop_limit_shares_the_status_of_error_checks():
    out = np.zeros(1, np.int64)
    # Bounds checks leave the loop early, so it is not unrolled: the driver's
    # own limit holds for it.
    _checked_sum[1, 1](out, _ONES, 60000)
    assert out[0] == 60000
    with pytest.raises(IndexError):
        _checked_sum[1, 2](out, _ONES, 10)
    if not _limited():
        pytest.skip("the device has no loop limit")
    with pytest.raises(nv.LaunchError, match="loop limit"):
        _checked_sum[1, 1](out, _ONES, 3 * 10 ** 6)


def _status_params(compiled):
    return [p for p in compiled.params if p.kind == "status"]


def test_only_a_target_with_a_limit_gets_the_check():
    @nv.jit
    def looping(out, x, n):
        s = 0
        for k in range(n):
            s += x[k & 7]
        out[0] = s

    sig = "void(int64[::1], int64[::1], int64)"
    plain = looping.compile(sig, target=TargetDescription())
    limited = looping.compile(sig, target=TargetDescription(loop_limit=LAVAPIPE_LOOP_LIMIT))
    assert not _status_params(plain) and "loop_limit" not in plain.metadata
    (status,) = _status_params(limited)
    assert status.binding == 2 and limited.metadata["loop_limit"] == LAVAPIPE_LOOP_LIMIT
    assert "nv.looplimit" in limited.llvm_ir and "nv.looplimit" not in plain.llvm_ir


def test_a_kernel_without_loops_needs_no_status():
    @nv.jit
    def straight(out, x):
        out[0] = x[0] + x[1]

    compiled = straight.compile("void(int64[::1], int64[::1])",
                                target=TargetDescription(loop_limit=LAVAPIPE_LOOP_LIMIT))
    assert not _status_params(compiled)


def _info(name, vendor):
    return device_info(name, vendor, "cpu")


def test_lavapipe_targets_have_the_limit_others_not():
    assert _info("llvmpipe (LLVM 15.0.6, 256 bits)", 0x10005).target().loop_limit == 65535
    assert _info("NVIDIA H200", 0x10DE).target().loop_limit == 0


def test_target_keys_and_profiles_carry_the_limit(tmp_path):
    target = TargetDescription(loop_limit=65535)
    assert TargetDescription.from_key(target.key()) == target
    assert TargetDescription().key() == [[1, 2], True, True, 128]
    path = tmp_path / "kernels.yaml"
    path.write_text("version: 1\nprofiles:\n  - name: full\n  - name: lavapipe\n"
                    "    loop_limit: 65535\nkernels:\n  - function: m:k\n"
                    "    signatures: ['void(float32[::1])']\n")
    full, lavapipe = manifest.load(str(path)).profiles
    assert full.target().loop_limit == 0 and lavapipe.target().loop_limit == 65535
    path.write_text(path.read_text().replace("65535", "-1"))
    with pytest.raises(ManifestError, match="loop_limit"):
        manifest.load(str(path))


@nv.jit
def _count_above(out, limit):
    n = 0
    above = 0
    while n < limit:
        n += 1
        if n > 2147483647:
            above += 1
    out[0] = above


def test_a_loop_of_2_to_the_31_trips_is_beyond_the_limit():
    # Once reported as lavapipe folding a 64-bit comparison: the loop was cut.
    if not _limited():
        pytest.skip("runs 2^31 trips of one loop in one invocation")
    with pytest.raises(nv.LaunchError, match="loop limit"):
        _count_above[1, 1](np.zeros(1, np.int64), np.int64(2 ** 31 + 5))


_NEST = """define void @main(i32 %n) {
entry:
  br label %outer

outer:
  %i = phi i32 [ 0, %entry ], [ %i1, %outer.latch ]
  br label %inner

inner:
  %j = phi i32 [ 0, %outer ], [ %j1, %inner ]
  %j1 = add i32 %j, 1
  %more = icmp slt i32 %j1, %n
  br i1 %more, label %inner, label %outer.latch

outer.latch:
  %i1 = add i32 %i, 1
  %again = icmp slt i32 %i1, %n
  br i1 %again, label %outer, label %done

done:
  ret void
}
"""


def test_only_innermost_loops_are_marked_for_unrolling():
    from numba_vulkan.codegen import looplimit
    text = rewritten(looplimit.hint_unrolling, _NEST, "main", 16)
    marked = [line for line in text.splitlines() if "!llvm.loop" in line]
    assert len(marked) == 1 and "label %inner, label %outer.latch" in marked[0]
    assert '!"llvm.loop.unroll.count", i32 16' in text
    # A loop that already has loop metadata is left as it is.
    assert rewritten(looplimit.hint_unrolling, text, "main", 16) == text


def test_library_loops_are_kept_rolled():
    from numba_vulkan.codegen import looplimit
    library = _NEST.replace("@main", "@_Z3libi")
    own, lib = looplimit.keep_library_loops([_NEST, library], [_NEST])
    assert own == _NEST
    assert lib.count("!llvm.loop !") == 2 and '!"llvm.loop.mustprogress"' in lib
    assert rewritten(looplimit.hint_unrolling, lib, "_Z3libi", 16) == str(ir.parse(lib))


def test_aot_lookup_prefers_entries_built_for_the_device_loop_limit():
    from numba_vulkan.base import abi
    from numba_vulkan.aot.loader import lookup

    def entry(target):
        return {"threads": [64, 1, 1], "abi_version": abi.ABI_VERSION, "target": target.key(),
                "push_size": 32, "features": [], "signature": ["float32[1d,C]"]}

    plain, limited = TargetDescription(), TargetDescription(loop_limit=LAVAPIPE_LOOP_LIMIT)
    sig, threads = ("float32[1d,C]",), (64, 1, 1)
    for device in (plain, limited):
        ranks = {built: lookup._usable(entry(built), sig, threads, device, None)
                 for built in (plain, limited)}
        assert None not in ranks.values()
        assert min(ranks, key=ranks.get) == device


def _while_true_nest(x, s):
    acc = s
    c0 = 0
    while True:
        c0 += 1
        if c0 > 5:
            break
        c1 = 0
        while True:
            c1 += 1
            if c1 > 1:
                break
            acc += 4
            c2 = 0
            while True:
                c2 += 1
                if c2 > 1:
                    break
                acc += 6
                if acc > 25:
                    return acc
                acc += c2
            if x[(c1 + acc) % 16] > 0.19:
                break
            acc += c1
        acc += 5
        if x[(c0 + acc) % 16] > 0.33:
            break
        if c0 % 2 == 0:
            continue
        acc += c0
    return acc


_while_true_cpu = numba.njit(_while_true_nest)
_while_true_dev = numba.njit(_while_true_nest)


@nv.jit
def _while_true_kernel(x, starts, out):
    i = nv.global_id(0)
    if i < starts.shape[0]:
        out[i] = _while_true_dev(x, starts[i])


def test_nests_of_while_true_with_returns_match_njit():
    """Unrolled 16 times, this nest's innermost loop (left by a break and a
    return) gave zeros on lavapipe: loops with such exits stay rolled."""
    x = np.random.default_rng(22).random(16)
    starts = np.arange(8, dtype=np.int64)
    out = np.zeros(8, np.int64)
    _while_true_kernel.forall(8)(x, starts, out)
    np.testing.assert_array_equal(out, [_while_true_cpu(x, s) for s in starts])


@nv.jit
def _search(out, x, n):
    s = 0
    for k in range(n):
        if x[k & 7] < 0:
            break
        s += x[k & 7]
    out[0] = s


def test_loops_left_early_keep_the_drivers_limit():
    out = np.zeros(1, np.int64)
    _search[1, 1](out, _ONES, 60000)
    assert out[0] == 60000
    if not _limited():
        pytest.skip("the device has no loop limit")
    with pytest.raises(nv.LaunchError, match="loop limit"):
        _search[1, 1](out, _ONES, 100000)


def test_loops_around_barriers_compile_without_llvm_warnings(capfd):
    """LLVM cannot unroll a loop that calls a convergent function; marked for
    unrolling, it printed a warning on every compile."""
    @nv.jit
    def rounds(out, n):
        t = nv.local_id(0)
        sm = nv.shared.array(8, np.int32)
        acc = 0
        for r in range(n):
            sm[t] = r + t
            nv.barrier()
            acc += sm[(t + 1) % 8]
            nv.barrier()
        out[t] = acc

    capfd.readouterr()
    limited = rounds.compile("void(int32[::1], int32)",
                             target=TargetDescription(loop_limit=LAVAPIPE_LOOP_LIMIT))
    assert "loop not unrolled" not in capfd.readouterr().err
    assert "nv.looplimit" in limited.llvm_ir
    out = np.zeros(8, np.int32)
    rounds[1, 8](out, 5)
    np.testing.assert_array_equal(out, [sum(r + (t + 1) % 8 for r in range(5)) for t in range(8)])


@nv.jit
def _spilled_loop(a, b, c, d, e, f, g, h, i_, j, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        s = 0.0
        for k in range(a.shape[0]):
            s += a[k]
        out[i] = s + b[i] + c[i] + d[i] + e[i] + f[i] + g[i] + h[i] + i_[i] + j[i]


def test_a_loop_status_after_the_argument_buffer_passes_the_stored_entry_check():
    """The loop limit's own status buffer comes after the argument buffer;
    the check that cache and AOT entries go through expected it before, and
    refused every such entry."""
    from numba_vulkan.spirv import modulecheck
    target = TargetDescription(loop_limit=LAVAPIPE_LOOP_LIMIT)
    k = _spilled_loop.compile("void(" + ", ".join(["float32[::1]"] * 11) + ")", target=target)
    assert [p.kind for p in k.params[-2:]] == ["args", "status"]
    modulecheck.check_params(k.signature, [p.to_json() for p in k.params], k.push_size,
                             target.narrowed, target.max_push_constants)


def _loop_of(instructions):
    """A module whose one loop has ``instructions`` adds besides its latch's."""
    adds = "".join(f"  %a{k} = add i32 %j, {k}\n" for k in range(instructions))
    return _NEST.replace("  %j1 = add i32 %j, 1\n", adds + "  %j1 = add i32 %j, 1\n")


@pytest.mark.parametrize("extra, copies", [(0, 16), (60, 15), (300, 2), (400, None)])
def test_large_loop_bodies_are_unrolled_fewer_times(extra, copies):
    from numba_vulkan.codegen import looplimit
    text = rewritten(looplimit.hint_unrolling, _loop_of(extra), "main", 16, budget=1024)
    if copies is None:
        assert "!llvm.loop" not in text
    else:
        assert f'!"llvm.loop.unroll.count", i32 {copies}' in text


@nv.jit
def _gaussian_sums(x, out, steps):
    i = nv.global_id(0)
    if i < out.shape[0]:
        s = 0.0
        for k in range(steps):
            s += math.exp(-x[i] * k) * math.cos(x[i] + k)
        out[i] = s


def test_a_loop_of_float64_math_stays_small_and_right():
    k = _gaussian_sums.compile("void(float64[::1], float64[::1], int64)")
    if k.target.loop_limit:
        # Sixteen copies of the body made a module of 920 KB (63 KB rolled).
        assert len(k.spirv) < 200_000
    x = np.linspace(0.01, 2.0, 64)
    out = np.zeros(64)
    _gaussian_sums.forall(64)(x, out, 100)
    expected = [sum(math.exp(-v * k) * math.cos(v + k) for k in range(100)) for v in x]
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
