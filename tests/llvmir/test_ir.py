"""The IR model (numba_vulkan.llvmir.ir): parse and print give back the
module LLVM read, for hand-written forms and for every module the pipeline
handles while compiling kernels."""

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.codegen import backend
from numba_vulkan.llvmir import ir
from tests.helpers import assert_round_trip, llvm_text


SNIPPET = r"""
target triple = "spirv1.6-unknown-vulkan1.3-compute"

%pair = type { i32, float }

@tile = internal unnamed_addr addrspace(3) global [16 x float] undef, align 16
@table = internal unnamed_addr constant [4 x i8] c"\01\02\03;", align 1
@"quoted name" = internal global %pair zeroinitializer

; Function Attrs: nounwind
define void @main(i32 noundef %n) local_unnamed_addr #0 {
entry:
  %p = getelementptr inbounds nuw i8, ptr addrspacecast (ptr addrspace(3) @tile to ptr), i64 4
  %v = load float, ptr getelementptr (i8, ptr addrspacecast (ptr addrspace(3) @tile to ptr), i64 8), align 4, !tbaa !0
  %w = load volatile float, ptr %p, align 4
  %c = icmp sgt i32 %n, 0
  %s = select i1 %c, float %v, float %w
  %x = tail call fast float @llvm.fma.f32(float %s, float noundef 2.000000e+00, float %v) #1
  store float %x, ptr %p, align 4
  %old = atomicrmw volatile add ptr addrspace(3) @tile, i32 1 syncscope("workgroup") monotonic, align 4
  %pair = cmpxchg ptr %p, i32 %old, i32 2 monotonic monotonic, align 4
  %ok = extractvalue { i32, i1 } %pair, 1
  %q = insertvalue %pair poison, i32 %old, 0
  %e = sext i32 %n to i64
  %t = load i8, ptr getelementptr inbounds ([4 x i8], ptr @table, i64 0, i64 2), align 1
  %u = call i32 (ptr addrspace(3), ...) @vararg(ptr addrspace(3) @tile, i32 %old)
  switch i32 %n, label %done [
    i32 0, label %loop
    i32 7, label %done
  ], !prof !2

loop:                                             ; preds = %entry, %loop
  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]
  %i.next = add nuw nsw i64 %i, 1
  %more = icmp ult i64 %i.next, %e
  br i1 %more, label %loop, label %done

done:
  fence syncscope("workgroup") acq_rel
  ret void
}

declare float @llvm.fma.f32(float, float, float) #1
declare i32 @vararg(ptr addrspace(3), ...)

attributes #0 = { nounwind }
attributes #1 = { nounwind memory(none) }

!0 = !{!1, !1, i64 0}
!1 = !{!"float"}
!2 = !{!"branch_weights", i32 1, i32 2, i32 3}
"""


def test_snippet_round_trips():
    assert_round_trip(SNIPPET)


def test_model_of_snippet():
    module = ir.parse(SNIPPET)
    assert module.globals["@tile"].addrspace == 3
    assert module.globals["@table"].init == r'c"\01\02\03;"'
    assert module.named_types() == {"%pair": "{ i32, float }"}
    main = module.function("@main")
    insts = {i.name: i for i in main.instructions()}
    load = insts["%v"]
    assert (load.opcode, load.type, load.tail) == ("load", "float", ", align 4, !tbaa !0")
    gep = load.operands[0].value
    assert (gep.opcode, gep.type) == ("getelementptr", "i8")
    cast = gep.operands[0].value
    assert (cast.opcode, cast.type, str(cast.operands[0])) == (
        "addrspacecast", "ptr", "ptr addrspace(3) @tile")
    assert "@tile" in [v for _, v in load.values()]
    call = insts["%x"]
    assert (call.prefix, call.flags, call.callee) == ("tail", ["fast"], "@llvm.fma.f32")
    assert call.operands[1].attrs == "noundef"
    assert insts["%i"].labels == ["%entry", "%loop"]
    switch = main.blocks[0].terminator
    assert [str(o) for o in switch.operands] == ["i32 %n", "label %done", "i32 0", "label %loop",
                                                 "i32 7", "label %done"]
    assert [b.label for b in main.blocks] == ["entry", "loop", "done"]
    assert module.function("@vararg").blocks is None


def test_edit_and_print():
    """A pass replaces a constant expression by an instruction built from text."""
    module = ir.parse(SNIPPET)
    entry = module.function("@main").blocks[0]
    load = next(i for i in entry.instructions if i.name == "%v")
    entry.instructions.insert(entry.instructions.index(load), ir.instruction(
        f"%addr = {load.operands[0].value}".replace(" (", " ", 1).removesuffix(")")))
    load.operands[0].value = "%addr"
    text = str(module)
    assert "%v = load float, ptr %addr, align 4, !tbaa !0" in text
    llvm_text(text)


@nv.jit
def _shared_and_atomics(a, out, hist):
    tile = nv.shared.array(64, np.float32)
    t = nv.local_id(0)
    i = nv.global_id(0)
    tile[t] = a[i] if i < a.shape[0] else np.float32(0)
    nv.barrier()
    s = np.float32(0)
    for j in range(8):
        s += tile[(t + j) % 64]
    nv.atomic.add(hist, i % 4, 1)
    if i < out.shape[0]:
        out[i] = s + tile[(t + 1) % 64]


@nv.jit
def _math_switch(a, out):
    i = nv.global_id(0)
    if i < a.shape[0]:
        x = a[i]
        buf = (np.sin(x), x + 1.0, x * 3.0, np.cos(x))
        k = i % 5
        if k == 0:
            v = buf[0]
        elif k == 1:
            v = buf[1] * 2
        elif k == 2:
            v = np.exp(buf[2])
        elif k == 3:
            v = buf[3] ** 3
        else:
            v = -1.0
        out[i] = v


@nv.jit
def _complex_tuples(a, out):
    i = nv.global_id(0)
    if i < a.shape[0]:
        z = a[i]
        pair = (z.real, z.imag)
        out[i] = z * z.conjugate() + pair[1]


KERNELS = [
    (_shared_and_atomics, "void(float32[::1], float32[::1], int32[::1])"),
    (_math_switch, "void(float64[::1], float64[::1])"),
    (_complex_tuples, "void(complex128[::1], complex128[::1])"),
]


@pytest.mark.parametrize("kernel, sig", KERNELS, ids=[k.__name__ for k, _ in KERNELS])
def test_pipeline_modules_round_trip(kernel, sig, monkeypatch):
    """Every module the passes parse into the IR model (LLVM's, after each
    of its runs) round-trips, and so does the one printed for the backend;
    ``pytest --ir-round-trip`` checks those of every kernel the suite
    compiles."""
    seen = []

    def recording(module, name):
        original = getattr(module, name)

        def record(text, *args, **kwargs):
            seen.append(text)
            return original(text, *args, **kwargs)
        monkeypatch.setattr(module, name, record)

    recording(ir, "parse")
    recording(backend, "emit")
    monkeypatch.setenv("NUMBA_VULKAN_CACHE", "0")
    kernel.compile(sig)
    assert len(seen) >= 3
    for text in seen:
        assert_round_trip(text)


# Numba's own printer opens a body on a line of its own, and a switch spans lines.
NUMBA_STYLE = """define i32 @"f"(i32 %".1")
{
entry:
  switch i32 %".1", label %"b" [i32 0, label %"a"
    i32 1, label %"a"]
a:
  ret i32 1
b:
  ret i32 0
}
"""


def test_numba_printed_bodies_parse_into_blocks():
    # Once, the "{" line left every later line pending: the body parsed as one
    # instruction, in time quadratic in its length.
    fn = ir.parse(NUMBA_STYLE + NUMBA_STYLE.replace('@"f"', '@"g"')).function('@"f"')
    assert [b.label for b in fn.blocks] == ["entry", "a", "b"]
    switch = fn.blocks[0].terminator
    assert switch.opcode == "switch" and len(switch.operands) == 6
    assert str(ir.parse(NUMBA_STYLE)).count("ret i32") == 2


def test_words_are_types_and_keywords_not_names():
    text = 'double %double, ptr @i64, [2 x i64] c"i64" !i64 i64'
    assert ir.words(text) == ["double", "ptr", "2", "x", "i64", "c", "i64"]
    assert ir.map_words(text, {"i64": "i32", "double": "float"}) == \
        'float %double, ptr @i64, [2 x i32] c"i64" !i64 i32'


def test_aggregate_constants_split_into_elements():
    value = "{ i64 1, ptr getelementptr (i8, ptr @g, i64 4), [2 x i8] c\"ab\" }"
    parts = ir.elements(value)
    assert [p.type for p in parts] == ["i64", "ptr", "[2 x i8]"]
    assert parts[1].value.opcode == "getelementptr"
    assert ir.aggregate(value, parts) == value
    assert ir.elements("[i32 1, i32 2]")[1].value == "2"
    assert ir.elements("%x") is None and ir.elements('c"ab"') is None


def test_a_parsed_instruction_shares_nothing_with_the_next_parse_of_its_text():
    # Parses of one text are copies of one parse: changing one, even inside
    # a constant expression, leaves the others as the text says.
    text = ("%v = load float, ptr getelementptr (i8, ptr addrspacecast "
            "(ptr addrspace(3) @tile to ptr), i64 8), align 4")
    first = ir.parse(f"@tile = addrspace(3) global [16 x float] undef\n\n"
                     f"define void @f() {{\n  {text}\n  ret void\n}}\n")
    inst = first.functions[0].blocks[0].instructions[0]
    inst.name = "%w"
    inst.flags.append("volatile")
    inst.operands[0].value.operands[1].value = "16"
    inst.operands[0].value.operands[0].value.operands[0].value = "@other"
    again = ir.instruction(text)
    assert again is not inst
    assert str(again) == text
    assert str(inst) == ("%w = load volatile float, ptr getelementptr (i8, ptr addrspacecast "
                         "(ptr addrspace(3) @other to ptr), i64 16), align 4")


def test_built_instructions_are_the_parsed_ones():
    """A pass reads a built instruction's fields as it reads a parsed one's."""
    from numba_vulkan.llvmir.build import Builder
    b = Builder("%t")
    sign = b.binary("ashr", "i64", "%a", "63", flags=["exact"])
    low = b.cast("trunc", "i64", sign, "i32", name="%low")
    cmp = b.compare("icmp", "slt", "i32", low, "0")
    b.select(cmp, "i32", low, "7")
    b.call("i32", "@llvm.ctpop.i32", [("i32", low)])
    b.call("void", "@f", [("i32", "2"), ("ptr", "%p")])
    assert [str(i) for i in b.instructions] == [
        "%t.1 = ashr exact i64 %a, 63", "%low = trunc i64 %t.1 to i32",
        "%t.2 = icmp slt i32 %low, 0", "%t.3 = select i1 %t.2, i32 %low, i32 7",
        "%t.4 = call i32 @llvm.ctpop.i32(i32 %low)", "call void @f(i32 2, ptr %p)"]
    for inst in b.instructions:
        assert ir._freeze(inst) == ir._freeze(ir.instruction(str(inst)))
