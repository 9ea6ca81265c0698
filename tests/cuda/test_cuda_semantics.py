"""numba.cuda programs whose results used to be silently wrong here: each test
checks the result numba.cuda's documentation and typing promise, computed
on the host in plain Python."""

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
