"""What one compile is asked for: the compiler's input.

A frozen, hashable value that the dispatcher and the AOT build make and the
compile service (:mod:`numba_vulkan.api.service`) hands to the compiler
(:mod:`numba_vulkan.compiler.stages`). Here, below both, so that a launch
served from memory or an AOT directory imports no compiler.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from numba_vulkan.base.jitoptions import KernelOptions
from numba_vulkan.base.target import TargetDescription


@dataclass(frozen=True)
class KernelRequest:
    """What to compile: the compiler's input, frozen and hashable.

    Attributes:
        pyfunc: The kernel's Python function.
        signature: Argument types in text form (:mod:`numba_vulkan.base.signature`).
        threads: Workgroup size ``(x, y, z)``.
        target: The target to compile for.
        options: The kernel's ``nv.jit`` options (a dict is made a
            :class:`~numba_vulkan.base.jitoptions.KernelOptions`).
        shared_bytes: Bytes of dynamic shared memory (``shared.array(0, dtype)``
            views them).
        name: The kernel's name in messages; its qualified name by default.
    """

    pyfunc: Callable
    signature: tuple[str, ...]
    threads: tuple[int, int, int]
    target: TargetDescription
    options: KernelOptions = KernelOptions()
    shared_bytes: int = 0
    name: str = ""

    def __post_init__(self):
        # Frozen: the canonical forms are set as the dataclass itself would.
        object.__setattr__(self, "signature", tuple(self.signature))
        object.__setattr__(self, "threads", tuple(self.threads))
        if not isinstance(self.options, KernelOptions):
            object.__setattr__(self, "options", KernelOptions(self.options))
        if not self.name:
            object.__setattr__(self, "name", self.pyfunc.__qualname__)

    @property
    def label(self):
        """The kernel and its signature, as messages name them."""
        return f"{self.name}({', '.join(self.signature)})"
