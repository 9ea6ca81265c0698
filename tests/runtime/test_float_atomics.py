"""Native float32 atomic add where the device has it, compare-and-swap elsewhere."""

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.runtime.device import current_device
from tests.helpers import assert_valid_spirv


@nv.jit
def _sum_into(x, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        nv.atomic.add(out, 0, x[i])
        nv.atomic.sub(out, 1, x[i])


@nv.jit
def _add_and_max(x, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        nv.atomic.add(out, 0, x[i])
        nv.atomic.max(out, 1, x[i])


SIG = "void(float32[::1], float32[::1])"


def test_targets_choose_the_atomic_add():
    native = nv.TargetDescription(vulkan=(1, 3), float32_atomic_add=True)
    assert "AtomicFloat32AddEXT" in _sum_into.compile(SIG, target=native).capabilities
    portable = nv.TargetDescription(vulkan=(1, 3))
    assert "AtomicFloat32AddEXT" not in _sum_into.compile(SIG, target=portable).capabilities
    for k in (_sum_into.compile(SIG, target=native), _sum_into.compile(SIG, target=portable)):
        assert_valid_spirv(k)


@pytest.mark.parametrize("target", [None, nv.TargetDescription(vulkan=(1, 3))],
                         ids=["device", "compare-and-swap"])
def test_float_atomic_add_sums(rng, target):
    if target is None and "float32_atomic_add" not in current_device().info.features:
        pytest.skip("the device has no native float32 atomic add")
    x = rng.random(20_000).astype(np.float32)
    out = np.zeros(2, np.float32)
    kernel = _sum_into.compile(SIG, threads=(256, 1, 1), target=target)
    from numba_vulkan.runtime.pipeline import Pipeline
    dx, dout = nv.to_device(x), nv.to_device(out)
    pipeline = Pipeline(current_device(), kernel.spirv, kernel.params, kernel.push_size)
    groups = (-(-x.size // 256), 1, 1)
    flat = [*groups, *dx.launch_fields, *dout.launch_fields]
    pipeline.launch(groups, [dx.buffer, dout.buffer], pipeline.pack(flat))
    result = dout.copy_to_host()
    np.testing.assert_allclose(result, [x.sum(dtype=np.float64), -x.sum(dtype=np.float64)],
                               rtol=1e-4)


def test_add_beside_compare_and_swap_on_one_array(rng):
    x = rng.random(5000).astype(np.float32)
    out = np.zeros(2, np.float32)
    _add_and_max.forall(x.size)(x, out)
    np.testing.assert_allclose(out[0], x.sum(dtype=np.float64), rtol=1e-4)
    assert out[1] == x.max()
    for k in _add_and_max._compiled.values():
        # One buffer cannot be typed for both: the adds use the loop too.
        assert "AtomicFloat32AddEXT" not in k.capabilities


def test_target_keys_round_trip():
    for target in (nv.TargetDescription(), nv.TargetDescription(float32_atomic_add=True),
                   nv.TargetDescription(vulkan=(1, 3), float64=False, int64=False)):
        assert nv.TargetDescription.from_key(target.key()) == target
    assert len(nv.TargetDescription().key()) == 4
    with pytest.raises(ValueError):
        nv.TargetDescription.from_key([[1, 2], True, True, 128, "teleport"])


@nv.jit
def _accumulate(out, value):
    nv.atomic.add(out, 0, value)


@nv.jit
def _sum_through_device_function(x, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        _accumulate(out, x[i])


def test_device_function_compiled_per_target():
    native = nv.TargetDescription(vulkan=(1, 3), float32_atomic_add=True)
    portable = nv.TargetDescription(vulkan=(1, 3))
    # Compiled first for one target, the device function must not be reused
    # as it is for the other.
    for first, second in ((native, portable), (portable, native)):
        a = _sum_through_device_function.compile(SIG, threads=(32, 1, 1), target=first)
        b = _sum_through_device_function.compile(SIG, threads=(32, 1, 1), target=second)
        for k, target in ((a, first), (b, second)):
            assert ("AtomicFloat32AddEXT" in k.capabilities) == target.float32_atomic_add
            assert_valid_spirv(k)
        _sum_through_device_function._compiled.clear()
