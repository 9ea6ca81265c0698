"""Submitting work to a device's queue and waiting for it.

Work runs in submission order, like CUDA's default stream: every command
buffer this package records starts with a barrier that makes earlier
commands' writes visible, and ends with one that makes its own writes
visible to the host once its fence signals.
"""

import collections
import contextlib
import threading
import time

from numba_vulkan.runtime import vk

#: Every this many submissions, finished ones are looked for and released.
_POLL_EVERY = 64
#: How long synchronize() polls before it sleeps in the driver, on a GPU.
#: On a CPU device polling would take a core from the driver's own threads.
_SPIN_SECONDS = 0.002


class Queue:
    """The submission queue of one :class:`~numba_vulkan.runtime.device.Device`."""

    def __init__(self, device):
        v = vk.module()
        self.device = device
        self._v = v
        self._lock = threading.Lock()
        self._in_flight = collections.deque()
        # One timeline semaphore counts finished submissions: waiting for the
        # last value covers all earlier work, and nothing needs resetting.
        kind = vk.new("VkSemaphoreTypeCreateInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
            "semaphoreType": v.VK_SEMAPHORE_TYPE_TIMELINE, "initialValue": 0})
        info = vk.new("VkSemaphoreCreateInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, "pNext": kind})
        out = vk.new("VkSemaphore[1]")
        vk.check(v.lib.vkCreateSemaphore(device.handle, info, v.ffi.NULL, out),
                 "vkCreateSemaphore")
        self._semaphore = out
        self._submitted = 0
        self._completed = 0
        self._signal_value = vk.new("uint64_t[1]")
        self._timeline_info = vk.new("VkTimelineSemaphoreSubmitInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
            "signalSemaphoreValueCount": 1, "pSignalSemaphoreValues": self._signal_value})
        self._command_slot = vk.new("VkCommandBuffer[1]")
        self._submit_info = vk.new("VkSubmitInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_SUBMIT_INFO, "pNext": self._timeline_info,
            "commandBufferCount": 1, "pCommandBuffers": self._command_slot,
            "signalSemaphoreCount": 1, "pSignalSemaphores": self._semaphore})
        self._spin = 0.0 if device.info.device_type == "cpu" else _SPIN_SECONDS
        self._counter = vk.new("uint64_t[1]")
        self._wait_value = vk.new("uint64_t[1]")
        self._wait_info = vk.new("VkSemaphoreWaitInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, "semaphoreCount": 1,
            "pSemaphores": self._semaphore, "pValues": self._wait_value})
        # Looked up once: every launch and wait goes through these.
        self._device, self._queue, self._null = device.handle, device.queue, v.ffi.NULL
        self._semaphore_handle = self._semaphore[0]
        self._queue_submit = v.lib.vkQueueSubmit
        self._get_counter = v.lib.vkGetSemaphoreCounterValue

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

    @contextlib.contextmanager
    def recording(self, command_buffer, reusable):
        """Record into a command buffer of the device's pool, between the
        barriers that order it after earlier work and make its writes
        visible to the host.

        Commands recorded into buffers of one pool must not run on two
        threads at once, so the device's lock is held throughout.
        """
        with self.device.lock:
            self._begin(command_buffer, reusable)
            yield command_buffer
            self._end(command_buffer)

    def _begin(self, command_buffer, reusable):
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

    def _end(self, command_buffer):
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

    def submit(self, command_buffer, keep_alive=(), on_done=None):
        """Submit a recorded command buffer.

        Args:
            keep_alive: Objects (buffers, pipelines) that must outlive the work.
            on_done: Called once the work has finished, from :meth:`synchronize`
                or a later submission.

        Returns:
            The submission's number, for :meth:`wait_for`.
        """
        with self._lock:
            number = self._submitted + 1
            self._signal_value[0] = number
            self._command_slot[0] = command_buffer
            # This lock alone guards the VkQueue: nothing else submits to it.
            result = self._queue_submit(self._queue, 1, self._submit_info, self._null)
            if result:
                vk.check(result, "vkQueueSubmit")
            # Counted only once submitted: a failed submission signals nothing,
            # and a later wait for its number would never return.
            self._submitted = number
            self._in_flight.append((number, keep_alive, on_done))
            finished = self._retire(self._poll()) if not number % _POLL_EVERY else ()
        self._finish(finished)
        return number

    def _poll(self):
        result = self._get_counter(self._device, self._semaphore_handle, self._counter)
        if result:
            vk.check(result, "vkGetSemaphoreCounterValue")
        return self._counter[0]

    def _retire(self, completed):
        """Take the submissions up to ``completed`` off the in-flight list."""
        self._completed = max(self._completed, completed)
        finished = []
        while self._in_flight and self._in_flight[0][0] <= completed:
            finished.append(self._in_flight.popleft())
        return finished

    @staticmethod
    def _finish(finished):
        """Run finished work's callbacks; what it kept alive goes with the
        list. Both happen outside the lock: releasing the last reference to
        a pipeline synchronizes, which takes the lock again."""
        for _, _, on_done in finished:
            if on_done is not None:
                on_done()

    def synchronize(self):
        """Wait until all submitted work has finished."""
        self.wait_for(self._submitted)

    def wait_for(self, number):
        """Wait until the submission numbered ``number`` (and all before) finished.

        Spins briefly first on a GPU: a short kernel finishes sooner than the
        operating system wakes a sleeping waiter.
        """
        with self._lock:
            target = min(number, self._submitted)
            if self._completed >= target:
                return
            counter = self._counter
            if self._poll() < target and self._spin:
                # The loop calls the driver directly: each pass it saves is
                # time between the work finishing and this call noticing.
                get, device, semaphore = self._get_counter, self._device, self._semaphore_handle
                clock = time.perf_counter
                deadline = clock() + self._spin
                while counter[0] < target and clock() < deadline:
                    result = get(device, semaphore, counter)
                    if result:
                        vk.check(result, "vkGetSemaphoreCounterValue")
            if counter[0] < target:
                self._wait_value[0] = target
                vk.check(self._v.lib.vkWaitSemaphores(self._device, self._wait_info,
                                                      2 ** 64 - 1), "vkWaitSemaphores")
            finished = self._retire(target)
        self._finish(finished)
