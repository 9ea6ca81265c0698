"""The Vulkan target as Numba sees it: target class, typing and target
contexts, and the dispatcher of device functions.

Device functions are Python functions compiled for Vulkan to be called from
kernels. Numba types a call to another jitted function through a dispatcher
object. :class:`DeviceDispatcher` is that object for the Vulkan target: it
compiles the function for the argument types at the call site and registers
the result with the target context so that lowering can call (and later
inline) it. ``@overload`` implementations and ``@numba.njit`` functions
called from a kernel become device dispatchers too. The typing context finds
them (:func:`device_function_type`) and they hold the target that owns it,
which is why both live here.
"""

import functools
import weakref

from llvmlite import ir
from numba.core import types, typing
from numba.core.base import BaseContext
from numba.core.codegen import CodeLibrary, Codegen
from numba.core.descriptors import TargetDescriptor
from numba.core.dispatcher import Dispatcher
from numba.core.errors import TypingError
from numba.core.target_extension import CUDA, dispatcher_registry, jit_registry, target_registry
from numba.core.typing.typeof import typeof_impl

from numba_vulkan.base import jitoptions

#: Data layout of LLVM's logical SPIR-V target.
DATA_LAYOUT = ("e-i64:64-v16:16-v24:32-v32:32-v48:64-v96:128-v192:256-"
               "v256:256-v512:512-v1024:1024-n8:16:32:64-G10")


class Vulkan(CUDA):
    """The Vulkan compute target.

    A kind of Numba's CUDA target, so that the ``@overload``,
    ``@overload_method`` and ``@intrinsic`` that libraries register for
    ``target="cuda"`` (numba.cuda's kernel API) apply in Vulkan kernels too;
    those for ``target="vulkan"`` come first.
    """


target_registry["vulkan"] = Vulkan


def _numba_cuda_own(value):
    """Whether ``value`` belongs to Numba's own CUDA target (``numba.cuda.grid``,
    ...), rather than to a library that extends it for kernels."""
    module = getattr(getattr(value, "_defn", value), "__module__", None)
    if type(module) is not str:
        module = type(value).__module__
    return module == "numba.cuda" or module.startswith("numba.cuda.")


#: The types of modules and Python functions, of functions written in C
#: (``len``, ``math.sqrt``), the modules of the latter that the typing
#: context finds by their templates, and typeof's implementation for
#: anything it does not know.
_PLAIN_GLOBALS = (type(functools), type(lambda: None))
_BUILTIN_FUNCTION = type(len)
_BUILTIN_MODULES = frozenset(("builtins", "math", "cmath", "operator", "_operator"))
_TYPEOF_ANY = typeof_impl.dispatch(object)


class VulkanTypingContext(typing.Context):
    """Numba's CPU typing plus the kernel API (``global_id``, ``shared``, ...)."""

    def load_additional_registries(self):
        # Numba's CPU typing (typing.Context's registries), less
        # numba.core.typing.cffi_utils's: typing ``ffi.from_buffer`` of a
        # cffi module on the host, which a kernel cannot call, and importing
        # it makes a cffi.FFI, which loads pycparser (15 ms of a process's
        # first compile).
        from numba.core.typing import (cmathdecl, dictdecl, enumdecl, listdecl, mathdecl,
                                       npydecl, setdecl)
        from numba_vulkan.frontend import fp16
        from numba_vulkan.frontend import mathimpl
        from numba_vulkan.frontend import stubs
        from numba_vulkan.frontend import subgroups
        for module in (cmathdecl, enumdecl, listdecl, mathdecl, npydecl, setdecl, dictdecl):
            self.install_registry(module.registry)
        self.install_registry(stubs.typing_registry)
        self.install_registry(fp16.typing_registry)
        self.install_registry(mathimpl.typing_registry)
        self.install_registry(subgroups.typing_registry)

    def resolve_value_type(self, val):
        resolved = device_function_type(val)
        if resolved is not None:
            return resolved
        if _numba_cuda_own(val):
            # Its templates are for target "cuda", which this target is a
            # kind of, but they lower to NVVM intrinsics.
            name = getattr(val, "__name__", None) or getattr(val, "_name", type(val).__name__)
            raise TypingError(f"{name} is numba.cuda's own, for NVIDIA's CUDA target "
                              "('from numba_vulkan import cuda' has numba.cuda's names)")
        if type(val) is type and val.__module__ == "builtins" \
                and not issubclass(val, BaseException):
            # ``bool``, which Numba calls on every branch condition: typeof
            # has no type for a builtin class and Numba falls back to the
            # global's template, but first imports numba.typed to rule out
            # its Dict, List and Set (20 ms of a process's first compile).
            resolved = self._get_global_type(val)
            if resolved is not None:
                return resolved
        elif (type(val) in _PLAIN_GLOBALS or type(val) is _BUILTIN_FUNCTION
              and val.__module__ in _BUILTIN_MODULES) \
                and typeof_impl.dispatch(type(val)) is _TYPEOF_ANY \
                and not hasattr(val, "_numba_type_"):
            # Modules (``nv``, ``math``), the kernel API's functions
            # (``nv.global_id``), ``len``, ``math.sqrt``: typeof has no type
            # for them either (no buffer, no ``_numba_type_``, not a function
            # of a cffi module) and Numba falls back to the global's
            # template or module type, but first imports
            # numba.core.typing.cffi_utils to ask cffi (15 ms, see above).
            resolved = self._get_global_type(val)
            if resolved is not None:
                return resolved
        return super().resolve_value_type(val)


class VulkanCodeLibrary(CodeLibrary):
    """Collects the LLVM IR modules of one compiled function and those it calls.

    Nothing is compiled to machine code here: :meth:`modules` hands the IR to
    :mod:`numba_vulkan.codegen`.
    """

    def __init__(self, codegen, name):
        super().__init__(codegen, name)
        self._modules = []
        self._linked = []

    def add_ir_module(self, ir_module):
        self._raise_if_finalized()
        self._modules.append(str(ir_module))

    def add_linking_library(self, library):
        if library not in self._linked:
            self._linked.append(library)

    def finalize(self):
        self._finalized = True

    def modules(self):
        """IR text of this library's modules and of every library it links."""
        seen, out = set(), []

        def visit(lib):
            if id(lib) in seen:
                return
            seen.add(id(lib))
            out.extend(lib._modules)
            for dep in lib._linked:
                visit(dep)

        visit(self)
        return out

    def get_function(self, name):
        raise NotImplementedError("Vulkan functions are not callable from the host")

    def get_llvm_str(self):
        return "\n".join(self.modules())

    def get_asm_str(self):
        raise NotImplementedError("use the compiled kernel's spirv attribute")


class VulkanCodegen(Codegen):
    """Creates empty modules and libraries for the Vulkan target."""

    _library_class = VulkanCodeLibrary

    def __init__(self):
        self._data_layout = DATA_LAYOUT

    def _create_empty_module(self, name):
        module = ir.Module(name)
        module.data_layout = DATA_LAYOUT
        return module

    def _add_module(self, module):
        raise NotImplementedError

    def create_library(self, name, **kwargs):
        return VulkanCodeLibrary(self, name)

    def insert_unresolved_ref(self, builder, fnty, name):
        """Numba's lowering of a recursive call; SPIR-V kernels have none."""
        from numba.core.errors import UnsupportedError
        raise UnsupportedError("recursive calls are not supported in Vulkan kernels: every "
                               "device function is inlined into the kernel")

    def magic_tuple(self):
        return ("spirv", "vulkan", "")

    @functools.cached_property
    def _target_data(self):
        import llvmlite.binding as llvm
        return llvm.create_target_data(DATA_LAYOUT)


class VulkanTargetContext(BaseContext):
    """Lowering for the Vulkan target: Numba's CPU lowering without the CPython
    and NRT parts, plus the kernel API."""

    # Numba's CPU lowering of ``float ** float`` calls llvm.pow; codegen maps
    # that to libclc. (True would route it through math.pow, which the CPU
    # lowering implements as ``**`` again.)
    implement_powi_as_math_call = False
    # A packed record's fields may sit at any offset: codegen/logical/records.py
    # assembles an access it cannot prove aligned from narrower ones, so
    # Numba's refusal of such fields (numba.cuda's) is not needed.
    strict_alignment = False
    allow_dynamic_globals = False

    def __init__(self, typingctx, target="vulkan"):
        self._refreshing = False
        self._refresh_again = False
        super().__init__(typingctx, target)

    def refresh(self):
        """Install what the registries gained since the last refresh, in this
        context and the typing context.

        Each ``@overload_method`` template the typing context installs
        refreshes this context before it registers its lowering (Numba's
        ``_get_target_registry``), which refreshes the typing context again,
        which installs the next template there: about 150 refreshes deep the
        first time (12 ms of a process's first compile). One that comes while
        another runs only asks it to go round once more: templates are
        installed in the same order, each finds the builtin registry already
        installed here, and their lowerings are installed by the next round
        (5 ms less). Numba's compiler refreshes both contexts before each
        compile, under its lock, as ``contexts()`` does.
        """
        if self._refreshing:
            self._refresh_again = True
            return
        self._refreshing = True
        try:
            self._refresh_again = True
            while self._refresh_again:
                self._refresh_again = False
                super().refresh()
        finally:
            self._refreshing = False

    def init(self):
        from numba_vulkan.frontend import fp16
        self._internal_codegen = VulkanCodegen()
        self.data_model_manager = fp16.data_model_manager(self.data_model_manager)
        self._abi = {}

    def get_abi_sizeof(self, ty):
        return self._abi_of(ty, "size", super().get_abi_sizeof)

    def get_abi_alignment(self, ty):
        return self._abi_of(ty, "alignment", super().get_abi_alignment)

    def _abi_of(self, ty, what, compute):
        # llvmlite answers each query by parsing a module that declares a
        # global of the type: a millisecond, asked a dozen times a kernel.
        # A literal type's text is all of it; a named struct's is only its
        # name, so those are asked every time.
        key = (what, str(ty))
        if "%" in key[1]:
            return compute(ty)
        value = self._abi.get(key)
        if value is None:
            value = self._abi[key] = compute(ty)
        return value

    @property
    def enable_nrt(self):
        return False

    def post_lowering(self, mod, library):
        if self.fastmath:
            from numba.core import fastmathpass
            fastmathpass.rewrite_module(mod, self.fastmath)

    def create_module(self, name):
        return self._internal_codegen._create_empty_module(name)

    def codegen(self):
        return self._internal_codegen

    @property
    def target_data(self):
        return self._internal_codegen._target_data

    @functools.cached_property
    def call_conv(self):
        from numba_vulkan.frontend.checks import VulkanCallConv
        return VulkanCallConv(self)

    def load_additional_registries(self):
        from numba.cpython import (builtins, charseq, enumimpl, iterators,  # noqa: F401
                                   listobj, numbers, rangeobj, slicing,
                                   tupleobj)
        from numba.cpython import cmathimpl, mathimpl
        from numba.core import optional  # noqa: F401
        # numba.literal_unroll and numba.literally, as Numba's CPU target has them.
        from numba.misc import literal  # noqa: F401
        from numba.np import arraymath, arrayobj, npyimpl  # noqa: F401
        from numba_vulkan.frontend import mathimpl as vulkan_mathimpl
        from numba_vulkan.frontend import fp16
        from numba_vulkan.frontend import printing
        from numba_vulkan.frontend import stubs
        from numba_vulkan.frontend import subgroups
        self.install_registry(cmathimpl.registry)
        self.install_registry(mathimpl.registry)
        self.install_registry(npyimpl.registry)
        self.install_registry(stubs.lowering_registry)
        self.install_registry(vulkan_mathimpl.lowering_registry)
        self.install_registry(subgroups.lowering_registry)
        self.install_registry(fp16.lowering_registry)
        self.install_registry(printing.lowering_registry)

    def get_ufunc_info(self, ufunc_key):
        """NumPy ufuncs on scalars lower as on the CPU; codegen links their math."""
        from numba_vulkan.frontend import mathimpl
        return mathimpl.ufunc_info(ufunc_key)

    def get_constant_generic(self, builder, ty, val):
        # A function named in a kernel is a compile-time constant: calls to
        # it are lowered directly and nothing reads its value. Numba's CPU
        # lowering would embed the object's address, which a GPU cannot use.
        if isinstance(ty, (types.Dispatcher, types.Function)):
            return self.get_dummy_value()
        from numba_vulkan.base import intrinsics
        if isinstance(val, intrinsics.KernelValue):
            # Typed as an int, read from the device each time it is named.
            from numba_vulkan.frontend import stubs
            return stubs.kernel_value(builder, val)
        return super().get_constant_generic(builder, ty, val)

    def get_executable(self, func, fndesc, env):
        raise NotImplementedError("Vulkan functions are not callable from the host")

    def create_cpython_wrapper(self, library, fndesc, env, call_helper,
                               release_gil=False):
        """Kernels have no CPython wrapper."""

    def create_cfunc_wrapper(self, library, fndesc, env, call_helper):
        """Kernels have no C wrapper."""


class VulkanTargetDescriptor(TargetDescriptor):
    """Owns the Vulkan target's typing and target contexts, made on first use."""

    def __init__(self, name):
        super().__init__(name)
        self._contexts = None

    @property
    def options(self):
        from numba_vulkan.frontend.flags import VulkanTargetOptions
        return VulkanTargetOptions

    def _ensure(self):
        if self._contexts is None:
            from numba.core.target_extension import target_override
            with target_override("vulkan"):
                typing_context = VulkanTypingContext()
                target_context = VulkanTargetContext(typing_context)
                # Refreshing resolves overload templates, which ask this
                # descriptor for the contexts: publish them first.
                self._contexts = typing_context, target_context
                target_context.refresh()
        return self._contexts

    @property
    def typing_context(self):
        return self._ensure()[0]

    @property
    def target_context(self):
        return self._ensure()[1]


vulkan_target = VulkanTargetDescriptor("vulkan")


class VulkanTarget:
    """What Numba's registries need to find the Vulkan target's contexts.

    Numba resolves overloads for a target through ``dispatcher_registry``;
    only the ``targetdescr`` attribute of the registered class is used there.
    """

    targetdescr = vulkan_target


dispatcher_registry[Vulkan] = VulkanTarget


# Device functions ---------------------------------------------------------------

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
    if callable(device_function) and not isinstance(value, Dispatcher):
        device = value.device_function()
        if isinstance(device, DeviceDispatcher):
            return types.Dispatcher(device)
    if isinstance(value, Dispatcher) and not isinstance(value, DeviceDispatcher):
        variants = _retargeted.setdefault(value, {})
        device = variants.get(lowering_variant())
        if device is None:
            options = jitoptions.code_options(value.targetoptions)
            device = variants[lowering_variant()] = DeviceDispatcher(value.py_func,
                                                                     targetoptions=options)
        return types.Dispatcher(device)
    return None
