"""Device time of launches, measured with Vulkan timestamp queries.

A wall clock around ``launch(); synchronize()`` also counts the host's
launch path, the submission and the wait. To see the kernel alone::

    from numba_vulkan.runtime.timing import KernelTimer

    with KernelTimer() as timer:
        for _ in range(10):
            kernel[groups, threads](x, y)
            nv.synchronize()
    timer.times        # seconds per launch, read from the device's clock

Inside the block, each launch on the timer's device (from the thread that
entered it) runs in a command buffer of its own with a timestamp before
and after the dispatch. Both timestamps wait for all earlier work, so a
launch queued behind another is not charged for the wait. The times are
read when the work is synchronized, in submission order.
"""

import threading
import weakref

from numba_vulkan.base.errors import DriverError, LaunchError
from numba_vulkan.runtime import vk
from numba_vulkan.runtime.device import current_device


class _State(threading.local):
    # A class attribute: reading it costs no failed lookup, on every launch
    # of a thread that never timed anything.
    timer = None


_state = _State()


def active(device):
    """The timer in use on ``device`` in this thread, or None."""
    timer = _state.timer
    if timer is not None and timer.device is device:
        return timer
    return None


class KernelTimer:
    """Times each launch made inside ``with KernelTimer():`` on the device.

    Args:
        device: A :class:`~numba_vulkan.runtime.device.Device`; the current
            one by default.
        capacity: Launches that may be in flight at once; one more waits for
            the earlier ones first.

    Attributes:
        times: Device time of each synchronized launch, in seconds.

    Raises:
        DriverError: The device's compute queue has no timestamps.
    """

    def __init__(self, device=None, capacity=64):
        if device is None:
            device = current_device()
        v = vk.module()
        ffi, lib = v.ffi, v.lib
        self.device = device
        self.times = []
        count = vk.new("uint32_t*")
        lib.vkGetPhysicalDeviceQueueFamilyProperties(device.physical, count, ffi.NULL)
        families = vk.new("VkQueueFamilyProperties[]", count[0])
        lib.vkGetPhysicalDeviceQueueFamilyProperties(device.physical, count, families)
        bits = families[device.queue_family].timestampValidBits
        if not bits:
            raise DriverError(f"device {device.info.name} has no timestamps on its compute "
                              f"queue; time launches with a wall clock instead")
        self._mask = (1 << bits) - 1 if bits < 64 else 2 ** 64 - 1
        props = vk.new("VkPhysicalDeviceProperties*")
        lib.vkGetPhysicalDeviceProperties(device.physical, props)
        self._seconds_per_tick = props.limits.timestampPeriod * 1e-9
        info = vk.new("VkQueryPoolCreateInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
            "queryType": v.VK_QUERY_TYPE_TIMESTAMP, "queryCount": 2 * capacity})
        out = vk.new("VkQueryPool[1]")
        vk.check(lib.vkCreateQueryPool(device.handle, info, ffi.NULL, out),
                 "vkCreateQueryPool")
        self._pool = out[0]
        self._free = list(range(capacity))
        self._ticks = vk.new("uint64_t[2]")
        self._finalizer = weakref.finalize(self, KernelTimer._release, device, self._pool)

    @staticmethod
    def _release(device, pool):
        device.synchronize()
        v = vk.module()
        v.lib.vkDestroyQueryPool(device.handle, pool, v.ffi.NULL)

    def __enter__(self):
        if _state.timer is not None:
            raise LaunchError("KernelTimer blocks do not nest")
        _state.timer = self
        return self

    def __exit__(self, *exc):
        _state.timer = None

    def submit(self, record, keep_alive, stream):
        """Run ``record(command_buffer)``'s commands between two timestamps,
        on ``stream``.

        Called by :meth:`Pipeline.launch` in place of its own submission.
        """
        v = vk.module()
        lib = v.lib
        if not self._free:
            self.device.synchronize()
        slot = self._free.pop()
        lane = stream.lane
        command_buffer = lane.allocate_command_buffer()
        with lane.recording(command_buffer, reusable=False):
            lib.vkCmdResetQueryPool(command_buffer, self._pool, 2 * slot, 2)
            lib.vkCmdWriteTimestamp(command_buffer, v.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT,
                                    self._pool, 2 * slot)
            record(command_buffer)
            lib.vkCmdWriteTimestamp(command_buffer, v.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT,
                                    self._pool, 2 * slot + 1)
        stream.submit(command_buffer, keep_alive=(keep_alive, self),
                      on_done=lambda: self._collect(slot, command_buffer, lane))

    def _collect(self, slot, command_buffer, lane):
        v = vk.module()
        flags = v.VK_QUERY_RESULT_64_BIT | v.VK_QUERY_RESULT_WAIT_BIT
        vk.check(v.lib.vkGetQueryPoolResults(self.device.handle, self._pool, 2 * slot, 2, 16,
                                             self._ticks, 8, flags), "vkGetQueryPoolResults")
        ticks = (self._ticks[1] - self._ticks[0]) & self._mask
        self.times.append(ticks * self._seconds_per_tick)
        lane.free_command_buffer(command_buffer)
        self._free.append(slot)
