"""LLVM's side of the compiler: from Numba's LLVM IR to validated SPIR-V.

Link the kernel's modules (and libclc), optimise, rewrite pointers for
SPIR-V's logical addressing, run LLVM's SPIR-V backend in a child process,
then check the module with spirv-val. Nothing here imports Numba or Vulkan.

A pass over LLVM IR takes the IR model (:class:`numba_vulkan.llvmir.ir.Module`)
and rewrites it in place; one whose caller re-runs LLVM only on a change
returns whether it changed anything. :mod:`numba_vulkan.codegen.pipeline`
parses LLVM's text once after each run of LLVM and prints the model once
for the next run, and once for the backend. New instructions are made with
:class:`numba_vulkan.llvmir.build.Builder` or parsed from text with
:func:`numba_vulkan.llvmir.ir.instruction`.
"""
