"""Checking a SPIR-V module that came from disk before a driver sees it.

A module read from an AOT directory or the kernel cache is only as good as
the files it came from: its digest proves that it is the module the index
names, not that the index tells the truth about it. Drivers are not
required to survive invalid SPIR-V (an id bound of ``0xffffffff`` crashes
lavapipe), and a module whose interface differs from what the runtime
binds computes garbage. So before such a module reaches the driver:

* :func:`check_header`: magic, a SPIR-V version the target's Vulkan version
  accepts, schema 0, an id bound that the module's size can justify, and
  instruction lengths that tile the module;
* :func:`check_interface`: one ``GLCompute`` entry point ``main``, its
  literal workgroup size, the storage buffers it declares (set 0, each at a
  binding the runtime fills, with elements of the binding's storage dtype)
  and the extent of its push constant block, against what the runtime will
  bind; only storage classes a compute kernel of ours uses;
* :func:`check_params`: the parameters and push constant size an index or
  cache entry claims are those :func:`numba_vulkan.base.abi.layout` gives for its
  argument types.

Each raises ValueError saying what differs. Plain Python over the module's
words: no Numba, no external tool; ``spirv-val`` runs separately.
"""

import dataclasses
import hashlib
import os
import struct
import subprocess

import numpy as np

from numba_vulkan.base import abi
from numba_vulkan.base import config
from numba_vulkan.base import files
from numba_vulkan.base import records
from numba_vulkan.base import signature
from numba_vulkan.spirv import binary as spirv
from numba_vulkan.spirv import opcodes as spv
from numba_vulkan.spirv import tools
from numba_vulkan.spirv.binary import MAGIC

#: Vulkan version -> newest SPIR-V version (major, minor) it consumes.
SPIRV_FOR_VULKAN = {(1, 0): (1, 0), (1, 1): (1, 3), (1, 2): (1, 5), (1, 3): (1, 6)}

#: The largest id bound any consumer must accept (SPIR-V's universal limits).
MAX_ID_BOUND = 0x3FFFFF


#: Storage classes of module-level variables a kernel of ours may declare
#: (Input for built-ins).
_KERNEL_STORAGE = frozenset({spv.StorageClassInput, spv.StorageClassWorkgroup,
                             spv.StorageClassPrivate, spv.StorageClassPushConstant,
                             spv.StorageClassStorageBuffer})

def _words(binary):
    if not isinstance(binary, (bytes, bytearray, memoryview)):
        raise ValueError("not a SPIR-V module: not bytes")
    if len(binary) < 20 or len(binary) % 4:
        raise ValueError(f"not a SPIR-V module: {len(binary)} bytes")
    words = struct.unpack(f"<{len(binary) // 4}I", binary)
    if words[0] != MAGIC:
        raise ValueError("not a SPIR-V module: bad magic number")
    return words


def check_header(binary, vulkan=None):
    """Check a module's header and instruction lengths; ValueError if wrong.

    Args:
        binary: The module.
        vulkan: The ``(major, minor)`` Vulkan version it must run on, or None.

    Returns:
        The module's words.
    """
    words = _words(binary)
    version, bound, schema = words[1], words[3], words[4]
    major, minor = (version >> 16) & 0xFF, (version >> 8) & 0xFF
    if version & 0xFF0000FF or (major, minor) < (1, 0):
        raise ValueError(f"not a SPIR-V module: version word {version:#010x}")
    if vulkan is not None:
        newest = SPIRV_FOR_VULKAN.get(tuple(vulkan))
        if newest is None or (major, minor) > newest:
            raise ValueError(f"SPIR-V {major}.{minor} is newer than Vulkan "
                             f"{'.'.join(map(str, vulkan))} accepts")
    # Every id is defined by an instruction of two words or more, so a sound
    # module's bound is at most its word count; drivers size tables by it.
    if not 1 <= bound <= min(MAX_ID_BOUND, len(words)):
        raise ValueError(f"SPIR-V id bound {bound} does not fit a module of {len(words)} words")
    if schema:
        raise ValueError(f"SPIR-V schema {schema} is reserved")
    i = 5
    while i < len(words):
        count = words[i] >> 16
        if count == 0 or i + count > len(words):
            raise ValueError(f"SPIR-V instruction at word {i} has a bad length")
        i += count
    return words


def _string(words, start):
    raw = struct.pack(f"<{len(words) - start}I", *words[start:])
    end = raw.find(b"\0")
    if end < 0:
        raise ValueError("SPIR-V string without its terminator")
    return raw[:end].decode("utf-8", "replace"), start + end // 4 + 1


@dataclasses.dataclass
class Interface:
    """What a module declares that the runtime must match.

    Attributes:
        capabilities: Capability names, in order.
        entry_points: ``(execution model, function id, name)`` per entry point.
        local_size: ``(x, y, z)`` of the ``main`` entry point, or None.
        buffers: Storage buffer binding -> ``(kind, bits)`` of its elements
            (kind ``"float"`` or ``"int"``).
        push_extent: Bytes of the push constant block the module reads.
        problems: Declarations no kernel of ours makes.
        workgroup_bytes: Bytes of its workgroup (shared) variables.
    """

    capabilities: list
    entry_points: list
    local_size: tuple
    buffers: dict
    push_extent: int
    problems: list
    workgroup_bytes: int = 0


def interface(binary, words=None):
    """The :class:`Interface` of a module (header checked unless ``words`` given)."""
    words = words if words is not None else check_header(binary)
    types, decorations, offsets, variables, constants = {}, {}, {}, [], {}
    capabilities, entry_points, modes, problems = [], [], {}, []
    i = 5
    while i < len(words):
        count, op = words[i] >> 16, words[i] & 0xFFFF
        inst = words[i:i + count]
        i += count
        if op == spv.OpFunction:
            break  # declarations all precede the first function
        if op == spv.OpCapability and count == 2:
            capabilities.append(spv.CAPABILITIES.get(inst[1], str(inst[1])))
        elif op == spv.OpEntryPoint and count >= 4:
            name, _ = _string(inst, 3)
            entry_points.append((inst[1], inst[2], name))
        elif op == spv.OpExecutionMode and count >= 3:
            modes.setdefault(inst[1], []).append(tuple(inst[2:]))
        elif op == spv.OpExecutionModeId:
            problems.append("an execution mode with id operands (LocalSizeId)")
        elif op in (spv.OpTypeBool, spv.OpTypeInt, spv.OpTypeFloat, spv.OpTypeVector,
                    spv.OpTypeArray, spv.OpTypeRuntimeArray, spv.OpTypeStruct,
                    spv.OpTypePointer) and count >= 2:
            types[inst[1]] = (op, tuple(inst[2:]))
        elif op == spv.OpConstant and count == 4:
            constants[inst[2]] = inst[3]
        elif op == spv.OpVariable and count >= 4:
            variables.append((inst[1], inst[2], inst[3]))
        elif op == spv.OpDecorate and count >= 3:
            decorations.setdefault(inst[1], []).append(tuple(inst[2:]))
            if inst[2] == spv.DecorationBuiltIn and count >= 4 \
                    and inst[3] == spv.BuiltInWorkgroupSize:
                problems.append("a WorkgroupSize built-in, which overrides LocalSize")
        elif op == spv.OpMemberDecorate and count >= 5 and inst[3] == spv.DecorationOffset:
            offsets[(inst[1], inst[2])] = inst[4]
    local_size = None
    for model, function, name in entry_points:
        if name == "main":
            sizes = [m[1:4] for m in modes.get(function, ())
                     if m[0] == spv.ExecutionModeLocalSize and len(m) == 4]
            local_size = tuple(sizes[0]) if len(sizes) == 1 else None

    def size_of(type_id, depth=0):
        kind = types.get(type_id)
        if kind is None or depth > 8:
            raise ValueError(f"SPIR-V type %{type_id} is not a plain data type")
        op, operands = kind
        if op in (spv.OpTypeInt, spv.OpTypeFloat) and operands:
            return max(1, operands[0] // 8)
        if op == spv.OpTypeVector and len(operands) == 2:
            return size_of(operands[0], depth + 1) * operands[1]
        if op == spv.OpTypeArray and len(operands) == 2 and operands[1] in constants:
            return size_of(operands[0], depth + 1) * constants[operands[1]]
        if op == spv.OpTypeStruct:
            return max((offsets.get((type_id, k), 0) + size_of(t, depth + 1)
                        for k, t in enumerate(operands)), default=0)
        raise ValueError(f"SPIR-V type %{type_id} is not a plain data type")

    buffers, push_extent, push_blocks, workgroup_bytes = {}, 0, 0, 0
    for pointer, var, storage in variables:
        if storage not in _KERNEL_STORAGE:
            problems.append(f"a variable %{var} of storage class {storage}")
            continue
        if storage == spv.StorageClassWorkgroup:
            pointed = types.get(pointer)
            if pointed is not None and pointed[0] == spv.OpTypePointer and len(pointed[1]) == 2:
                try:
                    workgroup_bytes += size_of(pointed[1][1])
                except ValueError:
                    problems.append(f"workgroup variable %{var} of no plain data type")
            continue
        if storage not in (spv.StorageClassStorageBuffer, spv.StorageClassPushConstant):
            continue
        pointed = types.get(pointer)
        if pointed is None or pointed[0] != spv.OpTypePointer or len(pointed[1]) != 2:
            problems.append(f"variable %{var} whose type is not a pointer")
            continue
        block = pointed[1][1]
        if storage == spv.StorageClassPushConstant:
            push_blocks += 1
            push_extent = max(push_extent, size_of(block))
            continue
        decorated = {d[0]: d[1:] for d in decorations.get(var, ())}
        if decorated.get(spv.DecorationDescriptorSet) != (0,) \
                or len(decorated.get(spv.DecorationBinding, ())) != 1:
            problems.append(f"storage buffer %{var} outside descriptor set 0 or without a binding")
            continue
        binding = decorated[spv.DecorationBinding][0]
        element = _buffer_element(types, block)
        if element is None:
            problems.append(f"storage buffer at binding {binding} that is not a runtime array "
                            "of scalars")
            continue
        if binding in buffers:
            problems.append(f"two storage buffers at binding {binding}")
        buffers[binding] = element
    if push_blocks > 1:
        problems.append("more than one push constant block")
    return Interface(capabilities, entry_points, local_size, buffers, push_extent, problems,
                     workgroup_bytes)


def _buffer_element(types, block):
    struct_type = types.get(block)
    if struct_type is None or struct_type[0] != spv.OpTypeStruct or len(struct_type[1]) != 1:
        return None
    array = types.get(struct_type[1][0])
    if array is None or array[0] != spv.OpTypeRuntimeArray or len(array[1]) != 1:
        return None
    element = types.get(array[1][0])
    if element is None or element[0] not in (spv.OpTypeInt, spv.OpTypeFloat) or not element[1]:
        return None
    return ("int" if element[0] == spv.OpTypeInt else "float", element[1][0])


def _element_of(storage):
    """``(kind, bits)`` of the elements a buffer of this storage dtype holds."""
    dtype = np.dtype(storage)
    if dtype.kind == "c":
        return ("float", dtype.itemsize * 4)
    return ("float" if dtype.kind == "f" else "int", dtype.itemsize * 8)


def _holds(element, storage):
    """Whether a buffer of ``element`` (``(kind, bits)``) may hold an array
    of this storage dtype: its own element type, or for a record array a
    scalar type whose size divides the itemsize (see
    numba_vulkan.codegen.logical, which types each record buffer by the
    accesses it proves aligned)."""
    if records.is_record(storage):
        return element[1] in (8, 16, 32, 64) and \
            records.dtype(storage).itemsize % (element[1] // 8) == 0
    return element == _element_of(storage)


def check_interface(binary, params, push_size, threads, vulkan=None):
    """Check that a module is the kernel the runtime will bind.

    Args:
        binary: The module.
        params: :class:`~numba_vulkan.base.abi.Param` per argument.
        push_size: Bytes of push constants the runtime will push.
        threads: The workgroup size the entry claims.
        vulkan: The Vulkan version the module must run on, or None.

    Raises:
        ValueError: What differs.
    """
    found = interface(binary, check_header(binary, vulkan))
    unknown = [c for c in found.capabilities if c not in spv.CAPABILITIES.values()]
    if unknown:
        raise ValueError(f"the module declares unknown capabilities {unknown}")
    if "Linkage" in found.capabilities:
        # Import linkage passes spirv-val, and lavapipe crashes on it.
        raise ValueError("the module imports functions (capability Linkage), which Vulkan "
                         "cannot link")
    if found.problems:
        raise ValueError(f"the module declares {found.problems[0]}")
    if [(m, n) for m, _, n in found.entry_points] != [(spv.ExecutionModelGLCompute, "main")]:
        raise ValueError("the module does not have exactly one entry point, a GLCompute "
                         f"'main' (it has {[n for _, _, n in found.entry_points]})")
    if found.local_size != tuple(threads):
        raise ValueError(f"the module's workgroup size is {found.local_size}, the entry's "
                         f"{tuple(threads)}")
    bound = {p.binding: p for p in params if p.kind != "scalar"}
    for binding, element in sorted(found.buffers.items()):
        param = bound.get(binding)
        if param is None:
            raise ValueError(f"the module reads a storage buffer at binding {binding}, which "
                             "no parameter fills")
        if not _holds(element, param.storage):
            raise ValueError(f"the module's buffer at binding {binding} holds "
                             f"{element[0]}{element[1]}, parameter {param.name!r} is "
                             f"{param.storage}")
    if found.push_extent > push_size:
        raise ValueError(f"the module reads {found.push_extent} bytes of push constants, "
                         f"the runtime pushes {push_size}")
    return found


_PARAM_FIELDS = {f.name: f.type for f in dataclasses.fields(abi.Param)}
_FIELD_TYPES = {"str": str, "int": int, "bool": bool, str: str, int: int, bool: bool}


def check_params(sig, params, push_size, narrowed=(), max_push=None):
    """The :class:`~numba_vulkan.base.abi.Param` objects of stored metadata, checked.

    Args:
        sig: Argument types in text form.
        params: Parameters as JSON (``Param.to_json`` output), from disk.
        push_size: The push constant size stored beside them.
        narrowed: The target's narrowing mode.
        max_push: The target's push constant size (arguments past it travel
            in the argument buffer).

    Returns:
        A tuple of :class:`~numba_vulkan.base.abi.Param`.

    Raises:
        ValueError: The parameters are malformed or not those
            :func:`numba_vulkan.base.abi.layout` gives for ``sig``.
    """
    if not isinstance(params, (list, tuple)) or type(push_size) is not int:
        raise ValueError("parameters are not a list with an integer push constant size")
    out = []
    for number, item in enumerate(params):
        if not isinstance(item, dict) or set(item) != set(_PARAM_FIELDS):
            raise ValueError(f"parameter {number} does not have the fields of a parameter")
        for name, kind in _PARAM_FIELDS.items():
            if type(item[name]) is not _FIELD_TYPES.get(kind, object):
                raise ValueError(f"parameter {number}: {name} {item[name]!r} is not a "
                                 f"{getattr(kind, '__name__', kind)}")
        out.append(abi.Param(**item))
    arguments = [p for p in out if p.kind not in abi.HIDDEN_KINDS]
    if len(arguments) != len(sig) or not all(isinstance(t, str) for t in sig):
        raise ValueError(f"{len(arguments)} parameters for {len(sig)} argument types")
    specs = [signature.argument_spec(p.name, text) for p, text in zip(arguments, sig)]
    try:
        # A status buffer after the argument or print buffer is one for the
        # loop limit alone.
        kinds = [p.kind for p in out]
        loop_status = (kinds[-1:] == ["status"]
                       and any(k in ("args", "print") for k in kinds))
        expected, size = abi.layout(specs, narrowed, "status" in kinds and not loop_status,
                                    max_push, "print" in kinds, loop_status)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"argument types {list(sig)}: {exc}") from None
    if len(expected) != len(out):
        raise ValueError(f"{len(out)} parameters where the argument types give "
                         f"{len(expected)}")
    for want, have in zip(expected, out):
        if want != have:
            raise ValueError(f"parameter {have.name!r} is {have.to_json()}; its argument "
                             f"type gives {want.to_json()}")
    if size != push_size:
        raise ValueError(f"push constant size {push_size}, the argument types give {size}")
    return tuple(out)


def check_kernel(kernel, capabilities, shared):
    """Check a stored module against the kernel that will run it: its
    interface (bindings, push constants, workgroup size) and the
    capabilities its entry declares; and, for a module from a shared tier,
    spirv-val on this machine (:func:`validate_once`): another machine's
    word that it passed is not taken.

    Raises:
        ValueError: What does not match.
    """
    target = kernel.target
    found = check_interface(kernel.spirv, kernel.params, kernel.push_size, kernel.local_size,
                            target.vulkan)
    if found.capabilities != capabilities:
        raise ValueError("capabilities differ from the module's")
    if shared:
        validate_once(kernel.spirv, target.target_env)


# spirv-val, once per module and machine ----------------------------------------

_validated = set()
_tools = {}

#: Below the cache directory: one empty file per module that passed spirv-val.
VALIDATED_DIR = "validated"
#: A spirv-val that takes longer on one module is treated as missing.
_SPIRV_VAL_SECONDS = 120


def _tool(name):
    """``(path, identity)`` of a tool: the program the code generator runs
    for it too (:func:`numba_vulkan.spirv.tools.find`), and where it is and
    which build it is; ``(None, "")`` if it is not installed."""
    path = tools.find(name)
    if path is None:
        return None, ""
    real = os.path.realpath(path)
    st = os.stat(real)
    return path, f"{real}:{st.st_size}:{st.st_mtime_ns}"


def validate_once(binary, target_env):
    """Run spirv-val on a module read from disk, unless it passed before.

    A module that passed is remembered in this process and, below the cache
    directory, for later ones, by its SHA-256, the target environment and
    the spirv-val binary: those processes pay a ``stat`` instead of a
    spirv-val run.

    Returns:
        True if spirv-val passed the module now or before; False if
        validation is off (``NUMBA_VULKAN_VALIDATE=0``) or spirv-val is not
        installed, when only the checks of this module stand between the
        file and the driver.

    Raises:
        ValueError: spirv-val rejected the module, with its message.
    """
    if not config.validate():
        return False
    setting = config.spirv_val()
    if setting not in _tools:
        _tools[setting] = _tool(setting)
    tool, identity = _tools[setting]
    if tool is None:
        return False
    name = hashlib.sha256("\0".join([hashlib.sha256(binary).hexdigest(), target_env,
                                     identity]).encode()).hexdigest()
    if name in _validated:
        return True
    root = files.cache_root()
    marker = os.path.join(root, VALIDATED_DIR, name) if root else None
    if marker and os.path.isfile(marker):
        _validated.add(name)
        return True
    try:
        # The module on standard input: no temporary file, no codegen import.
        result = subprocess.run([tool, "--target-env", target_env, "-"], input=bytes(binary),
                                capture_output=True, timeout=_SPIRV_VAL_SECONDS)
    except (OSError, subprocess.SubprocessError):
        return False
    if result.returncode != 0:
        output = (result.stderr + result.stdout).decode("utf-8", "replace").strip()
        raise ValueError(f"spirv-val rejects the module: {output[:2000]}")
    _validated.add(name)
    if marker:
        try:
            os.makedirs(os.path.dirname(marker), exist_ok=True)
            files.write_atomic(marker, b"")
        except OSError:
            pass
    return True


# Which buffers a kernel writes ------------------------------------------------------

#: Instructions whose result points into what their operand at index 3 points into.
_DERIVING = frozenset({spv.OpAccessChain, spv.OpInBoundsAccessChain, spv.OpPtrAccessChain,
                       spv.OpInBoundsPtrAccessChain, spv.OpCopyObject, spv.OpBitcast})
#: Instructions that write through the pointer at index 1.
_WRITES_AT_1 = frozenset({spv.OpStore, spv.OpCopyMemory, spv.OpCopyMemorySized,
                          spv.OpAtomicStore})
#: Atomic read-modify-writes, pointer at index 3 (exchange to xor, float min,
#: max and add, flag test-and-set).
_WRITES_AT_3 = (frozenset(range(spv.OpAtomicExchange, spv.OpAtomicXor + 1))
                | {spv.OpAtomicFlagTestAndSet, spv.OpAtomicFMinEXT, spv.OpAtomicFMaxEXT,
                   spv.OpAtomicFAddEXT})

def written_bindings(binary):
    """Descriptor bindings of the storage buffers a module may write.

    Follows pointers from each buffer variable through access chains, copies,
    casts, ``OpPhi`` and ``OpSelect``; a pointer stored to memory or passed
    to a function counts as written, so the answer errs towards "written".
    """
    _, instructions = spirv.parse(binary)
    bindings, points = {}, {}
    for inst in instructions:
        op = inst[0] & 0xFFFF
        if op == spv.OpDecorate and len(inst) >= 4 and inst[2] == spv.DecorationBinding:
            bindings[inst[1]] = inst[3]
        elif op == spv.OpVariable and len(inst) >= 4 and inst[2] in bindings:
            points[inst[2]] = {bindings[inst[2]]}
    written, changed = set(), True
    while changed:   # again until loops' OpPhi see their back edges' pointers
        changed = False
        for inst in instructions:
            op = inst[0] & 0xFFFF
            sources = ()
            if op in _DERIVING and len(inst) >= 4:
                sources = (inst[3],)
            elif op == spv.OpPhi:
                sources = inst[3::2]
            elif op == spv.OpSelect and len(inst) >= 6:
                sources = inst[4:6]
            if sources:
                into = set().union(*(points.get(s, ()) for s in sources))
                if into - points.get(inst[2], set()):
                    points[inst[2]] = points.get(inst[2], set()) | into
                    changed = True
                continue
            targets = []
            if op in _WRITES_AT_1 and len(inst) >= 2:
                targets.append(inst[1])
            if op == spv.OpStore and len(inst) >= 3:
                targets.append(inst[2])      # the pointer itself escapes
            if op in _WRITES_AT_3 and len(inst) >= 4:
                targets.append(inst[3])
            if op == spv.OpFunctionCall:
                targets.extend(inst[4:])
            for target in targets:
                written |= points.get(target, set())
    return written


#: Opcodes of SPIR-V's non-uniform group instructions, whose first operands
#: are a result type and id.
_GROUP_OPCODES = range(spv.OpGroupNonUniformElect, spv.OpGroupNonUniformQuadSwap + 1)

def subgroup_features(binary):
    """Device features (as in ``DeviceInfo.features``) a module's subgroup
    operations need: the operation class of each subgroup capability it
    declares, and ``subgroup_extended_types`` where an operation yields an
    integer of other than 32 bits."""
    _, instructions = spirv.parse(binary)
    needed = set()
    widths = {}
    for inst in instructions:
        opcode = inst[0] & 0xFFFF
        if opcode == spv.OpCapability:
            feature = spirv.SUBGROUP_FEATURES.get(spv.CAPABILITIES.get(inst[1], ""))
            if feature:
                needed.add(feature)
        elif opcode == spv.OpTypeInt:
            widths[inst[1]] = inst[2]
        elif opcode in _GROUP_OPCODES and widths.get(inst[1], 32) != 32:
            needed.add("subgroup_extended_types")
    return needed


#: Shuffles whose last operand is a distance or a lane mask, by opcode, as
#: numba.cuda names them.
_SHUFFLES = {spv.OpGroupNonUniformShuffleDown: "shfl_down_sync",
             spv.OpGroupNonUniformShuffleUp: "shfl_up_sync",
             spv.OpGroupNonUniformShuffleXor: "shfl_xor_sync"}


def constant_shuffle_distances(binary):
    """``{(numba.cuda's name of the shuffle, distance)}`` for each relative
    or xor shuffle of a module whose distance (or lane mask) is a constant:
    what a launch compares with the device's subgroup size."""
    _, instructions = spirv.parse(binary)
    constants = {}
    found = set()
    for inst in instructions:
        opcode = inst[0] & 0xFFFF
        if opcode == spv.OpConstant and len(inst) == 4:
            constants[inst[2]] = inst[3]
        elif opcode in _SHUFFLES and inst[-1] in constants:
            found.add((_SHUFFLES[opcode], constants[inst[-1]]))
    return found
