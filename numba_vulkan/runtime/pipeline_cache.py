"""The driver's pipeline cache, kept on disk per device.

Creating a pipeline makes the driver compile SPIR-V into machine code, which
can cost more than our own compile (close to a second for a math-heavy kernel
on lavapipe). A ``VkPipelineCache`` lets the driver reuse that work; this
module keeps one per device in ``pipelines/`` below the cache directory,
so only the first process on a machine pays it. Each logical device has a
file of its own, so that devices saving at once do not overwrite each
other's pipelines.
``NUMBA_VULKAN_PIPELINE_CACHE=0`` turns it off, as does ``NUMBA_VULKAN_CACHE=0``;
a cache directory that cannot be used keeps the cache in memory only.

A file is named after, and its header records, the device's vendor ID,
device ID, driver version and pipeline-cache UUID (the name also counts the
devices of ``nv.gpus`` before it with the same four, as ``-1``, ``-2``...), with the SHA-256 of the
driver's data. A file that does not match the device in every field, or
whose data is damaged, is discarded: drivers are not required to survive
bad cache data, so it never reaches one. Files are written atomically (a
temporary file in the same directory, then ``os.replace``); a failed write
costs only the next process's time.
"""

import hashlib
import os
import shutil
import struct
import threading
import weakref

from numba_vulkan.base import config
from numba_vulkan.base import files
from numba_vulkan.runtime import vk

#: Our header: magic, format, vendor ID, device ID, driver version,
#: pipeline-cache UUID, size and SHA-256 of the driver's data.
_HEADER = struct.Struct("<4sIIII16sQ32s")
_MAGIC = b"NVPC"
_FORMAT = 1
#: The header every driver puts first in its data (VK_PIPELINE_CACHE_HEADER_VERSION_ONE).
_VK_HEADER = struct.Struct("<IIII16s")
_VK_HEADER_VERSION_ONE = 1

#: Largest cache file read: drivers' caches of a process's kernels are far
#: smaller, and a damaged or hostile file must not exhaust memory.
_LIMIT = 256 << 20

_lock = threading.Lock()
_caches = weakref.WeakKeyDictionary()


def directory():
    """Where pipeline caches are kept, or None if the cache directory cannot be used."""
    root = files.cache_root()
    return os.path.join(root, "pipelines") if root else None


def _identity(info):
    return (info.vendor_id, info.device_id, info.driver_version,
            bytes.fromhex(info.pipeline_cache_uuid or "00" * 16))


def file_name(info, twin=0):
    """The file of a device's cache, from its identity and ``twin``: how many
    devices before it in ``nv.gpus`` have the same identity."""
    vendor, device, driver, uuid = _identity(info)
    suffix = f"-{twin}" if twin else ""
    return f"{vendor:08x}-{device:08x}-{driver:08x}-{uuid.hex()}{suffix}.bin"


def twin(device):
    """How many devices before ``device`` in ``nv.gpus`` have its identity:
    identical GPUs, and logical copies of the same one."""
    physical = device.instance.devices
    same = [info.index for info in physical if _identity(info) == _identity(device.info)]
    return device.copy * len(same) + same.index(device.info.index)


def pack(info, data):
    """Cache data with our header, as written to disk."""
    vendor, device, driver, uuid = _identity(info)
    return _HEADER.pack(_MAGIC, _FORMAT, vendor, device, driver, uuid, len(data),
                        hashlib.sha256(data).digest()) + data


def unpack(info, blob):
    """The driver's data in a file's contents, or None if it does not fit the device.

    Checks our header against the device and the data's digest, then the
    driver's own header against the device's vendor, device and UUID.
    """
    if len(blob) < _HEADER.size:
        return None
    magic, fmt, vendor, device, driver, uuid, size, digest = _HEADER.unpack_from(blob)
    data = blob[_HEADER.size:]
    if (magic, fmt) != (_MAGIC, _FORMAT) or (vendor, device, driver, uuid) != _identity(info):
        return None
    if size != len(data) or hashlib.sha256(data).digest() != digest:
        return None
    if len(data) < _VK_HEADER.size:
        return None
    header_size, version, vk_vendor, vk_device, vk_uuid = _VK_HEADER.unpack_from(data)
    if (header_size < _VK_HEADER.size or header_size > len(data)
            or version != _VK_HEADER_VERSION_ONE or vk_vendor != info.vendor_id
            or vk_device != info.device_id or vk_uuid != uuid):
        return None
    return data


class PipelineCache:
    """A ``VkPipelineCache`` for one device, loaded from and saved to a file.

    Pass it to :class:`~numba_vulkan.runtime.pipeline.Pipeline`, which calls
    :meth:`changed` after creating a pipeline with it.

    Attributes:
        handle: The ``VkPipelineCache``.
        path: The file it persists to, or None for a cache kept in memory.
    """

    def __init__(self, device, path=None):
        v = vk.module()
        ffi, lib = v.ffi, v.lib
        self.device = device
        self.path = path
        self._lock = threading.Lock()
        initial = self._read() if path else None
        out = vk.new("VkPipelineCache[1]")
        result = None
        if initial:
            buffer = ffi.new("char[]", initial)
            info = vk.new("VkPipelineCacheCreateInfo*", {
                "sType": v.VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                "initialDataSize": len(initial), "pInitialData": buffer})
            result = lib.vkCreatePipelineCache(device.handle, info, ffi.NULL, out)
        if result != 0:
            # No data, or data the driver refused: start empty.
            initial = None
            info = vk.new("VkPipelineCacheCreateInfo*", {
                "sType": v.VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO})
            vk.check(lib.vkCreatePipelineCache(device.handle, info, ffi.NULL, out),
                     "vkCreatePipelineCache")
        self.handle = out[0]
        self._saved = hashlib.sha256(initial or b"").digest()
        self._finalizer = weakref.finalize(self, PipelineCache._release, device, self.handle)

    @staticmethod
    def _release(device, handle):
        v = vk.module()
        v.lib.vkDestroyPipelineCache(device.handle, handle, v.ffi.NULL)

    def _read(self):
        try:
            blob = files.read_regular(self.path, _LIMIT)
        except FileNotFoundError:
            return None
        except files.FileProblem:
            # Not a regular file of ours (a directory, a FIFO, a link to a
            # device) or too large: replaced at the next save.
            self._discard()
            return None
        except OSError:
            return None
        data = unpack(self.device.info, blob)
        if data is None:
            self._discard()
        return data

    def _discard(self):
        """Remove whatever is at the cache's path, a directory included."""
        try:
            if os.path.isdir(self.path) and not os.path.islink(self.path):
                shutil.rmtree(self.path)
            else:
                os.unlink(self.path)
        except OSError:
            pass

    def data(self):
        """What the driver holds in the cache now."""
        v = vk.module()
        ffi, lib = v.ffi, v.lib
        size = ffi.new("size_t*")
        vk.check(lib.vkGetPipelineCacheData(self.device.handle, self.handle, size, ffi.NULL),
                 "vkGetPipelineCacheData")
        buffer = ffi.new("char[]", size[0])
        vk.check(lib.vkGetPipelineCacheData(self.device.handle, self.handle, size, buffer),
                 "vkGetPipelineCacheData", allowed=(0, v.VK_INCOMPLETE))
        return bytes(ffi.buffer(buffer, size[0]))

    def changed(self):
        """Save the cache if the driver added to it (a pipeline was just created)."""
        if self.path is None:
            return
        with self._lock:
            data = self.data()
            digest = hashlib.sha256(data).digest()
            if digest == self._saved:
                return
            try:
                _write_atomically(self.path, pack(self.device.info, data))
            except OSError:
                return
            self._saved = digest


def _write_atomically(path, blob):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    files.write_atomic(path, blob)


def for_device(device):
    """The device's pipeline cache, made on first use.

    None if turned off (``NUMBA_VULKAN_PIPELINE_CACHE=0`` or
    ``NUMBA_VULKAN_CACHE=0``); kept in memory only if the cache directory
    cannot be used.
    """
    if not config.pipeline_cache() or not config.cache_enabled():
        return None
    folder = directory()
    path = os.path.join(folder, file_name(device.info, twin(device))) if folder else None
    with _lock:
        cache = _caches.get(device)
        # Settings are read at each use: a changed cache directory gets its own cache.
        if cache is None or cache.path != path:
            cache = PipelineCache(device, path)
            _caches[device] = cache
        return cache
