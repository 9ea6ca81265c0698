"""The manifest: which kernels an app ships, for which signatures and devices.

A manifest is YAML (see ``docs/aot.md``)::

    version: 1
    output: aot                        # relative to the manifest
    target_env: vulkan1.2              # what spirv-val checks against
    profiles:
      - name: full                     # 64-bit types as written
      - name: narrow                   # float64/int64 narrowed
        narrow: true
      - name: lavapipe                 # counts loop trips against a limit
        loop_limit: 65535
      - name: half                     # float16 arithmetic in float16
        float16: true
    kernels:
      - function: examples.saxpy:saxpy
        signatures: ["void(float32, float32[::1], float32[::1])"]
        threads: [[256]]               # optional; [[256]] by default
        shared_bytes: [0, 1024]        # optional; dynamic shared memory, [0] by default
        options: {fastmath: true}      # optional; over the nv.jit options
        profiles: [full]               # optional; every profile by default

:func:`load` checks the structure, :func:`resolve` imports the kernels and
parses the signatures; both raise :class:`~numba_vulkan.base.errors.ManifestError`
naming the file, the line and the problem. :func:`merge_records` adds what
``record`` saw to a manifest.
"""

import difflib
import importlib
import inspect
import os
import re
import sys
from dataclasses import dataclass, field

import yaml

from numba_vulkan.base import jitoptions
from numba_vulkan.base import records
from numba_vulkan.aot.loader import index
from numba_vulkan.base.errors import ManifestError
from numba_vulkan.base.target import TargetDescription

VERSION = 1
DEFAULT_OUTPUT = "aot"
DEFAULT_TARGET_ENV = "vulkan1.2"

_TOP = ("version", "output", "target_env", "profiles", "kernels")
_PROFILE = ("name", "narrow", "target_env", "loop_limit", "float16", "float16_rte")
_KERNEL = ("function", "signatures", "threads", "shared_bytes", "options", "profiles")
#: Options a manifest may set.
_OPTIONS = jitoptions.CODE_OPTIONS
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_FUNCTION = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


@dataclass(frozen=True)
class Profile:
    """A class of devices to build for.

    Attributes:
        name: Its name in the index.
        narrow: Whether float64 and int64 are narrowed to 32 bits.
        target_env: The Vulkan environment (``vulkan1.2``) to build and validate for.
        line: Where the manifest defines it.
        loop_limit: Loop trips per invocation after which the devices leave
            every loop (65535 for lavapipe), 0 for none: the kernels unroll
            their loops and report reaching it (see ``docs/aot.md``).
        float16: Whether the devices compute in float16 (``shaderFloat16``);
            without it float16 arithmetic is done in float32, which every
            device with 16-bit storage runs.
        float16_rte: With ``float16``, whether the devices round float16 to
            nearest on request (``shaderRoundingModeRTEFloat16``): float16
            additions, subtractions and products are then the device's own.
    """

    name: str
    narrow: bool
    target_env: str
    line: int = 0
    loop_limit: int = 0
    float16: bool = False
    float16_rte: bool = False

    def target(self):
        """The :class:`~numba_vulkan.base.target.TargetDescription` of the profile."""
        target = TargetDescription.from_env(self.target_env, narrow=self.narrow)
        return target.with_features(loop_limit=self.loop_limit, float16=self.float16,
                                    float16_rte=self.float16_rte)


@dataclass
class KernelSpec:
    """One ``kernels`` item, checked for structure but not resolved."""

    function: str
    line: int
    signatures: list
    threads: list
    options: dict
    profiles: list
    shared_bytes: list = field(default_factory=lambda: [0])


@dataclass
class Manifest:
    """A loaded manifest.

    Attributes:
        path: The file as the user named it (used in messages).
        directory: The absolute directory that relative paths start from.
        output: The absolute output directory.
        output_line: The line of ``output`` (or 1 when it defaults).
        target_env: The default Vulkan environment of profiles.
        profiles: :class:`Profile` objects, in order.
        kernels: :class:`KernelSpec` objects, in order.
    """

    path: str
    directory: str
    output: str
    output_line: int
    target_env: str
    profiles: list
    kernels: list = field(default_factory=list)


@dataclass(frozen=True)
class Task:
    """One module to build: a kernel for one signature, workgroup size and profile.

    Attributes:
        kernel: ``module:qualname``.
        numba_signature: The signature as the manifest wrote it.
        signature: Argument types in text form.
        threads: Workgroup size ``(x, y, z)``.
        profile: The :class:`Profile`.
        options: Options to compile with: the kernel's ``nv.jit`` options,
            then the manifest's.
        line: The manifest line of the signature.
        shared_bytes: Bytes of dynamic shared memory (``shared.array(0,
            dtype)``) the module is built for; 0 for the kernel without.
    """

    kernel: str
    numba_signature: str
    signature: tuple
    threads: tuple
    profile: Profile
    options: tuple
    line: int
    shared_bytes: int = 0


class _Reader:
    """Walks YAML nodes, raising errors that name the manifest file and line."""

    def __init__(self, path):
        self.path = path
        self.constructor = yaml.constructor.SafeConstructor()

    def error(self, node_or_line, problem):
        line = node_or_line if isinstance(node_or_line, int) else node_or_line.start_mark.line + 1
        return ManifestError(problem, self.path, line)

    def mapping(self, node, where, known, required=()):
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, f"{where} must be a mapping of keys to values")
        out = {}
        for key_node, value_node in node.value:
            key = self.scalar(key_node, f"a key of {where}")
            if not isinstance(key, str):
                raise self.error(key_node, f"{where}: key {key!r} is not a string")
            if key in out:
                raise self.error(key_node, f"{where}: key {key!r} appears twice (first at "
                                           f"line {out[key][0].start_mark.line + 1})")
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise self.error(key_node, f"{where}: unknown key {key!r} (known keys: "
                                           f"{', '.join(known)}){hint}")
            out[key] = (key_node, value_node)
        for key in required:
            if key not in out:
                raise self.error(node, f"{where}: missing key {key!r}")
        return {k: v for k, (_, v) in out.items()}

    def sequence(self, node, where):
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(node, f"{where} must be a list")
        return node.value

    def scalar(self, node, where, kinds=None):
        if not isinstance(node, yaml.ScalarNode):
            raise self.error(node, f"{where} must be a single value, not a "
                                   f"{'list' if isinstance(node, yaml.SequenceNode) else 'mapping'}")
        try:
            value = self.constructor.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            raise self.error(node, f"{where}: {exc}") from None
        if kinds is not None and (not isinstance(value, kinds)
                                  or isinstance(value, bool) and bool not in kinds):
            names = " or ".join(k.__name__ for k in kinds).replace("str", "a string")
            raise self.error(node, f"{where} must be {names}, not {value!r}")
        return value

    def plain(self, node):
        try:
            return self.constructor.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            # Such as a !!python/... tag, which the safe loader refuses.
            raise self.error(node, f"{exc}".replace("\n", " ")) from None


def load(path):
    """Read and check a manifest's structure.

    Args:
        path: The manifest file.

    Returns:
        A :class:`Manifest`.

    Raises:
        ManifestError: The file cannot be read, is not YAML, or breaks the
            schema: unknown or missing keys, values of the wrong kind,
            duplicate profile names.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"cannot read the manifest: {exc}", path) from None
    reader = _Reader(path)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        raise ManifestError(f"not valid YAML: {f'{context}: ' if context else ''}{problem}",
                            path, mark.line + 1 if mark else None) from None
    if root is None:
        raise ManifestError("the manifest is empty", path, 1)
    top = reader.mapping(root, "the manifest", _TOP, required=("version", "kernels"))
    version = reader.scalar(top["version"], "version", (int,))
    if version != VERSION:
        raise reader.error(top["version"], f"version {version} is not supported; "
                                           f"this numba_vulkan reads version {VERSION}")
    directory = os.path.dirname(os.path.abspath(path))
    output, output_line = DEFAULT_OUTPUT, 1
    if "output" in top:
        output = reader.scalar(top["output"], "output", (str,))
        output_line = top["output"].start_mark.line + 1
        if not output.strip():
            raise reader.error(top["output"], "output must name a directory")
    target_env = DEFAULT_TARGET_ENV
    if "target_env" in top:
        target_env = _target_env(reader, top["target_env"], "target_env")
    profiles = _profiles(reader, top.get("profiles"), target_env)
    kernels = [_kernel(reader, node, k, {p.name for p in profiles})
               for k, node in enumerate(reader.sequence(top["kernels"], "kernels"))]
    if not kernels:
        raise reader.error(top["kernels"], "kernels is empty: list at least one kernel")
    return Manifest(path, directory, os.path.normpath(os.path.join(directory, output)),
                    output_line, target_env, profiles, kernels)


def _target_env(reader, node, where):
    value = reader.scalar(node, where, (str,))
    try:
        TargetDescription.from_env(value)
    except ValueError as exc:
        raise reader.error(node, f"{where}: {exc}") from None
    return value


def _profiles(reader, node, target_env):
    if node is None:
        return [Profile("full", False, target_env, 1)]
    profiles = []
    items = reader.sequence(node, "profiles")
    if not items:
        raise reader.error(node, "profiles is empty: list at least one profile")
    for k, item in enumerate(items):
        where = f"profiles[{k}]"
        fields = reader.mapping(item, where, _PROFILE, required=("name",))
        name = reader.scalar(fields["name"], f"{where}.name", (str,))
        if not _NAME.match(name):
            raise reader.error(fields["name"], f"{where}.name {name!r}: use letters, digits, "
                                               "'.', '_' and '-' only")
        for other in profiles:
            if other.name == name:
                raise reader.error(fields["name"], f"profile {name!r} is defined twice "
                                                   f"(first at line {other.line})")
        narrow = (reader.scalar(fields["narrow"], f"{where}.narrow", (bool,))
                  if "narrow" in fields else False)
        env = (_target_env(reader, fields["target_env"], f"{where}.target_env")
               if "target_env" in fields else target_env)
        loop_limit = 0
        if "loop_limit" in fields:
            loop_limit = reader.scalar(fields["loop_limit"], f"{where}.loop_limit", (int,))
            if loop_limit < 0:
                raise reader.error(fields["loop_limit"], f"{where}.loop_limit {loop_limit!r}: "
                                   "give a number of loop trips (65535 for lavapipe), or 0")
        float16 = (reader.scalar(fields["float16"], f"{where}.float16", (bool,))
                   if "float16" in fields else False)
        rte = (reader.scalar(fields["float16_rte"], f"{where}.float16_rte", (bool,))
               if "float16_rte" in fields else False)
        if rte and not float16:
            raise reader.error(fields["float16_rte"], f"{where}.float16_rte needs float16: "
                                                      "true (only float16 arithmetic is rounded "
                                                      "by the device)")
        profiles.append(Profile(name, narrow, env, item.start_mark.line + 1, loop_limit,
                                float16, rte))
    return profiles


def _kernel(reader, node, k, profile_names):
    where = f"kernels[{k}]"
    fields = reader.mapping(node, where, _KERNEL, required=("function", "signatures"))
    function = reader.scalar(fields["function"], f"{where}.function", (str,))
    if not _FUNCTION.match(function):
        raise reader.error(fields["function"], f"{where}.function {function!r} must be "
                                               "'module:name', e.g. 'examples.saxpy:saxpy'")
    signatures = []
    items = reader.sequence(fields["signatures"], f"{where}.signatures")
    if not items:
        raise reader.error(fields["signatures"], f"{where}.signatures is empty")
    for s, item in enumerate(items):
        text = reader.scalar(item, f"{where}.signatures[{s}]", (str,))
        signatures.append((text, item.start_mark.line + 1))
    threads = [(index.DEFAULT_THREADS, node.start_mark.line + 1)]
    if "threads" in fields:
        items = reader.sequence(fields["threads"], f"{where}.threads")
        if not items:
            raise reader.error(fields["threads"], f"{where}.threads is empty")
        threads = [(_shape(reader, item, f"{where}.threads[{t}]"), item.start_mark.line + 1)
                   for t, item in enumerate(items)]
    shared_bytes = [0]
    if "shared_bytes" in fields:
        items = reader.sequence(fields["shared_bytes"], f"{where}.shared_bytes")
        if not items:
            raise reader.error(fields["shared_bytes"], f"{where}.shared_bytes is empty")
        shared_bytes = []
        for b, item in enumerate(items):
            size = reader.scalar(item, f"{where}.shared_bytes[{b}]", (int,))
            if size < 0:
                raise reader.error(item, f"{where}.shared_bytes[{b}] {size}: give bytes of "
                                         "dynamic shared memory, or 0 for none")
            if size in shared_bytes:
                raise reader.error(item, f"{where}.shared_bytes[{b}]: {size} is listed twice")
            shared_bytes.append(size)
    options = {}
    if "options" in fields:
        options = _options(reader, fields["options"], f"{where}.options")
    profiles = None
    if "profiles" in fields:
        profiles = []
        for p, item in enumerate(reader.sequence(fields["profiles"], f"{where}.profiles")):
            name = reader.scalar(item, f"{where}.profiles[{p}]", (str,))
            if name not in profile_names:
                raise reader.error(item, f"{where}.profiles[{p}]: no profile named {name!r} "
                                         f"(profiles: {', '.join(sorted(profile_names))})")
            profiles.append(name)
    return KernelSpec(function, node.start_mark.line + 1, signatures, threads, options,
                      profiles, shared_bytes)


#: Most invocations in a workgroup that any device this package targets runs.
MAX_INVOCATIONS = 1024


def _shape(reader, node, where):
    if isinstance(node, yaml.ScalarNode):
        values = [reader.scalar(node, where, (int,))]
    else:
        values = [reader.scalar(item, where, (int,))
                  for item in reader.sequence(node, where)]
    if not 1 <= len(values) <= 3 or any(v < 1 for v in values):
        raise reader.error(node, f"{where}: a workgroup shape is 1 to 3 positive integers, "
                                 f"such as [256] or [16, 16], not {values}")
    invocations = values[0] * (values[1] if len(values) > 1 else 1) * (
        values[2] if len(values) > 2 else 1)
    if invocations > MAX_INVOCATIONS:
        raise reader.error(node, f"{where}: a workgroup of {values} is {invocations} "
                                 f"invocations; devices run at most {MAX_INVOCATIONS} "
                                 "(most GPUs and lavapipe), so no launch could use it")
    return tuple(values) + (1,) * (3 - len(values))


def _options(reader, node, where):
    fields = reader.mapping(node, where, tuple(_OPTIONS))
    out = {}
    for name, value_node in fields.items():
        value = reader.plain(value_node)
        try:
            out[name] = jitoptions.check(name, value)
        except ValueError as e:
            raise reader.error(value_node, f"{where}.{e}") from None
    return out


def _import(manifest, spec):
    module_name, _, qualname = spec.function.partition(":")
    if manifest.directory not in sys.path:
        sys.path.insert(0, manifest.directory)
    try:
        module = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:  # whatever the module raises is the user's to see
        raise ManifestError(f"cannot import module {module_name!r} of {spec.function}: "
                            f"{type(exc).__name__}: {exc}", manifest.path, spec.line) from None
    value = module
    for part in qualname.split("."):
        if not hasattr(value, part):
            raise ManifestError(f"module {module_name!r} has no {qualname!r}",
                                manifest.path, spec.line)
        value = getattr(value, part)
    from numba_vulkan.api.dispatcher import VulkanDispatcher
    if not isinstance(value, VulkanDispatcher) and not callable(
            getattr(type(value), "aot_entries", None)):
        hint = (": decorate it with @nv.jit" if inspect.isfunction(value) else "")
        raise ManifestError(f"{spec.function} is a {type(value).__name__}, not an @nv.jit "
                            f"kernel{hint}", manifest.path, spec.line)
    return value


def _evaluate(text, dispatcher):
    """A signature string as Numba reads it, where a name may also be a
    record (structured NumPy dtype) that the kernel's module defines,
    ``void(particle[::1], float32)``, and a record may be written in its
    text form (:mod:`numba_vulkan.base.records`), as ``aot record`` and the
    strict mode's hints write it: ``void({x:float32@0;4}[::1])``."""
    import numpy as np
    from numba.core import types
    from numba.np import numpy_support
    namespace = dict(types.__dict__)
    for name, value in getattr(dispatcher.py_func, "__globals__", {}).items():
        if isinstance(value, np.dtype) and value.names is not None and \
                name not in namespace:
            namespace[name] = numpy_support.from_dtype(value)
    out, depth, start = [], 0, 0
    for k, char in enumerate(text):
        if char == "{":
            if depth == 0:
                out.append(text[start:k])
                start = k
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                name = f"_nv_record_{len(namespace)}"
                namespace[name] = numpy_support.from_dtype(records.dtype(text[start:k + 1]))
                out.append(name)
                start = k + 1
    out.append(text[start:])
    return eval("".join(out), {}, namespace)


def _signature(manifest, spec, dispatcher, text, line):
    from numba.core import sigutils, types
    from numba_vulkan.frontend.compile import signature_text
    try:
        args, ret = sigutils.normalize_signature(_evaluate(text, dispatcher))
    except Exception as exc:  # Numba reports a bad signature in many ways
        raise ManifestError(f"bad signature {text!r}: {type(exc).__name__}: {exc}",
                            manifest.path, line) from None
    if ret not in (None, types.none, types.void):
        raise ManifestError(f"signature {text!r} returns {ret}; kernels return nothing: "
                            "write void(...)", manifest.path, line)
    try:
        sig = signature_text(args)
    except (TypeError, ValueError) as exc:
        raise ManifestError(f"signature {text!r}: {exc}", manifest.path, line) from None
    names = list(inspect.signature(dispatcher.py_func).parameters)
    if len(names) != len(sig):
        raise ManifestError(f"signature {text!r} has {len(sig)} argument(s); "
                            f"{spec.function} takes {len(names)} ({', '.join(names)})",
                            manifest.path, line)
    return sig


def resolve(manifest):
    """Import every kernel and parse every signature of a manifest.

    Returns:
        ``(tasks, dispatchers)``: the :class:`Task` list in manifest order,
        and the kernel object of each ``module:qualname``.

    Raises:
        ManifestError: A module does not import (with its error), a name is
            not an ``nv.jit`` kernel, a signature is malformed or does not fit
            the function, or two entries ask for the same module.
    """
    tasks, dispatchers, seen = [], {}, {}
    for spec in manifest.kernels:
        value = dispatchers.get(spec.function) or _import(manifest, spec)
        profiles = [p for p in manifest.profiles
                    if spec.profiles is None or p.name in spec.profiles]
        for text, line in spec.signatures:
            for function, dispatcher, kernel_text in _kernels_of(manifest, spec, value, text,
                                                                 line):
                dispatchers[function] = dispatcher
                options = dict(dispatcher.options)
                options.pop("cache", None)
                options.update(spec.options)
                sig = _signature(manifest, spec, dispatcher, kernel_text, line)
                for threads, _ in spec.threads:
                    for profile in profiles:
                        for shared in spec.shared_bytes:
                            ident = (function, sig, threads, profile.name, shared)
                            if ident in seen:
                                extra = f", {shared} shared bytes" if shared else ""
                                raise ManifestError(
                                    f"duplicate entry: {function} with signature {text!r}, "
                                    f"threads {list(threads)}{extra} and profile "
                                    f"{profile.name} is already listed at line {seen[ident]}",
                                    manifest.path, line)
                            seen[ident] = line
                            tasks.append(Task(function, kernel_text, sig, threads, profile,
                                              tuple(sorted(options.items())), line, shared))
    return tasks, dispatchers


def _kernels_of(manifest, spec, value, text, line):
    """``(module:qualname, kernel, kernel signature)`` for one signature line.

    An ``nv.jit`` kernel is itself. A ufunc object (``nv.vectorize``,
    ``nv.guvectorize``, ``nv.reduce``) takes its own signatures
    (``float32(float32, float32)``) and names the kernels generated for
    them, which are its attributes (``mod:add.loop_float32_float32_1d_aa``).
    """
    entries = getattr(type(value), "aot_entries", None)
    if entries is None:
        return [(spec.function, value, text)]
    try:
        found = entries(value, text)
    except (TypeError, ValueError) as exc:
        raise ManifestError(f"signature {text!r} of {spec.function}: {exc}", manifest.path,
                            line) from None
    return [(f"{spec.function}.{name}", getattr(value, name), kernel_text)
            for name, kernel_text in found]


def merge_records(path, records):
    """Add recorded kernels to a manifest, creating it if needed.

    Args:
        path: The manifest to write.
        records: Dicts with ``function``, ``signature`` (a Numba signature
            string), ``threads`` (``[x, y, z]``) and, for a launch with
            dynamic shared memory, ``shared_bytes``.

    Returns:
        ``(added, dropped_comments)``: how many (signature, threads) pairs
        were new, and whether the existing file had comments, which
        rewriting it does not keep.

    Raises:
        ManifestError: The existing manifest is malformed.
    """
    if os.path.exists(path):
        load(path)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        data = yaml.safe_load(text)
        dropped_comments = "#" in text
    else:
        data = {"version": VERSION, "output": DEFAULT_OUTPUT, "target_env": DEFAULT_TARGET_ENV,
                "profiles": [{"name": "full"}], "kernels": []}
        dropped_comments = False
    added = 0
    # Kernels new to the manifest list what ran and nothing else: not the
    # default shape (256) and size (0) that an entry without them means.
    for record in records:
        entry = next((k for k in data["kernels"] if k["function"] == record["function"]), None)
        if entry is None:
            entry = {"function": record["function"], "signatures": [], "threads": [],
                     "shared_bytes": []}
            data["kernels"].append(entry)
        shape = list(record["threads"])
        while len(shape) > 1 and shape[-1] == 1:
            shape.pop()
        threads = entry.get("threads", [[index.DEFAULT_THREADS[0]]])
        normal = [list(t) + [1] * (3 - len(t)) if isinstance(t, list) else [t, 1, 1]
                  for t in threads]
        new = False
        if record["signature"] not in entry["signatures"]:
            entry["signatures"].append(record["signature"])
            new = True
        if list(record["threads"]) not in normal:
            threads = threads + [shape]
            new = True
        entry["threads"] = threads
        shared = record.get("shared_bytes", 0)
        sizes = entry.get("shared_bytes", [0])
        if shared not in sizes:
            entry["shared_bytes"] = sizes + [shared]
            new = True
        added += new
    for entry in data["kernels"]:
        if entry.get("threads") == [[index.DEFAULT_THREADS[0]]]:
            del entry["threads"]
        if entry.get("shared_bytes") == [0]:
            del entry["shared_bytes"]
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return added, dropped_comments
