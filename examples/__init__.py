"""Example kernels, built ahead of time by the repository's kernels.yaml."""
