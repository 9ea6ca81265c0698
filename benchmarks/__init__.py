"""Benchmarks of numba_vulkan against numba-cuda, the CPU and the hardware (see README.md)."""
