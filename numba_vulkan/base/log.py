"""The ``numba_vulkan`` logger: where each kernel came from, and why.

At DEBUG it says what was compiled (with the time it took), found in the
kernel cache (``hit``, and the tier: ``disk kernels``, ``remote
functions``, ...), stored, found in an AOT directory, rejected (a damaged
or mismatching entry, and why) and missed. Nothing is logged above DEBUG:
warnings go through :mod:`warnings` as before. ``logging.basicConfig(level=
logging.DEBUG)`` or ``logging.getLogger("numba_vulkan").setLevel(
logging.DEBUG)`` with a handler shows it.
"""

import logging

#: The package's logger.
logger = logging.getLogger("numba_vulkan")


def event(where, outcome, name, detail=""):
    """Log one event at DEBUG: ``where`` (``aot``, ``compiler``, a cache
    tier) ``outcome`` (``hit``, ``miss``, ``compiled``, ...) of kernel
    ``name``, and why or which entry."""
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("%s %s %s%s", where, outcome, name, f" ({detail})" if detail else "")
