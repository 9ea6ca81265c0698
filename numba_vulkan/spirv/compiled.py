"""A compiled kernel as data: what the runtime needs to run it.

Made by the compiler, stored by the kernel cache and the AOT build as JSON
metadata plus the raw SPIR-V, and read back without Numba or LLVM.
"""

from dataclasses import dataclass, field

from numba_vulkan.base import abi
from numba_vulkan.base import printbuffer
from numba_vulkan.base.target import TargetDescription


@dataclass
class CompiledKernel:
    """A kernel compiled for one signature, workgroup size and target.

    Attributes:
        name: Qualified name of the Python function.
        signature: Argument types in text form (see :mod:`numba_vulkan.base.signature`).
        local_size: Workgroup size ``(x, y, z)`` baked into the module.
        target: The :class:`~numba_vulkan.base.target.TargetDescription` compiled for.
        spirv: The SPIR-V module.
        llvm_ir: The LLVM IR the backend compiled ("" when loaded from an
            AOT directory, which does not ship it).
        capabilities: SPIR-V capabilities the module declares.
        params: :class:`~numba_vulkan.base.abi.Param` per argument.
        push_size: Bytes of push constants.
        abi_version: The :data:`~numba_vulkan.base.abi.ABI_VERSION` it was built for.
        metadata: What else the runtime needs, JSON-compatible: what the
            error codes of its status buffer stand for (``exceptions``, see
            :func:`check_errors`), the loop limit it reports reaching
            (``loop_limit``), the formats of its ``print`` calls (``print``,
            see :mod:`numba_vulkan.base.printbuffer`), ...
    """

    name: str
    signature: tuple
    local_size: tuple
    target: TargetDescription
    spirv: bytes
    llvm_ir: str
    capabilities: list
    params: tuple
    push_size: int
    abi_version: int = abi.ABI_VERSION
    metadata: dict = field(default_factory=dict)

    def disassemble(self):
        """The SPIR-V module as text (needs spirv-dis)."""
        from numba_vulkan.spirv.tools import disassemble
        return disassemble(self.spirv)

    def to_metadata(self):
        """Everything but the SPIR-V and IR, as JSON-compatible data."""
        return {
            "name": self.name,
            "signature": list(self.signature),
            "local_size": list(self.local_size),
            "target": self.target.key(),
            "capabilities": list(self.capabilities),
            "params": [p.to_json() for p in self.params],
            "push_size": self.push_size,
            "abi_version": self.abi_version,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_metadata(cls, meta, spirv, llvm_ir=""):
        """Rebuild from :meth:`to_metadata` output; raises ValueError if malformed."""
        try:
            target = TargetDescription.from_key(meta["target"])
            kernel = cls(
                name=str(meta["name"]), signature=tuple(str(s) for s in meta["signature"]),
                local_size=tuple(int(n) for n in meta["local_size"]), target=target,
                spirv=bytes(spirv), llvm_ir=str(llvm_ir),
                capabilities=[str(c) for c in meta["capabilities"]],
                params=abi.params_from_json(meta["params"]), push_size=int(meta["push_size"]),
                abi_version=int(meta["abi_version"]), metadata=dict(meta.get("metadata", {})))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed kernel metadata: {exc}") from exc
        if kernel.abi_version != abi.ABI_VERSION:
            raise ValueError(f"kernel built for ABI {kernel.abi_version}, "
                             f"this runtime speaks {abi.ABI_VERSION}")
        if len(kernel.local_size) != 3:
            raise ValueError("malformed kernel metadata: local_size")
        check_print(kernel.params, kernel.metadata.get("print"))
        check_errors(kernel.params, kernel.metadata, target)
        return kernel


def check_print(params, formats):
    """Raise ValueError unless a kernel has a print buffer exactly when it
    has ``print`` formats (``metadata["print"]``), and those are well formed."""
    if formats is not None:
        printbuffer.check_formats(formats)
    if bool(formats) != any(p.kind == "print" for p in params):
        raise ValueError("malformed kernel metadata: print formats without a print buffer, "
                         "or a print buffer without formats")


#: Most raise sites a kernel's ``exceptions`` may describe, and the longest
#: text of a description: far beyond a real kernel's, small enough that a
#: damaged or crafted entry cannot make the runtime hold much.
MAX_RAISE_SITES = 4096
MAX_DESCRIPTION_TEXT = 16384

_DESCRIPTION_FIELDS = ("type", "message", "function", "file", "line")


def check_errors(params, metadata, target):
    """Raise ValueError unless the error reports of a kernel's metadata are well formed.

    ``metadata["exceptions"]`` maps each error code its status buffer may
    hold (a decimal string, not 0 or :data:`~numba_vulkan.base.abi.LOOP_LIMIT_CODE`)
    to the raise site it stands for: the exception's ``type`` (a builtin's
    name, else ``module.qualname``), ``message``, and the ``function``,
    ``file`` and ``line`` that raise it (each a string or None, the line a
    non-negative int or None). ``metadata["loop_limit"]`` is the loop limit
    of ``target``, which the kernel reports reaching. Either needs the
    kernel to have a status buffer.
    """
    exceptions = metadata.get("exceptions")
    limit = metadata.get("loop_limit")
    status = any(p.kind == "status" for p in params)
    if limit is not None:
        if type(limit) is not int or limit != target.loop_limit or not limit:
            raise ValueError(f"malformed kernel metadata: loop_limit {limit!r} is not its "
                             f"target's loop limit ({target.loop_limit})")
        if not status:
            raise ValueError("malformed kernel metadata: a loop limit without a status buffer")
    if exceptions is None:
        return
    if not isinstance(exceptions, dict) or len(exceptions) > MAX_RAISE_SITES:
        raise ValueError("malformed kernel metadata: exceptions are not an object of at most "
                         f"{MAX_RAISE_SITES} raise sites")
    if exceptions and not status:
        raise ValueError("malformed kernel metadata: exceptions without a status buffer")
    for code, description in exceptions.items():
        if not (isinstance(code, str) and code.isascii() and code.isdigit()
                and code == str(int(code)) and 0 < int(code) < 2 ** 32
                and int(code) != abi.LOOP_LIMIT_CODE):
            raise ValueError(f"malformed kernel metadata: error code {code!r} is not a "
                             "32-bit unsigned integer other than 0 and the loop limit's")
        if not isinstance(description, dict) or sorted(description) != sorted(
                _DESCRIPTION_FIELDS):
            raise ValueError(f"malformed kernel metadata: error {code} is not described by "
                             f"{', '.join(_DESCRIPTION_FIELDS)}")
        kind, line = description["type"], description["line"]
        # A class's qualified name: it may hold "<locals>", never blanks.
        if not (isinstance(kind, str) and 0 < len(kind) <= 256 and kind.isprintable()
                and not any(c.isspace() for c in kind)):
            raise ValueError(f"malformed kernel metadata: error {code} has a type that is "
                             "not a class name")
        for name in ("message", "function", "file"):
            text = description[name]
            if not (text is None or isinstance(text, str)
                    and len(text) <= MAX_DESCRIPTION_TEXT):
                raise ValueError(f"malformed kernel metadata: error {code} has a {name} that "
                                 f"is not a string of at most {MAX_DESCRIPTION_TEXT} "
                                 "characters")
        if not (line is None or type(line) is int and 0 <= line < 2 ** 31):
            raise ValueError(f"malformed kernel metadata: error {code} has a line that is not "
                             "a non-negative integer")
