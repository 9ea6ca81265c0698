"""What the command lines (``python -m numba_vulkan``, ``python -m
numba_vulkan.aot``) share."""

import os
import sys


def run(main):
    """Exit with ``main()``'s status. A reader that stops reading early
    (``... | head``) ends the command quietly, as it ends Unix tools, not
    with a BrokenPipeError traceback."""
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit, which would raise once more.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 1
    sys.exit(status)
