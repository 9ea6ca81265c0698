"""libclc's own float32 divisions and square roots are left to the driver
(codegen/libclc_link.mark_own_divisions, legalize.exact_float32): each
function so treated stays within 4 ULP when every such division is off as
far as Vulkan allows, simulated on the host; the kernel's own divisions stay
correctly rounded."""

import ctypes
import itertools
import math

import llvmlite.binding as llvm
import numpy as np
import pytest

import numba_vulkan as nv
import tests.frontend.test_math as math_tests
from numba_vulkan.codegen import libclc, libclc_link
from numba_vulkan.spirv import binary as spirv
from numba_vulkan.spirv import opcodes
from tests.helpers import compiled_kernels

#: ULPs a perturbed operation is moved from the correctly rounded result:
#: with its own rounding, division 2.5 ULP (Vulkan's bound) and square roots 3.5.
STEPS = {"fdiv": 2, "sqrt": 3}
SITES = 64


def _perturbed(text):
    """``text`` with each marked operation's result moved by ``delta[k] *
    STEPS`` ULPs (k counts the operations), where the result is a finite
    normal number that stays one; and the number of operations."""
    out, k = [], 0
    for line in text.splitlines():
        if libclc_link.OWN not in line:
            out.append(line)
            continue
        line = line[:line.index(", " + libclc_link.OWN)]
        name, expr = line.strip().split(" = ", 1)
        step = STEPS["sqrt" if "@llvm.sqrt" in expr else "fdiv"]
        v = f"%nv.p{k}"
        out += [f"  {v}.x = {expr}",
                f"  {v}.b = bitcast float {v}.x to i32",
                f"  {v}.e = and i32 {v}.b, 2139095040",
                f"  {v}.lo = icmp ne i32 {v}.e, 0",
                f"  {v}.hi = icmp ult i32 {v}.e, 2130706432",
                f"  {v}.ok = and i1 {v}.lo, {v}.hi",
                f"  {v}.p = getelementptr [{SITES} x i32], ptr @nv.delta, i64 0, i64 {k}",
                f"  {v}.d = load i32, ptr {v}.p",
                f"  {v}.s = mul i32 {v}.d, {step}",
                f"  {v}.z = select i1 {v}.ok, i32 {v}.s, i32 0",
                f"  {v}.y = add i32 {v}.b, {v}.z",
                f"  {name} = bitcast i32 {v}.y to float"]
        k += 1
    return "\n".join(out) + f"\n@nv.delta = global [{SITES} x i32] zeroinitializer\n", k


_LOOP = """
define void @run(ptr %pa, ptr %pb, ptr %po, i64 %n) {{
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %qa = getelementptr float, ptr %pa, i64 %i
  %a = load float, ptr %qa
  %qb = getelementptr float, ptr %pb, i64 %i
  %b = load float, ptr %qb
  %r = call float @{name}({args})
  %qo = getelementptr float, ptr %po, i64 %i
  store float %r, ptr %qo
  %next = add i64 %i, 1
  %more = icmp ult i64 %next, %n
  br i1 %more, label %loop, label %exit
exit:
  ret void
}}
"""


class HostFunction:
    """A libclc float32 function (or the float32 function ``name`` that
    ``text`` defines) compiled for the host with its marked operations
    perturbed by :attr:`delta`."""

    def __init__(self, name, arity, text=None):
        if text is None:
            text = libclc_link.mark_own_divisions(libclc.library().module([name]))
        text, self.sites = _perturbed(text)
        text += _LOOP.format(name=name, args=", ".join(["float %a", "float %b"][:arity]))
        module = llvm.parse_assembly(text)
        module.verify()
        machine = llvm.Target.from_default_triple().create_target_machine(opt=0)
        self.engine = llvm.create_mcjit_compiler(module, machine)
        self.engine.finalize_object()
        kind = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_int64)
        self._run = kind(self.engine.get_function_address("run"))
        self.delta = (ctypes.c_int32 * SITES).from_address(
            self.engine.get_global_value_address("nv.delta"))

    def __call__(self, a, b, deltas):
        for k in range(SITES):
            self.delta[k] = deltas[k] if k < len(deltas) else 0
        a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
        out = np.empty_like(a)
        self._run(a.ctypes.data, b.ctypes.data, out.ctypes.data, a.size)
        return out


def _vectorized(f):
    return np.vectorize(f, otypes=[np.float64])


#: libclc's float32 functions with marked operations (all unary): float64
#: reference, core range of the samples (as tests/frontend/test_math.py's).
FUNCTIONS = {
    "erf": (_vectorized(math.erf), (-5, 5)), "exp": (np.exp, (-100, 100)),
    "log": (np.log, (0, 100)), "acos": (np.arccos, (-1, 1)), "asin": (np.arcsin, (-1, 1)),
    "atan": (np.arctan, (-10, 10)), "cosh": (np.cosh, (-90, 90)),
    "exp2": (np.exp2, (-130, 130)), "log2": (np.log2, (0, 100)), "sinh": (np.sinh, (-90, 90)),
    "tanh": (np.tanh, (-10, 10)), "asinh": (np.arcsinh, (-100, 100)),
    "atanh": (np.arctanh, (-1, 1)), "log10": (np.log10, (0, 100)),
    "log1p": (np.log1p, (-1, 10)),
}
#: Core-range samples besides test_math's, for a wider search.
SAMPLES = 30000


def _combinations(sites, rng):
    """Every site off by -1, 0 or +1 steps where there are few; else each
    alone, all together and random mixes."""
    if 3 ** sites <= 243:
        return list(itertools.product((-1, 0, 1), repeat=sites))
    singles = [tuple(v if j == k else 0 for j in range(sites)) for k in range(sites)
               for v in (-1, 1)]
    return singles + [(1,) * sites, (-1,) * sites] + [
        tuple(int(x) for x in rng.integers(-1, 2, sites)) for _ in range(40)]


@pytest.fixture(scope="module")
def host():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def _marked_functions(text):
    """Names of the functions of a module ``text`` with marked operations."""
    names, current = set(), None
    for line in text.splitlines():
        if line.startswith("define "):
            current = line.split("@", 1)[1].split("(", 1)[0]
        elif libclc_link.OWN in line:
            names.add(current)
    return names


def test_every_float32_function_with_marked_operations_is_simulated():
    lib = libclc.library()
    marked = set()
    for name in sorted(libclc.ENTRY_POINTS):
        if lib.defines(name):
            marked |= _marked_functions(libclc_link.mark_own_divisions(lib.module([name])))
    assert marked == {libclc.mangled(n, "f") for n in FUNCTIONS}


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_within_4_ulp_with_the_drivers_division(host, name):
    reference, (lo, hi) = FUNCTIONS[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    function = HostFunction(libclc.mangled(name, "f"), 1)
    assert function.sites
    x = np.concatenate([math_tests._samples(rng, np.float32, lo, hi),
                        rng.uniform(lo, hi, SAMPLES).astype(np.float32)])
    with np.errstate(all="ignore"):
        want = reference(x.astype(np.float64)).astype(np.float32)
    zeros = np.zeros_like(x)
    assert math_tests.ulp_error(function(x, zeros, ()), want).max() <= 4
    worst, where = 0.0, None
    for deltas in _combinations(function.sites, rng):
        error = math_tests.ulp_error(function(x, zeros, deltas), want)
        k = int(np.argmax(error))
        if error[k] > worst:
            worst, where = error[k], (x[k], deltas)
    assert worst <= math_tests.TOLERANCE["float32"], (
        f"{name}({where[0]!r}) with divisions off by {where[1]} steps: {worst:g} ULP")


def test_exact_functions_keep_their_operations_unmarked():
    for name in libclc_link.EXACT_OWN:
        text = libclc.library().module([name]) if libclc.library().defines(name) else ""
        assert libclc_link.OWN not in libclc_link.mark_own_divisions(text)


@nv.jit
def _erf_and_divide(x, y, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        out[0, i] = math.erf(x[i])
        out[1, i] = x[i] / y[i]


def _float64_operations(compiled):
    _, instructions = spirv.parse(compiled.spirv)
    double = {inst[1] for inst in instructions
              if spirv.opcode(inst) == opcodes.OpTypeFloat and inst[2] == 64}
    return sum(1 for inst in instructions if spirv.opcode(inst) == opcodes.OpFDiv
               and inst[1] in double)


def test_the_kernels_division_stays_correctly_rounded(rng):
    # erf's five divisions are left to the driver; the kernel's one is
    # computed in float64 (one float64 division), and exactly.
    x = rng.uniform(-3, 3, 512).astype(np.float32)
    y = rng.uniform(0.5, 3, 512).astype(np.float32)
    out = np.zeros((2, 512), np.float32)
    _erf_and_divide.forall(512)(x, y, out)
    np.testing.assert_array_equal(out[1], (x.astype(np.float64) / y).astype(np.float32))
    erf = np.vectorize(math.erf)(x.astype(np.float64)).astype(np.float32)
    assert math_tests.ulp_error(out[0], erf).max() <= 4
    (compiled,) = compiled_kernels(_erf_and_divide)
    assert _float64_operations(compiled) == 1
