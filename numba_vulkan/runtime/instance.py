"""The Vulkan instance and physical device discovery: what each device is
and offers (:class:`DeviceInfo`), read without opening it."""

import os
from dataclasses import dataclass, field

from numba_vulkan.base import system
from numba_vulkan.base import config
from numba_vulkan.base.errors import DriverError
from numba_vulkan.runtime import vk
from numba_vulkan.base.target import LAVAPIPE_LOOP_LIMIT, TargetDescription


#: The device extension with native float atomic add.
ATOMIC_FLOAT_EXTENSION = "VK_EXT_shader_atomic_float"
#: The device extension that lets the device read and write host memory it
#: did not allocate (a NumPy array's own pages).
HOST_IMPORT_EXTENSION = "VK_EXT_external_memory_host"
#: The device extension through which the driver tells what it compiled a
#: pipeline into: statistics (registers, memory) and internal
#: representations (its IR, disassembly); see
#: :mod:`numba_vulkan.runtime.executables`.
EXECUTABLE_PROPERTIES_EXTENSION = "VK_KHR_pipeline_executable_properties"


def _version(major, minor, patch=0):
    return (major << 22) | (minor << 12) | patch


def _split_version(value):
    return (value >> 22) & 0x7F, (value >> 12) & 0x3FF, value & 0xFFF


@dataclass(frozen=True)
class DeviceInfo:
    """What matters about a Vulkan device for running kernels.

    Attributes:
        index: Position in the loader's device list.
        name: The driver's name for the device.
        vendor_id, device_id, driver_version: As the driver reports them.
        api_version: Vulkan version ``(major, minor, patch)``.
        device_type: ``"cpu"``, ``"discrete"``, ``"integrated"``, ``"virtual"``
            or ``"other"``.
        features: Names of the optional features the device has, such as
            ``float64``, ``int64``, ``float16`` (``shaderFloat16``),
            ``float16_rte`` (``shaderRoundingModeRTEFloat16``), ``int16``,
            ``int8``, ``storage8``,
            ``storage16``, ``int64_atomics``, ``float32_atomic_add`` (native
            float32 atomic add on buffers and workgroup memory), the subgroup
            operation classes of compute shaders ``subgroup_vote``,
            ``subgroup_arithmetic``, ``subgroup_ballot``, ``subgroup_shuffle``,
            ``subgroup_shuffle_relative``, and ``subgroup_extended_types``
            (subgroup operations on 8-, 16- and 64-bit integers).
        subgroup_size: Invocations per subgroup.
        max_workgroup_size: Largest workgroup along x, y and z.
        max_workgroup_invocations: Largest workgroup, all axes together.
        max_workgroup_count: Most workgroups along x, y and z.
        max_shared_memory: Bytes of workgroup memory.
        max_push_constants: Bytes of push constants.
        max_storage_buffers: Storage buffers one kernel may bind: the least
            of ``maxPerStageDescriptorStorageBuffers``,
            ``maxDescriptorSetStorageBuffers`` and ``maxPerStageResources``
            (32 on lavapipe; drivers crash on a layout beyond it).
        pipeline_cache_uuid: Identifies pipeline cache data the driver accepts.
        compute_units: Streaming multiprocessors (NVIDIA, through
            VK_NV_shader_sm_builtins), compute units (AMD, through
            VK_AMD_shader_core_properties) or CPU threads (a CPU device); 0
            where the driver does not say.
    """

    index: int
    name: str
    vendor_id: int
    device_id: int
    driver_version: int
    api_version: tuple
    device_type: str
    features: frozenset
    subgroup_size: int
    max_workgroup_size: tuple
    max_workgroup_invocations: int
    max_workgroup_count: tuple
    max_shared_memory: int
    max_push_constants: int
    max_storage_buffers: int
    pipeline_cache_uuid: str = field(default="")
    compute_units: int = 0

    def target(self):
        """The :class:`TargetDescription` kernels for this device compile for."""
        major, minor, _ = self.api_version
        vulkan = min((major, minor), (1, 3))
        return TargetDescription(vulkan=vulkan, float64="float64" in self.features,
                                 int64="int64" in self.features,
                                 max_push_constants=min(self.max_push_constants, 256),
                                 float32_atomic_add="float32_atomic_add" in self.features,
                                 loop_limit=LAVAPIPE_LOOP_LIMIT if self.is_lavapipe else 0,
                                 float16="float16" in self.features,
                                 # Only arithmetic in float16 needs it.
                                 float16_rte={"float16", "float16_rte"} <= self.features,
                                 fused_fma=(self.vendor_id in _FUSED_FMA_VENDORS
                                            and self.device_type != "cpu"),
                                 nvidia_rsqrt=(self.vendor_id == _NVIDIA_VENDOR_ID
                                               and self.device_type != "cpu"))

    @property
    def is_lavapipe(self):
        """Whether this is Mesa's CPU driver, lavapipe (its device: llvmpipe)."""
        return self.vendor_id == _MESA_VENDOR_ID and self.name.startswith("llvmpipe")


#: PCI vendor ids of NVIDIA, AMD, Intel and Apple, whose GPUs compute
#: GLSL's Fma with their fused multiply-add instruction. A CPU driver of
#: theirs, or another vendor's GPU, is not assumed to.
_FUSED_FMA_VENDORS = frozenset({0x10DE, 0x1002, 0x8086, 0x106B})

#: NVIDIA's PCI vendor ID: its GPUs' float32 InverseSqrt is the hardware
#: reciprocal root that numba-cuda's correctly rounded root is built on.
_NVIDIA_VENDOR_ID = 0x10DE


#: VK_VENDOR_ID_MESA, the vendor of Mesa's software drivers.
_MESA_VENDOR_ID = 0x10005


_DEVICE_TYPES = {0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "cpu"}


class Instance:
    """The Vulkan instance and the devices it sees."""

    def __init__(self):
        v = vk.module()
        ffi, lib = v.ffi, v.lib
        self._keep = []
        app = vk.new("VkApplicationInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_APPLICATION_INFO,
            "pApplicationName": self._cstr("numba_vulkan"),
            "pEngineName": self._cstr("numba_vulkan"),
            "apiVersion": _version(1, 3)})
        extensions = self._instance_extensions()
        wanted = [e for e in ("VK_KHR_portability_enumeration",) if e in extensions]
        names = vk.new("char*[]", [self._cstr(e) for e in wanted]) if wanted else ffi.NULL
        info = vk.new("VkInstanceCreateInfo*", {
            "sType": v.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
            "flags": 1 if wanted else 0,
            "pApplicationInfo": app,
            "enabledExtensionCount": len(wanted),
            "ppEnabledExtensionNames": names})
        handle = vk.new("VkInstance*")
        result = lib.vkCreateInstance(info, ffi.NULL, handle)
        if result == v.VK_ERROR_INCOMPATIBLE_DRIVER:
            raise DriverError(f"no Vulkan driver was found. {system.how_to_get('driver')}", result)
        vk.check(result, "vkCreateInstance")
        self.handle = handle[0]
        count = vk.new("uint32_t*")
        vk.check(lib.vkEnumeratePhysicalDevices(self.handle, count, ffi.NULL),
                 "vkEnumeratePhysicalDevices")
        physical = vk.new("VkPhysicalDevice[]", count[0])
        vk.check(lib.vkEnumeratePhysicalDevices(self.handle, count, physical),
                 "vkEnumeratePhysicalDevices", allowed=(0, v.VK_INCOMPLETE))
        self.physical = [physical[i] for i in range(count[0])]
        self.devices = [self._describe(i, p) for i, p in enumerate(self.physical)]
        if not self.devices:
            raise DriverError(f"the Vulkan loader found no device (no Vulkan driver is "
                              f"installed). {system.how_to_get('driver')}")

    def _cstr(self, text):
        data = vk.new("char[]", text.encode())
        self._keep.append(data)
        return data

    @staticmethod
    def _instance_extensions():
        v = vk.module()
        count = vk.new("uint32_t*")
        vk.check(v.lib.vkEnumerateInstanceExtensionProperties(v.ffi.NULL, count, v.ffi.NULL),
                 "vkEnumerateInstanceExtensionProperties")
        props = vk.new("VkExtensionProperties[]", count[0])
        vk.check(v.lib.vkEnumerateInstanceExtensionProperties(v.ffi.NULL, count, props),
                 "vkEnumerateInstanceExtensionProperties", allowed=(0, v.VK_INCOMPLETE))
        return {v.ffi.string(props[i].extensionName).decode() for i in range(count[0])}

    def _describe(self, index, physical):
        v = vk.module()
        ffi, lib = v.ffi, v.lib
        subgroup = vk.new("VkPhysicalDeviceSubgroupProperties*", {
            "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES})
        props2 = vk.new("VkPhysicalDeviceProperties2*", {
            "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": subgroup})
        lib.vkGetPhysicalDeviceProperties2(physical, props2)
        props = props2.properties
        limits = props.limits
        features = self.query_features(physical)[0]
        uuid = bytes(ffi.buffer(props.pipelineCacheUUID, 16)).hex()
        return DeviceInfo(
            index=index,
            name=ffi.string(props.deviceName).decode(errors="replace"),
            vendor_id=props.vendorID, device_id=props.deviceID,
            driver_version=props.driverVersion,
            api_version=_split_version(props.apiVersion),
            device_type=_DEVICE_TYPES.get(props.deviceType, "other"),
            features=frozenset(features),
            subgroup_size=subgroup.subgroupSize,
            max_workgroup_size=tuple(limits.maxComputeWorkGroupSize[i] for i in range(3)),
            max_workgroup_invocations=limits.maxComputeWorkGroupInvocations,
            max_workgroup_count=tuple(limits.maxComputeWorkGroupCount[i] for i in range(3)),
            max_shared_memory=limits.maxComputeSharedMemorySize,
            max_push_constants=limits.maxPushConstantsSize,
            max_storage_buffers=min(limits.maxPerStageDescriptorStorageBuffers,
                                    limits.maxDescriptorSetStorageBuffers,
                                    limits.maxPerStageResources),
            pipeline_cache_uuid=uuid,
            compute_units=self._compute_units(physical, props.deviceType))

    @staticmethod
    def _compute_units(physical, device_type):
        v = vk.module()
        if device_type == v.VK_PHYSICAL_DEVICE_TYPE_CPU:
            return os.cpu_count() or 0
        extensions = Instance.device_extensions(physical)
        if "VK_NV_shader_sm_builtins" in extensions:
            sm = _extension_properties(
                physical, "VkPhysicalDeviceShaderSMBuiltinsPropertiesNV",
                v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV)
            return sm.shaderSMCount
        if "VK_AMD_shader_core_properties" in extensions:
            core = _extension_properties(
                physical, "VkPhysicalDeviceShaderCorePropertiesAMD",
                v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD)
            return (core.shaderEngineCount * core.shaderArraysPerEngineCount
                    * core.computeUnitsPerShaderArray)
        return 0

    @staticmethod
    def query_features(physical):
        """Feature names the device has, and the cffi structs that enable them."""
        v = vk.module()
        f11 = vk.new("VkPhysicalDeviceVulkan11Features*", {
            "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES})
        f12 = vk.new("VkPhysicalDeviceVulkan12Features*", {
            "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, "pNext": f11})
        f2 = vk.new("VkPhysicalDeviceFeatures2*", {
            "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, "pNext": f12})
        atomic_float = None
        if ATOMIC_FLOAT_EXTENSION in Instance.device_extensions(physical):
            atomic_float = vk.new("VkPhysicalDeviceShaderAtomicFloatFeaturesEXT*", {
                "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT})
            f11.pNext = atomic_float
        v.lib.vkGetPhysicalDeviceFeatures2(physical, f2)
        core = f2.features
        names = {
            "float64": core.shaderFloat64, "int64": core.shaderInt64,
            "float16": f12.shaderFloat16,
            "int16": core.shaderInt16, "int8": f12.shaderInt8,
            "storage8": f12.storageBuffer8BitAccess,
            "storage16": f11.storageBuffer16BitAccess,
            "int64_atomics": f12.shaderBufferInt64Atomics,
            "float32_atomic_add": atomic_float is not None and (
                atomic_float.shaderBufferFloat32AtomicAdd
                and atomic_float.shaderSharedFloat32AtomicAdd),
            "subgroup_extended_types": f12.shaderSubgroupExtendedTypes,
            **Instance.subgroup_operations(physical),
            "float16_rte": Instance.rounds_float16_to_nearest(physical),
        }
        masked = config.mask_features()
        have = {n for n, on in names.items() if on and n not in masked}
        return have, (f2, f12, f11)

    @staticmethod
    def rounds_float16_to_nearest(physical):
        """Whether modules may ask for float16 rounded to nearest, ties to even
        (``shaderRoundingModeRTEFloat16`` of Vulkan 1.2's float controls)."""
        v = vk.module()
        controls = vk.new("VkPhysicalDeviceFloatControlsProperties*", {
            "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES})
        props2 = vk.new("VkPhysicalDeviceProperties2*", {
            "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": controls})
        v.lib.vkGetPhysicalDeviceProperties2(physical, props2)
        return bool(controls.shaderRoundingModeRTEFloat16)

    @staticmethod
    def subgroup_operations(physical):
        """Which classes of subgroup operations compute shaders may use, by feature name."""
        v = vk.module()
        subgroup = vk.new("VkPhysicalDeviceSubgroupProperties*", {
            "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES})
        props2 = vk.new("VkPhysicalDeviceProperties2*", {
            "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": subgroup})
        v.lib.vkGetPhysicalDeviceProperties2(physical, props2)
        compute = bool(subgroup.supportedStages & v.VK_SHADER_STAGE_COMPUTE_BIT)
        bits = {"subgroup_vote": v.VK_SUBGROUP_FEATURE_VOTE_BIT,
                "subgroup_arithmetic": v.VK_SUBGROUP_FEATURE_ARITHMETIC_BIT,
                "subgroup_ballot": v.VK_SUBGROUP_FEATURE_BALLOT_BIT,
                "subgroup_shuffle": v.VK_SUBGROUP_FEATURE_SHUFFLE_BIT,
                "subgroup_shuffle_relative": v.VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT}
        return {name: compute and bool(subgroup.supportedOperations & bit)
                for name, bit in bits.items()}

    @staticmethod
    def device_extensions(physical):
        """Names of the device extensions a physical device offers."""
        v = vk.module()
        count = vk.new("uint32_t*")
        vk.check(v.lib.vkEnumerateDeviceExtensionProperties(physical, v.ffi.NULL, count,
                                                            v.ffi.NULL),
                 "vkEnumerateDeviceExtensionProperties")
        props = vk.new("VkExtensionProperties[]", count[0])
        vk.check(v.lib.vkEnumerateDeviceExtensionProperties(physical, v.ffi.NULL, count, props),
                 "vkEnumerateDeviceExtensionProperties", allowed=(0, v.VK_INCOMPLETE))
        return {v.ffi.string(props[i].extensionName).decode() for i in range(count[0])}


def _extension_properties(physical, struct, structure_type):
    """The properties struct ``struct`` of a device extension, filled by
    vkGetPhysicalDeviceProperties2."""
    v = vk.module()
    properties = vk.new(f"{struct}*", {"sType": structure_type})
    v.lib.vkGetPhysicalDeviceProperties2(physical, vk.new("VkPhysicalDeviceProperties2*", {
        "sType": v.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": properties}))
    return properties
