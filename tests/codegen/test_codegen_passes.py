"""Codegen passes on the IR model, one at a time: small IR texts in, checked IR out.

Each test feeds a pass a hand-written module and checks the module it makes
(and that LLVM reads it); none compiles a kernel.
"""

import ctypes

import llvmlite.binding as llvm
import numpy as np
import pytest

from numba_vulkan.codegen import entrypoint, exact, narrow, optimize, structurize
from numba_vulkan.llvmir import ir
from numba_vulkan.base.errors import UnsupportedError
from tests.helpers import rewritten


def _llvm(text):
    return llvm.parse_assembly(text, context=llvm.create_context())


def _narrowed(text, narrowed):
    module = ir.parse(text)
    narrow.module(module, narrowed)
    out = str(module)
    _llvm(out)
    return out


# Narrowing ----------------------------------------------------------------

DOUBLES = """
%pair = type { double, i32 }

@table = internal constant [2 x double] [double 1.000000e-01, double 2.500000e-01]

define double @f(float %y, ptr %out) {
entry:
  %a = alloca double, align 8
  %b = alloca %pair, align 8
  store double 0x3FB999999999999A, ptr %a, align 8
  %x = load double, ptr %a, align 8
  %e = fpext float %y to double
  %s = call double @llvm.sin.f64(double %x)
  %t = call float @llvm.sin.f32(float %y)
  %m = fadd double %s, 1.000000e-01
  %p = getelementptr inbounds [2 x double], ptr @table, i64 0, i64 1
  store double %m, ptr %out, align 8
  ret double %e
}

declare double @llvm.sin.f64(double)
declare float @llvm.sin.f32(float)
"""


def test_float64_narrowed_on_the_model():
    out = _narrowed(DOUBLES, ("float64",))
    assert "double" not in out and ".f64" not in out
    # Constants rounded to float (written as the bits of the widened double).
    assert "[2 x float] [float 0x3FB99999A0000000, float 0x3FD0000000000000]" in out
    assert "store float 0x3FB99999A0000000, ptr %a, align 4" in out
    assert "%m = fadd float %s, 0x3FB99999A0000000" in out
    # One declaration of the float twin, called by both.
    assert out.count("declare float @llvm.sin.f32(float)") == 1
    assert "%s = call float @llvm.sin.f32(float %x)" in out
    # Alignments LLVM gave the doubles are the floats' (a structure keeps 8);
    # a cast to itself is a bitcast.
    assert "%x = load float, ptr %a, align 4" in out and "%b = alloca %pair, align 8" in out
    assert "%pair = type { float, i32 }" in out
    assert "%e = bitcast float %y to float" in out


INT64S = """
define i64 @g(i64 %x, i32 %n) {
entry:
  %w = sext i32 %n to i64
  %a = add nsw i64 %x, 4294967301
  %c = icmp slt i64 %a, 9223372036854775807
  %d = select i1 %c, i64 -9223372036854775808, i64 %w
  %m = call i64 @llvm.smax.i64(i64 %d, i64 5)
  br label %next

next:
  %p = phi i64 [ 8589934592, %entry ]
  %q = xor i64 %p, -1
  ret i64 %q
}

declare i64 @llvm.smax.i64(i64, i64)
"""


def test_int64_narrowed_with_the_limits_mapped():
    out = _narrowed(INT64S, ("int64",))
    assert "i64" not in out
    assert "%a = add nsw i32 %x, 5" in out
    assert "%c = icmp slt i32 %a, 2147483647" in out
    assert "%d = select i1 %c, i32 -2147483648, i32 %w" in out
    assert "call i32 @llvm.smax.i32(i32 %d, i32 5)" in out
    assert "phi i32 [ 0, %entry ]" in out and "xor i32 %p, -1" in out
    assert "%w = bitcast i32 %n to i32" in out


def test_narrowing_refuses_what_32_bits_cannot_hold():
    shift = "define i64 @s(i64 %x) {\nentry:\n  %y = shl i64 %x, 40\n  ret i64 %y\n}\n"
    with pytest.raises(UnsupportedError, match="shift by 40"):
        _narrowed(shift, ("int64",))
    bits = ("define i64 @b(double %x) {\nentry:\n  %y = bitcast double %x to i64\n"
            "  ret i64 %y\n}\n")
    with pytest.raises(UnsupportedError, match="bits of a double"):
        _narrowed(bits, ("int64",))
    assert "bitcast float %x to i32" in _narrowed(bits, ("float64", "int64"))


HIGH_HALF = """
define i32 @hi(i32 %a, i32 %b) {
entry:
  %x = zext i32 %a to i64
  %y = zext i32 %b to i64
  %p = mul nuw i64 %x, %y
  %h = lshr i64 %p, 32
  %r = trunc i64 %h to i32
  ret i32 %r
}
"""


def test_final_narrowing_computes_high_halves_in_32_bits():
    out = rewritten(narrow.final, HIGH_HALF, ("int64",))
    assert "i64" not in out and "%nv.mulhi.1." in out
    # Run on the host: the high half of each 32 x 32-bit product.
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = _llvm(out)
    module.triple = llvm.get_process_triple()
    engine = llvm.create_mcjit_compiler(module, llvm.Target.from_default_triple()
                                        .create_target_machine())
    engine.finalize_object()
    hi = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32)(
        engine.get_function_address("hi"))
    values = np.random.default_rng(7).integers(0, 2 ** 32, size=(200, 2), dtype=np.uint64)
    values = [(int(a), int(b)) for a, b in values] + [(2 ** 32 - 1, 2 ** 32 - 1), (0, 5)]
    assert [hi(a, b) for a, b in values] == [(a * b) >> 32 for a, b in values]


# Markers --------------------------------------------------------------------

MARKERS = """
@tile = internal addrspace(3) global [4 x [2 x float]] undef

define void @main() {
entry:
  %n = call i32 @__nv.push.i32(i32 8)
  %s = tail call float @__nv.push.float(i32 0)
  %l = call i32 @__nv.local_size(i32 1)
  %e = call ptr addrspace(3) @__nv.element.3.2(ptr addrspace(3) @tile, i32 %n, i32 %l)
  store float %s, ptr addrspace(3) %e, align 4
  ret void
}

declare i32 @__nv.push.i32(i32)
declare float @__nv.push.float(i32)
declare i32 @__nv.local_size(i32)
declare ptr addrspace(3) @__nv.element.3.2(ptr addrspace(3), i32, i32)
"""


def test_markers_are_lowered():
    out = rewritten(entrypoint.lower_markers, MARKERS, (64, 4, 1))
    _llvm(out)
    assert "__nv." not in out
    assert "%nv.push = type { float, i32, i32 }" in out
    assert "@nv.push = external hidden addrspace(13) externally_initialized global %nv.push" in out
    assert ("%nv.push.1 = getelementptr inbounds %nv.push, ptr addrspace(13) @nv.push, "
            "i32 0, i32 2") in out
    assert "%n = load i32, ptr addrspace(13) %nv.push.1, align 4" in out
    assert "%l = add i32 4, 0" in out
    assert ("%e = getelementptr inbounds [4 x [2 x float]], ptr addrspace(3) @tile, i32 0, "
            "i32 %n, i32 %l") in out
    assert 'define void @main() "hlsl.shader"="compute" "hlsl.numthreads"="64,4,1"' in out


def test_a_marker_left_over_is_an_error():
    text = MARKERS.replace("ret void", "%b = call ptr @__nv.buffer.0()\n  ret void") + \
        "declare ptr @__nv.buffer.0()\n"
    with pytest.raises(UnsupportedError, match="__nv.buffer. marker survived"):
        entrypoint.lower_markers(ir.parse(text), (1, 1, 1))


# Restructuring ----------------------------------------------------------------

_BUFFER = 'target("spirv.VulkanBuffer", [0 x float], 12, 1)'
_GETPOINTER = "@llvm.spv.resource.getpointer.p11.tspirv.VulkanBuffer_a0f32_12_1t"
POINTERS = f"""
@name = internal constant [3 x i8] c"b0\\00"

define void @main(i32 %i, i32 %j, i1 %c) {{
entry:
  br i1 %c, label %left, label %right

left:
  %pl = call ptr addrspace(11) {_GETPOINTER}({_BUFFER} %h, i32 %i)
  br label %join

right:
  %pr = call ptr addrspace(11) {_GETPOINTER}({_BUFFER} %h, i32 %j)
  br label %join

join:
  %p = phi ptr addrspace(11) [ %pl, %left ], [ %pr, %right ]
  %q = select i1 %c, ptr addrspace(11) %pl, ptr addrspace(11) %p
  %v = load float, ptr addrspace(11) %q, align 4
  store float %v, ptr addrspace(11) %pl, align 4
  %h = call {_BUFFER} @llvm.spv.resource.handlefrombinding.tspirv.VulkanBuffer_a0f32_12_1t(i32 0, i32 0, i32 1, i32 0, ptr @name)
  ret void
}}

declare ptr addrspace(11) {_GETPOINTER}({_BUFFER}, i32)
declare {_BUFFER} @llvm.spv.resource.handlefrombinding.tspirv.VulkanBuffer_a0f32_12_1t(i32, i32, i32, i32, ptr)
"""


def test_element_pointers_stay_in_the_blocks_that_use_them():
    module = ir.parse(POINTERS)
    function = module.function("@main")
    structurize._PointerLocaliser(function).run()
    blocks = {b.label: b for b in function.blocks}
    # The handle moves to the entry block.
    assert blocks["entry"].instructions[0].name == "%h"
    join = [str(i) for i in blocks["join"].instructions]
    # A phi of pointers: a phi of indices and one pointer after it.
    assert join[0].startswith("%p.index0.nv1 = phi i32 [ %i, %left ], [ %j, %right ]")
    assert join[1] == f"%p = call ptr addrspace(11) {_GETPOINTER}({_BUFFER} %h, i32 %p.index0.nv1)"
    # A select of pointers: one load through each and a select of the values.
    assert "select i1 %c, float %v.a.nv" in " ".join(join)
    assert not any(" = select i1 %c, ptr" in line for line in join)
    # A pointer used outside its block is computed again where it is used.
    copies = [line for line in join if line.startswith("%pl.nv")]
    assert len(copies) == 2 and all(f"({_BUFFER} %h, i32 %i)" in c for c in copies)
    assert "store float %v, ptr addrspace(11) %pl.nv" in " ".join(join)
    _llvm(str(module))


def test_a_pointer_phi_over_two_arrays_is_refused():
    text = POINTERS.replace("%h, i32 %j)", "%h2, i32 %j)").replace(
        "  %h = call", f"  %h2 = call {_BUFFER} @llvm.spv.resource.handlefrombinding."
        "tspirv.VulkanBuffer_a0f32_12_1t(i32 0, i32 1, i32 1, i32 0, ptr @name)\n  %h = call")
    module = ir.parse(text)
    with pytest.raises(UnsupportedError, match="two different arrays"):
        structurize._PointerLocaliser(module.function("@main")).run()


LOOP = """
define void @main(i32 %n, ptr %out) {
entry:
  br label %loop

loop:
  %i = phi i32 [ 0, %entry ], [ %i1, %next ]
  %odd = and i32 %i, 1
  %stop = icmp eq i32 %odd, %n
  br i1 %stop, label %early, label %next

next:
  %i1 = add i32 %i, 3
  %more = icmp slt i32 %i1, %n
  br i1 %more, label %loop, label %done

early:
  store i32 %i, ptr %out, align 4
  br label %done

done:
  ret void
}
"""


@pytest.mark.parametrize("breaks", [True, False])
def test_a_loop_with_two_exits_gets_one_exit_block(breaks):
    machine = optimize.target_machine("spirv1.6-unknown-vulkan1.3-compute")
    result = str(structurize.structurize(_llvm(LOOP), machine, "main", breaks))
    function = ir.parse(result).function("@main")
    labels = [b.label for b in function.blocks]
    assert sum(label.startswith("nv.exit.") for label in labels) == 1
    # Without breaks, every exit goes through a new latch that tests a flag.
    assert any(label.startswith("nv.latch.") for label in labels) == (not breaks)
    returns = [i for i in function.instructions() if i.opcode == "ret"]
    assert len(returns) == 1


def test_odd_integer_widths_are_refused():
    structurize.check_integer_widths("  %i65 = add i32 %x, 1\n  %y = load i64, ptr %p\n")
    with pytest.raises(UnsupportedError, match="integer type i65"):
        structurize.check_integer_widths("  %y = mul i65 %a, %b\n")


# Float contraction and builtins --------------------------------------------------

@pytest.mark.parametrize("flags, found", [
    ("", set()), ("nnan ", {"nnan"}), ("reassoc contract ", {"reassoc", "contract"}),
    ("fast ", {"nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc"})])
def test_fast_math_flags_are_read_from_the_kernels_float_operations(flags, found):
    text = (f"define float @f(float %a) {{\nentry:\n  %b = fmul {flags}float %a, %a\n"
            "  %c = call nnan float @llvm.sqrt.f32(float %a)\n  ret float %b\n}\n")
    assert exact.fast_math_flags(ir.parse(text)) == found


@pytest.mark.parametrize("flags, operations, special_values, rounded", [
    (set(), True, True, True), ({"contract"}, True, True, True),
    ({"nnan", "ninf"}, True, True, True), ({"nnan", "ninf", "nsz"}, True, False, True),
    ({"arcp"}, True, True, False), ({"reassoc"}, False, True, True)])
def test_each_fast_math_flag_gives_up_what_it_names(flags, operations, special_values, rounded):
    assert exact.keeps_operations(flags) is operations
    assert exact.keeps_special_values(flags) is special_values
    assert exact.rounds_correctly(flags) is rounded


def test_every_definition_is_made_no_builtins():
    text = ('define internal i32 @"f"(i32* %".1") local_unnamed_addr addrspace(0) #0\n{\n'
            "entry:\n  ret i32 0\n}\n\ndefine void @g() {\nentry:\n  ret void\n}\n"
            "attributes #0 = { nounwind }\n")
    out = optimize._without_builtins(text)
    assert 'local_unnamed_addr addrspace(0) "no-builtins" #0' in out
    assert 'define void @g() "no-builtins" {' in out
    module = _llvm(out)
    for name in ("f", "g"):
        assert any(b"no-builtins" in a for a in module.get_function(name).attributes)

