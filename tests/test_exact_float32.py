"""Correctly rounded float32 division and square roots: on targets with a
fused Fma a float32 fast path, with a branch to float64 where its guard fails
(numba_vulkan.codegen.legalize.exact_float32)."""

import math
import os
import re
import shutil
import sys

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan import config
from numba_vulkan.codegen import legalize
from numba_vulkan.runtime.device import current_device
from numba_vulkan.target import TargetDescription

from helpers import assert_valid_spirv

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import suite, validate_divsqrt  # noqa: E402

FUSED = TargetDescription(fused_fma=True)
SIG = "void(float32[::1], float32[::1], float32[::1], float32[::1])"


def _ops(a, b, q, s):
    i = nv.global_id(0)
    if i < q.shape[0]:
        q[i] = a[i] / b[i]
        s[i] = math.sqrt(b[i])


def _constants(a, b, q, s):
    i = nv.global_id(0)
    if i < q.shape[0]:
        q[i] = 1.0 / a[i] + a[i] / 3.0
        s[i] = math.sqrt(2.0) / b[i]


def _loop(a, b, q, s):
    # Divisions and roots in a loop body, as in an n-body step.
    i = nv.global_id(0)
    if i < q.shape[0]:
        acc = np.float32(0.0)
        for j in range(b.shape[0]):
            acc += a[i] / (b[j] * math.sqrt(b[j]))
        q[i] = acc


def _compile(kernel, target=FUSED, signature=SIG):
    with config.overriding(NUMBA_VULKAN_CACHE="0"):
        return nv.jit(kernel).compile(signature, target=target)


@pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None, reason="no C compiler")
def test_the_fast_paths_round_correctly_on_sampled_hard_cases():
    # The exhaustive check: python benchmarks/validate_divsqrt.py --pairs 100000000 --exhaustive
    report, ok = validate_divsqrt.run(200000, seed=3)
    assert ok, report
    assert "wrong 0," in report and re.search(r"checked [1-9]\d{5,}", report), report


def test_a_fused_target_takes_the_float32_path_and_branches_to_float64():
    fused, plain = _compile(_ops), _compile(_ops, TargetDescription())
    text = fused.llvm_ir
    assert text.count("label %nv.exact.1.join, label %nv.exact.1.slow") == 1
    assert "fdiv double" in text and "call double @llvm.sqrt.f64" in text
    assert "@llvm.spv.rsqrt.f32" in text and "@llvm.fma.f32" in text
    assert "fdiv float 1.0" in text and "phi float" in text
    assert "nv.exact.2.slow" in text and "nv.exact.3" not in text
    # Elsewhere (Fma rounding twice, as lavapipe's) the float64 path alone.
    assert "@llvm.fma.f32" not in plain.llvm_ir and "nv.exact.1.slow" not in plain.llvm_ir
    assert "fdiv double" in plain.llvm_ir
    disassembly = fused.disassemble()
    assert "InverseSqrt" in disassembly and "Fma" in disassembly
    assert disassembly.count("OpSelectionMerge") >= 3
    for kernel in (_constants, _loop):
        assert_valid_spirv(_compile(kernel))


def test_the_n_body_step_compiles_with_fast_paths():
    signature = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1], float32[:, ::1], " \
                "float32, float32)"
    namespace = {}
    exec(compile(suite.NBODY, "<nbody>", "exec"), {"nv": nv, "math": math, "float32": np.float32},
         namespace)
    compiled = _compile(namespace["nbody"], signature=signature)
    assert_valid_spirv(compiled)
    # A root and a division per pair, in each unrolled copy of the loop body.
    phis = compiled.llvm_ir.count("phi float [ %nv.exact.")
    assert phis >= 2 and phis % 2 == 0


def _hard_quotients(rng, count):
    """Pairs whose quotient lies next to a rounding midpoint:
    ``b * (2M + 1) = a * 2**25 + t`` for a small odd ``t``."""
    b = (rng.integers(0, 1 << 24, count, dtype=np.uint64) | 0x800001).astype(np.uint64)
    t = rng.choice(np.array([-5, -3, -1, 1, 3, 5], np.int64), count)
    inverse = np.ones(count, np.uint64)
    for _ in range(6):
        inverse = (inverse * (np.uint64(2) - b * inverse)) & np.uint64((1 << 32) - 1)
    q = ((t.astype(np.uint64) * inverse) & np.uint64((1 << 25) - 1))
    keep = q >= (1 << 24)
    b, t, q = b[keep], t[keep], q[keep]
    a = (b * q - t.astype(np.uint64)) >> np.uint64(25)
    scale = rng.integers(-30, 30, len(a))
    signs = rng.choice(np.array([-1.0, 1.0]), (2, len(a)))
    return ((signs[0] * np.ldexp(a.astype(np.float64), scale - 23)).astype(np.float32),
            (signs[1] * np.ldexp(b.astype(np.float64), scale - 23)).astype(np.float32))


def _inputs(size):
    rng = np.random.default_rng(14)
    # Random magnitudes over the guard's range and beyond it, random bit
    # patterns, hard quotients, the guard's limits and mantissas of all ones.
    exponents = rng.integers(127 - 70, 127 + 70, (2, size)).astype(np.uint32)
    bits = rng.integers(0, 1 << 32, (2, size), dtype=np.uint64).astype(np.uint32)
    a, b = ((bits & np.uint32(0x807FFFFF)) | (exponents << np.uint32(23))).view(np.float32)
    a[: size // 16], b[: size // 16] = bits[:, : size // 16].view(np.float32)
    ha, hb = _hard_quotients(rng, size // 8)
    a[size // 16: size // 16 + len(ha)], b[size // 16: size // 16 + len(hb)] = ha, hb
    limits = np.array([legalize.DIVISION_LOW, legalize.DIVISION_HIGH, legalize.ROOT_LOW], np.int64)
    edges = (limits[:, None] + np.arange(-2, 3)).ravel().astype(np.uint32).view(np.float32)
    edges = np.concatenate([edges, -edges, [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, 2.0, 4.0],
                            (np.arange(20, 120, dtype=np.uint32) << 23 | 0x7FFFFF).view(np.float32)])
    pairs = np.array(np.meshgrid(edges, edges)).reshape(2, -1).astype(np.float32)
    a[-pairs.shape[1]:], b[-pairs.shape[1]:] = pairs
    return a, b


def test_divisions_and_roots_are_correctly_rounded_on_the_device(monkeypatch):
    # On a device whose Fma is fused (NVIDIA, AMD, Intel GPUs) the fast paths
    # run as compiled; elsewhere (lavapipe) they run with the emulated fma of
    # legalize, exact for the residuals the paths compare, so their control
    # flow and checks are tested on the CPU too.
    fused = current_device().target.fused_fma
    if not fused:
        original = legalize.exact_float32
        monkeypatch.setattr(legalize, "exact_float32", lambda text, fused_fma=False:
                            legalize.legalize(original(text, fused_fma=True)))
    size = (1 << 22) if fused else (1 << 18)
    a, b = _inputs(size)
    # Roots: consecutive float32 over [1, 4) (all of it where fused), then
    # the random values.
    mantissas = np.arange(0, 1 << 24, 1 if fused else 64, dtype=np.uint32)
    roots = np.concatenate([(mantissas + np.float32(1.0).view(np.uint32)).view(np.float32), b])
    dividends = np.concatenate([np.ones(len(mantissas), np.float32), a])
    q, s = np.zeros_like(roots), np.zeros_like(roots)
    with config.overriding(NUMBA_VULKAN_CACHE="0"):
        nv.jit(_ops).forall(len(roots))(dividends, roots, q, s)
    with np.errstate(all="ignore"):
        expected_q, expected_s = dividends / roots, np.sqrt(roots)
    for got, expected in ((q, expected_q), (s, expected_s)):
        wrong = (got.view(np.uint32) != expected.view(np.uint32)) & \
            ~(np.isnan(got) & np.isnan(expected))
        assert not wrong.any(), (np.flatnonzero(wrong)[:5], got[wrong][:5], expected[wrong][:5])


def test_a_loop_of_divisions_and_roots_matches_numpy(monkeypatch):
    if not current_device().target.fused_fma:
        original = legalize.exact_float32
        monkeypatch.setattr(legalize, "exact_float32", lambda text, fused_fma=False:
                            legalize.legalize(original(text, fused_fma=True)))
    rng = np.random.default_rng(7)
    a = rng.uniform(-4, 4, 1024).astype(np.float32)
    b = rng.uniform(0.01, 9, 48).astype(np.float32)
    b[:3] = [0.0, 1e-30, np.float32(2.0 ** -80)]
    q = np.zeros_like(a)
    with config.overriding(NUMBA_VULKAN_CACHE="0"):
        nv.jit(_loop).forall(len(a))(a, b, q, q)
    expected = np.zeros_like(a)
    with np.errstate(all="ignore"):
        for value in b:
            expected += a / (value * np.sqrt(value))
    np.testing.assert_array_equal(q, expected)
