"""Moving bytes between host memory and device buffers, fast.

Where the host cannot map device memory (a discrete GPU), a copy takes one
of two paths:

* Import: with ``VK_EXT_external_memory_host`` the device imports the NumPy
  array's own pages for the duration of one copy, and its DMA engine reads or
  writes them directly. No memcpy runs on the host, so the copy runs at the
  bus's speed, less the cost of pinning the pages.
* Staging: the host copies through a few host-visible chunks while the
  device moves the previous ones. One thread's memcpy is far slower than the
  bus, so each chunk's host copy is split across threads (NumPy releases the
  GIL while copying).

Import, when turned on (``NUMBA_VULKAN_HOST_IMPORT``), is tried first for
large copies, and staging is the fallback for everything it refuses.
"""

import collections
import concurrent.futures
import os
import threading

import numpy as np

from numba_vulkan.base import config
from numba_vulkan.base.errors import DriverError
from numba_vulkan.runtime import queue, vk
from numba_vulkan.runtime.buffer import RawBuffer, sharing

#: Bytes per staging chunk.
CHUNK = 64 << 20
#: Staging chunks in flight at once: one being filled (or drained) on the
#: host while the device moves the others.
SLOTS = 3
#: Most threads that split a host copy; None picks one per CPU, at most 16.
THREADS = None
#: Copies smaller than this are staged: for them importing (pinning) host
#: pages costs more than copying them.
IMPORT_MIN = 4 << 20
#: Bytes imported at a time: the pinning of one piece overlaps the device's
#: copy of the one before.
IMPORT_PIECE = 64 << 20
#: Imported pieces held at once.
_IMPORT_DEPTH = 4
#: Host copies smaller than this run on the calling thread alone.
_PARALLEL_MIN = 4 << 20
#: No thread gets a smaller piece of a host copy than this: on an H200 host,
#: pieces of 1 or 2 MiB made copies slower than fewer threads did.
_PIECE_MIN = 4 << 20
#: Smallest staging buffer, so that small copies do not reallocate each time.
_SLOT_MIN = 1 << 20

_pool_lock = threading.Lock()
_pool = None
_pool_threads = 0


def _threads():
    if THREADS is not None:
        return max(1, int(THREADS))
    return max(1, min(16, os.cpu_count() or 1))


def _executor(threads):
    global _pool, _pool_threads
    with _pool_lock:
        if _pool is None or _pool_threads < threads:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="nv-copy")
            _pool_threads = threads
        return _pool


def host_copy(dst, src):
    """Copy the uint8 array ``src`` into the uint8 array ``dst`` of equal size."""
    n = src.size
    parts = min(_threads(), n // _PIECE_MIN) if n >= _PARALLEL_MIN else 1
    if parts <= 1:
        np.copyto(dst, src)
        return
    step = -(-n // parts)
    pool = _executor(parts)
    # The calling thread copies the last piece itself rather than sit idle.
    futures = [pool.submit(np.copyto, dst[i:i + step], src[i:i + step])
               for i in range(0, n - step, step)]
    last = (parts - 1) * step
    np.copyto(dst[last:], src[last:])
    for future in futures:
        future.result()


class _Slot:
    __slots__ = ("device", "buffer", "view", "command_buffers", "ticket")

    def __init__(self, device):
        self.device = device
        self.buffer = self.view = None
        #: By queue family: copies of streams with a transfer queue use its.
        self.command_buffers = {}
        #: (stream, number) of the slot's last copy, or None.
        self.ticket = None

    def command_buffer(self, lane):
        """The slot's command buffer for ``lane``'s family (only reused once
        the slot's last copy finished)."""
        command_buffer = self.command_buffers.get(lane.family)
        if command_buffer is None:
            command_buffer = self.command_buffers[lane.family] = lane.allocate_command_buffer()
        return command_buffer

    def reserve(self, size):
        """Make the staging buffer hold at least ``size`` bytes.

        Only called once the slot's last copy has finished. Buffers grow to
        the size copies need, so that a device only ever given small copies
        never holds chunks of ``CHUNK`` bytes.
        """
        if self.buffer is not None and self.buffer.nbytes >= size:
            return
        capacity = max(_SLOT_MIN, 1 << (size - 1).bit_length())
        capacity = max(size, min(capacity, CHUNK))
        self.buffer = RawBuffer(self.device, capacity, host=True)
        self.view = self.buffer.host_view()


def _record_copy(stream, command_buffer, src, dst, src_offset, dst_offset, size, keep_alive,
                 on_done=None):
    """Record and submit a buffer copy on ``stream``'s copy queue (the
    command buffer is of its family); return its ``(stream, number)`` ticket."""
    v = vk.module()
    lane = stream.copy_lane
    region = vk.new("VkBufferCopy*", {"srcOffset": src_offset, "dstOffset": dst_offset,
                                      "size": size})
    with lane.recording(command_buffer, reusable=False):
        v.lib.vkCmdCopyBuffer(command_buffer, src, dst, 1, region)
    return stream, stream.submit(command_buffer, keep_alive=keep_alive, on_done=on_done,
                                 lane=lane)


def _stream(device, stream):
    return device.stream if stream is None else stream


def buffer_copy(src, dst, src_offset, dst_offset, size, stream=None):
    """Copy ``size`` bytes between two buffers of one device with its DMA,
    on ``stream`` (None: the default stream) after the work submitted on it
    before; return the ``(stream, number)`` ticket (``queue.wait`` it),
    without waiting.

    For copies into and out of host-visible buffers (pinned arrays): no staging.
    """
    stream = _stream(src.device, stream)
    lane = stream.copy_lane
    command_buffer = lane.allocate_command_buffer()
    return _record_copy(stream, command_buffer, src.handle, dst.handle, src_offset,
                        dst_offset, size, (src, dst),
                        on_done=lambda: lane.free_command_buffer(command_buffer))


class Staging:
    """Host-visible chunks through which one device's staged copies go."""

    def __init__(self, device):
        self.device = device
        self.lock = threading.Lock()
        self.slots = [_Slot(device) for _ in range(SLOTS)]

    def _submit_copy(self, stream, slot, src, dst, src_offset, dst_offset, size):
        slot.ticket = _record_copy(stream, slot.command_buffer(stream.copy_lane), src.handle,
                                   dst.handle, src_offset, dst_offset, size, (src, dst))

    def write(self, buffer, data, offset, stream=None):
        """Copy the uint8 array ``data`` into ``buffer`` at byte ``offset``,
        on ``stream`` (None: the default stream).

        Returns once the data is in staging memory; the device copies are
        ordered before any later work on the stream.
        """
        stream = _stream(self.device, stream)
        with self.lock:
            for k, start in enumerate(range(0, data.size, CHUNK)):
                size = min(CHUNK, data.size - start)
                slot = self.slots[k % len(self.slots)]
                queue.wait(slot.ticket)
                slot.reserve(size)
                host_copy(slot.view[:size], data[start:start + size])
                self._submit_copy(stream, slot, slot.buffer, buffer, 0, offset + start, size)

    def read(self, buffer, out, offset, stream=None):
        """Copy ``out.size`` bytes of ``buffer`` from byte ``offset`` into
        ``out``, on ``stream`` (None: the default stream); returns once done."""
        stream = _stream(self.device, stream)
        starts = list(range(0, out.size, CHUNK))
        slots = self.slots
        with self.lock:
            for slot in slots:
                queue.wait(slot.ticket)

            def issue(k):
                slot = slots[k % len(slots)]
                size = min(CHUNK, out.size - starts[k])
                slot.reserve(size)
                self._submit_copy(stream, slot, buffer, slot.buffer, offset + starts[k], 0,
                                  size)

            for k in range(min(len(slots), len(starts))):
                issue(k)
            for k, start in enumerate(starts):
                size = min(CHUNK, out.size - start)
                slot = slots[k % len(slots)]
                queue.wait(slot.ticket)
                host_copy(out[start:start + size], slot.view[:size])
                if k + len(slots) < len(starts):
                    issue(k + len(slots))


class ImportFailed(DriverError):
    """The device would not import a range of host memory."""


class HostImport:
    """Copies that the device makes straight from or into host memory.

    A copy imports the pages under the host range, a piece at a time
    (``VK_EXT_external_memory_host``), records a buffer copy for each piece,
    waits for them and releases the imports, so nothing stays pinned between
    copies. Copies are serialised: some drivers refuse to pin a page twice.
    """

    def __init__(self, device):
        v = vk.module()
        self.device = device
        self.alignment = device.host_import_alignment
        function = v.lib.vkGetDeviceProcAddr(device.handle,
                                             b"vkGetMemoryHostPointerPropertiesEXT")
        if function == v.ffi.NULL:
            raise DriverError("vkGetMemoryHostPointerPropertiesEXT is missing")
        self._pointer_properties = v.ffi.cast("PFN_vkGetMemoryHostPointerPropertiesEXT",
                                              function)
        self.lock = threading.Lock()
        #: By queue family, _IMPORT_DEPTH command buffers used in turn.
        self.command_buffers = {}

    def _import(self, address, nbytes):
        """Import the whole pages under ``[address, address + nbytes)``.

        Returns ``(buffer, memory, offset)``: a transfer buffer bound to the
        imported memory, and where ``address`` lies in it. Raises
        :class:`ImportFailed`, having released everything, if the device
        refuses.
        """
        v = vk.module()
        ffi, lib = v.ffi, v.lib
        device = self.device.handle
        handle_type = v.VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT
        start = address & ~(self.alignment - 1)
        size = -(-(address + nbytes - start) // self.alignment) * self.alignment
        pointer = ffi.cast("void*", start)
        properties = vk.new("VkMemoryHostPointerPropertiesEXT*", {
            "sType": v.VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT})
        result = self._pointer_properties(device, handle_type, pointer, properties)
        if result != 0:
            raise ImportFailed(f"vkGetMemoryHostPointerPropertiesEXT failed: "
                               f"{vk.result_name(result)}", result)
        external = vk.new("VkExternalMemoryBufferCreateInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
            "handleTypes": handle_type})
        info = vk.new("VkBufferCreateInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "pNext": external,
            "size": size,
            "usage": v.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | v.VK_BUFFER_USAGE_TRANSFER_DST_BIT,
            **sharing(self.device)})
        out = vk.new("VkBuffer[1]")
        result = lib.vkCreateBuffer(device, info, ffi.NULL, out)
        if result != 0:
            raise ImportFailed(f"vkCreateBuffer failed: {vk.result_name(result)}", result)
        buffer = out[0]
        memory = None
        try:
            requirements = vk.new("VkMemoryRequirements*")
            lib.vkGetBufferMemoryRequirements(device, buffer, requirements)
            bits = requirements.memoryTypeBits & properties.memoryTypeBits
            if not bits or requirements.size > size:
                raise ImportFailed("no memory type can import this host memory")
            index = self.device.find_memory_type(
                bits, 0, preferred=v.VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
            host = vk.new("VkImportMemoryHostPointerInfoEXT*", {
                "sType": v.VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
                "handleType": handle_type, "pHostPointer": pointer})
            alloc = vk.new("VkMemoryAllocateInfo*", {
                "sType": v.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, "pNext": host,
                "allocationSize": size, "memoryTypeIndex": index})
            handle = vk.new("VkDeviceMemory[1]")
            result = lib.vkAllocateMemory(device, alloc, ffi.NULL, handle)
            if result != 0:
                raise ImportFailed(f"importing {size} bytes of host memory failed: "
                                   f"{vk.result_name(result)}", result)
            memory = handle[0]
            result = lib.vkBindBufferMemory(device, buffer, memory, 0)
            if result != 0:
                raise ImportFailed(f"vkBindBufferMemory failed: {vk.result_name(result)}",
                                   result)
        except BaseException:
            self._release(buffer, memory)
            raise
        return buffer, memory, address - start

    def _release(self, buffer, memory):
        v = vk.module()
        v.lib.vkDestroyBuffer(self.device.handle, buffer, v.ffi.NULL)
        if memory is not None:
            v.lib.vkFreeMemory(self.device.handle, memory, v.ffi.NULL)

    def _copy(self, host, nbytes, device_buffer, device_offset, to_device, stream):
        """Copy in pieces on ``stream``: importing (pinning) the next piece
        overlaps the device's copy of the last, and releasing one overlaps
        the next copies."""
        piece = max(self.alignment, IMPORT_PIECE // self.alignment * self.alignment)
        end = host + nbytes
        held = collections.deque()
        stream = _stream(self.device, stream)
        lane = stream.copy_lane
        with self.lock:
            command_buffers = self.command_buffers.get(lane.family)
            if command_buffers is None:
                command_buffers = self.command_buffers[lane.family] = [
                    lane.allocate_command_buffer() for _ in range(_IMPORT_DEPTH)]
            try:
                position, count = host, 0
                while position < end:
                    if len(held) == _IMPORT_DEPTH:
                        self._retire(held.popleft())
                    # Pieces end on page boundaries: no page is imported twice.
                    stop = min(end, (position & ~(self.alignment - 1)) + piece)
                    imported, memory, at = self._import(position, stop - position)
                    entry = [None, imported, memory]
                    held.append(entry)
                    # The piece _IMPORT_DEPTH before this one, the last to
                    # use this command buffer, has been retired.
                    command_buffer = command_buffers[count % _IMPORT_DEPTH]
                    count += 1
                    host_side = (imported, at)
                    device_side = (device_buffer.handle, device_offset + position - host)
                    (src, src_offset), (dst, dst_offset) = (
                        (host_side, device_side) if to_device else (device_side, host_side))
                    entry[0] = _record_copy(stream, command_buffer, src, dst, src_offset,
                                            dst_offset, stop - position, (device_buffer,))
                    position = stop
            finally:
                # The host memory is the caller's: every copy must be over
                # before its import is released and the call returns.
                while held:
                    self._retire(held.popleft())

    def _retire(self, entry):
        ticket, imported, memory = entry
        queue.wait(ticket)
        self._release(imported, memory)

    def write(self, buffer, data, offset, stream=None):
        """Copy the contiguous uint8 array ``data`` into ``buffer`` at
        ``offset``, on ``stream`` (None: the default stream).

        Returns once the device has copied it. Raises :class:`ImportFailed`
        if the device would not import ``data``'s memory.
        """
        self._copy(data.ctypes.data, data.size, buffer, offset, True, stream)

    def read(self, buffer, out, offset, stream=None):
        """Copy ``out.size`` bytes of ``buffer`` from ``offset`` into the
        contiguous uint8 array ``out``; as :meth:`write` otherwise."""
        self._copy(out.ctypes.data, out.size, buffer, offset, False, stream)


def staging(device):
    """The device's :class:`Staging`, made on first use."""
    with device.lock:
        if device.staging is None:
            device.staging = Staging(device)
        return device.staging


def host_import(device):
    """The device's :class:`HostImport`, or None where it cannot import."""
    if not device.host_import_alignment:
        return None
    with device.lock:
        if device.host_importer is None:
            device.host_importer = HostImport(device)
        return device.host_importer


def _importer(device, nbytes):
    if nbytes < IMPORT_MIN or not config.host_import():
        return None
    return host_import(device)


def write(buffer, data, offset, stream=None):
    """Copy the uint8 array ``data`` into ``buffer`` at ``offset`` with the
    device's DMA, on ``stream`` (None: the default stream): straight from
    ``data``'s memory where import is on and the device can import it, else
    through staging memory."""
    importer = _importer(buffer.device, data.size)
    if importer is not None:
        try:
            importer.write(buffer, data, offset, stream)
            return
        except ImportFailed:
            pass
    staging(buffer.device).write(buffer, data, offset, stream)


def read(buffer, out, offset, stream=None):
    """Copy ``out.size`` bytes of ``buffer`` from ``offset`` into the uint8
    array ``out``, by the same paths as :func:`write`."""
    importer = _importer(buffer.device, out.size)
    if importer is not None:
        try:
            importer.read(buffer, out, offset, stream)
            return
        except ImportFailed:
            pass
    staging(buffer.device).read(buffer, out, offset, stream)
