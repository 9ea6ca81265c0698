"""Known gaps (docs/limitations.md), each reproduced by an xfail test."""

import importlib
import os
import re

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.runtime.device import current_device
from numba_vulkan.store import keys
from tests.helpers import ROOT, run_python


@nv.jit
def _fill(out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = 1


@pytest.mark.xfail(strict=True, raises=nv.LaunchError,
                   reason="shapes travel as 32-bit integers")
def test_arrays_beyond_int32_elements():
    class Huge:
        dtype = np.dtype(np.uint8)
        shape = (2 ** 31 + 8,)
        strides = (1,)
    from numba_vulkan.runtime.pipeline import Pipeline
    k = _fill.compile("void(uint8[::1])")
    from numba_vulkan.runtime.device import current_device
    p = Pipeline(current_device(), k.spirv, k.params, k.push_size)
    p.pack([1, 1, 1, Huge.shape[0], 1, 0])


@pytest.mark.xfail(strict=True, reason="float64 atomics use a compare-and-swap loop")
def test_native_float64_atomic_add():
    @nv.jit
    def accumulate(total, x):
        nv.atomic.add(total, 0, x[nv.global_id(0)])

    k = accumulate.compile("void(float64[::1], float64[::1])")
    assert "OpAtomicFAddEXT" in k.disassemble()


@pytest.mark.xfail(strict=True, raises=nv.CompilerError,
                   reason="workgroup arrays need a shape known at compile time")
def test_workgroup_array_sized_at_launch():
    @nv.jit
    def scratch(out, n):
        s = nv.shared.array(n, np.float32)
        s[nv.local_id(0)] = 1
        nv.barrier()
        out[nv.global_id(0)] = s[0]

    scratch.forall(64)(np.zeros(64, np.float32), 64)


@pytest.mark.xfail(strict=True, raises=nv.UnsupportedError,
                   reason="Vulkan has no atomics on private memory")
def test_atomics_on_private_arrays():
    @nv.jit
    def private_count(out):
        a = nv.local.array(4, np.int32)
        for k in range(4):
            a[k] = 0
        nv.atomic.add(a, out.shape[0] % 4, 1)
        out[nv.global_id(0)] = a[0]

    private_count.forall(64)(np.zeros(64, np.int32))


@pytest.mark.xfail(strict=True, raises=nv.CompilerError,
                   reason="device functions are inlined into the kernel")
def test_recursive_device_function():
    @nv.jit
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    @nv.jit
    def kernel(out):
        out[0] = fact(5)

    kernel[1, 1](np.zeros(1, np.int64))


@pytest.mark.xfail(strict=True, reason="float64 lgamma is accurate to ULPs of 1, not of its "
                                        "value, near its negative roots")
def test_lgamma_relative_accuracy_near_negative_roots():
    import math

    @nv.jit
    def lgamma(x, out):
        i = nv.global_id(0)
        if i < x.shape[0]:
            out[i] = math.lgamma(x[i])

    # Correctly rounded values (mpmath, 300 bits) next to lgamma's roots
    # between -3 and -2 and -4 and -3.
    x = np.array([-2.4570247, -2.747682646727412, -3.1435808883499794])
    want = np.array([5.792758455100296e-08, -1.5269335982066952e-15, 5.153716599585995e-15])
    out = np.zeros_like(x)
    lgamma.forall(x.size)(x, out)
    assert np.all(np.abs(out - want) <= 8 * np.spacing(np.abs(want)))


@pytest.mark.xfail(strict=True, reason="modules do not ask for DenormPreserve")
def test_modules_preserve_subnormals():
    @nv.jit
    def halve(x):
        i = nv.global_id(0)
        if i < x.shape[0]:
            x[i] = x[i] * 0.5

    assert "DenormPreserve" in halve.compile("void(float64[::1])").disassemble()


@pytest.mark.xfail(strict=True, raises=nv.CompilerError, reason="Numba has no math.isclose")
def test_math_isclose():
    import math

    @nv.jit
    def close(a, b, out):
        i = nv.global_id(0)
        if i < a.shape[0]:
            out[i] = math.isclose(a[i], b[i])

    close.compile("void(float64[::1], float64[::1], boolean[::1])")


@pytest.mark.xfail(strict=True, reason="exceptions reach the host only with error checks")
def test_raise_without_checks_reaches_the_host():
    @nv.jit
    def check(x):
        i = nv.global_id(0)
        if i < x.shape[0] and x[i] < 0:
            raise ValueError("negative")

    with pytest.raises(ValueError):
        check.forall(4)(np.array([1.0, -1.0, 2.0, 3.0]))


@pytest.mark.xfail(strict=True, raises=nv.UnsupportedError,
                   reason="int64 narrowed to int32 cannot shift by 32 or more")
def test_narrowed_int64_shift_by_40():
    @nv.jit
    def shift(x):
        i = nv.global_id(0)
        if i < x.shape[0]:
            x[i] = x[i] >> 40

    shift.compile("void(int64[::1])", target=nv.TargetDescription(float64=False, int64=False))


@pytest.mark.xfail(strict=True, reason="a counter compared with a 32-bit value runs in 32 bits")
def test_counter_stepped_past_2_to_the_31_in_one_invocation():
    # Run with x = 3e9, n would pass 2^31 and wrap, and ``n > k`` would stop
    # counting there; that takes 3e9 trips of one loop in one invocation, so
    # the test reads the compiled code for the counter that would wrap.
    @nv.jit
    def tally(out, x, k):
        n = 0
        v = 0.0
        while v < x:
            v += 1.0
            n += 1
            if n > k:
                out[1] += 1
        out[0] = n

    # Without lavapipe's loop limit: there the loop is unrolled and its
    # counter stays 64-bit.
    compiled = tally.compile("void(int32[::1], float64, int32)",
                             target=current_device().target.with_features(loop_limit=0))
    counter = [line for line in compiled.llvm_ir.splitlines()
               if line.lstrip().startswith("%n.2.0") and " phi " in line]
    assert len(counter) == 1 and " phi i64 " in counter[0]


def test_lavapipe_loops_of_divergent_lanes(request):
    # Even lanes loop n times in the first loop, odd lanes in the second:
    # each lane counts n, the SIMD group 2 n, and lavapipe cuts the second
    # loop without any lane having counted to its limit.
    if current_device().target.loop_limit == 0:
        pytest.skip("the device has no loop limit")
    request.applymarker(pytest.mark.xfail(
        strict=True, reason="lavapipe counts loop trips per SIMD group, the check per lane"))

    @nv.jit
    def alternate(out, x, n):
        i = nv.global_id(0)
        s = 0
        first = n if i % 2 == 0 else 0
        second = n if i % 2 == 1 else 0
        for k in range(first):
            s += x[k & 7]
        for k in range(second):
            s += x[k & 7]
        out[i] = s

    out = np.zeros(16, np.int64)
    alternate[1, 16](out, np.ones(8, np.int64), 600000)
    assert (out == 600000).all()


@pytest.mark.xfail(strict=True, raises=AttributeError, reason="ufuncs have no accumulate")
def test_ufunc_accumulate():
    @nv.vectorize(["float32(float32, float32)"])
    def add(a, b):
        return a + b

    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(add.accumulate(x), np.cumsum(x))


@pytest.mark.xfail(strict=True, reason="the target is registered only with Numba loaded")
def test_numba_vectorize_with_numba_imported_last():
    script = ("import numba_vulkan, numba\n"
              "numba.vectorize(['float32(float32)'], target='vulkan')(lambda x: x)\n")
    run = run_python("-c", script, timeout=120, check=False)
    assert run.returncode == 0, run.stderr


@pytest.mark.xfail(strict=True, reason="an AOT key is the content of the code the kernel "
                   "reaches, which no @overload implementation is part of")
def test_aot_key_sees_an_edited_overload():
    from numba.extending import overload

    def key(step):
        namespace = {"nv": nv}
        exec("def bump(v):\n    raise NotImplementedError\n"
             "def kern(x):\n    x[0] = bump(x[0])\n", namespace)

        @overload(namespace["bump"], target="generic")
        def _bump(v):
            return lambda v: v + step
        return keys.content_key(nv.jit(namespace["kern"]))
    assert key(1.0) != key(2.0)


_FLOAT16_WITHOUT_STORAGE = '''
import numpy as np
import numba_vulkan as nv

@nv.jit
def double(x):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] = x[i] * np.float16(2)

x = np.arange(8, dtype=np.float16)
double.forall(8)(x)
assert np.array_equal(x, np.arange(8, dtype=np.float16) * 2)
'''


@pytest.mark.xfail(strict=True, reason="float16 arrays need storageBuffer16BitAccess")
def test_float16_arrays_without_16_bit_storage():
    child = run_python("-c", _FLOAT16_WITHOUT_STORAGE, check=False,
                       env={"NUMBA_VULKAN_MASK_FEATURES": "storage16"})
    assert child.returncode == 0, child.stderr[-2000:]


_BYTES_WITHOUT_STORAGE = '''
import numpy as np
import numba_vulkan as nv

@nv.jit
def flip(x):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] = not x[i]

x = np.arange(8) % 3 == 0
flip.forall(8)(x)
assert np.array_equal(x, np.arange(8) % 3 != 0)
'''


@pytest.mark.xfail(strict=True, reason="int8, uint8 and bool arrays need storageBuffer8BitAccess")
def test_8_bit_arrays_without_8_bit_storage():
    child = run_python("-c", _BYTES_WITHOUT_STORAGE, check=False,
                       env={"NUMBA_VULKAN_MASK_FEATURES": "storage8"})
    assert child.returncode == 0, child.stderr[-2000:]


@pytest.mark.xfail(strict=True, raises=nv.CompilerError, reason="no float16 atomics")
def test_float16_atomic_add():
    @nv.jit
    def total(out, x):
        nv.atomic.add(out, 0, x[nv.global_id(0)])

    out = np.zeros(1, np.float16)
    total[1, 8](out, np.ones(8, np.float16))
    assert out[0] == 8


@pytest.mark.xfail(strict=True, raises=nv.CompilerError,
                   reason="print takes numbers, booleans and constant strings, no keywords")
@pytest.mark.parametrize("source", ['print(x[0], x[1], sep=",")', "print((x[0], x[1]))"])
def test_print_with_keywords_or_a_tuple(source, capsys):
    namespace = {"nv": nv}
    exec(f"def show(x):\n    {source}\n", namespace)
    nv.jit(namespace["show"]).forall(1)(np.array([1, 2], np.int32))
    assert capsys.readouterr().out in ("1,2\n", "(1, 2)\n")


_RECORD = np.dtype([("x", "f4"), ("n", "i4"), ("h", "i4", (4,))])


@nv.jit
def _record_copy(a, b):
    i = nv.global_id(0)
    if i < a.shape[0]:
        b[i] = a[i]


@pytest.mark.xfail(strict=True, raises=TypeError, reason="record fields are numbers")
def test_record_with_a_string_field():
    a = np.zeros(2, [("s", "S4"), ("x", "f4")])
    a["s"] = b"abc"
    _record_copy.forall(2)(a, out := np.zeros_like(a))
    assert (out["s"] == b"abc").all()


@pytest.mark.xfail(strict=True, reason="a whole record is copied as its bytes")
def test_whole_record_assignment_of_an_odd_itemsize_is_not_byte_wise():
    from numba_vulkan.base import records
    odd = np.dtype([("x", "f4"), ("c", "i1")])             # 5 bytes
    k = _record_copy.compile((f"{records.text(odd)}[1d,C]",) * 2)
    assert "VulkanBuffer_a0i8" not in k.llvm_ir


@pytest.mark.xfail(strict=True, raises=nv.UnsupportedError,
                   reason="narrowing a field would move the fields after it")
def test_record_with_float64_on_a_narrowing_target():
    from numba_vulkan.base import records
    from numba_vulkan.base.target import TargetDescription
    wide = np.dtype([("x", "f4"), ("d", "f8")])
    _record_copy.compile((f"{records.text(wide)}[1d,C]",) * 2,
                         target=TargetDescription(float64=False, int64=False))


@pytest.mark.xfail(strict=True, raises=nv.UnsupportedError,
                   reason="a misaligned field is accessed byte by byte")
def test_atomic_on_a_misaligned_record_field():
    packed = np.dtype([("c", "i1"), ("h", "i4", (2,))])

    @nv.jit
    def count(a):
        nv.atomic.add(a[0].h, 0, 1)

    a = np.zeros(1, packed)
    count.forall(16)(a)
    assert a[0]["h"][0] == 16



# numba.cuda's API (issue 24's items not done) ------------------------------


@pytest.mark.xfail(strict=True, raises=TypeError, reason="tuples passed hold numbers only")
def test_tuple_of_arrays_as_an_argument():
    from numba_vulkan import cuda

    @cuda.jit
    def total(pair, out):
        a, b = pair
        out[0] = a[0] + b[0]

    out = np.zeros(1)
    total[1, 1]((np.ones(2), np.ones(2)), out)
    assert out[0] == 2


@pytest.mark.xfail(strict=True, raises=TypeError, reason="no datetime64 arrays in kernels")
def test_datetime64_arrays():
    from numba_vulkan import cuda

    @cuda.jit
    def next_day(a, b):
        i = cuda.grid(1)
        if i < a.size:
            b[i] = a[i] + np.timedelta64(1, "D")

    a = np.array(["2020-01-01", "2021-01-01"], "datetime64[D]")
    b = np.empty_like(a)
    next_day[1, 2](a, b)


@pytest.mark.xfail(strict=True, raises=nv.UnsupportedError,
                   reason="device arrays are C-ordered")
def test_fortran_order_device_array():
    from numba_vulkan import cuda
    d = cuda.device_array((2, 3), order="F")
    assert d.flags["F_CONTIGUOUS"]


@pytest.mark.xfail(strict=True, raises=AttributeError, reason="no reductions on DeviceArray")
def test_device_array_sum_on_the_host():
    from numba_vulkan import cuda
    assert cuda.to_device(np.ones(4)).sum() == 4


@pytest.mark.xfail(strict=True, raises=nv.CompilerError, reason="int.bit_count is not typed")
def test_int_bit_count_in_a_kernel():
    from numba_vulkan import cuda

    @cuda.jit
    def bits(a):
        a[0] = int(a[1]).bit_count()

    a = np.array([0, 7], np.int64)
    bits[1, 1](a)
    assert a[0] == 3


@pytest.mark.xfail(strict=True, raises=AttributeError, reason="no bfloat16")
def test_bfloat16():
    from numba_vulkan import cuda
    assert cuda.bf16


@pytest.mark.xfail(strict=True, reason="libclc's float64 erfc is 3 ULP off here")
def test_erfc_float64_within_2_ulp():
    import math

    @nv.jit
    def erfc(x, out):
        out[0] = math.erfc(x[0])

    x, out = np.array([1.23203585843258]), np.zeros(1)
    erfc.forall(1)(x, out)
    ref = math.erfc(x[0])
    assert abs(out[0] - ref) <= 2 * np.spacing(ref)


@pytest.mark.xfail(strict=True, raises=nv.CompilerError,
                   reason="captured device arrays are passed to kernels, not device functions")
def test_device_function_reading_a_global_device_array():
    from numba_vulkan import cuda
    table = cuda.to_device(np.arange(4.0))
    globals()["_TABLE"] = table

    @cuda.jit(device=True)
    def look(i):
        return _TABLE[i]  # noqa: F821

    @cuda.jit
    def kernel(out):
        out[0] = look(2)

    out = np.zeros(1)
    kernel[1, 1](out)
    assert out[0] == 2



def test_every_limitation_names_an_xfail_test_and_every_xfail_test_is_named():
    with open(os.path.join(ROOT, "docs", "limitations.md")) as f:
        entries = re.split(r"\n- ", f.read())[1:]
    named = [re.findall(r"Test:\s+`(tests/(?:\w+/)*test_\w+)\.py::(test_\w+)`", e)
             for e in entries]
    assert all(named), [e[:60] for e, n in zip(entries, named) if not n]
    named = {n for found in named for n in found}
    ours = {name for name, value in globals().items()
            if name.startswith("test_") and any(m.name == "xfail" for m in
                                                 getattr(value, "pytestmark", ()))}
    ours.add("test_lavapipe_loops_of_divergent_lanes")     # xfail on lavapipe only
    here = __name__.replace(".", "/")
    assert ours == {test for path, test in named if path == here}
    for path, test in named:
        function = getattr(importlib.import_module(path.replace("/", ".")), test)
        assert test in ours or any(m.name == "xfail" for m in function.pytestmark), test


def _warp_lanes():
    return current_device().info.subgroup_size


@pytest.mark.xfail("_warp_lanes() < 32", strict=True,
                   reason="a ballot of 32 lanes is taken over the device's subgroup")
def test_ballot_code_written_for_32_lane_warps():
    from numba_vulkan import cuda

    @cuda.jit
    def ones_before(keys, rank, warp_ones):
        # A radix pass's split by one bit, per 32-lane warp, as numba.cuda
        # code writes it: lane and warp from the thread index.
        tid = cuda.threadIdx.x
        lane, warp = tid % 32, tid // 32
        bit = keys[tid] & 1
        ones = cuda.ballot_sync(0xFFFFFFFF, bit == 1)
        rank[tid] = cuda.popc(ones & ((np.uint32(1) << lane) - np.uint32(1)))
        if lane == 0:
            warp_ones[warp] = cuda.popc(ones)

    keys = np.random.default_rng(3).integers(0, 1 << 20, 64).astype(np.int32)
    rank, warp_ones = np.zeros(64, np.int32), np.zeros(2, np.int32)
    ones_before[1, 64](keys, rank, warp_ones)
    bits = (keys & 1).reshape(2, 32)
    np.testing.assert_array_equal(warp_ones, bits.sum(axis=1))
    np.testing.assert_array_equal(rank, (np.cumsum(bits, axis=1) - bits).ravel())
