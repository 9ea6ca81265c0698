"""Mandelbrot: a while loop with an early exit, writing 16-bit iteration counts.

Run it with ``python -m examples.mandelbrot`` from the repository root. The
image is a ``uint16`` array, so the device needs 16-bit storage buffers
(``storage16`` in ``python -m numba_vulkan info``).
"""

import numpy as np

import numba_vulkan as nv


@nv.jit
def mandelbrot(image, x0, y0, step, max_iter):
    i = nv.global_id(1)
    j = nv.global_id(0)
    if i >= image.shape[0] or j >= image.shape[1]:
        return
    cr = x0 + j * step
    ci = y0 + i * step
    zr = 0.0
    zi = 0.0
    n = 0
    while n < max_iter:
        zr2 = zr * zr
        zi2 = zi * zi
        if zr2 + zi2 > 4.0:
            break
        zi = 2.0 * zr * zi + ci
        zr = zr2 - zi2 + cr
        n += 1
    image[i, j] = n


def reference(shape, x0, y0, step, max_iter):
    """The same image computed with NumPy, pixel by pixel in lockstep."""
    i, j = np.indices(shape)
    c = (x0 + j * step) + 1j * (y0 + i * step)
    z = np.zeros(shape, np.complex128)
    counts = np.zeros(shape, np.uint16)
    active = np.ones(shape, bool)
    for _ in range(max_iter):
        active &= z.real * z.real + z.imag * z.imag <= 4.0
        if not active.any():
            break
        z[active] = z[active] ** 2 + c[active]
        counts[active] += 1
    return counts


def render(height=240, width=320, max_iter=200):
    """Render the classic view and return the image."""
    image = nv.device_array((height, width), np.uint16)
    step = 3.0 / width
    groups = ((width + 15) // 16, (height + 15) // 16)
    mandelbrot[groups, (16, 16)](image, -2.25, -step * height / 2, step, np.int32(max_iter))
    nv.synchronize()
    return image.copy_to_host(), (-2.25, -step * height / 2, step, max_iter)


def main():
    image, (x0, y0, step, max_iter) = render()
    expected = reference(image.shape, x0, y0, step, max_iter)
    # Rounding may differ where an orbit grazes the escape radius: allow a
    # handful of pixels, never a wrong picture.
    differing = np.count_nonzero(image != expected)
    assert differing <= image.size // 1000, f"{differing} pixels differ from NumPy"
    inside = np.count_nonzero(image == max_iter)
    print(f"mandelbrot {image.shape[1]}x{image.shape[0]}: {inside} pixels inside the set, "
          f"{differing} differ from NumPy")


if __name__ == "__main__":
    main()
