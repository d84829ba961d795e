"""A plan's kernels as definitions of their own: nvFuser's `fd.segment(inputs)`.

Each kernel of the plan becomes a Fusion that computes what that kernel hands on (the
values later kernels read and the fusion's outputs it writes) from what it reads (the
fusion's inputs and the values earlier kernels handed on), replayed node by node from the
original definition. Run in order, the segments give the original fusion's outputs.

Outputs written in place (`add_output(t, alias_input=x)`) are written by the last segment,
after every earlier segment has read `x` (inside a segment, its own plan orders the write
after the reads). A kernel that hands nothing on (a copy into an in-place input) has no
segment.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunefuse.ir.fusion import Fusion, OutputSpec, TensorType
from tunefuse.ir.infer import FusionBuilder
from tunefuse.ir.ops import NoAttrs, OpKind, ScalarInputAttrs, TensorInputAttrs
from tunefuse.planning.plan import Plan


@dataclass(frozen=True)
class SegmentDefinition:
    """One segment: its fusion and, for each of its values, the original fusion's value
    (`to_original[v]`; its inputs and outputs are always there)."""

    fusion: Fusion
    to_original: dict[int, int]


def segment_definitions(plan: Plan) -> list[SegmentDefinition]:
    """The plan's kernels as fusions, in run order; [] where the plan is one kernel or none
    (nvFuser's answer for a fusion that is not segmented)."""
    f = plan.fusion
    segments = plan.segments
    if len(segments) <= 1:
        return []
    returned = {o.value for o in f.outputs if o.alias_input is None}
    in_place = [o for o in f.outputs if o.alias_input is not None]
    reads = [  # what each kernel reads (a copy into an in-place input reads for no segment)
        {plan.buffers[ld.buffer].value for ld in seg.loads}
        | {plan.buffers[g.buffer].value for g in seg.gathers}
        if seg.values
        else set()
        for seg in segments
    ]
    writer = {st.buffer: k for k, seg in enumerate(segments) for st in seg.stores}
    handed: list[list[int]] = [[] for _ in segments]  # what each kernel hands on
    produced = set(f.inputs)
    for k, seg in enumerate(segments):
        later = set().union(*reads[k + 1 :])
        for v in dict.fromkeys(st.value for st in seg.stores):
            if v not in produced and (v in returned or v in later):
                handed[k].append(v)
                produced.add(v)
    last = len(segments) - 1
    for binding in plan.outputs:  # outputs that are views: with the kernel writing their buffer
        if binding.returned and binding.value not in produced:
            k = writer.get(binding.buffer, last)
            handed[k].append(binding.value)
            produced.add(binding.value)
    kept = [k for k in range(len(segments)) if handed[k]]
    if len(kept) <= 1:
        return []
    definitions = []
    available: set[int] = set()  # values earlier segments handed on
    for k in kept:
        definitions.append(_replay(f, handed[k], in_place if k == kept[-1] else [], available))
        available.update(handed[k])
    return definitions


def _replay(
    f: Fusion, outputs: list[int], in_place: list[OutputSpec], available: set[int]
) -> SegmentDefinition:
    """A fusion computing `outputs` (and the in-place writes) from the fusion's inputs and
    the `available` values, which it takes as inputs."""
    builder = FusionBuilder()
    new: dict[int, int] = {}
    to_original: dict[int, int] = {}
    taken: set[int] = set()  # original values this segment takes as inputs

    def value(v: int) -> int:
        if v in new:
            return new[v]
        node = f.producer(v)
        if v in available or node.op.is_input:
            op, attrs = _input_definition(f, v, node)
            new[v] = builder.add(op, [], attrs)[0]
            to_original[new[v]] = v
            taken.add(v)
            return new[v]
        operands = [value(u) for u in node.inputs]
        # a segment_set's boundary is this segment's edge now: inside, it is a plain copy
        op = OpKind.SET if node.op is OpKind.SEGMENT_SET else node.op
        for orig, made in zip(node.outputs, builder.add(op, operands, node.attrs)):
            new[orig] = made
            to_original[made] = orig
        return new[v]

    for v in outputs:
        builder.add_output(value(v), None, handed_layout(f, v))
    for spec in in_place:
        written = value(spec.value)
        if spec.value in taken:  # handed on by an earlier segment: copy it in
            written = builder.add(OpKind.SET, [written], NoAttrs())[0]
            to_original[written] = spec.value
        builder.add_output(written, value(spec.alias_input), spec.stride_order)  # type: ignore[arg-type]
    return SegmentDefinition(builder.finish(), to_original)


def _input_definition(f: Fusion, v: int, producer) -> tuple[OpKind, object]:  # noqa: ANN001
    """How a segment declares value `v` as an input: as the fusion declared it, or, for a
    value an earlier segment hands on (a new row-major array, or in its output's
    stride order), a symbolic tensor of that layout."""
    if producer.op.is_input:
        return producer.op, producer.attrs
    vt = f.values[v]
    if not isinstance(vt, TensorType):  # pragma: no cover - kernels hand on tensors only
        return OpKind.DEFINE_SCALAR, ScalarInputAttrs(vt.dtype)
    shape = tuple(1 if e == 1 else -1 for e in vt.shape)
    order = handed_layout(f, v)
    if order == tuple(range(len(shape) - 1, -1, -1)):
        order = None  # row-major, as define_tensor writes it
    return OpKind.DEFINE_TENSOR, TensorInputAttrs(
        shape, tuple(None if e == 1 else True for e in shape), vt.dtype, order
    )


def handed_layout(f: Fusion, v: int) -> tuple[int, ...] | None:
    """The stride order a segment hands `v` on in: that of the fusion's returned output `v`
    (None, row-major, for a value only later segments read)."""
    return next((o.stride_order for o in f.outputs if o.value == v and o.alias_input is None), None)
