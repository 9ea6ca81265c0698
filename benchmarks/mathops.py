"""Math function throughput (issue 23's ``math`` family): one operation applied
64 times per element, float32 and float64, in numba.cuda's spelling.

Each kernel iterates ``y = f(y, x)`` 64 times on its own element, a map
chosen so that ``y`` stays in the function's ordinary domain (no overflow to
infinity, no NaN, no fast path for huge arguments): what is timed is the
function's general path, as user code exercises it. Besides ``f`` each
iteration costs at most one add. The element's result is checked against
the same iteration in float64 (NumPy, sampled elements; an exact int64
one for ``// 9``).
"""

import math

import numpy as np

from benchmarks.suite import _pow2
from benchmarks.users import UserBenchmark, _sample

#: Iterations of the operation per element.
STEPS = 64

#: name: (kernel statement, NumPy reference of one step, x's range, y's start).
OPS = {
    "div": ("y = x / y", lambda y, x: x / y, (0.5, 2.0), "x + x"),
    "sqrt": ("y = math.sqrt(y + x)", lambda y, x: np.sqrt(y + x), (0.0, 4.0), "x"),
    "exp": ("y = math.exp(-y)", lambda y, x: np.exp(-y), (-2.0, 2.0), "x"),
    "log": ("y = math.log(y + x)", lambda y, x: np.log(y + x), (1.0, 4.0), "x"),
    "erf": ("y = math.erf(y + x)", lambda y, x: _erf(y + x), (-1.0, 1.0), "x"),
    "sin": ("y = math.sin(y + x)", lambda y, x: np.sin(y + x), (-3.0, 3.0), "x"),
    "cos": ("y = math.cos(y + x)", lambda y, x: np.cos(y + x), (-3.0, 3.0), "x"),
    "pow": ("y = math.pow(x, y)", lambda y, x: np.power(x, y), (0.5, 1.4), "x"),
    "tanh": ("y = math.tanh(y + x)", lambda y, x: np.tanh(y + x), (-2.0, 2.0), "x"),
    "atan2": ("y = math.atan2(y, x)", lambda y, x: np.arctan2(y, x), (0.5, 1.5), "x"),
    "idiv9": ("y = y // 9 + x", lambda y, x: y // 9 + x, (1, 2 ** 40), "x"),
}

SOURCE = """
def {name}(xs, out):
    i = cuda.grid(1)
    if i < xs.shape[0]:
        x = xs[i]
        y = {start}
        for _ in range({steps}):
            {statement}
        out[i] = y
"""


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


class MathOp(UserBenchmark):
    """One function's throughput on ``real`` (int64 for ``idiv9``)."""

    family = "math"
    written = ("out",)

    def __init__(self, op, real):
        self.op = op
        statement, self.step, self.domain, start = OPS[op]
        name = f"{op}_{'i64' if op == 'idiv9' else real.replace('float', 'f')}"
        source = SOURCE.format(name=name, start=start, steps=STEPS, statement=statement)
        super().__init__(name, "compute", source, 1,
                         {"full": 2 ** 22, "quick": 2 ** 16, "tiny": 1000}, real=real)

    def describe(self, size):
        return f"{_pow2(size)} {self.real}, {STEPS} x {self.op}"

    def inputs(self, size, rng):
        lo, hi = self.domain
        if self.real == "int64":
            x = rng.integers(lo, hi, size, dtype=np.int64)
        else:
            x = rng.uniform(lo, hi, size).astype(self.real)
        return {"xs": x, "out": np.zeros(size, x.dtype)}

    def check(self, inputs, results):
        k = _sample(inputs["xs"].shape[0])
        x = inputs["xs"][k]
        if self.real == "int64":
            y = x + x if OPS[self.op][3] == "x + x" else x.copy()
            for _ in range(STEPS):
                y = self.step(y, x)
            np.testing.assert_array_equal(results["out"][k], y)
            return
        x = x.astype(np.float64)
        y = eval(OPS[self.op][3], {"x": x})
        for _ in range(STEPS):
            y = self.step(y, x)
        # 64 rounded steps of a map that does not grow errors.
        rtol, atol = (2e-4, 2e-5) if self.real == "float32" else (1e-11, 1e-12)
        np.testing.assert_allclose(results["out"][k], y, rtol=rtol, atol=atol,
                                   err_msg=self.name)

    def work(self, size, inputs, results):
        return {"bytes": 2 * np.dtype(self.real).itemsize * size, "flops": STEPS * size}


BENCHMARKS = [MathOp(op, real) for op in OPS if op != "idiv9"
              for real in ("float32", "float64")] + [MathOp("idiv9", "int64")]
