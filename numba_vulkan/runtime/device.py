"""The logical device: opening one (features, extensions, queues, memory
types), and which device each thread uses, with numba.cuda's names for
devices; the instance and the physical devices are
:mod:`numba_vulkan.runtime.instance`'s."""

import dataclasses
import operator
import threading

from numba_vulkan.base import config
from numba_vulkan.base.errors import DriverError
from numba_vulkan.runtime import vk
from numba_vulkan.runtime.instance import (ATOMIC_FLOAT_EXTENSION,
                                          EXECUTABLE_PROPERTIES_EXTENSION, HOST_IMPORT_EXTENSION,
                                          Instance)
from numba_vulkan.runtime.queue import Event, Lane, Stream


#: numba.cuda's device attributes (``cuda.get_current_device().WARP_SIZE``)
#: from a :class:`~numba_vulkan.runtime.instance.DeviceInfo`.
_CUDA_ATTRIBUTES = {
    "MAX_THREADS_PER_BLOCK": lambda i: i.max_workgroup_invocations,
    "MAX_BLOCK_DIM_X": lambda i: i.max_workgroup_size[0],
    "MAX_BLOCK_DIM_Y": lambda i: i.max_workgroup_size[1],
    "MAX_BLOCK_DIM_Z": lambda i: i.max_workgroup_size[2],
    "MAX_GRID_DIM_X": lambda i: i.max_workgroup_count[0],
    "MAX_GRID_DIM_Y": lambda i: i.max_workgroup_count[1],
    "MAX_GRID_DIM_Z": lambda i: i.max_workgroup_count[2],
    "MAX_SHARED_MEMORY_PER_BLOCK": lambda i: i.max_shared_memory,
    "WARP_SIZE": lambda i: i.subgroup_size,
    # Where the driver does not say (Intel's, Apple's), a middle-sized GPU's
    # count: a grid sized from it still covers any array.
    "MULTIPROCESSOR_COUNT": lambda i: i.compute_units or 16,
}


class CudaAttributes:
    """numba.cuda's upper-case device attributes (``MAX_THREADS_PER_BLOCK``,
    ``MAX_BLOCK_DIM_X``, ``MAX_GRID_DIM_X``, ``MAX_SHARED_MEMORY_PER_BLOCK``,
    ``WARP_SIZE``, ``MULTIPROCESSOR_COUNT``, ...) read from ``self.info``.
    ``MULTIPROCESSOR_COUNT`` is NVIDIA's SM count, AMD's compute units or a
    CPU's threads, and 16 where the driver does not say."""

    __slots__ = ()

    def __getattr__(self, name):
        attribute = _CUDA_ATTRIBUTES.get(name)
        if attribute is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return attribute(self.info)


class Device(CudaAttributes):
    """A logical device, with its queues and streams.

    It opens several compute queues where its family has them (its default
    stream, ``stream``, on the first; streams from :meth:`new_stream` on the
    others) and a transfer-only queue for the copies of those streams where
    there is one (:mod:`~numba_vulkan.runtime.queue`).
    Its arrays, pipelines and queues are its own: several logical devices,
    on several GPUs or on one, run side by side (:data:`gpus`). As a context
    manager (``with device:``) it is the current device of the calling
    thread inside the block.

    Attributes:
        info: The :class:`DeviceInfo` of the physical device, without the
            features ``NUMBA_VULKAN_MASK_FEATURES`` masked when it was opened.
        target: The :class:`TargetDescription` kernels compile for.
        id: Its position in :data:`gpus`.
        copy: Which logical device of its physical device it is (0 unless
            ``NUMBA_VULKAN_DEVICE_COPIES`` opens more than one).
    """

    def __init__(self, instance, index, copy=0):
        v = vk.module()
        self.instance = instance
        self.physical = instance.physical[index]
        self.copy = copy
        self.id = copy * len(instance.devices) + index
        self.lock = threading.RLock()
        have, (f2, f12, f11) = Instance.query_features(self.physical)
        # The mask as it is now, so that devices opened under different
        # masks describe different targets.
        self.info = dataclasses.replace(instance.devices[index], features=frozenset(have))
        if self.info.api_version[:2] < (1, 2):
            raise DriverError(f"device {self.info.name} supports Vulkan "
                              f"{'.'.join(map(str, self.info.api_version[:2]))}; numba_vulkan's "
                              "modules need Vulkan 1.2 or later (SPIR-V 1.5): update its driver, "
                              "or choose another device (nv.select_device)")
        self.target = self.info.target()
        # Enable exactly what kernels may use; nothing else.
        core = f2.features
        enabled = vk.new("VkPhysicalDeviceFeatures2*", {
            "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2})
        e12 = vk.new("VkPhysicalDeviceVulkan12Features*", {
            "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES})
        e11 = vk.new("VkPhysicalDeviceVulkan11Features*", {
            "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES})
        enabled.pNext = e12
        e12.pNext = e11
        for name in ("shaderFloat64", "shaderInt64", "shaderInt16"):
            setattr(enabled.features, name, getattr(core, name))
        #: Whether accesses outside a bound buffer are kept inside it
        #: (``robustBufferAccess``, ``NUMBA_VULKAN_ROBUST_ACCESS``).
        self.robust_access = bool(core.robustBufferAccess) and config.robust_access()
        enabled.features.robustBufferAccess = int(self.robust_access)
        for name in ("shaderInt8", "shaderFloat16", "storageBuffer8BitAccess",
                     "shaderBufferInt64Atomics",
                     "shaderSharedInt64Atomics", "uniformAndStorageBuffer8BitAccess",
                     "shaderSubgroupExtendedTypes"):
            setattr(e12, name, getattr(f12, name))
        if not f12.timelineSemaphore:
            raise DriverError(f"device {self.info.name} lacks timeline semaphores "
                              "(Vulkan 1.2 requires them)")
        e12.timelineSemaphore = 1
        for name in ("storageBuffer16BitAccess", "uniformAndStorageBuffer16BitAccess"):
            setattr(e11, name, getattr(f11, name))
        extensions = []
        if "float32_atomic_add" in have:
            atomic_float = vk.new("VkPhysicalDeviceShaderAtomicFloatFeaturesEXT*", {
                "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT,
                "shaderBufferFloat32AtomicAdd": 1, "shaderSharedFloat32AtomicAdd": 1})
            e11.pNext = atomic_float
            extensions.append(vk.new("char[]", ATOMIC_FLOAT_EXTENSION.encode()))
        #: Alignment of host memory imported by address, or 0 where the
        #: device cannot import host memory.
        self.host_import_alignment = 0
        #: The device extensions the driver offers.
        self.extensions_offered = extensions_offered = Instance.device_extensions(self.physical)
        if HOST_IMPORT_EXTENSION in extensions_offered:
            self.host_import_alignment = self._host_import_alignment()
            extensions.append(vk.new("char[]", HOST_IMPORT_EXTENSION.encode()))
        #: Whether the driver tells about the executables of a pipeline
        #: built to be asked (``VK_KHR_pipeline_executable_properties``).
        #: Enabling it changes no pipeline built without its capture flags.
        self.pipeline_executables = self._offers_executable_info(extensions_offered)
        if self.pipeline_executables:
            kind = v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR
            executable_info = vk.new(
                "VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR*", {
                    "sType": kind, "pNext": enabled.pNext,
                    "pipelineExecutableInfo": 1})
            enabled.pNext = executable_info
            extensions.append(vk.new("char[]", EXECUTABLE_PROPERTIES_EXTENSION.encode()))
        self._open_queues(enabled, extensions)
        self.staging = None
        self.host_importer = None
        #: Free buffers for launches with NumPy arrays, by size in bytes.
        self.transient_buffers = {}

    @property
    def name(self):
        """The driver's name for the device."""
        return self.info.name

    def __repr__(self):
        copy = f", logical copy {self.copy}" if self.copy else ""
        return f"<numba_vulkan Device {self.id}: {self.info.name}{copy}>"

    def __enter__(self):
        _push(self)
        return self

    def __exit__(self, *exc):
        _pop()

    def _host_import_alignment(self):
        v = vk.module()
        host = vk.new("VkPhysicalDeviceExternalMemoryHostPropertiesEXT*", {
            "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT})
        props = vk.new("VkPhysicalDeviceProperties2*", {
            "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": host})
        v.lib.vkGetPhysicalDeviceProperties2(self.physical, props)
        return int(host.minImportedHostPointerAlignment)

    def _offers_executable_info(self, offered):
        """Whether the device has ``VK_KHR_pipeline_executable_properties``
        with its feature ``pipelineExecutableInfo``."""
        if EXECUTABLE_PROPERTIES_EXTENSION not in offered:
            return False
        v = vk.module()
        kind = v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR
        feature = vk.new("VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR*",
                         {"sType": kind})
        features = vk.new("VkPhysicalDeviceFeatures2*", {
            "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, "pNext": feature})
        v.lib.vkGetPhysicalDeviceFeatures2(self.physical, features)
        return bool(feature.pipelineExecutableInfo)

    def _families(self):
        """(flags, queue count, timestamp bits) of each queue family."""
        v = vk.module()
        count = vk.new("uint32_t*")
        v.lib.vkGetPhysicalDeviceQueueFamilyProperties(self.physical, count, v.ffi.NULL)
        families = vk.new("VkQueueFamilyProperties[]", count[0])
        v.lib.vkGetPhysicalDeviceQueueFamilyProperties(self.physical, count, families)
        return [(f.queueFlags, f.queueCount, f.timestampValidBits)
                for f in (families[i] for i in range(count[0]))]

    def _open_queues(self, enabled, extensions):
        """Create the logical device with its queues: up to
        ``NUMBA_VULKAN_QUEUES`` of the first compute family (and as many of
        a compute family without graphics, with ``NUMBA_VULKAN_ASYNC_COMPUTE``),
        and up to two of a transfer-only family (where there is one and
        ``NUMBA_VULKAN_TRANSFER_QUEUE`` allows), with a command pool per
        family and the default stream."""
        v = vk.module()
        ffi, lib = v.ffi, v.lib
        families = self._families()
        compute = [i for i, (flags, _, _) in enumerate(families)
                   if flags & v.VK_QUEUE_COMPUTE_BIT]
        if not compute:
            raise DriverError(f"device {self.info.name} has no compute queue")
        self.queue_family = compute[0]
        wanted = [(self.queue_family, min(families[self.queue_family][1], config.queues()))]
        asynchronous = [i for i in compute[1:] if not families[i][0] & v.VK_QUEUE_GRAPHICS_BIT
                        and families[i][1]]
        if asynchronous and config.async_compute():
            wanted.append((asynchronous[0], min(families[asynchronous[0]][1], config.queues())))
        graphics_or_compute = v.VK_QUEUE_GRAPHICS_BIT | v.VK_QUEUE_COMPUTE_BIT
        transfer = [i for i, (flags, count, _) in enumerate(families)
                    if flags & v.VK_QUEUE_TRANSFER_BIT and not flags & graphics_or_compute
                    and count]
        copy_family = transfer[0] if transfer and config.transfer_queue() else None
        if copy_family is not None:
            wanted.append((copy_family, min(families[copy_family][1], 2)))
        priorities = vk.new("float[]", [1.0] * max(n for _, n in wanted))
        queue_infos = vk.new("VkDeviceQueueCreateInfo[]", [
            {"sType": v.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, "queueFamilyIndex": family,
             "queueCount": n, "pQueuePriorities": priorities} for family, n in wanted])
        extension_names = vk.new("char*[]", extensions) if extensions else ffi.NULL
        info = vk.new("VkDeviceCreateInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, "pNext": enabled,
            "queueCreateInfoCount": len(wanted), "pQueueCreateInfos": queue_infos,
            "enabledExtensionCount": len(extensions),
            "ppEnabledExtensionNames": extension_names})
        handle = vk.new("VkDevice*")
        vk.check(lib.vkCreateDevice(self.physical, info, ffi.NULL, handle), "vkCreateDevice")
        self.handle = handle[0]
        self.memory_types = self._memory_types()
        #: Bytes numba_vulkan holds on each memory heap, by heap index.
        self.allocated = {}
        self._allocated_lock = threading.Lock()
        #: Queue families in use; buffers are shared by all of them
        #: (VK_SHARING_MODE_CONCURRENT) when there are several.
        self.families = tuple(family for family, _ in wanted)
        self.family_indices = vk.new("uint32_t[]", list(self.families))
        self.command_pools = {}
        for family in self.families:
            pool_info = vk.new("VkCommandPoolCreateInfo*", {
                "sType": v.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                "flags": v.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                "queueFamilyIndex": family})
            pool = vk.new("VkCommandPool*")
            vk.check(lib.vkCreateCommandPool(self.handle, pool_info, ffi.NULL, pool),
                     "vkCreateCommandPool")
            self.command_pools[family] = pool[0]
        self.command_pool = self.command_pools[self.queue_family]
        lanes = {family: [Lane(self, family, k, family == copy_family, families[family][2])
                          for k in range(n)] for family, n in wanted}
        #: The compute queues of the default stream's family (the default
        #: stream has the first).
        self.lanes = lanes[self.queue_family]
        #: The compute queues that streams from new_stream() launch on, in turn.
        self.stream_lanes = self.lanes[1:] or self.lanes
        if len(wanted) > 1 and wanted[1][0] != copy_family:
            self.stream_lanes = lanes[wanted[1][0]]
        #: Transfer-only queues for copies on user streams (maybe none).
        self.copy_lanes = lanes.get(copy_family, [])
        self.queue = self.lanes[0].queue
        props = vk.new("VkPhysicalDeviceProperties*")
        lib.vkGetPhysicalDeviceProperties(self.physical, props)
        #: Nanoseconds per timestamp tick.
        self.timestamp_period = float(props.limits.timestampPeriod)
        #: The default stream: numba.cuda's legacy default stream.
        self.stream = Stream(self, self.lanes[0], default=True)
        #: Streams made by new_stream() with work in flight (held until it is
        #: done), and those that submitted since the default stream last
        #: noted them (its next submission waits for them; the keys of a dict,
        #: in the order they came), guarded by streams_lock.
        self.busy_streams = set()
        self.unseen_streams = {}
        self.streams_lock = threading.Lock()
        #: How many streams new_stream() made.
        self.streams_made = 0

    def new_stream(self):
        """A new :class:`~numba_vulkan.runtime.queue.Stream`: its launches go
        to :attr:`stream_lanes` in turn (the compute queues after the default
        stream's, the default's own where there is one), its copies to a
        transfer-only queue where the device opened one."""
        with self.lock:
            k = self.streams_made
            self.streams_made += 1
        others = self.stream_lanes
        copy_lane = self.copy_lanes[k % len(self.copy_lanes)] if self.copy_lanes else None
        return Stream(self, others[k % len(others)], copy_lane)

    def synchronize(self):
        """Wait for all work submitted on every stream of this device."""
        self.stream.finish()
        if self.busy_streams:
            for stream in list(self.busy_streams):
                stream.finish()

    def memory_info(self):
        """``(free, total)`` bytes of the device's largest device-local memory
        heap: the driver's budget where it has VK_EXT_memory_budget, else the
        heap's size less what numba_vulkan has allocated on it."""
        v = vk.module()
        budget = None
        if "VK_EXT_memory_budget" in self.extensions_offered:
            budget = vk.new("VkPhysicalDeviceMemoryBudgetPropertiesEXT*", {
                "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT})
        props2 = vk.new("VkPhysicalDeviceMemoryProperties2*", {
            "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
            "pNext": budget if budget is not None else v.ffi.NULL})
        v.lib.vkGetPhysicalDeviceMemoryProperties2(self.physical, props2)
        props = props2.memoryProperties
        heaps = [i for i in range(props.memoryHeapCount)
                 if props.memoryHeaps[i].flags & v.VK_MEMORY_HEAP_DEVICE_LOCAL_BIT] or [0]
        heap = max(heaps, key=lambda i: props.memoryHeaps[i].size)
        total = props.memoryHeaps[heap].size
        if budget is not None:
            free = budget.heapBudget[heap] - budget.heapUsage[heap]
        else:
            with self._allocated_lock:
                free = total - self.allocated.get(heap, 0)
        return max(0, min(free, total)), total

    def count_allocation(self, memory_type, nbytes):
        """Note ``nbytes`` (negative: freed) of memory of ``memory_type``, for
        :meth:`memory_info`."""
        heap = self.memory_types[memory_type][1]
        with self._allocated_lock:
            self.allocated[heap] = self.allocated.get(heap, 0) + nbytes

    def _memory_types(self):
        v = vk.module()
        props = vk.new("VkPhysicalDeviceMemoryProperties*")
        v.lib.vkGetPhysicalDeviceMemoryProperties(self.physical, props)
        return [(props.memoryTypes[i].propertyFlags, props.memoryTypes[i].heapIndex)
                for i in range(props.memoryTypeCount)]

    def find_memory_type(self, type_bits, required, preferred=0, avoid=0):
        """Index of a memory type allowed by ``type_bits`` with the ``required``
        property flags, preferring ``preferred`` and avoiding ``avoid``."""
        candidates = [i for i, (flags, _) in enumerate(self.memory_types)
                      if type_bits & (1 << i) and flags & required == required]
        if not candidates:
            return None

        def score(i):
            flags = self.memory_types[i][0]
            return (flags & preferred == preferred, not flags & avoid)

        return max(candidates, key=score)


_lock = threading.RLock()
_instance = None
#: Open logical devices, by their position in :data:`gpus`.
_devices = {}
#: The device of threads that chose none.
_default = None
#: Per thread: ``device``, the thread's current device (None: the default),
#: and ``stack``, what it was before each ``with`` block now entered.
_local = threading.local()


def instance():
    """The process's Vulkan instance, created on first use."""
    global _instance
    with _lock:
        if _instance is None:
            _instance = Instance()
        return _instance


def list_devices():
    """Every physical Vulkan device the loader sees, as :class:`DeviceInfo`."""
    return list(instance().devices)


def queue_families(index):
    """The queue families of physical device ``index`` (of
    :func:`list_devices`), as ``(kinds, queue count, timestamp bits)``:
    ``kinds`` names what its queues do (``graphics``, ``compute``,
    ``transfer``)."""
    v = vk.module()
    physical = instance().physical[index]
    count = vk.new("uint32_t*")
    v.lib.vkGetPhysicalDeviceQueueFamilyProperties(physical, count, v.ffi.NULL)
    families = vk.new("VkQueueFamilyProperties[]", count[0])
    v.lib.vkGetPhysicalDeviceQueueFamilyProperties(physical, count, families)
    bits = (("graphics", v.VK_QUEUE_GRAPHICS_BIT), ("compute", v.VK_QUEUE_COMPUTE_BIT),
            ("transfer", v.VK_QUEUE_TRANSFER_BIT))
    return [(tuple(name for name, bit in bits if families[i].queueFlags & bit),
             families[i].queueCount, families[i].timestampValidBits) for i in range(count[0])]


def device_count():
    """How many logical devices :data:`gpus` lists: every physical device,
    ``NUMBA_VULKAN_DEVICE_COPIES`` times."""
    return len(instance().devices) * config.device_copies()


def _resolve(selector):
    """The :data:`gpus` position a selector names: an index (as an int or
    digits) or (part of) a device's name, which names its first logical device."""
    count = device_count()
    if isinstance(selector, int) or (isinstance(selector, str) and selector.isdigit()):
        index = int(selector)
        if not 0 <= index < count:
            raise DriverError(f"there is no Vulkan device {index}; {count} device(s) were "
                              f"found{_copies_note()}")
        return index
    devices = instance().devices
    matches = [d.index for d in devices if str(selector).lower() in d.name.lower()]
    if not matches:
        names = ", ".join(repr(d.name) for d in devices)
        raise DriverError(f"no Vulkan device matches {selector!r}; devices: {names}")
    return matches[0]


def _copies_note():
    copies = config.device_copies()
    return (f" ({len(instance().devices)} physical, NUMBA_VULKAN_DEVICE_COPIES={copies})"
            if copies > 1 else "")


def _default_index():
    selector = config.device()
    if selector is not None:
        return _resolve(selector)
    order = {"discrete": 0, "integrated": 1, "virtual": 2, "cpu": 3, "other": 4}
    return min(instance().devices, key=lambda d: (order[d.device_type], d.index)).index


def open_device(index):
    """The logical device at position ``index`` of :data:`gpus`, opened on
    first use; makes nothing current."""
    with _lock:
        device = _devices.get(index)
        if device is None:
            physical = len(instance().devices)
            device = _devices[index] = Device(instance(), index % physical, index // physical)
        return device


def as_device(value):
    """A :class:`Device` from a device, an entry of :data:`gpus`, a
    :data:`gpus` index or (part of) a name; None for None. Makes nothing current."""
    if value is None or isinstance(value, Device):
        return value
    if isinstance(value, Gpu):
        return value.device
    if isinstance(value, bool):
        raise TypeError(f"not a device: {value!r}")
    if not isinstance(value, str) and hasattr(value, "__index__"):
        value = operator.index(value)       # a NumPy integer
    return open_device(_resolve(value))


def select_device(selector):
    """Make a device current for the calling thread, and the default of
    threads that chose none; by :data:`gpus` index, by (part of) its name,
    or as a :class:`Device` or :data:`gpus` entry. Returns the :class:`Device`."""
    global _default
    with _lock:
        device = as_device(selector)
        _local.device = device
        _default = device
        return device


def _push(device):
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(getattr(_local, "device", None))
    _local.device = device


def _pop():
    _local.device = _local.stack.pop()


def opened_device():
    """The calling thread's current :class:`Device` if one is open, else
    None; opens nothing."""
    return getattr(_local, "device", None) or _default


def current_device():
    """The calling thread's current :class:`Device`, opening the default one
    on first use.

    A thread's current device is the one of the innermost ``with`` block it
    is in (``with nv.gpus[i]:``), else the one it last selected, else the
    default: the device ``select_device`` last chose in any thread, else
    ``NUMBA_VULKAN_DEVICE`` if set, else the first discrete GPU, else an
    integrated one, else any.
    """
    global _default
    # Without the lock: every launch asks, and both are replaced whole.
    current = getattr(_local, "device", None) or _default
    if current is not None:
        return current
    with _lock:
        if _default is None:
            _default = open_device(_default_index())
        return _default


#: numba.cuda's name for :func:`current_device`.
get_current_device = current_device


def _device(device):
    return as_device(device) or current_device()


def stream(device=None):
    """A new :class:`~numba_vulkan.runtime.queue.Stream` on ``device`` (the
    calling thread's current device by default): ``nv.stream()``."""
    return _device(device).new_stream()


def default_stream(device=None):
    """The default :class:`~numba_vulkan.runtime.queue.Stream` of ``device``
    (the current device by default): numba.cuda's legacy default stream."""
    return _device(device).stream


def event(timing=True, device=None):
    """A new :class:`~numba_vulkan.runtime.queue.Event` on ``device`` (the
    current device by default): ``nv.event()``."""
    return Event(_device(device), timing)


class Gpu(CudaAttributes):
    """One logical device, as an entry of :data:`gpus`; opened on first use.

    ``with nv.gpus[i]:`` makes it the calling thread's current device inside
    the block (the previous one is current again after it); the block's
    ``as`` target is the :class:`Device`.

    Attributes:
        id: Its position in :data:`gpus`.
    """

    __slots__ = ("id",)

    def __init__(self, id):
        self.id = id

    @property
    def info(self):
        """The :class:`DeviceInfo` of its physical device, opening nothing."""
        devices = instance().devices
        return devices[self.id % len(devices)]

    @property
    def name(self):
        """The driver's name for the device."""
        return self.info.name

    @property
    def device(self):
        """The :class:`Device`, opened on first use."""
        return open_device(self.id)

    def __enter__(self):
        device = self.device
        _push(device)
        return device

    def __exit__(self, *exc):
        _pop()

    def __eq__(self, other):
        return isinstance(other, Gpu) and other.id == self.id

    def __hash__(self):
        return hash(("gpu", self.id))

    def __repr__(self):
        copy = self.id // len(instance().devices)
        return (f"<numba_vulkan gpu {self.id}: {self.name}"
                f"{f', logical copy {copy}' if copy else ''}>")


class Gpus:
    """Every logical device, by position: each physical Vulkan device in the
    loader's order, ``NUMBA_VULKAN_DEVICE_COPIES`` times over (positions
    ``0 .. P-1`` are the P physical devices; the next P their second logical
    devices, and so on). Listing opens no device.
    """

    def __len__(self):
        return device_count()

    def __getitem__(self, index):
        count = device_count()
        if isinstance(index, slice):
            return [Gpu(i) for i in range(count)[index]]
        if isinstance(index, bool) or not hasattr(index, "__index__"):
            raise TypeError(f"gpus[{index!r}]: the index must be an int")
        index = operator.index(index)
        if not -count <= index < count:
            raise IndexError(f"gpus[{index}]: there are {count} device(s)"
                             f"{_copies_note()}")
        return Gpu(index % count)

    def __iter__(self):
        return iter(self[:])

    @property
    def current(self):
        """The calling thread's current :class:`Device` (opened on first use)."""
        return current_device()

    def __repr__(self):
        return f"<numba_vulkan gpus: {len(self)} device(s)>"


#: Every logical device: ``nv.gpus[i]``, ``len(nv.gpus)``, ``with nv.gpus[i]:``.
gpus = Gpus()
