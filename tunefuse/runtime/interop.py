"""Reading device arrays that only speak DLPack."""

from __future__ import annotations

from tunefuse.arrays import ArrayInfo, Device
from tunefuse.errors import InputMismatchError


def describe_dlpack_device_array(array: object, device_index: int) -> ArrayInfo:
    """Device arrays with `__dlpack__` but no `__cuda_array_interface__`: read through
    cuda.core's StridedMemoryView, which understands DLPack."""
    try:
        from cuda.core.utils import StridedMemoryView

        view = StridedMemoryView(array, stream_ptr=-1)
    except Exception as e:  # noqa: BLE001
        raise InputMismatchError(f"cannot read a DLPack array: {e}") from None
    from tunefuse.dtypes import from_any_dtype

    dtype = from_any_dtype(view.dtype)
    shape = tuple(int(s) for s in view.shape)
    strides = tuple(int(s) for s in view.strides) if view.strides is not None else None
    if strides is None:
        from tunefuse.arrays import contiguous_strides

        strides = contiguous_strides(shape)
    return ArrayInfo(dtype, shape, strides, Device.CUDA, device_index, int(view.ptr), "dlpack")
