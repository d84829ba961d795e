"""Where a call's new device memory comes from, and what its outputs are returned as: one
small object per array framework (torch, CuPy, tunefuse's own device arrays).

Outputs come back in the framework of the inputs, allocated by that framework on the stream
it calls current (so its own pool orders the reuse of freed memory); scratch memory (buffers
between kernels, a split reduction's workspace) comes from the same place, and from the
runtime's stream-ordered pool for CuPy and tunefuse arrays.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np

from tunefuse.arrays import framework_of
from tunefuse.ir.dtypes import DataType, torch_dtype_name
from tunefuse.runtime.device import Runtime
from tunefuse.runtime.device_array import DeviceArray


class Memory:
    """Device memory at `ptr`, kept alive by `owner` (a tensor, a CuPy array, a Buffer)."""

    __slots__ = ("owner", "ptr")

    def __init__(self, ptr: int, owner: object) -> None:
        self.ptr = ptr
        self.owner = owner


class OwnArrays:
    """tunefuse's own DeviceArrays, from the runtime's stream-ordered pool: the framework of
    host (NumPy) inputs and of other device arrays."""

    name = "tunefuse"

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    def stream_handle(self) -> int | None:
        return None  # tunefuse's own stream

    def empty(self, nbytes: int, dtype: DataType, stream: object) -> Memory:
        buf = self.rt.allocate(max(nbytes, dtype.itemsize), stream)
        return Memory(int(buf.handle), buf)  # type: ignore[attr-defined]

    def scratch(self, nbytes: int, stream: object) -> Memory:
        return self.empty(nbytes, DataType.Int32, stream)

    def zeroed(self, nbytes: int, stream: object) -> Memory:
        memory = self.scratch(nbytes, stream)
        self.rt.zero(memory.ptr, nbytes, stream)
        return memory

    def view(self, memory: Memory, dtype: DataType, shape, strides, offset: int, stream) -> object:  # noqa: ANN001
        return DeviceArray(memory.owner, tuple(shape), dtype, tuple(strides), offset, stream)

    def pointer_of(self, array: object) -> int:
        """A device array's data pointer (an array of this framework)."""
        from tunefuse.arrays import describe_array

        return describe_array(array).data_ptr

    def maker(self, shape: tuple[int, ...], dtype: DataType, examples: Sequence[object]):  # noqa: ANN201
        """A function (inputs, stream) -> (array, pointer) making a new row-major array of
        `shape` and `dtype`; `examples` are inputs of the kind later calls pass."""
        from tunefuse.arrays import contiguous_strides

        nbytes = dtype.itemsize
        for e in shape:
            nbytes *= e
        strides = contiguous_strides(shape)

        def make(inputs: Sequence[object], stream: object) -> tuple[object, int]:
            memory = self.empty(nbytes, dtype, stream)
            return self.view(memory, dtype, shape, strides, 0, stream), memory.ptr

        return make

    def to_host(self, result: object) -> object:
        """A result of a call whose inputs were all on the host, brought there (NumPy)."""
        if hasattr(result, "numpy") and not isinstance(result, np.ndarray):
            return result.numpy()  # type: ignore[attr-defined]
        return result

    def alias(self, array: object, view, dtype: DataType) -> object:  # noqa: ANN001
        """An output that is a view of the caller's device input `array`."""
        ptr = array.__cuda_array_interface__["data"][0]  # type: ignore[attr-defined]
        return DeviceArray(
            _RawOwner(ptr, array), tuple(view.shape), dtype, tuple(view.strides), view.offset
        )


class TorchArrays(OwnArrays):
    """torch tensors from torch's caching allocator, on torch's current stream."""

    name = "torch"

    def __init__(self, rt: Runtime) -> None:
        import torch

        super().__init__(rt)
        self.torch = torch
        self.device = torch.device("cuda", rt.index)
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # no Stream object made
        # device index -> torch's current stream there, as an int
        self.current_stream = (
            raw if raw is not None else (lambda index: torch.cuda.current_stream(index).cuda_stream)
        )

    def stream_handle(self) -> int | None:
        return int(self.current_stream(self.rt.index))

    def empty(self, nbytes: int, dtype: DataType, stream: object) -> Memory:
        t = self.torch.empty(
            max(nbytes, dtype.itemsize), dtype=self.torch.uint8, device=self.device
        )
        return Memory(int(t.data_ptr()), t)

    def zeroed(self, nbytes: int, stream: object) -> Memory:
        t = self.torch.zeros(max(nbytes, 1), dtype=self.torch.uint8, device=self.device)
        return Memory(int(t.data_ptr()), t)

    def view(self, memory: Memory, dtype: DataType, shape, strides, offset: int, stream) -> object:  # noqa: ANN001
        torch = self.torch
        base = memory.owner
        if isinstance(base, torch.Tensor) and base.dtype == torch.uint8:
            base = base.view(torch_dtype(dtype))
        return torch.as_strided(base, tuple(shape), tuple(strides), offset)

    def pointer_of(self, array: object) -> int:
        return array.data_ptr()  # type: ignore[attr-defined]

    def to_host(self, result: object) -> object:
        """CPU torch tensors in: CPU torch tensors out (a result tunefuse made as its own
        array, an output that is a host input, comes back as NumPy)."""
        if isinstance(result, self.torch.Tensor):
            return result.cpu()
        return super().to_host(result)

    def maker(self, shape: tuple[int, ...], dtype: DataType, examples: Sequence[object]):  # noqa: ANN201
        """`empty_like` of an input that is contiguous of this shape and dtype where there
        is one, else `new_empty` of a template (each ~1 µs cheaper than `torch.empty`'s
        keyword parsing)."""
        torch = self.torch
        tdtype = torch_dtype(dtype)
        like = next(
            (
                k
                for k, x in enumerate(examples)
                if isinstance(x, torch.Tensor)
                and x.dtype == tdtype
                and tuple(x.shape) == shape
                and x.is_contiguous()
            ),
            None,
        )
        if like is not None:
            empty_like = torch.empty_like

            def make_like(inputs: Sequence[object], stream: object) -> tuple[object, int]:
                t = empty_like(inputs[like])
                return t, t.data_ptr()

            make_like.like = like  # type: ignore[attr-defined]  # for runtime.specialized
            make_like.empty_like = empty_like  # type: ignore[attr-defined]
            return make_like
        template = torch.empty(0, dtype=tdtype, device=self.device)

        def make_new(inputs: Sequence[object], stream: object) -> tuple[object, int]:
            t = template.new_empty(shape)
            return t, t.data_ptr()

        return make_new

    def alias(self, array: object, view, dtype: DataType) -> object:  # noqa: ANN001
        return self.torch.as_strided(
            array, tuple(view.shape), tuple(view.strides), array.storage_offset() + view.offset
        )  # type: ignore[attr-defined]


class CupyArrays(OwnArrays):
    """CuPy arrays for outputs (CuPy's pool, its current stream); scratch from the runtime.
    CuPy has no bfloat16: such outputs are tunefuse DeviceArrays."""

    name = "cupy"

    def __init__(self, rt: Runtime) -> None:
        import cupy

        super().__init__(rt)
        self.cupy = cupy

    def stream_handle(self) -> int | None:
        with self.cupy.cuda.Device(self.rt.index):
            return int(self.cupy.cuda.get_current_stream().ptr)

    def empty(self, nbytes: int, dtype: DataType, stream: object) -> Memory:
        with self.cupy.cuda.Device(self.rt.index):
            a = self.cupy.empty(max(nbytes, dtype.itemsize), dtype=self.cupy.uint8)
        return Memory(int(a.data.ptr), a)

    def scratch(self, nbytes: int, stream: object) -> Memory:
        return super().empty(nbytes, DataType.Int32, stream)

    def view(self, memory: Memory, dtype: DataType, shape, strides, offset: int, stream) -> object:  # noqa: ANN001
        cupy = self.cupy
        if dtype.ml_dtypes or not isinstance(memory.owner, cupy.ndarray):  # no CuPy dtype
            return super().view(memory, dtype, shape, strides, offset, stream)
        return cupy.ndarray(
            tuple(shape),
            dtype=dtype.numpy,
            memptr=memory.owner.data + offset * dtype.itemsize,
            strides=tuple(s * dtype.itemsize for s in strides),
        )

    def alias(self, array: object, view, dtype: DataType) -> object:  # noqa: ANN001
        if dtype.ml_dtypes:
            return super().alias(array, view, dtype)
        return self.cupy.ndarray(
            tuple(view.shape),
            dtype=dtype.numpy,
            memptr=array.data + view.offset * dtype.itemsize,  # type: ignore[attr-defined]
            strides=tuple(s * dtype.itemsize for s in view.strides),
        )


def arrays_kind(inputs: Sequence[object]) -> type[OwnArrays]:
    """The framework a call's outputs are returned in: torch if any input is a torch tensor,
    else CuPy if any is a CuPy array, else tunefuse's own. A call with no array input at all
    (scalars, or nothing: `iota`, `full`, random draws) returns torch tensors where the
    process has imported torch, as nvFuser does, and tunefuse's own arrays where it has not."""
    kinds = {framework_of(x) for x in inputs}
    if "torch" in kinds:
        return TorchArrays
    if "cupy" in kinds:
        return CupyArrays
    if kinds <= {"unknown"} and "torch" in sys.modules:
        return TorchArrays
    return OwnArrays


def arrays_for(inputs: Sequence[object], rt: Runtime) -> OwnArrays:
    return arrays_kind(inputs)(rt)


def torch_dtype(dtype: DataType):  # noqa: ANN201 - a torch.dtype
    """The torch dtype of a tunefuse DataType."""
    import torch

    return getattr(torch, torch_dtype_name(dtype))


class _RawOwner:
    """A raw pointer that keeps its owner alive (for DeviceArray views of foreign memory)."""

    def __init__(self, ptr: int, owner: object) -> None:
        self.handle = ptr
        self.owner = owner
