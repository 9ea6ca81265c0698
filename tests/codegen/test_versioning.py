"""A loop counter bounded by a 64-bit value runs in 32 bits when the bound
fits (codegen/versioning.py gives the loop a copy for that case) and in 64
bits otherwise, with numba.njit's results on both sides of the edges."""

import numba
import numpy as np

import numba_vulkan as nv
from tests.helpers import assert_valid_spirv, compiled_kernels


@numba.njit
def escape(limit, rate):
    x = 0.0
    n = 0
    while n < limit:
        x += rate
        if x > 20.0:
            break
        n += 1
    return n


@numba.njit
def window(r, rate):
    total = 0.0
    for k in range(-r, r // 2 + 1):
        total += rate * k
        if total > 50.0:
            break
    return total


def test_64_bit_bounds_of_every_size_match_njit(monkeypatch):
    # Loops are copied for GPUs only (targets without a loop limit): run the
    # GPU's module here, where every loop of the kernel is short.
    from numba_vulkan.runtime.device import current_device
    device = current_device()
    monkeypatch.setattr(device, "target", device.target.with_features(loop_limit=0))

    @nv.jit
    def kernel(limits, rates, out_n, out_w):
        i = nv.grid(1)
        if i >= limits.shape[0]:
            return
        out_n[i] = escape(limits[i], rates[i])
        out_w[i] = window(limits[i] % 64, rates[i])

    edges = [0, 1, -1, -5, 3, 17, 100, 2 ** 31 - 3, 2 ** 31 - 2, 2 ** 31 - 1, 2 ** 31,
             2 ** 32 + 7, 2 ** 40, -2 ** 31 + 1, -2 ** 31, -2 ** 40, 2 ** 63 - 1, -2 ** 63]
    rng = np.random.default_rng(5)
    limits = np.array(edges + list(rng.integers(-50, 60, 46)), np.int64)
    rates = rng.uniform(0.2, 3.0, limits.size)
    out_n = np.zeros(limits.size, np.int64)
    out_w = np.zeros(limits.size)
    kernel.forall(limits.size)(limits, rates, out_n, out_w)
    expected_n = [escape(a, b) for a, b in zip(limits, rates)]
    expected_w = [window(a % 64, b) for a, b in zip(limits, rates)]
    np.testing.assert_array_equal(out_n, expected_n)
    np.testing.assert_allclose(out_w, expected_w, rtol=1e-12)
    (compiled,) = compiled_kernels(kernel)
    assert_valid_spirv(compiled)
    # A 32-bit counter, taken after a test of the bound, beside the 64-bit one.
    assert "phi i32" in compiled.llvm_ir
    assert "phi i64" in compiled.llvm_ir
    assert "icmp ult i64" in compiled.llvm_ir
    # Lavapipe's own target gets no copies.
    lavapipe = kernel.compile(compiled.signature, threads=64,
                              target=compiled.target.with_features(loop_limit=65535))
    assert "icmp ult i64" not in lavapipe.llvm_ir
