"""float32 draws from 64-bit integers through float64
(:mod:`numba_vulkan.codegen.unitfloat`) give NumPy's values bit for bit."""

import numpy as np

import numba_vulkan as nv
from numba_vulkan.base import config
from tests.helpers import assert_valid_spirv


def _draws(x, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        v = x[i]
        # numba.cuda.random's uniform float32, and a scaling by 2**-60
        # (smaller values, still normal float32s).
        out[i, 0] = np.float32((v >> np.uint64(11)) * (1.0 / 9007199254740992.0))
        out[i, 1] = np.float32((v >> np.uint64(12)) * (2.0 ** -60))
        # A 54-bit integer is not exact in float64: left as written.
        out[i, 2] = np.float32((v >> np.uint64(10)) * (2.0 ** -54))


def _ties(rng):
    """Integers whose draw falls on, just below and just above a float32
    rounding tie, and the ends of the range."""
    top = rng.integers(1 << 23, 1 << 24, 256, dtype=np.uint64)
    ties = []
    for tail in (1 << 28, (1 << 28) - 1, (1 << 28) + 1, 0, (1 << 29) - 1):
        ties.append(((top << np.uint64(29)) | np.uint64(tail)) << np.uint64(11))
        # Odd and even halves: ties to even go both ways.
        ties.append((((top | np.uint64(1)) << np.uint64(29)) | np.uint64(tail)) << np.uint64(11))
    return np.concatenate(ties + [np.array([0, 1, 2 ** 11, 2 ** 64 - 1], np.uint64)])


def test_draws_match_numpy_bit_for_bit():
    rng = np.random.default_rng(53)
    x = np.concatenate([rng.integers(0, 2 ** 64, 1 << 14, dtype=np.uint64), _ties(rng)])
    out = np.zeros((x.size, 3), np.float32)
    with config.overriding(NUMBA_VULKAN_CACHE="0"):
        kernel = nv.jit(_draws)
        kernel[(x.size + 255) // 256, 256](x, out)
        compiled = kernel.compile("void(uint64[::1], float32[:, ::1])")
    want = np.stack([((x >> np.uint64(11)).astype(np.float64) * 2.0 ** -53).astype(np.float32),
                     ((x >> np.uint64(12)).astype(np.float64) * 2.0 ** -60).astype(np.float32),
                     ((x >> np.uint64(10)).astype(np.float64) * 2.0 ** -54).astype(np.float32)],
                    axis=1)
    np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))
    # The first two made in float32; the third kept its float64 steps.
    lines = compiled.llvm_ir.splitlines()
    assert sum("uitofp i64" in line and line.endswith("to float") for line in lines) == 2
    assert sum("fptrunc double" in line for line in lines) == 1
    assert_valid_spirv(compiled)
