"""Measure the library's functions on the device against exact references.

Errors are in ULPs of the exact result: for float32 against NumPy's (or
``math``'s) float64 value, for float64 against mpmath at 40 digits. Each
function is run as a kernel over random inputs spread across its domain
(log-uniform magnitudes, both signs) and over edge inputs.

By hand, on any device (lavapipe, or the H200 with ``benchmarks/README.md``'s
setup)::

    python -m tests.codegen.mathlib.accuracy [NAME ...] [--n 4194304] [--seed 1] [--domain LO HI]

prints one line a function: the worst error, where, and the count of
inputs. A NAME is ``exp_f32`` or ``atan2_f64``; without names, all.
"""

import argparse
import math
import re
import sys

import numpy as np

import numba_vulkan as nv

try:
    import mpmath as mp
except ImportError:  # only float64 references need it
    mp = None

#: name: (kernel expression of x (and y), float64 NumPy reference or None,
#: mpmath reference, arity, sampled domain as (least, greatest) magnitude
#: exponents of 2 and whether negatives are sampled)
FUNCTIONS = {
    "div": ("x / y", np.divide, lambda x, y: x / y, 2, (-149, 128), True),
    "sqrt": ("math.sqrt(x)", np.sqrt, lambda x: mp.sqrt(x), 1, (-149, 128), True),
    "exp": ("math.exp(x)", np.exp, lambda x: mp.exp(x), 1, (-30, 7.5), True),
    "log": ("math.log(x)", np.log, lambda x: mp.log(x), 1, (-1100, 1024), True),
    "log2": ("math.log2(x)", np.log2, lambda x: mp.log(x, 2), 1, (-1100, 1024), True),
    "log10": ("math.log10(x)", np.log10, lambda x: mp.log10(x), 1, (-1100, 1024), True),
    "log1p": ("math.log1p(x)", np.log1p, lambda x: mp.log1p(x), 1, (-60, 1024), True),
    "exp2": ("np.exp2(x)", np.exp2, lambda x: mp.power(2, x), 1, (-30, 10.1), True),
    "expm1": ("math.expm1(x)", np.expm1, lambda x: mp.expm1(x), 1, (-60, 10), True),
    "pow": ("math.pow(x, y)", np.power, lambda x, y: mp.power(x, y), 2, (-10, 10), False),
    "sin": ("math.sin(x)", np.sin, lambda x: mp.sin(x), 1, (-30, 30), True),
    "cos": ("math.cos(x)", np.cos, lambda x: mp.cos(x), 1, (-30, 30), True),
    "tan": ("math.tan(x)", np.tan, lambda x: mp.tan(x), 1, (-30, 30), True),
    "atan": ("math.atan(x)", np.arctan, lambda x: mp.atan(x), 1, (-40, 40), True),
    "atan2": ("math.atan2(x, y)", np.arctan2, lambda x, y: mp.atan2(x, y), 2, (-40, 40), True),
    "erf": ("math.erf(x)", None, lambda x: mp.erf(x), 1, (-40, 3), True),
    "erfc": ("math.erfc(x)", None, lambda x: mp.erfc(x), 1, (-40, 5), True),
    "tanh": ("math.tanh(x)", np.tanh, lambda x: mp.tanh(x), 1, (-40, 5), True),
    "sinh": ("math.sinh(x)", np.sinh, lambda x: mp.sinh(x), 1, (-40, 7), True),
    "cosh": ("math.cosh(x)", np.cosh, lambda x: mp.cosh(x), 1, (-40, 7), True),
}

#: Functions held to correct rounding (half an ULP), not to 4 or 2 ULP.
CORRECTLY_ROUNDED = {"div", "sqrt"}

_EDGES = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, 2.0, 3.0, 10.0, 0.1,
          1e-30, 1e-300, 5e-324, 1.4e-45, 1e-40, 1.1754943508222875e-38,
          2.2250738585072014e-308, 3.4028234663852886e38, 1.7976931348623157e308,
          88.72283, 88.72284, -87.33655, -103.97, -103.98, 709.78, 709.79, -745.1, -745.2,
          math.pi, math.pi / 2, math.pi / 4, 1e5, 1e10, 1e22, 0.99999994, 1.0000001]


def kernel(name, dtype):
    """The kernel computing ``name`` of each input element (or pair)."""
    expression = re.sub(r"\b([xy])\b", r"\1[i]", FUNCTIONS[name][0])
    source = (f"def k_{name}(x, y, out):\n"
              f"    i = nv.global_id(0)\n"
              f"    if i < out.shape[0]:\n"
              f"        out[i] = {expression}\n")
    namespace = {"math": math, "nv": nv, "np": np}
    exec(compile(source, f"<mathlib {name}>", "exec"), namespace)
    return nv.jit(namespace[f"k_{name}"])


def inputs(name, dtype, n, seed, domain=None):
    """``n`` random inputs (tuples for two arguments) and the edge inputs;
    ``domain`` (least, greatest exponent of 2) narrows the sampled one."""
    _, _, _, arity, (lo, hi), negative = FUNCTIONS[name]
    lo, hi = domain or (lo, hi)
    rng = np.random.default_rng(seed)
    info = np.finfo(dtype)
    lo = max(lo, np.log2(float(info.smallest_subnormal)))
    hi = min(hi, np.log2(float(info.max)))
    columns = []
    for _ in range(arity):
        x = 2.0 ** rng.uniform(lo, hi, n)
        if negative:
            x *= rng.choice([-1.0, 1.0], n)
        edges = np.array(_EDGES, np.float64)
        with np.errstate(over="ignore"):
            edges = np.concatenate([edges, -edges]).astype(dtype)
        columns.append(np.concatenate([edges, x.astype(dtype)]))
    if name == "pow":
        k = len(_EDGES) * 2
        x, y = _pow_pairs(rng, n, dtype)
        columns = [np.concatenate([c[:k], d]) for c, d in zip(columns, (x, y))]
    if arity == 2:
        # Every edge against every edge, then the random pairs.
        k = len(_EDGES) * 2
        a, b = np.meshgrid(columns[0][:k], columns[1][:k])
        columns = [np.concatenate([a.ravel(), columns[0][k:]]),
                   np.concatenate([b.ravel(), columns[1][k:]])]
    return columns


def _pow_pairs(rng, n, dtype):
    """``n`` random ``(x, y)`` whose ``x ** y`` spans the whole range, from
    below the least subnormal to beyond the largest float: ``|x|``
    log-uniform over the whole range (a quarter of them within 2**-8 of
    1), ``y = e / log2|x|`` for an exponent ``e`` uniform over the result's
    range; an eighth of them with ``x`` negative and ``y`` integral."""
    info = np.finfo(dtype)
    least, most = np.log2(float(info.smallest_subnormal)), np.log2(float(info.max))
    x = 2.0 ** rng.uniform(least, most, n)
    near = rng.random(n) < 0.25
    x[near] = 1.0 + rng.choice([-1.0, 1.0], near.sum()) * 2.0 ** rng.uniform(
        -info.nmant - 1, -8, near.sum())
    x = x.astype(dtype).astype(np.float64)
    x[x == 1.0] = 2.0
    y = rng.uniform(least - 2, most + 1, n) / np.log2(x)
    negative = rng.random(n) < 0.125
    x[negative] = -x[negative]
    y[negative] = np.round(y[negative])
    return x.astype(dtype), y.astype(dtype)


def run(name, dtype, columns):
    """The device's results for ``columns``."""
    x = columns[0]
    y = columns[1] if len(columns) > 1 else x
    out = np.zeros_like(x)
    kernel(name, dtype)[(x.size + 255) // 256, 256](x, y, out)
    return out


def errors(name, dtype, columns, got, digits=40):
    """Error of each result in ULPs of the exact value (float64: mpmath's at
    ``digits`` significant digits); 0 where both are the same NaN class,
    infinity or zero sign; inf where the classes differ."""
    numpy_ref, mp_ref = FUNCTIONS[name][1], FUNCTIONS[name][2]
    if dtype == np.float32:
        error = _float32_errors(name, columns, got)
        # A device may flush subnormal inputs and results to zero (NVIDIA's
        # Vulkan driver does for float32; docs/limitations.md): what it gives
        # for the flushed inputs is as right.
        flushed = [np.where(np.abs(c) < np.finfo(np.float32).tiny, np.copysign(0, c), c)
                   .astype(np.float32) for c in columns]
        return np.minimum(error, _float32_errors(name, flushed, got))
    mp.mp.dps = digits
    out = np.empty(got.size)
    for k in range(got.size):
        args = [float(c[k]) for c in columns]
        out[k] = _mp_ulps(float(got[k]), args, mp_ref)
    return out


def _float32_errors(name, columns, got):
    numpy_ref = FUNCTIONS[name][1]
    wide = [c.astype(np.float64) for c in columns]
    with np.errstate(all="ignore"):
        if numpy_ref is not None:
            want = numpy_ref(*wide)
        else:
            want = np.vectorize(getattr(math, name), otypes=[np.float64])(*wide)
    return _ulps(got.astype(np.float64), want, np.float32)


def _ulps(got, want, dtype):
    info = np.finfo(dtype)
    with np.errstate(all="ignore"):
        rounded = want.astype(dtype).astype(np.float64)
        ulp = np.maximum(np.spacing(np.abs(rounded.astype(dtype))).astype(np.float64),
                         float(info.smallest_subnormal))
        err = np.abs(got - want) / ulp
    finite = np.isfinite(got) & np.isfinite(rounded)
    same = (np.isnan(got) & np.isnan(rounded)) | (got == rounded)
    err[~finite] = np.where(same[~finite], 0.0, np.inf)
    zeros = (got == 0) & (rounded == 0)
    err[zeros] = np.where(np.signbit(got[zeros]) == np.signbit(rounded[zeros]), 0.0, np.inf)
    # A subnormal result flushed to a zero of its sign.
    flushed = (got == 0) & (np.abs(want) < float(info.tiny)) & (np.signbit(got) == np.signbit(want))
    err[flushed] = 0.0
    return err


def _mp_ulps(got, args, reference):
    # Special results (NaN, infinities, zeros and their signs) are IEEE's,
    # which NumPy's float64 functions give and mpmath's numbers lack.
    special = _float_reference(args, reference)
    if any(a == 0 or math.isinf(a) or math.isnan(a) for a in args) and \
            not (math.isnan(special) or math.isinf(special) or special == 0):
        # mpmath has no signed zeros; IEEE's answers at zeros and infinities
        # (atan2(0, -0) = pi) are NumPy's, correctly rounded.
        if math.isnan(got) or math.isinf(got):
            return math.inf
        return abs(got - special) / max(math.ulp(abs(special)), 5e-324)
    if math.isnan(special) or math.isinf(special) or special == 0:
        if math.isnan(special):
            return 0.0 if math.isnan(got) else math.inf
        same = got == special and math.copysign(1, got) == math.copysign(1, special)
        return 0.0 if same else math.inf
    if math.isnan(got) or math.isinf(got):
        return math.inf
    exact = reference(*[mp.mpf(a) for a in args])
    rounded = float(exact)
    if math.isinf(rounded):
        return 0.0 if got == rounded else math.inf
    ulp = max(math.ulp(abs(rounded)), 5e-324)
    return float(abs(mp.mpf(got) - exact) / ulp)


def _float_reference(args, reference):
    """The reference at NaN or infinite arguments, from NumPy's float64."""
    with np.errstate(all="ignore"):
        for name, (_, numpy_ref, mp_ref, *_rest) in FUNCTIONS.items():
            if mp_ref is reference:
                if numpy_ref is not None:
                    # Arrays: NumPy's scalar power takes sqrt for y = 0.5,
                    # which keeps -0's sign where C's pow does not.
                    return float(numpy_ref(*[np.array([a], np.float64) for a in args])[0])
                return getattr(math, name)(*args)
    raise KeyError(reference)


def worst(name, dtype, n, seed=1, domain=None):
    """``(error, inputs, result, count)``: the worst error in ULPs over ``n``
    random inputs (magnitudes within ``domain``'s exponents of 2 if given)
    and the edges."""
    columns = inputs(name, dtype, n, seed, domain)
    got = run(name, dtype, columns)
    e = errors(name, dtype, columns, got)
    k = int(np.argmax(e))
    return float(e[k]), tuple(float(c[k]) for c in columns), float(got[k]), got.size


def bound(name, dtype):
    """The worst error allowed for ``name`` in ``dtype``, in ULPs."""
    if name in CORRECTLY_ROUNDED:
        return 0.5
    return 4 if dtype == np.float32 else 2


def exhaustive_sqrt(chunk=1 << 26):
    """Mismatches of float32 ``math.sqrt`` against the correctly rounded root
    over every float32 bit pattern but the subnormal ones (``--exhaustive-sqrt``)."""
    kernel_ = kernel("sqrt", np.float32)
    mismatches = 0
    for start in range(0, 1 << 32, chunk):
        x = np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32).view(np.float32)
        out = np.empty_like(x)
        kernel_[(x.size + 255) // 256, 256](x, x, out)
        with np.errstate(all="ignore"):
            want = np.sqrt(x.astype(np.float64)).astype(np.float32)
        same = (out.view(np.uint32) == want.view(np.uint32)) | (np.isnan(out) & np.isnan(want))
        # Subnormal inputs, which a device may flush (their roots are normal).
        subnormal = (np.abs(x) < np.finfo(np.float32).tiny) & (x != 0)
        mismatches += int((~same & ~subnormal).sum())
    return mismatches


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--n", type=int, default=1 << 20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--domain", type=float, nargs=2, metavar=("LO", "HI"),
                        help="sample magnitudes 2**LO to 2**HI only")
    parser.add_argument("--exhaustive-sqrt", action="store_true",
                        help="also check float32 sqrt on every input")
    args = parser.parse_args(argv)
    names = args.names or [f"{f}_{w}" for f in FUNCTIONS for w in ("f32", "f64")]
    failed = False
    for full in names:
        name, width = full.rsplit("_", 1)
        dtype = np.float32 if width == "f32" else np.float64
        n = args.n if dtype == np.float32 else max(args.n // 64, 1000)
        e, where, got, count = worst(name, dtype, n, args.seed, args.domain)
        print(f"{full:12s} worst {e:8.3f} ULP at {where} -> {got!r} ({count} inputs)",
              flush=True)
        failed |= e > bound(name, dtype)
    if args.exhaustive_sqrt:
        wrong = exhaustive_sqrt()
        print(f"sqrt_f32 exhaustive: {wrong} of the 2**32 - 2**24 + 2 inputs that are not "
              "subnormal not correctly rounded", flush=True)
        failed |= wrong > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
