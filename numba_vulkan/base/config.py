"""Every ``NUMBA_VULKAN_*`` setting, read in this one place.

Settings are read from the environment each time they are used, so a test or
an application can change one with ``os.environ`` without re-importing
anything. ``docs/settings.md`` documents each of them for users.
"""

import contextlib
import os
import re

from numba_vulkan.base.errors import ConfigError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}

#: Settings a caller of the library set for a while (:func:`overriding`),
#: which take precedence over the environment.
_overrides = {}


def _raw(name):
    return _overrides[name] if name in _overrides else os.environ.get(name)


@contextlib.contextmanager
def overriding(**settings):
    """Take ``settings`` (``NUMBA_VULKAN_*`` names to text values) instead of
    the environment's until the block ends, without changing ``os.environ``:
    for a library call given a setting as an argument (``aot build
    --remote``). Processes forked meanwhile inherit them."""
    before = overrides()
    override(settings)
    try:
        yield
    finally:
        _overrides.clear()
        _overrides.update(before)


def overrides():
    """The settings :func:`overriding` holds now, for a spawned worker to
    take with :func:`override`."""
    return dict(_overrides)


def override(settings):
    """Take ``settings`` instead of the environment's for the rest of this
    process (a worker of a build running under :func:`overriding`)."""
    _overrides.update(settings)


def _flag(name, default):
    value = _raw(name)
    if value is None or value.strip() == "":
        return default
    value = value.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name}={value!r}: expected 1 or 0")


def _positive_int(name, default, meaning):
    """Setting ``name`` as a positive integer; ValueError saying it is ``meaning`` if not."""
    value = _text(name, default)
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise ConfigError(f"{name}={value!r}: expected a positive integer, {meaning}")
    return number


def _text(name, default=None):
    value = _raw(name)
    if value is None or value.strip() == "":
        return default
    return value


def device():
    """Index or name (substring) of the Vulkan device to use, or None."""
    return _text("NUMBA_VULKAN_DEVICE")


def device_copies():
    """How many logical devices ``nv.gpus`` opens on each physical device.

    1 by default. More lets code for several GPUs run, and be tested, on one:
    each copy has its own queue, memory, pipelines and pipeline cache file.
    A value that is not a positive integer is refused.
    """
    return _positive_int("NUMBA_VULKAN_DEVICE_COPIES", "1",
                         "the logical devices to open on each physical one")


def queues():
    """Most compute queues a device opens: its default stream runs on the
    first, streams made with ``nv.stream()`` on the others in turn (all on
    the one where the device has one). Read when a device is opened; 8 by
    default, and never more than the device's compute family has."""
    return _positive_int("NUMBA_VULKAN_QUEUES", "8", "the most compute queues to open on a device")


def async_compute():
    """Whether launches on streams made with ``nv.stream()`` go to queues of a
    compute family without graphics (a GPU's asynchronous compute family)
    where the device has one besides the default stream's, instead of to
    the default stream's family. Read when a device is opened.

    On by default: on an H200, kernels on two queues of NVIDIA's graphics
    family ran one after the other (two 70 ms launches took 140 ms), and on
    two queues of its compute-only family side by side.
    """
    return _flag("NUMBA_VULKAN_ASYNC_COMPUTE", True)


def transfer_queue():
    """Whether copies on streams made with ``nv.stream()`` go to a queue of
    a transfer-only family (a GPU's copy engines) where the device has one.
    Read when a device is opened."""
    return _flag("NUMBA_VULKAN_TRANSFER_QUEUE", True)


def validate():
    """Whether every generated module goes through spirv-val.

    On by default: validation costs a few milliseconds, far less than a
    compile, and a driver handed invalid SPIR-V may crash the process.
    """
    return _flag("NUMBA_VULKAN_VALIDATE", True)


def cache_enabled():
    """Whether compiled kernels are cached on disk (``NUMBA_VULKAN_CACHE``)."""
    return _flag("NUMBA_VULKAN_CACHE", True)


def cache_dir():
    """Root of numba_vulkan's per-user cache directory."""
    explicit = _text("NUMBA_VULKAN_CACHE_DIR")
    if explicit:
        return os.path.abspath(explicit)
    base = _text("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "numba_vulkan")


#: Default of :func:`cache_max_bytes`: 1 GiB, some thousands of kernels.
CACHE_MAX_BYTES = 1 << 30
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def cache_max_bytes():
    """Most bytes the kernel cache's entries may take (0: no cap).

    ``NUMBA_VULKAN_CACHE_MAX_BYTES`` is a number of bytes (``1073741824``,
    ``1e9``, ``0x40000000``), optionally with a binary unit: ``500M``,
    ``1.5G``.
    """
    return _bytes("NUMBA_VULKAN_CACHE_MAX_BYTES", CACHE_MAX_BYTES,
                  "such as 1073741824, 1e9, 0x40000000, 500M or 1.5G (0 for no cap)")


_NUMBER = re.compile(r"^(0x[0-9a-f]+|(?:\d+\.?\d*|\.\d+)(?:e\+?\d+)?)\s*([kmgt]?)$")


def _bytes(name, default, examples):
    """A setting that is a number of bytes: decimal (a fraction or an
    exponent allowed: ``1.5G``, ``1e9``) or hexadecimal, optionally with a
    binary unit; ConfigError naming the variable and ``examples`` if not."""
    value = _text(name)
    if value is None:
        return default
    text = value.strip().lower().removesuffix("ib").removesuffix("b").strip()
    match = _NUMBER.match(text)
    if match is None:
        raise ConfigError(f"{name}={value!r}: expected a number of bytes {examples}")
    number, unit = match.groups()
    if number.startswith("0x"):
        return int(number, 16) * _UNITS[unit]
    return int(float(number) * _UNITS[unit])


#: Default of :func:`print_buffer_bytes`: 1 MiB, some tens of thousands of lines.
PRINT_BUFFER_BYTES = 1 << 20
#: The bounds of :func:`print_buffer_bytes`: the buffer's header alone, and
#: what a 32-bit count of words can address with room to spare.
_PRINT_BUFFER_LIMITS = (16, 1 << 30)


def print_buffer_bytes():
    """Bytes of the buffer that ``print`` calls in a kernel write to, per
    kernel and device (``NUMBA_VULKAN_PRINT_BUFFER_BYTES``; rounded down to
    a multiple of 4). Calls whose record does not fit are dropped, and
    counted in the launch's output. Read at each launch of such a kernel."""
    name = "NUMBA_VULKAN_PRINT_BUFFER_BYTES"
    size = _bytes(name, PRINT_BUFFER_BYTES, "such as 1048576, 64K or 16M")
    low, high = _PRINT_BUFFER_LIMITS
    if not low <= size <= high:
        raise ConfigError(f"{name}={_raw(name)!r}: expected {low} bytes to 1G")
    return size // 4 * 4


def remote_cache():
    """URL of the shared remote kernel cache, or None (``NUMBA_VULKAN_REMOTE_CACHE``).

    ``redis://host:port/db`` or ``rediss://host:port/db`` (TLS), optionally
    with ``user:password@`` before the host.
    """
    return _text("NUMBA_VULKAN_REMOTE_CACHE")


def remote_cache_password():
    """Password of the remote cache's server, if not in its URL, or None."""
    return _text("NUMBA_VULKAN_REMOTE_CACHE_PASSWORD")


def debug_cache():
    """Whether each cache lookup logs a line (``NUMBA_VULKAN_DEBUG_CACHE``)."""
    return _flag("NUMBA_VULKAN_DEBUG_CACHE", False)


#: Numba settings that cannot change how Numba lowers a kernel.
_NUMBA_HARMLESS = frozenset({
    "NUMBA_NUM_THREADS", "NUMBA_THREADING_LAYER", "NUMBA_CACHE_DIR", "NUMBA_DEBUG_CACHE",
    "NUMBA_COLOR_SCHEME", "NUMBA_HIGHLIGHT_DUMPS", "NUMBA_DISABLE_PERFORMANCE_WARNINGS",
    "NUMBA_WARNINGS", "NUMBA_SHOW_HELP", "NUMBA_DEVELOPER_MODE", "NUMBA_FULL_TRACEBACKS",
})


def numba_settings():
    """Numba's own ``NUMBA_*`` settings that may change how it lowers a kernel.

    Not a setting of this package: the kernel cache's ``functions/`` tier,
    which skips Numba, keys on them, because Numba would read them.
    """
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith("NUMBA_") and not k.startswith("NUMBA_VULKAN_")
            and k not in _NUMBA_HARMLESS}


def aot_path():
    """Directories of ahead-of-time builds to search, in order."""
    value = _text("NUMBA_VULKAN_AOT_PATH", "")
    return [p for p in value.split(os.pathsep) if p]


def aot_strict():
    """Whether a kernel missing from every AOT directory is an error."""
    return _flag("NUMBA_VULKAN_AOT_STRICT", False)


def aot_public_key():
    """Path of the Ed25519 public key every AOT directory must be signed with, or None.

    Set but empty (``NUMBA_VULKAN_AOT_PUBLIC_KEY=''``) is an error, not
    "unset": whoever set it meant to require signatures.
    """
    return _path("NUMBA_VULKAN_AOT_PUBLIC_KEY", "an Ed25519 public key file (PEM)")


def _path(name, what):
    """A setting naming a file, or None if it is not set; ConfigError if it
    is set to nothing but blanks."""
    value = _raw(name)
    if value is None:
        return None
    if value.strip() == "":
        raise ConfigError(f"{name} is set but empty: expected the path of {what}, or leave "
                          "it unset")
    return value


def remote_key():
    """Path of the team's key file that authenticates the remote cache's
    entries (``NUMBA_VULKAN_REMOTE_KEY``), or None."""
    return _path("NUMBA_VULKAN_REMOTE_KEY", "a key file (python -m numba_vulkan cache keygen)")


#: The values of ``NUMBA_VULKAN_REMOTE_TRUST``.
REMOTE_TRUST = ("signed", "unsigned")


def remote_trust():
    """What the remote cache's entries must be to be read
    (``NUMBA_VULKAN_REMOTE_TRUST``): ``"signed"`` (the default: authenticated
    with :func:`remote_key`; without a key the server is not read) or
    ``"unsigned"`` (without a key, entries are read unauthenticated)."""
    value = (_text("NUMBA_VULKAN_REMOTE_TRUST", "signed")).strip().lower()
    if value not in REMOTE_TRUST:
        raise ConfigError(f"NUMBA_VULKAN_REMOTE_TRUST={value!r}: expected one of "
                          f"{', '.join(REMOTE_TRUST)}")
    return value


#: The variable :func:`aot_record` reads; ``aot record`` sets it for its child.
AOT_RECORD = "NUMBA_VULKAN_AOT_RECORD"


def aot_record():
    """File that each kernel compiled by JIT is appended to, or None.

    ``python -m numba_vulkan.aot record`` sets it for the program it runs.
    """
    return _text(AOT_RECORD)


def pipeline_cache():
    """Whether the driver's compiled pipelines persist across processes."""
    return _flag("NUMBA_VULKAN_PIPELINE_CACHE", True)


def llc():
    """An ``llc`` program to use instead of llvmlite's SPIR-V backend, or None."""
    return _text("NUMBA_VULKAN_LLC")


def libclc():
    """Path of the libclc bitcode file to link, or None to search for one."""
    return _text("NUMBA_VULKAN_LIBCLC")


def spirv_val():
    """The spirv-val program."""
    return _text("NUMBA_VULKAN_SPIRV_VAL", "spirv-val")


def spirv_dis():
    """The spirv-dis program."""
    return _text("NUMBA_VULKAN_SPIRV_DIS", "spirv-dis")


def mask_features():
    """Device features to pretend are absent, e.g. ``float64,int64``.

    Lets a test run the narrowing path on a device that has every feature.
    """
    value = _text("NUMBA_VULKAN_MASK_FEATURES", "")
    return frozenset(f.strip() for f in value.split(",") if f.strip())


def robust_access():
    """Whether devices that offer ``robustBufferAccess`` are opened with it.

    On by default: an access outside an array's buffer then reads zeros or
    is dropped instead of touching other memory, which is what stands
    between a kernel from a directory we did not write and the process.
    """
    return _flag("NUMBA_VULKAN_ROBUST_ACCESS", True)


def freeze_imports():
    """Whether the first compile moves the objects alive after the compiler's
    set-up out of the cyclic garbage collector's reach (``gc.freeze``).

    On by default: without it every full collection during the compiles to
    come walks Numba's types and registries, 50-100 ms of a first call.
    Frozen objects are still freed when their last reference goes; only
    reference cycles among them that become garbage later are kept. Turn it
    off where a process must collect such cycles of objects it made before
    its first compile.
    """
    return _flag("NUMBA_VULKAN_FREEZE_IMPORTS", True)


def host_import():
    """Whether large copies import the NumPy array's own memory.

    Off by default: on an NVIDIA H200 pinning and unpinning the pages cost
    more than the staging copy they save (256 MiB: 11 ms, against about 10 ms
    for the whole staged copy). Only devices with
    ``VK_EXT_external_memory_host`` whose memory the host cannot map use it.
    """
    return _flag("NUMBA_VULKAN_HOST_IMPORT", False)


def dump_dir():
    """Directory to write each compiled module's IR and SPIR-V to, or None."""
    return _text("NUMBA_VULKAN_DUMP")


def dump_stages():
    """Names of the compiler stages whose results go to :func:`dump_dir` too.

    ``NUMBA_VULKAN_DUMP_STAGES=logical,structurize``, or ``all``; the names
    are those of :data:`numba_vulkan.compiler.stages.STAGES`.
    """
    value = _text("NUMBA_VULKAN_DUMP_STAGES", "")
    return frozenset(n.strip() for n in value.split(",") if n.strip())


def child_environment(**changes):
    """This process's environment with ``changes``, for a child process.

    Children (the backend, ``aot record``'s program) read their settings
    from it, so every setting passes to them unchanged, those of
    :func:`overriding` too.
    """
    env = dict(os.environ)
    env.update(_overrides)
    env.update(changes)
    return env
