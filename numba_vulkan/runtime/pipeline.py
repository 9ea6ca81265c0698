"""Compute pipelines, and launching them with arguments packed per the ABI."""

import collections
import struct
import threading
import weakref

from numba_vulkan.base import abi
from numba_vulkan.spirv import binary as spirv
from numba_vulkan.base.errors import LaunchError
from numba_vulkan.runtime import memory, timing, vk

#: Recorded launches kept per pipeline for reuse.
_RECORDED_LAUNCHES = 32

#: Alignment of each launch's slot in the argument buffer: the largest
#: ``minStorageBufferOffsetAlignment`` Vulkan allows, so no device limit
#: needs asking.
_SLOT_ALIGNMENT = 256


def _kernel(name):
    return f"kernel {name}" if name else "the kernel"


def _check_storage_buffers(name, params, count, info):
    """Raise LaunchError if a kernel binds more storage buffers than the device
    allows: a driver given such a layout may crash rather than fail."""
    if count <= info.max_storage_buffers:
        return
    arrays = sum(1 for p in params if p.kind == "array")
    extra = [what for kind, what in (("status", "its status buffer"),
                                     ("args", "the argument buffer"),
                                     ("print", "its print buffer"))
             if any(p.kind == kind for p in params)]
    parts = ", ".join([f"{arrays} array arguments"] + extra)
    raise LaunchError(f"{_kernel(name)} binds {count} storage buffers ({parts}), but device "
                      f"{info.name} allows {info.max_storage_buffers} per kernel (the least of "
                      "its maxPerStageDescriptorStorageBuffers, maxDescriptorSetStorageBuffers "
                      "and maxPerStageResources): pass fewer arrays, for instance several of "
                      "one shape as one array of one more dimension")


def bound_params(params):
    """The parameters bound to descriptors, in binding order: arrays, then the
    status and print buffers of kernels that have them, then the argument
    buffer of a kernel whose arguments overflow its push constants."""
    bound = [p for p in params if p.kind in ("array", "status", "print")]
    return bound + [p for p in params if p.kind == "args"][:1]


def check_layout(device, params, push_size, name=None):
    """Raise LaunchError unless the device can bind the kernel's buffers and
    push constants; return :func:`bound_params`."""
    if push_size > device.info.max_push_constants:
        raise LaunchError(f"{_kernel(name)}: its arguments need {push_size} bytes of push "
                          f"constants; the device offers {device.info.max_push_constants}: "
                          "compile it for this device's target (device.target), which "
                          "puts what does not fit in the argument buffer")
    bound = bound_params(params)
    _check_storage_buffers(name, params, len(bound), device.info)
    return bound


class Objects:
    """The shader module, layouts and compute pipeline of one module, made in
    that order; :meth:`destroy` releases those made, so a failure part way
    leaks nothing."""

    def __init__(self):
        self.shader = self.set_layout = self.layout = self.pipeline = None

    def build(self, device, spirv, bound, push_size, entry="main", cache=None, flags=0):
        """Make every object; ``flags`` are the pipeline's create flags."""
        v = vk.module()
        ffi, lib = v.ffi, v.lib
        code = ffi.new("char[]", bytes(spirv))
        info = vk.new("VkShaderModuleCreateInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
            "codeSize": len(spirv), "pCode": ffi.cast("uint32_t*", code)})
        out = vk.new("VkShaderModule[1]")
        vk.check(lib.vkCreateShaderModule(device.handle, info, ffi.NULL, out),
                 "vkCreateShaderModule")
        self.shader = out[0]
        bindings = vk.new("VkDescriptorSetLayoutBinding[]", [
            {"binding": p.binding, "descriptorType": v.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
             "descriptorCount": 1, "stageFlags": v.VK_SHADER_STAGE_COMPUTE_BIT}
            for p in bound] or 1)
        info = vk.new("VkDescriptorSetLayoutCreateInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
            "bindingCount": len(bound), "pBindings": bindings})
        out = vk.new("VkDescriptorSetLayout[1]")
        vk.check(lib.vkCreateDescriptorSetLayout(device.handle, info, ffi.NULL, out),
                 "vkCreateDescriptorSetLayout")
        self.set_layout = out[0]
        push_range = vk.new("VkPushConstantRange*", {
            "stageFlags": v.VK_SHADER_STAGE_COMPUTE_BIT, "offset": 0, "size": push_size})
        layouts = vk.new("VkDescriptorSetLayout[1]", [self.set_layout])
        info = vk.new("VkPipelineLayoutCreateInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
            "setLayoutCount": 1, "pSetLayouts": layouts,
            "pushConstantRangeCount": 1, "pPushConstantRanges": push_range})
        out = vk.new("VkPipelineLayout[1]")
        vk.check(lib.vkCreatePipelineLayout(device.handle, info, ffi.NULL, out),
                 "vkCreatePipelineLayout")
        self.layout = out[0]
        name = ffi.new("char[]", entry.encode())
        info = vk.new("VkComputePipelineCreateInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, "flags": flags,
            "stage": {"sType": v.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                      "stage": v.VK_SHADER_STAGE_COMPUTE_BIT, "module": self.shader,
                      "pName": name},
            "layout": self.layout})
        out = vk.new("VkPipeline[1]")
        cache_handle = cache.handle if cache is not None else ffi.NULL
        vk.check(lib.vkCreateComputePipelines(device.handle, cache_handle, 1, info, ffi.NULL,
                                              out), "vkCreateComputePipelines")
        self.pipeline = out[0]

    def destroy(self, device):
        """Release the objects made, newest first."""
        v = vk.module()
        lib, null = v.lib, v.ffi.NULL
        if self.pipeline is not None:
            lib.vkDestroyPipeline(device.handle, self.pipeline, null)
        if self.layout is not None:
            lib.vkDestroyPipelineLayout(device.handle, self.layout, null)
        if self.set_layout is not None:
            lib.vkDestroyDescriptorSetLayout(device.handle, self.set_layout, null)
        if self.shader is not None:
            lib.vkDestroyShaderModule(device.handle, self.shader, null)
        self.shader = self.set_layout = self.layout = self.pipeline = None


class Pipeline:
    """A compute pipeline for one SPIR-V module on one device.

    Everything that depends only on the module is made here, once: the
    shader module, descriptor set layout, pipeline layout, pipeline and the
    packer of push constants. A launch with the same buffers, scalars and
    grid as a recent one resubmits that launch's recorded command buffer.

    ``name``, the kernel's, is for error messages. A kernel binding more
    storage buffers than the device allows, or needing more push constants
    than it offers, raises :class:`~numba_vulkan.base.errors.LaunchError` before
    any driver call.

    A kernel whose arguments do not all fit the push constant block reads
    the rest from its argument buffer (see :mod:`numba_vulkan.base.abi`): one
    host-visible buffer with a slot per recorded launch. A slot is written
    once, when its launch is recorded, and reused only after that launch is
    evicted, which waits for the device; so a launch in flight never sees
    another's arguments, and kernels that fit the block pay nothing.
    """

    def __init__(self, device, module, params, push_size, entry="main", cache=None,
                 name=None):
        v = vk.module()
        ffi, lib = v.ffi, v.lib
        self.device = device
        self.params = tuple(params)
        self.push_size = push_size
        # Arrays, then the status and print buffers of kernels that have them.
        self.arrays = [p for p in self.params if p.kind in ("array", "status", "print")]
        self.args = next((p for p in self.params if p.kind == "args"), None)
        self.packer = struct.Struct(abi.push_format(self.params, push_size))
        bound = check_layout(device, self.params, push_size, name)
        made = Objects()
        made.build(device, module, bound, push_size, entry, cache)
        self.shader, self.set_layout = made.shader, made.set_layout
        self.layout, self.pipeline = made.layout, made.pipeline
        if cache is not None:
            cache.changed()
        sizes = vk.new("VkDescriptorPoolSize[1]", [{
            "type": v.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            "descriptorCount": max(1, len(bound)) * _RECORDED_LAUNCHES}])
        info = vk.new("VkDescriptorPoolCreateInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
            "flags": v.VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT,
            "maxSets": _RECORDED_LAUNCHES, "poolSizeCount": 1, "pPoolSizes": sizes})
        out = vk.new("VkDescriptorPool[1]")
        vk.check(lib.vkCreateDescriptorPool(device.handle, info, ffi.NULL, out),
                 "vkCreateDescriptorPool")
        self.descriptor_pool = out[0]
        self._recorded = collections.OrderedDict()
        if self.args is not None:
            self.args_size = abi.args_size(self.params)
            self._slot_size = -(-self.args_size // _SLOT_ALIGNMENT) * _SLOT_ALIGNMENT
            self._args_buffer = memory.Buffer(device, self._slot_size * _RECORDED_LAUNCHES,
                                              host=True)
            self._free_slots = list(range(_RECORDED_LAUNCHES))
        self._default = device.stream
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, Pipeline._release, device, made,
                                           self.descriptor_pool)
        # Positions among the arrays of buffers the module reads NonWritable
        # (codegen.readonly), and of the others, which it may write.
        readonly = spirv.nonwritable_bindings(module) if len(self.arrays) > 1 else ()
        self._readonly = tuple(k for k, p in enumerate(self.arrays) if p.binding in readonly)
        self._others = tuple(k for k, p in enumerate(self.arrays) if p.binding not in readonly)
        if self._readonly and self._others:
            self._rebuild = (module, entry, cache, name)
        else:
            self._readonly = ()
        self._aliased = None

    @staticmethod
    def _release(device, made, pool):
        v = vk.module()
        device.synchronize()
        v.lib.vkDestroyDescriptorPool(device.handle, pool, v.ffi.NULL)
        made.destroy(device)

    def pack(self, flat):
        """The push constant block of a launch, then its argument buffer's
        contents where the kernel has one.

        Args:
            flat: The workgroup counts along x, y and z, then each argument's
                values in order: a scalar, or an array's shape, element
                strides and element offset.
        """
        try:
            return self.packer.pack(*flat)
        except struct.error as exc:
            raise LaunchError(f"a kernel argument does not fit its type: {exc}") from exc

    def launch(self, groups, buffers, push, stream=None):
        """Record (or reuse) and submit a dispatch of ``groups`` workgroups.

        Args:
            groups: Workgroups along x, y and z.
            buffers: The :class:`~numba_vulkan.runtime.memory.Buffer` bound at
                each array binding.
            push: The push constant block from :meth:`pack` (followed by
                the argument buffer's contents where the kernel has one).
            stream: The :class:`~numba_vulkan.runtime.queue.Stream` (None:
                the device's default stream).
        """
        if self._readonly and any(buffers[r] is buffers[o] for r in self._readonly
                                  for o in self._others):
            self._aliasing_pipeline().launch(groups, buffers, push, stream)
            return
        if stream is None:
            stream = self._default
        # The buffers' count is fixed per pipeline, so their ids need no tuple of their own.
        key = (groups, push, *map(id, buffers))
        recorded = self._recorded
        with self._lock:
            entry = recorded.get(key)
            if entry is not None:
                for ref, buffer in zip(entry[2], buffers):
                    if ref() is not buffer:
                        # A buffer of that launch died and another took its id.
                        del recorded[key]
                        self._evict(entry)
                        entry = None
                        break
                else:
                    recorded.move_to_end(key)
            if entry is None:
                if len(recorded) >= _RECORDED_LAUNCHES:
                    self._evict(recorded.popitem(last=False)[1])
                entry = recorded[key] = self._record(groups, buffers, push)
            timer = timing.active(self.device)
            if timer is None:
                recording = entry[0].get(stream.lane.family)
                if recording is None:
                    recording = self._command_buffer(entry, stream.lane, groups, push)
                # Submitted under the lock, so that the numbers an eviction
                # waits for are the launch's last uses: one per stream, since
                # the command buffer may be pending on several at once.
                entry[4][stream] = stream.submit(recording[0], (self, buffers))
                return
            # The timer submits a command buffer of its own, under a number
            # not known here: an eviction waits for everything.
            entry[4][None] = 0
        timer.submit(lambda cb: self._dispatch(cb, groups, entry[1], push), (self, buffers),
                     stream)

    def _aliasing_pipeline(self):
        """The pipeline of this module without its NonWritable decorations,
        for launches that bind one buffer at a binding it reads NonWritable
        and at another it may write: there a driver may not read the first
        through a path that misses the second's writes."""
        with self._lock:
            if self._aliased is None:
                module, entry, cache, name = self._rebuild
                self._aliased = Pipeline(self.device, spirv.without_nonwritable(module),
                                         self.params, self.push_size, entry, cache, name)
            return self._aliased

    def _record(self, groups, buffers, push):
        slot = self._free_slots.pop() if self.args is not None else None
        try:
            return self._record_in(groups, buffers, push, slot)
        except BaseException:
            if slot is not None:
                self._free_slots.append(slot)
            raise

    def _record_in(self, groups, buffers, push, slot):
        v = vk.module()
        ffi, lib = v.ffi, v.lib
        layouts = vk.new("VkDescriptorSetLayout[1]", [self.set_layout])
        info = vk.new("VkDescriptorSetAllocateInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
            "descriptorPool": self.descriptor_pool, "descriptorSetCount": 1,
            "pSetLayouts": layouts})
        out = vk.new("VkDescriptorSet[1]")
        vk.check(lib.vkAllocateDescriptorSets(self.device.handle, info, out),
                 "vkAllocateDescriptorSets")
        descriptor_set = out[0]
        bound = [(p, {"buffer": b.handle, "offset": 0, "range": 2 ** 64 - 1})
                 for p, b in zip(self.arrays, buffers)]
        if slot is not None:
            # Free: its last launch was evicted, which waited for that launch.
            start = slot * self._slot_size
            self._args_buffer.mapped[start:start + self.args_size] = push[self.push_size:]
            bound.append((self.args, {"buffer": self._args_buffer.handle, "offset": start,
                                      "range": self.args_size}))
        if bound:
            infos = vk.new("VkDescriptorBufferInfo[]", [info for _, info in bound])
            writes = vk.new("VkWriteDescriptorSet[]", [
                {"sType": v.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "dstSet": descriptor_set,
                 "dstBinding": p.binding, "descriptorCount": 1,
                 "descriptorType": v.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                 "pBufferInfo": infos + k} for k, (p, _) in enumerate(bound)])
            lib.vkUpdateDescriptorSets(self.device.handle, len(bound), writes, 0, ffi.NULL)
        # The first element holds the recorded command buffer (and its queue)
        # by queue family, made when a stream of that family first launches
        # it; the last the number of the launch's last submission on each
        # stream (under None: one of unknown number, a timed launch).
        return [{}, descriptor_set, [weakref.ref(b) for b in buffers], slot, {}]

    def _command_buffer(self, entry, lane, groups, push):
        """Record a launch's dispatch for ``lane``'s queue family; every
        queue of that family then submits it."""
        command_buffer = lane.allocate_command_buffer()
        with lane.recording(command_buffer, reusable=True):
            self._dispatch(command_buffer, groups, entry[1], push)
        recording = entry[0][lane.family] = (command_buffer, lane)
        return recording

    def _dispatch(self, command_buffer, groups, descriptor_set, push):
        v = vk.module()
        ffi, lib = v.ffi, v.lib
        lib.vkCmdBindPipeline(command_buffer, v.VK_PIPELINE_BIND_POINT_COMPUTE, self.pipeline)
        sets = vk.new("VkDescriptorSet[1]", [descriptor_set])
        lib.vkCmdBindDescriptorSets(command_buffer, v.VK_PIPELINE_BIND_POINT_COMPUTE,
                                    self.layout, 0, 1, sets, 0, ffi.NULL)
        if self.push_size:
            data = ffi.new("char[]", push[:self.push_size])
            lib.vkCmdPushConstants(command_buffer, self.layout, v.VK_SHADER_STAGE_COMPUTE_BIT,
                                   0, self.push_size, data)
        lib.vkCmdDispatch(command_buffer, *groups)

    def _evict(self, entry):
        v = vk.module()
        recordings, descriptor_set, _, slot, last = entry
        # Only this launch's work must be done before its command buffer,
        # descriptor set and argument slot are reused; waiting for the whole
        # queue made every launch with new scalars wait once 32 were recorded.
        if None in last:
            self.device.synchronize()
        else:
            for stream, number in last.items():
                stream.wait_for(number)
        if slot is not None:
            self._free_slots.append(slot)
        for command_buffer, lane in recordings.values():
            lane.free_command_buffer(command_buffer)
        sets = vk.new("VkDescriptorSet[1]", [descriptor_set])
        vk.check(v.lib.vkFreeDescriptorSets(self.device.handle, self.descriptor_pool, 1, sets),
                 "vkFreeDescriptorSets")
