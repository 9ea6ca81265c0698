"""``@nv.vectorize``: GPU ufuncs of a scalar function, called like NumPy's,
broadcasting their operands, and their ``reduce``."""

import math
import re
import threading

import numpy as np

from numba_vulkan.runtime import memory
from numba_vulkan.api.ufunc.reduction import Reduce
from numba_vulkan.api.ufunc.common import (
    _Base, _broadcast, _cast, _castable, _check_stream, _launch, _new_output, _operand, _result,
    _scalar, _threads, _type_name, _unravel, parse_signature)


class VulkanUFunc(_Base):
    """A GPU ufunc made by :func:`vectorize`: call it like a NumPy ufunc.

    ``ufunc(a, b)`` broadcasts its operands (NumPy arrays, device arrays,
    scalars), picks the first signature whose argument types they all cast
    to safely, and runs one invocation per element. The result is a device
    array when any operand is one, else a NumPy array (a NumPy scalar when
    every operand is a scalar). ``out=`` (or one more positional argument)
    receives the result instead; ``stream=`` runs the call's copies and
    launches on that stream, after what it has queued (a call with device
    operands only returns without waiting).
    """

    def __init__(self, func, signatures, **options):
        super().__init__(func, signatures, options, "vectorize")
        self._selected = {}
        self._by_layout = {}
        self._signatures = []
        for sig in self._given:
            ret, args = parse_signature(sig)
            if ret is None or ret[1] or any(ndim for _, ndim in args):
                raise TypeError(f"vectorize signature {sig!r}: scalars only, with a return "
                                "type, such as 'float32(float32, float32)'")
            if not args:
                raise TypeError(f"vectorize signature {sig!r} has no arguments")
            self._signatures.append((ret[0], tuple(d for d, _ in args)))
        nins = {len(args) for _, args in self._signatures}
        if len(nins) != 1:
            raise TypeError(f"vectorize {self.__name__}: every signature must take the same "
                            "number of arguments")
        self.nin = nins.pop()
        self.nout = 1
        self.nargs = self.nin + 1

    @property
    def types(self):
        """The signatures in NumPy's notation (``'ff->f'``)."""
        return ["".join(d.char for d in args) + "->" + ret.char
                for ret, args in self._signatures]

    @property
    def ntypes(self):
        return len(self._signatures)

    def aot_entries(self, sig):
        """``(attribute, kernel signature)`` of the kernel an AOT manifest
        builds for one of this ufunc's signatures: the one that calls with
        C-contiguous arrays of one shape and the signature's dtypes use
        (other calls name theirs in the AOT miss warning)."""
        ret, args = parse_signature(sig)
        dtypes = tuple(d for d, _ in args)
        if ret is None or (ret[0], dtypes) not in self._signatures:
            raise TypeError(f"it is not one of the signatures of ufunc {self.__name__!r} "
                            f"({'; '.join(self.types)})")
        arrays = ", ".join(f"{d.name}[::1]" for d in dtypes + (ret[0],))
        return [(self._name(dtypes, 1, "a" * len(dtypes)), f"void({arrays})")]

    @staticmethod
    def _name(dtypes, ndim, mask):
        return f"loop_{'_'.join(d.name for d in dtypes)}_{ndim}d_{mask}"

    def _source_for(self, name):
        for _, dtypes in self._signatures:
            prefix = f"loop_{'_'.join(d.name for d in dtypes)}_"
            rest = name[len(prefix):] if name.startswith(prefix) else ""
            m = re.fullmatch(r"(\d+)d_([as]+)", rest)
            if m and len(m.group(2)) == len(dtypes) and 1 <= int(m.group(1)) <= 32:
                return self._source(name, dtypes, int(m.group(1)), m.group(2))
        return None

    @staticmethod
    def _source(name, dtypes, ndim, mask):
        params = [f"a{k}" for k in range(len(dtypes))] + ["out"]
        index = [f"i{axis}" for axis in range(ndim)]
        at = ", ".join(index)
        values = [f"{_cast(dtype)}(a{k}[{at}])" if kind == "a" else f"{_cast(dtype)}(a{k})"
                  for k, (dtype, kind) in enumerate(zip(dtypes, mask))]
        lines = [f"def {name}({', '.join(params)}):",
                 "    i = global_id(1) * global_size(0) + global_id(0)",
                 "    if i < out.size:",
                 *_unravel(index, "out", "        "),
                 f"        out[{at}] = f({', '.join(values)})"]
        return "\n".join(lines) + "\n"

    def __call__(self, *args, out=None, stream=0):
        _check_stream(stream)
        if len(args) == self.nin + 1 and out is None:
            *args, out = args
        if isinstance(out, tuple) and len(out) == 1:
            out = out[0]
        if len(args) != self.nin:
            raise TypeError(f"ufunc {self.__name__!r} takes {self.nin} input(s), "
                            f"{len(args)} were given")
        operands = [_operand(a) for a in args]
        ret, dtypes = self._select_cached(operands)
        arrays = [(k, v) for k, v in operands if k != "scalar"]
        target = None
        if out is not None:
            target = _operand(out)
            if target[0] == "scalar":
                raise TypeError(f"ufunc {self.__name__!r}: out must be an array")
            if target[1].dtype != ret and not np.can_cast(ret, target[1].dtype, "same_kind"):
                raise TypeError(f"ufunc {self.__name__!r}: cannot store its {ret} result in "
                                f"out of dtype {target[1].dtype} (casting 'same_kind')")
        shapes = [v.shape for _, v in arrays] + ([target[1].shape] if target else [])
        try:
            shape = (shapes[0] if shapes and shapes.count(shapes[0]) == len(shapes)
                     else np.broadcast_shapes(*shapes))
        except ValueError:
            raise ValueError(f"ufunc {self.__name__!r}: operands of shapes "
                             f"{', '.join(map(str, shapes))} do not broadcast together") from None
        if target is not None and shape != target[1].shape:
            raise ValueError(f"ufunc {self.__name__!r}: out has shape {target[1].shape}, the "
                             f"operands broadcast to {shape}")
        on_device = any(k == "device" for k, _ in operands)
        if target is None:
            target = _new_output(on_device, shape, ret)
        if target[0] == "host" and not target[1].flags.writeable:
            raise ValueError(f"ufunc {self.__name__!r}: out is read-only")
        if math.prod(shape):
            self._run(operands, dtypes, target, shape, stream)
        return target[1] if out is not None else _result(*target)

    def _select_cached(self, operands):
        """:meth:`_select`, remembered per operand types where they alone
        decide (a Python int also by its value, so not then)."""
        key = tuple(type(v) if k == "scalar" and not isinstance(v, np.generic) else v.dtype
                    for k, v in operands)
        if int in key:
            return self._select(operands, lambda sig: sig[1])
        found = self._selected.get(key)
        if found is None:
            found = self._selected[key] = self._select(operands, lambda sig: sig[1])
        return found

    def _reducer(self):
        with self._lock:
            reducer = self.__dict__.get("_reduce")
            if reducer is None:
                reducer = self.__dict__["_reduce"] = Reduce(self._function, **self._options)
            return reducer

    def __getattr__(self, name):
        # The kernels of reduce() too (module:ufunc.loop_float32_256).
        if self.__dict__.get("nin") == 2 and re.fullmatch(r"loop_[a-z]+\d*_\d+", name):
            return getattr(self._reducer(), name)
        return super().__getattr__(name)

    def reduce(self, arr, stream=0):
        """Reduce a 1-d array with this binary ufunc, as numba.cuda's
        ``ufunc.reduce``: the first signature ``T(T, T)`` that ``arr``'s dtype
        casts to safely, by :class:`Reduce` (so the function must be
        associative and commutative). Returns a NumPy scalar; an empty
        array is a ValueError, as this ufunc has no identity."""
        if self.nin != 2:
            raise TypeError(f"ufunc {self.__name__!r}.reduce needs a binary ufunc, this one "
                            f"takes {self.nin} input(s)")
        kind, value = _operand(arr)
        for ret, (a, b) in self._signatures:
            if a == b == ret and kind != "scalar" and _castable(kind, value, a):
                break
        else:
            raise TypeError(f"ufunc {self.__name__!r}.reduce: no signature T(T, T) takes "
                            f"{_type_name(kind, value)} safely ({'; '.join(self.types)})")
        if value.ndim != 1:
            raise TypeError(f"ufunc {self.__name__!r}.reduce: expects a 1-d array")
        if not value.size:
            raise ValueError(f"ufunc {self.__name__!r}.reduce of an empty array: the ufunc "
                             "has no identity")
        reducer = self._reducer()
        value = _converted(kind, value, ret)
        # The first element is the initial value: every other is folded in once.
        first = value[0]
        rest = value[1:]
        return reducer(rest, init=first, stream=stream) if rest.size else ret.type(first)

    def _run(self, operands, dtypes, target, shape, stream=0):
        arrays = [(k, v) for k, v in operands if k != "scalar"] + [target]
        count = math.prod(shape)
        if all(v.shape == shape and v.flags.c_contiguous if k == "host" else
               v.shape == shape and v.is_c_contiguous() for k, v in arrays):
            # Every operand is laid out alike: one flat loop over the elements.
            flat = (count,)
            view = (lambda k, v: v) if len(shape) == 1 else (lambda k, v: v.reshape(flat))
            ndim = 1
        else:
            ndim = max(len(shape), 1)
            full = shape or (1,)
            view = lambda k, v: _broadcast(k, v, full)
        mask = "".join("s" if k == "scalar" else "a" for k, _ in operands)
        kernel = self._by_layout.get((dtypes, ndim, mask))
        if kernel is None:
            name = self._name(dtypes, ndim, mask)
            kernel = self._by_layout[dtypes, ndim, mask] = self._kernel(
                name, lambda: self._source(name, dtypes, ndim, mask))
        launch = [_scalar(dtype, v) if k == "scalar" else view(k, v)
                  for (k, v), dtype in zip(operands, dtypes)]
        launch.append(view(*target))
        _launch(kernel, count, launch, _threads(), stream)


def vectorize(signatures, **options):
    """A decorator that makes a GPU ufunc from a scalar function.

    ``@nv.vectorize(["float32(float32, float32)", "float64(float64, float64)"])``;
    options are ``nv.jit``'s (``fastmath``, ``cache``, ...). See
    :class:`VulkanUFunc` and ``docs/ufuncs.md``.
    """
    if callable(signatures) and not isinstance(signatures, (str, list, tuple)):
        raise TypeError("nv.vectorize needs signatures: @nv.vectorize(['float32(float32)'])")

    def wrap(func):
        return VulkanUFunc(func, signatures, **options)

    return wrap


_casts = {}


_casts_lock = threading.Lock()


def _same(x):
    return x


def _converted(kind, value, dtype, stream=0):
    """An array operand in ``dtype``: converted on the host or on the device."""
    if value.dtype == dtype:
        return value
    if kind == "host":
        return value.astype(dtype)
    key = (value.dtype, dtype)
    with _casts_lock:
        cast = _casts.get(key)
        if cast is None:
            cast = _casts[key] = VulkanUFunc(_same, [f"{dtype.name}({value.dtype.name})"])
    converted = memory.device_array(value.shape, dtype)
    if value.size:
        cast(value, out=converted, stream=stream)
    return converted
