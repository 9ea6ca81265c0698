"""What the driver compiled a kernel into, through
``VK_KHR_pipeline_executable_properties``.

A pipeline is compiled into one or more executables (one for a compute
pipeline on the drivers seen so far). For each the driver may report
statistics (registers, memory, instruction counts: names and meanings are
the driver's own) and internal representations (its IR, its disassembly).

The question is answered by a pipeline built for it, with the capture flags
the extension asks for, and destroyed at once: the pipelines that launches
use are built without them, so asking changes nothing about a launch. A
driver may compile differently when asked to capture (to keep its IR, for
instance); the statistics are of the pipeline built for the question.
"""

from dataclasses import dataclass

from numba_vulkan.base.errors import NotReportedError
from numba_vulkan.runtime import pipeline, vk
from numba_vulkan.runtime.instance import EXECUTABLE_PROPERTIES_EXTENSION

_STAGES = (("vertex", 0x1), ("tessellation_control", 0x2), ("tessellation_evaluation", 0x4),
           ("geometry", 0x8), ("fragment", 0x10), ("compute", 0x20))


@dataclass(frozen=True)
class Statistic:
    """One statistic of an executable, as the driver names and describes it.

    ``value`` is an int, a float or a bool, as the driver gave it.
    """

    name: str
    description: str
    value: object


@dataclass(frozen=True)
class Representation:
    """One internal representation of an executable: ``text`` (a str where
    the driver says it is text, else bytes)."""

    name: str
    description: str
    text: object


@dataclass(frozen=True)
class Executable:
    """One executable the driver compiled a pipeline into.

    Attributes:
        name, description: The driver's.
        stages: Names of the shader stages it was compiled from.
        subgroup_size: The subgroup size it runs with.
        statistics: Its :class:`Statistic` s, in the driver's order.
        representations: Its :class:`Representation` s (empty unless asked for).
    """

    name: str
    description: str
    stages: tuple
    subgroup_size: int
    statistics: tuple
    representations: tuple = ()

    def to_json(self):
        """The executable as JSON-compatible data (binary representations
        as hex)."""
        return {
            "name": self.name, "description": self.description, "stages": list(self.stages),
            "subgroup_size": self.subgroup_size,
            "statistics": {s.name: s.value for s in self.statistics},
            "statistic_descriptions": {s.name: s.description for s in self.statistics},
            "internal_representations": [
                {"name": r.name, "description": r.description,
                 "text": r.text if isinstance(r.text, str) else r.text.hex()}
                for r in self.representations],
        }


def _functions(device):
    """The extension's three functions, from the device (the loader does not
    export extension functions)."""
    v = vk.module()
    found = []
    for name, kind in (("vkGetPipelineExecutablePropertiesKHR",
                        "PFN_vkGetPipelineExecutablePropertiesKHR"),
                       ("vkGetPipelineExecutableStatisticsKHR",
                        "PFN_vkGetPipelineExecutableStatisticsKHR"),
                       ("vkGetPipelineExecutableInternalRepresentationsKHR",
                        "PFN_vkGetPipelineExecutableInternalRepresentationsKHR")):
        address = v.lib.vkGetDeviceProcAddr(device.handle, name.encode())
        if address == v.ffi.NULL:
            raise NotReportedError(f"device {device.info.name} enabled "
                                   f"{EXECUTABLE_PROPERTIES_EXTENSION} but has no {name}")
        found.append(v.ffi.cast(kind, address))
    return found


def _text(chars):
    return vk.ffi().string(chars).decode(errors="replace")


def _value(statistic):
    v = vk.module()
    kind = statistic.format
    if kind == v.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
        return bool(statistic.value.b32)
    if kind == v.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
        return int(statistic.value.i64)
    if kind == v.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
        return int(statistic.value.u64)
    if kind == v.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR:
        return float(statistic.value.f64)
    return None


def _counted(function, what, ctype, stype, *head):
    """Call a two-call Vulkan enumeration: the count, then the structs.

    Returns the array of structs (which owns them: elements taken from it
    are valid only while it lives) and how many the driver wrote.
    """
    v = vk.module()
    count = vk.new("uint32_t*")
    vk.check(function(*head, count, v.ffi.NULL), what)
    items = vk.new(f"{ctype}[]", [{"sType": stype} for _ in range(count[0])] or 1)
    vk.check(function(*head, count, items), what)
    return items, count[0]


def require(device):
    """Raise :class:`~numba_vulkan.base.errors.NotReportedError` unless the
    device tells about the executables of its pipelines."""
    if not getattr(device, "pipeline_executables", False):
        raise NotReportedError(
            f"device {device.info.name} does not report what its driver compiled a kernel "
            f"into: it lacks {EXECUTABLE_PROPERTIES_EXTENSION} (or its feature "
            "pipelineExecutableInfo)")


def inspect(device, spirv, params, push_size, entry="main", name=None, representations=False):
    """The :class:`Executable` s the device's driver compiles a kernel into.

    Args:
        device: The :class:`~numba_vulkan.runtime.device.Device`.
        spirv, params, push_size, entry: The kernel's module, ABI
            parameters, push constant bytes and entry point, as for
            :class:`~numba_vulkan.runtime.pipeline.Pipeline`.
        name: The kernel's name, for error messages.
        representations: Whether to fetch the internal representations too.

    Raises :class:`~numba_vulkan.base.errors.NotReportedError` where the device
    lacks the extension, :class:`~numba_vulkan.base.errors.DriverError` where a
    call fails.
    """
    require(device)
    v = vk.module()
    properties_of, statistics_of, representations_of = _functions(device)
    bound = pipeline.check_layout(device, params, push_size, name)
    flags = v.VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR
    if representations:
        flags |= v.VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR
    made = pipeline.Objects()
    try:
        # No pipeline cache: a cached binary may come without what capturing keeps.
        made.build(device, spirv, bound, push_size, entry, flags=flags)
        info = vk.new("VkPipelineInfoKHR*", {
            "sType": v.VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, "pipeline": made.pipeline})
        found, count = _counted(properties_of, "vkGetPipelineExecutablePropertiesKHR",
                                "VkPipelineExecutablePropertiesKHR",
                                v.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR,
                                device.handle, info)
        executables = []
        for index in range(count):
            props = found[index]
            which = vk.new("VkPipelineExecutableInfoKHR*", {
                "sType": v.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                "pipeline": made.pipeline, "executableIndex": index})
            statistics, n = _counted(statistics_of, "vkGetPipelineExecutableStatisticsKHR",
                                     "VkPipelineExecutableStatisticKHR",
                                     v.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR,
                                     device.handle, which)
            texts = (_representations(representations_of, device, which)
                     if representations else ())
            executables.append(Executable(
                name=_text(props.name), description=_text(props.description),
                stages=tuple(stage for stage, bit in _STAGES if props.stages & bit),
                subgroup_size=int(props.subgroupSize),
                statistics=tuple(Statistic(_text(s.name), _text(s.description), _value(s))
                                 for s in (statistics[i] for i in range(n))),
                representations=tuple(texts)))
        return executables
    finally:
        made.destroy(device)


def _representations(function, device, which):
    """The internal representations of one executable: their count, then
    each one's size, then their data."""
    v = vk.module()
    what = "vkGetPipelineExecutableInternalRepresentationsKHR"
    items, n = _counted(function, what, "VkPipelineExecutableInternalRepresentationKHR",
                        v.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR,
                        device.handle, which)
    if not n:
        return []
    found = [items[i] for i in range(n)]
    buffers = []
    for item in found:
        buffers.append(v.ffi.new("char[]", max(1, item.dataSize)))
        item.pData = buffers[-1]
    count = vk.new("uint32_t*", len(found))
    vk.check(function(device.handle, which, count, items), what)
    out = []
    for item, data in zip(found, buffers):
        raw = bytes(v.ffi.buffer(data, item.dataSize))
        text = raw.split(b"\0", 1)[0].decode(errors="replace") if item.isText else raw
        out.append(Representation(_text(item.name), _text(item.description), text))
    return out


#: Which statistic, by the name its driver reports it under, gives each
#: quantity numba.cuda's kernels report: ``(names, per_subgroup)``, where
#: ``per_subgroup`` means the driver counts it for a whole subgroup (to be
#: divided by the executable's subgroup size). Names are compared without
#: regard to case. Found in the drivers' sources and reports: NVIDIA's
#: "Register Count"; Mesa's RADV (AMD) "VGPRs" (vector registers, per
#: invocation), "LDS size" (bytes of workgroup memory) and "Scratch size"
#: (bytes of private memory per subgroup); Mesa's ANV (Intel) "Workgroup
#: Memory Size" (bytes). A quantity no driver names is not guessed at.
QUANTITIES = {
    "registers": (("Register Count", "VGPRs"), False),
    "shared_memory": (("LDS size", "Workgroup Memory Size"), False),
    "local_memory": (("Scratch size",), True),
    "max_threads": ((), False),
}

_WHAT = {"registers": "registers per invocation", "shared_memory": "shared memory per block",
         "local_memory": "local memory per invocation",
         "max_threads": "the most threads per block it can launch with"}


def quantity(executables, which, device_name="the device", kernel=None):
    """The value of quantity ``which`` (a key of :data:`QUANTITIES`) the
    driver reported for a kernel's compute executable.

    Raises :class:`~numba_vulkan.base.errors.NotReportedError` where no statistic
    gives it, naming the statistics the driver did report.
    """
    names, per_subgroup = QUANTITIES[which]
    wanted = {n.lower() for n in names}
    compute = [e for e in executables if "compute" in e.stages] or list(executables)
    reported = []
    for executable in compute:
        for statistic in executable.statistics:
            reported.append(statistic.name)
            if statistic.name.lower() in wanted and isinstance(statistic.value, (int, float)) \
                    and not isinstance(statistic.value, bool):
                value = statistic.value
                if per_subgroup:
                    value = value // max(1, executable.subgroup_size)
                return int(value)
    of = f" of {kernel}" if kernel else ""
    listed = ", ".join(repr(n) for n in reported) or "none"
    raise NotReportedError(f"{device_name} does not report {_WHAT[which]}{of}: none of its "
                           f"driver's statistics gives it (it reports {listed})")
