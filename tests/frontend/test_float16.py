"""float16 in kernels: arrays, scalars, arithmetic, conversions and the fp16 functions.

Every case runs three times: on the default device, which computes in
float16 where it has ``shaderFloat16`` (lavapipe and the H200 do) and asks
for rounding to nearest where it has ``shaderRoundingModeRTEFloat16``; in a
child process with ``NUMBA_VULKAN_MASK_FEATURES=float16_rte``, where float16
arithmetic is computed in float32 and rounded to float16 in integer
arithmetic; and in one with ``NUMBA_VULKAN_MASK_FEATURES=float16``, where
float16 values are float32 values so rounded. All must give
NumPy's float16 results bit for bit wherever those are one correctly
rounded operation (NumPy computes each float16 operation in float32 and
rounds, which is correct rounding for ``+ - * /`` and ``sqrt``); the
transcendental fp16 functions are checked within one float16 ULP of the
correctly rounded value instead, since no CPU's rounding decides those.
"""

import json
import textwrap

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan import cuda
from numba_vulkan.aot.__main__ import main as aot_main
from numba_vulkan.aot.loader import lookup
from tests.helpers import ROOT, assert_valid_spirv, rewritten, run_python

f16, f32, f64 = np.float16, np.float32, np.float64
NATIVE = nv.TargetDescription(vulkan=(1, 2), float16=True)
EMULATED = nv.TargetDescription(vulkan=(1, 2))
N = 300
GROUP = 64


@nv.jit
def saxpy(a, x, y):
    i = nv.global_id(0)
    if i < x.shape[0]:
        y[i] = a * x[i] + y[i]


@nv.jit
def tree_sum(x, out):
    s = nv.shared.array(GROUP, np.float16)
    t = nv.local_id(0)
    s[t] = x[nv.global_id(0)]
    nv.barrier()
    k = GROUP // 2
    while k > 0:
        if t < k:
            s[t] = s[t] + s[t + k]
        nv.barrier()
        k //= 2
    if t == 0:
        out[nv.group_id(0)] = s[0]


@nv.jit
def functions(x, y, out, flags):
    i = nv.global_id(0)
    if i < x.shape[0]:
        a, b = x[i], y[i]
        out[i, 0] = cuda.fp16.hadd(a, b)
        out[i, 1] = cuda.fp16.hsub(a, b)
        out[i, 2] = cuda.fp16.hmul(a, b)
        out[i, 3] = cuda.fp16.hdiv(a, b)
        out[i, 4] = cuda.fp16.hfma(a, b, a)
        out[i, 5] = cuda.fp16.hneg(a)
        out[i, 6] = cuda.fp16.habs(a)
        out[i, 7] = cuda.fp16.hsqrt(cuda.fp16.habs(a))
        out[i, 8] = cuda.fp16.hmax(a, b)
        out[i, 9] = cuda.fp16.hmin(a, b)
        out[i, 10] = nv.fp16.hfloor(a)
        out[i, 11] = nv.fp16.hceil(a)
        out[i, 12] = nv.fp16.htrunc(a)
        out[i, 13] = nv.fp16.hrint(a)
        out[i, 14] = nv.fp16.hexp(a)
        out[i, 15] = nv.fp16.hlog(cuda.fp16.habs(a))
        out[i, 16] = nv.fp16.hsin(a)
        out[i, 17] = nv.fp16.hcos(a)
        out[i, 18] = nv.fp16.hrsqrt(cuda.fp16.habs(a))
        out[i, 19] = nv.fp16.hrcp(a)
        out[i, 20] = -a / b - abs(b)
        # A private float16 array, read at an index known at run time only.
        t = nv.local.array(2, np.float16)
        t[0] = a
        t[1] = b
        out[i, 21] = t[i % 2] * t[0]
        out[i, 22] = nv.fp16.hexp2(a)
        out[i, 23] = nv.fp16.hexp10(a / np.float16(4))
        out[i, 24] = nv.fp16.hlog2(cuda.fp16.habs(a))
        out[i, 25] = nv.fp16.hlog10(cuda.fp16.habs(a))
        flags[i, 0] = cuda.fp16.heq(a, b)
        flags[i, 1] = cuda.fp16.hne(a, b)
        flags[i, 2] = cuda.fp16.hlt(a, b)
        flags[i, 3] = cuda.fp16.hle(a, b)
        flags[i, 4] = cuda.fp16.hgt(a, b)
        flags[i, 5] = cuda.fp16.hge(a, b)
        flags[i, 6] = a < b


@nv.jit
def conversions(d, f, n, h, halves, doubles, singles, ints):
    k = nv.global_id(0)
    if k < d.shape[0]:
        halves[k, 0] = np.float16(d[k])
        halves[k, 1] = np.float16(f[k])
        halves[k, 2] = np.float16(n[k])
        halves[k, 3] = d[k]                  # stored into a float16 array
        doubles[k] = h[k]
        singles[k] = np.float32(h[k])
        ints[k, 0] = np.int32(h[k])
        ints[k, 1] = np.int64(h[k])
        ints[k, 2] = np.uint8(abs(h[k]))
        ints[k, 3] = int(h[k])


@nv.jit
def lanes(x, out, where):
    i = nv.global_id(0)
    v = x[i]
    out[i, 0] = nv.subgroup.shuffle(v, 0)
    out[i, 1] = nv.subgroup.shuffle_xor(v, 1)
    out[i, 2] = nv.subgroup.reduce_add(v)
    out[i, 3] = nv.subgroup.reduce_max(v)
    out[i, 4] = cuda.shfl_down_sync(0xFFFFFFFF, v, 1)
    where[i, 0] = nv.subgroup.id()
    where[i, 1] = nv.subgroup.local_id()
    where[i, 2] = nv.subgroup.size()


@nv.jit
def ufuncs(x, y, out, flags):
    i = nv.global_id(0)
    if i < x.shape[0]:
        out[i, 0] = np.sqrt(np.abs(x[i]))
        out[i, 1] = np.add(x[i], y[i])
        out[i, 2] = np.floor(x[i])
        out[i, 3] = np.maximum(x[i], y[i])
        out[i, 4] = np.exp(x[i])
        flags[i, 0] = np.isnan(np.float16(i % 3 - 1) / (y[i] - y[i]))
        flags[i, 1] = np.less(x[i], y[i])


@nv.jit
def narrowing(f, out):
    i = nv.global_id(0)
    if i < f.shape[0]:
        out[i] = np.float16(f[i])


TABLE = np.array([0.5, 1.25, -2.0, 3.0], f16)


@nv.jit
def _scaled(v, s):
    return v * s + np.float16(0.5)


@nv.jit
def branches(x, out):
    """A float16 table compiled in, a device function, a loop, a choice
    between two values and a 2-d workgroup array."""
    i = nv.global_id(0)
    t = nv.local_id(0)
    tile = nv.shared.array((4, GROUP), np.float16)
    table = nv.const.array_like(TABLE)
    acc = np.float16(0)
    for j in range(4):
        acc = _scaled(acc, table[j]) if x[i] > np.float16(0) else acc - table[j]
    tile[t % 4, t] = acc
    nv.barrier()
    out[i] = tile[t % 4, t] + table[i % 4]


HALVES = np.dtype([("x", "f4"), ("h", "f2"), ("v", "f2", (3,))])


@nv.jit
def fields(a, out):
    i = nv.global_id(0)
    if i < a.shape[0]:
        a[i].h = a[i].h * np.float16(0.5) + a[i].v[1]
        a[i].v[2] = np.float16(a[i].x) - a[i].v[0]
        out[i] = a[i].h


def _records():
    rng = np.random.default_rng(5)
    a = np.zeros(GROUP, HALVES)
    a["x"], a["h"], a["v"] = rng.uniform(-3, 3, GROUP), rng.random(GROUP), rng.random((GROUP, 3))
    # A subnormal, an infinity, the largest float16 and a NaN.
    a["h"][:4] = [6e-8, np.inf, 65504, np.nan]
    return a


def _inputs():
    rng = np.random.default_rng(2026)
    x = rng.uniform(-8, 8, N).astype(f16)
    y = rng.uniform(-8, 8, N).astype(f16)
    y[y == 0] = f16(1)
    y[:5] = x[:5]                                   # some equal pairs
    y[5:10] = np.nextafter(x[5:10], f16(np.inf))    # and neighbours
    # Multiples of 2**-8 below 1: sums of 64 of them are exact in float32.
    sums = (rng.integers(0, 256, 4 * GROUP) / 256).astype(f16)
    # Values around float16 ties, overflow, subnormals and zeros. The first
    # is a float64 that float32 would round onto a tie (1 + 2**-11) first.
    d = np.array([1 + 2**-11 + 2**-40, 1 + 2**-11, 1 + 3 * 2**-11, 65519.0, 65520.0, 1e6,
                  -1e6, 2**-25 + 2**-40, 2**-25, 5.96e-8, 3.0e-8, -0.0, 1 / 3, np.inf,
                  -np.inf, 0.1])
    n = np.array([0, 1, -1, 2049, 2051, 65519, 65520, 100000, -70000, 4097, 4099, 12345,
                  7, 8, 9, 10], np.int32)
    h = np.array([0.5, -1.5, 2.5, 65504, -65504, 6e-8, 1e-4, 123.4, -123.6, 3.99, 0, -0.0,
                  1, 2, 7.5, -7.5], f16)
    return x, y, sums, d, n, h


def _singles():
    """float32 values on, beside and between float16 ties in every binade
    (subnormal results and overflow too), random ones, and specials."""
    rng = np.random.default_rng(16)
    # float16's ties: odd multiples of half its spacing, at each exponent.
    exponents = np.arange(-26, 17)
    ties = (2 * rng.integers(1024, 2048, exponents.size) + 1) * np.exp2(exponents - 11.0)
    ties = ties.astype(f32)
    near = np.concatenate([ties, np.nextafter(ties, f32(0)), np.nextafter(ties, f32(np.inf))])
    # Even ties (rounded down) as well as odd ones, and ties into subnormals.
    even = (np.arange(1, 65, dtype=f32) * 2 + 1) * f32(2.0 ** -25)
    edges = np.array([65504, 65519.996, 65520, 65536, 3e38, 2.0 ** -14, 2.0 ** -24,
                      2.0 ** -25, 2.0 ** -25 * 1.0000001, 2.0 ** -26, 1e-40, 0.0,
                      np.inf], f32)
    wide = rng.integers(0x33000000, 0x47800000, 400, dtype=np.uint32).view(f32)
    values = np.concatenate([near, even, edges, wide, 1 + rng.random(100).astype(f32)])
    return np.concatenate([values, -values, np.array([np.nan, -np.nan], f32)])


def run_cases():
    """Run every kernel on the current device; the results as lists, by name."""
    x, y, sums, d, n, h = _inputs()
    a = f16(1.7)
    out = {}
    host = y.copy()
    saxpy.forall(N)(a, x, host)
    out["saxpy"] = host
    dx, dy = nv.to_device(x), nv.to_device(y)
    saxpy.forall(N)(a, dx, dy)
    out["saxpy_device"] = dy.copy_to_host()
    group_sums = np.zeros(4, f16)
    tree_sum[4, GROUP](sums, group_sums)
    out["tree_sum"] = group_sums
    values = np.zeros((N, 26), f16)
    flags = np.zeros((N, 7), np.int32)
    functions.forall(N)(x, y, values, flags)
    out["functions"], out["flags"] = values, flags
    halves = np.zeros((16, 4), f16)
    doubles, singles = np.zeros(16), np.zeros(16, f32)
    ints = np.zeros((16, 4), np.int64)
    conversions.forall(16)(d, d.astype(f32), n, h, halves, doubles, singles, ints)
    out.update(halves=halves, doubles=doubles, singles=singles, ints=ints)
    shuffled = np.zeros((GROUP, 5), f16)
    where = np.zeros((GROUP, 3), np.int32)
    lanes[1, GROUP](sums[:GROUP], shuffled, where)
    out.update(lanes=shuffled, where=where)
    applied, truths = np.zeros((N, 5), f16), np.zeros((N, 2), np.bool_)
    ufuncs.forall(N)(x, y, applied, truths)
    out.update(ufuncs=applied, truths=truths)
    chosen = np.zeros(GROUP, f16)
    branches[1, GROUP](x[:GROUP], chosen)
    out["branches"] = chosen
    singles32 = _singles()
    narrowed = np.zeros(singles32.size, f16)
    narrowing.forall(singles32.size)(singles32, narrowed)
    out["narrowed"] = narrowed
    parts, read = _records(), np.zeros(GROUP, f16)
    fields.forall(GROUP)(parts, read)
    out.update(field_h=parts["h"].copy(), field_v=parts["v"].copy(), field_read=read)
    compiled = [k for disp in (saxpy, tree_sum, functions, conversions, lanes, ufuncs,
                               branches, fields, narrowing)
                for k in disp._compiled.values()]
    result = {name: {"dtype": str(v.dtype), "bits": v.view(np.uint8).tolist(),
                     "shape": list(v.shape)} for name, v in out.items()}
    target = nv.get_current_device().target
    result["target_float16"] = target.float16
    result["target_float16_rte"] = target.float16_rte
    result["capabilities"] = sorted({c for k in compiled for c in k.capabilities})
    return result


def _arrays(result):
    return {name: np.array(v["bits"], np.uint8).view(v["dtype"]).reshape(v["shape"])
            for name, v in result.items() if isinstance(v, dict)}


_CHILD = textwrap.dedent('''
    import json
    from tests.frontend import test_float16
    print(json.dumps(test_float16.run_cases()))
''')


#: The features each mode masks.
_MASKED = {"native": None, "native-soft": "float16_rte", "emulated": "float16"}


@pytest.fixture(scope="module", params=list(_MASKED))
def results(request):
    info = nv.get_current_device().info
    if "storage16" not in info.features:
        pytest.skip("the device has no 16-bit storage buffers")
    if request.param != "emulated" and "float16" not in info.features:
        pytest.skip("the device has no float16 arithmetic")
    if request.param == "native" and "float16_rte" not in info.features:
        pytest.skip("the device does not round float16 to nearest on request "
                    "(native-soft covers it)")
    if _MASKED[request.param] is None:
        result = run_cases()
    else:
        child = run_python("-c", _CHILD, cwd=ROOT, check=False,
                           env={"NUMBA_VULKAN_MASK_FEATURES": _MASKED[request.param]})
        assert child.returncode == 0, child.stderr[-3000:]
        result = json.loads(child.stdout.strip().splitlines()[-1])
    assert result["target_float16"] == (request.param != "emulated")
    assert result["target_float16_rte"] == (request.param == "native")
    return request.param, result, _arrays(result)


def _same_bits(got, want):
    """Equal as float16 bit patterns (so that -0.0 and 0.0 differ), any NaN
    matching any NaN: IEEE 754 leaves a NaN's sign and payload to the
    hardware (the H200's NaN of a record field differed from NumPy's in its bits)."""
    got, want = np.asarray(got, f16), np.asarray(want, f16)
    assert got.shape == want.shape
    differ = got.view(np.uint16) != want.view(np.uint16)
    bad = np.flatnonzero(differ & ~(np.isnan(got) & np.isnan(want)))
    assert bad.size == 0, f"{bad.size} differ, first at {bad[:5]}: {got.flat[bad[:5]]} " \
                          f"instead of {want.flat[bad[:5]]}"


def test_modules_compute_in_float16_only_where_the_target_has_it(results):
    mode, result, _ = results
    assert "StorageBuffer16BitAccess" in result["capabilities"]
    assert ("Float16" in result["capabilities"]) == (mode != "emulated")
    # Only where the device can: otherwise rounded in integer arithmetic.
    assert ("RoundingModeRTE" in result["capabilities"]) == (mode == "native")


def test_float32_to_float16_rounds_to_nearest_even(results):
    _, _, got = results
    singles = _singles()
    with np.errstate(over="ignore"):
        want = singles.astype(f16)
    nan = np.isnan(singles)
    _same_bits(got["narrowed"][~nan], want[~nan])
    # NumPy keeps a NaN's payload; Vulkan does not say what a driver keeps.
    assert np.isnan(got["narrowed"][nan]).all()


def test_saxpy_matches_numpy_float16(results):
    _, _, got = results
    x, y, *_ = _inputs()
    a = f16(1.7)
    # Each operation rounded to float16, as NumPy's float16 arithmetic does.
    want = ((a.astype(f32) * x.astype(f32)).astype(f16).astype(f32) + y.astype(f32)).astype(f16)
    _same_bits(want, a * x + y)
    _same_bits(got["saxpy"], want)
    _same_bits(got["saxpy_device"], want)


def test_workgroup_reduction_within_float16_rounding(results):
    _, _, got = results
    *_, sums, _, _, _ = _inputs()
    tree = sums.reshape(4, GROUP).copy()
    width = GROUP
    while width > 1:
        width //= 2
        tree[:, :width] = tree[:, :width] + tree[:, width:2 * width]
    # The same tree of correctly rounded float16 additions, bit for bit...
    _same_bits(got["tree_sum"], tree[:, 0])
    # ...and within its rounding bound of the exact sum: one rounding of at
    # most half a ULP per level, log2(64) levels.
    exact = sums.astype(f64).reshape(4, GROUP).sum(axis=1)
    bound = np.log2(GROUP) * 2.0 ** -11 * np.abs(sums.astype(f64)).reshape(4, GROUP).sum(axis=1)
    assert np.all(np.abs(got["tree_sum"].astype(f64) - exact) <= bound)


def test_fp16_functions(results):
    _, _, got = results
    x, y, *_ = _inputs()
    v = got["functions"]
    x32, y32, x64, y64 = x.astype(f32), y.astype(f32), x.astype(f64), y.astype(f64)
    exact = {0: x + y, 1: x - y, 2: x * y, 3: x / y,
             # One rounding of the exact value (float64 holds it exactly).
             4: (x64 * y64 + x64).astype(f16),
             5: -x, 6: np.abs(x), 7: np.sqrt(np.abs(x)), 8: np.fmax(x, y), 9: np.fmin(x, y),
             10: np.floor(x), 11: np.ceil(x), 12: np.trunc(x), 13: np.rint(x),
             19: (f32(1) / x32).astype(f16), 20: -x / y - np.abs(y),
             21: np.where(np.arange(N) % 2 == 0, x, y) * x}
    for column, want in exact.items():
        _same_bits(v[:, column], want)
    # Transcendental functions: within one float16 ULP of the correctly
    # rounded value.
    close = {14: np.exp(x64), 15: np.log(np.abs(x64)), 16: np.sin(x64), 17: np.cos(x64),
             18: 1 / np.sqrt(np.abs(x64)), 22: np.exp2(x64),
             23: 10 ** (x / f16(4)).astype(f64), 24: np.log2(np.abs(x64)),
             25: np.log10(np.abs(x64))}
    for column, value in close.items():
        want = value.astype(f16)
        finite = np.isfinite(want)
        ulp = np.spacing(np.abs(want[finite])).astype(f64)
        error = np.abs(v[finite, column].astype(f64) - want[finite].astype(f64))
        assert np.all(error <= ulp), (column, np.max(error / ulp))
        assert np.array_equal(v[~finite, column], want[~finite])
    assert got["flags"].tolist() == np.stack(
        [x == y, x != y, x < y, x <= y, x > y, x >= y, x < y], axis=1).astype(np.int32).tolist()


def test_numpy_ufuncs_of_float16_scalars(results):
    _, _, got = results
    x, y, *_ = _inputs()
    v = got["ufuncs"]
    for column, want in enumerate((np.sqrt(np.abs(x)), x + y, np.floor(x), np.maximum(x, y))):
        _same_bits(v[:, column], want)
    want = np.exp(x.astype(f64)).astype(f16)
    assert np.all(np.abs(v[:, 4].astype(f64) - want) <= np.spacing(want).astype(f64))
    # -1 / 0, 0 / 0 and 1 / 0 in turn: NaN every third.
    assert got["truths"].tolist() == np.stack([np.arange(N) % 3 == 1, x < y], axis=1).tolist()


def test_tables_device_functions_loops_and_choices(results):
    _, _, got = results
    x = _inputs()[0][:GROUP]
    want = []
    for i, v in enumerate(x):
        acc = f16(0)
        for j in range(4):
            acc = acc * TABLE[j] + f16(0.5) if v > 0 else acc - TABLE[j]
        want.append(acc + TABLE[i % 4])
    _same_bits(got["branches"], np.array(want, f16))


def test_record_fields_of_float16(results):
    _, _, got = results
    a = _records()
    want = a["h"] * f16(0.5) + a["v"][:, 1]
    _same_bits(got["field_h"], want)
    _same_bits(got["field_read"], want)
    _same_bits(got["field_v"][:, 2], a["x"].astype(f16) - a["v"][:, 0])
    _same_bits(got["field_v"][:, :2], a["v"][:, :2])


def test_subgroup_operations_of_float16(results):
    _, _, got = results
    *_, sums, _, _, _ = _inputs()
    x, where, v = sums[:GROUP], got["where"], got["lanes"]
    size = int(where[0, 2])
    groups = {g: np.flatnonzero(where[:, 0] == g) for g in np.unique(where[:, 0])}
    for members in groups.values():
        lane_of = {int(where[m, 1]): m for m in members}
        assert len(members) == size
        for m in members:
            lane = int(where[m, 1])
            _same_bits(v[m, 0], x[lane_of[0]])
            _same_bits(v[m, 1], x[lane_of[lane ^ 1]])
            # The exact sum (the inputs make it so), rounded once.
            _same_bits(v[m, 2], f16(x[members].astype(f64).sum()))
            _same_bits(v[m, 3], x[members].max())
            _same_bits(v[m, 4], x[lane_of.get(lane + 1, m)])


@np.errstate(over="ignore", invalid="ignore")
def test_conversions(results):
    _, _, got = results
    _, _, _, d, n, h = _inputs()
    _same_bits(got["halves"][:, 0], d.astype(f16))     # float64: rounded once
    _same_bits(got["halves"][:, 1], d.astype(f32).astype(f16))
    _same_bits(got["halves"][:, 2], n.astype(f16))
    _same_bits(got["halves"][:, 3], d.astype(f16))
    assert np.array_equal(got["doubles"], h.astype(f64))
    assert np.array_equal(got["singles"], h.astype(f32))
    assert got["ints"][:, 0].tolist() == h.astype(np.int32).tolist()
    assert got["ints"][:, 1].tolist() == got["ints"][:, 3].tolist() == h.astype(np.int64).tolist()
    # uint8 of |h| below 256 only: beyond it C leaves the result undefined.
    small = np.abs(h.astype(f64)) < 256
    assert got["ints"][small, 2].tolist() == np.abs(h[small]).astype(np.uint8).tolist()


def _host_rounding():
    """The integer rounding codegen emits, compiled for the host by llvmlite:
    a function rounding ``n`` float32 values to float16 values."""
    import ctypes
    import llvmlite.binding as llvm
    from numba_vulkan.codegen import half
    steps = half._rounding_steps("%v")
    names = {key: f"%s{k}" for k, (key, _) in enumerate(steps)}
    body = "\n".join(f"  {names[key]} = {text.format(**names)}" for key, text in steps)
    module = llvm.parse_assembly(textwrap.dedent("""
        define void @run(ptr %x, ptr %y, i64 %n) {
        entry:
          br label %loop
        loop:
          %i = phi i64 [0, %entry], [%j, %loop]
          %px = getelementptr float, ptr %x, i64 %i
          %v = load float, ptr %px
        BODY
          %py = getelementptr float, ptr %y, i64 %i
          store float RESULT, ptr %py
          %j = add i64 %i, 1
          %done = icmp eq i64 %j, %n
          br i1 %done, label %exit, label %loop
        exit:
          ret void
        }
    """).replace("BODY", body).replace("RESULT", names["result"]))
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    engine = llvm.create_mcjit_compiler(module, llvm.Target.from_default_triple()
                                        .create_target_machine())
    engine.finalize_object()
    run = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        engine.get_function_address("run"))

    def rounded(x):
        y = np.empty_like(x)
        run(x.ctypes.data, y.ctypes.data, x.size)
        return y
    return engine, rounded


def test_integer_rounding_is_numpys_for_every_float32_class():
    # Every float32 whose top 19 bits float16 rounding reads, with each kind
    # of the 13 bits it drops (zero, just above, below, on and above the
    # tie, all ones), and random values whose results are subnormal, where
    # the tie bit moves: bit for bit NumPy's conversion, a float16 value.
    engine, rounded = _host_rounding()     # the engine owns the compiled code
    rng = np.random.default_rng(11)
    low = np.array([0, 1, 0xFFF, 0x1000, 0x1001, 0x1FFF], np.uint32)
    bits = ((np.arange(1 << 19, dtype=np.uint32) << 13)[:, None] | low).ravel()
    bits = np.concatenate([bits, rng.integers(0x32800000, 0x38800000, 1 << 18,
                                              dtype=np.uint32)])
    bits |= rng.integers(0, 2, bits.size, dtype=np.uint32) << 31
    x = bits.view(f32)
    got = rounded(x)
    nan = np.isnan(x)
    with np.errstate(over="ignore"):
        want = x[~nan].astype(f16)
    _same_bits(got[~nan], want)
    assert np.array_equal(got[~nan], want.astype(f32))
    assert np.isnan(got[nan]).all() and np.isnan(got[nan].astype(f16)).all()
    assert engine


def test_mixed_operands_follow_numba_promotion():
    @nv.jit
    def mixed(h, s, out):
        i = nv.global_id(0)
        if i < h.shape[0]:
            out[i, 0] = h[i] * s[i]          # float16 * float32 -> float32
            out[i, 1] = h[i] * 3             # float16 * int -> float64
            out[i, 2] = h[i] * np.float16(3)  # float16 throughout

    h = np.array([1.0009765625, 2049, -3.5], f16)
    s = np.array([1.0001, 3.0, 0.5], f32)
    out = np.zeros((3, 3))
    mixed.forall(3)(h, s, out)
    assert np.array_equal(out[:, 0], (h.astype(f32) * s).astype(f64))
    assert np.array_equal(out[:, 1], h.astype(f64) * 3)
    assert np.array_equal(out[:, 2], (h * f16(3)).astype(f64))


@nv.vectorize(["float16(float16, float16)"])
def _scaled_sum(a, b):
    return a * np.float16(0.75) + b


def test_gpu_ufunc_of_float16():
    x, y, *_ = _inputs()
    got = _scaled_sum(x, y)
    assert got.dtype == f16
    _same_bits(got, x * f16(0.75) + y)


def test_target_key_and_cache_tell_float16_apart():
    assert NATIVE.key()[-1] == "float16" and nv.TargetDescription.from_key(NATIVE.key()) == NATIVE
    assert EMULATED.key() == [[1, 2], True, True, 128]
    sig = "void(float16, float16[::1], float16[::1])"
    native = saxpy.compile(sig, target=NATIVE)
    # Same Numba IR, another target: not the native module from the cache.
    emulated = saxpy.compile(sig, target=EMULATED)
    assert "Float16" in native.capabilities and "Float16" not in emulated.capabilities
    # Only a module that computes in float16 asks the driver to keep its
    # NaNs, infinities and signed zeros.
    assert "SignedZeroInfNanPreserve 16" in native.disassemble()
    assert "SignedZeroInfNanPreserve 16" not in emulated.disassemble()
    assert native.spirv != emulated.spirv
    # Rounding to nearest asked for only where the target lets a module ask;
    # elsewhere every float16 result is rounded in integer arithmetic.
    rte = NATIVE.with_features(float16_rte=True)
    assert rte.key()[-1] == "float16_rte" and nv.TargetDescription.from_key(rte.key()) == rte
    rounded = saxpy.compile(sig, target=rte)
    assert "RoundingModeRTE 16" in rounded.disassemble()
    assert "RoundingModeRTE" in rounded.capabilities
    assert "RoundingModeRTE" not in native.disassemble() + emulated.disassemble()
    for compiled in (native, emulated, rounded):
        assert_valid_spirv(compiled)


def test_native_float16_rounds_in_integer_arithmetic_without_rte():
    from numba_vulkan.codegen import half
    from numba_vulkan.llvmir import ir
    sig = "void(float16[::1], float16[::1], float16[:, ::1], int32[:, ::1])"
    soft = functions.compile(sig, target=NATIVE).llvm_ir
    rte = functions.compile(sig, target=NATIVE.with_features(float16_rte=True)).llvm_ir
    arithmetic = ("fadd half", "fsub half", "fmul half", "fdiv half", "frem half",
                  "@llvm.sqrt.f16")
    # Without the mode nothing float16 is left for the driver to round; with
    # it additions, subtractions and products stay float16 operations.
    assert not [op for op in arithmetic if op in soft]
    assert "fmul half" in rte and "fdiv half" not in rte
    for text in (soft, rte):
        # Every conversion to float16 is of a value rounded already.
        module = ir.parse(text)
        made = {inst.name: inst for fn in module.functions for inst in fn.instructions()}
        narrowed = [inst.operands[0].value for fn in module.functions
                    for inst in fn.instructions()
                    if inst.opcode == "fptrunc" and inst.operands[0].type == "float"]
        assert narrowed and all(made[v].opcode == "bitcast" for v in narrowed)
    text = rewritten(half.native, "define half @f(half %a, half %b) {\n"
                     "  %q = fdiv half %a, %b\n  ret half %q\n}\n", rte=True)
    assert "fdiv float" in text and "fdiv half" not in text


def test_scalar_float16_argument_travels_as_float32():
    compiled = saxpy.compile("void(float16, float16[::1], float16[::1])", target=NATIVE)
    a = next(p for p in compiled.params if p.name == "a")
    assert (a.kind, a.dtype, a.push_size) == ("scalar", "float16", 4)


_AOT_KERNEL = '''
import numpy as np
import numba_vulkan as nv


@nv.jit
def scale(x, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        out[i] = x[i] * np.float16(0.3) + x[i]
'''

_AOT_MANIFEST = '''
version: 1
output: aot
target_env: vulkan1.2
profiles:
  - name: plain
    loop_limit: 65535
  - name: half
    loop_limit: 65535
    float16: true
  - name: rte
    loop_limit: 65535
    float16: true
    float16_rte: true
kernels:
  - function: f16aot:scale
    signatures: ["void(float16[::1], float16[::1])"]
'''


def test_aot_directory_has_both_and_launches_without_compiling(tmp_path, monkeypatch):
    (tmp_path / "f16aot.py").write_text(_AOT_KERNEL)
    (tmp_path / "kernels.yaml").write_text(_AOT_MANIFEST)
    assert aot_main(["build", str(tmp_path / "kernels.yaml"), "--quiet"]) == 0
    monkeypatch.syspath_prepend(str(tmp_path))
    import f16aot
    directory = lookup.Directory("aot", tmp_path / "aot")
    sig, threads = ("float16[1d,C]", "float16[1d,C]"), (256, 1, 1)
    features = {"int64", "storage16"}
    for float16, rte in ((True, True), (True, False), (False, False)):
        # A device without float16 arithmetic gets the float32 entry; one
        # with it the float16 entry first, the one asking for rounding to
        # nearest where the device can, else the one rounding in integers.
        target = nv.TargetDescription(vulkan=(1, 2), float16=float16, float16_rte=rte,
                                      loop_limit=65535)
        has = features | {n for n, on in (("float16", float16), ("float16_rte", rte)) if on}
        found = lookup.find(f16aot.scale, sig, threads, target, search=[directory],
                            strict=True, features=has)
        assert (found.target.float16, found.target.float16_rte) == (float16, rte)
        assert ("Float16" in found.capabilities) == float16
        assert ("RoundingModeRTE" in found.capabilities) == rte
    monkeypatch.setenv("NUMBA_VULKAN_AOT_STRICT", "1")
    label = nv.aot.register(str(tmp_path / "aot"))
    try:
        before = nv.aot.stats()["hits"]
        x = np.linspace(-4, 4, 100).astype(f16)
        out = np.zeros_like(x)
        f16aot.scale.forall(x.size)(x, out)
        assert nv.aot.stats()["hits"] == before + 1
    finally:
        lookup.unregister(label)
    _same_bits(out, x * f16(0.3) + x)


def test_emulation_leaves_float16_only_in_buffer_accesses():
    import llvmlite.binding as llvm
    from numba_vulkan.codegen import half
    from numba_vulkan.llvmir import ir
    # The masked child's target: its module comes from the kernel cache.
    target = nv.get_current_device().target.with_features(float16=False)
    compiled = functions.compile("void(float16[::1], float16[::1], float16[:, ::1], "
                                 "int32[:, ::1])", target=target)
    module = ir.parse(compiled.llvm_ir)
    for fn in module.functions:
        for inst in fn.instructions():
            if "half" not in ir.words(half._HANDLE.sub("", str(inst))):
                continue
            through_buffer = any(o.type == "ptr addrspace(11)" for o in inst.operands)
            assert (inst.opcode in ("load", "store") and through_buffer
                    or inst.opcode in ("fpext", "fptrunc")
                    and inst.operands[0].type in ("half", "float")), str(inst)
    # A float64 converted to float16 in IR (as LLVM may leave one) is
    # rounded through float32 rounded to odd, not by the driver.
    text = rewritten(half.emulate, textwrap.dedent('''
        define void @f(double %x, ptr addrspace(11) %p) {
          %h = fptrunc double %x to half
          %s = fadd half %h, 0xH3C00
          store half %s, ptr addrspace(11) %p, align 2
          ret void
        }
    '''))
    llvm.parse_assembly(text).verify()
    assert "fptrunc double" in text and "to half" not in text.split("fptrunc double")[1] \
        .split("\n")[0]
    assert "fadd float" in text and "0x3FF0000000000000" in text
    assert "store half" in text and "align 2" in text
