"""Numba's side of the compiler: typing and lowering for the Vulkan target,
from a Python function to LLVM IR. The only layer that imports Numba's compiler."""
