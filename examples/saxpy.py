"""saxpy: y = a * x + y, on NumPy arrays and on device arrays.

Run it with ``python -m examples.saxpy`` from the repository root.
"""

import numpy as np

import numba_vulkan as nv


@nv.jit
def saxpy(a, x, y):
    i = nv.global_id(0)
    if i < x.shape[0]:
        y[i] = a * x[i] + y[i]


def main():
    rng = np.random.default_rng(0)
    x = rng.random(1_000_000, dtype=np.float32)
    y = rng.random(1_000_000, dtype=np.float32)
    expected = np.float32(2.0) * x + y

    saxpy.forall(x.size)(np.float32(2.0), x, y)          # NumPy arrays: copied in and back
    assert np.allclose(y, expected)

    dx, dy = nv.to_device(x), nv.to_device(expected)
    saxpy[(x.size + 255) // 256, 256](np.float32(-2.0), dx, dy)   # device arrays: no copies
    nv.synchronize()
    back = dy.copy_to_host()
    assert np.allclose(back, expected - 2 * x, atol=1e-5)
    device = nv.list_devices()[0]
    print(f"saxpy on {device.name}: {x.size} elements, results match NumPy")


if __name__ == "__main__":
    main()
