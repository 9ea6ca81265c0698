"""Loading the Vulkan library, and checking every call's result."""

import threading

from numba_vulkan.base import system
from numba_vulkan.base.errors import DriverError

_lock = threading.Lock()
_module = None



def module():
    """The ``vulkan`` package, imported on first use.

    Importing it loads the Vulkan loader library, which importing
    numba_vulkan must not do.
    """
    global _module
    if _module is None:
        with _lock:
            if _module is None:
                try:
                    import vulkan
                except OSError as exc:
                    raise DriverError(f"no Vulkan loader library was found ({exc}). "
                                      f"{system.how_to_get('loader')}") from exc
                _module = vulkan
    return _module


def ffi():
    return module().ffi


def lib():
    return module().lib


_RESULT_NAMES = None


def result_name(code):
    """The VkResult enumerant's name for ``code``."""
    global _RESULT_NAMES
    if _RESULT_NAMES is None:
        vk = module()
        _RESULT_NAMES = {getattr(vk, n): n for n in dir(vk)
                         if (n.startswith("VK_ERROR_") or n in (
                             "VK_SUCCESS", "VK_NOT_READY", "VK_TIMEOUT", "VK_INCOMPLETE",
                             "VK_EVENT_SET", "VK_EVENT_RESET"))
                         and isinstance(getattr(vk, n), int)}
    return _RESULT_NAMES.get(code, str(code))


def check(result, what, allowed=(0,)):
    """Raise :class:`DriverError` unless ``result`` is one of ``allowed``."""
    if result not in allowed:
        raise DriverError(f"{what} failed: {result_name(result)}", result)
    return result


def new(ctype, init=None):
    """A new cffi object of ``ctype`` (a pointer or array type)."""
    return ffi().new(ctype, init) if init is not None else ffi().new(ctype)
