"""Device functions: Python functions compiled for Vulkan to be called from kernels.

Numba types a call to another jitted function through a dispatcher object.
:class:`DeviceDispatcher` is that object for the Vulkan target: it compiles
the function for the argument types at the call site and registers the
result with the target context so that lowering can call (and later inline)
it. ``@overload`` implementations and ``@numba.njit`` functions called from a
kernel become device dispatchers too.
"""

import weakref

from numba.core import dispatcher, types
from numba.core.dispatcher import Dispatcher
from numba.core.target_extension import jit_registry

from numba_vulkan.base import jitoptions
from numba_vulkan.frontend.target import Vulkan, vulkan_target


class _ImplKey:
    """Identifies one compiled overload to the target context."""

    __slots__ = ("name", "__weakref__")

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<Vulkan device function {self.name}>"


class DeviceDispatcher(Dispatcher):
    """Compiles a Python function as a Vulkan device function on demand."""

    targetdescr = vulkan_target

    def __init__(self, py_func, locals=None, targetoptions=None, **kwargs):
        super().__init__(py_func, locals=locals or {},
                         targetoptions=dict(targetoptions or {}))

    def add_overload(self, cres):
        # Lowering finds a callee by the overload's entry point. A device
        # function has no host entry point, so give each overload a key of
        # its own and register the compiled code under it.
        key = _ImplKey(f"{self.py_func.__qualname__}{tuple(cres.signature.args)}")
        cres = cres._replace(entry_point=key)
        self.targetctx.insert_user_function(key, cres.fndesc, [cres.library])
        # Not registered with the C dispatcher: it is never called from Python.
        self.overloads[tuple(cres.signature.args)] = cres

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.py_func.__qualname__} is a Vulkan device function: "
                           "call it from a kernel")


def device_jit(*args, **options):
    """``jit`` for the Vulkan target as Numba's ``@overload`` machinery calls it."""
    # Overload templates pass CPU options too; device functions are always
    # nopython and take only the options the Vulkan target knows.
    from numba_vulkan.frontend.flags import VulkanTargetOptions
    known = {k for k in dir(VulkanTargetOptions)
             if isinstance(getattr(VulkanTargetOptions, k), VulkanTargetOptions.Mapping)}
    options = {k: v for k, v in options.items() if k in known}

    def wrap(func):
        return DeviceDispatcher(func, targetoptions=options)

    if args and callable(args[0]):
        return wrap(args[0])
    return wrap


jit_registry[Vulkan] = device_jit

_retargeted = weakref.WeakKeyDictionary()


def lowering_variant():
    """What, besides argument types, the lowering of a function depends on.

    A device function's compiled overloads are reused for every kernel that
    calls it with the same argument types, so a function is compiled once
    per variant: whether float32 atomic adds are native, whether int64
    is narrowed (subgroup operations split 64-bit integers only where not),
    whether float64 is (``print`` records a float64 as two words only where
    not), and the bytes of dynamic shared memory (the length of ``shared.array(0, ...)``).
    """
    context = vulkan_target.target_context
    return (bool(getattr(context, "float32_atomic_add", False)),
            bool(getattr(context, "int64_narrowed", False)),
            bool(getattr(context, "float64_narrowed", False)),
            int(getattr(context, "dynamic_shared_bytes", 0)))


def device_function_type(value):
    """The Numba type of a jitted function called from a kernel, or None.

    An ``@nv.jit`` function is called as a device function: any object with
    a ``device_function()`` method that returns a :class:`DeviceDispatcher`
    (the compiler does not import the dispatcher module). ``@numba.njit``
    functions are recompiled for Vulkan from their Python source, with their
    options.
    """
    device_function = getattr(type(value), "device_function", None)
    if callable(device_function) and not isinstance(value, dispatcher.Dispatcher):
        device = value.device_function()
        if isinstance(device, DeviceDispatcher):
            return types.Dispatcher(device)
    if isinstance(value, dispatcher.Dispatcher) and not isinstance(value, DeviceDispatcher):
        variants = _retargeted.setdefault(value, {})
        device = variants.get(lowering_variant())
        if device is None:
            options = jitoptions.code_options(value.targetoptions)
            device = variants[lowering_variant()] = DeviceDispatcher(value.py_func,
                                                                     targetoptions=options)
        return types.Dispatcher(device)
    return None
