"""The executable plan of one call: concretize -> alias (`alias.bind_outputs`: which buffer
each output is) -> segment (which kernels write them), in one flat function (`plan_for`).

    plan = fd.plan(inputs)
    print(plan)          # buffers, kernels and why each boundary is where it is

The executor consumes a Plan unchanged; the plan cache maps input signatures to plans.
"""

from __future__ import annotations

import graphlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from tunefuse.arrays import describe_array
from tunefuse.device_info import DeviceInfo
from tunefuse.ir.fusion import Fusion, Node, ScalarType
from tunefuse.ir.ops import OpKind
from tunefuse.planning.alias import Buffers, OutputBinding, bind_outputs, check_preallocated
from tunefuse.planning.column_partials import fuse_column_partials
from tunefuse.planning.concretize import ConcreteFusion, ConcretizationInfo, concretize
from tunefuse.planning.indexing import Var, add, const, scale, var
from tunefuse.planning.kernel_ir import Buffer, BufferKind, ELoad, Load, SchedulerKind, Store
from tunefuse.planning.reductions import MAX_EXP_SUM, contains_reduce, reduction_groups
from tunefuse.planning.segment import (
    Segment,
    StoreRequest,
    _index_type,
    _Materialize,
    _SplitByShape,
    build_segment,
)
from tunefuse.planning.signature import (
    BoundInputs,
    FusionInputs,
    TensorSignature,
    alignment_class,
    bind_inputs,
)
from tunefuse.schedulers import normalization


@dataclass(frozen=True)
class Plan:
    fusion: Fusion
    info: ConcretizationInfo
    buffers: tuple[Buffer, ...]
    segments: tuple[Segment, ...]
    outputs: tuple[OutputBinding, ...]
    host_scalar_nodes: tuple[Node, ...]  # scalar-only nodes the host evaluates per call
    fixed_scalars: tuple[tuple[int, object], ...]  # constants and extents (size ops) of this plan

    @property
    def conc_key(self) -> str:
        return self.info.conc_key

    @property
    def num_kernels(self) -> int:
        return len(self.segments)

    @property
    def aliases(self) -> tuple[OutputBinding, ...]:
        """Outputs that are views of an input buffer: they cost no kernel."""
        return tuple(
            o
            for o in self.outputs
            if self.buffers[o.buffer].kind is BufferKind.INPUT and o.returned
        )

    def __str__(self) -> str:
        f = self.fusion
        lines = [
            f"Plan: fusion {f.fusion_id[:12]}, conc_key {self.conc_key[:12]}, "
            f"{self.num_kernels} kernel{'s' if self.num_kernels != 1 else ''}",
            "  buffers:",
        ]
        for b in self.buffers:
            lines.append(
                f"    b{b.id} {b.kind.value:<12} {f.name(b.value):<5} {b.dtype.value:<8} "
                f"shape {list(b.shape)} strides {list(b.strides)}"
            )
        lines.append("  segments:")
        for s in self.segments:
            lines.append(
                f"    {s.name}: {s.scheduler.value}, space {list(s.extents)}"
                + (f" reducing dims {list(s.reduce_dims)}" if s.reduce_dims else "")
                + f", {s.index_type} indexing"
            )
            lines.append(f"      computes {', '.join(f.name(v) for v in s.values) or 'nothing'}")
            lines.append(
                f"      reads {', '.join(f'b{ld.buffer}[{ld.offset!r}]' for ld in s.loads) or 'nothing'}"
            )
            lines.append(
                f"      writes {', '.join(f'b{st.buffer}[{st.offset!r}] = {f.name(st.value)}' for st in s.stores)}"
            )
            if s.column_partials:
                parts = ", ".join(
                    f"b{c.buffer}[{s.extents[1]}*group + i1] += {f.name(c.value)}'s operand"
                    for c in s.column_partials
                )
                lines.append(
                    f"      column sums in {s.column_groups} row groups (row i0 in group "
                    f"i0 % {s.column_groups}): {parts}"
                )
            if s.reduce_dims:
                lines.append(f"      accumulators: {_accumulators_text(f, s)}")
            lines.append(f"      why: {s.why}")
            lines.append(f"      kernel_key {s.kernel_key[:16]}  shape_key {s.shape_key}")
        lines.append("  outputs:")
        for o in self.outputs:
            kind = self.buffers[o.buffer].kind
            written = any(st.buffer == o.buffer for seg in self.segments for st in seg.stores)
            note = (
                "in place, not returned"
                if not o.returned
                else (
                    "the input it is written into"
                    if kind is BufferKind.INPUT and written
                    else "alias of an input, no kernel"
                    if kind is BufferKind.INPUT
                    else "written by a kernel"
                )
            )
            lines.append(
                f"    out{o.position} {f.name(o.value)} = b{o.buffer} {o.view!r}  ({note})"
            )
        return "\n".join(lines)


def copy_segment(name: str, src: Buffer, dst: Buffer, value: int, why: str) -> Segment:
    """A kernel that copies buffer `src` into `dst` (same shape, any strides)."""
    extents = src.shape if src.shape else (1,)
    vars_ = [var(Var(k, e)) for k, e in enumerate(extents)]
    load_offset = add(const(0), *(scale(v, s) for v, s in zip(vars_, src.strides)))
    store_offset = add(const(0), *(scale(v, s) for v, s in zip(vars_, dst.strides)))
    loads = (Load(src.id, src.dtype, load_offset),)
    stores = (Store(dst.id, dst.dtype, store_offset, ELoad(0), value, False),)
    materialized = {src.value: src, -1: dst}
    return Segment(
        name,
        SchedulerKind.POINTWISE,
        tuple(extents),
        (),
        loads,
        (),
        stores,
        _index_type(tuple(extents), loads, stores, materialized),
        (),
        why,
        buffer_alignments=((src.id, src.alignment), (dst.id, dst.alignment)),
    )


def _segment(
    cf: ConcreteFusion,
    buffers: Buffers,
    requests: list[StoreRequest],
    materialized: dict[int, Buffer],
    split: SplitPolicy,
) -> list[Segment]:
    shared = [r for r in requests if not r.own_kernel]
    groups: list[list[StoreRequest]] = ([shared] if shared else []) + [
        [r] for r in requests if r.own_kernel
    ]
    prefix = cf.fusion.fusion_id[:8]
    for _ in range(len(requests) + 1):
        built = _build_groups(cf, buffers, groups, materialized, split)
        # Order kernels so that each runs after the kernels writing what it reads.
        # A kernel writing an input in place runs after every other kernel that reads that
        # input (they read what was passed in); any other buffer is read after its writer.
        inputs = {b.id for b in buffers.items if b.kind is BufferKind.INPUT}
        writers = {st.buffer: k for k, (_, seg) in enumerate(built) for st in seg.stores}
        sorter: graphlib.TopologicalSorter = graphlib.TopologicalSorter()
        for k, (_, seg) in enumerate(built):
            after = {writers[b] for b in seg.read_buffers - inputs if b in writers}
            sorter.add(k, *(after - {k}))
            for b in seg.read_buffers & inputs:
                if b in writers and writers[b] != k:
                    sorter.add(writers[b], k)
        try:
            order = list(sorter.static_order())
        except graphlib.CycleError as e:
            # Two kernels read each other's stores (an output that is a view of T, and
            # segment_set(T) read back by that output's kernel): the stores the next kernel
            # of the cycle reads leave their group for a kernel of their own; then again.
            cycle = e.args[1]
            groups = [g for g, _ in built]
            # (A step of the cycle may be an in-place writer waiting for a reader: nothing of
            # it is needed there, so only a step that passes some stores but not all splits.)
            for k, after in zip(cycle, cycle[1:]):
                reads = (
                    built[after][1].read_buffers - inputs
                )  # an input is read before it is written
                needed = [r for r in groups[k] if r.buffer in reads]
                if 0 < len(needed) < len(groups[k]):
                    rest = [r for r in groups[k] if r not in needed]
                    groups[k : k + 1] = [needed, rest]
                    break
            else:  # pragma: no cover - a kernel cannot read its own stores
                raise AssertionError(f"kernels {cycle} read each other's stores") from None
            continue
        return [_renamed(built[k][1], f"{prefix}_seg{i}") for i, k in enumerate(order)]
    raise AssertionError(
        "segmentation does not converge: kernels read each other's stores"
    )  # pragma: no cover


def _build_groups(
    cf: ConcreteFusion,
    buffers: Buffers,
    groups: list[list[StoreRequest]],
    materialized: dict[int, Buffer],
    split: SplitPolicy,
) -> list[tuple[list[StoreRequest], Segment]]:
    groups = list(groups)
    built: list[tuple[list[StoreRequest], Segment]] = []
    budget = 4 * (len(cf.fusion.nodes) + sum(len(g) for g in groups)) + 16
    while groups:
        budget -= 1
        if budget < 0:  # pragma: no cover - a bug, never an input's fault
            raise AssertionError(f"segmentation does not converge: {groups}")
        group = groups.pop(0)
        try:
            seg = build_segment(cf, materialized, group, "", buffers.items)
            if normalization.keeps_two_passes(seg):
                seg = replace(seg, scheduler=SchedulerKind.NORMALIZATION)
        except _Materialize as m:
            mine = [r for r in group if r.value == m.value]
            if mine:
                # The value is one this group stores: it becomes a kernel of its own.
                rest = [r for r in group if r.value != m.value]
                groups[:0] = [
                    [StoreRequest(r.value, r.buffer, r.strides, f"{r.why} ({m.why})") for r in mine]
                ]
                if rest:
                    groups.insert(1, rest)
                continue
            if m.value in materialized:  # pragma: no cover - would loop forever
                raise AssertionError(f"T{m.value} is already materialized: {m.why}")
            buf = buffers.add(BufferKind.INTERMEDIATE, cf, m.value)
            materialized[m.value] = buf
            groups.insert(0, group)
            groups.insert(0, [StoreRequest(m.value, buf.id, buf.strides, m.why)])
            continue
        except _SplitByShape as s:
            by_shape: dict[tuple[int, ...], list[StoreRequest]] = {}
            for req in group:
                by_shape.setdefault(cf.shape(req.value), []).append(req)
            parts = list(by_shape.values())
            if len(parts) == 1:  # pragma: no cover - a split always separates shapes
                raise AssertionError(s.why)
            for part in parts:
                groups.append(
                    [StoreRequest(r.value, r.buffer, r.strides, f"{r.why} ({s.why})") for r in part]
                )
            continue
        why = split(seg) if seg.scheduler is SchedulerKind.NORMALIZATION else None
        passes = _first_reductions(seg) if why else []
        if why and not {r.value for r in group} <= set(passes):
            # The first pass over the rows (its reductions) becomes a kernel of its own; the
            # rest is built again, reading their results (and split again while it is a
            # normalization the device cannot run well in one kernel). A group that stores
            # its first pass alone has nothing left to split.
            first = []
            for v in passes:
                mine = [r for r in group if r.value == v]
                first += [
                    StoreRequest(r.value, r.buffer, r.strides, f"{r.why} ({why})") for r in mine
                ]
                if v not in materialized:
                    buf = buffers.add(BufferKind.INTERMEDIATE, cf, v)
                    materialized[v] = buf
                    first.append(StoreRequest(v, buf.id, buf.strides, why))
                elif not mine:  # pragma: no cover - a value in memory is read, not computed
                    raise AssertionError(f"T{v} is in memory but computed by {seg.name}")
            rest = [r for r in group if r.value not in {q.value for q in first}]
            groups[:0] = [first] + ([rest] if rest else [])
            continue
        built.append((group, seg))
    return built


def _accumulators_text(f: Fusion, seg: Segment) -> str:
    """The segment's accumulators, in pass order: `max_exp_sum (T3, T6)` is softmax's max and
    sum in one pass (a reduction's always; a normalization's where its row is read again)."""
    roots = [st.expr for st in seg.stores]
    online = seg.scheduler is SchedulerKind.REDUCTION
    text = "; ".join(
        f"{g.family} ({', '.join(f.name(r.value) for r in g.reduces)})"
        for g in reduction_groups(roots, online)
    )
    paired = not online and any(
        g.family == MAX_EXP_SUM for g in reduction_groups(roots, online=True)
    )
    return text + (" (max and sum in one pass where the row is read again)" if paired else "")


def _first_reductions(seg: Segment) -> list[int]:
    """The reduction results `seg` computes in its first pass over the rows, as fusion
    values: those of every accumulator whose operand reads no reduction result (var_mean's
    var and mean are one; so are softmax's max and its sum of exp(x - max),
    `planning.reductions`)."""
    groups = reduction_groups([st.expr for st in seg.stores], online=True)
    first = sorted({r.value for g in groups if not contains_reduce(g.operand) for r in g.reduces})
    if not first:  # pragma: no cover - a normalization reduces something
        raise AssertionError(f"{seg.name} is a normalization without a reduction")
    return first


def _renamed(seg: Segment, name: str) -> Segment:
    return replace(seg, name=name)


def _read_then_written(seg: Segment, load: Load, store: Store) -> bool:
    """True when each element `load` reads is read only by the iteration point that then
    stores it: the same offset, and a store of one element per point of the whole space.
    A reduced store (one per output, after reading across the reduced extent: other
    threads, or blocks of a split reduction, may still read the element) or a store of a
    smaller value (a broadcast read of it by other points) is not: nvFuser's issue 2664."""
    return load.offset == store.offset and not store.reduced and _numel_of(store, seg) == seg.numel


def _numel_of(store: Store, seg: Segment) -> int:
    """Iteration points the store's offset tells apart (each one an element: the target never
    overlaps itself, see alias.bind_outputs)."""
    used = {atom.k for atom, _ in store.offset.terms if isinstance(atom, Var)}
    if not store.offset.is_affine:
        return -1  # index arithmetic: not proved one element a point
    n = 1
    for k, e in enumerate(seg.extents):
        if k in used:
            n *= e
    return n


def _make_inplace_safe(
    cf: ConcreteFusion, buffers: Buffers, segments: list[Segment], bindings: list[OutputBinding]
) -> list[Segment] | None:
    """In-place outputs whose input is still read elsewhere (or at another index by the
    writing kernel) are written to a temporary and copied in at the end: made safe."""
    unsafe: list[tuple[int, Store]] = []
    for k, seg in enumerate(segments):
        for st in seg.stores:
            if buffers.items[st.buffer].kind is not BufferKind.INPUT:
                continue
            for j, other in enumerate(segments):
                # A gathered read is at data-dependent positions: never safe to overwrite.
                if any(
                    ld.buffer == st.buffer and (j != k or not _read_then_written(seg, ld, st))
                    for ld in other.loads
                ) or any(g.buffer == st.buffer for g in other.gathers):
                    unsafe.append((k, st))
    return [] if not unsafe else [k for k, _ in unsafe]  # type: ignore[return-value]


# Which normalizations become a kernel a pass: why, or None to keep one kernel.
SplitPolicy = Callable[[Segment], "str | None"]


def split_policy(device: DeviceInfo | None) -> SplitPolicy:
    """Those `device` cannot run well as one kernel (`normalization.split_reason`); without a
    device, none."""
    if device is None:
        return lambda seg: None
    return lambda seg: normalization.split_reason(seg, device)


def plan_for(
    fusion: Fusion,
    bound: BoundInputs,
    out: Sequence[TensorSignature | None] = (),
    device: DeviceInfo | None = None,
    split: SplitPolicy | None = None,
    column_partials: bool = True,
) -> Plan:
    """The pipeline, one pass a line: concretize -> alias -> segment. `device`: the GPU the
    plan is for, where a normalization it cannot run well as one kernel is split into a
    kernel a pass; None: every normalization is one kernel. `split` overrides the device's
    choice (the tests split every normalization they can). `column_partials`: a column sum
    whose rows a normalization holds is summed in parts there, on a device
    (planning.column_partials); off for fd.segment, whose kernels are definitions of their
    own."""
    split = split or split_policy(device)
    cf = concretize(fusion, bound)
    if out:
        check_preallocated(cf, bound, out)
    buffers = Buffers()
    bindings, requests, materialized = bind_outputs(cf, bound, buffers, out)
    segments = _segment(cf, buffers, requests, materialized, split)
    if _make_inplace_safe(cf, buffers, segments, bindings):
        # Re-plan with every in-place output written to a temporary, then copied in.
        buffers = Buffers()
        bindings, requests, materialized = bind_outputs(cf, bound, buffers, out)
        copies = []
        for i, req in enumerate(requests):
            target = buffers.items[req.buffer]
            if target.kind is BufferKind.INPUT:
                temp = buffers.add(BufferKind.INTERMEDIATE, cf, req.value)
                requests[i] = StoreRequest(
                    req.value, temp.id, temp.strides, req.why + " (through a temporary)"
                )
                copies.append((temp, target, req.value))
        segments = _segment(cf, buffers, requests, materialized, split)
        for temp, target, value in copies:
            segments.append(
                copy_segment(
                    f"{fusion.fusion_id[:8]}_seg{len(segments)}",
                    temp,
                    target,
                    value,
                    f"copies {fusion.name(value)} into input {fusion.name(target.value)} "
                    "after every read of it",
                )
            )
    if column_partials:
        fused = fuse_column_partials(segments, buffers, device)
        if any(seg.column_partials for seg in fused):
            prefix = fusion.fusion_id[:8]
            segments = [_renamed(seg, f"{prefix}_seg{i}") for i, seg in enumerate(fused)]
    segments = mark_read_again(segments, buffers.items, device)
    host_nodes = tuple(
        n
        for n in fusion.nodes
        if not n.op.is_input
        and n.op not in (OpKind.CONSTANT, OpKind.SIZE)
        and all(isinstance(fusion.values[v], ScalarType) for v in n.outputs)
    )
    fixed = tuple(
        (n.outputs[0], cf.host_scalars[n.outputs[0]])
        for n in fusion.nodes
        if n.op in (OpKind.CONSTANT, OpKind.SIZE)
    )
    return Plan(
        fusion, cf.info, tuple(buffers.items), tuple(segments), tuple(bindings), host_nodes, fixed
    )


def mark_read_again(
    segments: Sequence[Segment], buffers: Sequence[Buffer], device: DeviceInfo | None
) -> list[Segment]:
    """Each segment with `read_again`: the buffers it reads that a later segment reads too,
    where together they fit in half of `device`'s L2 (None: no device, none marked). The
    first kernel of a normalization split into passes reads its rows for the statistics and
    the next reads them again; at 16 MB they can still be in L2 then, unless the first loaded
    them evict-first (H100: rmsnorm bf16 [64, 131072] 27.3 -> 24.9 us, softmax fp32 [64,
    65536] 28.5 -> 26.5, layernorm fp32 [4, 2**20] 33.7 -> 33.0)."""
    marked: list[Segment] = []
    later: frozenset[int] = frozenset()
    for seg in reversed(segments):
        again = seg.read_buffers & later
        fits = (
            device is not None
            and 2 * sum(buffers[b].numel * buffers[b].dtype.itemsize for b in again)
            <= device.l2_bytes
        )
        marked.append(replace(seg, read_again=again) if again and fits else seg)
        later |= seg.read_buffers
    return marked[::-1]


def out_signature(out: Sequence[object] | None) -> tuple[TensorSignature | None, ...]:
    """Signatures of preallocated outputs (None where the caller left one to tunefuse)."""
    if not out:
        return ()
    sigs = []
    for k, o in enumerate(out):
        if o is None:
            sigs.append(None)
            continue
        info = describe_array(o, name=f"out[{k}]")
        sigs.append(
            TensorSignature(
                info.dtype, info.shape, info.strides, alignment_class(info.data_ptr), info.device
            )
        )
    return tuple(sigs)


def make_plan(
    fusion: Fusion,
    inputs: Sequence[object],
    out: Sequence[object] | None = None,
    device: DeviceInfo | None = None,
    column_partials: bool = True,
) -> Plan:
    return plan_for(
        fusion,
        bind_inputs(fusion, inputs, FusionInputs(fusion)),
        out_signature(out),
        device,
        column_partials=column_partials,
    )
