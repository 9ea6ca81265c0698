"""What users call: ``@nv.jit`` kernels, ufuncs and Numba's ``vulkan`` ufunc target."""
