"""tunefuse's own device array, for callers that use neither torch nor CuPy.

Backed by a cuda.core Buffer; speaks `__cuda_array_interface__` (v3) and DLPack, so torch,
CuPy, Numba and JAX read it without copies; `.numpy()` copies it to the host."""

from __future__ import annotations

import numpy as np

from tunefuse.arrays import contiguous_strides, strided_view
from tunefuse.ir.dtypes import DataType


class DeviceArray:
    def __init__(
        self,
        buffer: object,
        shape: tuple[int, ...],
        dtype: DataType,
        strides: tuple[int, ...] | None = None,
        offset: int = 0,
        stream: object = None,
    ) -> None:
        self.buffer = buffer  # keeps the memory alive
        self.shape = tuple(shape)
        self.dtype = dtype
        self.strides_elements = (
            tuple(strides) if strides is not None else contiguous_strides(self.shape)
        )
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
            "typestr": self.dtype.numpy.str
            if not self.dtype.ml_dtypes
            else f"<V{self.dtype.itemsize}",
            "data": (self.data_ptr, False),
            "strides": tuple(s * self.dtype.itemsize for s in self.strides_elements),
            "version": 3,
        }

    def __dlpack_device__(self) -> tuple[int, int]:
        from tunefuse.runtime.dlpack import KDL_CUDA

        return KDL_CUDA, self.device_id

    def __dlpack__(
        self,
        stream: object = None,
        max_version: object = None,
        dl_device: object = None,
        copy: bool | None = None,
    ) -> object:
        """A DLPack capsule over this array's memory (never a copy: `copy=True` is refused).
        The kernels that wrote it are waited for first, whatever stream the consumer uses."""
        from tunefuse.runtime.dlpack import KDL_CUDA, to_dlpack

        if copy:
            raise BufferError("DeviceArray exports its own memory only (copy=True)")
        if dl_device is not None and tuple(dl_device) != (KDL_CUDA, self.device_id):  # type: ignore[arg-type]
            raise BufferError(f"DeviceArray lives on CUDA device {self.device_id}, not {dl_device}")
        if self._stream is not None:
            self._stream.sync()  # type: ignore[attr-defined]
        return to_dlpack(
            self, self.data_ptr, self.shape, self.strides_elements, self.dtype, self.device_id
        )

    @property
    def device_id(self) -> int:
        """The CUDA device of the memory: its cuda.core Buffer's, else asked of the driver."""
        known = getattr(self.buffer, "device_id", None)
        if known is not None:
            return int(known)
        from tunefuse.errors import ExecutionError
        from tunefuse.runtime.pointer import pointer_device

        try:
            return pointer_device(self.data_ptr)
        except ExecutionError as e:
            raise BufferError(str(e)) from None

    def view(self, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> DeviceArray:
        return DeviceArray(
            self.buffer, shape, self.dtype, strides, self.offset + offset, self._stream
        )

    def numpy(self) -> np.ndarray:
        """A host copy, with this array's shape and dtype."""
        from tunefuse.runtime.device import runtime
        from tunefuse.runtime.transfer import device_to_host

        if self.size == 0:
            return np.zeros(self.shape, dtype=self.dtype.numpy)
        span = 1 + sum((e - 1) * s for e, s in zip(self.shape, self.strides_elements))
        with runtime(self.device_id).active():
            if self._stream is not None:
                self._stream.sync()  # type: ignore[attr-defined]
            flat = device_to_host(self.data_ptr, span, self.dtype.numpy)
        return strided_view(flat, self.shape, self.strides_elements).copy()

    def __repr__(self) -> str:
        return f"DeviceArray(shape={list(self.shape)}, dtype={self.dtype.value})"
