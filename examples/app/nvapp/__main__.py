"""``python -m nvapp``: run the app's kernels and check them against NumPy."""

import sys

import numpy as np

import numba_vulkan as nv
from nvapp.kernels import histogram_bins, levels


def main():
    rng = np.random.default_rng(1)
    pixels = rng.random(10_000, dtype=np.float32)
    out = np.empty_like(pixels)
    levels.forall(pixels.size)(pixels, out, np.float32(0.1), np.float32(0.9))
    expected = np.clip((pixels - np.float32(0.1)) / np.float32(0.8), 0, 1)
    bins = np.empty(pixels.size, np.int32)
    histogram_bins.forall(pixels.size)(out, bins, np.int32(16))
    ok = (np.allclose(out, expected, rtol=1e-6, atol=1e-7)
          and np.array_equal(bins, np.minimum((out * 16).astype(np.int32), 15)))
    stats = nv.aot.stats()
    print(f"nvapp: {'ok' if ok else 'WRONG RESULTS'}; AOT hits {stats['hits']}, "
          f"misses {stats['misses']}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
