"""The alias pass: which tensors are strided views of a buffer, and so which buffer each
output is (`bind_outputs`).

Movement ops are index maps (`indexing`); a chain of them from a buffer is a strided view
exactly when the composed map gives an affine offset. Views of inputs at a fusion's edges
then cost nothing (their outputs alias the input), and views at the output side become
views of the kernel's output buffer: bookend stripping on both sides, by one mechanism.
In-place outputs write into their input; preallocated ones into the caller's buffer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tunefuse.arrays import contiguous_strides, strides_in_order
from tunefuse.errors import InputMismatchError
from tunefuse.ir.fusion import Fusion, ScalarType
from tunefuse.ir.ops import GroupOp, OpKind
from tunefuse.planning.concretize import ConcreteFusion
from tunefuse.planning.indexing import Index, Var, offset_of, source_index, var
from tunefuse.planning.kernel_ir import Buffer, BufferKind
from tunefuse.planning.segment import StoreRequest
from tunefuse.planning.signature import BoundInputs, TensorSignature


@dataclass(frozen=True, slots=True)
class StridedView:
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int

    def __repr__(self) -> str:
        return f"view(shape={list(self.shape)}, strides={list(self.strides)}, offset={self.offset})"


def view_root(cf: ConcreteFusion, value: int) -> int:
    """The value a chain of movement ops starts from (the value itself if none)."""
    node = cf.fusion.producer(value)
    while node.op in GroupOp.VIEW:
        value = node.inputs[0]
        node = cf.fusion.producer(value)
    return value


def index_at_root(cf: ConcreteFusion, value: int, index: Index) -> tuple[int, Index]:
    """Map an index of `value` through its movement ops to an index of its view root."""
    node = cf.fusion.producer(value)
    while node.op in GroupOp.VIEW:
        src = node.inputs[0]
        index = source_index(
            node.op, node.attrs, index, cf.shape(src), cf.shape(value), cf.reshapes.get(value)
        )
        value, node = src, cf.fusion.producer(src)
    return value, index


def strided_view(
    cf: ConcreteFusion,
    value: int,
    root_strides: tuple[int, ...] | None = None,
    root_offset: int = 0,
) -> StridedView | None:
    """`value` as a strided view of its root's memory (contiguous unless `root_strides`
    says otherwise), or None when the view needs index arithmetic (a copy)."""
    shape = cf.shape(value)
    vars_ = tuple(var(Var(k, e)) for k, e in enumerate(shape))
    root, root_index = index_at_root(cf, value, vars_)
    strides = root_strides if root_strides is not None else contiguous_strides(cf.shape(root))
    offset = offset_of(root_index, strides, root_offset)
    if not offset.is_affine:
        return None
    view_strides = tuple(offset.coeff(Var(k, e)) if e != 1 else 0 for k, e in enumerate(shape))
    return StridedView(shape, view_strides, offset.const)


@dataclass(frozen=True, slots=True)
class OutputBinding:
    """Fusion output `position`: a view of `buffer`. In-place outputs are not returned."""

    position: int
    value: int
    buffer: int
    view: StridedView
    returned: bool


class Buffers:
    def __init__(self) -> None:
        self.items: list[Buffer] = []

    def add(
        self,
        kind: BufferKind,
        cf: ConcreteFusion,
        value: int,
        strides: tuple[int, ...] | None = None,
        input_index: int | None = None,
        out_index: int | None = None,
        alignment: int = 16,
    ) -> Buffer:
        shape = cf.shape(value)
        buf = Buffer(
            len(self.items),
            kind,
            cf.fusion.values[value].dtype,
            shape,
            strides if strides is not None else contiguous_strides(shape),
            value,
            input_index,
            out_index,
            alignment,
        )
        self.items.append(buf)
        return buf


def check_preallocated(
    cf: ConcreteFusion, bound: BoundInputs, out: Sequence[TensorSignature | None]
) -> None:
    """Each preallocated output must match its output's shape, dtype and device."""
    f = cf.fusion
    returned = [o for o in f.outputs if o.alias_input is None]
    if len(out) != len(returned):
        raise InputMismatchError(
            f"out= has {len(out)} buffers; the fusion returns {len(returned)} outputs"
        )
    devices = {s.device for s in bound.signature if isinstance(s, TensorSignature)}
    for k, (spec, sig) in enumerate(zip(returned, out)):
        if sig is None:
            continue
        name = f"out[{k}] (for {f.name(spec.value)})"
        dtype = f.values[spec.value].dtype
        if sig.dtype is not dtype:
            raise InputMismatchError(
                f"{name}: dtype {sig.dtype.value}, the output is {dtype.value}"
            )
        if sig.shape != cf.shape(spec.value):
            raise InputMismatchError(
                f"{name}: shape {list(sig.shape)}, the output is {list(cf.shape(spec.value))}"
            )
        if devices and sig.device not in devices:
            raise InputMismatchError(
                f"{name}: on {sig.device.value}, the inputs are on {sorted(d.value for d in devices)}"
            )
        if len(sig.strides) != len(sig.shape) or (
            sig.shape and min(sig.shape) > 0 and _overlaps(sig.shape, sig.strides)
        ):
            raise InputMismatchError(
                f"{name}: strides {list(sig.strides)} overlap; it cannot be written"
            )


def _overlaps(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """True when two elements share memory (a broadcast or otherwise self-overlapping buffer)."""
    dims = sorted((abs(st), e) for e, st in zip(shape, strides) if e > 1)
    extent = 1
    for stride, e in dims:
        if stride < extent:
            return True
        extent = stride * (e - 1) + extent
    return False


def bind_outputs(
    cf: ConcreteFusion,
    bound: BoundInputs,
    buffers: Buffers,
    out: Sequence[TensorSignature | None] = (),
) -> tuple[list[OutputBinding], list[StoreRequest], dict[int, Buffer]]:
    """The alias pass: each output becomes a view of an input, a view of a kernel's
    buffer, or a kernel's buffer itself; in-place outputs write into their input."""
    f = cf.fusion
    input_buffers: dict[int, Buffer] = {}
    for position, vid in enumerate(f.inputs):
        if not isinstance(f.values[vid], ScalarType):
            sig = bound.signature[position]
            input_buffers[vid] = buffers.add(
                BufferKind.INPUT,
                cf,
                vid,
                sig.strides,
                position,  # type: ignore[union-attr]
                alignment=sig.alignment,
            )  # type: ignore[union-attr]
    requests: dict[int, StoreRequest] = {}
    bindings: list[OutputBinding] = []
    returned_index = 0
    written_in_place: dict[int, int] = {}  # value -> the input it is written into
    written_inputs = {spec.alias_input for spec in f.outputs if spec.alias_input is not None}
    for spec in f.outputs:
        if spec.alias_input is not None and spec.stride_order is None:
            written_in_place.setdefault(spec.value, spec.alias_input)
    # Outputs in a stride order of their own first: their buffers have that layout, and an
    # output that is a view of one is a view of that layout.
    ordered: dict[int, object] = {}  # position -> its request's key
    for position, spec in enumerate(f.outputs):
        if spec.stride_order is None or spec.alias_input is not None:
            continue
        k = returned_before(f, position)
        if k < len(out) and out[k] is not None:
            continue  # written into the caller's buffer instead
        strides = strides_in_order(cf.shape(spec.value), spec.stride_order)
        key: object = spec.value
        if key in requests and requests[key].strides != strides:
            key = -2000 - position  # the same value in a second layout: stored twice
        if key not in requests:
            buf = buffers.add(BufferKind.OUTPUT, cf, spec.value, strides)
            requests[key] = StoreRequest(  # type: ignore[index]
                spec.value,
                buf.id,
                buf.strides,
                f"computes output {f.name(spec.value)} in stride order {list(spec.stride_order)}",
            )
        ordered[position] = key
    for position, spec in enumerate(f.outputs):
        v = spec.value
        prealloc = None
        if spec.alias_input is None:
            prealloc = out[returned_index] if returned_index < len(out) else None
            returned_index += 1
        if prealloc is not None:
            buf = buffers.add(
                BufferKind.OUTPUT,
                cf,
                v,
                prealloc.strides,
                out_index=returned_index - 1,
                alignment=prealloc.alignment,
            )
            requests[-1000 - position] = StoreRequest(
                v, buf.id, buf.strides, f"writes {f.name(v)} into out[{returned_index - 1}]"
            )
            bindings.append(
                OutputBinding(position, v, buf.id, StridedView(buf.shape, buf.strides, 0), True)
            )
            continue
        if spec.alias_input is not None:
            target = input_buffers[spec.alias_input]
            if cf.shape(v) != target.shape:
                raise InputMismatchError(
                    f"output {position} ({f.name(v)}) of shape {list(cf.shape(v))} cannot be written "
                    f"in place into {f.name(spec.alias_input)} of shape {list(target.shape)}"
                )
            if target.shape and min(target.shape) > 0 and _overlaps(target.shape, target.strides):
                raise InputMismatchError(
                    f"output {position} ({f.name(v)}) cannot be written in place into {f.name(spec.alias_input)}: "
                    f"its strides {list(target.strides)} overlap (an expanded or broadcast tensor)"
                )
            req = StoreRequest(
                v,
                target.id,
                target.strides,
                f"writes {f.name(v)} in place into {f.name(spec.alias_input)}",
            )
            requests[-1 - position] = (
                req  # in-place stores are keyed apart: the value may be stored twice
            )
            bindings.append(
                OutputBinding(
                    position, v, target.id, StridedView(target.shape, target.strides, 0), False
                )
            )
            continue
        if v in written_in_place and spec.stride_order is None:
            # nvFuser returns the input it wrote this value into, not a second copy of it.
            target = input_buffers[written_in_place[v]]
            bindings.append(
                OutputBinding(
                    position, v, target.id, StridedView(target.shape, target.strides, 0), True
                )
            )
            continue
        root = view_root(cf, v)
        if spec.stride_order is not None:
            # Its own layout: computed into a buffer of it (never a view of another).
            buf = buffers.items[requests[ordered[position]].buffer]
            bindings.append(
                OutputBinding(position, v, buf.id, StridedView(buf.shape, buf.strides, 0), True)
            )
            continue
        if root in input_buffers:
            buf = input_buffers[root]
            # A view of an input that is written in place would show the written values: it
            # is copied by a kernel that runs before the write (the value as defined).
            view = None if root in written_inputs else strided_view(cf, v, buf.strides)
            if view is not None:
                bindings.append(OutputBinding(position, v, buf.id, view, True))
                continue
            root = v  # the view needs index arithmetic, or the input changes: a kernel copies it
        elif root != v and strided_view(cf, v, _strides_of(requests, root)) is None:
            root = v  # not a strided view of its root (a reshape of a broadcast): computed itself
        if root not in requests:
            buf = buffers.add(BufferKind.OUTPUT, cf, root)
            requests[root] = StoreRequest(root, buf.id, buf.strides, f"computes output {f.name(v)}")
        buf = buffers.items[requests[root].buffer]
        view = (
            strided_view(cf, v, buf.strides)
            if root != v
            else StridedView(buf.shape, buf.strides, 0)
        )
        assert view is not None
        bindings.append(OutputBinding(position, v, buf.id, view, True))
    # segment_set: its result lives in memory between two kernels.
    for node in f.nodes:
        if (
            node.op is OpKind.SEGMENT_SET
            and node.outputs[0] not in requests
            and f.uses[node.outputs[0]]
        ):
            buf = buffers.add(BufferKind.INTERMEDIATE, cf, node.outputs[0])
            requests[node.outputs[0]] = StoreRequest(
                node.outputs[0],
                buf.id,
                buf.strides,
                f"segment_set: {f.name(node.outputs[0])} is a kernel boundary",
                own_kernel=True,
            )
    materialized = dict(input_buffers)
    for key, req in requests.items():
        if key >= 0 and req.value not in input_buffers:  # an input's copy is read from the input
            materialized[req.value] = buffers.items[req.buffer]
    return bindings, list(requests.values()), materialized


def returned_before(f: Fusion, position: int) -> int:
    """How many returned (not in-place) outputs come before output `position`: its index in
    execute's results and in out=."""
    return sum(1 for o in f.outputs[:position] if o.alias_input is None)


def _strides_of(requests: dict, value: int) -> tuple[int, ...] | None:
    """The strides of the buffer `value` is stored in, if one is decided yet (else None:
    contiguous, as the buffer it gets will be)."""
    return requests[value].strides if value in requests else None
