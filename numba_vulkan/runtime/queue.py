"""Queues, streams and events: submitting work to a device and waiting for it.

A device opens a few queues, each a :class:`Lane`: compute queues of one
family (the default stream has the first to itself where there are several),
and, where the device has one, a queue of a transfer-only family that copies
on user streams go to (a GPU's copy engines). Work is submitted on a
:class:`Stream`, numba.cuda's stream:

* **In order on one stream.** Each submission signals the next value of the
  stream's own timeline semaphore. One that goes to another queue than the
  stream's last submission waits for that value first; on one queue,
  submission order and the barrier every command buffer starts with (it
  makes earlier commands' writes visible) order it.
* **Unordered between streams**, so that work on streams with queues of
  their own overlaps, except where asked: ``stream.wait_event(ev)`` makes the
  stream's next submission wait for the timeline value ``ev`` recorded.
* **The default stream** (``device.stream``) is numba.cuda's legacy default
  stream: its work waits for all work submitted before it on every stream,
  and work on a user stream waits for the default stream's work submitted
  before it. Both are semaphore waits, made only when the other stream has
  submitted since the last one, and skipped where it used the same queue.

Where streams share a queue (lavapipe has one), they run in submission
order: still correct, without overlap. Every command buffer ends with a
barrier that makes its writes visible to the host once its value signals.
"""

import collections
import contextlib
import threading
import time
import weakref

import numpy as np

from numba_vulkan.base.errors import DriverError, LaunchError
from numba_vulkan.runtime import vk

#: Every this many submissions, finished ones are looked for and released.
_POLL_EVERY = 64
#: How long a wait polls before it sleeps in the driver, on a GPU.
#: On a CPU device polling would take a core from the driver's own threads.
_SPIN_SECONDS = 0.002


class Lane:
    """One ``VkQueue`` of a device, which streams share.

    Attributes:
        family: Its queue family's index.
        transfer_only: Whether that family copies but cannot run kernels.
        timestamp_bits: Valid bits of its family's timestamps (0: none).
    """

    def __init__(self, device, family, index, transfer_only, timestamp_bits):
        v = vk.module()
        self._v = v
        self.device = device
        self.family = family
        self.index = index
        self.transfer_only = transfer_only
        self.timestamp_bits = timestamp_bits
        out = vk.new("VkQueue*")
        v.lib.vkGetDeviceQueue(device.handle, family, index, out)
        self.queue = out[0]
        self.pool = device.command_pools[family]
        # Host access to a VkQueue must be externally synchronized.
        self.lock = threading.Lock()
        self._submit = v.lib.vkQueueSubmit
        if transfer_only:
            # A transfer queue accepts no compute stages in its barriers and waits.
            self.stages = v.VK_PIPELINE_STAGE_TRANSFER_BIT
            self._writes = v.VK_ACCESS_TRANSFER_WRITE_BIT
            self._accesses = v.VK_ACCESS_TRANSFER_READ_BIT | v.VK_ACCESS_TRANSFER_WRITE_BIT
        else:
            self.stages = v.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | v.VK_PIPELINE_STAGE_TRANSFER_BIT
            self._writes = v.VK_ACCESS_SHADER_WRITE_BIT | v.VK_ACCESS_TRANSFER_WRITE_BIT
            self._accesses = (v.VK_ACCESS_SHADER_READ_BIT | v.VK_ACCESS_SHADER_WRITE_BIT
                              | v.VK_ACCESS_TRANSFER_READ_BIT | v.VK_ACCESS_TRANSFER_WRITE_BIT)

    def __repr__(self):
        kind = "transfer" if self.transfer_only else "compute"
        return f"<numba_vulkan queue {self.index} of {kind} family {self.family}>"

    def allocate_command_buffer(self):
        """A new primary command buffer for this queue's family."""
        v = self._v
        info = vk.new("VkCommandBufferAllocateInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
            "commandPool": self.pool,
            "level": v.VK_COMMAND_BUFFER_LEVEL_PRIMARY, "commandBufferCount": 1})
        out = vk.new("VkCommandBuffer[1]")
        with self.device.lock:
            vk.check(v.lib.vkAllocateCommandBuffers(self.device.handle, info, out),
                     "vkAllocateCommandBuffers")
        return out[0]

    def free_command_buffer(self, command_buffer):
        with self.device.lock:
            self._v.lib.vkFreeCommandBuffers(self.device.handle, self.pool, 1, [command_buffer])

    @contextlib.contextmanager
    def recording(self, command_buffer, reusable):
        """Record into a command buffer of this family's pool, between the
        barriers that order it after earlier work on its queue and make its
        writes visible to the host.

        Commands recorded into buffers of one pool must not run on two
        threads at once, so the device's lock is held throughout.
        """
        v = self._v
        with self.device.lock:
            flags = (v.VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT if reusable
                     else v.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
            info = vk.new("VkCommandBufferBeginInfo*", {
                "sType": v.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, "flags": flags})
            vk.check(v.lib.vkBeginCommandBuffer(command_buffer, info), "vkBeginCommandBuffer")
            self._barrier(command_buffer, self.stages, self.stages, self._writes,
                          self._accesses)
            yield command_buffer
            self._barrier(command_buffer, self.stages, v.VK_PIPELINE_STAGE_HOST_BIT,
                          self._writes, v.VK_ACCESS_HOST_READ_BIT)
            vk.check(v.lib.vkEndCommandBuffer(command_buffer), "vkEndCommandBuffer")

    def _barrier(self, command_buffer, src_stage, dst_stage, src_access, dst_access):
        v = self._v
        barrier = vk.new("VkMemoryBarrier*", {
            "sType": v.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
            "srcAccessMask": src_access, "dstAccessMask": dst_access})
        v.lib.vkCmdPipelineBarrier(command_buffer, src_stage, dst_stage, 0, 1, barrier,
                                   0, v.ffi.NULL, 0, v.ffi.NULL)

    def submit(self, info):
        """Submit one ``VkSubmitInfo``."""
        with self.lock:
            result = self._submit(self.queue, 1, info, self._v.ffi.NULL)
        if result:
            vk.check(result, "vkQueueSubmit")


def _timeline_semaphore(device):
    """A new timeline semaphore of ``device`` at 0, in a one-element array."""
    v = vk.module()
    kind = vk.new("VkSemaphoreTypeCreateInfo*", {
        "sType": v.VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
        "semaphoreType": v.VK_SEMAPHORE_TYPE_TIMELINE, "initialValue": 0})
    info = vk.new("VkSemaphoreCreateInfo*", {
        "sType": v.VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, "pNext": kind})
    out = vk.new("VkSemaphore[1]")
    vk.check(v.lib.vkCreateSemaphore(device.handle, info, v.ffi.NULL, out), "vkCreateSemaphore")
    return out


class _HostTimeline:
    """A timeline semaphore the host signals: a stream's callbacks count on
    it as they return, and the stream's later work waits for it."""

    def __init__(self, device):
        v = vk.module()
        self._v = v
        self._device = device.handle
        out = _timeline_semaphore(device)
        self._semaphore_handle = out[0]
        #: The last value handed to a callback.
        self.value = 0
        self._finalizer = weakref.finalize(self, Stream._release, device.handle, out[0])
        self._finalizer.atexit = False

    def counter(self):
        """The value signalled so far."""
        out = vk.new("uint64_t[1]")
        vk.check(self._v.lib.vkGetSemaphoreCounterValue(self._device, self._semaphore_handle,
                                                        out), "vkGetSemaphoreCounterValue")
        return out[0]

    def signal(self, value):
        v = self._v
        info = vk.new("VkSemaphoreSignalInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO,
            "semaphore": self._semaphore_handle, "value": value})
        vk.check(v.lib.vkSignalSemaphore(self._device, info), "vkSignalSemaphore")


def _wait_values(device, pairs):
    """Wait on the host, without any stream's lock, until each
    ``(semaphore, value)`` is reached."""
    v = vk.module()
    semaphores = vk.new("VkSemaphore[]", [s for s, _ in pairs])
    values = vk.new("uint64_t[]", [n for _, n in pairs])
    info = vk.new("VkSemaphoreWaitInfo*", {
        "sType": v.VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, "semaphoreCount": len(pairs),
        "pSemaphores": semaphores, "pValues": values})
    vk.check(v.lib.vkWaitSemaphores(device, info, 2 ** 64 - 1), "vkWaitSemaphores")


class Stream:
    """A sequence of copies and launches on one device that run in order
    (numba.cuda's stream); see the module's description for the order
    between streams.

    Make one with :func:`stream` (``nv.stream()``, ``cuda.stream()``); the
    device's default stream is :func:`default_stream`. Pass it as
    ``kernel[groups, threads, stream]``, ``copy_to_host(ary, stream=s)``,
    ``copy_to_device(ary, stream=s)`` or ``nv.to_device(ary, stream=s)``.

    Attributes:
        device: The :class:`~numba_vulkan.runtime.device.Device`.
        lane: The :class:`Lane` its launches and events go to.
        copy_lane: The :class:`Lane` its copies go to.
    """

    def __init__(self, device, lane, copy_lane=None, default=False):
        v = vk.module()
        self._v = v
        self.device = device
        self.lane = lane
        self.copy_lane = copy_lane or lane
        self.is_default = default
        self._lock = threading.Lock()
        self._in_flight = collections.deque()
        self._semaphore = _timeline_semaphore(device)
        self._semaphore_handle = self._semaphore[0]
        self._submitted = 0
        self._completed = 0
        #: (value, lane) of the last submission, replaced whole: other
        #: streams read it without this stream's lock.
        self._last = (0, lane)
        #: Values of other streams the next submission waits for (events).
        self._pending = {}
        #: The default stream's value this stream last waited for; on the
        #: default stream, unused.
        self._seen_default = 0
        #: This stream's value the default stream last waited for.
        self._seen_by_default = 0
        #: The _HostTimeline of its callbacks, made by the first.
        self._callbacks = None
        # The submission without waits, prepared once: every launch of a
        # program without streams goes through it.
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
        self._device = device.handle
        self._get_counter = v.lib.vkGetSemaphoreCounterValue
        # A stream with work in flight is held by its device (busy_streams),
        # so it dies only once that work is done and its semaphore unused
        # (and one the default stream has not yet waited for, until it has).
        self._finalizer = weakref.finalize(self, Stream._release, device.handle,
                                           self._semaphore_handle)
        self._finalizer.atexit = False

    @staticmethod
    def _release(device, semaphore):
        v = vk.module()
        v.lib.vkDestroySemaphore(device, semaphore, v.ffi.NULL)

    def __repr__(self):
        what = "default stream" if self.is_default else "stream"
        return (f"<numba_vulkan {what} of device {self.device.id} on {self.lane!r}"
                f"{f', copies on {self.copy_lane!r}' if self.copy_lane is not self.lane else ''}>")

    # Submitting ------------------------------------------------------------

    def submit(self, command_buffer, keep_alive=(), on_done=None, lane=None):
        """Submit a command buffer recorded for ``lane``'s family (by default
        :attr:`lane`), after everything submitted on this stream before it;
        ``None`` submits no commands, only the waits and the signal.

        Args:
            keep_alive: Objects (buffers, pipelines) that must outlive the work.
            on_done: Called once the work has finished, from a wait or a
                later submission.

        Returns:
            The submission's number, for :meth:`wait_for`.
        """
        lane = lane or self.lane
        with self._lock:
            number = self._submitted + 1
            waits, seen = self._waits(lane)
            if waits:
                # The streams waited for stay alive until this work is done:
                # a semaphore may not be destroyed while a batch waits on it.
                keep_alive = (keep_alive, [other for other, _ in waits])
            if waits or command_buffer is None:
                info = self._general_info(command_buffer, number, waits, lane)
            else:
                self._signal_value[0] = number
                self._command_slot[0] = command_buffer
                info = self._submit_info
            lane.submit(info)
            # Counted only once submitted: a failed submission signals nothing,
            # and a later wait for its number would never return.
            self._submitted = number
            self._last = (number, lane)
            if seen is not None:
                self._commit(seen)
            self._in_flight.append((number, keep_alive, on_done))
            if not self.is_default:
                device = self.device
                device.busy_streams.add(self)
                # After _last, under the lock the default stream's note of
                # what it waited for takes: no value of this stream is missed.
                with device.streams_lock:
                    device.unseen_streams[self] = None
            finished = self._retire(self._poll()) if not number % _POLL_EVERY else ()
        self._finish(finished)
        return number

    def _waits(self, lane):
        """What the next submission on ``lane`` waits for: a list of
        (stream, value), and what to note once it is submitted (None when
        nothing)."""
        last, last_lane = self._last
        if (last_lane is lane and self.is_default and not self._pending
                and not self.device.unseen_streams):
            # No stream submitted anything since: nothing to wait for.
            return (), None
        waits = []
        seen = None
        if last and last_lane is not lane:
            waits.append((self, last))
        if self._pending:
            for other, value in self._pending.items():
                if other is not self:
                    waits.append((other, value))
            seen = ()
        if self.is_default:
            # Only the streams that submitted since this stream last noted them.
            noted = []
            for other in list(self.device.unseen_streams):
                value, other_lane = other._last
                noted.append((other, value))
                if value > other._seen_by_default and other_lane is not lane:
                    waits.append((other, value))
            if noted:
                seen = noted
        else:
            default = self.device.stream
            value, other_lane = default._last
            if value > self._seen_default:
                seen = value
                if other_lane is not lane:
                    waits.append((default, value))
        return waits, seen

    def _commit(self, seen):
        """Note what a submission waited for (see :meth:`_waits`)."""
        self._pending = {}
        if isinstance(seen, int):
            self._seen_default = seen
        elif seen:
            unseen = self.device.unseen_streams
            with self.device.streams_lock:
                for other, value in seen:
                    other._seen_by_default = max(other._seen_by_default, value)
                    if other._last[0] <= value:
                        unseen.pop(other, None)

    def _general_info(self, command_buffer, number, waits, lane):
        """A ``VkSubmitInfo`` with waits, or without commands; made per
        submission (the fast path's is prepared once)."""
        v = self._v
        keep = []
        semaphores = vk.new("VkSemaphore[]", [s._semaphore_handle for s, _ in waits] or 1)
        values = vk.new("uint64_t[]", [n for _, n in waits] or 1)
        stages = vk.new("VkPipelineStageFlags[]", [lane.stages] * len(waits) or 1)
        signal = vk.new("uint64_t[1]", [number])
        timeline = vk.new("VkTimelineSemaphoreSubmitInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
            "waitSemaphoreValueCount": len(waits), "pWaitSemaphoreValues": values,
            "signalSemaphoreValueCount": 1, "pSignalSemaphoreValues": signal})
        commands = vk.new("VkCommandBuffer[1]", [command_buffer or v.ffi.NULL])
        keep += [semaphores, values, stages, signal, timeline, commands]
        info = vk.new("VkSubmitInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_SUBMIT_INFO, "pNext": timeline,
            "waitSemaphoreCount": len(waits), "pWaitSemaphores": semaphores,
            "pWaitDstStageMask": stages,
            "commandBufferCount": 0 if command_buffer is None else 1,
            "pCommandBuffers": commands,
            "signalSemaphoreCount": 1, "pSignalSemaphores": self._semaphore})
        # cffi frees what nothing refers to: the info keeps its parts.
        self._keep_info = (info, keep)
        return info

    def wait_stream(self, other, value):
        """Make this stream's next submission wait until ``other`` has
        finished its submission numbered ``value``."""
        if value <= 0:
            return
        with self._lock:
            if value > self._pending.get(other, 0):
                self._pending[other] = value

    def wait_event(self, event):
        """numba.cuda's ``stream.wait_event(ev)``: work submitted on this
        stream from now on runs after the work ``event`` was recorded
        after, without the host waiting. An event not recorded is no wait."""
        event.wait(self)

    # Waiting ---------------------------------------------------------------

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
        if not self._in_flight and not self.is_default and self._callbacks_done():
            self.device.busy_streams.discard(self)
        return finished

    @staticmethod
    def _finish(finished):
        """Run finished work's callbacks; what it kept alive goes with the
        list. Both happen outside the lock: releasing the last reference to
        a pipeline synchronizes, which takes the lock again."""
        for _, _, on_done in finished:
            if on_done is not None:
                on_done()

    def wait_for(self, number):
        """Wait until this stream's submission numbered ``number`` (and all
        before it) finished.

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

    def finish(self):
        """Wait for everything submitted on this stream itself, callbacks
        included."""
        self.wait_for(self._submitted)
        timeline = self._callbacks
        if timeline is not None and not self._callbacks_done():
            _wait_values(self._device, [(timeline._semaphore_handle, timeline.value)])
            with self._lock:
                finished = self._retire(self._completed)
            self._finish(finished)

    def _callbacks_done(self):
        timeline = self._callbacks
        return timeline is None or timeline.counter() >= timeline.value

    def synchronize(self):
        """Wait for the work submitted on this stream; on the default stream,
        for all work on the device (it waits for every stream's)."""
        if self.is_default:
            self.device.synchronize()
        else:
            self.finish()

    def query(self):
        """Whether the work submitted on this stream has finished."""
        with self._lock:
            if self._completed >= self._submitted:
                return self._callbacks_done()
            finished = self._retire(self._poll())
            done = self._completed >= self._submitted
        self._finish(finished)
        return done and self._callbacks_done()

    def host_order(self):
        """Wait until the host may touch memory as work submitted on this
        stream now would: its own work, the events it waits for and, for a
        user stream, the default stream's earlier work."""
        if self.is_default:
            self.device.synchronize()
            return
        default_value = self.device.stream._last[0]
        if self._pending or default_value > self._seen_default:
            self.wait_for(self.submit(None))
        else:
            self.finish()

    @contextlib.contextmanager
    def auto_synchronize(self):
        """numba.cuda's: a context that synchronizes the stream when it exits."""
        yield self
        self.synchronize()

    def add_callback(self, callback, arg=None):
        """numba.cuda's: call ``callback(stream, status, arg)`` (``status``
        0) from a thread of its own once the work submitted on this stream
        before it has finished; work submitted on the stream after it waits,
        on the device, until the callback has returned, and so do
        :meth:`synchronize` and ``nv.synchronize()``. Callbacks of a stream
        run one at a time, in order. A callback must not launch, copy or
        synchronize (the work it would wait for may wait for it)."""
        if not callable(callback):
            raise TypeError(f"add_callback: callback must be callable, not {callback!r}")
        number = self.submit(None)
        with self._lock:
            timeline = self._callbacks
            if timeline is None:
                timeline = self._callbacks = _HostTimeline(self.device)
            timeline.value += 1
            mine = timeline.value
            self._pending[timeline] = mine
        if not self.is_default:
            self.device.busy_streams.add(self)
        threading.Thread(target=self._run_callback, args=(callback, arg, number, timeline, mine),
                         name="nv-stream-callback", daemon=True).start()

    def _run_callback(self, callback, arg, number, timeline, mine):
        # The stream's work before it, and the callback before it, first.
        _wait_values(self._device, [(self._semaphore_handle, number),
                                    (timeline._semaphore_handle, mine - 1)])
        try:
            callback(self, 0, arg)
        finally:
            timeline.signal(mine)

    def async_done(self):
        """numba.cuda's: an awaitable (an asyncio future of the running event
        loop) that resolves to this stream once the work submitted on it so
        far has finished."""
        import asyncio
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def resolve(stream, status, future):
            loop.call_soon_threadsafe(
                lambda: future.done() or future.set_result(stream))
        self.add_callback(resolve, future)
        return future


class Event:
    """numba.cuda's event: a point in a stream's work, to wait for (on the
    host or from another stream) and, with ``timing``, to time.

    A record submits, on the stream's launch queue, a command buffer that
    writes a device timestamp once everything submitted on the stream before
    it has finished (without ``timing``, an empty submission). Elapsed times
    are read off the device's clock. Timestamps of events recorded on
    streams with different queues are compared as they are; Vulkan does not
    promise that two queues' clocks agree.
    """

    def __init__(self, device, timing=True):
        v = vk.module()
        self.device = device
        self.timing = bool(timing)
        self._where = [None, 0]
        self._pool = None
        if self.timing:
            info = vk.new("VkQueryPoolCreateInfo*", {
                "sType": v.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                "queryType": v.VK_QUERY_TYPE_TIMESTAMP, "queryCount": 1})
            out = vk.new("VkQueryPool[1]")
            vk.check(v.lib.vkCreateQueryPool(device.handle, info, v.ffi.NULL, out),
                     "vkCreateQueryPool")
            self._pool = out[0]
            self._ticks = vk.new("uint64_t[1]")
        self._finalizer = weakref.finalize(self, Event._release, device, self._pool,
                                           self._where)
        self._finalizer.atexit = False

    @staticmethod
    def _release(device, pool, where):
        if pool is None:
            return
        stream, number = where
        if stream is not None:
            stream.wait_for(number)
        v = vk.module()
        v.lib.vkDestroyQueryPool(device.handle, pool, v.ffi.NULL)

    def __repr__(self):
        return f"<numba_vulkan event{' (timing)' if self.timing else ''}>"

    def record(self, stream=0):
        """Mark the point after everything submitted on ``stream`` (the
        default stream for 0 or None) so far; returns at once."""
        stream = resolve(stream, self.device)
        if not self.timing:
            number = stream.submit(None)
        else:
            lane = stream.lane
            if not lane.timestamp_bits:
                raise DriverError(f"device {self.device.info.name} has no timestamps on its "
                                  "compute queue; make the event with timing=False")
            # The query is reset by the new record: its last one must be over.
            self.synchronize()
            v = vk.module()
            command_buffer = lane.allocate_command_buffer()
            with lane.recording(command_buffer, reusable=False):
                v.lib.vkCmdResetQueryPool(command_buffer, self._pool, 0, 1)
                v.lib.vkCmdWriteTimestamp(command_buffer,
                                          v.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, self._pool, 0)
            number = stream.submit(command_buffer, keep_alive=(self,),
                                   on_done=lambda: lane.free_command_buffer(command_buffer))
            self._bits = lane.timestamp_bits
        self._where[:] = [stream, number]

    def synchronize(self):
        """Wait until the work before the last record has finished."""
        stream, number = self._where
        if stream is not None:
            stream.wait_for(number)

    def query(self):
        """Whether the work before the last record has finished (True for an
        event never recorded, as in numba.cuda)."""
        stream, number = self._where
        if stream is None:
            return True
        with stream._lock:
            return max(stream._completed, stream._poll()) >= number

    def wait(self, stream=0):
        """Make work submitted on ``stream`` from now on wait, on the device,
        for the work before this event's last record."""
        stream = resolve(stream, self.device)
        recorded, number = self._where
        if recorded is not None:
            stream.wait_stream(recorded, number)

    def _timestamp(self, which):
        if self._where[0] is None:
            raise LaunchError(f"elapsed_time: the {which} event was not recorded")
        if not self.timing:
            raise LaunchError(f"elapsed_time: the {which} event was made with timing=False")
        self.synchronize()
        v = vk.module()
        flags = v.VK_QUERY_RESULT_64_BIT | v.VK_QUERY_RESULT_WAIT_BIT
        vk.check(v.lib.vkGetQueryPoolResults(self.device.handle, self._pool, 0, 1, 8,
                                             self._ticks, 8, flags), "vkGetQueryPoolResults")
        return int(self._ticks[0]), self._bits

    def elapsed_time(self, end):
        """Milliseconds of device time from this event's record to ``end``'s
        (waiting for both)."""
        if end.device is not self.device:
            raise LaunchError("elapsed_time: the events belong to different devices")
        start, bits = self._timestamp("start")
        stop, _ = end._timestamp("end")
        mask = (1 << bits) - 1 if bits < 64 else 2 ** 64 - 1
        return ((stop - start) & mask) * self.device.timestamp_period * 1e-6


def resolve(stream, device):
    """The :class:`Stream` that a ``stream=`` argument names for work on
    ``device``: the device's default stream for 0 or None."""
    if type(stream) is Stream:
        if stream.device is not device:
            raise LaunchError(f"{stream!r} belongs to device {stream.device.id} "
                              f"({stream.device.name}), and the work runs on device "
                              f"{device.id} ({device.name}): make the stream inside "
                              f"`with nv.gpus[{device.id}]:`")
        return stream
    if stream is None or (isinstance(stream, (int, np.integer)) and not isinstance(stream, bool)
                          and stream == 0):
        return device.stream
    raise TypeError(f"a stream must be a stream (nv.stream(), cuda.stream()), 0 or None, "
                    f"not {stream!r}")


def is_stream(value):
    """Whether ``value`` is a ``stream=`` argument: a :class:`Stream`, 0 or None."""
    return (type(value) is Stream or value is None
            or (isinstance(value, (int, np.integer)) and not isinstance(value, bool)
                and value == 0))


def wait(ticket):
    """Wait for a ``(stream, number)`` ticket of a submission; None: nothing."""
    if ticket is not None:
        ticket[0].wait_for(ticket[1])

