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
from helpers import assert_valid_spirv, compiled_kernels

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
    "math.exp": ("math.exp(a)", -100, 100), "math.exp2": ("math.exp2(a)", -130, 130),
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

#: The gamma functions, which libclc computes less accurately than glibc
#: (docs/limitations.md): held to the ULPs in :data:`GAMMA_TOLERANCE`, for
#: ``math.lgamma`` ULPs of ``max(|lgamma(x)|, 1)`` since it has roots.
GAMMA = {"math.gamma": ("math.gamma(a)", -10, 40), "math.lgamma": ("math.lgamma(a)", -10, 40)}
GAMMA_TOLERANCE = {"math.gamma": {"float32": 256, "float64": 1024},
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


def _extra_kernel(x, y, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        out[i, 0] = math.fmod(x[i], y[i])
        out[i, 1] = math.remainder(x[i], y[i])
        fraction, whole = math.modf(x[i])
        out[i, 2] = fraction
        out[i, 3] = whole
        out[i, 4] = math.cbrt(x[i])
        out[i, 5] = math.ulp(x[i])
        out[i, 6] = math.log(abs(x[i]) + 1, abs(y[i]) + 2)


extra_kernel = nv.jit(_extra_kernel)


def _extra_reference(a, b):
    """Python's own results, for the functions numba.njit lacks."""
    return [math.fmod(a, b), math.remainder(a, b), *math.modf(a), math.cbrt(a), math.ulp(a),
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
