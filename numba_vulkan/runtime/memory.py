"""Device memory: buffers, device arrays and copies between host and device."""

import ctypes

import numpy as np

from numba_vulkan.base import abi
from numba_vulkan.base import signature
from numba_vulkan.base.errors import DriverError, LaunchError, UnsupportedError
from numba_vulkan.runtime import queue, transfer
from numba_vulkan.runtime.buffer import MIN_BUFFER, RawBuffer
from numba_vulkan.runtime.device import as_device, current_device


def _host_order(device, stream):
    """Wait until the host may touch a buffer as work on ``stream`` (None:
    the default stream) would now."""
    if stream is None:
        device.synchronize()
    else:
        stream.host_order()


#: DLPack's device type of host memory.
_DLPACK_CPU = 1


class Buffer(RawBuffer):
    """A :class:`~numba_vulkan.runtime.buffer.RawBuffer` the host writes and
    reads, through its mapping where it has one, else by the device's copies
    (:mod:`~numba_vulkan.runtime.transfer`)."""

    def write(self, data, offset=0, stream=None):
        """Copy ``data`` (a bytes-like object) into the buffer at ``offset``.

        Ordered on ``stream`` (a :class:`~numba_vulkan.runtime.queue.Stream`;
        None: the default stream, after every launch submitted before it, and
        before every launch submitted after it). Returns once ``data`` may be
        reused: the device's copy may still be in flight.
        """
        data = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
        if not data.size:
            return
        if self.mapped is not None:
            _host_order(self.device, stream)
            transfer.host_copy(self.host_view()[offset:offset + data.size], data)
            return
        transfer.write(self, data, offset, stream)

    def read(self, out, offset=0, stream=None):
        """Copy bytes from the buffer at ``offset`` into ``out`` (writable).

        Waits for the work submitted before it on ``stream`` (None: the
        default stream, so every stream's).
        """
        out = np.frombuffer(memoryview(out).cast("B"), dtype=np.uint8)
        if not out.size:
            return
        if self.mapped is not None and self.readable:
            _host_order(self.device, stream)
            transfer.host_copy(out, self.host_view()[offset:offset + out.size])
            return
        transfer.read(self, out, offset, stream)


class DeviceArray:
    """An N-d array in device memory, in the style of numba.cuda's.

    Attributes:
        shape, strides, dtype, ndim, size, nbytes: As for a NumPy array;
            strides are in bytes and may describe a view.
        buffer: The :class:`Buffer` holding the data.
        offset: Index (in elements) of the first element in the buffer.
        storage: The dtype the buffer holds: ``dtype``, or its 32-bit
            counterpart on a device without float64 or int64 (copies convert;
            shapes, strides and offsets still count elements of ``dtype``).
    """

    __slots__ = ("shape", "strides", "dtype", "buffer", "offset", "type_text",
                 "launch_fields", "storage", "__weakref__")

    def __init__(self, shape, dtype, buffer=None, strides=None, offset=0, device=None,
                 storage=None):
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(s) for s in shape)
        if strides is None:
            strides = _c_strides(self.shape, self.dtype.itemsize)
        self.strides = tuple(int(s) for s in strides)
        if buffer is None:
            device = as_device(device) or current_device()
            if storage is None:
                storage = _storage(self.dtype, device.target.narrowed)
            buffer = Buffer(device, self.size * np.dtype(storage).itemsize)
        self.storage = self.dtype if storage is None else np.dtype(storage)
        self.buffer = buffer
        self.offset = int(offset)
        # What a launch needs, computed once: arrays are immutable views.
        layout = "C" if self.is_c_contiguous() else "A"
        self.type_text = signature.array(self.dtype, self.ndim, layout)
        item = self.dtype.itemsize
        self.launch_fields = [*self.shape, *(s // item for s in self.strides), self.offset]

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def device(self):
        return self.buffer.device

    def is_c_contiguous(self):
        return self.strides == _c_strides(self.shape, self.dtype.itemsize) or self.size <= 1

    def is_f_contiguous(self):
        """Whether the elements lie in Fortran order, with no gaps."""
        reversed_strides = _c_strides(self.shape[::-1], self.dtype.itemsize)
        return self.strides == reversed_strides[::-1] or self.size <= 1

    @property
    def flags(self):
        """NumPy's ``C_CONTIGUOUS``, ``F_CONTIGUOUS`` and ``WRITEABLE`` flags, as
        numba.cuda's device arrays have them (a dict)."""
        return {"C_CONTIGUOUS": self.is_c_contiguous(), "F_CONTIGUOUS": self.is_f_contiguous(),
                "WRITEABLE": True}

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self):
        return f"<numba_vulkan.DeviceArray shape={self.shape} dtype={self.dtype}>"

    def _read_span(self, stream=None):
        """This array's span of the buffer (in stored bytes), and a NumPy view
        of it as the stored dtype, read on ``stream``."""
        item, stored = self.dtype.itemsize, self.storage.itemsize
        lo, hi = _span(self.shape, self.strides, item)
        lo, hi = lo // item * stored, -(-hi // item) * stored
        raw = np.empty(hi - lo, dtype=np.uint8)
        self.buffer.read(raw, self.offset * stored + lo, stream)
        if not self.size:
            return lo, raw, np.empty(self.shape, self.storage)
        strides = tuple(s // item * stored for s in self.strides)
        view = np.lib.stride_tricks.as_strided(raw[-lo:].view(self.storage), self.shape,
                                               strides)
        return lo, raw, view

    def copy_to_host(self, ary=None, stream=0):
        """Copy to a NumPy array (a new one, or ``ary``) and return it.

        On ``stream`` (a :class:`~numba_vulkan.runtime.queue.Stream`; 0 or
        None: the default stream, which waits for every stream's earlier
        work), after the work submitted on it before. Into a pinned or mapped
        array (:class:`HostArray`) of this device whose memory the host
        cannot read through this array's mapping, the device copies straight
        into it; on a stream other than the default that copy is
        asynchronous: ``ary`` holds the data once the stream is synchronized
        (``stream.synchronize()``, or an event recorded after it). Every
        other copy is done when this returns.
        """
        stream = queue.resolve(stream, self.device)
        if ary is not None and (ary.shape != self.shape or ary.dtype != self.dtype):
            raise LaunchError(f"cannot copy a {self.dtype}{list(self.shape)} device array "
                              f"into a {ary.dtype}{list(ary.shape)} array")
        if isinstance(ary, HostArray) and self._copy_to_host_array(ary, stream):
            return ary
        if self.storage == self.dtype and self.is_c_contiguous():
            # Straight into the result: no intermediate copy.
            out = np.empty(self.shape, self.dtype) if ary is None else ary
            if out.flags.c_contiguous:
                self.buffer.read(out.reshape(-1).view(np.uint8),
                                 self.offset * self.dtype.itemsize, stream)
                return out
        _, _, view = self._read_span(stream)
        if ary is None:
            return view.astype(self.dtype)
        ary[...] = view
        return ary

    def _copy_to_host_array(self, ary, stream):
        """Copy into ``ary`` by one device copy, if it can; return whether it did."""
        target = ary.nv_buffer
        if (target is None or target.device is not self.buffer.device
                or self.storage != self.dtype or not self.is_c_contiguous()
                or not ary.flags.c_contiguous or ary.base_offset() is None
                or (self.buffer.mapped is not None and self.buffer.readable)):
            return False
        if self.nbytes:
            item = self.dtype.itemsize
            ticket = transfer.buffer_copy(self.buffer, target, self.offset * item,
                                          ary.base_offset(), self.nbytes, stream)
            if stream.is_default:
                queue.wait(ticket)
        return True

    def _copy_from_host_array(self, ary, stream):
        """Copy the :class:`HostArray` ``ary`` in by one device copy, if it
        can (the way back of :meth:`_copy_to_host_array`); return whether it
        did."""
        source = ary.nv_buffer
        if (source is None or source.device is not self.buffer.device
                or self.buffer.mapped is not None or ary.dtype != self.storage
                or not self.is_c_contiguous() or not ary.flags.c_contiguous
                or ary.base_offset() is None):
            return False
        if self.nbytes:
            ticket = transfer.buffer_copy(source, self.buffer, ary.base_offset(),
                                          self.offset * self.storage.itemsize, self.nbytes,
                                          stream)
            if stream.is_default:
                queue.wait(ticket)
        return True

    def copy_to_device(self, ary, stream=0):
        """Copy a NumPy array, or a device array on any device, of the same
        shape into this array (converted to its dtype), on ``stream`` (as for
        :meth:`copy_to_host`).

        From a NumPy array it returns once ``ary`` may change again; from a
        pinned or mapped array (:class:`HostArray`) of this device, where the
        host cannot write this array's memory through a mapping, the device
        copies straight from it, and on a stream other than the default
        returns at once: ``ary`` must then stay as it is until the stream
        has done the copy. From a device array of this device it is one
        device copy on the stream; from another device's, it goes through
        the host, waiting for the launches submitted on both devices before it.
        """
        stream = queue.resolve(stream, self.device)
        if isinstance(ary, DeviceArray):
            self._copy_from_device_array(ary, stream)
            return
        if isinstance(ary, HostArray) and ary.shape == self.shape and \
                self._copy_from_host_array(ary, stream):
            return
        ary = np.asarray(ary)
        if ary.shape != self.shape:
            raise LaunchError(f"shape mismatch: {ary.shape} into {self.shape}")
        ary = ary.astype(self.storage, copy=False)
        if self.is_c_contiguous():
            self.buffer.write(np.ascontiguousarray(ary), self.offset * self.storage.itemsize,
                              stream)
            return
        lo, raw, view = self._read_span(stream)
        view[...] = ary
        self.buffer.write(raw, self.offset * self.storage.itemsize + lo, stream)

    def _copy_from_device_array(self, src, stream):
        if src.shape != self.shape:
            raise LaunchError(f"shape mismatch: a device array of shape {src.shape} into "
                              f"one of shape {self.shape}")
        contiguous = (src.buffer is not self.buffer and src.storage == self.storage
                      and src.dtype == self.dtype and src.is_c_contiguous()
                      and self.is_c_contiguous())
        if not contiguous:
            same = src.device is self.device
            self.copy_to_device(src.copy_to_host(stream=stream if same else 0),
                                stream=stream)
            return
        size, item = self.size * self.storage.itemsize, self.storage.itemsize
        start, to = src.offset * item, self.offset * item
        if src.device is self.device:
            if size:
                ticket = transfer.buffer_copy(src.buffer, self.buffer, start, to, size, stream)
                if stream.is_default:
                    queue.wait(ticket)
            return
        if (src.buffer.mapped is not None and src.buffer.readable
                and self.buffer.mapped is not None):
            # Both mapped (a CPU device, unified memory): one host copy
            # between the mappings, once both devices' earlier work is done.
            src.device.synchronize()
            self.device.synchronize()
            transfer.host_copy(self.buffer.host_view()[to:to + size],
                               src.buffer.host_view()[start:start + size])
            return
        # A chunk at a time through one host buffer: a write returns once its
        # chunk is in staging memory, so this device's copy of one chunk
        # overlaps the other's read of the next, and the host holds a chunk,
        # not the array.
        step = transfer.CHUNK
        bounce = np.empty(min(size, step), np.uint8)
        for done in range(0, size, step):
            piece = bounce[:min(step, size - done)]
            src.buffer.read(piece, start + done)
            self.buffer.write(piece, to + done)

    def __array__(self, dtype=None, copy=None):
        """A host copy, so that ``np.asarray(d)`` and NumPy functions see the
        contents (waits for every launch submitted before it)."""
        host = self.copy_to_host()
        return host if dtype is None else host.astype(dtype, copy=False)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """DLPack export, through a host copy: ``np.from_dlpack(d)`` (and any
        DLPack consumer on the CPU) gets the contents as a new host array,
        not a view of device memory (waits for every launch submitted before
        it). ``copy=False`` is refused, since a copy is what it makes."""
        if copy is False:
            raise BufferError("a DeviceArray exports DLPack only through a host copy "
                              "(copy=False was asked); use copy_to_host() or a HostArray, "
                              "whose memory the host sees")
        if dl_device is not None and tuple(dl_device) != (_DLPACK_CPU, 0):
            raise BufferError(f"a DeviceArray exports DLPack to the CPU (1, 0) only, not "
                              f"{tuple(dl_device)}")
        kwargs = {} if max_version is None else {"max_version": max_version}
        return self.copy_to_host().__dlpack__(**kwargs)

    def __dlpack_device__(self):
        """``(kDLCPU, 0)``: the DLPack export is a host copy (:meth:`__dlpack__`)."""
        return (_DLPACK_CPU, 0)

    def __iter__(self):
        """The elements (as host scalars) of a 1-d array, the rows (as device
        views) of an N-d one, as ``self[i]`` gives them."""
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, index):
        """A view (basic indexing: integers and slices) sharing this memory;
        indexing down to one element copies it to the host, as a NumPy scalar."""
        view = self._view(index)
        return view.copy_to_host()[()] if view.ndim == 0 else view

    def __setitem__(self, index, value):
        """Write ``value`` (a scalar, or an array broadcast to the indexed
        view's shape) into the elements ``index`` selects."""
        view = self._view(index)
        view.copy_to_device(np.broadcast_to(np.asarray(value, dtype=self.dtype), view.shape))

    def _like(self, shape, strides=None, offset=None, dtype=None, storage=None):
        """Another view of this array's buffer."""
        return DeviceArray(shape, self.dtype if dtype is None else dtype, self.buffer, strides,
                           self.offset if offset is None else offset,
                           storage=self.storage if storage is None else storage)

    def reshape(self, *shape, order="C"):
        """The same elements in another shape, sharing this memory (a
        C-contiguous array only; one extent may be -1)."""
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        shape = tuple(int(s) for s in shape)
        if order != "C":
            raise UnsupportedError("reshape: only order='C' is supported")
        if not self.is_c_contiguous():
            raise UnsupportedError("reshape of a device array that is not C-contiguous would "
                                   "copy it; copy_to_host() and reshape on the host")
        known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
        if shape.count(-1) == 1 and known and self.size % known == 0:
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        if any(s < 0 for s in shape) or int(np.prod(shape, dtype=np.int64)) != self.size:
            raise ValueError(f"cannot reshape a device array of size {self.size} into shape "
                             f"{shape}")
        return self._like(shape)

    def ravel(self, order="C"):
        """The elements as a 1-d array sharing this memory (C-contiguous only)."""
        return self.reshape(self.size, order=order)

    def transpose(self, axes=None):
        """The array with its axes reversed (or permuted by ``axes``), sharing
        this memory."""
        axes = tuple(reversed(range(self.ndim))) if axes is None else tuple(axes)
        if sorted(axes) != list(range(self.ndim)):
            raise ValueError(f"transpose: {axes} is not a permutation of the axes")
        return self._like(tuple(self.shape[a] for a in axes),
                          tuple(self.strides[a] for a in axes))

    @property
    def T(self):
        """:meth:`transpose`."""
        return self.transpose()

    def view(self, dtype):
        """This memory seen as another dtype: the same itemsize, or a
        C-contiguous array whose last extent scales with the itemsize."""
        dtype = np.dtype(dtype)
        if self.storage != self.dtype:
            raise UnsupportedError(f"view: this device narrows {self.dtype} to "
                                   f"{self.storage}, whose bits are not {self.dtype}'s")
        old, new = self.dtype.itemsize, dtype.itemsize
        if old == new:
            return self._like(self.shape, self.strides, dtype=dtype, storage=dtype)
        nbytes = self.shape[-1] * old if self.shape else 0
        if (not self.is_c_contiguous() or not self.shape or nbytes % new
                or self.offset * old % new):
            raise ValueError(f"cannot view this {self.dtype}{list(self.shape)} device array "
                             f"as {dtype}")
        return DeviceArray(self.shape[:-1] + (nbytes // new,), dtype, self.buffer, None,
                           self.offset * old // new, storage=dtype)

    def _view(self, index):
        template = np.lib.stride_tricks.as_strided(
            np.zeros(1, dtype=self.dtype), self.shape, self.strides, writeable=False)
        if not isinstance(index, tuple):
            index = (index,)
        if any(not isinstance(i, (int, np.integer, slice)) and i is not Ellipsis
               for i in index):
            raise IndexError("device arrays support integer and slice indexing only")
        if not any(i is Ellipsis for i in index):
            # A trailing ... keeps a full index a 0-d view, not a scalar copy.
            index += (Ellipsis,)
        view = template[index]
        base = template.__array_interface__["data"][0]
        first = view.__array_interface__["data"][0]
        shift = (first - base) // self.dtype.itemsize
        return DeviceArray(view.shape, self.dtype, self.buffer, view.strides,
                           self.offset + shift, storage=self.storage)


class HostArray(np.ndarray):
    """A NumPy array in host-visible memory of a device: what
    :func:`host_array` makes (numba.cuda's pinned and mapped arrays).

    Kernels given it (or a view of it) on its device use its memory in
    place, with no copy; a device array copies into it with one device
    copy. Views keep the memory alive.

    Attributes:
        nv_buffer: The :class:`Buffer` that holds the data, or None for an
            array made from one by NumPy (``a + 1``) that owns other memory.
    """

    def __array_finalize__(self, obj):
        buffer = getattr(obj, "nv_buffer", None)
        self.nv_buffer = buffer if buffer is not None and self._within(buffer) else None

    def _within(self, buffer):
        start = self.__array_interface__["data"][0] - ctypes.addressof(buffer.mapped)
        lo, hi = _span(self.shape, self.strides, self.itemsize)
        return 0 <= start + lo and start + hi <= buffer.nbytes

    def base_offset(self):
        """Byte offset of the first element in :attr:`nv_buffer`, or None."""
        if self.nv_buffer is None:
            return None
        return self.__array_interface__["data"][0] - ctypes.addressof(self.nv_buffer.mapped)

    def __reduce__(self):
        # Pickled (and so sent to other processes) as a plain array.
        return np.asarray(self).copy().__reduce__()


def host_array(shape, dtype=np.float64, order="C", mapped=False, device=None):
    """A new uninitialised :class:`HostArray` in host-visible memory of
    ``device`` (the calling thread's current device by default).

    ``mapped``: memory kernels read and write in place, device-local where
    the device offers it host-visible (resizable BAR), else host memory;
    otherwise memory cached for the host, the fastest destination of copies
    from the device. On a CPU device every buffer is such memory.

    Raises:
        DriverError: The device has no host-visible memory.
    """
    device = as_device(device) or current_device()
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(map(int, shape))
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    buffer = Buffer(device, nbytes, host=not mapped, mapped=mapped)
    if buffer.mapped is None:
        raise DriverError(f"device {device.info.name} has no host-visible memory for a "
                          f"{'mapped' if mapped else 'pinned'} array")
    raw = np.frombuffer(buffer.mapped, np.uint8, max(nbytes, 1))
    ary = np.ndarray.__new__(HostArray, shape, dtype, buffer=raw, order=order)
    ary.nv_buffer = buffer
    return ary


def pinned_array(shape, dtype=np.float64, order="C", device=None):
    """A :class:`HostArray` in host memory of ``device``: the destination of
    ``copy_to_host`` by one device copy (``nv.pinned_array``)."""
    return host_array(shape, dtype, order, device=device)


def mapped_array(shape, dtype=np.float64, order="C", device=None):
    """A :class:`HostArray` that kernels on ``device`` read and write in
    place, without copies (``nv.mapped_array``); synchronize before reading
    what a kernel wrote."""
    return host_array(shape, dtype, order, mapped=True, device=device)


def mapped_view(ary, device):
    """The :class:`DeviceArray` a launch on ``device`` passes for the
    :class:`HostArray` ``ary``, over its memory; None where the launch must
    copy it instead (another device's memory, a dtype the device narrows,
    strides not a whole number of elements)."""
    buffer = ary.nv_buffer
    if buffer is None or buffer.device is not device:
        return None
    if _storage(ary.dtype, device.target.narrowed) != ary.dtype:
        return None
    item, start = ary.dtype.itemsize, ary.base_offset()
    if start % item or any(s % item for s in ary.strides):
        return None
    return DeviceArray(ary.shape, ary.dtype, buffer, ary.strides, start // item)


def _storage(dtype, narrowed):
    """The dtype a device with narrowing mode ``narrowed`` stores ``dtype``
    as; a record's bytes are kept as they are (see numba_vulkan.base.abi)."""
    if dtype.names is not None:
        return dtype
    return np.dtype(abi.storage_dtype(dtype.name, narrowed))


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))


def _span(shape, strides, itemsize):
    """Byte range ``(lo, hi)`` relative to the first element that an array covers."""
    lo = hi = 0
    for extent, stride in zip(shape, strides):
        if extent == 0:
            return 0, 0
        reach = (extent - 1) * stride
        lo += min(reach, 0)
        hi += max(reach, 0)
    return lo, hi + itemsize


def as_host_array(value):
    """``value`` as a NumPy array where it offers ``__array__`` or the buffer
    protocol (as :func:`to_device` takes it), else ``value`` unchanged.

    NumPy views the object's memory where it can (a buffer, a torch CPU
    tensor's ``__array__``), so a kernel's writes reach the object."""
    if isinstance(value, (np.ndarray, np.generic, DeviceArray, str, bytes)):
        return value
    if hasattr(value, "__array__"):
        return np.asarray(value)
    try:
        view = memoryview(value)
    except TypeError:
        return value
    return np.asarray(view)


def to_device(ary, device=None, stream=0):
    """Copy a NumPy array, or a device array of any device, to a new
    C-contiguous :class:`DeviceArray` on ``device``, on ``stream`` (see
    :meth:`DeviceArray.copy_to_device`).

    ``device`` is a :class:`~numba_vulkan.runtime.device.Device`, an entry
    of ``nv.gpus`` or its index; the stream's device, else the calling
    thread's current device, by default.
    """
    if device is None and type(stream) is queue.Stream:
        device = stream.device
    if isinstance(ary, DeviceArray):
        out = DeviceArray(ary.shape, ary.dtype, device=device)
        out.copy_to_device(ary, stream)
        return out
    if not isinstance(ary, HostArray):
        # Not ascontiguousarray, which makes a 0-d array 1-d.
        ary = np.asarray(ary, order="C")
    out = DeviceArray(ary.shape, ary.dtype, device=device)
    out.copy_to_device(ary, stream)
    return out


def device_array(shape, dtype=np.float64, device=None):
    """A new uninitialised :class:`DeviceArray`."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    return DeviceArray(shape, dtype, device=device)


def device_array_like(ary, device=None):
    """A new uninitialised C-contiguous :class:`DeviceArray` of ``ary``'s shape
    and dtype (``ary`` a NumPy or device array)."""
    return DeviceArray(ary.shape, ary.dtype, device=device)


def staged_host_array(ary, device, write_back=True, stream=None):
    """Copy a NumPy array, contiguous or not, to the device for one launch.

    The array's whole span of memory is copied, so that its strides stay
    valid on the device. Returns ``(device_array, copy_back)``: call
    ``copy_back()`` after the launch to write results into ``ary`` (only if
    ``write_back``: an array the kernel does not write is left as it was).
    On a device that narrows the array's dtype a converted contiguous copy
    is staged instead, and converted back. Both copies go on ``stream``
    (None: the default stream).
    """
    storage = _storage(ary.dtype, device.target.narrowed)
    if storage != ary.dtype:
        return _staged_narrowed(ary, device, storage, write_back, stream)
    item = ary.dtype.itemsize
    if any(s % item for s in ary.strides):
        raise LaunchError(f"an array with strides {ary.strides} not divisible by its "
                          f"itemsize {item} cannot be passed to a kernel")
    lo, hi = _span(ary.shape, ary.strides, item)
    start = ary.__array_interface__["data"][0] + lo
    buffer = _transient_buffer(device, hi - lo)
    if hi > lo:
        span = (ctypes.c_char * (hi - lo)).from_address(start)
        buffer.write(span, stream=stream)
    dev = DeviceArray(ary.shape, ary.dtype, buffer, ary.strides, -lo // item)

    def copy_back():
        if hi > lo and write_back and ary.flags.writeable:
            buffer.read((ctypes.c_char * (hi - lo)).from_address(start), stream=stream)
        _release_transient(buffer)

    return dev, copy_back


#: Bytes of buffers kept for reuse by launches with NumPy arrays, per device.
_TRANSIENT_LIMIT = 1 << 30


def _transient_buffer(device, nbytes):
    """A buffer of at least ``nbytes`` for one launch's copy of a host array.

    Launches that pass the same NumPy arrays again reuse the buffers (and so
    their recorded command buffers) instead of allocating device memory each
    time. Reuse is safe without waiting: such a launch waits for its stream
    before the buffer is released.
    """
    with device.lock:
        free = device.transient_buffers.get(max(int(nbytes), MIN_BUFFER))
        if free:
            return free.pop()
    return Buffer(device, nbytes)


def _release_transient(buffer):
    device = buffer.device
    with device.lock:
        pool = device.transient_buffers
        held = sum(b.nbytes for bufs in pool.values() for b in bufs)
        if held + buffer.nbytes <= _TRANSIENT_LIMIT:
            pool.setdefault(buffer.nbytes, []).append(buffer)


def _staged_narrowed(ary, device, storage, write_back=True, stream=None):
    narrow = np.ascontiguousarray(ary, dtype=storage)
    dev = DeviceArray(ary.shape, ary.dtype, device=device, storage=storage)
    dev.buffer.write(narrow, stream=stream)

    def copy_back():
        # Not for an input: it would come back rounded to the narrow dtype.
        if write_back and ary.flags.writeable:
            dev.buffer.read(narrow, stream=stream)
            ary[...] = narrow

    return dev, copy_back
