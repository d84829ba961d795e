"""What tunefuse reads off an array of any kind, without importing torch or CuPy.

NumPy arrays, torch tensors, CuPy arrays, and anything with `__cuda_array_interface__` or
`__dlpack__` are described by one `ArrayInfo`: dtype, sizes, strides in elements, device
and data pointer.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tunefuse.errors import InputMismatchError
from tunefuse.ir.dtypes import DataType, from_any_dtype


class Device(enum.Enum):
    CPU = "cpu"
    CUDA = "cuda"


@dataclass(frozen=True, slots=True)
class ArrayInfo:
    dtype: DataType
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    device: Device
    device_index: int
    data_ptr: int
    framework: str  # "numpy", "torch", "cupy", "cuda_array_interface", "dlpack"


def framework_of(array: object) -> str:
    module = type(array).__module__.split(".")[0]
    if isinstance(array, np.ndarray):
        return "numpy"
    if module == "torch":
        return "torch"
    if module == "cupy":
        return "cupy"
    if hasattr(array, "__cuda_array_interface__"):
        return "cuda_array_interface"
    if hasattr(array, "__dlpack__"):
        return "dlpack"
    return "unknown"


def is_array(value: object) -> bool:
    return framework_of(value) != "unknown"


def describe_array(array: object, *, name: str = "input") -> ArrayInfo:
    """Describe an array; raises naming `name` when it is not an array tunefuse can read."""
    framework = framework_of(array)
    if framework == "numpy":
        a: np.ndarray = array  # type: ignore[assignment]
        dtype = from_any_dtype(a.dtype)
        strides = tuple(s // a.itemsize for s in a.strides)
        return ArrayInfo(dtype, tuple(a.shape), strides, Device.CPU, 0, a.ctypes.data, framework)
    if framework == "torch":
        t = array
        dtype = from_any_dtype(t.dtype)  # type: ignore[attr-defined]
        is_cuda = t.device.type == "cuda"  # type: ignore[attr-defined]
        return ArrayInfo(
            dtype,
            tuple(int(s) for s in t.shape),  # type: ignore[attr-defined]
            tuple(int(s) for s in t.stride()),  # type: ignore[attr-defined]
            Device.CUDA if is_cuda else Device.CPU,
            (t.device.index or 0) if is_cuda else 0,  # type: ignore[attr-defined]
            int(t.data_ptr()),  # type: ignore[attr-defined]
            framework,
        )
    if framework in ("cupy", "cuda_array_interface"):
        iface = array.__cuda_array_interface__  # type: ignore[attr-defined]
        own = getattr(array, "dtype", None)
        # bfloat16 has no typestr of its own ("<V2"): trust the array's dtype when it has one.
        dtype = own if isinstance(own, DataType) else from_any_dtype(np.dtype(iface["typestr"]))
        shape = tuple(int(s) for s in iface["shape"])
        itemsize = dtype.itemsize
        if iface.get("strides") is None:
            strides = contiguous_strides(shape)
        else:
            strides = tuple(int(s) // itemsize for s in iface["strides"])
        return ArrayInfo(
            dtype,
            shape,
            strides,
            Device.CUDA,
            _cuda_device_of(array, int(iface["data"][0])),
            int(iface["data"][0]),
            framework,
        )
    if framework == "dlpack":
        # Anything else speaking DLPack: NumPy can read host arrays; device arrays go
        # through the runtime, which imports them with cuda.core.
        device_type, device_index = array.__dlpack_device__()  # type: ignore[attr-defined]
        if device_type == 1:  # kDLCPU
            return describe_array(np.from_dlpack(array), name=name)
        return _describe_dlpack_device_array(array, int(device_index))
    raise InputMismatchError(
        f"{name}: expected an array (numpy, torch, CuPy, __cuda_array_interface__ or __dlpack__), "
        f"got {type(array).__name__}"
    )


def _describe_dlpack_device_array(array: object, device_index: int) -> ArrayInfo:
    """Device arrays with `__dlpack__` but no `__cuda_array_interface__`: read through
    cuda.core's StridedMemoryView, which understands DLPack."""
    try:
        from cuda.core.utils import StridedMemoryView

        view = StridedMemoryView(array, stream_ptr=-1)
    except Exception as e:  # noqa: BLE001
        raise InputMismatchError(f"cannot read a DLPack array: {e}") from None
    dtype = from_any_dtype(view.dtype)
    shape = tuple(int(s) for s in view.shape)
    strides = tuple(int(s) for s in view.strides) if view.strides is not None else None
    if strides is None:
        strides = contiguous_strides(shape)
    return ArrayInfo(dtype, shape, strides, Device.CUDA, device_index, int(view.ptr), "dlpack")


def _cuda_device_of(array: object, ptr: int) -> int:
    """The CUDA device of an array read through `__cuda_array_interface__`: what the array
    says (CuPy's `.device.id`, tunefuse's `DeviceArray.device_id`), else what the driver says
    of its pointer. Never a default: device-1 memory read as device 0's is an illegal address."""
    cupy_device = getattr(getattr(array, "device", None), "id", None)
    if isinstance(cupy_device, int):
        return cupy_device
    own = getattr(array, "device_id", None)
    if isinstance(own, int):
        return own
    if ptr == 0:
        return 0  # an empty array owns no memory: nothing is read through it
    from tunefuse.runtime.pointer import pointer_device

    return pointer_device(ptr)


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    acc = 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


def strides_in_order(
    shape: tuple[int, ...], stride_order: tuple[int, ...] | None
) -> tuple[int, ...]:
    """Dense strides that lay `shape` out in nvFuser's `stride_order` (dim d's rank from the
    innermost; None: row-major)."""
    if stride_order is None:
        return contiguous_strides(shape)
    strides = [0] * len(shape)
    acc = 1
    for d in sorted(range(len(shape)), key=lambda d: stride_order[d]):
        strides[d] = acc
        acc *= max(shape[d], 1)
    return tuple(strides)


def stride_order_of(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...] | None:
    """nvFuser's stride_order: stride_order[d] is dim d's rank from the innermost (0); None
    when that is row-major. Ties (size-1 dims) keep row-major order."""
    rank = len(shape)
    order = _inner_to_outer(shape, strides)
    ranks = [0] * rank
    for r, d in enumerate(order):
        ranks[d] = r
    row_major = [rank - 1 - d for d in range(rank)]
    if ranks == row_major:
        return None
    return tuple(ranks)


def compute_contiguity(shape: Sequence[int], strides: Sequence[int]) -> list[bool | None]:
    """nvFuser's `compute_contiguity`: the contiguity define_tensor takes for this layout."""
    return list(contiguity_of(tuple(int(s) for s in shape), tuple(int(s) for s in strides)))


def compute_tensor_descriptor(
    shape: Sequence[int], strides: Sequence[int]
) -> tuple[list[bool | None], list[int]]:
    """nvFuser's `compute_tensor_descriptor`: (contiguity, stride_order) for define_tensor, the
    stride order spelled out also where it is row-major, and the contiguity listed in that
    order (outermost dim first), as define_tensor takes it."""
    shape, strides = tuple(int(s) for s in shape), tuple(int(s) for s in strides)
    stride_order = nvfuser_stride_order(strides)
    return list(to_allocation_order(contiguity_of(shape, strides), stride_order)), list(
        stride_order
    )


def nvfuser_stride_order(strides: Sequence[int]) -> tuple[int, ...]:
    """nvFuser's stride order of a layout: dims by stride, largest outermost, ties in dim
    order (a size-1 dim's stride counts: it may hint a memory format); a stride-0 dim keeps
    its row-major rank and the others fill the remaining ranks."""
    rank = len(strides)
    fixed = {d: rank - 1 - d for d in range(rank) if strides[d] == 0}
    free = sorted(set(range(rank)) - set(fixed.values()), reverse=True)
    moving = sorted((d for d in range(rank) if d not in fixed), key=lambda d: -strides[d])
    order = dict(fixed)
    order.update(zip(moving, free))
    return tuple(order[d] for d in range(rank))


def to_allocation_order(per_dim: Sequence, stride_order: Sequence[int]) -> tuple:
    """`per_dim` (one entry a logical dim) listed from the outermost dim in memory to the
    innermost: the order of define_tensor's contiguity when a stride_order is given."""
    rank = len(stride_order)
    listed = [None] * rank
    for d, r in enumerate(stride_order):
        listed[rank - 1 - r] = per_dim[d]
    return tuple(listed)


def from_allocation_order(listed: Sequence, stride_order: Sequence[int]) -> tuple:
    """The inverse of `to_allocation_order`: entries listed outermost-first, back per dim."""
    rank = len(stride_order)
    return tuple(listed[rank - 1 - r] for r in stride_order)


def is_broadcast_dim(size: int, stride: int) -> bool:
    """A dim every index of which reads the same elements: size 1, or an expanded dim
    (stride 0, nvFuser's expanded broadcast)."""
    return size == 1 or stride == 0


def contiguity_of(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[bool | None, ...]:
    """nvFuser's contiguity: None for broadcast dims (size 1 or stride 0); True where a dim's
    stride is the extent times the stride of the next-inner non-broadcast dim (1 for the
    innermost)."""
    rank = len(shape)
    order = _inner_to_outer(shape, strides)
    result: list[bool | None] = [None] * rank
    expected = 1
    for d in order:
        if is_broadcast_dim(shape[d], strides[d]):
            continue
        result[d] = strides[d] == expected
        expected = strides[d] * shape[d]
    return tuple(result)


def _inner_to_outer(shape: tuple[int, ...], strides: tuple[int, ...]) -> list[int]:
    """Dims from the innermost to the outermost by stride (ties: the later dim is inner).
    A broadcast dim's stride means nothing: it sits where row-major order would put it."""
    rank = len(shape)
    effective = [0] * rank
    for d in reversed(range(rank)):
        if is_broadcast_dim(shape[d], strides[d]):
            effective[d] = effective[d + 1] * max(shape[d + 1], 1) if d + 1 < rank else 1
        else:
            effective[d] = strides[d]
    return sorted(range(rank), key=lambda d: (effective[d], -d))


def to_numpy(array: object, *, name: str = "input") -> np.ndarray:
    """A host copy (or view) of any array tunefuse accepts. Expanded dims (stride 0) stay
    expanded: the copy is of one index of each, broadcast back (a dense copy would no longer
    match a definition that declares them expanded)."""
    framework = framework_of(array)
    if framework == "numpy":
        return array  # type: ignore[return-value]
    if framework in ("torch", "cupy"):
        shape = tuple(array.shape)  # type: ignore[attr-defined]
        strides = tuple(array.stride()) if framework == "torch" else tuple(array.strides)  # type: ignore[attr-defined]
        if any(st == 0 and n > 1 for n, st in zip(shape, strides)):
            one = tuple(
                slice(0, 1) if st == 0 and n > 1 else slice(None) for n, st in zip(shape, strides)
            )
            return np.broadcast_to(to_numpy(array[one], name=name), shape)  # type: ignore[index]
    if framework == "torch":
        t = array.detach().cpu()  # type: ignore[attr-defined]
        if str(t.dtype) == "torch.bfloat16":
            return t.float().numpy().astype(DataType.BFloat16.numpy)
        if str(t.dtype).startswith("torch.float8"):  # no NumPy export: the bytes, reinterpreted
            import torch

            return t.view(torch.uint8).numpy().view(from_any_dtype(t.dtype).numpy)
        return t.numpy()
    if framework == "cupy":
        return array.get()  # type: ignore[attr-defined]
    if hasattr(array, "numpy") and callable(array.numpy):
        return np.asarray(array.numpy())
    if framework == "dlpack":
        return np.from_dlpack(array)
    raise InputMismatchError(f"{name}: cannot read {type(array).__name__} on the host")


def strided_view(flat: np.ndarray, shape: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    """A view of the 1-d `flat` with `shape` and element `strides`, of any dtype: NumPy's
    as_strided cannot spell the 8-bit floats of ml-dtypes, so it strides their bytes."""
    raw = flat.view(np.dtype(f"u{flat.itemsize}"))
    view = np.lib.stride_tricks.as_strided(
        raw, tuple(shape), tuple(s * raw.itemsize for s in strides)
    )
    return view.view(flat.dtype)
