"""SPIR-V: reading modules, checking modules read from disk, the compiled
kernel as data, and the SPIRV-Tools runner. Imports only :mod:`numba_vulkan.base`."""
