"""The compiler as one table of stages, from a Python function to a checked
SPIR-V module: request in, artifact out. The JIT and the AOT build both run
it; it reads and writes no cache."""
