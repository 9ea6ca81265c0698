"""Cost of the AOT loader's checks per module of a directory.

For each module: the header and interface checks, the first spirv-val run,
and a verdict remembered below the cache directory (a fresh process's cost).

Usage: python benchmarks/bench_modulecheck.py AOT_DIRECTORY
"""

import glob
import os
import sys
import tempfile
import time

os.environ["NUMBA_VULKAN_CACHE_DIR"] = tempfile.mkdtemp(prefix="nv-bench-")

from numba_vulkan.spirv import modulecheck


def main(directory):
    for path in sorted(glob.glob(os.path.join(directory, "spirv", "*.spv"))):
        with open(path, "rb") as f:
            data = f.read()
        start = time.perf_counter()
        for _ in range(50):
            modulecheck.interface(data, modulecheck.check_header(data, (1, 2)))
        check = (time.perf_counter() - start) / 50 * 1e3
        start = time.perf_counter()
        modulecheck.validate_once(data, "vulkan1.2")
        first = (time.perf_counter() - start) * 1e3
        modulecheck._validated.clear()
        start = time.perf_counter()
        modulecheck.validate_once(data, "vulkan1.2")
        later = (time.perf_counter() - start) * 1e3
        print(f"{os.path.basename(path)[:12]}  {len(data):6d} bytes  checks {check:.2f} ms  "
              f"spirv-val {first:.1f} ms  remembered {later:.2f} ms")


if __name__ == "__main__":
    main(sys.argv[1])
