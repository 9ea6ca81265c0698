"""The app's kernels: a levels adjustment and histogram binning."""

import numba
import numba_vulkan as nv

#: Output of ``levels`` is scaled to this range.
WHITE_LEVEL = 1.0


@numba.njit
def clamp(value, low, high):
    return min(max(value, low), high)


@nv.jit
def levels(pixels, out, black, white):
    """Stretch ``[black, white]`` to ``[0, WHITE_LEVEL]``, clamping the rest."""
    i = nv.global_id(0)
    if i < pixels.shape[0]:
        scaled = (pixels[i] - black) / (white - black)
        out[i] = clamp(scaled, 0.0, 1.0) * WHITE_LEVEL


@nv.jit
def histogram_bins(values, bins, nbins):
    """The bin of each value in ``[0, 1)`` among ``nbins`` equal bins."""
    i = nv.global_id(0)
    if i < values.shape[0]:
        b = int(values[i] * nbins)
        bins[i] = min(max(b, 0), nbins - 1)
