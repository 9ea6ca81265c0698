"""``nv.reduce``: a tree reduction of a 1-d array with a binary function, in
generated kernels of two passes."""

import re
import threading

import numpy as np

from numba_vulkan.api.dispatcher import check_options
from numba_vulkan.runtime import memory
from numba_vulkan.api.ufunc.common import (
    THREADS, _cast, _check_stream, _device_function, _dtype, _generate, _operand, _scalar,
    _threads, parse_signature)


#: Workgroups of a reduction's first pass at most; each invocation folds
#: every (groups * threads)-th element first.
_REDUCE_GROUPS = 1024


class Reduce:
    """A tree reduction over a 1-d array with a binary function, as
    numba.cuda's ``cuda.reduce``: ``nv.reduce(lambda a, b: a + b)(array)``.

    The function must be associative and commutative: the order in which
    elements are combined is not the array's. It is compiled as a device
    function of the array's dtype, and its results are cast to that dtype.
    """

    def __init__(self, functor, **options):
        self._options = check_options(options, "reduce")
        self._function = _device_function(functor, self._options)
        self.py_func = self._function.py_func
        self.__name__ = self.py_func.__name__
        self.__qualname__ = self.py_func.__qualname__
        self.__module__ = self.py_func.__module__
        self.__doc__ = self.py_func.__doc__
        self.__wrapped__ = self.py_func
        self._lock = threading.RLock()
        self._kernels = {}

    def __repr__(self):
        return f"<numba_vulkan Reduce {self.__qualname__}>"

    def __getattr__(self, name):
        # Generated kernels by name, for AOT manifests (module:reducer.loop_float32_256).
        m = re.fullmatch(r"loop_(\w+?)_(\d+)", name)
        if m and m.group(2) in ("64", "128", "256"):
            try:
                dtype = _dtype(m.group(1), name)
            except TypeError:
                dtype = None
            if dtype is not None and dtype.kind != "c":
                return self._kernel(dtype, int(m.group(2)))
        raise AttributeError(f"Reduce {self.__dict__.get('__name__')!r} has no attribute "
                             f"{name!r}")

    def aot_entries(self, sig):
        """``(attribute, kernel signature)`` of the kernel an AOT manifest
        builds for a reduction of one dtype, given as ``"float32"`` or as the
        binary function's signature ``"float32(float32, float32)"``."""
        dtype = _dtype(sig, "reduce") if re.fullmatch(r"\s*\w+\s*", sig) else \
            parse_signature(sig)[1][0][0]
        if dtype.kind == "c":
            raise TypeError("complex reductions are not supported")
        return [(f"loop_{dtype.name}_{THREADS}",
                 f"void({dtype.name}[::1], {dtype.name}[::1], {dtype.name}, int32)")]

    @staticmethod
    def _source(name, dtype, threads):
        cast = _cast(dtype)
        lines = [f"def {name}(src, dst, init, final):",
                 f"    tile = shared.array({threads}, '{dtype.name}')",
                 "    lane = local_id(0)",
                 "    group = group_id(0)",
                 "    n = src.shape[0]",
                 f"    i = group * {threads} + lane",
                 "    if i < n:",
                 "        acc = src[i]",
                 f"        step = num_groups(0) * {threads}",
                 "        j = i + step",
                 "        while j < n:",
                 f"            acc = {cast}(f(acc, src[j]))",
                 "            j += step",
                 "        tile[lane] = acc",
                 "    barrier()",
                 # The lanes holding values are a prefix of the group.
                 f"    valid = min({threads}, n - group * {threads})"]
        half = threads // 2
        while half:
            lines += [f"    if lane < {half} and lane + {half} < valid:",
                      f"        tile[lane] = {cast}(f(tile[lane], tile[lane + {half}]))",
                      "    barrier()"]
            half //= 2
        lines += ["    if lane == 0:",
                  "        if final:",
                  f"            dst[group] = {cast}(f(tile[0], init))",
                  "        else:",
                  "            dst[group] = tile[0]"]
        return "\n".join(lines) + "\n"

    def _kernel(self, dtype, threads):
        name = f"loop_{dtype.name}_{threads}"
        with self._lock:
            kernel = self._kernels.get(name)
            if kernel is None:
                kernel = self._kernels[name] = _generate(
                    self._function, name, self._source(name, dtype, threads), self._options)
            return kernel

    def __call__(self, arr, size=None, res=None, init=0, stream=0):
        """Reduce ``arr`` (a 1-d NumPy or device array), or its first ``size``
        elements, combining the result with ``init`` last.

        Returns the result as a NumPy scalar of ``arr``'s dtype, or, when
        ``res`` (a device array) is given, writes it to ``res[0]`` on the
        device, without waiting, and returns None. An empty array reduces
        to ``init``.
        """
        _check_stream(stream)
        kind, arr = _operand(arr)
        if kind == "scalar" or arr.ndim != 1:
            raise TypeError(f"reduce {self.__name__!r}: expects a 1-d array, not "
                            f"{'a scalar' if kind == 'scalar' else f'{arr.ndim}-d'}")
        dtype = arr.dtype
        if dtype.kind == "c":
            raise TypeError(f"reduce {self.__name__!r}: complex arrays are not supported")
        if size is not None:
            if not 0 <= int(size) <= arr.shape[0]:
                raise ValueError(f"reduce {self.__name__!r}: size {size} is outside "
                                 f"0..{arr.shape[0]}")
            arr = arr[:int(size)]
        if res is not None and (not isinstance(res, memory.DeviceArray) or not res.size
                                or res.dtype != dtype):
            raise TypeError(f"reduce {self.__name__!r}: res must be a device array of dtype "
                            f"{dtype} with at least one element")
        init = dtype.type(init)
        n = arr.shape[0]
        if n == 0:
            if res is None:
                return init
            res[0] = init
            return None
        if kind == "host":
            arr = memory.to_device(arr, stream=stream)
        threads = _threads()
        threads = 256 if threads >= 256 else 128 if threads >= 128 else 64
        kernel = self._kernel(dtype, threads)
        groups = min(-(-n // threads), _REDUCE_GROUPS)
        dst = res if res is not None else memory.device_array(1, dtype)
        if groups > 1:
            partial = memory.device_array(groups, dtype)
            kernel[groups, threads, stream](arr, partial, _scalar(dtype, init), np.int32(0))
            arr = partial
        kernel[1, threads, stream](arr, dst, _scalar(dtype, init), np.int32(1))
        if res is None:
            return dst.copy_to_host(stream=stream)[0]
        return None


reduce = Reduce
