"""Building AOT directories: manifests, the parallel build, signing keys."""
