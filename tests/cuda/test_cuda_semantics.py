"""numba.cuda programs whose results used to be silently wrong here: each test
checks the result numba.cuda's documentation and typing promise, computed
on the host in plain Python."""

import math

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan import cuda
from numba_vulkan.cuda import libdevice

INT_TYPES = (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64)


# Bit functions -----------------------------------------------------------------

def _bits_of(value, width):
    return int(value) % (1 << width)


def _expected_bits(value, dtype):
    """numba.cuda's popc, clz and ffs of ``value`` in its own width, and its
    brev: a uint64's 64 bits, any other integer's as a uint32 (truncated)."""
    width = np.dtype(dtype).itemsize * 8
    bits = _bits_of(value, width)
    popc = bin(bits).count("1")
    clz = width - bits.bit_length()
    ffs = (bits & -bits).bit_length()
    brev_width = 64 if dtype is np.uint64 else 32
    word = _bits_of(value, brev_width)
    brev = int(f"{word:0{brev_width}b}"[::-1], 2)
    return popc, clz, ffs, brev


@cuda.jit
def bit_functions(values, popc, clz, ffs, brev):
    i = cuda.grid(1)
    if i < values.size:
        popc[i] = cuda.popc(values[i])
        clz[i] = cuda.clz(values[i])
        ffs[i] = cuda.ffs(values[i])
        brev[i] = cuda.brev(values[i])


@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda t: np.dtype(t).name)
def test_bit_functions_at_every_width(dtype, rng):
    info = np.iinfo(dtype)
    width = info.bits
    chosen = [0, 1, -1, info.min, info.max, 0x30F0, 1 << (width - 2), 3 << (width // 2)]
    chosen += [int(v) for v in rng.integers(0, 1 << min(width, 63), 8, dtype=np.int64)]
    values = np.array([_bits_of(v, width) for v in chosen], dtype=np.uint64).astype(dtype)
    outs = [np.zeros(values.size, np.int64) for _ in range(3)] + [np.zeros(values.size,
                                                                           np.uint64)]
    bit_functions[1, 32](values, *outs)
    for k, value in enumerate(values):
        got = tuple(int(out[k]) for out in outs)
        assert got == _expected_bits(value, dtype), (np.dtype(dtype).name, hex(int(value)))


@cuda.jit
def bits_of_constants(out):
    out[0] = cuda.brev(np.uint32(0x30F0))
    out[1] = cuda.clz(np.uint32(0x00100000))
    out[2] = cuda.clz(np.int32(-1))
    # A Python int is an int64: brev converts it to uint32, as numba.cuda's.
    out[3] = cuda.brev(0x30F0)
    out[4] = libdevice.brev(0x30F0)
    out[5] = libdevice.clz(0x00100000)
    out[6] = libdevice.popc(-1)
    out[7] = libdevice.popcll(-1)
    out[8] = libdevice.ffs(1 << 40)
    out[9] = libdevice.ffsll(1 << 40)
    out[10] = libdevice.brevll(1)
    out[11] = libdevice.clzll(1)


def test_bit_functions_of_32_bit_values_and_libdevice_forms():
    out = np.zeros(12, np.int64)
    bits_of_constants[1, 1](out)
    assert [int(v) for v in out] == [0x0F0C0000, 11, 0, 0x0F0C0000, 0x0F0C0000, 11, 32, 64,
                                     0, 41, -2 ** 63, 63]


# Records are passed by reference ---------------------------------------------

POINT = np.dtype([("x", "f4"), ("n", "i2")])
BODY = np.dtype([("a", "f8"), ("v", "f4", (3,)), ("p", POINT), ("k", "i4")])


@cuda.jit
def set_fields(r, value):
    r.a = value
    r.k += 1
    r.p.x = value * 2
    r.v[1] = value + 1


@cuda.jit
def copy_parts(dst, src):
    dst.p = src.p                   # a nested record assigned whole
    for j in range(3):
        dst.v[j] = src.v[j]


def test_a_records_writes_reach_the_array_it_is_an_element_of():
    arr = np.zeros(4, BODY)
    arr["k"] = np.arange(4)
    set_fields[1, 1](arr[2], 1.5)
    assert arr[2]["a"] == 1.5 and arr[2]["k"] == 3 and arr[2]["p"]["x"] == 3.0
    assert list(arr[2]["v"]) == [0, 2.5, 0]
    assert list(arr["k"]) == [0, 1, 3, 3] and list(arr["a"]) == [0, 0, 1.5, 0]
    grid = np.zeros((2, 3), BODY)
    copy_parts[1, 1](grid[1, 2], arr[2])           # an element of a 2-d array
    assert grid[1, 2]["p"]["x"] == 3.0 and list(grid[1, 2]["v"]) == [0, 2.5, 0]
    assert grid["p"]["x"].sum() == 3.0


# forall ------------------------------------------------------------------------

@nv.jit
def index_2d(out):
    i, j = nv.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = 100 * i + j


@nv.jit
def index_3d(out):
    i, j, k = nv.grid(3)
    if i < out.shape[0] and j < out.shape[1] and k < out.shape[2]:
        out[i, j, k] = 10000 * i + 100 * j + k


@cuda.jit
def index_1d(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = i


def test_native_forall_takes_a_shape_and_cuda_forall_an_int():
    out = np.full((37, 21), -1, np.int64)
    index_2d.forall(out.shape)(out)
    np.testing.assert_array_equal(out, 100 * np.arange(37)[:, None] + np.arange(21))
    out3 = np.full((5, 19, 3), -1, np.int64)
    index_3d.forall(out3.shape, threads=(2, 4, 2))(out3)
    i, j, k = np.indices(out3.shape)
    np.testing.assert_array_equal(out3, 10000 * i + 100 * j + k)
    index_2d.forall((0, 5))(np.zeros((0, 5), np.int64))
    with pytest.raises(TypeError, match="ntasks must be an int"):
        index_1d.forall((4,))
    with pytest.raises(TypeError, match="n must be an int or a shape"):
        index_2d.forall((2, 2.5))
    with pytest.raises(ValueError, match="must not be negative"):
        index_2d.forall((3, -1))


# grid and gridsize are 64-bit -------------------------------------------------

@cuda.jit
def last_index(out):
    i = cuda.grid(1)
    if i == cuda.gridsize(1) - 1:
        out[0] = i
        out[1] = cuda.gridsize(1)


def test_grid_is_computed_in_64_bits():
    # Vulkan's GlobalInvocationId is 32-bit: read directly, it would wrap
    # past 2^32 invocations; numba.cuda's grid(1) is 64-bit.
    llvm = last_index.inspect_llvm(("int64[1d,C]",))
    assert "llvm.spv.thread.id.i32" not in llvm
    assert "@llvm.spv.group.id.i32" in llvm


def test_grid_past_two_to_the_32_invocations():
    threads = 1024
    groups = (1 << 32) // threads + 3
    info = cuda.get_current_device()
    if info.MAX_GRID_DIM_X < groups or info.MAX_THREADS_PER_BLOCK < threads:
        pytest.skip("the device cannot launch 2^32 invocations along x (lavapipe: 65535 "
                    "workgroups)")
    out = np.zeros(2, np.int64)
    last_index[groups, threads](out)
    assert list(out) == [groups * threads - 1, groups * threads]


# Exceptions and math of integers ----------------------------------------------

class NegativeInput(ValueError):
    """A user's exception class, raised in a kernel."""


@cuda.jit(debug=True)
def checked_sqrt(x, out):
    i = cuda.grid(1)
    if i < x.size:
        if x[i] < 0:
            raise NegativeInput("negative input")
        out[i] = math.sqrt(x[i])


def test_a_users_exception_class_reaches_the_host_as_that_class():
    x = np.array([4.0, -1.0, 9.0])
    with pytest.raises(NegativeInput, match="negative input"):
        checked_sqrt[1, 4](x, np.zeros(3))


@cuda.jit
def gamma_of_ints(out, n):
    out[0] = math.gamma(n)
    out[1] = math.gamma(7)
    out[2] = math.gamma(np.uint8(4))


def test_gamma_of_an_integer_is_float64_gamma():
    out = np.zeros(3)
    gamma_of_ints[1, 1](out, 5)
    np.testing.assert_array_equal(out, [24.0, 720.0, 6.0])


# Code written for 32-lane warps ----------------------------------------------

@cuda.jit
def warp_sums_32(x, out):
    # numba.cuda code as written for 32-lane warps: offsets 16, 8, 4, 2, 1.
    i = cuda.grid(1)
    v = x[i]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.threadIdx.x % 32 == 0:
        out[i // 32] = v


def test_a_shuffle_by_16_is_right_on_32_lanes_or_refused_on_fewer():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(2, np.float32)
    if cuda.get_current_device().WARP_SIZE >= 32:
        warp_sums_32[1, 64](x, out)
        np.testing.assert_array_equal(out, x.reshape(2, 32).sum(axis=1))
    else:
        with pytest.raises(nv.LaunchError, match=r"warp_sums_32 is written for 32-lane warps "
                           r"\(.*shfl_down_sync by 16\)"):
            warp_sums_32[1, 64](x, out)


@cuda.vectorize(["float64(float64)", "int32(int32)"])
def doubled(x):
    return x * 2


def test_a_ufunc_takes_the_loop_of_the_arrays_exact_type_first():
    # numba.cuda matches array types exactly: the int32 loop, not the first
    # one int32 casts to safely.
    got = doubled(np.arange(4, dtype=np.int32))
    assert got.dtype == np.int32 and list(got) == [0, 2, 4, 6]
    # Where nothing matches exactly (numba.cuda refuses), NumPy's safe rule.
    assert doubled(np.arange(3, dtype=np.int16)).dtype == np.float64
    assert doubled(np.arange(3, dtype=np.float64)).dtype == np.float64
