"""Math lowering that differs from Numba's CPU target.

Numba's CPU lowering is used as it is, and codegen maps the C functions and
LLVM intrinsics it calls to libclc (:mod:`numba_vulkan.codegen.libclc_link`).
The exceptions live here: lowerings whose CPU version counts on an LLVM
rewrite into a C library call, which cannot happen once the call is
renamed to libclc.
"""

from llvmlite import ir
from numba.core import cgutils

def _cbrt(context, builder, sig, args):
    # On the CPU this is pow(x, 1/3) compiled with fastmath so that LLVM
    # turns it into libm's cbrt; here it calls (libclc's) cbrt directly.
    ty = context.get_value_type(sig.args[0])
    name = "cbrtf" if ty == ir.FloatType() else "cbrt"
    fn = cgutils.insert_pure_function(builder.module, ir.FunctionType(ty, [ty]), name=name)
    return builder.call(fn, args)


def ufunc_info(ufunc):
    """Numba's CPU implementations of ``ufunc`` by loop signature, with the
    Vulkan target's replacements."""
    import numpy as np
    from numba.np import ufunc_db
    info = ufunc_db.get_ufunc_info(ufunc)
    if ufunc is np.cbrt:
        info = {**info, "f->f": _cbrt, "d->d": _cbrt}
    return info
