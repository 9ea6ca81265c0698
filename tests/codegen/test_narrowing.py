"""Narrowing: on a device without float64 or int64 support, kernels compile
with those types narrowed to 32 bits (and a warning), and arrays are stored
narrowed on the device, converted on the way in and out.

lavapipe has both features; ``NUMBA_VULKAN_MASK_FEATURES=float64,int64``
hides them, in a child process since the device is opened once per process.
Compiling for an explicit narrow target needs no device.
"""

import json
import textwrap

import numpy as np
import pytest

import numba_vulkan as nv
from tests.helpers import ROOT, assert_valid_spirv, run_python

NARROW = nv.TargetDescription(vulkan=(1, 2), float64=False, int64=False)


@nv.jit
def mixed(x, counts, n, out):
    i = nv.global_id(0)
    if i < x.shape[0]:
        out[i] = x[i] * 0.5 + counts[i] // 3 + n


@pytest.mark.parametrize("target", [NARROW, NARROW.with_features(int64=True),
                                    NARROW.with_features(vulkan=(1, 3))])
def test_narrow_modules_declare_no_64_bit_capabilities(target):
    sig = "void(float64[:], int32[::1], int64, float64[::1])"
    with pytest.warns(nv.NarrowingWarning, match="float64"):
        k = mixed.compile(sig, target=target)
    assert "Float64" not in k.capabilities
    assert ("Int64" in k.capabilities) == target.int64
    assert_valid_spirv(k)
    storage = {p.name: p.storage for p in k.params}
    assert storage["x"] == storage["out"] == "float32"
    assert storage["n"] == ("int64" if target.int64 else "int32")


_CHILD = textwrap.dedent('''
    import json, math, warnings
    import numpy as np
    import numba_vulkan as nv

    @nv.jit
    def kernel(x, big, k, n, out, index):
        i = nv.global_id(0)
        if i < x.shape[0]:
            out[i, 0] = math.sin(x[i]) * 2.5 + x[i] ** 2
            out[i, 1] = math.exp(-abs(x[i])) + math.log1p(abs(x[i]))
            out[i, 2] = x[i] / 3.0 + k
            index[i] = big[i] // 7 - big[i] % 5 + n * i

    @nv.jit
    def strided(a, out):
        i = nv.global_id(0)
        j = nv.global_id(1)
        if i < a.shape[0] and j < a.shape[1]:
            out[i, j] = a[i, j] * 2.0 + i - j

    rng = np.random.default_rng(7)
    x = rng.uniform(-20, 20, 500)
    big = rng.integers(-1000000, 1000000, 500)
    out = np.zeros((500, 3))
    index = np.zeros(500, np.int64)
    x_before = x.copy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel.forall(500)(x, big, 1.25, 3, out, index)
    compiled = list(kernel._compiled.values())[0]

    a = rng.random((40, 30))
    view_out = np.zeros((40, 30))
    strided[(5, 4), (8, 8)](a[::2, :], view_out[::2, :])

    device_x = nv.to_device(x)
    device_out = nv.device_array((500, 3))
    device_index = nv.device_array(500, np.int64)
    kernel.forall(500)(device_x, nv.to_device(big), 1.25, 3, device_out, device_index)

    @nv.jit
    def shows(x, n):
        i = nv.global_id(0)
        if i < x.shape[0]:
            print(i, x[i], n + i, x[i] + 1j)

    import contextlib, io
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), warnings.catch_warnings():
        warnings.simplefilter("ignore", nv.NarrowingWarning)
        shows.forall(2)(np.array([0.1, -2.5]), 7)

    x32 = x.astype(np.float32)
    want = np.stack([np.sin(x32) * np.float32(2.5) + x32 * x32,
                     np.exp(-np.abs(x32)) + np.log1p(np.abs(x32)),
                     x32 / np.float32(3) + np.float32(1.25)], axis=1)
    print(json.dumps({
        "narrowed": list(nv.select_device(0).target.narrowed),
        "capabilities": compiled.capabilities,
        "warnings": [str(w.message) for w in caught if w.category is nv.NarrowingWarning],
        # Computed in float32 and converted back: every value is a float32 one.
        "out_float32": bool(out.any() and np.array_equal(out, out.astype(np.float32))),
        # An input is converted in, and not written back rounded.
        "x_unchanged": bool(np.array_equal(x, x_before)),
        "error": float(np.max(np.abs(out - want) / np.maximum(np.abs(want), 1))),
        "index_ok": bool(np.array_equal(index, big // 7 - big % 5 + 3 * np.arange(500))),
        "strided_ok": bool(np.allclose(view_out[::2, :], a[::2, :] * 2
                                       + np.arange(20)[:, None] - np.arange(30), atol=1e-5)),
        "untouched_ok": bool(not view_out[1::2, :].any()),
        "device_storage": str(device_x.storage),
        "device_dtype": str(device_out.copy_to_host().dtype),
        "device_same": bool(np.array_equal(device_out.copy_to_host(), out)),
        "device_index_ok": bool(np.array_equal(device_index.copy_to_host(), index)),
        "printed": sorted(printed.getvalue().splitlines()),
    }))
''')


@pytest.fixture(scope="module")
def masked_run():
    result = run_python("-c", _CHILD, cwd=ROOT,
                        env={"NUMBA_VULKAN_MASK_FEATURES": "float64,int64"})
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_masked_device_narrows(masked_run):
    assert sorted(masked_run["narrowed"]) == ["float64", "int64"]
    assert not {"Float64", "Int64"} & set(masked_run["capabilities"])
    assert masked_run["warnings"] and "narrowed to 32 bits" in masked_run["warnings"][0]


def test_host_arrays_are_converted_in_and_out(masked_run):
    assert masked_run["out_float32"]
    assert masked_run["x_unchanged"]
    assert masked_run["error"] < 1e-5
    assert masked_run["index_ok"]
    assert masked_run["strided_ok"] and masked_run["untouched_ok"]


def test_print_shows_the_32_bit_values_the_kernel_computed(masked_run):
    # float32's shortest text: 0.1 narrowed reads 0.1, as np.float32(0.1) prints.
    assert masked_run["printed"] == ["0 0.1 7 (0.1+1j)", "1 -2.5 8 (-2.5+1j)"]


def test_device_arrays_store_the_narrowed_dtype(masked_run):
    assert masked_run["device_storage"] == "float32"
    assert masked_run["device_dtype"] == "float64"
    assert masked_run["device_same"] and masked_run["device_index_ok"]


def test_full_device_keeps_64_bits(rng):
    x = rng.random(100)
    counts = rng.integers(0, 50, 100).astype(np.int32)
    out = np.zeros(100)
    mixed.forall(100)(x, counts, 2 ** 40, out)
    np.testing.assert_array_equal(out, x * 0.5 + counts // 3 + 2 ** 40)
    assert nv.to_device(x).storage == np.float64


def test_aot_narrow_profile_builds(tmp_path):
    from numba_vulkan.aot.build import builder as build
    (tmp_path / "narrow_kernels.py").write_text(
        "import numba_vulkan as nv\n\n@nv.jit\ndef twice(x):\n    i = nv.global_id(0)\n"
        "    if i < x.shape[0]:\n        x[i] *= 2.0\n")
    (tmp_path / "kernels.yaml").write_text(
        "version: 1\nprofiles:\n  - name: narrow\n    narrow: true\nkernels:\n"
        "  - function: narrow_kernels:twice\n    signatures: ['void(float64[::1])']\n")
    result = build.build(str(tmp_path / "kernels.yaml"))
    assert not result.failures, result.failures[0].message
