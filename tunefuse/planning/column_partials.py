"""Column sums taken in parts by the normalization that holds the rows (a plan pass).

Layernorm's backward stores dx (a normalization of the rows of [R, C]) and dw, db (sums over
the rows of the same [R, C] values): segmentation gives them a kernel each, and the column
kernel reads dy and x from memory a second time. nvFuser's inner-outer persistent scheduler
and torch.compile both sum the columns inside the kernel that holds each row. Here the
normalization keeps, in each thread's registers, the column sums of the rows its row group
walks (rows g, g + G, g + 2G, ...; G row groups, a grid-stride loop of G / rows_per_block
blocks), and writes them to an fp32 [G, C] intermediate; the column kernel then reduces that
[G, C] (a few MB) instead of [R, C]. The result is the same sum in another order.

The pass needs the device (G comes from its SM count and the registers a held row takes):
without one, plans are left as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tunefuse.device_info import DeviceInfo
from tunefuse.ir.dtypes import DataType
from tunefuse.ir.ops import GroupOp, OpKind
from tunefuse.planning.alias import Buffers
from tunefuse.planning.indexing import Affine, Var, add, scale, var
from tunefuse.planning.kernel_ir import (
    Buffer,
    BufferKind,
    ColumnPartial,
    EConst,
    ELoad,
    EOp,
    EReduce,
    EScalar,
    Expr,
    Load,
    SchedulerKind,
)
from tunefuse.planning.reductions import post_order
from tunefuse.planning.segment import Segment
from tunefuse.schedulers import normalization

# A row group walks at least this many rows, and the partial sums' bytes (written once,
# read once) come to at most PARTIAL_SHARE of the bytes the column kernel would read again
# (its loads that move along the rows and the columns): half, so that fusing saves at least
# as much as it adds. H100, fused against unfused (benchmarks/surface/norm_backward/
# g_sweep_short.jsonl): the two cells past half lost (layernorm bf16 [300000, 16] 38.6 ->
# 44.3 us at 0.79 of the reads saved, [100000, 64] 52.8 -> 57.4 at 0.68); every cell within
# it won (rmsnorm bf16 [300000, 16] 29.8 -> 26.0 at 0.45, layernorm bf16 [70000, 33] 37.0 ->
# 34.1 at 0.36, fp32 [300000, 16] 53.2 -> 38.5 at 0.25).
MIN_ROWS_A_GROUP = 4
PARTIAL_SHARE = 0.5
UNALLOCATED = -1  # a ColumnPartial's buffer before the pass makes it


def fuse_column_partials(
    segments: Sequence[Segment], buffers: Buffers, device: DeviceInfo | None
) -> list[Segment]:
    """Each column reduction whose rows a normalization of the same [R, C] space holds in
    registers becomes partial sums in that normalization and a reduction of the partials,
    run right after it. Everything else is left as it is."""
    out = list(segments)
    if device is None:
        return out
    for column in [seg for seg in out if _is_column_sum(seg)]:
        for k, norm in enumerate(out):
            fused = _fuse(norm, column, buffers, device)
            if fused is not None:
                out.remove(column)
                k = out.index(norm)
                out[k : k + 1] = list(fused)
                break
    return out


def _is_column_sum(seg: Segment) -> bool:
    """A reduction over dim 0 of a 2-d space whose reductions are all floating sums of
    element values (no reduction, gather, guard or index inside)."""
    if (
        seg.scheduler is not SchedulerKind.REDUCTION
        or len(seg.extents) != 2
        or seg.reduce_dims != (0,)
        or seg.gathers
        or seg.column_partials
    ):
        return False
    reduces = [e for st in seg.stores for e in _reduces(st.expr)]
    return bool(reduces) and all(
        e.op is OpKind.SUM and e.dtype.is_floating and _plain(e.operand) for e in reduces
    )


def _reduces(e: Expr) -> list[EReduce]:
    """The reductions `e` reads, in the order post_order meets them."""
    return [x for x in post_order([e]) if isinstance(x, EReduce)]


def _plain(e: Expr) -> bool:
    if isinstance(e, (ELoad, EScalar, EConst)):
        return True
    if isinstance(e, EOp):
        return e.op not in GroupOp.RANDOM and all(_plain(x) for x in e.operands)
    return False


def _fuse(
    norm: Segment, column: Segment, buffers: Buffers, device: DeviceInfo
) -> tuple[Segment, Segment] | None:
    if (
        norm.scheduler is not SchedulerKind.NORMALIZATION
        or norm.extents != column.extents
        or norm.reduce_dims != (1,)
        or norm.column_partials
        or norm.read_buffers & column.stored_buffers
        or column.read_buffers & norm.stored_buffers
    ):
        return None
    # The column kernel's loads and scalars, as the normalization's (each must be there: a
    # load the rows do not hold would be read from memory once more anyway).
    load_of = {}
    for k, ld in enumerate(column.loads):
        if ld in norm.loads:
            load_of[k] = norm.loads.index(ld)
    scalar_of = {}
    for k, sc in enumerate(column.scalars):
        if sc in norm.scalars:
            scalar_of[k] = norm.scalars.index(sc)
    reduces = list(dict.fromkeys(e for st in column.stores for e in _reduces(st.expr)))
    operands = []
    for e in reduces:
        moved = _moved(e.operand, load_of, scalar_of)
        if moved is None:
            return None
        operands.append(moved)
    # The epilogue (what the stores compute from the sums) reads only at the column index.
    for st in column.stores:
        if not (_epilogue_ok(st.expr, column) and _along_columns_only(st.offset, column)):
            return None
    n_out, n_red = norm.extents
    # The partial sums, complete but for their buffers: those are made only once the pass
    # takes them (a declined pass leaves the plan's buffers as they were). The trial segment
    # is asked for its default params and G, which depend on the sums, not on their buffers.
    sums = [
        ColumnPartial(UNALLOCATED, _partial_dtype(e.dtype), op, e.value)
        for e, op in zip(reduces, operands)
    ]
    trial = replace(norm, column_partials=tuple(sums), column_groups=1)
    params = normalization.default_params(trial, device)
    groups = row_groups(trial, device, params)
    trial = replace(trial, column_groups=groups)
    if n_out < MIN_ROWS_A_GROUP * groups or normalization.is_valid(trial, device, params):
        return None
    read_again = n_out * sum(
        ld.dtype.itemsize for ld in column.loads if _moves_along_both(ld.offset, column)
    )
    partial_bytes = 2 * groups * sum(part.dtype.itemsize for part in sums)
    if partial_bytes > PARTIAL_SHARE * read_again:
        return None
    partials = []
    for part in sums:
        buf = Buffer(
            len(buffers.items),
            BufferKind.INTERMEDIATE,
            part.dtype,
            (groups, n_red),
            (n_red, 1),
            part.value,
        )
        buffers.items.append(buf)
        partials.append(replace(part, buffer=buf.id))
    fused_norm = replace(
        norm,
        column_partials=tuple(partials),
        column_groups=groups,
        why=f"{norm.why}; sums {', '.join(f'T{e.value}' for e in reduces)} over its rows in "
        f"{groups} row groups",
    )
    return fused_norm, _partials_reduction(column, reduces, partials, groups)


def _partial_dtype(dtype: DataType) -> DataType:
    return DataType.Double if dtype is DataType.Double else DataType.Float


def _moved(e: Expr, load_of: dict[int, int], scalar_of: dict[int, int]) -> Expr | None:
    """`e` of the column kernel as the normalization's expression; None where it reads a load
    or scalar the normalization does not have."""
    if isinstance(e, ELoad):
        return ELoad(load_of[e.load]) if e.load in load_of else None
    if isinstance(e, EScalar):
        return EScalar(scalar_of[e.arg]) if e.arg in scalar_of else None
    if isinstance(e, EConst):
        return e
    if isinstance(e, EOp):
        operands = [_moved(x, load_of, scalar_of) for x in e.operands]
        if any(x is None for x in operands):
            return None
        return replace(e, operands=tuple(operands))  # type: ignore[arg-type]
    return None


def _epilogue_ok(e: Expr, column: Segment) -> bool:
    """Outside its sums, a store reads nothing that moves along the rows (dim 0)."""
    if isinstance(e, EReduce):
        return True
    if isinstance(e, ELoad):
        return _along_columns_only(column.loads[e.load].offset, column)
    if isinstance(e, (EScalar, EConst)):
        return True
    if isinstance(e, EOp):
        return all(_epilogue_ok(x, column) for x in e.operands)
    return False


def _moves_along_both(offset: Affine, column: Segment) -> bool:
    rows, cols = column.extents
    return (
        offset.is_affine and bool(offset.coeff(Var(0, rows))) and bool(offset.coeff(Var(1, cols)))
    )


def _along_columns_only(offset: Affine, column: Segment) -> bool:
    return offset.is_affine and offset.coeff(Var(0, column.extents[0])) == 0


def _partials_reduction(
    column: Segment,
    reduces: list[EReduce],
    partials: list[ColumnPartial],
    groups: int,
) -> Segment:
    """The column kernel over [groups, C]: each sum reads its partials; the stores and their
    epilogue are the column kernel's (they read and write at the column index only, which
    the smaller space keeps)."""
    n_red = column.extents[1]
    offset = add(scale(var(Var(0, groups)), n_red), var(Var(1, n_red)))
    loads = list(column.loads)
    partial_load = {}
    for e, part in zip(reduces, partials):
        loads.append(Load(part.buffer, part.dtype, offset))
        partial_load[e] = len(loads) - 1

    def rewrite(e: Expr) -> Expr:
        if isinstance(e, EReduce):
            return replace(e, operand=ELoad(partial_load[e]))
        if isinstance(e, EOp):
            return replace(e, operands=tuple(rewrite(x) for x in e.operands))
        return e

    stores = [replace(st, expr=rewrite(st.expr)) for st in column.stores]
    keep = sorted(_used_loads(stores))
    renumber = {k: i for i, k in enumerate(keep)}

    def renumbered(e: Expr) -> Expr:
        if isinstance(e, ELoad):
            return ELoad(renumber[e.load])
        if isinstance(e, EReduce):
            return replace(e, operand=renumbered(e.operand))
        if isinstance(e, EOp):
            return replace(e, operands=tuple(renumbered(x) for x in e.operands))
        return e

    new_loads = tuple(loads[k] for k in keep)
    new_stores = tuple(replace(st, expr=renumbered(st.expr)) for st in stores)
    alignments = dict(column.buffer_alignments)
    for part in partials:
        alignments[part.buffer] = 16
    touched = {ld.buffer for ld in new_loads} | {st.buffer for st in new_stores}
    return replace(
        column,
        extents=(groups, n_red),
        loads=new_loads,
        stores=new_stores,
        buffer_alignments=tuple(sorted((b, a) for b, a in alignments.items() if b in touched)),
        values=tuple(sorted({st.value for st in new_stores} | {e.value for e in reduces})),
        why=f"{column.why}; sums the row groups' partial sums",
        read_again=frozenset(),
    )


def _used_loads(stores) -> set[int]:  # noqa: ANN001
    return {e.load for e in post_order([st.expr for st in stores]) if isinstance(e, ELoad)}


def row_groups(segment: Segment, device: DeviceInfo, params: object) -> int:
    """G: as many row groups as the fused kernel's blocks resident on every SM at once (one
    wave: a block a group of rows, so a second wave would double the time of its rows),
    times rows_per_block (`normalization.partial_blocks_resident`: from the registers a
    thread takes and the shared memory partial sums kept there take)."""
    resident = normalization.partial_blocks_resident(segment, device, params)  # type: ignore[arg-type]
    return device.sm_count * resident * params.rows_per_block  # type: ignore[attr-defined]
