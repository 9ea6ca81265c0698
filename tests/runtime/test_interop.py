"""DLPack and the array protocols: what device arrays give, and what launches take."""

import array

import numpy as np
import pytest

import numba_vulkan as nv


@nv.jit
def doubled(x):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] = x[i] * 2


def test_np_from_dlpack_of_a_device_array_is_a_host_copy():
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    d = nv.to_device(values)
    assert d.__dlpack_device__() == (1, 0)
    host = np.from_dlpack(d)
    assert host.dtype == np.float32 and np.array_equal(host, values)
    with pytest.raises(BufferError, match="host copy"):
        np.from_dlpack(d, copy=False)


def test_a_host_array_exports_dlpack_without_a_copy():
    h = nv.pinned_array((4,), np.float32)
    h[:] = 1
    assert np.shares_memory(np.from_dlpack(h), h)


class _OnlyArray:
    """An object that offers only ``__array__`` (as a torch CPU tensor does)."""

    def __init__(self, values):
        self.values = values

    def __array__(self, dtype=None, copy=None):
        return self.values


def test_a_launch_takes_what_to_device_takes_and_writes_back():
    offered = _OnlyArray(np.arange(4, dtype=np.float32))
    doubled.forall(4)(offered)
    assert offered.values.tolist() == [0, 2, 4, 6]
    buffer = array.array("f", [1, 2, 3])          # the buffer protocol only
    doubled.forall(3)(buffer)
    assert buffer.tolist() == [2, 4, 6]
    assert nv.to_device(buffer).copy_to_host().tolist() == [2, 4, 6]


def test_an_object_neither_takes_is_still_refused_by_name():
    with pytest.raises(TypeError, match="parameter 'x'"):
        doubled.forall(3)(object())
