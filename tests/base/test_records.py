"""Record (structured NumPy dtype) arrays in kernels: arguments, field reads
and writes, nested records and subarray fields, packed and aligned layouts,
refused dtypes, AOT directories and the kernel cache."""

import sys
import textwrap

import numba
import numpy as np
import pytest
from numba.np import numpy_support

import numba_vulkan as nv
from numba_vulkan.base import records
from numba_vulkan.base import signature
from numba_vulkan.base.errors import UnsupportedError
from numba_vulkan.base.target import TargetDescription
from tests.helpers import ROOT

PARTICLE = np.dtype([("x", "f4"), ("y", "f4"), ("vx", "f4"), ("vy", "f4"), ("id", "i4")])


@nv.jit
def move(p, dt):
    i = nv.global_id(0)
    if i < p.shape[0]:
        p[i].x += p[i].vx * dt                      # by attribute
        p[i]["y"] = p[i]["y"] + p[i]["vy"] * dt     # by name


def particles(rng, n):
    p = np.zeros(n, PARTICLE)
    for name in ("x", "y", "vx", "vy"):
        p[name] = rng.random(n, dtype=np.float32)
    p["id"] = np.arange(n)
    return p


def moved(p, dt):
    want = p.copy()
    want["x"] += want["vx"] * dt
    want["y"] += want["vy"] * dt
    return want


def test_particles_move_by_their_velocities(rng):
    p = particles(rng, 1000)
    d = nv.to_device(p)
    move.forall(p.size)(d, np.float32(0.25))
    move.forall(p.size)(d, np.float32(0.25))
    got = d.copy_to_host()
    assert got.dtype == PARTICLE
    np.testing.assert_array_equal(got, moved(moved(p, np.float32(0.25)), np.float32(0.25)))
    host = p.copy()                                 # a NumPy array: copied in and back
    move.forall(p.size)(host, np.float32(0.5))
    np.testing.assert_array_equal(host, moved(p, np.float32(0.5)))


def test_device_array_of_records_views_and_copies(rng):
    p = particles(rng, 64)
    d = nv.device_array(64, PARTICLE)
    assert d.dtype == PARTICLE and d.nbytes == p.nbytes
    d.copy_to_device(p)
    move.forall(32)(d[1::2], np.float32(2.0))       # a strided view of records
    want = p.copy()
    want[1::2] = moved(p[1::2], np.float32(2.0))
    np.testing.assert_array_equal(d.copy_to_host(), want)
    np.testing.assert_array_equal(d[3:5].copy_to_host(), want[3:5])


ALL_FIELDS = [("b", "?"), ("i1", "i1"), ("u1", "u1"), ("i2", "i2"), ("u2", "u2"),
              ("i4", "i4"), ("u4", "u4"), ("i8", "i8"), ("u8", "u8"), ("f4", "f4"),
              ("f8", "f8"), ("v", "f4", (3,)), ("p", [("c", "i1"), ("d", "f8")])]


@nv.jit
def bump(a, b):
    i = nv.global_id(0)
    if i < a.shape[0]:
        b[i].b = not a[i].b
        b[i].i1 = a[i].i1 - 1
        b[i].u1 = a[i].u1 + 1
        b[i].i2 = a[i].i2 - 1
        b[i].u2 = a[i].u2 + 1
        b[i].i4 = a[i].i4 - 1
        b[i].u4 = a[i].u4 + 1
        b[i].i8 = a[i].i8 - 1
        b[i].u8 = a[i].u8 + 1
        b[i].f4 = a[i].f4 * 2
        b[i].f8 = a[i].f8 * 2
        for k in range(3):
            b[i].v[k] = a[i].v[2 - k]
        b[i].p.c = a[i].p.c + 1
        b[i].p.d = a[i].p.d - 0.5


@pytest.mark.parametrize("aligned", [False, True], ids=["packed", "aligned"])
def test_every_field_dtype_at_numpys_offsets(rng, aligned):
    """Each field is read and written at the offset NumPy gives it: the
    output's bytes, padding included, are NumPy's for the same values."""
    dtype = np.dtype(ALL_FIELDS, align=aligned)
    assert dtype.isalignedstruct == aligned and dtype.itemsize == (80 if aligned else 64)
    n = 37
    a = np.zeros(n, dtype)
    a["b"] = rng.random(n) < 0.5
    for name in ("i1", "u1", "i2", "u2", "i4", "u4", "u8"):
        a[name] = rng.integers(0, 100, n)
    a["i8"] = rng.integers(-2**40, 2**40, n)
    a["f4"], a["f8"] = rng.random(n), rng.random(n)
    a["v"] = rng.random((n, 3))
    a["p"]["c"], a["p"]["d"] = rng.integers(-50, 50, n), rng.random(n)
    # np.zeros_like leaves a record's padding as it finds it; np.zeros clears it.
    b = np.zeros(n, dtype)
    bump.forall(n)(a, b)
    want = np.zeros(n, dtype)
    want["b"] = ~a["b"]
    for name in ("i1", "i2", "i4", "i8"):
        want[name] = a[name] - 1
    for name in ("u1", "u2", "u4", "u8"):
        want[name] = a[name] + 1
    want["f4"], want["f8"] = a["f4"] * 2, a["f8"] * 2
    want["v"] = a["v"][:, ::-1]
    want["p"]["c"], want["p"]["d"] = a["p"]["c"] + 1, a["p"]["d"] - 0.5
    np.testing.assert_array_equal(b.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("fields", [
    ALL_FIELDS,
    [("c", "i1"), ("x", "f4"), ("d", "f8"), ("m", "i2", (2, 3))],
    [("id", "i4"), ("pos", [("x", "f4"), ("y", "f4")]), ("v", "f4", (3,))],
    {"names": ["a", "b"], "formats": ["f4", "i1"], "offsets": [4, 0], "itemsize": 12},
    [("p", [("a", "i1"), ("b", "f8")], (2,)), ("t", "u2")],
], ids=["all", "packed", "nested", "offsets", "subrecords"])
@pytest.mark.parametrize("aligned", [False, True], ids=["packed", "aligned"])
def test_text_form_keeps_numpys_layout(fields, aligned):
    """The layout rule is NumPy's: the text form (the type a launch names)
    gives back NumPy's itemsize and field offsets, and Numba's record type,
    which the kernel's code is lowered from, puts every field there too."""
    if isinstance(fields, dict) and aligned:
        fields = dict(fields, aligned=True)
    dtype = np.dtype(fields, align=aligned)
    text = records.text(dtype)
    back = records.dtype(text)
    assert back.itemsize == dtype.itemsize and dict(back.fields) == dict(dtype.fields)
    assert sorted(records.scalar_fields(back)) == sorted(records.scalar_fields(dtype))
    numba_type = numpy_support.from_dtype(dtype)
    assert records.text(numpy_support.as_dtype(numba_type)) == text
    assert numba_type.size == dtype.itemsize
    for name in dtype.names:
        assert numba_type.offset(name) == dtype.fields[name][1]
    # Every scalar's offset is where NumPy writes it.
    for path, name, offset in records.scalar_fields(dtype):
        a = np.zeros(1, dtype)
        view = a
        for part in path.replace("[", ".[").split("."):
            if part.startswith("["):
                view = view[(slice(None), *map(int, part[1:-1].split(",")))]
            else:
                view = view[part]
        view[...] = 1
        raw = a.view(np.uint8)
        size = np.dtype(name).itemsize
        assert raw[offset:offset + size].any() and not np.delete(
            raw, range(offset, offset + size)).any(), path
    assert signature.parse(f"{text}[1d,C]") == ("array", text, 1, "C")


@pytest.mark.parametrize("text", [
    "{x:object@0;8}[1d,C]",                        # a field dtype kernels cannot read
    "{n:int32@4,x:float32@0;8}[1d,C]",             # fields not in offset order
    "{x:float32@0;8",                              # cut short
    "{x:float32@0;8}[1d,Q]",
    "{my field:int32@0;4}",
])
def test_a_type_text_that_is_not_a_records_own_is_refused(text):
    """What an AOT index or the cache names is read back only in the form
    records.text gives."""
    with pytest.raises(ValueError):
        signature.parse(text)


LOOPED = np.dtype([("x", "f4"), ("n", "i4"), ("w", "f4")])


@nv.jit
def weighted_sum(a, out):
    i = nv.global_id(0)
    if i < out.shape[0]:
        s = 0.0
        for j in range(i, a.shape[0]):
            s += a[j].x * a[j].n + a[j].w
        out[i] = s


def test_a_loop_over_records_keeps_word_accesses(rng):
    """The offset of a[j] in a loop (a pointer stepped by the itemsize, 12)
    is proven a multiple of 4 through the loop's phi."""
    a = np.zeros(300, LOOPED)
    a["x"], a["n"], a["w"] = rng.random(300), rng.integers(-5, 5, 300), rng.random(300)
    out = np.zeros(7)
    weighted_sum.forall(out.size)(a, out)
    terms = a["x"].astype(np.float64) * a["n"] + a["w"]
    np.testing.assert_allclose(out, [terms[i:].sum() for i in range(7)], rtol=1e-12)
    compiled = weighted_sum.compile((f"{records.text(LOOPED)}[1d,C]", "float64[1d,C]"),
                                    threads=256)
    assert "VulkanBuffer_a0i32" in compiled.llvm_ir and "VulkanBuffer_a0i8" not in compiled.llvm_ir


@nv.jit
def copy_records(a, b):
    i = nv.global_id(0)
    if i < a.shape[0]:
        b[i] = a[i]


@pytest.mark.parametrize("fields, words", [
    ([("x", "f4"), ("n", "i2"), ("v", "f8", (2,))], True),
    ([("x", "f4"), ("c", "i1")], False),
], ids=["24-bytes", "5-bytes"])
def test_whole_record_assignment(rng, fields, words):
    """A record's bytes are copied a word at a time where the itemsize is
    a multiple of 4 (no byte buffer, no atomics), else byte by byte."""
    dtype = np.dtype(fields, align=words)
    a = np.zeros(19, dtype)
    a["x"], a[dtype.names[1]] = rng.random(19), np.arange(19)
    if words:
        a["v"] = rng.random((19, 2))
    b = np.zeros(a.shape, dtype)
    copy_records.forall(a.size)(a, b)
    np.testing.assert_array_equal(b.view(np.uint8), a.view(np.uint8))
    compiled = copy_records.compile((f"{records.text(dtype)}[1d,C]",) * 2, threads=256)
    assert ("VulkanBuffer_a0i32" in compiled.llvm_ir and
            "atomicrmw" not in compiled.llvm_ir) == words


def test_aligned_fields_are_typed_accesses_and_packed_ones_assembled():
    """An all-float32 record is a buffer of floats; a packed float32 at
    offset 1 is read and written byte by byte (8-bit storage access)."""
    aligned = move.compile((f"{records.text(PARTICLE)}[1d,A]", "float32"))
    assert "Int8" not in aligned.capabilities
    assert "VulkanBuffer_a0f32" in aligned.llvm_ir
    packed = np.dtype([("c", "i1"), ("x", "f4"), ("d", "f8"), ("m", "i2", (2, 3))])
    compiled = nv.jit(_packed_kernel).compile((f"{records.text(packed)}[1d,C]",))
    assert "Int8" in compiled.capabilities and "VulkanBuffer_a0i8" in compiled.llvm_ir


def test_bytes_of_one_word_written_by_different_invocations():
    """1- and 2-byte fields of an array whose itemsize is a multiple of 4
    live in 32-bit words: invocations that write different bytes of one
    word at once (neighbouring lanes, one store instruction) each keep the
    others' bytes."""
    dtype = np.dtype([("v", "i1", (4,)), ("h", "u2", (2,)), ("x", "f4")])
    sig = (f"{records.text(dtype)}[1d,C]", "int32")
    compiled = nv.jit(_spread).compile(sig, threads=256)
    assert "VulkanBuffer_a0i32" in compiled.llvm_ir and "VulkanBuffer_a0i8" not in compiled.llvm_ir
    out = np.zeros(300, dtype)
    nv.jit(_spread).forall(4 * out.size)(out, np.int32(5))
    i = np.arange(4 * out.size).reshape(-1, 4)
    want = np.zeros(300, dtype)
    want["v"] = -((i + 5) % 128)
    want["h"] = (i[:, :2] + 5) * 7
    np.testing.assert_array_equal(out.view(np.uint8), want.view(np.uint8))


def _spread(out, k):
    i = nv.global_id(0)
    if i < 4 * out.shape[0]:
        r, j = i // 4, i % 4
        out[r].v[j] = -((i + k) % 128)
        if j < 2:
            out[r].h[j] = (i + k) * 7


MIXED = np.dtype([("x", "f4"), ("c", "i1"), ("f", "?"), ("h", "i2"), ("d", "f8")], align=True)


@nv.jit
def reverse_in_shared(a, out):
    t = nv.shared.array(64, MIXED)
    i = nv.local_id(0)
    t[i].x = a[i].x
    t[i].c = a[i].c
    t[i].f = a[i].f
    t[i].h = a[i].h
    t[i].d = a[i].d
    nv.barrier()
    j = 63 - i
    out[i] = t[j].x + t[j].c + t[j].f + t[j].h + t[j].d


@numba.njit
def _reverse_reference(a, out):
    for i in range(64):
        j = 63 - i
        out[i] = a[j].x + a[j].c + a[j].f + a[j].h + a[j].d


def test_records_in_workgroup_memory(rng):
    """A shared array of records whose 1- and 2-byte fields share words
    (written with workgroup atomics) and a float64 field assembled from
    two words, as numba.njit computes it."""
    a = np.zeros(64, MIXED)
    a["x"], a["d"] = rng.random(64), rng.random(64)
    a["c"], a["h"] = rng.integers(-9, 9, 64), rng.integers(-999, 999, 64)
    a["f"] = rng.random(64) < 0.5
    out, want = np.zeros(64), np.zeros(64)
    reverse_in_shared[1, 64](a, out)
    _reverse_reference(a, want)
    np.testing.assert_array_equal(out, want)


PACKED = np.dtype([("c", "i1"), ("x", "f4"), ("h", "i2")])
PACKED_TYPE = numba.from_dtype(PACKED)


@nv.jit
def through_local(a, out):
    t = nv.local.array(3, PACKED_TYPE)
    i = nv.global_id(0)
    if i < a.shape[0]:
        for k in range(3):
            t[k].c = a[i].c + k
            t[k].x = a[i].x * k
            t[k].h = a[i].h - k
        s = 0.0
        for k in range(3):
            s += t[k].c + t[k].x + t[k].h
        out[i] = s


def test_packed_records_in_private_memory():
    a = np.zeros(40, PACKED)
    a["c"], a["x"], a["h"] = np.arange(40), np.arange(40) * 0.5, np.arange(40) * 3
    out = np.zeros(40, np.float32)
    through_local.forall(a.size)(a, out)
    want = sum(a["c"] + k + a["x"] * k + a["h"] - k for k in range(3))
    np.testing.assert_array_equal(out, want.astype(np.float32))


def _packed_kernel(a):
    i = nv.global_id(0)
    if i < a.shape[0]:
        a[i].x = a[i].x + a[i].c
        a[i].d = a[i].d * 3


@pytest.mark.parametrize("fields, path, words", [
    ([("x", "f4"), ("c", "S4")], "c", "S4"),
    ([("x", "f4"), ("s", "U3")], "s", "<U3"),
    ([("x", "f4"), ("o", "O")], "o", "object"),
    ([("x", "f4"), ("t", "M8[s]")], "t", "datetime64"),
    ([("x", "f4"), ("pos", [("y", "f4"), ("z", ">f8")])], "pos.z", ">f8"),
    ({"names": ["x"], "formats": ["f4"], "titles": ["T"]}, "x", "title"),
    ([("x", "f4"), ("my field", "i4")], "my field", "identifier"),
], ids=["bytes", "string", "object", "datetime", "big-endian", "title", "name"])
def test_a_dtype_that_cannot_be_laid_out_is_a_type_error_naming_the_field(fields, path, words):
    a = np.zeros(4, np.dtype(fields))
    with pytest.raises(TypeError, match=rf"parameter 'a'.*'{path}'.*{words}"):
        copy_records.forall(4)(a, a.copy())


NESTED = np.dtype([("c", "i1"), ("p", [("a", "f8"), ("b", "i2")]), ("v", "f4", (3,))])
# 324 bytes: past every target's push constant block (a device's target
# takes at most 256 bytes of it), so it travels in the argument buffer on
# lavapipe (128 bytes) and on the H200 (256) alike.
BIG = np.dtype([("w", "f8", (40,)), ("n", "i4")])


@nv.jit
def from_scalar(out, r):
    i = nv.global_id(0)
    if i < out.shape[0]:
        out[i] = r.p.a * i + r.p.b + r.v[i % 3]
        if i == 0:
            r.c += 1                                # the caller's record


def test_record_scalars_are_passed_by_reference():
    """A record (numpy.void) is an array of one record: the kernel reads
    its fields and its writes reach the array it is an element of."""
    a = np.zeros(3, NESTED)
    r = a[1]
    r["c"], r["p"]["a"], r["p"]["b"], r["v"] = 5, 0.25, -7, (1, 2, 3)
    out = np.zeros(9)
    from_scalar[1, 16](out, r)
    i = np.arange(9)
    np.testing.assert_array_equal(out, 0.25 * i - 7 + np.array([1, 2, 3])[i % 3])
    assert list(a["c"]) == [0, 6, 0]
    compiled = next(iter(from_scalar._compiled.values()))
    assert [p.kind for p in compiled.params if p.name == "r"] == ["array"]


def test_a_big_record_scalar_is_an_argument_like_a_small_one():
    """A record larger than any push constant block (324 bytes) takes no
    more of it than an array does."""
    @nv.jit
    def from_big_scalar(out, a, r, b):
        i = nv.global_id(0)
        if i < out.shape[0]:
            out[i] = r.w[i] + r.n + a + b

    big = np.zeros(1, BIG)[0]
    big["w"], big["n"] = np.arange(40) * 0.5, 3
    out = np.zeros(40)
    from_big_scalar.forall(out.size)(out, 1.0, big, 2.0)
    np.testing.assert_array_equal(out, np.arange(40) * 0.5 + 6)
    [compiled] = from_big_scalar._compiled.values()
    assert not any(p.spilled for p in compiled.params)


def test_64_bit_field_on_a_narrowing_target_names_the_field():
    dtype = np.dtype([("x", "f4"), ("pos", [("d", "f8")])])
    with pytest.raises(UnsupportedError, match=r"'pos\.d' is 64-bit"):
        copy_records.compile((f"{records.text(dtype)}[1d,C]",) * 2,
                             target=TargetDescription(float64=False))


COMPLEX = np.dtype([("c", "i1"), ("z", "c8"), ("w", "c16")])     # packed: z at 1


@nv.jit
def complex_fields(a, out):
    i = nv.global_id(0)
    if i < a.shape[0]:
        z = a[i].z
        out[i] = z * z
        a[i].w = a[i].w * 2 + z


def test_complex_fields(rng):
    a = np.zeros(10, COMPLEX)
    a["z"] = rng.random(10) + 1j * rng.random(10)
    a["w"] = rng.random(10) + 1j * rng.random(10)
    want = a.copy()
    want["w"] = a["w"] * 2 + a["z"]
    out = np.zeros(10, np.complex64)
    complex_fields.forall(a.size)(a, out)
    np.testing.assert_allclose(out, a["z"] * a["z"], rtol=1e-6)
    np.testing.assert_array_equal(a, want)


HALVES = np.dtype([("x", "f4"), ("h", "f2"), ("v", "f2", (3,))])


@nv.jit
def halve(a, out):
    i = nv.global_id(0)
    if i < a.shape[0]:
        a[i].h = a[i].h * np.float16(0.5) + a[i].v[1]
        out[i] = a[i].h


def test_float16_fields(rng):
    """float16 fields inside 32-bit words, on a device with float16
    arithmetic (tests/frontend/test_float16.py runs them without it too)."""
    if not nv.get_current_device().target.float16:
        pytest.skip("the device has no float16 arithmetic")
    a = np.zeros(50, HALVES)
    a["x"], a["h"], a["v"] = rng.random(50), rng.random(50), rng.random((50, 3))
    want = a["h"] * np.float16(0.5) + a["v"][:, 1]
    out = np.zeros(50, np.float16)
    halve.forall(a.size)(a, out)
    np.testing.assert_array_equal(a["h"], want)
    np.testing.assert_array_equal(out, want)
    # Without float16 arithmetic the fields' bits are converted in integer
    # arithmetic: no float16 type is computed with.
    emulated = halve.compile((f"{records.text(HALVES)}[1d,C]", "float16[1d,C]"),
                             target=TargetDescription())
    assert "Float16" not in emulated.capabilities


AOT_MODULE = '''
import numpy as np
import numba_vulkan as nv

particle = np.dtype([("x", "f4"), ("y", "f4"), ("vx", "f4"), ("vy", "f4"), ("id", "i4")])
step = np.dtype([("dt", "f4"), ("scale", "f4")])


@nv.jit
def drift(p, s):
    i = nv.global_id(0)
    if i < p.shape[0]:
        p[i].x += p[i].vx * s.dt
        p[i].y += p[i].vy * s.dt * s.scale
'''


def test_record_kernel_from_an_aot_directory(tmp_path, rng, monkeypatch):
    """A manifest names a record by a dtype of the kernel's module or by its
    text form (as the strict mode's hint writes it)."""
    from numba_vulkan.aot.build.builder import build
    from numba_vulkan.aot.loader import lookup
    (tmp_path / "recaot.py").write_text(AOT_MODULE)
    (tmp_path / "kernels.yaml").write_text(textwrap.dedent('''\
        version: 1
        kernels:
          - function: recaot:drift
            signatures: ["void(particle[:], {dt:float32@0,scale:float32@4;8})"]
        '''))
    build(str(tmp_path / "kernels.yaml"))
    module = sys.modules["recaot"]
    monkeypatch.setattr(lookup, "_warned", set())
    monkeypatch.setenv("NUMBA_VULKAN_AOT_PATH", str(tmp_path / "aot"))
    monkeypatch.setenv("NUMBA_VULKAN_AOT_STRICT", "1")
    hits = nv.aot.stats()["hits"]
    p = particles(rng, 300)
    got = p.copy()
    settings = np.array((0.5, 1.0), module.step)[()]
    module.drift.forall(p.size)(got, settings)       # strict: compiling would raise
    assert nv.aot.stats()["hits"] == hits + 1
    np.testing.assert_array_equal(got, moved(p, np.float32(0.5)))
    sys.modules.pop("recaot")


def test_record_kernel_from_the_cache(cache_dir, rng, monkeypatch):
    from numba_vulkan import store as kernelcache
    from numba_vulkan.frontend import compile as compile_module
    p = particles(rng, 100)
    first = p.copy()
    nv.jit(cache=True)(move.py_func).forall(p.size)(first, np.float32(0.5))

    def no_numba(*args, **kwargs):
        raise AssertionError("Numba ran on a cache hit")

    monkeypatch.setattr(compile_module, "compile_kernel", no_numba)
    second = p.copy()
    nv.jit(cache=True)(move.py_func).forall(p.size)(second, np.float32(0.5))
    assert kernelcache.stats()["functions"]["hits"] == 1
    np.testing.assert_array_equal(second, moved(p, np.float32(0.5)))
    np.testing.assert_array_equal(first, second)


def test_the_example_of_docs_records_runs():
    import os
    import re
    path = os.path.join(ROOT, "docs", "records.md")
    with open(path) as f:
        code = re.search(r"```python\n(.*?)```", f.read(), re.S).group(1)
    namespace = {}
    exec(compile(code, path, "exec"), namespace)
    p = namespace["p"]
    assert p.dtype.itemsize == 24
    np.testing.assert_array_equal(p["pos"], p["vel"] * np.float32(0.01))
    assert p["alive"].all() and not p["id"].any()
