"""Error checks on request: ``boundscheck=True`` and ``error_model="python"``
make a kernel report the first exception an invocation raises, which the
launch then raises on the host."""

import numba
import numpy as np
import pytest

import numba_vulkan as nv
from tests.helpers import assert_valid_spirv, compiled_kernels


@nv.jit(boundscheck=True)
def scaled(x, out, n):
    i = nv.global_id(0)
    if i < n:
        out[i] = x[i] * 2.0


@nv.jit(boundscheck=True)
def transposed(a, out):
    i = nv.global_id(0)
    j = nv.global_id(1)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = a[j, i]


@nv.jit
def unchecked(x, out, n):
    i = nv.global_id(0)
    if i < n:
        out[i] = x[i] * 2.0


def test_boundscheck_raises_index_error_after_the_launch(rng):
    x = rng.random(10)
    out = np.zeros(10)
    scaled.forall(10)(x, out, 10)
    np.testing.assert_array_equal(out, 2 * x)
    with pytest.raises(IndexError, match=r"out of bounds .*invocation \((10|11), 0, 0\)"):
        scaled.forall(12)(x, out, 12)
    # The invocations in range still ran, and the next launch starts clean.
    np.testing.assert_array_equal(out, 2 * x)
    scaled.forall(10)(x, out * 0, 10)
    for compiled in compiled_kernels(scaled):
        assert_valid_spirv(compiled)
        assert [p.kind for p in compiled.params][-1] == "status"


def test_boundscheck_on_device_arrays_and_2d(rng):
    a = rng.random((6, 4))
    out = nv.device_array((4, 6))
    transposed[(1, 1), (4, 6)](nv.to_device(a), out)
    np.testing.assert_array_equal(out.copy_to_host(), a.T)
    with pytest.raises(IndexError):
        transposed[(1, 1), (4, 7)](nv.to_device(a[:, :4]), nv.device_array((4, 7)))


def test_kernels_without_checks_have_no_status_buffer(rng):
    x = rng.random(10)
    out = np.zeros(10)
    unchecked.forall(10)(x, out, 10)
    (compiled,) = compiled_kernels(unchecked)
    assert all(p.kind != "status" for p in compiled.params)


@nv.jit(error_model="python")
def floor_divide(a, b, out):
    i = nv.global_id(0)
    if i < a.shape[0]:
        out[i, 0] = a[i] // b[i]
        out[i, 1] = a[i] % b[i]


@nv.jit
def floor_divide_numpy(a, b, out):
    i = nv.global_id(0)
    if i < a.shape[0]:
        out[i, 0] = a[i] // b[i]
        out[i, 1] = a[i] % b[i]


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32])
def test_python_error_model_raises_zero_division(dtype, rng):
    a = rng.integers(0, 100, 64).astype(dtype)
    b = rng.integers(1, 9, 64).astype(dtype)
    out = np.zeros((64, 2), dtype)
    floor_divide.forall(64)(a, b, out)
    np.testing.assert_array_equal(out, np.stack([a // b, a % b], axis=1))
    b[37] = 0
    with pytest.raises(ZeroDivisionError, match=r"division by zero .*invocation \(37, 0, 0\)"):
        floor_divide.forall(64)(a, b, out)
    # Under NumPy's error model division by zero gives 0, as numba.njit does.
    floor_divide_numpy.forall(64)(a, b, out)
    ref = np.zeros_like(out)
    numba.njit(lambda a, b, out: _cpu_divide(a, b, out), error_model="numpy")(a, b, ref)
    np.testing.assert_array_equal(out, ref)


@numba.njit(error_model="numpy")
def _cpu_divide(a, b, out):
    for i in range(a.shape[0]):
        out[i, 0] = a[i] // b[i]
        out[i, 1] = a[i] % b[i]


@numba.njit
def _check_positive(v):
    if v < 0:
        raise ValueError("negative input")
    return v ** 0.5


@nv.jit(error_model="python")
def roots(x, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        out[i] = _check_positive(x[i])


def test_exception_from_a_device_function(rng):
    x = rng.random(32)
    out = np.zeros(32)
    roots.forall(32)(x, out)
    np.testing.assert_allclose(out, np.sqrt(x))
    x[5] = -1.0
    with pytest.raises(ValueError, match="negative input"):
        roots.forall(32)(x, out)
    (compiled,) = compiled_kernels(roots)
    kinds = {entry["type"] for entry in compiled.metadata["exceptions"].values()}
    assert "ValueError" in kinds


def test_exception_table_survives_metadata_round_trip():
    k = roots.compile("void(float64[::1], float64[::1])")
    again = nv.CompiledKernel.from_metadata(k.to_metadata(), k.spirv)
    assert again.metadata["exceptions"] == k.metadata["exceptions"]
    assert any(p.kind == "status" for p in again.params)
