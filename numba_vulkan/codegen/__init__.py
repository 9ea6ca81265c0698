"""LLVM's side of the compiler: from Numba's LLVM IR to validated SPIR-V.

Link the kernel's modules (and libclc), optimise, rewrite pointers for
SPIR-V's logical addressing, run LLVM's SPIR-V backend in a child process,
then check the module with spirv-val. Nothing here imports Numba or Vulkan.
"""
