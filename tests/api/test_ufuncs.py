"""GPU ufuncs: nv.vectorize, nv.guvectorize and nv.reduce against NumPy.

Kernels are shared between tests (module-level ufuncs, small arrays): each
distinct dtype and operand layout compiles one kernel.
"""

import math
import textwrap

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.runtime.memory import DeviceArray
from tests.helpers import assert_valid_spirv, run_python

TYPES = ["float32", "float64", "int32"]
# Exact types come first where one also casts safely to another (int32 to float64).
LOOPS = ["int32", "float32", "float64"]


@nv.vectorize([f"{t}({t})" for t in LOOPS])
def twice_abs(a):
    return a * 2 if a >= 0 else -a


@nv.vectorize([f"{t}({t}, {t})" for t in LOOPS])
def sub(a, b):
    return a - b


@nv.vectorize([f"{t}({t}, {t}, {t})" for t in LOOPS])
def mad(a, b, c):
    return a * b + c


@nv.vectorize(["float32(float32, float32)", "float64(float64, float64)"])
def hypot(a, b):
    return math.sqrt(a * a + b * b)


@nv.guvectorize(["void(float32[:], float32[:], float32[:])",
                 "void(float64[:], float64[:], float64[:])"], "(n),(n)->()")
def rowdot(a, b, out):
    total = 0.0
    for j in range(a.shape[0]):
        total += a[j] * b[j]
    out[0] = total


@nv.guvectorize(["void(float32[:], float32, float32[:])",
                 "void(float64[:], float64, float64[:])"], "(n),()->(n)")
def scaled(a, factor, out):
    for j in range(a.shape[0]):
        out[j] = a[j] * factor


sum_reduce = nv.reduce(lambda a, b: a + b)
max_reduce = nv.reduce(lambda a, b: max(a, b))


def _inputs(rng, dtype, shape, count):
    if dtype == "int32":
        return [rng.integers(-1000, 1000, shape).astype(np.int32) for _ in range(count)]
    return [(rng.random(shape) * 4 - 2).astype(dtype) for _ in range(count)]


def _check(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(want.dtype).eps)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", TYPES)
def test_one_two_and_three_inputs_match_numpy(rng, dtype):
    a, b, c = _inputs(rng, dtype, (257,), 3)
    _check(twice_abs(a), np.where(a >= 0, a * 2, -a).astype(dtype))
    _check(sub(a, b), a - b)
    _check(mad(a, b, c), a * b + c)


def test_broadcasting_against_numpy(rng):
    a, = _inputs(rng, "float32", (3, 1, 5), 1)
    b, = _inputs(rng, "float32", (4, 5), 1)
    _check(mad(a, b, np.float32(0.5)), a * b + np.float32(0.5))
    # A Python scalar is cast to the signature's type, as NumPy's weak scalars.
    _check(sub(b, 2), b - np.float32(2))
    _check(sub(a, b[0]), a - b[0])
    i, = _inputs(rng, "int32", (2, 3), 1)
    _check(mad(i, np.arange(3, dtype=np.int32), 7), i * np.arange(3, dtype=np.int32) + 7)


def test_out_numpy_device_and_positional(rng):
    a, b = _inputs(rng, "float64", (6, 7), 2)
    out = np.zeros((6, 7))
    assert sub(a, b, out=out) is out
    _check(out, a - b)
    out2 = np.zeros((6, 7))
    assert sub(a, b, out2) is out2
    _check(out2, a - b)
    out3 = np.zeros((6, 7))
    assert sub(a, b, out=(out3,)) is out3
    _check(out3, a - b)
    # A float32 result into float64 out: NumPy's 'same_kind' casting.
    wide = np.zeros((6, 7))
    sub(a.astype(np.float32), b.astype(np.float32), out=wide)
    _check(wide, (a.astype(np.float32) - b.astype(np.float32)).astype(np.float64))
    dout = nv.device_array((6, 7), np.float64)
    assert sub(nv.to_device(a), b, out=dout) is dout
    _check(dout.copy_to_host(), a - b)
    # A strided out: a view written in place, the rest left alone.
    big = np.zeros((6, 14))
    sub(a, b, out=big[:, ::2])
    _check(big[:, ::2], a - b)
    assert not big[:, 1::2].any()
    with pytest.raises(ValueError, match="do not broadcast"):
        sub(a, b, out=np.zeros((6, 8)))
    with pytest.raises(ValueError, match="out has shape"):
        sub(a, b, out=np.zeros((7,)))
    with pytest.raises(TypeError, match="same_kind"):
        sub(a, b, out=np.zeros((6, 7), np.int32))


def test_device_operands_give_device_results(rng):
    a, b = _inputs(rng, "float32", (100,), 2)
    da, db = nv.to_device(a), nv.to_device(b)
    got = hypot(da, db, stream=0)
    assert isinstance(got, DeviceArray)
    _check(got.copy_to_host(), np.sqrt(a * a + b * b))
    # One device operand is enough; NumPy ones are copied in for the launch.
    mixed = hypot(da, b)
    assert isinstance(mixed, DeviceArray)
    _check(mixed.copy_to_host(), np.sqrt(a * a + b * b))
    # A broadcast device row: no copy, stride 0 along the new axis.
    rows, = _inputs(rng, "float32", (3, 100), 1)
    _check(hypot(nv.to_device(rows), da).copy_to_host(), np.sqrt(rows * rows + a * a))


def test_dispatch_picks_the_first_safe_signature(rng):
    small = np.arange(5, dtype=np.int16)
    assert sub(small, small).dtype == np.int32
    # int32 does not cast to float32 safely, so a float scalar takes float64, as in NumPy.
    ints = np.arange(5, dtype=np.int32)
    _check(sub(ints, 2.5), ints - 2.5)
    assert hypot(np.ones(3, np.int64), np.ones(3, np.int64)).dtype == np.float64
    with pytest.raises(TypeError, match=r"no signature takes inputs of types \(complex128"):
        sub(np.ones(3, np.complex128), 1)
    with pytest.raises(TypeError, match="no signature"):
        hypot(np.ones(3, np.float32), np.ones(3, np.complex64))


def test_scalars_only_give_a_numpy_scalar():
    got = mad(np.float32(1.5), 2, 0.25)
    assert isinstance(got, np.float32) and got == np.float32(3.25)


def test_errors_name_the_ufunc(rng):
    with pytest.raises(ValueError, match="do not broadcast"):
        sub(np.ones(3, np.float32), np.ones(4, np.float32))
    with pytest.raises(TypeError, match="takes 2 input"):
        sub(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="stream"):
        sub(np.ones(3), np.ones(3), stream="fast")
    with pytest.raises(TypeError, match="signature"):
        nv.vectorize(["float32(float32[:])"])(lambda a: a)
    with pytest.raises(TypeError, match="needs signatures"):
        nv.vectorize(lambda a: a)
    empty = sub(np.ones((0, 3), np.float32), np.ones(3, np.float32))
    assert empty.shape == (0, 3)


def test_compile_error_shows_the_generated_line():
    @nv.vectorize(["float32(float32)"])
    def pair(a):
        return (a, a)

    with pytest.raises(nv.CompilerError, match=r"pair\.loop_float32_1d_a") as info:
        pair(np.ones(3, np.float32))
    assert "out[i0] = f(np.float32(a0[i0]))" in str(info.value)


def test_generated_kernels_validate_and_are_attributes():
    sub(np.ones(4, np.float32), np.ones(4, np.float32))
    kernel = sub.loop_float32_float32_1d_aa
    assert kernel is sub.loop_float32_float32_1d_aa
    compiled = list(kernel._compiled.values())
    assert compiled and all(assert_valid_spirv(k) is None for k in compiled)
    assert sub.types == ["ii->i", "ff->f", "dd->d"]
    with pytest.raises(AttributeError):
        sub.loop_float16_float16_1d_aa


def test_gufunc_rowwise_dot(rng):
    a, b = rng.random((2, 1000, 33), np.float32)
    want = np.einsum("ij,ij->i", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(rowdot(a, b), want, rtol=1e-5)
    # A vector broadcast against every row; device operands stay on the device.
    got = rowdot(nv.to_device(a), b[0])
    assert isinstance(got, DeviceArray) and got.shape == (1000,)
    np.testing.assert_allclose(got.copy_to_host(), a @ b[0].astype(np.float64), rtol=1e-5)
    out = np.zeros(1000, np.float32)
    assert rowdot(a, b, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-5)
    # int32 rows take the float64 signature (converted on the host); 1-d rows give a scalar.
    ints = rng.integers(-5, 5, (4, 8)).astype(np.int32)
    np.testing.assert_allclose(rowdot(ints, ints), (ints * ints).sum(1))
    assert rowdot(a[0], b[0]) == pytest.approx(float(want[0]), rel=1e-5)
    with pytest.raises(ValueError, match="dimension 'n'"):
        rowdot(a, b[:, :5])


def test_gufunc_scalar_core_and_device_conversion(rng):
    a, = _inputs(rng, "float32", (5, 6), 1)
    _check(scaled(a, 3), a * np.float32(3))
    factors = np.arange(5, dtype=np.float32)[:, None]
    _check(scaled(a, factors[:, 0]), a * factors)
    # A ()-input declared as an array is a 1-element array, from a scalar too.
    @nv.guvectorize(["void(float32[:], float32[:], float32[:])"], "(n),()->(n)")
    def scaled_by_array(a, factor, out):
        for j in range(a.shape[0]):
            out[j] = a[j] * factor[0]

    _check(scaled_by_array(a[0], 2.0), a[0] * np.float32(2))
    # An int32 device array takes the float64 signature, converted on the device.
    ints = rng.integers(-9, 9, (5, 6)).astype(np.int32)
    got = scaled(nv.to_device(ints), 0.5)
    assert isinstance(got, DeviceArray)
    _check(got.copy_to_host(), ints * 0.5)


def test_gufunc_matrix_cores_and_two_outputs(rng):
    @nv.guvectorize(["void(float32[:, :], float32[:, :], float32[:, :])"],
                    "(m,n),(n,p)->(m,p)")
    def matmul(a, b, c):
        for i in range(c.shape[0]):
            for j in range(c.shape[1]):
                s = 0.0
                for k in range(a.shape[1]):
                    s += a[i, k] * b[k, j]
                c[i, j] = s

    @nv.guvectorize(["void(float64[:], float64[:], float64[:])"], "(n)->(),()")
    def extremes(a, lo, hi):
        lo[0] = a[0]
        hi[0] = a[0]
        for x in a:
            lo[0] = min(lo[0], x)
            hi[0] = max(hi[0], x)

    a = rng.random((4, 3, 5), dtype=np.float32)
    b = rng.random((5, 2), dtype=np.float32)
    np.testing.assert_allclose(matmul(a, b), a.astype(np.float64) @ b, rtol=1e-5)
    x = rng.random((6, 9))
    lo, hi = extremes(x)
    np.testing.assert_array_equal(lo, x.min(1))
    np.testing.assert_array_equal(hi, x.max(1))


def test_bool_results_and_reduction():
    @nv.vectorize(["boolean(float32, float32)"])
    def less(a, b):
        return a < b

    x = np.arange(5, dtype=np.float32)
    got = less(x, 2.5)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, x < 2.5)
    either = nv.reduce(lambda a, b: a or b)
    assert either(got) and not either(~got[:3])


def test_reduce_sum_and_max_of_a_million(rng):
    ints = rng.integers(-1000, 1000, 10 ** 6).astype(np.int32)
    assert sum_reduce(ints) == ints.sum()
    floats = rng.random(10 ** 6).astype(np.float32)
    assert max_reduce(floats) == floats.max()
    assert max_reduce(nv.to_device(floats)) == floats.max()


def test_reduce_init_res_size_and_empty(rng):
    ints = rng.integers(-1000, 1000, 5000).astype(np.int32)
    assert sum_reduce(ints, init=7) == ints.sum() + 7
    assert sum_reduce(ints, size=123) == ints[:123].sum()
    res = nv.device_array(2, np.int32)
    assert sum_reduce(nv.to_device(ints), res=res) is None
    assert res.copy_to_host()[0] == ints.sum()
    assert sum_reduce(ints[:0], init=5) == 5
    # A strided device view, and fewer elements than one workgroup.
    view = nv.to_device(ints)[::3]
    assert sum_reduce(view) == ints[::3].sum()
    assert sum_reduce(ints[:10]) == ints[:10].sum()
    with pytest.raises(TypeError, match="1-d"):
        sum_reduce(ints.reshape(50, 100))


def test_numba_vectorize_target_vulkan_and_cuda_names(rng):
    import numba
    from numba_vulkan import cuda

    @numba.vectorize(["float64(float64, float64)"], target="vulkan")
    def add(a, b):
        return a + b

    @numba.guvectorize(["void(float64[:], float64[:])"], "(n)->()", target="vulkan")
    def total(a, out):
        s = 0.0
        for x in a:
            s += x
        out[0] = s

    a, b = _inputs(rng, "float64", (3, 4), 2)
    assert isinstance(add, nv.VulkanUFunc) and isinstance(total, nv.VulkanGUFunc)
    _check(add(a, b), a + b)
    np.testing.assert_allclose(total(a), a.sum(1), rtol=1e-15)

    @cuda.vectorize(["float64(float64)"], target="cuda")
    def half(x):
        return x / 2

    _check(half(a), a / 2)
    assert cuda.reduce is cuda.Reduce is nv.Reduce
    with pytest.raises(TypeError, match="needs a list of signatures"):
        numba.vectorize(target="vulkan")(lambda x: x)
    with pytest.raises(TypeError, match="needs a list of signatures"):
        numba.guvectorize("(n)->()", target="vulkan")(lambda x, out: None)


def test_aot_directory_serves_ufuncs_without_numba(tmp_path):
    """A manifest names a ufunc by its own signatures; a fresh process runs
    the built kernels in strict mode and never imports Numba."""
    (tmp_path / "ufapp.py").write_text(textwrap.dedent("""
        import numba_vulkan as nv

        @nv.vectorize(["float32(float32, float32)"])
        def add(a, b):
            return a + b

        total = nv.reduce(lambda a, b: a + b)

        @nv.guvectorize(["void(float32[:], float32[:], float32[:])"], "(n),(n)->()")
        def dot(a, b, out):
            s = 0.0
            for j in range(a.shape[0]):
                s += a[j] * b[j]
            out[0] = s
    """))
    (tmp_path / "kernels.yaml").write_text(textwrap.dedent("""
        version: 1
        kernels:
          - function: ufapp:add
            signatures: ["float32(float32, float32)"]
          - function: ufapp:total
            signatures: ["float32"]
          - function: ufapp:dot
            signatures: ["void(float32[:], float32[:], float32[:])"]
    """))
    from numba_vulkan.aot.build import builder as build
    result = build.build(str(tmp_path / "kernels.yaml"))
    assert result.built == 3 and not result.failures
    script = textwrap.dedent("""
        import sys
        import numpy as np
        import numba_vulkan as nv
        import ufapp
        x = np.arange(300, dtype=np.float32)
        assert (ufapp.add(x, x) == 2 * x).all()
        assert ufapp.total(x) == x.sum()
        rows = x.reshape(3, 100)
        assert np.allclose(ufapp.dot(rows, rows), (rows * rows).sum(1))
        assert "numba" not in sys.modules
        # Another layout is another kernel: a strict miss names its manifest line.
        try:
            ufapp.add(rows, x[:100])
        except nv.AOTError as exc:
            assert "function: ufapp:add.loop_float32_float32_2d_aa" in str(exc), exc
        else:
            raise AssertionError("a broadcasting call found a kernel")
        print("ok")
    """)
    run = run_python("-c", script, cwd=tmp_path, path=[tmp_path], timeout=300,
                     env={"NUMBA_VULKAN_AOT_STRICT": "1",
                          "NUMBA_VULKAN_AOT_PATH": tmp_path / "aot"})
    assert "ok" in run.stdout, run.stderr



def test_ufunc_reduce_method(rng):
    # hypot is associative and commutative: its reduction is the 2-norm.
    x = rng.random(3000).astype(np.float32)
    got = hypot.reduce(x)
    assert got.dtype == np.float32
    assert got == pytest.approx(np.sqrt((x.astype(np.float64) ** 2).sum()), rel=1e-5)
    assert hypot.reduce(nv.to_device(x[:1])) == x[0]
    with pytest.raises(TypeError, match="binary"):
        twice_abs.reduce(x)
    with pytest.raises(ValueError, match="empty"):
        hypot.reduce(x[:0])


def test_signature_forms():
    import numba
    from numba_vulkan.api.ufunc import parse_layout, parse_signature
    f4, i4 = np.dtype(np.float32), np.dtype(np.int32)
    want = ((f4, 0), ((f4, 0), (i4, 0)))
    assert parse_signature("float32(float32, int32)") == want
    assert parse_signature("(float32, int32) -> float32") == want
    assert parse_signature(numba.float32(numba.float32, numba.int32)) == want
    assert parse_signature("f4(f4, i4)") == want
    assert parse_signature("void(float32[:, ::1], boolean)") == (None, ((f4, 2), (np.dtype(bool), 0)))
    assert parse_signature(numba.void(numba.float32[:], numba.float32[:, :])) == \
        (None, ((f4, 1), (f4, 2)))
    for bad in ("float32", "float32(flaot32)", "float32(float32[1:])", "object(object)"):
        with pytest.raises(TypeError):
            parse_signature(bad)
    assert parse_layout("(m, n),(n,p)->(m,p)") == ((("m", "n"), ("n", "p")), (("m", "p"),))
    assert parse_layout("(n),()->(),()") == ((("n",), ()), ((), ()))
    with pytest.raises(ValueError, match="bad gufunc layout"):
        parse_layout("(n)->")


def test_cache_true_ufunc_is_found_by_a_new_process_without_numba(tmp_path):
    (tmp_path / "cachedufunc.py").write_text(textwrap.dedent("""
        import numba_vulkan as nv

        @nv.vectorize(["float32(float32, float32)"], cache=True)
        def scaled_sum(a, b):
            return 2 * a + b
    """))
    script = textwrap.dedent("""
        import sys
        import numpy as np
        import cachedufunc
        x = np.arange(50, dtype=np.float32)
        assert (cachedufunc.scaled_sum(x, x) == 3 * x).all()
        print("numba" in sys.modules)
    """)
    seen = []
    for _ in range(2):
        run = run_python("-c", script, cwd=tmp_path, path=[tmp_path], timeout=300,
                         env={"NUMBA_VULKAN_CACHE_DIR": tmp_path / "cache"})
        seen.append(run.stdout.strip())
    # The first process compiled (and so imported Numba); the second found it all.
    assert seen == ["True", "False"]


def test_calls_given_a_stream_run_on_it(rng):
    """A ufunc's, a gufunc's and a reduce's launches go on the stream passed,
    which counts their submissions, not on the default stream."""
    s = nv.stream()
    default = nv.default_stream()
    a = rng.random(300).astype(np.float32)
    b = rng.random((20, 8)).astype(np.float32)
    da, db = nv.to_device(a), nv.to_device(b)
    nv.synchronize()
    for call, want in [(lambda: sub(da, da, stream=s), np.zeros_like(a)),
                       (lambda: rowdot(db, db, stream=s), np.einsum("ij,ij->i", b, b)),
                       (lambda: sum_reduce(da, stream=s), a.sum(dtype=np.float64))]:
        before, before_default = s._submitted, default._submitted
        got = call()
        assert s._submitted > before and default._submitted == before_default
        got = got.copy_to_host(stream=s) if isinstance(got, DeviceArray) else got
        np.testing.assert_allclose(got, want, rtol=1e-5)
