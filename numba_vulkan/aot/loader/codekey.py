"""The content key of a kernel: what identifies its code on any machine, at any path.

An AOT entry is found by this key, computed from the kernel object at run
time without Numba. It is :func:`numba_vulkan.store.codehash.code_key_parts` of
the kernel's Python function and options; that module says what is in it
and what is not (file names, line numbers, modification times). The kernel
cache's ``functions/`` key holds it too, with the source files' stamps
added (:func:`numba_vulkan.store.cache.source_stamp`), which an AOT key
leaves out: a directory is built on another machine, and its file times do
not travel with it.

A kernel reading a value that has no stable key (a dict, an instance of an
application class) cannot be found in an AOT directory: :func:`kernel_key`
raises :class:`~numba_vulkan.base.errors.AOTError` naming it.
"""

from numba_vulkan.store import codehash
from numba_vulkan.base.errors import AOTError


def kernel_key(dispatcher):
    """The content key of an ``@nv.jit`` kernel.

    Args:
        dispatcher: A :class:`~numba_vulkan.api.dispatcher.VulkanDispatcher`.

    Returns:
        A hexadecimal SHA-256 digest.

    Raises:
        AOTError: The kernel reads a global whose value has no stable key.
    """
    return kernel_key_parts(dispatcher)[0]


def kernel_key_parts(dispatcher):
    """The content key of a kernel and the digests of its parts.

    The parts (:func:`numba_vulkan.store.codehash.code_key_parts`) say what a key
    that differs from a shipped entry's differs in: ``code``, ``options``,
    ``callee NAME``, ``global NAME`` and ``closure NAME``.

    Returns:
        ``(key, parts)``: the key as :func:`kernel_key` gives it, and a dict
        of part names to the first 16 hex digits of their SHA-256.

    Raises:
        AOTError: The kernel reads a global whose value has no stable key.
    """
    try:
        return codehash.code_key_parts(dispatcher.py_func, dispatcher.options)
    except codehash.Unkeyable as exc:
        advice = ("pass it as an argument, or make it a number, string, tuple or NumPy array"
                  if exc.kind else "call fewer functions")
        raise AOTError(f"kernel {dispatcher.__qualname__}: {exc}, so the kernel cannot be "
                       f"shipped ahead of time; {advice}") from None
