"""Moving bytes between host memory and device buffers, fast.

Two things limit a copy: one thread's memcpy (a few GB/s from pageable
memory), and, where device memory is not host-visible, waiting for each DMA
before the next host copy. So host copies are split across threads (NumPy
releases the GIL while copying), and copies through staging memory go in
chunks through two staging buffers: while the device moves one chunk, the
host fills or drains the other.
"""

import concurrent.futures
import os
import threading

import numpy as np

from numba_vulkan.runtime import vk

#: Bytes per staging chunk.
CHUNK = 32 << 20
#: Copies smaller than this run on the calling thread alone.
_PARALLEL_MIN = 4 << 20

_pool_lock = threading.Lock()
_pool = None


def _threads():
    return max(1, min(8, os.cpu_count() or 1))


def _executor():
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(_threads(),
                                                          thread_name_prefix="nv-copy")
        return _pool


def host_copy(dst, src):
    """Copy the uint8 array ``src`` into the uint8 array ``dst`` of equal size."""
    n = src.size
    parts = _threads() if n >= _PARALLEL_MIN else 1
    if parts == 1:
        np.copyto(dst, src)
        return
    step = -(-n // parts)
    futures = [_executor().submit(np.copyto, dst[i:i + step], src[i:i + step])
               for i in range(0, n, step)]
    for future in futures:
        future.result()


class _Slot:
    __slots__ = ("buffer", "view", "command_buffer", "ticket")

    def __init__(self, device):
        from numba_vulkan.runtime.memory import Buffer
        self.buffer = Buffer(device, CHUNK, host=True)
        self.view = self.buffer.host_view()
        self.command_buffer = device.stream.allocate_command_buffer()
        self.ticket = 0


class Staging:
    """Two host-visible chunks through which one device's copies go."""

    def __init__(self, device):
        self.device = device
        self.lock = threading.Lock()
        self.slots = [_Slot(device), _Slot(device)]

    def _submit_copy(self, slot, src, dst, src_offset, dst_offset, size):
        v = vk.module()
        stream = self.device.stream
        region = vk.new("VkBufferCopy*", {"srcOffset": src_offset, "dstOffset": dst_offset,
                                          "size": size})
        stream.begin(slot.command_buffer, reusable=False)
        v.lib.vkCmdCopyBuffer(slot.command_buffer, src.handle, dst.handle, 1, region)
        stream.end(slot.command_buffer)
        slot.ticket = stream.submit(slot.command_buffer, keep_alive=(src, dst))

    def write(self, buffer, data, offset):
        """Copy the uint8 array ``data`` into ``buffer`` at byte ``offset``.

        Returns once the data is in staging memory; the device copies are
        ordered before any later launch.
        """
        stream = self.device.stream
        with self.lock:
            for k, start in enumerate(range(0, data.size, CHUNK)):
                size = min(CHUNK, data.size - start)
                slot = self.slots[k % 2]
                stream.wait_for(slot.ticket)
                host_copy(slot.view[:size], data[start:start + size])
                self._submit_copy(slot, slot.buffer, buffer, 0, offset + start, size)

    def read(self, buffer, out, offset):
        """Copy ``out.size`` bytes of ``buffer`` from byte ``offset`` into ``out``."""
        stream = self.device.stream
        starts = list(range(0, out.size, CHUNK))
        with self.lock:
            for slot in self.slots:
                stream.wait_for(slot.ticket)

            def issue(k):
                start = starts[k]
                size = min(CHUNK, out.size - start)
                self._submit_copy(self.slots[k % 2], buffer, self.slots[k % 2].buffer,
                                  offset + start, 0, size)

            for k in range(min(2, len(starts))):
                issue(k)
            for k, start in enumerate(starts):
                size = min(CHUNK, out.size - start)
                slot = self.slots[k % 2]
                stream.wait_for(slot.ticket)
                host_copy(out[start:start + size], slot.view[:size])
                if k + 2 < len(starts):
                    issue(k + 2)


def staging(device):
    """The device's :class:`Staging`, made on first use."""
    with device.lock:
        if device.staging is None:
            device.staging = Staging(device)
        return device.staging
