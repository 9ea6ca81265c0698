"""Math in kernels: the ``math`` module and NumPy's scalar ufuncs, in float32
and float64, against the same functions under ``numba.njit`` on the CPU.

Accuracy is measured in ULPs on samples across each function's domain
(a core range, magnitudes from the smallest normal number to the largest,
and inf, nan, -0.0): float64 must be within 2 ULP of the CPU and float32
within 4. One kernel per dtype and arity evaluates every function, one per
row of a 2-d array, so each is compiled once.

Devices may flush subnormal numbers to zero (lavapipe does; Vulkan allows
it without ``shaderDenormPreserve``), so a result the CPU gives as a
subnormal may also come back as a zero of the same sign.
"""

import math

import numba
import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.base import intrinsics
from tests.helpers import assert_valid_spirv, compiled_kernels

#: Largest error allowed, in ULPs of the CPU result, by dtype.
TOLERANCE = {"float32": 4, "float64": 2}

#: Unary functions: expression of ``a`` and the core range of their samples.
UNARY = {
    "math.sin": ("math.sin(a)", -10, 10), "math.cos": ("math.cos(a)", -10, 10),
    "math.tan": ("math.tan(a)", -10, 10), "math.asin": ("math.asin(a)", -1, 1),
    "math.acos": ("math.acos(a)", -1, 1), "math.atan": ("math.atan(a)", -10, 10),
    "math.sinh": ("math.sinh(a)", -90, 90), "math.cosh": ("math.cosh(a)", -90, 90),
    "math.tanh": ("math.tanh(a)", -10, 10), "math.asinh": ("math.asinh(a)", -100, 100),
    "math.acosh": ("math.acosh(a)", 1, 100), "math.atanh": ("math.atanh(a)", -1, 1),
    "math.exp": ("math.exp(a)", -100, 100),
    "math.expm1": ("math.expm1(a)", -10, 10), "math.log": ("math.log(a)", 0, 100),
    "math.log2": ("math.log2(a)", 0, 100), "math.log10": ("math.log10(a)", 0, 100),
    "math.log1p": ("math.log1p(a)", -1, 10), "math.erf": ("math.erf(a)", -5, 5),
    "math.erfc": ("math.erfc(a)", -5, 10), "math.sqrt": ("math.sqrt(a)", 0, 100),
    "math.fabs": ("math.fabs(a)", -10, 10),
    # These return ints, which inf and nan have none of.
    "math.floor": ("math.floor(a) if abs(a) < 1e15 else a", -10, 10),
    "math.ceil": ("math.ceil(a) if abs(a) < 1e15 else a", -10, 10),
    "math.trunc": ("math.trunc(a) if abs(a) < 1e15 else a", -10, 10),
    "math.degrees": ("math.degrees(a)", -10, 10),
    "math.radians": ("math.radians(a)", -1000, 1000),
    "math.frexp": ("math.frexp(a)[0] + math.frexp(a)[1]", -10, 10),
    "math.isnan": ("1.0 if math.isnan(a) else 0.0", -10, 10),
    "math.isinf": ("1.0 if math.isinf(a) else 0.0", -10, 10),
    "math.isfinite": ("1.0 if math.isfinite(a) else 0.0", -10, 10),
    "np.sin": ("np.sin(a)", -10, 10), "np.arcsinh": ("np.arcsinh(a)", -100, 100),
    "np.exp2": ("np.exp2(a)", -130, 130), "np.log2": ("np.log2(a)", 0, 100),
    "np.cbrt": ("np.cbrt(a)", -100, 100), "np.square": ("np.square(a)", -100, 100),
    "np.reciprocal": ("np.reciprocal(a)", -10, 10), "np.rint": ("np.rint(a)", -10, 10),
    "np.sign": ("np.sign(a)", -10, 10), "np.spacing": ("np.spacing(a)", -10, 10),
    "np.deg2rad": ("np.deg2rad(a)", -1000, 1000), "np.negative": ("np.negative(a)", -1, 1),
    "np.signbit": ("1.0 if np.signbit(a) else 0.0", -1, 1),
    "round": ("round(a) if abs(a) < 1e15 else a", -10, 10), "abs": ("abs(a)", -10, 10),
}
if hasattr(math, "exp2"):  # Python 3.11 on
    UNARY["math.exp2"] = ("math.exp2(a)", -130, 130)

#: Binary functions: expression of ``a`` and ``b``, and the core ranges.
BINARY = {
    "math.pow": ("math.pow(a, b)", (0, 10), (-20, 20)),
    "**": ("a ** b", (-10, 10), (-20, 20)),
    "math.atan2": ("math.atan2(a, b)", (-10, 10), (-10, 10)),
    "math.hypot": ("math.hypot(a, b)", (-100, 100), (-100, 100)),
    "math.copysign": ("math.copysign(a, b)", (-10, 10), (-10, 10)),
    "math.nextafter": ("math.nextafter(a, b)", (-10, 10), (-10, 10)),
    "math.ldexp": ("math.ldexp(a, np.intc(b) if abs(b) < 2000 else np.intc(7))", (-10, 10),
                   (-300, 300)),
    "np.power": ("np.power(a, b)", (0, 10), (-20, 20)),
    "np.arctan2": ("np.arctan2(a, b)", (-10, 10), (-10, 10)),
    "np.logaddexp": ("np.logaddexp(a, b)", (-100, 100), (-100, 100)),
    "np.logaddexp2": ("np.logaddexp2(a, b)", (-100, 100), (-100, 100)),
    "np.fmod": ("np.fmod(a, b)", (-1e6, 1e6), (-10, 10)),
    "np.maximum": ("np.maximum(a, b)", (-10, 10), (-10, 10)),
    "np.minimum": ("np.minimum(a, b)", (-10, 10), (-10, 10)),
    "np.fmax": ("np.fmax(a, b)", (-10, 10), (-10, 10)),
    "np.fmin": ("np.fmin(a, b)", (-10, 10), (-10, 10)),
    "np.copysign": ("np.copysign(a, b)", (-10, 10), (-10, 10)),
    "np.nextafter": ("np.nextafter(a, b)", (-10, 10), (-10, 10)),
    "np.float_power": ("np.float_power(a, b)", (0, 10), (-20, 20)),
    "%": ("a % b", (-1e6, 1e6), (-10, 10)),
    "//": ("a // b", (-1e6, 1e6), (-10, 10)),
    "/": ("a / b", (-1e6, 1e6), (-10, 10)),
    "max": ("max(a, b)", (-10, 10), (-10, 10)),
}

#: The gamma functions, held to :data:`GAMMA_TOLERANCE` ULPs of the CPU,
#: for ``math.lgamma`` ULPs of ``max(|lgamma(x)|, 1)`` since it has roots.
#: numba.njit's gamma is CPython's algorithm, itself up to ~7 ULP off the
#: true value, so the bound is wider than the device's own error, which
#: :func:`test_against_correctly_rounded_values` checks.
GAMMA = {"math.gamma": ("math.gamma(a)", -10, 40), "math.lgamma": ("math.lgamma(a)", -10, 40)}
GAMMA_TOLERANCE = {"math.gamma": {"float32": 8, "float64": 12},
                   "math.lgamma": {"float32": 8, "float64": 8}}

_SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0]
SAMPLES = 400


def _samples(rng, dtype, lo, hi):
    """Core-range values, signed magnitudes across the normal range, specials."""
    info = np.finfo(dtype)
    core = rng.uniform(lo, hi, SAMPLES // 2)
    count = SAMPLES - core.size - len(_SPECIAL)
    wide = 10.0 ** rng.uniform(np.log10(info.tiny), np.log10(info.max), count)
    wide *= rng.choice([-1.0, 1.0], count)
    return np.concatenate([core, wide, _SPECIAL]).astype(dtype)


def _source(name, rows, params):
    """A kernel and its CPU twin evaluating ``rows`` (one expression each)."""
    load = "; ".join(f"{p} = {p}_in[r, i]" for p in params)
    body = []
    for r, expr in enumerate(rows):
        body.append(f"        r = {r}")
        body.append(f"        {load}")
        body.append(f"        out[r, i] = {expr}")
    args = ", ".join(f"{p}_in" for p in params)
    kernel = [f"def {name}({args}, out):", "    i = nv.global_id(0)",
              "    if i < out.shape[1]:", *body]
    cpu = [f"def {name}_cpu({args}, out):", "    for i in range(out.shape[1]):", *body]
    return "\n".join(kernel) + "\n\n" + "\n".join(cpu) + "\n"


def _build(name, rows, params):
    namespace = {"math": math, "np": np, "nv": nv}
    exec(compile(_source(name, rows, params), f"<{name}>", "exec"), namespace)
    return nv.jit(namespace[name]), numba.njit(namespace[f"{name}_cpu"], error_model="numpy")


def ulp_error(got, want):
    """Distance in ULPs between two float arrays; NaN matches NaN only.

    A subnormal ``want`` also matches a zero of its sign (flushed).
    """
    dtype = got.dtype
    ity = np.int32 if dtype == np.float32 else np.int64

    def ordered(values):
        bits = values.view(ity).astype(np.int64)
        return np.where(bits < 0, np.int64(np.iinfo(ity).min) - bits, bits)

    def distance(a, b):
        d = np.abs(ordered(a) - ordered(b)).astype(np.float64)
        d[np.isnan(a) & np.isnan(b)] = 0
        d[np.isnan(a) ^ np.isnan(b)] = np.inf
        return d

    flushed = np.where(np.abs(want) < np.finfo(dtype).tiny, np.copysign(0, want), want)
    return np.minimum(distance(got, want), distance(got, flushed.astype(dtype)))


def _run(dtype, table, params, rng):
    names = list(table)
    rows = [table[n][0] for n in names]
    kernel, cpu = _build(f"math_{len(params)}_{len(table)}_{np.dtype(dtype).name}", rows,
                         params)
    inputs = []
    for k, _ in enumerate(params):
        ranges = [table[n][1:] if len(params) == 1 else table[n][1 + k] for n in names]
        inputs.append(np.stack([_samples(rng, dtype, *r) for r in ranges]))
    if len(params) == 2:
        # Pair every special value with every other as well.
        specials = np.array(_SPECIAL, dtype)
        a, b = np.meshgrid(specials, specials)
        for array, values in zip(inputs, (a.ravel(), b.ravel())):
            array[:, :values.size] = values
    out = np.zeros_like(inputs[0])
    ref = np.zeros_like(inputs[0])
    kernel.forall(out.shape[1])(*inputs, out)
    cpu(*inputs, ref)
    if "np.cbrt" in names:
        # numba.njit's np.cbrt is a power of 1/3 that becomes C's cbrt only
        # where LLVM rewrites it (not with Python 3.10's Numba): NumPy's own.
        row = names.index("np.cbrt")
        ref[row] = np.cbrt(inputs[0][row])
    for compiled in compiled_kernels(kernel):
        assert_valid_spirv(compiled)
    return {name: (ulp_error(out[r], ref[r]), inputs, r, out[r], ref[r])
            for r, name in enumerate(names)}


_results = {}


def results(dtype, table, rng):
    """Errors of every function of one table in one dtype, computed once."""
    key = (dtype, id(table))
    if key not in _results:
        binary = isinstance(next(iter(table.values()))[1], tuple)
        params = ("a", "b") if binary else ("a",)
        _results[key] = _run(dtype, table, params, rng)
    return _results[key]


def _check(dtype, table, name, rng, tolerance=None):
    errors, inputs, row, got, want = results(dtype, table, rng)[name]
    worst = int(np.argmax(errors))
    args = ", ".join(repr(x[row, worst]) for x in inputs)
    tolerance = TOLERANCE[dtype] if tolerance is None else tolerance
    assert errors[worst] <= tolerance, (
        f"{name}({args}) = {got[worst]!r} on the device, {want[worst]!r} on the CPU: "
        f"{errors[worst]:g} ULP")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(UNARY))
def test_unary(dtype, name, rng):
    _check(dtype, UNARY, name, rng)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(BINARY))
def test_binary(dtype, name, rng):
    _check(dtype, BINARY, name, rng)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gamma(dtype, rng):
    _check(dtype, GAMMA, "math.gamma", rng, GAMMA_TOLERANCE["math.gamma"][dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lgamma(dtype, rng):
    _, inputs, row, got, want = results(dtype, GAMMA, rng)["math.lgamma"]
    with np.errstate(all="ignore"):
        scale = np.maximum(np.abs(want), 1).astype(dtype)
        error = np.abs(got.astype(np.float64) - want) / np.spacing(scale)
    error[(got == want) | (np.isnan(got) & np.isnan(want))] = 0
    error[np.isnan(got) ^ np.isnan(want)] = np.inf
    worst = int(np.argmax(error))
    assert error[worst] <= GAMMA_TOLERANCE["math.lgamma"][dtype], (
        f"lgamma({inputs[0][row, worst]!r}) = {got[worst]!r} on the device, "
        f"{want[worst]!r} on the CPU")


#: math.cbrt, or on Python 3.10, which lacks it, the stand-in kernels compile.
cbrt = intrinsics.cbrt


def _extra_kernel(x, y, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        out[i, 0] = math.fmod(x[i], y[i])
        out[i, 1] = math.remainder(x[i], y[i])
        fraction, whole = math.modf(x[i])
        out[i, 2] = fraction
        out[i, 3] = whole
        out[i, 4] = cbrt(x[i])
        out[i, 5] = math.ulp(x[i])
        out[i, 6] = math.log(abs(x[i]) + 1, abs(y[i]) + 2)


extra_kernel = nv.jit(_extra_kernel)


def _extra_reference(a, b):
    """Python's own results, for the functions numba.njit lacks."""
    return [math.fmod(a, b), math.remainder(a, b), *math.modf(a), np.cbrt(a), math.ulp(a),
            math.log(abs(a) + 1, abs(b) + 2)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_math_functions_numba_lacks(dtype, rng):
    """math.fmod, remainder, modf, cbrt, ulp and log with a base, which
    numba.njit does not compile: against Python's math module."""
    x = _samples(rng, dtype, -1e6, 1e6)
    y = _samples(rng, dtype, -10, 10)
    finite = np.isfinite(x) & np.isfinite(y) & (y != 0)
    x, y = x[finite], y[finite]
    x[:4] = [np.inf, -np.inf, np.nan, -0.0]
    y[:4] = [2.0, 3.0, 2.0, 2.0]
    out = np.zeros((x.size, 7), dtype)
    extra_kernel.forall(x.size)(x, y, out)
    want = np.array([_extra_reference(float(a), float(b)) if np.isfinite(a) else
                     [np.nan, np.nan, *np.modf(a), np.cbrt(a), abs(a),
                      math.log(abs(a) + 1, abs(b) + 2)]
                     for a, b in zip(x, y)]).astype(dtype)
    for column in range(7):
        errors = ulp_error(out[:, column], want[:, column])
        worst = int(np.argmax(errors))
        assert errors[worst] <= TOLERANCE[dtype], (
            f"column {column} at ({x[worst]!r}, {y[worst]!r}): {out[worst, column]!r} on the "
            f"device, {want[worst, column]!r} from Python")


#: Values that float64 rounding got wrong on lavapipe without AVX-512: halves
#: (ties), magnitudes from 2**24 up to 2**52 with a fraction, and the values
#: around the edges of the exponent range where the bits change meaning.
ROUNDING_INPUTS = np.array(
    [0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 0.49999999999999994, -0.49999999999999994,
     0.7, -0.7, 1.0, -1.0, 0.0, -0.0, 2.0**24 + 0.5, 2.0**24 + 1.5, -(2.0**25 + 0.5),
     2.0**30 + 0.25, 2.0**31 + 0.5, -(2.0**31 + 0.75), 1e9 + 0.5, 2.0**40 + 0.5,
     2.0**51 + 0.5, 2.0**51 + 1.5, 2.0**52 - 0.5, -(2.0**52 - 0.5), 2.0**52, 2.0**52 + 1,
     2.0**53 + 2, 1e300, -1e300, 5e-324, -5e-324, 2.2250738585072014e-308, np.inf, -np.inf,
     np.nan])


_ROUNDING = ["np.floor(a)", "np.ceil(a)", "np.trunc(a)", "np.rint(a)",
             "round(a) if abs(a) < 1e15 else a", "a - math.floor(a) if abs(a) < 1e15 else a"]
rounding_kernel, rounding_cpu = _build("rounding", _ROUNDING, ("a",))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rounding_is_exact(dtype):
    """floor, ceil, trunc, rint and round give exactly NumPy's results,
    signs of zero included (lavapipe's float64 Trunc and RoundEven left
    values >= 2**24 unchanged and rounded 1.5 to 1 on an AMD EPYC)."""
    with np.errstate(over="ignore"):
        x = np.tile(ROUNDING_INPUTS.astype(dtype), (len(_ROUNDING), 1))
    out, want, flushed = np.zeros_like(x), np.zeros_like(x), np.zeros_like(x)
    rounding_kernel.forall(x.shape[1])(x, out)
    rounding_cpu(x, want)
    # A subnormal input may be flushed to a zero of its sign first.
    rounding_cpu(np.where(np.abs(x) < np.finfo(dtype).tiny, np.copysign(0, x), x), flushed)
    x = x[0]
    for row, name in enumerate(_ROUNDING):
        got = out[row].view(f"u{x.itemsize}")
        same = (got == want[row].view(got.dtype)) | (got == flushed[row].view(got.dtype))
        same |= np.isnan(out[row]) & np.isnan(want[row])
        bad = np.flatnonzero(~same)
        assert bad.size == 0, (f"{name} at a = {x[bad[0]]!r}: {out[row, bad[0]]!r} on the "
                               f"device, {want[row, bad[0]]!r} on the CPU")


def test_float64_rounding_uses_no_driver_rounding():
    """No float64 rounding reaches the driver as a GLSL.std.450 instruction,
    so the results above hold on CPUs whose lavapipe rounds float64 right
    (with AVX-512) and on those where it does not; libclc's sin and fmod
    included."""
    import re
    compiled = rounding_kernel.compile("void(float64[:, ::1], float64[:, ::1])")
    trig = large_kernel.compile("void(float64[:, ::1], float64[:, ::1])")
    for module in (compiled, trig):
        text = module.disassemble()
        doubles = set(re.findall(r"^\s*(%\w+) = OpTypeFloat 64$", text, re.M))
        used = re.findall(r"= OpExtInst (%\w+) %\w+ (Floor|Ceil|Trunc|Round|RoundEven|Fract)\b",
                          text)
        assert not [op for ty, op in used if ty in doubles], used


def test_float64_rounding_without_int64():
    """A target with float64 but without int64 keeps the driver's rounding
    instructions rather than declare Int64 for the bit arithmetic."""
    from numba_vulkan.base.target import TargetDescription
    compiled = rounding_kernel.compile("void(float64[:, ::1], float64[:, ::1])",
                                       target=TargetDescription(int64=False))
    assert "Int64" not in compiled.capabilities
    assert_valid_spirv(compiled)


#: Arguments from 2**31 to 1e10 (where float64 sin gave +-0.7071 on lavapipe
#: without AVX-512), a few beyond, and their negatives.
LARGE_ARGUMENTS = np.array(
    [2.0**31, 2.0**31 + 0.5, 3e9, 1e9, 5391683761.644151, 2.0**32 + 1, 7777777777.7, 1e10,
     2.0**40 + 3, 1e15, 1e22, 1e100, 1e300])
LARGE_ARGUMENTS = np.concatenate([LARGE_ARGUMENTS, -LARGE_ARGUMENTS])
_LARGE = ["math.sin(a)", "math.cos(a)", "math.tan(a)", "np.sin(a)", "np.fmod(a, 3.7)",
          "a % 3.7", "np.fmod(a, -0.1)", "a % -0.1"]
large_kernel, large_cpu = _build("large", _LARGE, ("a",))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_large_arguments(dtype):
    """Trigonometric functions and remainders of large arguments, against
    the CPU within :data:`TOLERANCE`."""
    x = np.tile(LARGE_ARGUMENTS.astype(dtype) if dtype == "float64" else
                LARGE_ARGUMENTS[np.abs(LARGE_ARGUMENTS) < 1e38].astype(dtype), (len(_LARGE), 1))
    out, want = np.zeros_like(x), np.zeros_like(x)
    large_kernel.forall(x.shape[1])(x, out)
    large_cpu(x, want)
    for row, name in enumerate(_LARGE):
        errors = ulp_error(out[row], want[row])
        worst = int(np.argmax(errors))
        assert errors[worst] <= TOLERANCE[dtype], (
            f"{name} at a = {x[row, worst]!r}: {out[row, worst]!r} on the device, "
            f"{want[row, worst]!r} on the CPU: {errors[worst]:g} ULP")


#: Python functions whose sign of zero kernels must keep: f(-0.0) is -0.0
#: (or -inf) for each; float64 sin, tan, asin, atan, erf and expm1 of -0.0
#: gave +0.0.
_ZERO_SIGN = ["math.sin(a)", "math.tan(a)", "math.asin(a)", "math.atan(a)", "math.erf(a)",
              "math.expm1(a)", "math.sinh(a)", "math.tanh(a)", "math.asinh(a)",
              "math.atanh(a)", "math.log1p(a)", "np.cbrt(a)", "math.sqrt(a)", "np.trunc(a)",
              "np.rint(a)", "math.atan2(a, 1.0)", "math.gamma(a)", "np.sin(a)", "np.tan(a)",
              "np.arcsin(a)", "np.arctan(a)", "np.expm1(a)"]
zero_sign_kernel, zero_sign_cpu = _build("zero_sign", _ZERO_SIGN, ("a",))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_signs_of_zero(dtype):
    """Odd functions of +-0.0 return a zero (or an infinity) of the same
    sign, bit for bit as on the CPU."""
    x = np.tile(np.array([0.0, -0.0], dtype), (len(_ZERO_SIGN), 1))
    out, want = np.zeros_like(x), np.zeros_like(x)
    zero_sign_kernel.forall(x.shape[1])(x, out)
    zero_sign_cpu(x, want)
    for row, name in enumerate(_ZERO_SIGN):
        for k in range(2):
            assert out[row, k] == want[row, k] and (
                np.signbit(out[row, k]) == np.signbit(want[row, k])), (
                f"{name} at a = {x[row, k]!r}: {out[row, k]!r} on the device, "
                f"{want[row, k]!r} on the CPU")


#: Correctly rounded values (from mpmath at 300 bits, by hand): rows of
#: (x, f(x) rounded to float64, f(float32(x)) rounded to float32). Points
#: include the worst ones found by sampling the old implementations.
REFERENCES = {
    'erf': [
        (1e-300, 1.1283791670955126e-300, 0.0),
        (-1e-20, -1.1283791670955125e-20, -1.1283791263479627e-20),
        (0.1, 0.1124629160182849, 0.11246291548013687),
        (0.5, 0.5204998778130465, 0.5204998850822449),
        (-0.9277533456280986, -0.8104938215744225, -0.8104938268661499),
        (1.1541688, 0.8973713090616746, 0.8973713517189026),
        (2.5, 0.999593047982555, 0.9995930194854736),
        (-3.3, -0.9999969422902035, -0.9999969601631165),
        (5.9, 0.9999999999999999, 1.0),
    ],
    'erfc': [
        (1.23203585843258, 0.0814451522416598, 0.08144515007734299),
        (-1.5, 1.9661051464753108, 1.9661051034927368),
        (0.3, 0.6713732405408726, 0.6713732481002808),
        (2.0, 0.004677734981047266, 0.004677734803408384),
        (5.5, 7.357847917974398e-15, 7.357848258080467e-15),
        (8.75, 3.597115728647072e-35, 3.597115741463452e-35),
        (11.467301286493424, 3.810994973718853e-59, 3.810987717019059e-59),
        (26.5, 2.2109076642637343e-307, 2.2109076268062963e-307),
    ],
    'gamma': [
        (1e-08, 99999999.42278434, 100000000.0),
        (-1e-08, -100000000.57721567, -100000000.0),
        (0.00823965638861579, 120.79515699230102, 120.79515075683594),
        (0.24741050991895408, 3.665730043648547, 3.6657299995422363),
        (1.5, 0.886226925452758, 0.8862269520759583),
        (4.1582937101109625, 7.3455823330964956, 7.345582485198975),
        (9.504210557102432, 120401.60055236852, 120401.578125),
        (18.603065963456054, 2019290100455196.2, 2019287329931264.0),
        (29.00307, 3.0804015709916652e+29, 3.0804102348767912e+29),
        (34.628273, 7.932003217297608e+37, 7.932003675916648e+37),
        (137.1950864901712, 9.549128537687404e+232, np.inf),
        (149.49378113167583, 3.0222470990297026e+259, np.inf),
        (165.2434455663319, 1.1387350917375415e+294, np.inf),
        (169.859113301107, 2.071562590884058e+304, np.inf),
        (171.6, 1.5858969096672565e+308, np.inf),
        (-0.5, -3.544907701811032, -3.544907808303833),
        (-2.7411913622422324, -0.9880435418361696, -0.9880436062812805),
        (-9.262739401850585, 6.496763383841759e-06, 6.496770765807014e-06),
        (-13.829809164927298, 1.1137352455220652e-10, 1.1137352845524973e-10),
        (-33.7033, 3.7849006265657125e-38, 3.784898464090852e-38),
        (-87.72685445768825, 7.613618409124831e-134, 7.613645580261148e-134),
        (-170.36700532359768, -7.181346984392941e-308, -7.18139078052161e-308),
    ],
    'lgamma': [
        (1e-05, 11.512919692895826, 11.512919425964355),
        (0.8317996108191161, 0.12251230584432107, 0.12251228839159012),
        (1.0001, -5.771334222047127e-05, -5.772291842731647e-05),
        (2.5, 0.2846828704729192, 0.28468286991119385),
        (3.0, 0.6931471805599453, 0.6931471824645996),
        (27.42167937922779, 62.646968055941876, 62.64696502685547),
        (691.6444352489472, 3828.7178494174173, 3828.7177734375),
        (100000.0, 1051287.7089736569, 1051287.75),
        (-0.5, 1.2655121234846454, 1.2655121088027954),
        (-2.4570247, 5.792758455100296e-08, -1.1287842482943233e-07),
        (-5.003256324713467, 0.934125173394175, 0.9341263175010681),
        (-114.88835189771102, -431.21613794076757, -431.21612548828125),
    ],
}

#: Largest error allowed against :data:`REFERENCES`, in ULPs, by dtype: the
#: targets (float64 2, float32 4, the gamma functions 8).
REFERENCE_TOLERANCE = {"erf": {"float32": 4, "float64": 2}, "erfc": {"float32": 4, "float64": 2},
                       "gamma": {"float32": 8, "float64": 8},
                       "lgamma": {"float32": 8, "float64": 8}}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(REFERENCES))
def test_against_correctly_rounded_values(dtype, name):
    """erf, erfc, gamma and lgamma against correctly rounded values, not the
    CPU's (glibc's erfc is 2 ULP off at 1.23203585843258, numba.njit's gamma
    several); lgamma in ULPs of ``max(|lgamma(x)|, 1)``."""
    rows = REFERENCES[name]
    column = 1 if dtype == "float64" else 2
    info = np.finfo(dtype)
    with np.errstate(over="ignore", under="ignore"):
        x = np.array([row[0] for row in rows], dtype)
        want = np.array([row[column] for row in rows], dtype)
    # Results a device may flush (subnormal, or from a subnormal input) or
    # that are out of the dtype's range prove nothing here.
    keep = (np.abs(x) >= info.tiny) & ((np.abs(want) >= info.tiny) | (want == 0))
    x, want = x[keep], want[keep]
    kernel, _ = _build(f"reference_{name}", [f"math.{name}(a)"], ("a",))
    out = np.zeros((1, x.size), dtype)
    kernel.forall(x.size)(x[None, :], out)
    got = out[0]
    scale = np.maximum(np.abs(want), 1) if name == "lgamma" else np.abs(want)
    with np.errstate(invalid="ignore"):
        errors = np.abs(got.astype(np.float64) - want) / np.spacing(scale.astype(dtype))
    errors[got == want] = 0
    worst = int(np.argmax(errors))
    assert errors[worst] <= REFERENCE_TOLERANCE[name][dtype], (
        f"math.{name}({x[worst]!r}) = {got[worst]!r} on the device, correctly rounded "
        f"{want[worst]!r}: {errors[worst]:g} ULP")


def _erf64(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


#: float32 functions against float64 references rounded once to float32, on
#: many samples: those whose libclc code divides (its own divisions are the
#: driver's, codegen/libclc_link.py) and the common ones. Expression, float64
#: reference, ranges of the arguments.
FLOAT64_REFERENCES = {
    "exp": ("math.exp(a)", np.exp, (-100, 100)), "log": ("math.log(a)", np.log, (0, 100)),
    "erf": ("math.erf(a)", _erf64, (-5, 5)), "tanh": ("math.tanh(a)", np.tanh, (-10, 10)),
    "sin": ("math.sin(a)", np.sin, (-10, 10)), "cos": ("math.cos(a)", np.cos, (-10, 10)),
    "expm1": ("math.expm1(a)", np.expm1, (-10, 10)),
    "log1p": ("math.log1p(a)", np.log1p, (-1, 10)),
    "acos": ("math.acos(a)", np.arccos, (-1, 1)), "asin": ("math.asin(a)", np.arcsin, (-1, 1)),
    "atan": ("math.atan(a)", np.arctan, (-10, 10)),
    "cosh": ("math.cosh(a)", np.cosh, (-90, 90)), "sinh": ("math.sinh(a)", np.sinh, (-90, 90)),
    "exp2": ("math.exp2(a)", np.exp2, (-130, 130)), "log2": ("math.log2(a)", np.log2, (0, 100)),
    "log10": ("math.log10(a)", np.log10, (0, 100)),
    "asinh": ("math.asinh(a)", np.arcsinh, (-100, 100)),
    "atanh": ("math.atanh(a)", np.arctanh, (-1, 1)),
    "atan2": ("math.atan2(a, b)", np.arctan2, (-10, 10), (-10, 10)),
    "pow": ("math.pow(a, b)", np.power, (0, 10), (-20, 20)),
}


def test_float32_against_float64_references():
    rng = np.random.default_rng(2323)
    names = list(FLOAT64_REFERENCES)
    size = 4096
    a = np.zeros((len(names), size), np.float32)
    b = np.ones_like(a)
    for row, name in enumerate(names):
        _, _, *ranges = FLOAT64_REFERENCES[name]
        for array, (lo, hi) in zip((a, b), ranges):
            array[row] = np.concatenate([rng.uniform(lo, hi, size - SAMPLES),
                                         _samples(rng, np.float32, lo, hi)])
    kernel, _ = _build("float64_references", [FLOAT64_REFERENCES[n][0] for n in names],
                       ("a", "b"))
    out = np.zeros_like(a)
    kernel.forall(size)(a, b, out)
    failures = []
    for row, name in enumerate(names):
        _, reference, *ranges = FLOAT64_REFERENCES[name]
        args = [a[row].astype(np.float64), b[row].astype(np.float64)][:len(ranges)]
        with np.errstate(all="ignore"):
            want = reference(*args).astype(np.float32)
        errors = ulp_error(out[row], want)
        worst = int(np.argmax(errors))
        if errors[worst] > TOLERANCE["float32"]:
            failures.append(f"{name}({a[row, worst]!r}, {b[row, worst]!r}) = "
                            f"{out[row, worst]!r}, want {want[worst]!r}: {errors[worst]:g} ULP")
    assert not failures, failures
