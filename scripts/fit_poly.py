"""Fit the polynomial kernels of numba_vulkan's math library (codegen/mathlib).

A near-minimax fit by Lawson's iteration (least squares, reweighted by the
error) in mpmath's precision, with the coefficients rounded to the target
type one at a time, each later one refitted to absorb the rounding of those
before it. Prints the coefficients as Python literals and the worst
relative (or absolute) error of the rounded polynomial on the interval.

Example, ``exp(r) = 1 + r + r**2 q(r)`` on ``|r| <= ln2/2`` for float32::

    python scripts/fit_poly.py --function "(exp(x) - 1 - x) / x**2" \
        --interval -0.3466 0.3466 --degree 4 --type float32

The function is an mpmath expression of ``x``; removable singularities at 0
are handled by evaluating at ``x`` nudged by 1e-30.
"""

import argparse
import struct

import mpmath as mp


def _round(value, ty):
    if ty == "float32":
        return struct.unpack("<f", struct.pack("<f", float(value)))[0]
    return float(value)


def _evaluate(expression, x):
    if x == 0:
        x = mp.mpf("1e-30")
    return eval(expression, {**{k: getattr(mp, k) for k in dir(mp) if not k.startswith("_")},
                             "x": x})


def fit(expression, lo, hi, degree, ty, relative=True, powers=None, points=400, rounds=30):
    """Coefficients of ``powers`` (0..degree by default) and the worst error."""
    mp.mp.dps = 80
    powers = powers or list(range(degree + 1))
    xs = [mp.mpf(lo) + (mp.mpf(hi) - mp.mpf(lo)) * (1 - mp.cos(mp.pi * (k + 0.5) / points)) / 2
          for k in range(points)]
    fs = [_evaluate(expression, x) for x in xs]
    scale = [1 / abs(f) if relative and f != 0 else mp.mpf(1) for f in fs]
    fixed = []
    for position in range(len(powers)):
        free = powers[position:]
        target = [f - sum(c * x ** p for c, p in zip(fixed, powers)) for f, x in zip(fs, xs)]
        weights = [mp.mpf(1)] * points
        for _ in range(rounds):
            a = mp.matrix([[w * s * x ** p for p in free] for x, s, w in zip(xs, scale, weights)])
            b = mp.matrix([w * s * t for t, s, w in zip(target, scale, weights)])
            coefficients = mp.lu_solve(a.T * a, a.T * b)
            errors = [abs(s * (t - sum(coefficients[j] * x ** p for j, p in enumerate(free))))
                      for x, s, t in zip(xs, scale, target)]
            total = sum(w * e for w, e in zip(weights, errors))
            weights = [w * e / total for w, e in zip(weights, errors)]
        fixed.append(mp.mpf(_round(coefficients[0], ty)))
    check = [lo + (hi - lo) * k / 20000 for k in range(20001)]
    worst = 0
    for x in check:
        x = mp.mpf(x)
        f = _evaluate(expression, x)
        p = sum(c * x ** q for c, q in zip(fixed, powers))
        e = abs(p - f) / (abs(f) if relative and f != 0 else 1)
        worst = max(worst, e)
    return [float(c) for c in fixed], float(worst)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--function", required=True)
    parser.add_argument("--interval", nargs=2, type=float, required=True)
    parser.add_argument("--degree", type=int, required=True)
    parser.add_argument("--powers", type=int, nargs="*", help="powers to fit (default 0..degree)")
    parser.add_argument("--type", choices=("float32", "float64"), default="float32")
    parser.add_argument("--absolute", action="store_true", help="minimise the absolute error")
    args = parser.parse_args(argv)
    coefficients, worst = fit(args.function, *args.interval, args.degree, args.type,
                              relative=not args.absolute, powers=args.powers)
    print("coefficients = (" + ", ".join(repr(c) for c in coefficients) + ")")
    print(f"worst {'absolute' if args.absolute else 'relative'} error {worst:.3g}")


if __name__ == "__main__":
    main()
