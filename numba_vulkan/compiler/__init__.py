"""Numba's side of the compiler: typing and lowering for the Vulkan target.

Nothing here loads a Vulkan library; the output is LLVM IR that
:mod:`numba_vulkan.codegen` turns into SPIR-V.
"""
