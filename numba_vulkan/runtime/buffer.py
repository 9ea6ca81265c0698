"""Vulkan buffers with memory of their own: allocated, mapped where the host
can see them, released with their last reference. The host reads and writes
them through :class:`numba_vulkan.runtime.memory.Buffer`; the staging chunks
of :mod:`numba_vulkan.runtime.transfer` are plain :class:`RawBuffer`.
"""

import ctypes
import weakref

import numpy as np

from numba_vulkan.base.errors import DriverError
from numba_vulkan.runtime import vk

#: Vulkan rejects zero-sized buffers; empty arrays get this many bytes.
MIN_BUFFER = 16


def sharing(device):
    """A ``VkBufferCreateInfo``'s sharing fields for a buffer of ``device``:
    shared by its queue families where it uses several (copy queues), so that
    no queue family ownership transfer is needed between them."""
    v = vk.module()
    if len(device.families) == 1:
        return {"sharingMode": v.VK_SHARING_MODE_EXCLUSIVE}
    return {"sharingMode": v.VK_SHARING_MODE_CONCURRENT,
            "queueFamilyIndexCount": len(device.families),
            "pQueueFamilyIndices": device.family_indices}


class RawBuffer:
    """A ``VkBuffer`` with its own memory, usable as a storage buffer.

    Device-local memory is preferred, and of that, memory the host cannot
    map. An H200 also offers all of its memory host-visible (resizable BAR),
    but there a launch that writes such memory took 5 to 7 µs longer to
    synchronize, and once any buffer lived there every launch did; writing
    through the mapping was no faster than staging once a copy within video
    memory followed. Where all memory is host-visible (CPU drivers, unified
    memory) the buffer stays mapped and writes are plain memory copies, and
    so are reads where the mapping is cached; elsewhere the device copies,
    through staging memory or from host memory it imports (see
    :mod:`~numba_vulkan.runtime.transfer`).

    Args:
        device: The :class:`~numba_vulkan.runtime.device.Device`.
        nbytes: Size in bytes.
        host: Host-visible memory, cached where possible (for staging).
        mapped: Host-visible, coherent memory, device-local where the device
            offers that (resizable BAR), for arrays both the host and
            kernels use in place (:func:`host_array`).
    """

    def __init__(self, device, nbytes, host=False, mapped=False):
        v = vk.module()
        ffi, lib = v.ffi, v.lib
        self.device = device
        self.nbytes = max(int(nbytes), MIN_BUFFER)
        usage = (v.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | v.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                 | v.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
        info = vk.new("VkBufferCreateInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "size": self.nbytes,
            "usage": usage, **sharing(device)})
        out = vk.new("VkBuffer[1]")
        vk.check(lib.vkCreateBuffer(device.handle, info, ffi.NULL, out), "vkCreateBuffer")
        self.handle = out[0]
        requirements = vk.new("VkMemoryRequirements*")
        lib.vkGetBufferMemoryRequirements(device.handle, self.handle, requirements)
        visible = v.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | v.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        local = v.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
        if mapped:
            index = device.find_memory_type(requirements.memoryTypeBits, visible,
                                            preferred=local)
        elif host:
            index = device.find_memory_type(requirements.memoryTypeBits, visible,
                                            preferred=v.VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
        else:
            index = device.find_memory_type(requirements.memoryTypeBits, local, avoid=visible)
            if index is None:
                index = device.find_memory_type(requirements.memoryTypeBits, 0)
        if index is None:
            self._destroy_buffer()
            raise DriverError("no suitable Vulkan memory type for a buffer")
        alloc = vk.new("VkMemoryAllocateInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
            "allocationSize": requirements.size, "memoryTypeIndex": index})
        memory = vk.new("VkDeviceMemory[1]")
        result = lib.vkAllocateMemory(device.handle, alloc, ffi.NULL, memory)
        if result != 0:
            self._destroy_buffer()
            vk.check(result, f"vkAllocateMemory of {requirements.size} bytes")
        self.memory = memory[0]
        device.count_allocation(index, requirements.size)
        vk.check(lib.vkBindBufferMemory(device.handle, self.handle, self.memory, 0),
                 "vkBindBufferMemory")
        flags = device.memory_types[index][0]
        self.mapped = None
        #: Whether reads may go through the mapping: reading uncached memory
        #: (write-combined, or video memory behind the PCIe BAR) is far
        #: slower than a DMA.
        self.readable = bool(flags & v.VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
        if flags & visible == visible:
            pointer = vk.new("void**")
            vk.check(lib.vkMapMemory(device.handle, self.memory, 0, self.nbytes, 0, pointer),
                     "vkMapMemory")
            self.mapped = (ctypes.c_char * self.nbytes).from_address(
                int(ffi.cast("uintptr_t", pointer[0])))
        self._finalizer = weakref.finalize(self, RawBuffer._release, device, self.handle,
                                           self.memory, index, requirements.size)
        # At exit the finalizer would run even while the queue still uses the
        # buffer (a copy not waited for): freeing it then crashed the driver.
        # Devices are never destroyed, so the process's end frees it.
        self._finalizer.atexit = False

    def _destroy_buffer(self):
        v = vk.module()
        v.lib.vkDestroyBuffer(self.device.handle, self.handle, v.ffi.NULL)

    @staticmethod
    def _release(device, handle, memory, memory_type, nbytes):
        v = vk.module()
        v.lib.vkDestroyBuffer(device.handle, handle, v.ffi.NULL)
        v.lib.vkFreeMemory(device.handle, memory, v.ffi.NULL)
        device.count_allocation(memory_type, -nbytes)

    def host_view(self):
        """The mapped memory as a uint8 NumPy array, or None if not mappable."""
        if self.mapped is None:
            return None
        return np.frombuffer(self.mapped, dtype=np.uint8)
