"""The type-layout model (numba_vulkan.llvmir.types) against LLVM's own
layout of the same types under the SPIR-V target's data layout."""

import llvmlite.binding as llvm
import pytest

from numba_vulkan.base.errors import UnsupportedError
from numba_vulkan.codegen.pipeline import DATA_LAYOUT
from numba_vulkan.llvmir import types

NAMED = {"%Pair": "{ i8, double }", "%Packed": "<{ i16, i64 }>"}
TYPES = [
    "i1", "i8", "i16", "i32", "i64", "half", "bfloat", "float", "double", "ptr",
    "ptr addrspace(3)", "[7 x i16]", "[2 x [3 x double]]", "<2 x float>", "<3 x float>",
    "<4 x half>", "<3 x i8>", "{ i8, i32, i16 }", "<{ i8, i32, i16 }>", "{ float, float }",
    "[5 x { i8, double }]", "{ i8, <3 x float>, [2 x i16] }", "%Pair", "%Packed",
    "{ %Pair, i8 }", "[3 x %Packed]", "{ i8, [0 x i64] }",
]


@pytest.fixture(scope="module")
def llvm_layout():
    """LLVM's (size, alignment, field offsets) of each of TYPES."""
    lines = [f"{name} = type {body}" for name, body in NAMED.items()]
    lines += [f"@g{k} = external global {ty}" for k, ty in enumerate(TYPES)]
    module = llvm.parse_assembly("\n".join(lines))
    target = llvm.create_target_data(DATA_LAYOUT)
    found = {}
    for k, text in enumerate(TYPES):
        ty = module.get_global_variable(f"g{k}").global_value_type
        offsets = None
        if ty.is_struct:
            offsets = [target.get_element_offset(ty, i) for i in range(len(list(ty.elements)))]
        found[text] = (target.get_abi_size(ty), target.get_abi_alignment(ty), offsets)
    return found


@pytest.mark.parametrize("text", TYPES)
def test_layout_is_llvms(text, llvm_layout):
    layout = types.Layout(NAMED)
    size, align, offsets = llvm_layout[text]
    assert layout.size_align(text) == (size, align)
    if offsets is not None:
        assert layout.struct_layout(text)[0] == offsets


def test_stride_rounds_to_alignment():
    layout = types.Layout()
    assert layout.stride("{ double, i8 }") == 16
    assert layout.stride("<{ double, i8 }>") == 9
    assert layout.stride("<3 x float>") == 16


def test_preferred_alignment_of_an_alloca():
    layout = types.Layout(NAMED)
    assert layout.preferred_align("[4 x { i8, i8 }]") == 8
    assert layout.preferred_align("%Pair") == 8
    assert layout.preferred_align("[4 x i16]") == 2
    assert layout.preferred_align("<4 x float>") == 16


def test_leaves_in_memory_order():
    layout = types.Layout(NAMED)
    assert types.leaves(layout.parse("[2 x { float, %Pair }]")) == [
        "float", "i8", "double", "float", "i8", "double"]


@pytest.mark.parametrize("text", ["void", "label", 'target("spirv.Image")', "[x x i8]"])
def test_a_type_without_a_layout_is_refused(text):
    with pytest.raises(types.UnknownType) as raised:
        types.Layout().parse(text)
    assert isinstance(raised.value, UnsupportedError)
