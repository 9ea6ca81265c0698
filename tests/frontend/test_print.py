"""``print()`` in kernels and device functions: lines reach sys.stdout after the launch.

Each kernel here is compiled once for the module; lines from different
invocations come in no fixed order, so tests compare them sorted.
"""

import json
import sys

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.base import config
from numba_vulkan import store as kernelcache
from numba_vulkan.base import printbuffer
from numba_vulkan.aot.loader import index
from tests.helpers import assert_valid_spirv, compiled_kernels

NARROW = nv.TargetDescription(vulkan=(1, 2), float64=False, int64=False)


@nv.jit
def group_sums(x):
    g = nv.group_id(0)
    if nv.local_id(0) == 0:
        s = 0
        for k in range(nv.local_size(0)):
            s += x[g * nv.local_size(0) + k]
        print("group", g, "sum", s)


@nv.jit
def every_kind(i8, u8, i16, u16, i32, u32, i64, u64, f32, f64, flags, c64):
    i = nv.global_id(0)
    if i < f32.shape[0]:
        print("ints", i8[i], u8[i], i16[i], u16[i], i32[i], u32[i], i64[i], u64[i])
        print("floats", f32[i], f64[i], flags[i], not flags[i], c64[i])
        print()
        print(7, True, None, "end")


@nv.jit
def numbered(n):
    i = nv.global_id(0)
    if i < n:
        print("line", i)


@nv.jit
def report(tag, value):
    print("device", tag, value)


@nv.jit
def calls_report(x):
    i = nv.global_id(0)
    if i < x.shape[0]:
        report(i, x[i])


@nv.jit
def adds_and_reports(a, b, out):
    # More arrays than calls_report: the print buffer has another binding.
    i = nv.global_id(0)
    if i < a.shape[0]:
        out[i] = a[i] + b[i]
        print("kernel", i)
        report(i, out[i])


@nv.jit(error_model="python")
def prints_then_raises(x):
    i = nv.global_id(0)
    if i < x.shape[0]:
        print("before", i)
        if x[i] < 0:
            raise ValueError("negative")


def lines(captured):
    return sorted(captured.out.splitlines())


def test_a_line_per_group_sorted_matches_numpy(capsys):
    x = np.random.default_rng(1).integers(-1000, 1000, 4 * 64).astype(np.int32)
    group_sums[4, 64](x)
    want = sorted(f"group {g} sum {x[64 * g:64 * (g + 1)].sum()}" for g in range(4))
    assert lines(capsys.readouterr()) == want
    for kernel in compiled_kernels(group_sums):
        assert_valid_spirv(kernel)
        assert list(kernel.metadata["print"].values()) == [
            [{"text": "group"}, {"value": "int64"}, {"text": "sum"}, {"value": "int64"}]]


def test_ints_floats_bools_complex_and_constants_print_as_the_host_prints_them(capfd):
    ints = [np.array(v, dtype=t) for t, v in (
        (np.int8, [-128, 127, 0, -1, 5, 1]), (np.uint8, [255, 0, 1, 2, 3, 4]),
        (np.int16, [-32768, 32767, 0, -1, 5, 1]), (np.uint16, [65535, 0, 1, 2, 3, 4]),
        (np.int32, [-2 ** 31, 2 ** 31 - 1, 0, -1, 5, 1]),
        (np.uint32, [2 ** 32 - 1, 0, 1, 2, 3, 4]),
        (np.int64, [-2 ** 63, 2 ** 63 - 1, 0, -1, 2 ** 40, 1]),
        (np.uint64, [2 ** 64 - 1, 0, 1, 2, 3, 2 ** 63]))]
    f32 = np.array([0.1, 1e10, -0.0, np.inf, np.nan, 1 / 3], np.float32)
    f64 = np.array([0.1, 1e16, -0.0, -np.inf, 1.5e-5, 1 / 3])
    flags = np.array([True, False, True, False, False, True])
    c64 = np.array([1 + 2j, -0.5j, 0, 1e10 + 1j, 3, 1 / 3 - 1j], np.complex64)
    every_kind.forall(6)(*ints, f32, f64, flags, c64)
    want = []
    for i in range(6):
        want.append(" ".join(["ints"] + [str(a[i]) for a in ints]))
        want.append(" ".join(["floats", str(f32[i]), str(f64[i]), str(flags[i]),
                              str(not flags[i]), str(c64[i])]))
        want += ["", "7 True None end"]
    assert lines(capfd.readouterr()) == sorted(want)
    assert_valid_spirv(compiled_kernels(every_kind)[0])


def test_a_full_buffer_drops_calls_and_says_how_many(capsys):
    # A record of numbered is 3 words, the header 4: 64 bytes hold 4 records.
    with config.overriding(NUMBA_VULKAN_PRINT_BUFFER_BYTES="64"):
        numbered.forall(32)(32)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 5 and len({line for line in out[:4]}) == 4
    assert all(line.startswith("line ") and 0 <= int(line[5:]) < 32 for line in out[:4])
    assert out[4].startswith("[numba_vulkan: 28 print() calls dropped")
    # 44 bytes: the third record straddles the end, and what it reserved is
    # not read (the new buffer's zeros would decode as an unknown record).
    with config.overriding(NUMBA_VULKAN_PRINT_BUFFER_BYTES="44"):
        numbered.forall(32)(32)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and out[2].startswith("[numba_vulkan: 30 print() calls dropped")
    # Back to the default: every line, none dropped.
    numbered.forall(32)(32)
    assert lines(capsys.readouterr()) == sorted(f"line {i}" for i in range(32))


def test_print_from_a_device_function_in_two_kernels(capsys):
    x = np.arange(5, dtype=np.float32) / 4
    calls_report.forall(5)(x)
    assert lines(capsys.readouterr()) == sorted(f"device {i} {x[i]}" for i in range(5))
    a, b, out = np.arange(3, dtype=np.int32), np.full(3, 10, np.int32), np.zeros(3, np.int32)
    adds_and_reports.forall(3)(a, b, out)
    assert lines(capsys.readouterr()) == sorted(
        [f"kernel {i}" for i in range(3)] + [f"device {i} {10 + i}" for i in range(3)])
    np.testing.assert_array_equal(out, a + b)
    for kernel in compiled_kernels(calls_report) + compiled_kernels(adds_and_reports):
        assert_valid_spirv(kernel)


def test_lines_come_before_the_kernels_exception(capsys):
    x = np.array([1, -1, 2], np.int32)
    with pytest.raises(ValueError, match="negative"):
        prints_then_raises.forall(3)(x)
    assert lines(capsys.readouterr()) == [f"before {i}" for i in range(3)]


def test_what_cannot_be_printed_is_a_compile_error():
    @nv.jit
    def prints_an_array(x):
        print("x is", x)

    with pytest.raises(nv.CompilerError, match=r"print\(\) in a kernel takes .* argument 2"):
        prints_an_array.compile("void(float32[::1])")


def test_a_string_that_is_not_a_constant_is_unsupported():
    # In say() the text is a unicode_type argument, not a constant: Numba
    # lowers that string (and casts every constant string of a print to
    # unicode_type too) with the target's model of unicode_type.
    @nv.jit
    def say(tag, value):
        print(tag, value)

    @nv.jit
    def says(x):
        say("tag", x[0])

    with pytest.raises(nv.UnsupportedError,
                       match="argument 1 is a string that is not a constant"):
        says.compile("void(int32[::1])")


def test_the_target_sees_models_numba_registers_after_it_starts():
    """Numba registers unicode_type's model when numba.cpython.unicode is
    imported, which may be after the Vulkan target context exists; print's
    constant strings need it."""
    from llvmlite import ir
    from numba.core import types
    from numba.core.datamodel import default_manager, models
    from numba_vulkan.frontend.target import vulkan_target

    class Late(types.Opaque):
        pass

    manager = vulkan_target.target_context.data_model_manager
    default_manager.register(Late, models.OpaqueModel)
    assert manager.lookup(Late("late")).get_value_type() == ir.IntType(8).as_pointer()
    assert manager.lookup(types.unicode_type) is not None
    assert manager.lookup(types.float16).get_value_type() == ir.HalfType()

def test_a_narrowed_target_prints_64_bit_values_as_32_bit_ones():
    @nv.jit
    def wide(x, n):
        print(x[0], n, x[0] * 1j)

    with pytest.warns(nv.NarrowingWarning):
        kernel = wide.compile("void(float64[::1], int64)", target=NARROW)
    assert_valid_spirv(kernel)
    assert list(kernel.metadata["print"].values()) == [
        [{"value": "float32"}, {"value": "int32"}, {"value": "complex64"}]]


def test_decoding_a_buffer_by_hand():
    formats = {"9": [{"text": "a"}, {"value": "int64"}, {"value": "float64"},
                     {"value": "uint32"}]}
    words = printbuffer.header(4 * 16)
    record = np.frombuffer(np.array([-3], np.int64).tobytes() + np.array([0.25]).tobytes()
                           + np.array([7], np.uint32).tobytes(), np.uint32)
    body = np.concatenate([[9], record, [9], record]).astype(np.uint32)
    words = np.concatenate([words, body, np.zeros(12 - len(body), np.uint32)])
    words[printbuffer.RESERVED] = len(body)
    assert printbuffer.decode(words, formats) == ["a -3 0.25 7\n"] * 2
    words[printbuffer.HEADER_WORDS + 6] = 5
    assert printbuffer.decode(words, formats)[1].startswith(
        "[numba_vulkan: print record of unknown format 5")
    for bad in ({"x": []}, {"1": [{"value": "int128"}]}, {"1": [{"text": 3}]}, {"1": "a"}):
        with pytest.raises(ValueError):
            printbuffer.check_formats(bad)


# From the kernel cache and an AOT directory --------------------------------


def test_from_the_functions_tier_without_numba(capsys):
    cached = nv.jit(cache=True)(group_sums.py_func)
    x = np.arange(2 * 64, dtype=np.int32)
    cached[2, 64](x)
    first = lines(capsys.readouterr())
    kernelcache.reset_stats()
    again = nv.jit(cache=True)(group_sums.py_func)
    again[2, 64](x)
    assert kernelcache.stats()["functions"]["hits"] == 1
    assert lines(capsys.readouterr()) == first == sorted(
        f"group {g} sum {x[64 * g:64 * (g + 1)].sum()}" for g in range(2))


AOT_KERNEL = '''
import numba_vulkan as nv


@nv.jit
def squares(n):
    i = nv.global_id(0)
    if i < n:
        print("square", i, i * i, i / 2)
'''


def test_from_an_aot_directory_in_strict_mode(tmp_path, monkeypatch, capsys):
    from numba_vulkan.aot.build import builder as build
    (tmp_path / "printkern.py").write_text(AOT_KERNEL)
    (tmp_path / "kernels.yaml").write_text(
        "version: 1\nprofiles:\n  - name: full\nkernels:\n"
        "  - function: printkern:squares\n    signatures: ['void(int64)']\n")
    result = build.build(str(tmp_path / "kernels.yaml"))
    assert not result.failures, result.failures[0].message
    with open(tmp_path / "aot" / index.INDEX, "rb") as f:
        entries = json.loads(f.read())["entries"]
    assert [list(e["print"].values()) for e in entries] == [[
        [{"text": "square"}, {"value": "int64"}, {"value": "int64"}, {"value": "float64"}]]]
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("NUMBA_VULKAN_AOT_PATH", str(tmp_path / "aot"))
    monkeypatch.setenv("NUMBA_VULKAN_AOT_STRICT", "1")
    import printkern
    try:
        hits = nv.aot.stats()["hits"]
        printkern.squares.forall(4)(4)
        assert nv.aot.stats()["hits"] == hits + 1
    finally:
        sys.modules.pop("printkern", None)
    assert lines(capsys.readouterr()) == sorted(f"square {i} {i * i} {i / 2}" for i in range(4))
    # An entry without its formats, or with formats and no print buffer, is damaged.
    for damage in (lambda e: e.pop("print"),
                   lambda e: e.update(params=e["params"][:-1])):
        entry = json.loads(json.dumps(entries[0]))
        damage(entry)
        data = index.dumps({"format": index.FORMAT_VERSION, "entries": [entry]})
        with pytest.raises(nv.AOTError, match="damaged"):
            index.parse(data, "aot")
