"""Ahead-of-time builds: compile a manifest of kernels into a directory apps ship."""
