"""End to end: kernels compile to SPIR-V and give NumPy's results on lavapipe."""

import numpy as np
import pytest

import numba_vulkan as nv
from tests.helpers import assert_valid_spirv, compiled_kernels, run_python


@nv.jit
def saxpy(a, x, y):
    i = nv.global_id(0)
    if i < x.shape[0]:
        y[i] = a * x[i] + y[i]


@nv.jit
def int_arith(a, b, out):
    i = nv.global_id(0)
    if i < a.shape[0]:
        out[i, 0] = a[i] + b[i]
        out[i, 1] = a[i] - b[i]
        out[i, 2] = a[i] * b[i]
        out[i, 3] = a[i] // b[i]
        out[i, 4] = a[i] % b[i]
        out[i, 5] = (a[i] ^ b[i]) | (a[i] & 7)
        out[i, 6] = a[i] << 2
        out[i, 7] = max(a[i], b[i])


@nv.jit
def scale_2d(a, out, factor):
    i = nv.global_id(0)
    j = nv.global_id(1)
    if i < a.shape[0] and j < a.shape[1]:
        out[i, j] = a[i, j] * factor + i - j


@nv.jit
def loop_branch(x, out, n):
    i = nv.global_id(0)
    if i < x.shape[0]:
        acc = 0.0
        for k in range(n):
            if (i + k) % 3 == 0:
                acc += x[i] * k
            else:
                acc -= 0.5 * k
        out[i] = acc


def _check_modules(kernel):
    kernels = compiled_kernels(kernel)
    assert kernels
    for compiled in kernels:
        assert_valid_spirv(compiled)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_saxpy_forall_host_arrays(rng, dtype):
    x = rng.random(10_000).astype(dtype)
    y = rng.random(10_000).astype(dtype)
    expected = dtype(2.5) * x + y
    saxpy.forall(x.size)(dtype(2.5), x, y)
    np.testing.assert_allclose(y, expected, rtol=1e-6)
    _check_modules(saxpy)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_saxpy_grid_device_arrays(rng, dtype):
    x = rng.random(5000).astype(dtype)
    y = rng.random(5000).astype(dtype)
    x0, y0 = x.copy(), y.copy()
    dx, dy = nv.to_device(x), nv.to_device(y)
    saxpy[20, 256](dtype(-1.5), dx, dy)
    saxpy[(20,), (256,)](dtype(2.0), dx, dy)
    nv.synchronize()
    np.testing.assert_allclose(dy.copy_to_host(), 2.0 * x + (-1.5 * x + y), rtol=1e-6)
    # The host arrays were not touched: launches on device arrays copy nothing back.
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(y, y0)


def test_grid_covers_only_requested_elements(rng):
    x = rng.random(1000).astype(np.float32)
    y = np.zeros(1000, np.float32)
    saxpy[2, 64](np.float32(1.0), x, y)   # 128 invocations
    np.testing.assert_array_equal(y[:128], x[:128])
    assert not y[128:].any()


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_arithmetic(rng, dtype):
    a = rng.integers(-1000, 1000, 3000).astype(dtype)
    b = rng.integers(1, 50, 3000).astype(dtype) * rng.choice([-1, 1], 3000).astype(dtype)
    out = np.zeros((3000, 8), dtype)
    int_arith.forall(a.size)(a, b, out)
    expected = np.stack([a + b, a - b, a * b, a // b, a % b, (a ^ b) | (a & 7), a << 2,
                         np.maximum(a, b)], axis=1)
    np.testing.assert_array_equal(out, expected)
    _check_modules(int_arith)


def test_2d_contiguous_and_view(rng):
    a = rng.random((64, 48))
    out = np.zeros_like(a)
    scale_2d[(8, 6), (8, 8)](a, out, 3.0)
    i, j = np.indices(a.shape)
    np.testing.assert_allclose(out, a * 3.0 + i - j)

    base = rng.random((130, 41))
    view = base[::2, 1:]
    assert not view.flags.c_contiguous
    target = np.zeros((200, 80))
    out_view = target[::3, ::2][:65, :40]
    scale_2d[(9, 5), (8, 8)](view, out_view, -2.0)
    i, j = np.indices(view.shape)
    np.testing.assert_allclose(target[::3, ::2][:65, :40], view * -2.0 + i - j)
    untouched = target.copy()
    untouched[::3, ::2][:65, :40] = 0
    assert not untouched.any()
    _check_modules(scale_2d)


def test_device_array_views(rng):
    a = rng.random((40, 30)).astype(np.float32)
    da = nv.to_device(a)
    dout = nv.device_array((20, 29), np.float32)
    scale_2d[(3, 4), (8, 8)](da[::2, 1:], dout, np.float32(0.5))
    i, j = np.indices((20, 29))
    np.testing.assert_allclose(dout.copy_to_host(), a[::2, 1:] * 0.5 + i - j, rtol=1e-6)


def test_for_loop_and_if_else(rng):
    x = rng.random(777)
    out = np.zeros_like(x)
    loop_branch.forall(x.size)(x, out, 13)
    expected = np.zeros_like(x)
    for k in range(13):
        hit = (np.arange(x.size) + k) % 3 == 0
        expected += np.where(hit, x * k, -0.5 * k)
    np.testing.assert_allclose(out, expected)
    _check_modules(loop_branch)


def test_compile_exposes_generated_code():
    k = saxpy.compile("void(float32, float32[::1], float32[::1])")
    assert "define void @main()" in k.llvm_ir
    assert k.spirv[:4] == b"\x03\x02\x23\x07"
    assert "Shader" in k.capabilities
    # Float32 data needs no 8-bit types: the backend's stray Int8 is stripped.
    assert "Int8" not in k.capabilities
    assert [p.name for p in k.params] == ["a", "x", "y"]
    assert_valid_spirv(k)
    assert "OpEntryPoint GLCompute" in k.disassemble()


def test_launch_reuses_compiled_pipeline(rng):
    x = nv.to_device(rng.random(100).astype(np.float32))
    y = nv.to_device(rng.random(100).astype(np.float32))
    saxpy[1, 128](np.float32(1), x, y)
    plans = dict(saxpy._plans)
    for _ in range(5):
        saxpy[1, 128](np.float32(1), x, y)
    nv.synchronize()
    assert saxpy._plans == plans


def test_device_listing_and_selection():
    devices = nv.list_devices()
    assert devices and devices[0].name
    assert nv.select_device(0).info == devices[0]
    assert nv.select_device(devices[0].name[:4]).info == devices[0]
    with pytest.raises(nv.DriverError, match="no Vulkan device matches"):
        nv.select_device("no such device 123")


@nv.jit
def mixed_scalars(flag, n, k, out_u, out_3d):
    i = nv.global_id(0)
    j = nv.global_id(1)
    l = nv.global_id(2)
    if i < out_3d.shape[0] and j < out_3d.shape[1] and l < out_3d.shape[2]:
        if flag:
            out_3d[i, j, l] = i * 100 + j * 10 + l + n
        else:
            out_3d[i, j, l] = -1
        if j == 0 and l == 0:
            out_u[i] = out_u[i] * k + 1


def test_bool_uint32_and_3d_arrays(rng):
    out_u = rng.integers(0, 1000, 6).astype(np.uint32)
    out_3d = np.zeros((6, 5, 4), np.int64)
    expected_u = out_u * np.uint32(3) + 1
    mixed_scalars[(1, 1, 1), (8, 8, 4)](True, 7, np.uint32(3), out_u, out_3d)
    i, j, l = np.indices(out_3d.shape)
    np.testing.assert_array_equal(out_3d, i * 100 + j * 10 + l + 7)
    np.testing.assert_array_equal(out_u, expected_u)
    mixed_scalars[(1, 1, 1), (8, 8, 4)](False, 7, np.uint32(3), out_u, out_3d)
    assert (out_3d == -1).all()
    _check_modules(mixed_scalars)


def test_synchronize_after_the_last_reference_to_a_kernel_is_gone():
    # The queue drops what finished work kept alive; a pipeline released
    # then synchronizes, which must not wait for the queue's own lock.
    script = (
        "import gc, numpy as np, numba_vulkan as nv\n"
        "def run():\n"
        "    @nv.jit\n"
        "    def bump(x):\n"
        "        x[nv.global_id(0)] += 1\n"
        "    d = nv.to_device(np.zeros(64, np.int32))\n"
        "    bump[1, 64](d)\n"
        "    return d\n"
        "d = run()\n"
        "gc.collect()\n"
        "nv.synchronize()\n"
        "assert (d.copy_to_host() == 1).all()\n"
        "print('ok')\n")
    result = run_python("-c", script, timeout=120)
    assert "ok" in result.stdout, result.stderr


def test_vulkan_1_1_is_refused_with_the_reason(monkeypatch):
    """LLVM's SPIR-V backend has no Vulkan 1.1 target: a description, a
    manifest's target_env and a device of that version each say so, rather
    than failing in the middle of a compile."""
    import dataclasses
    from numba_vulkan.runtime.device import Device, current_device
    from numba_vulkan.base.target import TargetDescription
    with pytest.raises(ValueError, match=r"Vulkan 1\.1 is not supported \(LLVM's SPIR-V backend "
                                         r"compiles for 1\.2, 1\.3\)"):
        TargetDescription(vulkan=(1, 1))
    with pytest.raises(ValueError, match="known: vulkan1.2, vulkan1.3"):
        TargetDescription.from_env("vulkan1.1")
    instance = current_device().instance
    devices = list(instance.devices)
    devices[0] = dataclasses.replace(devices[0], api_version=(1, 1, 0))
    monkeypatch.setattr(instance, "devices", devices)
    with pytest.raises(nv.DriverError, match="supports Vulkan 1.1; numba_vulkan's modules "
                                             "need Vulkan 1.2 or later"):
        Device(instance, 0)
