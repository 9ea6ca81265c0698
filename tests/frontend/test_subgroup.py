"""Subgroup operations (nv.subgroup, numba.cuda's warp functions) and bit functions.

Every expected value comes from a NumPy model of each subgroup, built from
what the kernel itself reports: its subgroup's index in the workgroup, its
lane and the subgroup size (8 on lavapipe with AVX2, 32 on the H200). Which
invocations share a subgroup is the driver's choice, so the model groups
them as the device did; no test assumes a size.
"""

import dataclasses

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan import cuda
from numba_vulkan.spirv import modulecheck
from numba_vulkan.runtime.device import current_device
from tests.helpers import assert_valid_spirv, compiled_kernels, run_python

GROUPS, THREADS = 2, 64
N = GROUPS * THREADS


@nv.jit
def ops(a, ia, out, iout, where):
    i = nv.global_id(0)
    size = nv.subgroup.size()
    lane = nv.subgroup.local_id()
    v = a[i]
    w = ia[i]
    out[0, i] = nv.subgroup.shuffle(v, lane * 3 + 1)
    out[1, i] = nv.subgroup.shuffle_xor(v, 1)
    out[2, i] = nv.subgroup.shuffle_xor(v, size)
    out[3, i] = nv.subgroup.shuffle_up(v, 3)
    out[4, i] = nv.subgroup.shuffle_down(v, 3)
    out[5, i] = nv.subgroup.broadcast(v, 2)
    out[6, i] = nv.subgroup.reduce_add(v)
    out[7, i] = nv.subgroup.reduce_min(v)
    out[8, i] = nv.subgroup.reduce_max(v)
    out[9, i] = nv.subgroup.inclusive_add(v)
    out[10, i] = nv.subgroup.exclusive_add(v)
    out[11, i] = nv.subgroup.inclusive_min(v)
    out[12, i] = nv.subgroup.exclusive_max(v)
    iout[0, i] = nv.subgroup.reduce_and(w)
    iout[1, i] = nv.subgroup.reduce_or(w)
    iout[2, i] = nv.subgroup.reduce_xor(w)
    iout[3, i] = nv.subgroup.inclusive_xor(w)
    iout[4, i] = nv.subgroup.exclusive_or(w)
    where[0, i] = nv.subgroup.id()
    where[1, i] = lane
    where[2, i] = size


def _subgroups(where, threads=THREADS):
    """The invocations of each subgroup, in lane order, and the size; checks
    that every subgroup is full and sized as the device says."""
    sub, lane, size = where[0], where[1], where[2]
    assert (size == size[0]).all()
    size = int(size[0])
    # The device's default size (lavapipe's and NVIDIA's only one); drivers
    # with several (AMD, Intel) may pick another per kernel.
    assert size & (size - 1) == 0 and size <= 128
    group = np.arange(where.shape[1]) // threads
    members = []
    for key in sorted(set(zip(group.tolist(), sub.tolist()))):
        found = np.flatnonzero((group == key[0]) & (sub == key[1]))
        order = found[np.argsort(lane[found])]
        np.testing.assert_array_equal(lane[order], np.arange(size))
        members.append(order)
    return members, size


def _identity(dtype, op):
    dtype = np.dtype(dtype)
    if op == "max":
        return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min
    return np.inf if dtype.kind == "f" else np.iinfo(dtype).max


def _exclusive(values, identity):
    return np.concatenate([[identity], values[:-1]])


def _model(a, ia, where):
    members, size = _subgroups(where)
    out = np.empty((13, a.size), a.dtype)
    iout = np.empty((5, a.size), ia.dtype)
    wide = {"i": np.int64, "u": np.uint64, "f": np.float64}[a.dtype.kind]
    lanes = np.arange(size)
    for order in members:
        x, w = a[order], ia[order]
        sums = np.cumsum(x.astype(wide)).astype(a.dtype)
        out[0, order] = x[(lanes * 3 + 1) % size]
        out[1, order] = x[lanes ^ 1]
        out[2, order] = x
        out[3, order] = np.where(lanes >= 3, x[np.maximum(lanes - 3, 0)], x)
        out[4, order] = np.where(lanes + 3 < size, x[np.minimum(lanes + 3, size - 1)], x)
        out[5, order] = x[2]
        out[6, order] = sums[-1]
        out[7, order] = x.min()
        out[8, order] = x.max()
        out[9, order] = sums
        out[10, order] = _exclusive(sums, 0)
        out[11, order] = np.minimum.accumulate(x)
        out[12, order] = _exclusive(np.maximum.accumulate(x), _identity(a.dtype, "max"))
        iout[0, order] = np.bitwise_and.reduce(w)
        iout[1, order] = np.bitwise_or.reduce(w)
        iout[2, order] = np.bitwise_xor.reduce(w)
        iout[3, order] = np.bitwise_xor.accumulate(w)
        iout[4, order] = _exclusive(np.bitwise_or.accumulate(w), 0)
    return out, iout


def _values(rng, dtype):
    if dtype == np.int32:
        return rng.integers(-2**31, 2**31, N).astype(np.int32)
    if dtype == np.uint32:
        return rng.integers(0, 2**32, N).astype(np.uint32)
    if dtype == np.int64:
        # High words that differ: a 64-bit shuffle must move both halves.
        return rng.integers(-2**50, 2**50, N).astype(np.int64)
    # Small integers: every order of summation gives the same float.
    return rng.integers(-50, 51, N).astype(dtype)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.float32, np.float64])
def test_each_operation_against_a_model_of_the_devices_subgroups(rng, dtype):
    a = _values(rng, dtype)
    ia = a if a.dtype.kind in "iu" else rng.integers(-2**31, 2**31, N).astype(np.int32)
    out = np.zeros((13, N), a.dtype)
    iout = np.zeros((5, N), ia.dtype)
    where = np.zeros((3, N), np.int32)
    ops[GROUPS, THREADS](a, ia, out, iout, where)
    if where[2, 0] < 4:
        pytest.skip("broadcast(v, 2) needs subgroups of 4 or more")
    expect, iexpect = _model(a, ia, where)
    for row in range(out.shape[0]):
        np.testing.assert_array_equal(out[row], expect[row], err_msg=f"row {row}")
    for row in range(iout.shape[0]):
        np.testing.assert_array_equal(iout[row], iexpect[row], err_msg=f"int row {row}")


def test_modules_are_valid_and_declare_what_they_need():
    kernels = compiled_kernels(ops)
    assert kernels, "the model test compiles ops first"
    for kernel in kernels:
        assert_valid_spirv(kernel)
        for capability in ("GroupNonUniformArithmetic", "GroupNonUniformBallot",
                           "GroupNonUniformShuffle", "GroupNonUniformShuffleRelative"):
            assert capability in kernel.capabilities
        assert "Linkage" not in kernel.capabilities
        extended = "int64" in kernel.signature[0]
        needs = modulecheck.subgroup_features(kernel.spirv)
        assert ("subgroup_extended_types" in needs) == extended, kernel.signature


@nv.jit
def _up(x):
    i = nv.global_id(0)
    x[i] = nv.subgroup.shuffle_up(x[i], 1)


def test_a_device_without_an_operation_class_refuses_the_launch(monkeypatch):
    device = current_device()
    monkeypatch.setattr(device, "info", dataclasses.replace(
        device.info, features=device.info.features - {"subgroup_shuffle_relative"}))
    with pytest.raises(nv.LaunchError, match=r"_up uses relative subgroup shuffles "
                                             r"\(nv.subgroup.shuffle_up.* which device .* "
                                             r"does not support"):
        _up[1, 64](np.zeros(64, np.int32))


def test_typing_errors_name_the_operation():
    @nv.jit
    def float_and(a):
        a[0] = nv.subgroup.reduce_and(a[0])

    with pytest.raises(nv.CompilerError,
                       match=r"nv\.subgroup\.reduce_and takes ints, not float32"):
        float_and.compile("void(float32[::1])")

    @nv.jit
    def one_argument(a):
        a[0] = nv.subgroup.shuffle(a[0])

    with pytest.raises(nv.CompilerError,
                       match=r"nv\.subgroup\.shuffle takes 2 positional arguments, not "
                             r"\(int32,\)"):
        one_argument.compile("void(int32[::1])")


# numba.cuda's warp functions ---------------------------------------------------

EVEN = 0x55555555


@cuda.jit
def votes(p, v64, v8, out, masks):
    i = cuda.grid(1)
    q = p[i] != 0
    out[0, i] = nv.subgroup.all(q)
    out[1, i] = nv.subgroup.any(q)
    out[2, i] = nv.subgroup.all_equal(v64[i])
    out[3, i] = cuda.all_sync(EVEN, q)
    out[4, i] = cuda.any_sync(EVEN, q)
    out[5, i] = cuda.eq_sync(EVEN, q)
    out[6, i] = cuda.shfl_sync(0xFFFFFFFF, i, 5)
    out[7, i] = cuda.shfl_up_sync(0xFFFFFFFF, i, 1)
    out[8, i] = cuda.shfl_down_sync(0xFFFFFFFF, i, 1)
    out[9, i] = cuda.shfl_xor_sync(0xFFFFFFFF, i, 2)
    cuda.syncwarp()
    cuda.syncwarp(0xFFFFFFFF)
    masks[0, i] = nv.subgroup.ballot(q)
    masks[1, i] = cuda.ballot_sync(0xFFFFFFFF, q)
    masks[2, i] = cuda.ballot_sync(0x0F0F0F0F, q)
    masks[3, i] = cuda.activemask()
    masks[4, i] = cuda.lanemask_lt()
    out[10, i] = nv.subgroup.id()
    out[11, i] = cuda.laneid
    out[12, i] = cuda.warpsize
    out[13, i] = nv.subgroup.shuffle_xor(q, 1)
    out[14, i] = nv.subgroup.reduce_add(v8[i])
    out[15, i] = nv.subgroup.inclusive_min(v8[i])
    out[16, i] = cuda.match_any_sync(0xFFFFFFFF, p[i] * 2 + (v8[i] & 1))
    agreed, pred = cuda.match_all_sync(EVEN, p[i])
    out[17, i] = agreed
    out[18, i] = pred


def _vote_inputs(rng, n):
    """Per block of 32 invocations: all true, all false, random, and true in
    even positions only; 64-bit values all equal, differing only in their
    high words, or random."""
    p = np.zeros(n, np.int32)
    v64 = np.zeros(n, np.int64)
    for b in range(n // 32):
        block = slice(32 * b, 32 * b + 32)
        kind = b % 4
        p[block] = (1 if kind == 0 else 0 if kind == 1 else
                    rng.integers(0, 2, 32) if kind == 2 else np.arange(32) % 2 == 0)
        kind = b % 3
        v64[block] = ((7 << 40) + 5 if kind == 0 else
                      5 + ((np.arange(32) % 2) << 40) if kind == 1 else
                      rng.integers(0, 3, 32))
    return p, v64


def test_votes_ballots_and_cuda_shuffles_against_a_model(rng):
    n = 4 * THREADS
    p, v64 = _vote_inputs(rng, n)
    v8 = rng.integers(-128, 128, n).astype(np.int8)
    out = np.zeros((19, n), np.int64)
    masks = np.zeros((5, n), np.uint64)
    votes[4, THREADS](p, v64, v8, out, masks)
    members, size = _subgroups(out[10:13])
    expect = np.zeros((19, n), np.int64)
    emasks = np.zeros((5, n), np.uint64)
    lanes = np.arange(size)
    even = lanes % 2 == 0
    for order in members:
        q, v = p[order] != 0, v64[order]
        expect[0, order] = q.all()
        expect[1, order] = q.any()
        expect[2, order] = (v == v[0]).all()
        expect[3, order] = q[even].all()
        expect[4, order] = q[even].any()
        expect[5, order] = q[even].all() or not q[even].any()
        expect[6, order] = order[5 % size]
        expect[7, order] = np.where(lanes >= 1, order[np.maximum(lanes - 1, 0)], order)
        expect[8, order] = np.where(lanes + 1 < size, order[np.minimum(lanes + 1, size - 1)],
                                    order)
        expect[9, order] = np.where((lanes ^ 2) < size, order[np.minimum(lanes ^ 2, size - 1)],
                                    order)
        expect[13, order] = q[lanes ^ 1] if size > 1 else q
        # int8 sums wrap; minima compare signed values.
        expect[14, order] = v8[order].astype(np.int64).sum().astype(np.int8)
        expect[15, order] = np.minimum.accumulate(v8[order])
        m = p[order] * 2 + (v8[order] & 1)
        expect[16, order] = [sum(1 << k for k in range(min(size, 32)) if m[k] == m[j])
                             for j in lanes]
        agree = len(set(p[order][even & (lanes < 32)])) == 1
        expect[17, order] = EVEN if agree else 0
        expect[18, order] = agree
        bits = sum(int(t) << int(k) for k, t in zip(lanes, q) if k < 64)
        emasks[0, order] = bits
        emasks[1, order] = bits & 0xFFFFFFFF
        emasks[2, order] = bits & 0x0F0F0F0F
        emasks[3, order] = (1 << min(size, 32)) - 1
        emasks[4, order] = [(1 << min(k, 32)) - 1 for k in lanes]
    for row in [*range(10), *range(13, 19)]:
        np.testing.assert_array_equal(out[row], expect[row], err_msg=f"row {row}")
    for row in range(emasks.shape[0]):
        np.testing.assert_array_equal(masks[row], emasks[row], err_msg=f"mask row {row}")
    for kernel in compiled_kernels(votes):
        assert_valid_spirv(kernel)
        # 64-bit shuffles and votes go as 32-bit halves, int8 as 32 bits.
        assert "subgroup_extended_types" not in modulecheck.subgroup_features(kernel.spirv)


@nv.jit
def _bit_rows(out, row, i, x):
    out[row, i] = nv.popc(x)
    out[row + 1, i] = nv.brev(x)
    out[row + 2, i] = cuda.clz(x)
    out[row + 3, i] = cuda.ffs(x)


@nv.jit
def bits(x32, xu32, x64, x8, out):
    i = nv.global_id(0)
    _bit_rows(out, 0, i, x32[i])
    _bit_rows(out, 4, i, xu32[i])
    _bit_rows(out, 8, i, x64[i])
    _bit_rows(out, 12, i, x8[i])


def _bits_model(x, width):
    u = int(x) % (1 << width)
    # brev, as numba.cuda's: of a signed or narrow integer, its low 32 bits.
    word = int(x) % (1 << 32)
    return [bin(u).count("1"), int(f"{word:032b}"[::-1], 2),
            width - u.bit_length(), (u & -u).bit_length()]


def test_bit_functions_against_python_integers(rng):
    n = 64
    special = [0, 1, -1, 2, 3, 256, -256]
    x64 = np.concatenate([special, [2**63 - 1, -2**63, 2**32, 2**40 + 1],
                          rng.integers(-2**63, 2**63, n - 11, dtype=np.int64)]).astype(np.int64)
    x32 = x64.astype(np.int32)
    xu32 = x64.astype(np.uint32)
    x8 = x64.astype(np.int8)
    out = np.zeros((16, n), np.uint64)
    bits[1, n](x32, xu32, x64, x8, out)
    for k, (x, width) in enumerate(((x32, 32), (xu32, 32), (x64, 64), (x8, 8))):
        expect = np.array([_bits_model(v, width) for v in x], dtype=np.uint64).T
        for j in range(4):
            got = out[4 * k + j]
            np.testing.assert_array_equal(got, expect[j], err_msg=f"{x.dtype} function {j}")


# The acceptance programs ---------------------------------------------------------

@cuda.jit
def warp_sum(x, total):
    i = cuda.grid(1)
    v = x[i] if i < x.shape[0] else 0
    offset = cuda.warpsize // 2
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        cuda.atomic.add(total, 0, v)


def test_a_warp_shuffle_reduction_matches_numpy(rng):
    x = rng.integers(-1000, 1000, 1000).astype(np.int32)
    total = np.zeros(1, np.int64)
    warp_sum[16, 64](x, total)
    assert total[0] == x.sum()


@nv.jit
def compact(x, out, count):
    i = nv.global_id(0)
    keep = False
    if i < x.shape[0]:
        keep = x[i] % 3 == 0
    mask = nv.subgroup.ballot(keep)
    lane = np.uint64(nv.subgroup.local_id())
    rank = np.int64(nv.popc(mask & ((np.uint64(1) << lane) - np.uint64(1))))
    base = 0
    if lane == 0:
        base = nv.atomic.add(count, 0, np.int64(nv.popc(mask)))
    base = nv.subgroup.broadcast(base, 0)
    if keep:
        out[base + rank] = x[i]


def test_a_ballot_stream_compaction_matches_numpy(rng):
    x = rng.integers(0, 10_000, 1000).astype(np.int64)
    out = np.full(x.size, -1, np.int64)
    count = np.zeros(1, np.int64)
    compact[16, 64](x, out, count)
    kept = x[x % 3 == 0]
    assert count[0] == kept.size
    np.testing.assert_array_equal(np.sort(out[:kept.size]), np.sort(kept))
    assert (out[kept.size:] == -1).all()


AOT_KERNEL = '''
import numba_vulkan as nv


@nv.jit
def scan(x, out):
    i = nv.global_id(0)
    out[0, i] = nv.subgroup.inclusive_add(x[i])
    out[1, i] = nv.subgroup.shuffle_up(x[i], 1)
    out[2, i] = nv.subgroup.id()
    out[3, i] = nv.subgroup.local_id()
'''


def test_a_subgroup_kernel_runs_from_an_aot_directory(tmp_path, monkeypatch):
    import importlib.util
    from numba_vulkan.aot.loader import index
    (tmp_path / "sgkern.py").write_text(AOT_KERNEL)
    (tmp_path / "kernels.yaml").write_text(
        'version: 1\noutput: aot\ntarget_env: vulkan1.2\nprofiles:\n  - name: full\n'
        'kernels:\n  - function: sgkern:scan\n    signatures: ["void(int32[::1], int32[:, ::1])"]\n'
        '    threads: [[64]]\n')
    run_python("-m", "numba_vulkan.aot", "build", "kernels.yaml", "-j", "1", "--quiet",
               cwd=tmp_path, env={"VK_ICD_FILENAMES": "/nonexistent/icd.json"})
    with open(tmp_path / "aot" / index.INDEX, "rb") as f:
        entry, = index.parse(f.read(), "aot")["entries"]
    assert {"subgroup_arithmetic", "subgroup_shuffle_relative"} <= set(entry["features"])
    spec = importlib.util.spec_from_file_location("sgkern_copy", tmp_path / "sgkern.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.delenv("NUMBA_VULKAN_AOT_PATH", raising=False)
    monkeypatch.setenv("NUMBA_VULKAN_AOT_STRICT", "1")
    label = nv.aot.register(str(tmp_path / "aot"))
    try:
        hits = nv.aot.stats()["hits"]
        x = np.arange(N, dtype=np.int32) % 7
        out = np.zeros((4, N), np.int32)
        module.scan[GROUPS, THREADS](x, out)
        assert nv.aot.stats()["hits"] == hits + 1
    finally:
        nv.aot.unregister(label)
    where = np.vstack([out[2:4], np.full(N, out[3].max() + 1, np.int32)])
    members, size = _subgroups(where)
    for order in members:
        np.testing.assert_array_equal(out[0, order], np.cumsum(x[order]))
        np.testing.assert_array_equal(out[1, order], np.concatenate([x[order][:1],
                                                                     x[order][:-1]]))


def test_kernels_with_64_bit_values_compile_for_a_narrowed_target():
    """Where int64 is narrowed nothing is split into halves (narrowing refuses
    shifts by 32): 64-bit values are 32-bit there, ballots hold lanes 0 to 31."""
    import warnings
    from numba_vulkan.base.request import KernelRequest
    from numba_vulkan.compiler import stages
    from numba_vulkan.base.target import TargetDescription
    narrow = TargetDescription(vulkan=(1, 2), float64=False, int64=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nv.NarrowingWarning)
        for kernel, sig in ((votes, ("int32[1d,C]", "int64[1d,C]", "int8[1d,C]",
                                     "int64[2d,C]", "uint64[2d,C]")),
                            (bits, ("int32[1d,C]", "uint32[1d,C]", "int64[1d,C]",
                                    "int8[1d,C]", "uint64[2d,C]"))):
            compiled = stages.compile(KernelRequest(kernel.py_func, sig, (64, 1, 1), narrow))
            assert_valid_spirv(compiled)
            assert "Int64" not in compiled.capabilities
