"""The AOT directory format: the index, its entries, and reading their modules.

An AOT directory holds ``index.json`` and the SPIR-V modules it lists under
``spirv/``, each named by its SHA-256, and, if it was signed, the index's
signature (:mod:`numba_vulkan.aot.loader.signing`). Nothing else: no code, no
pickle, no absolute path, no timestamp. The index::

    {"format": 1, "abi_version": 4,
     "profiles": [{"name": "full", "narrow": false, "target_env": "vulkan1.2"}, ...],
     "entries": [{"kernel": "examples.saxpy:saxpy", "key": "<content key>", ...}, ...]}

Each entry names the kernel (``module:qualname``), its content key (see
:func:`numba_vulkan.store.keys.content_key`), argument types in text form
(:mod:`numba_vulkan.base.signature`) and as the manifest wrote them, the
workgroup size, the profile and the target it was built for, the required
Vulkan version, capabilities and device features, the module's file,
SHA-256 and size, the binding interface (parameters, push constant size, ABI
version), the options, and the compiler fingerprint it was built with; an
entry of a kernel that calls ``print`` also has the formats of its calls
(``print``, as :mod:`numba_vulkan.base.printbuffer` describes them), one of a
kernel with error checks the raise site each error code stands for
(``exceptions``, as :func:`numba_vulkan.spirv.compiled.check_errors` describes
them; each ``file`` relative to the folder the kernel's module is imported
from, see :func:`source_root`), and one of a kernel that reports reaching
its target's loop limit that limit (``loop_limit``).

This module reads directories through :mod:`importlib.resources`-style
objects (``joinpath``, ``read_bytes``), so a directory inside an installed
package works as well as one on disk. It imports neither Numba nor Vulkan.
"""

import hashlib
import json
import os

from numba_vulkan.base import abi
from numba_vulkan.spirv import modulecheck
from numba_vulkan.base import signature
from numba_vulkan.spirv import binary as spirv
from numba_vulkan.spirv.compiled import CompiledKernel, check_errors, check_print
from numba_vulkan.base.errors import AOTError
from numba_vulkan.base.target import TargetDescription

#: Version of the directory format; readers refuse any other.
FORMAT_VERSION = 1
INDEX = "index.json"
SPIRV_DIR = "spirv"

#: Largest index and module a reader accepts: far beyond any build's, small
#: enough that a damaged or hostile file cannot exhaust memory.
INDEX_LIMIT = 64 << 20
MODULE_LIMIT = 64 << 20

#: Workgroup size of a manifest entry that names none: the one ``forall``
#: launches use on any device that allows it.
DEFAULT_THREADS = (abi.FORALL_THREADS, 1, 1)

#: The device feature (as in :class:`numba_vulkan.runtime.instance.DeviceInfo`)
#: each SPIR-V capability needs.
CAPABILITY_FEATURES = {
    "Float64": "float64", "Int64": "int64", "Float16": "float16", "Int16": "int16", "Int8": "int8",
    "StorageBuffer8BitAccess": "storage8", "UniformAndStorageBuffer8BitAccess": "storage8",
    "StorageBuffer16BitAccess": "storage16", "RoundingModeRTE": "float16_rte",
    "UniformAndStorageBuffer16BitAccess": "storage16",
    "Int64Atomics": "int64_atomics", "AtomicFloat32AddEXT": "float32_atomic_add",
    **spirv.SUBGROUP_FEATURES,
}

_ENTRY_FIELDS = {
    "kernel": str, "key": str, "signature": list, "numba_signature": str, "threads": list,
    "profile": str, "target": list, "vulkan": str, "capabilities": list, "features": list,
    "spirv": str, "sha256": str, "size": int, "params": list, "push_size": int,
    "abi_version": int, "options": dict, "fingerprint": str,
}


def profile_for(target):
    """The class of profile a target runs: ``full`` with float64 and int64, else ``narrow``.

    Entries are matched by the target they were built for, so a manifest may
    name its profiles freely.
    """
    return "full" if target.float64 and target.int64 else "narrow"


def features(capabilities):
    """Sorted device features a module with these capabilities needs."""
    return sorted({CAPABILITY_FEATURES[c] for c in capabilities if c in CAPABILITY_FEATURES})


def numba_signature(sig):
    """A Numba signature string for argument types in text form.

    ``("float32", "float32[1d,C]")`` becomes ``void(float32, float32[::1])``;
    a layout-``A`` array is written ``float32[:]``, a tuple
    ``UniTuple(float64, 2)`` or ``Tuple((float64, int64,))``.
    """
    parts = []
    for text in sig:
        items = signature.tuple_items(text)
        if items is not None:
            names = ["boolean" if item == "bool" else item for item in items]
            parts.append(f"UniTuple({names[0]}, {len(names)})" if len(set(names)) == 1
                         else f"Tuple(({', '.join(names)},))")
            continue
        kind, dtype, ndim, layout = signature.parse(text)
        name = "boolean" if dtype == "bool" else dtype
        if kind == "array":
            dims = [":"] * ndim
            if layout == "C":
                dims[-1] = "::1"
            name = f"{name}[{', '.join(dims)}]"
        parts.append(name)
    return f"void({', '.join(parts)})"


def module_path(sha256):
    """Where, relative to the directory, the module with this digest lives."""
    return f"{SPIRV_DIR}/{sha256}.spv"


def dumps(index):
    """The index as bytes: sorted keys, ASCII, one layout for every build."""
    return (json.dumps(index, sort_keys=True, indent=1, ensure_ascii=True) + "\n").encode()


def parse(data, where, entries=True):
    """Read and check an index.

    Args:
        data: The bytes of ``index.json``.
        where: The directory, for messages.
        entries: Whether to check every entry too (:func:`entry_problem`).

    Returns:
        The index as a dict.

    Raises:
        AOTError: The index is not JSON, is of another format version, or an
            entry lacks a field or has one of the wrong type.
    """
    try:
        index = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise AOTError(f"{where}/{INDEX} is damaged: {type(exc).__name__}: {exc}") from None
    if not isinstance(index, dict) or not isinstance(index.get("entries"), list):
        raise AOTError(f"{where}/{INDEX} is damaged: no list of entries")
    if index.get("format") != FORMAT_VERSION:
        raise AOTError(f"{where}/{INDEX} has format {index.get('format')!r}; this version "
                       f"of numba_vulkan reads format {FORMAT_VERSION}: rebuild it")
    for number, entry in enumerate(index["entries"] if entries else ()):
        problem = entry_problem(entry)
        if problem:
            raise AOTError(f"{where}/{INDEX}: {entry_label(entry, number)} {problem}")
    return index


def entry_label(entry, number):
    """What messages call entry ``number``: its number and, where the entry
    has one, its kernel's name."""
    kernel = entry.get("kernel") if isinstance(entry, dict) else None
    if isinstance(kernel, str):
        return f"entry {number} (kernel {kernel[:200]})"
    return f"entry {number}"


def entry_problem(entry):
    """What is wrong with an index entry (``"has no valid 'threads'"``), or None."""
    if not isinstance(entry, dict):
        return "is not an object"
    for name, kind in _ENTRY_FIELDS.items():
        if not isinstance(entry.get(name), kind):
            return f"has no valid {name!r}"
    if entry["spirv"] != module_path(entry["sha256"]):
        return f"names module {entry['spirv']!r}, not the one its digest gives"
    problem = _malformed(entry)
    return f"is damaged: {problem}" if problem else None


def _malformed(entry):
    """What is wrong with the values of an entry whose fields have the right types."""
    def ints(values, count):
        return (len(values) == count and all(type(v) is int and v > 0 for v in values))

    if not ints(entry["threads"], 3):
        return "threads is not three positive integers"
    if "shared_bytes" in entry and not ints([entry["shared_bytes"]], 1):
        return "shared_bytes is not a positive integer"
    for name in ("signature", "capabilities", "features"):
        if not all(isinstance(v, str) for v in entry[name]):
            return f"{name} holds a value that is not a string"
    try:
        for text in entry["signature"]:
            signature.parse(text)
        target = target_of(entry)
        params = modulecheck.check_params(entry["signature"], entry["params"],
                                          entry["push_size"], target.narrowed,
                                          target.max_push_constants)
        check_print(params, entry.get("print"))
        check_errors(params, entry, target)
    except (TypeError, ValueError) as exc:
        return str(exc)
    if entry["vulkan"] != "{}.{}".format(*target.vulkan):
        return f"vulkan {entry['vulkan']!r} is not that of its target {entry['target']!r}"
    if entry["features"] != features(entry["capabilities"]):
        return f"features {entry['features']} are not those its capabilities need"
    return None


def check_module(data, entry, where):
    """Check a module's bytes against its entry; raise AOTError if they differ.

    First its digest, then what a matching digest cannot prove: that the
    module is sound SPIR-V for the entry's target and that its entry point,
    workgroup size, storage buffers, push constants and capabilities are
    those the entry describes (:mod:`numba_vulkan.spirv.modulecheck`), since the
    runtime binds what the entry says.
    """
    if len(data) != entry["size"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise AOTError(f"{where}/{entry['spirv']} does not match its SHA-256 in the index "
                       f"(kernel {entry['kernel']}): the directory was changed after the "
                       "build; rebuild it")
    try:
        target = target_of(entry)
        found = modulecheck.check_interface(
            data, abi.params_from_json(entry["params"]), entry["push_size"], entry["threads"],
            target.vulkan)
        if found.capabilities != entry["capabilities"]:
            raise ValueError(f"the module declares capabilities {found.capabilities}, the "
                             f"entry {entry['capabilities']}")
    except (TypeError, ValueError) as exc:
        raise AOTError(f"{where}/{entry['spirv']} is not the module its index entry "
                       f"describes (kernel {entry['kernel']}): {exc}; rebuild the "
                       "directory") from None


def target_of(entry):
    """The :class:`TargetDescription` an entry was built for; ValueError if malformed."""
    try:
        return TargetDescription.from_key(entry["target"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"target {entry['target']!r} is not a target description: "
                         f"{exc}") from None


def source_root(module, filename):
    """The folder that module ``module`` (a dotted name) was imported from,
    given the file it was loaded from; None if the file is not where the
    name puts it (a script, a module loaded from elsewhere)."""
    parts = module.split(".")
    folder, name = os.path.split(os.path.abspath(filename))
    if os.path.splitext(name)[0] == "__init__":
        folder, name = os.path.split(folder)
    elif os.path.splitext(name)[0] != parts[-1]:
        return None
    for part in reversed(parts[:-1]):
        folder, name = os.path.split(folder)
        if name != part:
            return None
    return folder


def portable_exceptions(exceptions, root):
    """``exceptions`` (a kernel's ``metadata["exceptions"]``) with each file
    below ``root`` relative to it and any other reduced to its name, so that
    an index holds no path of the build machine."""
    out = {}
    for code, description in exceptions.items():
        description = dict(description)
        path = description.get("file")
        if path:
            path = os.path.abspath(path)
            inside = root is not None and os.path.commonpath([root, path]) == root
            path = os.path.relpath(path, root) if inside else os.path.basename(path)
            description["file"] = path.replace(os.sep, "/")
        out[code] = description
    return out


def _local_exceptions(exceptions, root):
    """``exceptions`` from an index with each file found below ``root`` (the
    folder the kernel's module is imported from here) named by its path."""
    if root is None:
        return exceptions
    out = {}
    for code, description in exceptions.items():
        path = description["file"]
        if path and not os.path.isabs(path):
            local = os.path.join(root, *path.split("/"))
            if os.path.isfile(local):
                description = dict(description, file=local)
        out[code] = description
    return out


def compiled_kernel(entry, spirv, root=None):
    """The :class:`CompiledKernel` of an entry and its checked module.

    Args:
        entry: The index entry (checked by :func:`parse`).
        spirv: Its module (checked by :func:`check_module`).
        root: The folder the kernel's module is imported from in this
            process (:func:`source_root`), where the files that its error
            messages name are looked for; None leaves them relative.

    Raises:
        AOTError: The entry's metadata is malformed or of another ABI.
    """
    meta = {
        "name": entry["kernel"].partition(":")[2], "signature": entry["signature"],
        "local_size": entry["threads"], "target": entry["target"],
        "capabilities": entry["capabilities"], "params": entry["params"],
        "push_size": entry["push_size"], "abi_version": entry["abi_version"],
        "metadata": {"aot": {"kernel": entry["kernel"], "profile": entry["profile"],
                             "sha256": entry["sha256"]},
                     **({"print": entry["print"]} if "print" in entry else {}),
                     **({"exceptions": _local_exceptions(entry["exceptions"], root)}
                        if "exceptions" in entry else {}),
                     **({"loop_limit": entry["loop_limit"]} if "loop_limit" in entry else {}),
                     **({"shared_bytes": entry["shared_bytes"]}
                        if "shared_bytes" in entry else {})},
    }
    try:
        return CompiledKernel.from_metadata(meta, spirv)
    except (ValueError, TypeError) as exc:
        raise AOTError(f"entry for {entry['kernel']} cannot be used: {exc}") from None


def signature_distance(wanted, offered):
    """How far an entry's argument types are from a launch's, or None if unusable.

    A module compiled for a strided (``A``) array also runs a contiguous
    (``C``) one, so a launch with a C array may use an A entry; the distance
    counts such substitutions, and the closest entry wins.
    """
    if len(wanted) != len(offered):
        return None
    distance = 0
    for want, have in zip(wanted, offered):
        if want == have:
            continue
        if want.endswith(",C]") and have == want[:-3] + ",A]":
            distance += 1
            continue
        return None
    return distance


def abi_ok(entry):
    """Whether this runtime speaks the entry's binding interface."""
    return entry["abi_version"] == abi.ABI_VERSION
