"""Buffer element indices are computed in elements where every term of the
byte offset is a multiple of the element size (codegen/indices.py): the
same low 32 bits as the byte offset shifted, for any 64-bit inputs, and
kernels that read a row's fields give NumPy's results with no 64-bit
shift left in their IR."""

import ctypes

import llvmlite.binding as llvm
import numpy as np

import numba_vulkan as nv
from numba_vulkan.codegen import indices
from numba_vulkan.llvmir import ir
from tests.helpers import assert_valid_spirv, compiled_kernels, rewritten

_OFFSETS = """
define i32 @f(i64 %x, i64 %y, i64 %z, i1 %c) {
entry:
  %a = shl i64 %x, 2
  %b = mul i64 %y, 12
  %s = add i64 %a, %b
  %d = sub i64 %s, -8
  %p = select i1 %c, i64 %d, i64 %a
  %q = shl i64 %p, 1
  %e = ashr exact i64 TERM, 2
  %t = trunc i64 %e to i32
  ret i32 %t
}
"""

_LOOP = """
define i32 @g(i64 %start, i64 %n, i64 %stride) {
entry:
  %base = shl i64 %start, 3
  br label %loop
loop:
  %k = phi i64 [ 0, %entry ], [ %k1, %loop ]
  %o = phi i64 [ %base, %entry ], [ %o1, %loop ]
  %acc = phi i32 [ 0, %entry ], [ %acc1, %loop ]
  %step = mul i64 %stride, 8
  %o1 = add i64 %o, %step
  %at = add i64 %o, 4
  %i = lshr exact i64 %at, 2
  %i32 = trunc i64 %i to i32
  %acc1 = xor i32 %acc, %i32
  %k1 = add i64 %k, 1
  %done = icmp eq i64 %k1, %n
  br i1 %done, label %exit, label %loop
exit:
  ret i32 %acc1
}
"""


def _jit(text, name, argtypes):
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = llvm.parse_assembly(text)
    module.verify()
    machine = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    function = ctypes.CFUNCTYPE(ctypes.c_int32, *argtypes)(engine.get_function_address(name))
    return function, engine


def _values(rng, count):
    # Small, negative and huge 64-bit values, where byte offsets wrap.
    edges = [0, 1, -1, 2 ** 62 - 1, 2 ** 62 + 5, -2 ** 63, 2 ** 63 - 1, 2 ** 31, -2 ** 31]
    wide = rng.integers(-2 ** 63, 2 ** 63 - 1, count, dtype=np.int64, endpoint=True)
    return [int(v) for v in edges] + [int(v) for v in wide]


def test_element_indices_keep_the_low_32_bits_of_shifted_offsets():
    rng = np.random.default_rng(7)
    args = (ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_bool)
    for term in ("%a", "%s", "%d", "%p", "%q"):
        before = _OFFSETS.replace("TERM", term)
        after = rewritten(indices.element_indices, before)
        assert "ashr" not in after, term
        f_before, keep1 = _jit(before, "f", args)
        f_after, keep2 = _jit(after, "f", args)
        xs, ys = _values(rng, 40), _values(rng, 40)
        for k, (x, y) in enumerate(zip(xs, ys)):
            c = bool(k % 2)
            assert f_after(x, y, 0, c) == f_before(x, y, 0, c), (term, x, y, c)


def test_element_indices_through_a_loop_phi():
    after = rewritten(indices.element_indices, _LOOP)
    assert "lshr" not in after
    args = (ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
    f_before, keep1 = _jit(_LOOP, "g", args)
    f_after, keep2 = _jit(after, "g", args)
    rng = np.random.default_rng(8)
    for start, stride in zip(_values(rng, 30), _values(rng, 30)):
        for n in (1, 2, 7):
            assert f_after(start, n, stride) == f_before(start, n, stride), (start, stride, n)


def test_offsets_with_a_term_of_unknown_alignment_stay_as_they_were():
    text = _OFFSETS.replace("TERM", "%u").replace(
        "  %e =", "  %u = add i64 %a, %z\n  %e =")
    assert rewritten(indices.element_indices, text) == str(ir.parse(text))
    # A 64-bit use of the element index keeps the shift too.
    wide = _OFFSETS.replace("TERM", "%a").replace(
        "  %t = trunc i64 %e to i32\n  ret i32 %t",
        "  %w = add i64 %e, %z\n  %t = trunc i64 %w to i32\n  ret i32 %t")
    assert rewritten(indices.element_indices, wide) == str(ir.parse(wide))


def test_fields_of_rows_are_read_at_32_bit_element_indices():
    @nv.jit
    def kernel(pos, out):
        i = nv.grid(1)
        if i >= pos.shape[0]:
            return
        acc = 0.0
        for j in range(pos.shape[0]):
            acc += pos[j, 0] * pos[i, 1] - pos[j, 2] + pos[j, 3]
        out[i] = acc

    rng = np.random.default_rng(3)
    pos = rng.random((70, 4))
    out = np.zeros(70)
    kernel.forall(70)(pos, out)
    expected = [sum(pos[j, 0] * pos[i, 1] - pos[j, 2] + pos[j, 3] for j in range(70))
                for i in range(70)]
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    (compiled,) = compiled_kernels(kernel)
    assert_valid_spirv(compiled)
    assert "shr exact i64" not in compiled.llvm_ir
    assert "shr i64" not in compiled.llvm_ir
