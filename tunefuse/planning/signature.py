"""The input signature of a call: what about the inputs decides the plan.

Tensors contribute dtype, sizes, strides, pointer-alignment class and device; scalars their
dtype, and their value only where it decides a shape (a reshape's size, a full's extent).
Inputs are checked against the definition here, before anything is planned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Union

import numpy as np

from tunefuse.arrays import (
    ArrayInfo,
    Device,
    contiguity_of,
    describe_array,
    is_array,
    is_broadcast_dim,
    stride_order_of,
    to_numpy,
)
from tunefuse.errors import InputMismatchError
from tunefuse.ir.dtypes import DataType
from tunefuse.ir.fusion import Fusion, ScalarType, TensorType
from tunefuse.ir.ops import OpKind, ScalarRef


@dataclass(frozen=True, slots=True)
class TensorSignature:
    dtype: object
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    alignment: int  # bytes: the largest power of two (<= 16) dividing the data pointer
    device: Device


@dataclass(frozen=True, slots=True)
class ScalarSignature:
    dtype: object
    value: Union[bool, int, float, None]  # only where it decides a shape


InputSignature = tuple[Union[TensorSignature, ScalarSignature], ...]


def alignment_class(ptr: int) -> int:
    for a in (16, 8, 4, 2):
        if ptr % a == 0:
            return a
    return 1


class FusionInputs:
    """What signature() and the executor need to know of a fusion's inputs, computed once
    per fusion: which scalar inputs decide shapes."""

    def __init__(self, fusion: Fusion) -> None:
        self.fusion = fusion
        self.input_ids = fusion.inputs

    @cached_property
    def shape_scalar_positions(self) -> frozenset[int]:
        """Positions (in the input list) of the scalar inputs that decide shapes."""
        return frozenset(k for k, vid in enumerate(self.input_ids) if vid in self.shape_scalars)

    @cached_property
    def shape_scalars(self) -> frozenset[int]:
        """Scalar inputs whose value reaches a shape entry (through scalar arithmetic too)."""
        f = self.fusion
        used: set[int] = set()
        for node in f.nodes:
            attrs = node.attrs
            for field in ("shape",):
                for entry in getattr(attrs, field, ()) or ():
                    if isinstance(entry, ScalarRef):
                        used.add(node.inputs[entry.index])
            if node.op is OpKind.IOTA:
                used.add(node.inputs[0])
        # Walk back through scalar-only nodes to the scalar inputs they come from.
        frontier = list(used)
        sources: set[int] = set()
        while frontier:
            v = frontier.pop()
            producer = f.producer(v)
            if producer.op is OpKind.DEFINE_SCALAR:
                sources.add(v)
            elif producer.op is not OpKind.SIZE:
                frontier.extend(producer.inputs)
        return frozenset(sources)


def _check_layout(name: str, vt: TensorType, attrs: object, info: ArrayInfo) -> None:
    if int(np.prod(info.shape)) == 0:
        return
    actual_contiguity = contiguity_of(info.shape, info.strides)
    declared_order = attrs.stride_order  # type: ignore[attr-defined]
    actual_order = stride_order_of(info.shape, info.strides)
    if any(c for c in attrs.contiguity) or declared_order is not None:  # type: ignore[attr-defined]
        rank = len(info.shape)
        want = (
            declared_order
            if declared_order is not None
            else tuple(rank - 1 - d for d in range(rank))
        )
        have = (
            actual_order if actual_order is not None else tuple(rank - 1 - d for d in range(rank))
        )
        # Only dims that are not broadcast (size 1 or stride 0) carry an order.
        real = [d for d in range(rank) if not is_broadcast_dim(info.shape[d], info.strides[d])]
        if sorted(real, key=lambda d: want[d]) != sorted(real, key=lambda d: have[d]):
            raise InputMismatchError(
                f"{name}: declared stride order {list(want)}, got strides {list(info.strides)} "
                f"(stride order {list(have)})"
            )
    for d, declared in enumerate(attrs.contiguity):  # type: ignore[attr-defined]
        if declared is None and not is_broadcast_dim(info.shape[d], info.strides[d]):
            # An expanded dim reads one element for all its indices: anything else there
            # would be a wrong answer, not a layout to accommodate.
            raise InputMismatchError(
                f"{name}: dim {d} is declared broadcast (contiguity None) but has size {info.shape[d]} "
                f"and stride {info.strides[d]}; an expanded dim has stride 0 (e.g. torch's expand)"
            )
        if declared and actual_contiguity[d] is False:
            raise InputMismatchError(
                f"{name}: dim {d} is declared contiguous but its stride is {info.strides[d]} "
                f"(sizes {list(info.shape)}, strides {list(info.strides)})"
            )


def check_tensor(name: str, vt: TensorType, attrs: object, info: ArrayInfo) -> None:
    if info.dtype is not vt.dtype:
        raise InputMismatchError(f"{name}: declared dtype {vt.dtype.value}, got {info.dtype.value}")
    if len(info.shape) != vt.rank:
        raise InputMismatchError(
            f"{name}: declared rank {vt.rank}, got rank {len(info.shape)} {list(info.shape)}"
        )
    for d, (declared, actual) in enumerate(zip(attrs.shape, info.shape)):  # type: ignore[attr-defined]
        if declared == 1 and actual != 1:
            raise InputMismatchError(
                f"{name}: dim {d} is declared broadcast (size 1), got size {actual}"
            )
        if declared >= 0 and declared != actual:
            raise InputMismatchError(f"{name}: dim {d} declared size {declared}, got {actual}")
    _check_layout(name, vt, attrs, info)


@dataclass(frozen=True)
class BoundInputs:
    """The inputs of one call: their signature, array descriptions and scalar values."""

    signature: InputSignature
    arrays: dict[int, ArrayInfo]  # value id -> array
    scalars: dict[int, object]  # value id -> Python value
    objects: tuple[object, ...]  # the caller's objects, in order


def _host_scalar(name: str, dtype: DataType, value: object) -> object:
    """A 0-dim host array or CPU tensor given for a scalar (nvFuser's `is_cpu=True` tensor):
    its value. Anything else is not a scalar."""
    info = describe_array(value, name=name)
    if info.shape != () or info.device is not Device.CPU:
        where = "on the GPU" if info.device is not Device.CPU else f"of shape {list(info.shape)}"
        raise InputMismatchError(
            f"{name}: expected a {dtype.value} scalar or a 0-dim CPU tensor, got an array {where}"
        )
    return to_numpy(value, name=name).item()


def bind_inputs(
    fusion: Fusion, inputs: Sequence[object], fusion_inputs: FusionInputs | None = None
) -> BoundInputs:
    """Check `inputs` against the definition and read their signature."""
    fusion_inputs = fusion_inputs or FusionInputs(fusion)
    ids = fusion_inputs.input_ids
    if len(inputs) != len(ids):
        raise InputMismatchError(f"the fusion takes {len(ids)} inputs, got {len(inputs)}")
    sig: list[Union[TensorSignature, ScalarSignature]] = []
    arrays: dict[int, ArrayInfo] = {}
    scalars: dict[int, object] = {}
    for k, (vid, value) in enumerate(zip(ids, inputs)):
        vt = fusion.values[vid]
        name = f"input {k} ({fusion.name(vid)})"
        if isinstance(vt, TensorType):
            if not is_array(value):
                raise InputMismatchError(f"{name}: expected a tensor, got {type(value).__name__}")
            info = describe_array(value, name=name)
            check_tensor(name, vt, fusion.producer(vid).attrs, info)
            arrays[vid] = info
            if info.device is Device.CPU:
                # Host arrays are copied to the device contiguously before a kernel reads them.
                strides = (
                    tuple(int(s) for s in np.cumprod((1,) + info.shape[::-1][:-1])[::-1])
                    if info.shape
                    else ()
                )
                alignment = 16
            else:
                strides, alignment = info.strides, alignment_class(info.data_ptr)
            sig.append(TensorSignature(vt.dtype, info.shape, strides, alignment, info.device))
        else:
            assert isinstance(vt, ScalarType)
            if is_array(value):
                value = _host_scalar(name, vt.dtype, value)
            if isinstance(value, np.generic):
                value = value.item()
            if not isinstance(value, (bool, int, float)):
                raise InputMismatchError(
                    f"{name}: expected a {vt.dtype.value} scalar, got {value!r}"
                )
            if vt.dtype.is_integral and not isinstance(value, int):
                raise InputMismatchError(f"{name}: expected an integer, got {value!r}")
            scalars[vid] = value
            decides = vid in fusion_inputs.shape_scalars
            sig.append(ScalarSignature(vt.dtype, value if decides else None))
    return BoundInputs(tuple(sig), arrays, scalars, tuple(inputs))
