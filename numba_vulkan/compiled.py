"""A compiled kernel as data: what the runtime needs to run it.

Made by the compiler, stored by the kernel cache and the AOT build as JSON
metadata plus the raw SPIR-V, and read back without Numba or LLVM.
"""

from dataclasses import dataclass, field

from numba_vulkan import abi, printbuffer
from numba_vulkan.target import TargetDescription


@dataclass
class CompiledKernel:
    """A kernel compiled for one signature, workgroup size and target.

    Attributes:
        name: Qualified name of the Python function.
        signature: Argument types in text form (see :mod:`numba_vulkan.signature`).
        local_size: Workgroup size ``(x, y, z)`` baked into the module.
        target: The :class:`~numba_vulkan.target.TargetDescription` compiled for.
        spirv: The SPIR-V module.
        llvm_ir: The LLVM IR the backend compiled ("" when loaded from an
            AOT directory, which does not ship it).
        capabilities: SPIR-V capabilities the module declares.
        params: :class:`~numba_vulkan.abi.Param` per argument.
        push_size: Bytes of push constants.
        abi_version: The :data:`~numba_vulkan.abi.ABI_VERSION` it was built for.
        metadata: What else the runtime needs, JSON-compatible: what the
            error codes of its status buffer stand for (``exceptions``), the
            formats of its ``print`` calls (``print``, see
            :mod:`numba_vulkan.printbuffer`), ...
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
        from numba_vulkan.codegen.validate import disassemble
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
        return kernel


def check_print(params, formats):
    """Raise ValueError unless a kernel has a print buffer exactly when it
    has ``print`` formats (``metadata["print"]``), and those are well formed."""
    if formats is not None:
        printbuffer.check_formats(formats)
    if bool(formats) != any(p.kind == "print" for p in params):
        raise ValueError("malformed kernel metadata: print formats without a print buffer, "
                         "or a print buffer without formats")
