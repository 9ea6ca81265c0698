"""numba.cuda.random on numba_vulkan: xoroshiro128+ generators, one per
invocation, giving numba.cuda's sequences.

The generator is Blackman and Vigna's public xoroshiro128+ (rotations 55,
14, 36; its 2^64-step jump), seeded by splitmix64 as numba.cuda seeds it:
generator ``i`` starts ``subsequence_start + i`` jumps after the seeded
state, so the streams of different invocations do not overlap.

The states are a device array of shape ``(n, 2)`` of uint64 (numba.cuda's is
a record array); kernels only pass it and an index to the functions below.
The functions are ``numba.njit`` functions, which kernels call as device
functions and the host can call on a NumPy state array.
"""

import math

import numba
import numpy as np

from numba_vulkan.runtime import memory as _memory

__all__ = ["create_xoroshiro128p_states", "init_xoroshiro128p_states",
           "xoroshiro128p_uniform_float32", "xoroshiro128p_uniform_float64",
           "xoroshiro128p_normal_float32", "xoroshiro128p_normal_float64",
           "xoroshiro128p_next", "xoroshiro128p_jump"]

# Shift amounts are uint32 so that Numba keeps uint64 arithmetic in uint64
# (uint64 with a signed int would be float64).
_U = np.uint32
_JUMP = (np.uint64(0xBEAC0467EBA5FACB), np.uint64(0xD86B048B86AA9922))
_TWO_PI_32 = np.float32(2 * math.pi)
_TWO_PI_64 = np.float64(2 * math.pi)
_UNIT = np.float64(1.0) / np.float64(2.0 ** 53)


@numba.njit
def _rotl(x, k):
    return (x << k) | (x >> (_U(64) - k))


@numba.njit
def xoroshiro128p_next(states, index):
    """Advance generator ``index`` one step; return its 64-bit output."""
    s0 = states[index, 0]
    s1 = states[index, 1]
    result = s0 + s1
    s1 ^= s0
    states[index, 0] = _rotl(s0, _U(55)) ^ s1 ^ (s1 << _U(14))
    states[index, 1] = _rotl(s1, _U(36))
    return result


@numba.njit
def xoroshiro128p_jump(states, index):
    """Advance generator ``index`` 2^64 steps."""
    s0 = np.uint64(0)
    s1 = np.uint64(0)
    for word in _JUMP:
        for bit in range(64):
            if word & (np.uint64(1) << _U(bit)):
                s0 ^= states[index, 0]
                s1 ^= states[index, 1]
            xoroshiro128p_next(states, index)
    states[index, 0] = s0
    states[index, 1] = s1


@numba.njit
def _to_unit_float64(x):
    return np.float64(x >> _U(11)) * _UNIT


@numba.njit
def xoroshiro128p_uniform_float64(states, index):
    """A float64 in [0, 1) from generator ``index``, which advances."""
    return _to_unit_float64(xoroshiro128p_next(states, index))


@numba.njit
def xoroshiro128p_uniform_float32(states, index):
    """A float32 in [0, 1) from generator ``index``, which advances (the
    float64 draw rounded)."""
    return np.float32(_to_unit_float64(xoroshiro128p_next(states, index)))


@numba.njit
def xoroshiro128p_normal_float32(states, index):
    """A standard normal float32 (Box-Muller on two float32 draws)."""
    u1 = xoroshiro128p_uniform_float32(states, index)
    u2 = xoroshiro128p_uniform_float32(states, index)
    return math.sqrt(np.float32(-2.0) * math.log(u1)) * math.cos(_TWO_PI_32 * u2)


@numba.njit
def xoroshiro128p_normal_float64(states, index):
    """A standard normal float64 (Box-Muller on two float32 draws, as
    numba.cuda's)."""
    u1 = np.float64(xoroshiro128p_uniform_float32(states, index))
    u2 = np.float64(xoroshiro128p_uniform_float32(states, index))
    return math.sqrt(np.float64(-2.0) * math.log(u1)) * math.cos(_TWO_PI_64 * u2)


@numba.njit
def _init_states(states, seed, subsequence_start):
    n = states.shape[0]
    if n == 0:
        return
    z = seed + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> _U(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> _U(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> _U(31))
    states[0, 0] = z
    states[0, 1] = z
    for _ in range(subsequence_start):
        xoroshiro128p_jump(states, 0)
    for i in range(1, n):
        states[i, 0] = states[i - 1, 0]
        states[i, 1] = states[i - 1, 1]
        xoroshiro128p_jump(states, i)


def init_xoroshiro128p_states(states, seed, subsequence_start=0, stream=0):
    """Seed an existing state array (a device array or NumPy array of shape
    ``(n, 2)``, uint64) in place."""
    host = np.zeros(states.shape, np.uint64)
    _init_states(host, np.uint64(seed & 0xFFFFFFFFFFFFFFFF), int(subsequence_start))
    if isinstance(states, np.ndarray):
        states[...] = host
    else:
        states.copy_to_device(host)


def create_xoroshiro128p_states(n, seed, subsequence_start=0, stream=0):
    """``n`` seeded generators in a new device array."""
    states = _memory.device_array((int(n), 2), np.uint64)
    init_xoroshiro128p_states(states, seed, subsequence_start, stream)
    return states
