"""tunefuse's own device array, for callers that use neither torch nor CuPy.

Backed by a cuda.core Buffer; speaks `__cuda_array_interface__` (v3), so torch, CuPy and
Numba read it without copies; `.numpy()` copies it to the host."""

from __future__ import annotations

import numpy as np

from tunefuse.arrays import contiguous_strides
from tunefuse.dtypes import DataType


class DeviceArray:
    def __init__(self, buffer: object, shape: tuple[int, ...], dtype: DataType,
                 strides: tuple[int, ...] | None = None, offset: int = 0, stream: object = None) -> None:
        self.buffer = buffer  # keeps the memory alive
        self.shape = tuple(shape)
        self.dtype = dtype
        self.strides_elements = tuple(strides) if strides is not None else contiguous_strides(self.shape)
        self.offset = offset
        self._stream = stream

    @property
    def data_ptr(self) -> int:
        return int(self.buffer.handle) + self.offset * self.dtype.itemsize  # type: ignore[attr-defined]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 1

    @property
    def __cuda_array_interface__(self) -> dict:
        return {
            "shape": self.shape,
            "typestr": self.dtype.numpy.str if self.dtype is not DataType.BFloat16 else "<V2",
            "data": (self.data_ptr, False),
            "strides": tuple(s * self.dtype.itemsize for s in self.strides_elements),
            "version": 3,
        }

    def view(self, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> DeviceArray:
        return DeviceArray(self.buffer, shape, self.dtype, strides, self.offset + offset, self._stream)

    def numpy(self) -> np.ndarray:
        """A host copy, with this array's shape and dtype."""
        from tunefuse.runtime.transfer import device_to_host

        if self.size == 0:
            return np.zeros(self.shape, dtype=self.dtype.numpy)
        if self._stream is not None:
            self._stream.sync()  # type: ignore[attr-defined]
        span = 1 + sum((e - 1) * s for e, s in zip(self.shape, self.strides_elements))
        flat = device_to_host(self.data_ptr, span, self.dtype.numpy)
        item = flat.itemsize
        return np.lib.stride_tricks.as_strided(
            flat, self.shape, tuple(s * item for s in self.strides_elements)).copy()

    def __repr__(self) -> str:
        return f"DeviceArray(shape={list(self.shape)}, dtype={self.dtype.value})"
