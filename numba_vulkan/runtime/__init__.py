"""The Vulkan runtime: devices, memory, pipelines and launches.

The only part of numba_vulkan that talks to Vulkan (through the ``vulkan``
package's cffi bindings). It knows nothing of Numba: it runs SPIR-V modules
described by :mod:`numba_vulkan.base.abi`.
"""
