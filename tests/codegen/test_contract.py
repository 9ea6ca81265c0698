"""Multiplies and adds fused where a kernel allows contraction (fastmath={"contract"}),
numba.cuda's default in the compat namespace; every other operation stays exact."""

import re

import llvmlite.binding as llvm
import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan import cuda
from numba_vulkan.base import config
from numba_vulkan.aot.build import manifest
from numba_vulkan.codegen import contract
from numba_vulkan.runtime.device import current_device
from numba_vulkan.base.target import TargetDescription
from numba_vulkan.llvmir import ir
from tests.helpers import rewritten

FUSED = TargetDescription(fused_fma=True)
SIG = "void(float32[::1], float32[::1], float32[::1], float32[::1])"
FMA = re.compile(r"call (\w+ )*float @llvm\.fma\.f32\(")

IR = """define void @k(float %x, float %y, double %d, ptr %p) {
entry:
  %m = fmul contract float %x, %y
  %s = fadd contract float %m, 1.000000e+00
  %m2 = fmul contract float %x, %x
  %m3 = fmul contract float %y, %y
  %s2 = fsub contract float %m2, %m3
  %m4 = fmul float %x, %y
  %s4 = fadd contract float %m4, %s2
  %m5 = fmul fast double %d, %d
  %s5 = fsub fast double 2.0, %m5
  %m6 = fmul contract float %x, %y
  %a6 = fadd contract float %m6, %s
  %b6 = fadd contract float %m6, %s4
  store float %a6, ptr %p
  store float %b6, ptr %p
  store double %s5, ptr %p
  ret void
}
"""


def test_fuse_rewrites_each_contractible_pair_and_nothing_else():
    out = rewritten(contract.fuse, IR)
    llvm.parse_assembly(out).verify()
    assert "%s = call float @llvm.fma.f32(float %x, float %y, float 1.000000e+00)" in out
    # a*b - c: fma(a, b, -c); c - a*b: fma(-a, b, c).
    assert re.search(r"(%\S+) = fneg float %m3\n  %s2 = call float @llvm\.fma\.f32"
                     r"\(float %x, float %x, float \1\)", out)
    assert re.search(r"(%\S+) = fneg double %d\n  %s5 = call double @llvm\.fma\.f64"
                     r"\(double \1, double %d, double 2\.0\)", out)
    # Without the flag on the multiply: as written.
    assert "%m4 = fmul float %x, %y" in out and "%s4 = fadd contract float %m4, %s2" in out
    # A product of two adds is fused into both, as NVVM does, and goes.
    assert "%a6 = call float @llvm.fma.f32(float %x, float %y, float %s)" in out
    assert "%b6 = call float @llvm.fma.f32(float %x, float %y, float %s4)" in out
    assert "%m = fmul" not in out and "%m2 = fmul" not in out and "%m6 = fmul" not in out
    # A product also used otherwise stays for that use.
    kept = rewritten(contract.fuse, IR.replace("store float %a6, ptr %p", "store float %m6, ptr %p"))
    assert "%m6 = fmul contract float %x, %y" in kept and "store float %m6, ptr %p" in kept
    assert "%b6 = call float @llvm.fma.f32(float %x, float %y, float %s4)" in kept
    assert out.count("declare float @llvm.fma.f32") == 1
    plain = IR.replace("contract", "").replace("fast", "")
    assert rewritten(contract.fuse, plain) == str(ir.parse(plain))


def _muladd(x, y, z, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = x[i] * y[i] - z[i] + x[i] / y[i]


def _compile(kernel, target):
    with config.overriding(NUMBA_VULKAN_CACHE="0"):
        return kernel.compile(SIG, target=target)


def test_contract_fuses_on_a_fused_target_and_keeps_the_rest_exact():
    fused = _compile(nv.jit(fastmath={"contract"})(_muladd), FUSED)
    assert FMA.search(fused.llvm_ir)
    # The division is still correctly rounded (in float64), and the other
    # operations keep NoContraction and the special values.
    assert "fdiv double" in fused.llvm_ir
    text = fused.disassemble()
    assert "NoContraction" in text and "SignedZeroInfNanPreserve" in text
    assert not FMA.search(_compile(nv.jit(fastmath={"contract"})(_muladd), TargetDescription()).llvm_ir)
    assert not FMA.search(_compile(nv.jit(_multiply_add), FUSED).llvm_ir)


def _multiply_add(x, y, z, out):
    # No division: on a fused target the library's correctly rounded float32
    # division is made of fmas itself.
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = x[i] * y[i] - z[i]


def test_cuda_jit_contracts_by_default_as_numba_cuda_does():
    assert cuda.jit(_muladd).options["fastmath"] == {"contract"}
    assert cuda.jit(fastmath=False)(_muladd).options["fastmath"] == {"contract"}
    assert cuda.jit(fastmath=True)(_muladd).options["fastmath"] is True
    assert FMA.search(_compile(cuda.jit(_muladd), FUSED).llvm_ir)
    assert not FMA.search(_compile(cuda.jit(fastmath=set())(_multiply_add), FUSED).llvm_ir)


def _residual(x, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = x[i] * x[i] - out[i]


def test_a_contracted_kernel_rounds_once_where_the_device_fuses_and_twice_elsewhere():
    # (1 + 2**-12)**2 = 1 + 2**-11 + 2**-24: the product rounds to 1 + 2**-11
    # (a tie, to even), so x*x - (1 + 2**-11) is 0 in two roundings and
    # 2**-24 in one.
    x = np.full(64, 1 + 2.0 ** -12, np.float32)
    out = np.full(64, 1 + 2.0 ** -11, np.float32)
    cuda.jit(_residual).forall(64)(x, out)
    fused = current_device().target.fused_fma
    np.testing.assert_array_equal(out, np.float32(2.0 ** -24 if fused else 0))


@pytest.mark.parametrize("value, problem", [
    ({"bogus"}, "fast-math flags"), ("yes", "fast-math flags"), ([1], "fast-math flags")])
def test_a_wrong_fastmath_is_a_type_error_naming_it(value, problem):
    with pytest.raises(TypeError, match=f"nv.jit: fastmath must be .*{problem}"):
        nv.jit(fastmath=value)(_muladd)
    with pytest.raises(TypeError, match="cuda.jit: fastmath"):
        cuda.jit(fastmath=value)(_muladd)


def test_a_manifest_names_fast_math_flags_as_a_list(tmp_path):
    (tmp_path / "contract_manifest_kernels.py").write_text(
        "import numba_vulkan as nv\n\n@nv.jit\ndef k(x):\n    x[0] = 1\n")
    path = tmp_path / "kernels.yaml"
    path.write_text("version: 1\nkernels:\n  - function: contract_manifest_kernels:k\n"
                    "    signatures: ['void(float32[::1])']\n    options: {fastmath: [contract]}\n")
    (spec,) = manifest.load(str(path)).kernels
    assert spec.options == {"fastmath": {"contract"}}
