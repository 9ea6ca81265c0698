"""The persistent pipeline cache: keyed by device, checked before a driver sees it."""

import hashlib
import os
import struct
from types import SimpleNamespace

import numpy as np
import pytest

import numba_vulkan as nv
from numba_vulkan.runtime import pipeline_cache
from numba_vulkan.runtime.device import current_device
from numba_vulkan.runtime.pipeline import Pipeline

INFO = SimpleNamespace(vendor_id=0x10DE, device_id=0x2335, driver_version=0x91C7E000,
                       pipeline_cache_uuid="00112233445566778899aabbccddeeff")


def driver_data(info=INFO, version=1, payload=b"compiled shaders"):
    uuid = bytes.fromhex(info.pipeline_cache_uuid)
    return struct.pack("<IIII16s", 32, version, info.vendor_id, info.device_id, uuid) + payload


def other(**changes):
    return SimpleNamespace(**{**vars(INFO), **changes})


def test_round_trip():
    data = driver_data()
    assert pipeline_cache.unpack(INFO, pipeline_cache.pack(INFO, data)) == data


@pytest.mark.parametrize("reader", [
    other(vendor_id=0x1002), other(device_id=1), other(driver_version=1),
    other(pipeline_cache_uuid="ff" * 16),
])
def test_a_file_of_another_device_or_driver_is_refused(reader):
    assert pipeline_cache.unpack(reader, pipeline_cache.pack(INFO, driver_data())) is None


@pytest.mark.parametrize("damage", [
    lambda blob: blob[:-1],                                    # truncated
    lambda blob: blob[:-3] + bytes([blob[-3] ^ 1]) + blob[-2:],  # a flipped bit
    lambda blob: b"XXXX" + blob[4:],                           # not ours
    lambda blob: blob[:10],
    lambda blob: b"",
])
def test_damaged_files_are_refused(damage):
    assert pipeline_cache.unpack(INFO, damage(pipeline_cache.pack(INFO, driver_data()))) is None


@pytest.mark.parametrize("data", [
    driver_data(version=2),                          # unknown header version
    driver_data(info=other(vendor_id=0x8086)),       # the driver's header names another device
    driver_data()[:20],                              # shorter than the driver's header
    struct.pack("<I", 4096) + driver_data()[4:],     # header size beyond the data
])
def test_driver_data_with_a_foreign_header_is_refused(data):
    assert pipeline_cache.unpack(INFO, pipeline_cache.pack(INFO, data)) is None


def test_file_name_holds_the_identity():
    name = pipeline_cache.file_name(INFO)
    assert name == "000010de-00002335-91c7e000-00112233445566778899aabbccddeeff.bin"


@nv.jit
def add_one(x):
    i = nv.global_id(0)
    if i < x.shape[0]:
        x[i] += 1


@pytest.fixture(scope="module")
def kernel():
    return add_one.compile("void(float32[::1])", threads=64)


def make_pipeline(device, kernel, cache):
    return Pipeline(device, kernel.spirv, kernel.params, kernel.push_size, cache=cache)


def test_cache_is_saved_checked_and_reloaded(kernel, tmp_path):
    device = current_device()
    path = str(tmp_path / pipeline_cache.file_name(device.info))
    cache = pipeline_cache.PipelineCache(device, path)
    make_pipeline(device, kernel, cache)
    with open(path, "rb") as f:
        saved = pipeline_cache.unpack(device.info, f.read())
    assert saved is not None and saved == cache.data()
    reloaded = pipeline_cache.PipelineCache(device, path)
    # The file was read, checked and handed to the driver, which took it: the
    # cache starts from it (a refused or unread file starts empty).
    assert reloaded._saved == hashlib.sha256(saved).digest()
    assert reloaded.data() == saved
    make_pipeline(device, kernel, reloaded)


def test_damaged_cache_file_is_discarded_and_the_cache_still_works(kernel, tmp_path, rng):
    device = current_device()
    path = tmp_path / pipeline_cache.file_name(device.info)
    path.write_bytes(b"NVPC" + os.urandom(200))
    cache = pipeline_cache.PipelineCache(device, str(path))
    assert not path.exists()          # discarded before the driver could see it
    make_pipeline(device, kernel, cache)
    assert pipeline_cache.unpack(device.info, path.read_bytes()) is not None
    x = rng.random(100).astype(np.float32)
    dx = nv.to_device(x)
    add_one[2, 64](dx)
    nv.synchronize()
    np.testing.assert_array_equal(dx.copy_to_host(), x + 1)


def test_one_cache_per_device_below_the_cache_directory(monkeypatch):
    device = current_device()
    cache = pipeline_cache.for_device(device)
    assert cache is pipeline_cache.for_device(device)
    assert os.path.dirname(cache.path) == pipeline_cache.directory()
    assert os.path.basename(cache.path) == pipeline_cache.file_name(device.info)
    monkeypatch.setenv("NUMBA_VULKAN_PIPELINE_CACHE", "0")
    assert pipeline_cache.for_device(device) is None
