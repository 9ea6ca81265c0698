"""Submitting work to a device's queue and waiting for it.

Work runs in submission order, like CUDA's default stream: every command
buffer this package records starts with a barrier that makes earlier
commands' writes visible, and ends with one that makes its own writes
visible to the host once its fence signals.
"""

import threading

from numba_vulkan.runtime import vk


class Queue:
    """The submission queue of one :class:`~numba_vulkan.runtime.device.Device`."""

    def __init__(self, device):
        v = vk.module()
        self.device = device
        self._v = v
        self._lock = threading.Lock()
        self._free_fences = []
        self._in_flight = []
        self._submit_info = vk.new("VkSubmitInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_SUBMIT_INFO, "commandBufferCount": 1})
        self._command_slot = vk.new("VkCommandBuffer[1]")
        self._submit_info.pCommandBuffers = self._command_slot
        self._fence_slot = vk.new("VkFence[1]")

    def allocate_command_buffer(self):
        """A new primary command buffer from the device's pool."""
        v = self._v
        info = vk.new("VkCommandBufferAllocateInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
            "commandPool": self.device.command_pool,
            "level": v.VK_COMMAND_BUFFER_LEVEL_PRIMARY, "commandBufferCount": 1})
        out = vk.new("VkCommandBuffer[1]")
        with self.device.lock:
            vk.check(v.lib.vkAllocateCommandBuffers(self.device.handle, info, out),
                     "vkAllocateCommandBuffers")
        return out[0]

    def free_command_buffer(self, command_buffer):
        with self.device.lock:
            self._v.lib.vkFreeCommandBuffers(self.device.handle, self.device.command_pool,
                                             1, [command_buffer])

    def begin(self, command_buffer, reusable):
        """Start recording, with the barrier that orders this after earlier work."""
        v = self._v
        flags = (v.VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT if reusable
                 else v.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
        info = vk.new("VkCommandBufferBeginInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, "flags": flags})
        vk.check(v.lib.vkBeginCommandBuffer(command_buffer, info), "vkBeginCommandBuffer")
        self._barrier(command_buffer,
                      v.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | v.VK_PIPELINE_STAGE_TRANSFER_BIT,
                      v.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | v.VK_PIPELINE_STAGE_TRANSFER_BIT,
                      v.VK_ACCESS_SHADER_WRITE_BIT | v.VK_ACCESS_TRANSFER_WRITE_BIT,
                      v.VK_ACCESS_SHADER_READ_BIT | v.VK_ACCESS_SHADER_WRITE_BIT
                      | v.VK_ACCESS_TRANSFER_READ_BIT | v.VK_ACCESS_TRANSFER_WRITE_BIT)

    def end(self, command_buffer):
        """Finish recording, making this work's writes visible to the host."""
        v = self._v
        self._barrier(command_buffer,
                      v.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | v.VK_PIPELINE_STAGE_TRANSFER_BIT,
                      v.VK_PIPELINE_STAGE_HOST_BIT,
                      v.VK_ACCESS_SHADER_WRITE_BIT | v.VK_ACCESS_TRANSFER_WRITE_BIT,
                      v.VK_ACCESS_HOST_READ_BIT)
        vk.check(v.lib.vkEndCommandBuffer(command_buffer), "vkEndCommandBuffer")

    def _barrier(self, command_buffer, src_stage, dst_stage, src_access, dst_access):
        v = self._v
        barrier = vk.new("VkMemoryBarrier*", {
            "sType": v.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
            "srcAccessMask": src_access, "dstAccessMask": dst_access})
        v.lib.vkCmdPipelineBarrier(command_buffer, src_stage, dst_stage, 0, 1, barrier,
                                   0, v.ffi.NULL, 0, v.ffi.NULL)

    def _fence(self):
        if self._free_fences:
            return self._free_fences.pop()
        v = self._v
        info = vk.new("VkFenceCreateInfo*", {"sType": v.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO})
        out = vk.new("VkFence[1]")
        vk.check(v.lib.vkCreateFence(self.device.handle, info, v.ffi.NULL, out), "vkCreateFence")
        return out[0]

    def submit(self, command_buffer, keep_alive=(), on_done=None):
        """Submit a recorded command buffer.

        Args:
            keep_alive: Objects (buffers, pipelines) that must outlive the work.
            on_done: Called once the work has finished, from :meth:`synchronize`.
        """
        lib = self._v.lib
        with self._lock:
            fence = self._fence()
            self._command_slot[0] = command_buffer
            with self.device.lock:
                vk.check(lib.vkQueueSubmit(self.device.queue, 1, self._submit_info, fence),
                         "vkQueueSubmit")
            self._in_flight.append((fence, keep_alive, on_done))

    def synchronize(self):
        """Wait until all submitted work has finished."""
        lib = self._v.lib
        with self._lock:
            pending, self._in_flight = self._in_flight, []
            if not pending:
                return
            fences = vk.new("VkFence[]", [fence for fence, _, _ in pending])
            vk.check(lib.vkWaitForFences(self.device.handle, len(pending), fences, 1,
                                         2 ** 64 - 1), "vkWaitForFences")
            vk.check(lib.vkResetFences(self.device.handle, len(pending), fences),
                     "vkResetFences")
            self._free_fences.extend(fence for fence, _, _ in pending)
        for _, _, on_done in pending:
            if on_done is not None:
                on_done()

    def run_once(self, record, keep_alive=()):
        """Record commands with ``record(command_buffer)``, run them and wait."""
        command_buffer = self.allocate_command_buffer()
        try:
            self.begin(command_buffer, reusable=False)
            record(command_buffer)
            self.end(command_buffer)
            self.submit(command_buffer, keep_alive)
            self.synchronize()
        finally:
            self.free_command_buffer(command_buffer)
