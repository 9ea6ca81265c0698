"""float32 sin, cos, tan, atan and atan2 of the math library
(codegen/mathlib/trig32): errors against float64 references, on the device
over each function's whole domain and where reduction is hardest, and on the
host with every approximate division off as far as Vulkan allows; numpy's
special values, signed zeros included."""


import llvmlite.binding as llvm
import numpy as np
import pytest

from numba_vulkan.codegen import mathlib
from numba_vulkan.codegen.mathlib import trig32
from tests.codegen.mathlib import accuracy
from tests.codegen.test_libclc_divisions import HostFunction, _combinations

#: Worst errors allowed, in ULPs: what was measured (4M inputs a function on
#: the H200 and lavapipe, their worst 1.5 to 2.7), rounded up; sin, cos and
#: tan on their fast path (libclc's beyond it: 4, the documented bound).
BOUNDS = {"sin": 2, "cos": 2, "tan": 3, "atan": 2, "atan2": 2}
SLOW_BOUND = 4
#: Magnitudes (exponents of 2) where sin, cos and tan reduce by Cody-Waite.
FAST = (-30, 20)
N = 1 << 16

MANGLED = {"sin": "_Z3sinf", "cos": "_Z3cosf", "tan": "_Z3tanf", "atan": "_Z4atanf",
           "atan2": "_Z5atan2ff"}


def _near_multiples_of_half_pi(count, rng):
    """The float32 values either side of ``k pi/2`` for random ``k`` up to
    :data:`trig32.REDUCTION_LIMIT`: the reduced argument cancels most there."""
    k = rng.integers(1, int(trig32.REDUCTION_LIMIT / (np.pi / 2)), count)
    x = (k * (np.pi / 2)).astype(np.float32)
    up = np.nextafter(x, np.float32(np.inf))
    down = np.nextafter(x, np.float32(0))
    return np.concatenate([x, up, down, -x])


def _limit_neighbours():
    """Arguments around :data:`trig32.REDUCTION_LIMIT`, either path."""
    limit = np.float32(trig32.REDUCTION_LIMIT)
    steps = np.arange(-8, 9)
    x = (limit.view(np.int32) + steps).astype(np.int32).view(np.float32)
    return np.concatenate([x, -x])


def _columns(name, rng):
    """The whole domain, the fast path's, and for the periodic functions
    the arguments nearest multiples of pi/2 and around the slow path's limit."""
    parts = [accuracy.inputs(name, np.float32, N, 1),
             accuracy.inputs(name, np.float32, N, 2, FAST)]
    if name in ("sin", "cos", "tan"):
        parts.append([np.concatenate([_near_multiples_of_half_pi(N // 4, rng),
                                      _limit_neighbours()])])
    return [np.concatenate(c) for c in zip(*parts)]


@pytest.mark.parametrize("name", list(BOUNDS))
def test_errors_on_the_device(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    columns = _columns(name, rng)
    got = accuracy.run(name, np.float32, columns)
    errors = accuracy.errors(name, np.float32, columns, got)
    slow = (np.abs(columns[0]) >= trig32.REDUCTION_LIMIT) & (name in ("sin", "cos", "tan"))
    for part, bound in ((~slow, BOUNDS[name]), (slow, SLOW_BOUND)):
        e = np.where(part, errors, 0.0)
        k = int(np.argmax(e))
        where = tuple(float(c[k]) for c in columns)
        assert e[k] <= bound, f"{name}{where} = {got[k]!r}: {e[k]:g} ULP"


def test_atan2_special_values_are_numpys():
    values = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-45, -3e38],
                      np.float32)
    y, x = (a.ravel() for a in np.meshgrid(values, values))
    got = accuracy.run("atan2", np.float32, [y, x])
    want = np.arctan2(y.astype(np.float64), x.astype(np.float64)).astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    same = ~np.isnan(want)
    assert np.array_equal(got[same], want[same])
    assert np.array_equal(np.signbit(got[same]), np.signbit(want[same]))


def test_signs_of_zero_infinities_and_subnormals():
    # Subnormals come back as they are where the functions are x to float32
    # precision, also on devices that flush arithmetic's (the H200's).
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-45], np.float32)
    for name, want in (("sin", [0.0, -0.0, np.nan, np.nan, np.nan, 1e-40, -1e-45]),
                       ("cos", [1.0, 1.0, np.nan, np.nan, np.nan, 1.0, 1.0]),
                       ("tan", [0.0, -0.0, np.nan, np.nan, np.nan, 1e-40, -1e-45]),
                       ("atan", [0.0, -0.0, np.pi / 2, -np.pi / 2, np.nan, 1e-40, -1e-45])):
        got = accuracy.run(name, np.float32, [x])
        want = np.array(want, np.float32)
        assert np.array_equal(got, want, equal_nan=True), name
        assert np.array_equal(np.signbit(got), np.signbit(want)), name


def _on_the_host(name):
    """The library's function compiled for the host, each approximate
    division moved by ``deltas`` steps of 2 ULP (Vulkan allows 2.5); the
    slow path's libclc call is a stub, as only the fast path divides."""
    text, calls = mathlib.module(frozenset({MANGLED[name]}))
    for call in calls:
        declared = f"declare float @{call}(float %.1)"
        assert declared in text
        text = text.replace(declared, f"define float @{call}(float %x) {{\n  ret float %x\n}}")
    return HostFunction(f'"{mathlib.symbol(MANGLED[name])}"', 2 if name == "atan2" else 1, text)


@pytest.mark.parametrize("name", ["tan", "atan", "atan2"])
def test_errors_with_the_drivers_division(name):
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    function = _on_the_host(name)
    assert function.sites
    rng = np.random.default_rng(7)
    columns = _columns(name, rng)
    if name == "tan":
        fast = np.abs(columns[0]) < trig32.REDUCTION_LIMIT
        columns = [c[fast] for c in columns]
    worst, where = 0.0, None
    for deltas in _combinations(function.sites, rng):
        got = function(columns[0], columns[-1], deltas)
        errors = accuracy.errors(name, np.float32, columns, got)
        k = int(np.argmax(errors))
        if errors[k] > worst:
            worst, where = errors[k], (tuple(float(c[k]) for c in columns), deltas)
    assert worst <= BOUNDS[name], f"{name}{where[0]} with divisions off by {where[1]}: {worst:g}"
