"""Kernels with more arguments than the push constant block holds: the rest
travel in the argument buffer (numba_vulkan.base.abi), on every device.

Many-argument stencil and CFD kernels against NumPy, back-to-back launches
that differ only in spilled scalars, the layout itself, and compiling for an
explicit target's push constant size rather than the device's.
"""

import struct

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.base import abi
from numba_vulkan.base import signature
from numba_vulkan.runtime.device import current_device
from numba_vulkan.runtime.timing import KernelTimer
from numba_vulkan.base.target import TargetDescription
from tests.helpers import assert_valid_spirv, compiled_kernels

SIX_2D = "void(" + ", ".join(["float32[:, ::1]"] * 6) + ")"


@nv.jit
def advect(u, v, p, rhs, u_new, v_new):
    """One explicit step of a 2-d advection with a pressure gradient: six 2-d
    arrays, 136 bytes of arguments with the header."""
    i, j = nv.global_id(0), nv.global_id(1)
    n, m = u.shape
    if 0 < i < n - 1 and 0 < j < m - 1:
        dpdx = p[i + 1, j] - p[i - 1, j]
        dpdy = p[i, j + 1] - p[i, j - 1]
        u_new[i, j] = u[i, j] - (u[i, j] * (u[i + 1, j] - u[i - 1, j])
                                 + v[i, j] * (u[i, j + 1] - u[i, j - 1])) - dpdx + rhs[i, j]
        v_new[i, j] = v[i, j] - (u[i, j] * (v[i + 1, j] - v[i - 1, j])
                                 + v[i, j] * (v[i, j + 1] - v[i, j - 1])) - dpdy + rhs[i, j]


def advect_reference(u, v, p, rhs, u_new, v_new):
    c = (slice(1, -1), slice(1, -1))
    east, west = (slice(2, None), slice(1, -1)), (slice(None, -2), slice(1, -1))
    north, south = (slice(1, -1), slice(2, None)), (slice(1, -1), slice(None, -2))
    u_new[c] = (u[c] - (u[c] * (u[east] - u[west]) + v[c] * (u[north] - u[south]))
                - (p[east] - p[west]) + rhs[c])
    v_new[c] = (v[c] - (u[c] * (v[east] - v[west]) + v[c] * (v[north] - v[south]))
                - (p[north] - p[south]) + rhs[c])


@nv.jit
def cfd_step(u, v, p, rho, temp, mask, u_out, v_out, p_out, temp_out, res, src,
             dt, dx, nu, kappa, step, wall, scale, gain, heat):
    """A many-argument CFD update: twelve 2-d arrays of three dtypes (one a
    strided view) and scalars of every width, all past the push block."""
    i, j = nv.global_id(0), nv.global_id(1)
    n, m = u.shape
    if i >= n or j >= m:
        return
    if i == 0 or j == 0 or i == n - 1 or j == m - 1 or mask[i, j] == 0:
        u_out[i, j] = wall
        v_out[i, j] = wall
        p_out[i, j] = p[i, j]
        temp_out[i, j] = temp[i, j]
        res[i, j] = 0.0
        return
    inv = 1.0 / (dx * dx)
    lap_u = (u[i + 1, j] + u[i - 1, j] + u[i, j + 1] + u[i, j - 1] - 4.0 * u[i, j]) * inv
    lap_v = (v[i + 1, j] + v[i - 1, j] + v[i, j + 1] + v[i, j - 1] - 4.0 * v[i, j]) * inv
    lap_t = (temp[i + 1, j] + temp[i - 1, j] + temp[i, j + 1] + temp[i, j - 1]
             - 4.0 * temp[i, j]) * inv
    du = dt * (nu * lap_u - (p[i + 1, j] - p[i - 1, j]) / rho[i, j] + gain.real * src[i, j])
    dv = dt * (nu * lap_v - (p[i, j + 1] - p[i, j - 1]) / rho[i, j] + gain.imag * src[i, j])
    u_out[i, j] = u[i, j] + du
    v_out[i, j] = v[i, j] + dv
    p_out[i, j] = p[i, j] - dt * scale * (u[i + 1, j] - u[i - 1, j] + v[i, j + 1] - v[i, j - 1])
    t = temp[i, j] + dt * kappa * lap_t
    if heat:
        t += dt * step
    temp_out[i, j] = t
    res[i, j] = abs(du) + abs(dv)


def cfd_reference(u, v, p, rho, temp, mask, u_out, v_out, p_out, temp_out, res, src,
                  dt, dx, nu, kappa, step, wall, scale, gain, heat):
    c = (slice(1, -1), slice(1, -1))
    e, w = (slice(2, None), slice(1, -1)), (slice(None, -2), slice(1, -1))
    no, so = (slice(1, -1), slice(2, None)), (slice(1, -1), slice(None, -2))
    t64 = temp.astype(np.float64)
    inv = 1.0 / (np.float64(dx) * np.float64(dx))
    lap_u = (u[e] + u[w] + u[no] + u[so] - 4.0 * u[c]) * inv
    lap_v = (v[e] + v[w] + v[no] + v[so] - 4.0 * v[c]) * inv
    lap_t = (t64[e] + t64[w] + t64[no] + t64[so] - 4.0 * t64[c]) * inv
    du = dt * (nu * lap_u - (p[e] - p[w]) / rho[c] + gain.real * src[c])
    dv = dt * (nu * lap_v - (p[no] - p[so]) / rho[c] + gain.imag * src[c])
    inner = np.zeros(u.shape, bool)
    inner[c] = mask[c] != 0
    u_out[...] = np.where(inner, np.pad(u[c] + du, 1), wall)
    v_out[...] = np.where(inner, np.pad(v[c] + dv, 1), wall)
    p_new = p[c] - dt * int(scale) * (u[e] - u[w] + v[no] - v[so])
    p_out[...] = np.where(inner, np.pad(p_new, 1), p)
    t = t64[c] + dt * np.float64(kappa) * lap_t + (dt * step if heat else 0.0)
    temp_out[...] = np.where(inner, np.pad(t, 1), t64).astype(np.float32)
    res[...] = np.where(inner, np.pad(np.abs(du) + np.abs(dv), 1), 0.0)


def cfd_inputs(rng, n, m):
    fields = [rng.standard_normal((n, m)) for _ in range(3)]
    rho = 1.0 + rng.random((n, m))
    temp = rng.random((n, m), dtype=np.float32)
    mask = (rng.random((n, m)) > 0.1).astype(np.int32)
    outs = [np.full((n, m), np.nan) for _ in range(3)]
    temp_out = np.full((n, m), np.nan, np.float32)
    res = np.full((n, m), np.nan)
    # A strided view: its shape, strides and offset travel in the argument buffer.
    src = rng.standard_normal((2 * n, 2 * m + 1))[1::2, 1::2]
    scalars = (np.float64(0.01), np.float32(0.5), np.float64(0.1), np.float32(0.25),
               np.int64(3), np.float64(-2.0), np.uint8(7), np.complex128(0.5 - 1.5j), True)
    return [*fields, rho, temp, mask, *outs, temp_out, res, src], scalars


def test_six_2d_arrays_fit_no_device_minimum_and_run(rng):
    n, m = 37, 29
    arrays = [rng.random((n, m), dtype=np.float32) for _ in range(4)]
    arrays += [np.zeros((n, m), np.float32), np.zeros((n, m), np.float32)]
    expected = [a.copy() for a in arrays]
    advect_reference(*expected)
    advect[((n + 7) // 8, (m + 7) // 8), (8, 8)](*arrays)
    for got, want in zip(arrays[4:], expected[4:]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    compiled = compiled_kernels(advect)[0]
    # On a 128-byte device the sixth array spills; a 256-byte one takes all six.
    device_push = current_device().target.max_push_constants
    assert any(p.spilled for p in compiled.params) == (device_push < 136)
    assert compiled.push_size <= device_push


def test_twelve_2d_arrays_and_scalars_cfd_step(rng):
    n, m = 45, 33
    arrays, scalars = cfd_inputs(rng, n, m)
    expected = [a.copy() for a in arrays]
    cfd_reference(*expected, *scalars)
    cfd_step[((n + 7) // 8, (m + 7) // 8), (8, 8)](*arrays, *scalars)
    for got, want in zip(arrays[6:11], expected[6:11]):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    compiled = compiled_kernels(cfd_step)[0]
    spilled = [p.name for p in compiled.params if p.spilled]
    # Header and twelve 2-d arrays take 256 bytes: every scalar spills everywhere.
    assert spilled[-9:] == ["dt", "dx", "nu", "kappa", "step", "wall", "scale", "gain", "heat"]
    assert compiled.params[-1].kind == "args"


@nv.jit
def stamp(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, out, row, value, scale):
    """Twelve 2-d arrays fill even a 256-byte block: the scalars spill everywhere."""
    j = nv.global_id(0)
    if j < out.shape[1]:
        acc = 0.0
        for i in range(a0.shape[0]):
            acc += (a0[i, j] - a1[i, j] + a2[i, j] * a3[i, j] - a4[i, j] * a5[i, j]
                    + a6[i, j] - a7[i, j] + a8[i, j] - a9[i, j] * a10[i, j])
        out[row, j] = acc * scale + value


def stamp_reference(inputs):
    a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10 = inputs
    return (a0 - a1 + a2 * a3 - a4 * a5 + a6 - a7 + a8 - a9 * a10).sum(axis=0)


def test_back_to_back_launches_with_other_spilled_scalars_keep_their_own(rng):
    """Forty launches that differ only in scalars in the argument buffer, none
    waited for: each must see its own values, also past the 32 recorded
    launches a pipeline keeps."""
    n, m, launches = 48, 256, 40
    inputs = [rng.standard_normal((n, m)) for _ in range(11)]
    big = [nv.to_device(a) for a in inputs]
    out = nv.to_device(np.zeros((launches, m)))

    for k in range(launches):
        stamp[m // 64, 64](*big, out, np.int64(k), np.float64(1.5 * k - 7), np.float32(k % 5))
    got = out.copy_to_host()
    acc = stamp_reference(inputs)
    for k in range(launches):
        np.testing.assert_allclose(got[k], acc * (k % 5) + 1.5 * k - 7, rtol=1e-10, atol=1e-10)
    # The same arguments again reuse recorded launches, and still compute afresh.
    big[0].copy_to_device(2 * inputs[0])
    for k in range(launches - 8, launches):
        stamp[m // 64, 64](*big, out, np.int64(k), np.float64(1.5 * k - 7), np.float32(k % 5))
    got = out.copy_to_host()
    acc2 = stamp_reference([2 * inputs[0]] + inputs[1:])
    for k in range(launches):
        want = (acc2 if k >= launches - 8 else acc) * (k % 5) + 1.5 * k - 7
        np.testing.assert_allclose(got[k], want, rtol=1e-10, atol=1e-10)
    compiled = compiled_kernels(stamp)[0]
    assert [p.name for p in compiled.params if p.spilled][-3:] == ["row", "value", "scale"]
    wide = stamp.compile(compiled.signature, threads=(64, 1, 1),
                         target=TargetDescription(max_push_constants=256))
    assert [p.name for p in wide.params if p.spilled] == ["row", "value", "scale"]


def test_timed_launches_of_a_spilled_kernel(rng):
    inputs = [rng.standard_normal((3, 64)) for _ in range(11)]
    out = nv.to_device(np.zeros((4, 64)))
    arrays = [nv.to_device(a) for a in inputs]
    with KernelTimer(capacity=2) as timer:
        for k in range(4):
            stamp[1, 64](*arrays, out, np.int64(k), np.float64(k), np.float32(2))
    nv.synchronize()
    acc = stamp_reference(inputs)
    np.testing.assert_allclose(out.copy_to_host(), 2 * acc + np.arange(4)[:, None],
                               rtol=1e-10, atol=1e-10)
    assert len(timer.times) == 4


def test_spilled_arguments_with_error_checks(rng):
    """The status buffer and the argument buffer side by side."""
    @nv.jit(boundscheck=True)
    def gather(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, idx, out, k):
        i = nv.global_id(0)
        if i < out.shape[0]:
            out[i] = (a0[idx[i], k] + a1[0, 0] + a2[0, 0] + a3[0, 0] + a4[0, 0] + a5[0, 0]
                      + a6[0, 0] + a7[0, 0] + a8[0, 0] + a9[0, 0] + a10[0, 0])

    small = [rng.random((4, 3)) for _ in range(11)]
    idx = np.array([0, 3, 2, 1], np.int64)
    out = np.zeros(4)
    gather.forall(4)(*small, idx, out, np.int64(2))
    np.testing.assert_allclose(out, small[0][idx, 2] + sum(a[0, 0] for a in small[1:]))
    params = compiled_kernels(gather)[0].params
    assert [p.kind for p in params][-2:] == ["status", "args"]
    with pytest.raises(IndexError):
        gather.forall(4)(*small, np.array([0, 4, 0, 0], np.int64), out, np.int64(2))


def test_layout_spills_from_the_first_argument_that_does_not_fit():
    specs = [(f"a{k}", "array", "float32", 2, "C") for k in range(6)]
    specs += [("x", "scalar", "float64", 0, "C"), ("flag", "scalar", "bool", 0, "C")]
    params, push_size = abi.layout(specs, max_push=128)
    assert [p.offset for p in params[:5]] == [16, 36, 56, 76, 96]
    assert push_size == 116 and not any(p.spilled for p in params[:5])
    assert [(p.name, p.offset) for p in params if p.spilled] == [("a5", 0), ("x", 24),
                                                                 ("flag", 32)]
    assert params[-1].kind == "args" and params[-1].binding == 6
    assert abi.args_size(params) == 36
    assert abi.bindings(params) == ["float32"] * 6 + ["uint32"]
    fmt = abi.push_format(params, push_size)
    assert struct.calcsize(fmt) == push_size + abi.args_size(params)
    packed = struct.pack(fmt, 1, 2, 3, *range(5 * 5), 7, 8, 9, 10, 11, 2.5, 1)
    assert struct.unpack_from("<5i", packed, push_size) == (7, 8, 9, 10, 11)
    assert struct.unpack_from("<di", packed, push_size + 24) == (2.5, 1)
    # A larger block takes them all; with checks the status buffer comes first.
    params, push_size = abi.layout(specs, max_push=256)
    assert push_size == 148 and not any(p.spilled or p.kind == "args" for p in params)
    params, _ = abi.layout(specs, checks=True, max_push=128)
    assert [(p.kind, p.binding) for p in params[-2:]] == [("status", 6), ("args", 7)]


def test_compiles_for_the_explicit_target_not_the_device():
    wide = advect.compile(SIX_2D, threads=(8, 8), target=TargetDescription(max_push_constants=256))
    assert wide.push_size == 136 and not any(p.spilled for p in wide.params)
    narrow = advect.compile(SIX_2D, threads=(8, 8), target=TargetDescription())
    assert narrow.push_size == 116 and narrow.params[5].spilled
    assert "Int64" not in wide.capabilities or "Int64" in narrow.capabilities
    assert_valid_spirv(wide)
    assert_valid_spirv(narrow)


def test_spilled_64_bit_scalars_on_a_narrowed_target():
    arrays = ["float64[:, :]"] * 4 + ["float32[:, :]", "int32[:, :]"] + ["float64[:, :]"] * 3
    arrays += ["float32[:, :]", "float64[:, :]", "float64[:, :]"]
    sig = ("void(" + ", ".join(arrays) + ", float64, float32, float64, float32, int64, "
           "float64, uint8, complex128, boolean)")
    narrowed = TargetDescription(float64=False, int64=False)
    with pytest.warns(nv.NarrowingWarning):
        compiled = cfd_step.compile(sig, threads=(8, 8), target=narrowed)
    spilled = {p.name: p for p in compiled.params if p.spilled}
    assert spilled["dt"].storage == "float32" and spilled["step"].storage == "int32"
    assert "Float64" not in compiled.capabilities and "Int64" not in compiled.capabilities
    assert_valid_spirv(compiled)


def test_a_module_for_a_wider_block_is_refused_by_a_narrower_device():
    device = current_device()
    if device.info.max_push_constants >= 136:
        pytest.skip("the device takes 136 bytes of push constants")
    from numba_vulkan.runtime.pipeline import Pipeline
    wide = advect.compile(SIX_2D, threads=(8, 8), target=TargetDescription(max_push_constants=256))
    with pytest.raises(nv.LaunchError, match="136 bytes of push constants.*argument buffer"):
        Pipeline(device, wide.spirv, wide.params, wide.push_size)


def test_spilled_doubles_on_a_target_with_float64_but_not_int64(rng):
    """Without int64 a spilled double is put together through a vector of
    two words; run that module here through the pipeline directly."""
    from numba_vulkan.runtime.pipeline import Pipeline
    n, m = 21, 19
    arrays, scalars = cfd_inputs(rng, n, m)
    expected = [a.copy() for a in arrays]
    cfd_reference(*expected, *scalars)
    sig = tuple(signature.of_value(a) for a in arrays) + (
        "float64", "float32", "float64", "float32", "int64", "float64", "uint8", "complex128",
        "bool")
    with pytest.warns(nv.NarrowingWarning):
        kernel = cfd_step.compile(sig, threads=(8, 8), target=TargetDescription(int64=False))
    assert "Int64" not in kernel.capabilities and "Float64" in kernel.capabilities
    device = current_device()
    pipeline = Pipeline(device, kernel.spirv, kernel.params, kernel.push_size)
    on_device = [nv.to_device(a) for a in arrays]
    groups = ((n + 7) // 8, (m + 7) // 8, 1)
    flat = [*groups]
    for a in on_device:
        flat += a.launch_fields
    for s in scalars:
        flat += (s.real, s.imag) if isinstance(s, complex) else (s,)
    pipeline.launch(groups, [a.buffer for a in on_device], pipeline.pack(flat))
    for got, want in zip(on_device[6:11], expected[6:11]):
        np.testing.assert_allclose(got.copy_to_host(), want, rtol=1e-6, atol=1e-9)


def test_spilled_layout_survives_the_metadata_round_trip():
    """What the kernel cache and AOT directories store rebuilds the layout."""
    kernel = advect.compile(SIX_2D, threads=(8, 8), target=TargetDescription())
    again = nv.CompiledKernel.from_metadata(kernel.to_metadata(), kernel.spirv)
    assert again.params == kernel.params and again.push_size == kernel.push_size
    assert [p.spilled for p in again.params] == [False] * 5 + [True, False]
    old = dict(kernel.to_metadata(), abi_version=1)
    with pytest.raises(ValueError, match="ABI 1"):
        nv.CompiledKernel.from_metadata(old, kernel.spirv)


_COEFFICIENTS = 28


def _polynomial_kernel():
    """Twenty-eight float64 coefficients and a complex shift: scalars alone
    pass 256 bytes, and the spill starts at a 64-bit value."""
    names = [f"c{k}" for k in range(_COEFFICIENTS)]
    source = (f"def polynomial(x, out, {', '.join(names)}, shift):\n"
              "    i = nv.global_id(0)\n"
              "    if i < x.shape[0]:\n"
              "        t = x[i]\n"
              f"        acc = {names[-1]}\n"
              + "".join(f"        acc = acc * t + {n}\n" for n in reversed(names[:-1]))
              + "        out[i] = acc + shift\n")
    scope = {"nv": nv}
    exec(compile(source, "<polynomial>", "exec"), scope)
    return nv.jit(scope["polynomial"])


def test_many_scalar_arguments(rng):
    polynomial = _polynomial_kernel()
    x = rng.uniform(-1, 1, 300)
    out = np.zeros(300, np.complex128)
    coefficients = [np.float64(v) for v in rng.uniform(-1, 1, _COEFFICIENTS)]
    shift = np.complex128(0.25 - 3j)
    polynomial.forall(x.size)(x, out, *coefficients, shift)
    want = np.zeros_like(x)
    for c in reversed(coefficients):
        want = want * x + c
    np.testing.assert_allclose(out, want + shift, rtol=1e-12, atol=1e-12)
    params = compiled_kernels(polynomial)[0].params
    assert params[-2].name == "shift" and params[-2].spilled and params[-1].kind == "args"
    assert params[-1].binding == 2 and not params[0].spilled
    first = next(p for p in params if p.spilled)
    assert first.kind == "scalar" and first.offset == 0


@nv.jit
def add_step(x, t):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] += t


def test_launches_with_new_scalars_past_the_recorded_ones_do_not_wait_for_the_queue(monkeypatch):
    """A time-stepping loop records a launch per step; evicting the oldest
    waits for that launch alone, never for the whole queue."""
    x = nv.to_device(np.zeros(1000, np.float32))
    step = add_step[4, 256]
    step(x, np.float32(0))
    nv.synchronize()
    stream = current_device().stream
    waits = []
    real = stream.synchronize
    monkeypatch.setattr(stream, "synchronize", lambda: (waits.append(1), real())[1])
    for t in range(100):
        step(x, np.float32(t))
    monkeypatch.setattr(stream, "synchronize", real)
    assert waits == []
    np.testing.assert_array_equal(x.copy_to_host(), np.full(1000, sum(range(100)), np.float32))


def test_numpy_scalars_as_arguments():
    @nv.jit
    def pick(out, flag, x, n):
        i = nv.global_id(0)
        if i < out.shape[0]:
            out[i] = x * n if flag else -x

    out = np.zeros(4, np.float64)
    for flag in (np.bool_(True), np.bool_(False)):
        pick.forall(4)(out, flag, np.float32(1.5), np.int64(3))
        np.testing.assert_array_equal(out, 4.5 if flag else -1.5)


@nv.jit
def _fill_with_defaults(out, value=np.float32(2.5), count=3):
    i = nv.global_id(0)
    if i < count:
        out[i] = value


def test_left_out_arguments_take_their_defaults():
    out = np.zeros(5, np.float32)
    _fill_with_defaults[1, 8](out)
    np.testing.assert_array_equal(out, [2.5, 2.5, 2.5, 0, 0])
    _fill_with_defaults[1, 8](out, np.float32(-1))
    np.testing.assert_array_equal(out, [-1, -1, -1, 0, 0])
    _fill_with_defaults.forall(8)(out, np.float32(4), 5)
    np.testing.assert_array_equal(out, [4] * 5)
    with pytest.raises(TypeError, match="takes 3 arguments, 0 were given"):
        _fill_with_defaults[1, 8]()


@nv.jit
def _tuples(out, pair, mixed, shape):
    out[0] = pair[0] + pair[1]
    out[1] = mixed[0] * mixed[1] + mixed[2] + (10 if mixed[3] else 0) + mixed[4]
    out[2] = shape[0] * 100 + shape[1]


def test_tuples_of_numbers_are_arguments():
    """A tuple of numbers passes as numba.cuda passes it (`a.shape` too),
    its items of any width and kind (bool, int8, uint16, float32, int64)."""
    out = np.zeros(3)
    a = np.zeros((7, 9))
    mixed = (np.int8(-3), np.float32(0.5), np.uint16(60000), True, 2**40)
    _tuples[1, 1](out, (1.5, 2.25), mixed, a.shape)
    np.testing.assert_array_equal(out, [3.75, -3 * 0.5 + 60000 + 10 + 2**40, 709])
    _tuples[1, 1](out, (1.0, 1.0), mixed[:3] + (False, 0), (1, 2))
    np.testing.assert_array_equal(out, [2, -1.5 + 60000, 102])
    (compiled,) = {id(c): c for c in _tuples._compiled.values()}.values()
    assert compiled.signature[1:] == ("(float64,float64)", "(int8,float32,uint16,bool,int64)",
                                      "(int64,int64)")
    assert_valid_spirv(compiled)


def test_tuples_past_the_push_constants_travel_in_the_argument_buffer(rng):
    tiny = current_device().target.with_features(max_push_constants=32)
    compiled = _tuples.compile(("float64[1d,C]", "(float64,float64)",
                                "(int8,float32,uint16,bool,int64)", "(int64,int64)"),
                               threads=(1, 1, 1), target=tiny)
    assert any(p.spilled for p in compiled.params if p.name == "shape")


@pytest.mark.parametrize("value, problem", [
    ((1j, 2.0), "complex128"), (((1, 2), 3), r"\(int64,int64\)"),
    ((np.zeros(2), 1), r"float64\[1d,C\]")])
def test_a_tuple_of_other_things_is_refused_naming_the_parameter(value, problem):
    with pytest.raises(TypeError, match="parameter 'pair': a tuple passed to a kernel holds "
                                        f"booleans, integers or floats, not {problem}"):
        _tuples[1, 1](np.zeros(3), value, (np.int8(1), 1.0, 1, True, 1), (1, 2))


def test_a_tuple_in_a_signature_string(tmp_path):
    from numba_vulkan import cuda
    kernel = cuda.jit("void(float64[::1], UniTuple(float64, 2), "
                      "Tuple((int8, float32, uint16, boolean, int64)), UniTuple(int64, 2))")(
        _tuples.py_func)
    out = np.zeros(3)
    kernel[1, 64](out, (0.5, 0.25), (np.int8(1), np.float32(2), np.uint16(3), False, 4), (5, 6))
    np.testing.assert_array_equal(out, [0.75, 9, 506])
    assert len(kernel._compiled) == 1
