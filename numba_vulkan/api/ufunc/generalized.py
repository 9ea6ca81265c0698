"""``@nv.guvectorize``: generalized GPU ufuncs of a core function over the
loop axes of a layout such as ``(n),(n)->()``."""

import math
import re

import numpy as np

from numba_vulkan.api.ufunc.elementwise import _converted
from numba_vulkan.api.ufunc.common import (
    _Base, _add_axis, _broadcast, _cast, _check_stream, _launch, _new_output, _operand, _result,
    _scalar, _threads, _unravel, parse_signature)


def parse_layout(layout):
    """The core dimensions of a gufunc layout ``"(n),(n)->()"``: a tuple of
    name tuples for the inputs and one for the outputs."""
    text = layout.replace(" ", "")
    m = re.fullmatch(r"(.*)->(.*)", text)
    group = r"\((?:\w+(?:,\w+)*)?\)"
    if m is None or not re.fullmatch(f"{group}(?:,{group})*", m.group(1)) \
            or not re.fullmatch(f"{group}(?:,{group})*", m.group(2)):
        raise ValueError(f"bad gufunc layout {layout!r}: write it as '(n),(n)->()'")

    def groups(part):
        return tuple(tuple(g.split(",")) if g else () for g in re.findall(r"\(([^)]*)\)", part))
    return groups(m.group(1)), groups(m.group(2))


class VulkanGUFunc(_Base):
    """A generalized GPU ufunc made by :func:`guvectorize`.

    ``gufunc(*inputs)`` runs the core function once per index of the loop
    dimensions (the operands' leading dimensions, broadcast together), on
    views of the core dimensions its layout names, and returns the
    output(s); outputs may also be passed after the inputs or as ``out=``.
    A ``()`` output is a 1-element array in the core function
    (``out[0] = ...``). Operands that are not of the signature's dtype are
    converted first (NumPy arrays on the host, device arrays by a device
    kernel), since the core function sees them as arrays.
    """

    def __init__(self, func, signatures, layout, **options):
        super().__init__(func, signatures, options, "guvectorize")
        self.layout = layout
        self._ins, self._outs = parse_layout(layout)
        self.nin, self.nout = len(self._ins), len(self._outs)
        self.nargs = self.nin + self.nout
        self._signatures = []
        for sig in self._given:
            ret, args = parse_signature(sig)
            if ret is not None:
                raise TypeError(f"guvectorize signature {sig!r} must return void: outputs "
                                "are arguments")
            if len(args) != self.nargs:
                raise TypeError(f"guvectorize signature {sig!r} has {len(args)} arguments; "
                                f"layout {layout!r} has {self.nargs} operands")
            for k, ((dtype, ndim), core) in enumerate(zip(args, self._ins + self._outs)):
                scalar_ok = k < self.nin and not core
                if ndim != max(len(core), 1) and not (scalar_ok and ndim == 0):
                    raise TypeError(f"guvectorize signature {sig!r}: argument {k} has "
                                    f"{ndim} dimension(s), its core {core} needs "
                                    f"{max(len(core), 1)}")
            self._signatures.append(args)

    @property
    def types(self):
        return ["".join(d.char for d, _ in args[:self.nin]) + "->"
                + "".join(d.char for d, _ in args[self.nin:]) for args in self._signatures]

    @property
    def ntypes(self):
        return len(self._signatures)

    def aot_entries(self, sig):
        """``(attribute, kernel signature)`` of the kernel an AOT manifest
        builds for one of this gufunc's signatures: the one that calls with
        C-contiguous array operands of one loop dimension use."""
        _, args = parse_signature(sig)
        if args not in self._signatures:
            raise TypeError(f"it is not one of the signatures of gufunc {self.__name__!r}")
        index = self._signatures.index(args)
        mask, types = "", []
        for k, ((dtype, ndim), core) in enumerate(zip(args, self._ins + self._outs)):
            if k < self.nin:
                mask += "e" if ndim == 0 else "v"
            dims = 1 + (ndim if core or k >= self.nin or ndim else 0)
            types.append(f"{dtype.name}[{', '.join([':'] * (dims - 1) + ['::1'])}]")
        return [(f"loop_{index}_1d_{mask}", f"void({', '.join(types)})")]

    def _source_for(self, name):
        m = re.fullmatch(r"loop_(\d+)_(\d+)d_([ves]+)", name)
        if m and int(m.group(1)) < len(self._signatures) and len(m.group(3)) == self.nin \
                and 1 <= int(m.group(2)) <= 32:
            return self._source(name, self._signatures[int(m.group(1))], int(m.group(2)),
                                m.group(3))
        return None

    def _source(self, name, args, ndim, mask):
        ins = [f"a{k}" for k in range(self.nin)]
        outs = [f"o{k}" for k in range(self.nout)]
        index = [f"i{axis}" for axis in range(ndim)]
        at = ", ".join(index)
        values = []
        for k, kind in enumerate(mask):
            dtype = args[k][0]
            values.append(f"a{k}[{at}]" if kind == "v" else
                          f"{_cast(dtype)}(a{k}[{at}])" if kind == "e" else
                          f"{_cast(dtype)}(a{k})")
        values += [f"o{k}[{at}]" for k in range(self.nout)]
        count = " * ".join(f"o0.shape[{axis}]" for axis in range(ndim))
        lines = [f"def {name}({', '.join(ins + outs)}):",
                 "    i = global_id(1) * global_size(0) + global_id(0)",
                 f"    if i < {count}:",
                 *_unravel(index, "o0", "        "),
                 f"        f({', '.join(values)})"]
        return "\n".join(lines) + "\n"

    def __call__(self, *args, out=None, stream=0):
        _check_stream(stream)
        if out is not None:
            args = args + (tuple(out) if isinstance(out, tuple) else (out,))
        if len(args) not in (self.nin, self.nargs):
            raise TypeError(f"gufunc {self.__name__!r} takes {self.nin} input(s) and "
                            f"{self.nout} output(s), {len(args)} operands were given")
        operands = [_operand(a) for a in args[:self.nin]]
        outputs = [_operand(a) for a in args[self.nin:]]
        if any(k == "scalar" for k, _ in outputs):
            raise TypeError(f"gufunc {self.__name__!r}: outputs must be arrays")
        sig = self._select(operands, lambda s: [d for d, _ in s[:self.nin]])
        index = self._signatures.index(sig)
        sizes, loops = {}, []
        for k, ((kind, value), core) in enumerate(zip(operands + outputs,
                                                      self._ins + self._outs)):
            shape = () if kind == "scalar" else value.shape
            if len(shape) < len(core):
                raise ValueError(f"gufunc {self.__name__!r}: operand {k} has "
                                 f"{len(shape)} dimension(s), its core {core} needs "
                                 f"{len(core)}")
            split = len(shape) - len(core)
            for dim, extent in zip(core, shape[split:]):
                if sizes.setdefault(dim, extent) != extent:
                    raise ValueError(f"gufunc {self.__name__!r}: dimension {dim!r} is "
                                     f"{sizes[dim]} in one operand and {extent} in operand {k}")
            loops.append(shape[:split])
        try:
            loop = np.broadcast_shapes(*loops)
        except ValueError:
            raise ValueError(f"gufunc {self.__name__!r}: loop dimensions "
                             f"{', '.join(map(str, loops))} do not broadcast together") from None
        for k, (kind, value) in enumerate(outputs):
            if loops[self.nin + k] != loop:
                raise ValueError(f"gufunc {self.__name__!r}: output {k} has loop dimensions "
                                 f"{loops[self.nin + k]}, the inputs broadcast to {loop}")
            if value.dtype != sig[self.nin + k][0]:
                raise TypeError(f"gufunc {self.__name__!r}: output {k} has dtype "
                                f"{value.dtype}, signature {self.types[index]} writes "
                                f"{sig[self.nin + k][0]}")
        on_device = any(k == "device" for k, _ in operands)
        given = bool(outputs)
        if not given:
            for k, core in enumerate(self._outs):
                missing = [d for d in core if d not in sizes]
                if missing:
                    raise ValueError(f"gufunc {self.__name__!r}: output dimension(s) "
                                     f"{', '.join(missing)} appear in no input; pass the "
                                     "output")
                outputs.append(_new_output(on_device, loop + tuple(sizes[d] for d in core),
                                           sig[self.nin + k][0]))
        if math.prod(loop) and all(v.size for _, v in outputs):
            self._run(index, sig, operands, outputs, loop, stream)
        results = [_result(k, v) for k, v in outputs]
        if given:
            results = [v for _, v in outputs]
        return results[0] if self.nout == 1 else tuple(results)

    def _run(self, index, sig, operands, outputs, loop, stream=0):
        lead = not loop
        full = loop or (1,)
        mask, launch = [], []
        for k, ((kind, value), core) in enumerate(zip(operands, self._ins)):
            dtype, ndim = sig[k]
            if kind == "scalar":
                if ndim:
                    # A 0-d array, given its trailing axis of 1 below.
                    kind, value = "host", np.asarray(value, dtype)
                else:
                    mask.append("s")
                    launch.append(_scalar(dtype, value))
                    continue
            if not core and ndim == 0:
                mask.append("e")
                value = _broadcast(kind, value, loop)
                launch.append(_add_axis(kind, value, 0) if lead else value)
                continue
            mask.append("v")
            value = _converted(kind, value, dtype, stream)
            shape = loop + value.shape[value.ndim - len(core):] if core else loop
            value = _broadcast(kind, value, shape)
            if not core:
                value = _add_axis(kind, value, -1)
            launch.append(_add_axis(kind, value, 0) if lead else value)
        for (kind, value), core in zip(outputs, self._outs):
            if not core:
                value = _add_axis(kind, value, -1)
            launch.append(_add_axis(kind, value, 0) if lead else value)
        ndim = len(full)
        name = f"loop_{index}_{ndim}d_{''.join(mask)}"
        kernel = self._kernel(name, lambda: self._source(name, sig, ndim, "".join(mask)))
        _launch(kernel, math.prod(full), launch, _threads(), stream)


def guvectorize(signatures, layout, **options):
    """A decorator that makes a generalized GPU ufunc from a core function.

    ``@nv.guvectorize(["void(float32[:], float32[:], float32[:])"], "(n),(n)->()")``;
    options are ``nv.jit``'s. See :class:`VulkanGUFunc` and ``docs/ufuncs.md``.
    """
    def wrap(func):
        return VulkanGUFunc(func, signatures, layout, **options)

    return wrap
