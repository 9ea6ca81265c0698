"""numba.cuda's dispatch, as its documentation describes it: explicit
signatures, ``specialize``, ``extensions``, ``cuda.In/Out/InOut``, pickling
and the options numba.cuda code passes to ``cuda.jit``."""

import pickle

import numpy as np
import pytest

from numba_vulkan import cuda


@cuda.jit("void(float32[:], float32)")
def add_scalar(a, x):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += x


@cuda.jit
def double(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] *= 2


def test_a_signature_restricts_dispatch():
    a = np.arange(4, dtype=np.float32)
    add_scalar[1, 4](a, 1.5)          # a float64 scalar converts, a C array fits [:]
    np.testing.assert_array_equal(a, np.arange(4) + 1.5)
    with pytest.raises(TypeError, match=r"add_scalar\(\).*float64\[1d,C\].*float32\[1d,A\]"):
        add_scalar[1, 4](np.zeros(4), 1.0)
    assert len(add_scalar.overloads) == 1


def test_lazy_kernels_compile_per_type():
    a = np.arange(4, dtype=np.float64)
    double[1, 4](a)
    np.testing.assert_array_equal(a, np.arange(4) * 2)


def test_specialize():
    spec = double.specialize(np.zeros(4, np.float32))
    a = np.ones(4, np.float32)
    spec[1, 4](a)
    np.testing.assert_array_equal(a, 2)
    with pytest.raises(TypeError, match="launches only"):
        spec[1, 4](np.ones(4, np.int32))


class _Scaled:
    """An argument type an extension turns into a device array."""

    def __init__(self, data):
        self.data = data


class _Extension:
    def __init__(self):
        self.returned = []

    def prepare_args(self, ty, val, stream=0, retr=None):
        if isinstance(val, _Scaled):
            d = cuda.to_device(val.data)
            retr.append(lambda: self.returned.append(d.copy_to_host()))
            return ty, d
        return ty, val


def test_extensions_prepare_arguments():
    ext = _Extension()
    kernel = cuda.jit(extensions=[ext])(double.py_func)
    assert kernel.extensions == [ext]
    kernel[1, 4](_Scaled(np.arange(4, dtype=np.int32)))
    np.testing.assert_array_equal(ext.returned[0], np.arange(4) * 2)


def test_in_out_inout():
    a = np.ones(4, np.float32)
    double[1, 4](cuda.In(a))
    np.testing.assert_array_equal(a, 1)       # copied in only
    double[1, 4](cuda.InOut(a))
    np.testing.assert_array_equal(a, 2)
    double[1, 4](cuda.Out(a))
    np.testing.assert_array_equal(a, 4)


def test_pickle_by_reference():
    data = pickle.dumps(double)
    assert b"co_code" not in data and len(data) < 200
    assert pickle.loads(data) is double
    local = cuda.jit(lambda a: None)
    with pytest.raises(pickle.PicklingError, match="pickled by reference"):
        pickle.dumps(local)


@pytest.mark.parametrize("options", [dict(inline=True), dict(forceinline=True),
                                     dict(launch_bounds=(128,)), dict(max_registers=32),
                                     dict(lineinfo=True)])
def test_options_numba_cuda_code_passes(options):
    kernel = cuda.jit(**options)(double.py_func)
    a = np.ones(4, np.float32)
    kernel[1, 4](a)
    np.testing.assert_array_equal(a, 2)


def test_vectorize_nopython():
    ufunc = cuda.vectorize(["float32(float32)"], nopython=True)(lambda x: x + 1)
    np.testing.assert_array_equal(ufunc(np.ones(3, np.float32)), 2)
    with pytest.raises(TypeError, match="nopython must be True"):
        cuda.vectorize(["float32(float32)"], nopython=False)(lambda x: x)
