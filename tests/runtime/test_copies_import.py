"""Copies the device makes from imported host memory, and the staging
fallback."""

import numpy as np
import pytest

from numba_vulkan.runtime import transfer
from numba_vulkan.runtime.device import current_device
from numba_vulkan.runtime.memory import Buffer, DeviceArray


@pytest.fixture
def importer():
    found = transfer.host_import(current_device())
    if found is None:
        pytest.skip("the device cannot import host memory")
    return found


def _device_bytes(buffer, start, size):
    out = np.empty(size, np.uint8)
    transfer.staging(buffer.device).read(buffer, out, start)
    return out


@pytest.mark.parametrize("piece", [4096, 3 * 4096, 64 << 20])
@pytest.mark.parametrize("size,skew", [(1, 0), (4095, 1), (4097, 4095), (70_001, 123),
                                       (200_000, 4000)])
def test_import_round_trip(importer, monkeypatch, rng, piece, size, skew):
    monkeypatch.setattr(transfer, "IMPORT_PIECE", piece)
    target = Buffer(current_device(), 300_000)
    base = rng.integers(0, 256, size + 2 * 4096, dtype=np.uint8)
    data = base[skew:skew + size]               # starts anywhere within a page
    importer.write(target, data, 777)
    np.testing.assert_array_equal(_device_bytes(target, 777, size), data)
    host = np.full(size + 2 * 4096, 7, np.uint8)
    out = host[skew:skew + size]
    importer.read(target, out, 777)
    np.testing.assert_array_equal(out, data)
    # Only the array's own bytes are written, though whole pages are imported.
    assert (host[:skew] == 7).all() and (host[skew + size:] == 7).all()


def test_import_failure_falls_back_and_releases(importer, monkeypatch, rng):
    monkeypatch.setattr(transfer, "IMPORT_MIN", 0)
    monkeypatch.setenv("NUMBA_VULKAN_HOST_IMPORT", "1")
    released = []
    release = importer._release
    monkeypatch.setattr(importer, "_release",
                        lambda buffer, memory: (released.append(memory), release(buffer, memory)))

    def no_memory_type(device, handle_type, pointer, properties):
        properties.memoryTypeBits = 0
        return 0

    monkeypatch.setattr(importer, "_pointer_properties", no_memory_type)
    target = Buffer(current_device(), 50_000)
    target.mapped = None                        # as on a discrete GPU
    data = rng.integers(0, 256, 40_000, dtype=np.uint8)
    target.write(data, 100)
    out = np.zeros_like(data)
    target.read(out, 100)
    np.testing.assert_array_equal(out, data)
    assert released == [None, None]             # each refused import's buffer was destroyed


def test_failure_in_a_later_piece_releases_earlier_ones(importer, monkeypatch, rng):
    monkeypatch.setattr(transfer, "IMPORT_PIECE", 4096)
    monkeypatch.setattr(transfer, "IMPORT_MIN", 0)
    monkeypatch.setenv("NUMBA_VULKAN_HOST_IMPORT", "1")
    imported, released = [], []
    real_import, real_release = importer._import, importer._release

    def flaky_import(address, nbytes):
        if len(imported) == 5:
            raise transfer.ImportFailed("refused")
        imported.append(real_import(address, nbytes))
        return imported[-1]

    monkeypatch.setattr(importer, "_import", flaky_import)
    monkeypatch.setattr(importer, "_release",
                        lambda buffer, memory: (released.append(buffer),
                                                real_release(buffer, memory)))
    target = Buffer(current_device(), 100_000)
    target.mapped = None
    data = rng.integers(0, 256, 90_000, dtype=np.uint8)
    target.write(data, 0)
    np.testing.assert_array_equal(_device_bytes(target, 0, data.size), data)
    assert len(imported) == 5 and released == [b for b, _, _ in imported]


@pytest.mark.parametrize("import_on", ["0", "1"])
def test_device_arrays_through_dma(monkeypatch, rng, import_on):
    """copy_to_device and copy_to_host where the host cannot map device memory."""
    monkeypatch.setattr(transfer, "IMPORT_MIN", 0)
    monkeypatch.setattr(transfer, "IMPORT_PIECE", 8192)
    monkeypatch.setenv("NUMBA_VULKAN_HOST_IMPORT", import_on)
    host = rng.random((37, 29))
    dev = DeviceArray(host.shape, host.dtype)
    dev.buffer.mapped = None
    dev.copy_to_device(host[:, ::-1])           # a view: made contiguous first
    np.testing.assert_array_equal(dev.copy_to_host(), host[:, ::-1])
    out = np.empty((41, 29))
    dev[2:].copy_to_host(out[4:39])
    np.testing.assert_array_equal(out[4:39], host[2:, ::-1])
    dev[5:9].copy_to_device(host[:4])
    np.testing.assert_array_equal(dev.copy_to_host()[5:9], host[:4])


def test_uncached_mapping_is_read_by_dma(rng, monkeypatch):
    """Writes go through the mapping; reads of uncached memory do not."""
    buffer = Buffer(current_device(), 20_000)
    data = rng.integers(0, 256, 12_345, dtype=np.uint8)
    buffer.write(data, 3)
    buffer.readable = False

    real_view = Buffer.host_view

    def through_the_mapping(self):
        # Staging buffers are mapped on purpose; this one must not be read so.
        assert self is not buffer, "read uncached memory through its mapping"
        return real_view(self)
    monkeypatch.setattr(Buffer, "host_view", through_the_mapping)
    copies = []
    real_read = transfer.read
    monkeypatch.setattr(transfer, "read", lambda *args: (copies.append(args),
                                                         real_read(*args)))
    out = np.zeros_like(data)
    buffer.read(out, 3)
    np.testing.assert_array_equal(out, data)
    assert len(copies) == 1
