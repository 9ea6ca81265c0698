"""Compiled kernels kept between processes: the code hasher, the on-disk
cache and the shared remote tier. Imports no Numba."""
