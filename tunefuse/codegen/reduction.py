"""CUDA for reduction and normalization segments.

One loop over output rows; for each row, one phase per accumulator (in dependency order:
softmax's sum needs its max, unless the row is read from memory each pass, where the two are
one running max-and-sum, MAX_EXP_SUM), each phase a strided loop of the row's threads followed
by a block reduction (warp shuffles, then shared memory); then the row's results are stored,
and for a normalization the full-size outputs are computed from the reduced values. With
the row cached in registers, a costly element value that one phase computes and a later one
needs (softmax's exp(x - max)) is kept there too, computed once. With `evict_first`, loads
of data read once are evict-first. A load behind a pad/cat guard is read only inside its
branch (codegen/guards.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from tunefuse.codegen import staged_rows
from tunefuse.codegen.expr import (
    ExprRenderer,
    KernelArg,
    index_ctype,
    kernel_opening,
    literal,
    load_text,
    moves_with_every_dim,
    render_affine,
    unravel_lines,
)
from tunefuse.codegen.guards import guarded_loads
from tunefuse.ir.dtypes import DataType
from tunefuse.ir.ops import GroupOp, OpKind
from tunefuse.planning.indexing import Var
from tunefuse.planning.kernel_ir import (
    EConst,
    EGather,
    ELoad,
    EOp,
    EReduce,
    EScalar,
    Expr,
    children,
)
from tunefuse.planning.reductions import FAMILY, MAX_EXP_SUM, contains_reduce, post_order
from tunefuse.planning.segment import Segment
from tunefuse.schedulers.common import MAX_VECTOR_BYTES, coeff, vector_fits
from tunefuse.schedulers.normalization import (
    partial_shared_bytes,
    partial_shared_offsets,
    partials_in_shared,
    peeled_edge_slots,
    prefetched_row_loads,
    prefetched_row_scalars,
    same_in_every_row,
    staged_accesses,
    staged_row_elements,
)
from tunefuse.schedulers.phases import phases_reading, segment_groups
from tunefuse.schedulers.reduction import (
    BLOCK_ROW_BYTES,
    WARP,
    column_share,
    lane_elements,
    peeled_accesses,
    peels,
    sizes,
    widest_load,
)

# A peeled row's head and tail elements (`peel_bounds`): fewer than 2 vectors.
EDGE_ELEMENTS = "(int)((pa - pr) + (pe - pb))"


@dataclass
class _Accumulator:
    family: str  # sum, prod, max, min, welford, max_exp_sum (planning.reductions)
    operand: Expr
    ctype: DataType
    correction: int
    index: int | str
    reduces: Sequence[EReduce]


@dataclass(frozen=True)
class _StepGroup:
    """`steps` chunks of the strided loop taken a trip (element_loop): open(indent) before
    them, body(indent, cached, in_vector) for each lane of each (u: the chunk's place),
    close(indent) after them."""

    steps: int
    open: object
    body: object
    close: object


# Element ops worth a register a cached element to compute once rather than in two passes.
_COSTLY = frozenset(
    {
        OpKind.EXP,
        OpKind.EXP2,
        OpKind.EXPM1,
        OpKind.LOG,
        OpKind.LOG2,
        OpKind.LOG1P,
        OpKind.SQRT,
        OpKind.RSQRT,
        OpKind.SIN,
        OpKind.COS,
        OpKind.TAN,
        OpKind.TANH,
        OpKind.SIGMOID,
        OpKind.SILU,
        OpKind.GELU,
        OpKind.ERF,
        OpKind.ERFC,
        OpKind.POW,
        OpKind.ATAN2,
        OpKind.DIV,
        OpKind.TRUEDIV,
        OpKind.FMOD,
        OpKind.REMAINDER,
    }
)
MAX_KEPT_VALUES = 2  # arrays of ept registers each, on top of the cached row
# The shared arrays the trees of every lane's totals may take in a kernel
# (`lanes_block_reduce`): at most this many bytes a block and LANE_BATCH_THREAD_BYTES a thread
# (2048 threads an SM: 128 KB of its shared memory at most, blocks an SM unchanged); past
# them a lane's totals go through `block_reduce` one lane after another.
LANE_BATCH_SHARED_BYTES = 8 * 1024
LANE_BATCH_THREAD_BYTES = 64


def _is_costly(e: Expr) -> bool:
    return isinstance(e, EOp) and e.op in _COSTLY


def _children(e: Expr) -> tuple[Expr, ...]:
    """The operands a value of the current element is computed from; a reduction's result and
    a guard (its branches run under a condition) are leaves here."""
    if isinstance(e, EGather):
        return (e.index,)
    return e.operands if isinstance(e, EOp) else ()


def accumulators(segment: Segment, online: bool) -> list[_Accumulator]:
    """Distinct accumulators, operands before their users (post-order); `online`: a max and
    the sum of exp(x - max) as one (MAX_EXP_SUM), where the row is read again each pass."""
    accs: list[_Accumulator] = []
    for group in segment_groups(segment, online):
        r, family = group.reduces[0], group.family
        ctype = (
            r.dtype.compute
            if r.dtype.is_floating
            else (DataType.Int if family in ("sum", "prod") else r.dtype)
        )
        accs.append(
            _Accumulator(family, group.operand, ctype, r.correction, len(accs), group.reduces)
        )
    return accs


def exp_sum_terms(segment: Segment) -> frozenset[int]:
    """The exps (by id) of a sum of exp(x - max) over x's max (a MAX_EXP_SUM pair) that
    nothing but that sum reads. The two-pass form spells them as the one-pass form spells
    its terms (tf_exp_sum_term), so a row's sum does not depend on which form the params
    chose; an exp the outputs read too (softmax's) keeps its own spelling."""
    roots = [st.expr for st in segment.stores]
    terms = [
        r.operand
        for g in segment_groups(segment, online=True)
        if g.family == MAX_EXP_SUM
        for r in g.reduces
        if FAMILY[r.op] == "sum"
    ]
    if not terms:
        return frozenset()
    read_elsewhere = roots + [
        x
        for e in post_order(roots)
        if not (isinstance(e, EReduce) and FAMILY[e.op] == "sum")
        for x in children(e)
    ]
    return frozenset(
        id(t)
        for t in terms
        if not any(x is t or (type(x) is type(t) and x == t) for x in read_elsewhere)
    )


# The fields of an accumulator held in a struct (its partials are stored field by field).
_STRUCT_FIELDS = {"welford": ("mean", "m2", "n"), MAX_EXP_SUM: ("max", "sum")}
_STRUCT = {"welford": "TfWelford", MAX_EXP_SUM: "TfMaxExpSum"}


def _fields(acc: _Accumulator) -> tuple[str | None, ...]:
    """The accumulator's fields, or (None,) for a plain value."""
    return _STRUCT_FIELDS.get(acc.family, (None,))


def _struct_of(acc: _Accumulator, parts: Sequence[str]) -> str:
    """An accumulator value built from its fields' values (in _fields order)."""
    if acc.family in _STRUCT:
        return f"{_acc_type(acc)}{{{', '.join(parts)}}}"
    (part,) = parts
    return part


def per_element(total: str, ctype: str, count: str = "n_red") -> str:
    """`total` over `count` elements (a mean, a variance) as a product with the count's
    reciprocal: the reciprocal does not change from row to row, so the compiler computes it
    once, outside the row loop, where a division a row cost an IEEE divide's slow-path branch
    on each row's critical path. Within an ulp of the quotient; exact where the count is a
    power of two. Judged alone it was neutral (H200, 0.999 over 35 cells); it holds a register
    across the row loop, which a kernel at its register cap spills (8 bytes of stack in 6 of
    83 judged cells: `benchmarks/surface/widened_rows_2026-11-29/`)."""
    return f"({total} * (({ctype})1 / ({ctype}){count}))"


def _init(acc: _Accumulator) -> str:
    t = acc.ctype
    if acc.family == "sum":
        return literal(0, t)
    if acc.family == "prod":
        return literal(1, t)
    if acc.family == "welford":
        return f"TfWelford<{t.cuda}>{{0, 0, 0}}"
    if acc.family == MAX_EXP_SUM:
        return f"TfMaxExpSum<{t.cuda}>{{-{literal(float('inf'), t)}, 0}}"
    big = {DataType.Int: "9223372036854775807LL", DataType.Int32: "2147483647"}
    if t.is_floating:
        inf = literal(float("inf"), t)
        return f"-{inf}" if acc.family == "max" else inf
    if t.is_bool:
        return "false" if acc.family == "max" else "true"
    return f"(-{big[t]} - 1)" if acc.family == "max" else big[t]


def _combine(acc: _Accumulator, a: str, b: str) -> str:
    t = acc.ctype.cuda
    return {
        "sum": f"({a} + {b})",
        "prod": f"({a} * {b})",
        "max": f"tf_max<{t}>({a}, {b})",
        "min": f"tf_min<{t}>({a}, {b})",
        "welford": f"tf_welford_merge<{t}>({a}, {b})",
        MAX_EXP_SUM: f"tf_max_exp_sum_merge<{t}>({a}, {b})",
    }[acc.family]


def _acc_type(acc: _Accumulator) -> str:
    return f"{_STRUCT[acc.family]}<{acc.ctype.cuda}>" if acc.family in _STRUCT else acc.ctype.cuda


def partial_fields(segment: Segment) -> list[tuple[int, str | None, DataType]]:
    """A split reduction's partial values, in workspace order: (accumulator, field or None,
    type). (Only the reduction scheduler splits, and it reads each row once a pass: online.)"""
    fields: list[tuple[int, str | None, DataType]] = []
    for acc in accumulators(segment, online=True):
        for field in _fields(acc):
            fields.append((int(acc.index), field, acc.ctype))
    return fields


def _partial_name(acc_index: int, field: str | None) -> str:
    return f"tf_part{acc_index}" + (f"_{field}" if field else "")


# A lane of fewer than this many groups of `unroll` chunks takes its strided loop as whole
# groups then one tail group (`_Emitter.whole_groups_then_tail`); a longer one keeps nvcc's
# unrolled loop, whose leftover trips are a small share of its work. H200, judge.py, old code
# against new (benchmarks/surface/split_one_block_2026-11-28/):
# - the tail group everywhere (`judged_cg28_h200_summary.txt`, 30 cells): short lanes gained
#   (middle bf16 [15651, 6896, 1], 3.4 chunks a lane, 63.9 -> 59.0 us; col fp32 [240, 14180]
#   10.3 -> 9.0; middle fp32 [16531, 38, 5] 10.0 -> 9.3), long ones tied but for column sums
#   bf16 [16384, 8192], 512 chunks a lane, 89.0 -> 105.4 (as in the fifty-first session's try);
# - under 4 groups (`judged_cg28b_h200_summary.txt`, 28 cells of fresh seeds 501-502 whose
#   kernels it changes): strided columns gained (middle bf16 [390660, 11, 19] 81.2 -> 67.7,
#   torch.compile 67.7; middle fp32 [495, 28, 286] 11.0 -> 10.0; col bf16 [41, 118381] 9.0 ->
#   8.2), and so did unpeeled rows, but peeled rows lost at 256 MB (row fp32 [9480, 5098] 56.7
#   -> 63.6, logsumexp fp32 [72981, 754] 61.1 -> 66.6, row bf16 [12391, 9378] 76.5 -> 80.2):
#   peeled rows keep nvcc's loop;
# - under 4 groups, unpeeled (`judged_cg28c_h200_summary.txt`, 28 cells of fresh seeds 503-505
#   and 3 controls): geomean 0.958; middle bf16 [22093, 15, 21] 12.6 -> 10.1, row bf16 [120782,
#   584] 46.4 -> 39.2, middle fp32 [575, 3631, 2] 11.3 -> 9.9; but a running max-and-sum of
#   exp (logsumexp) lost 4-5% on 3 of 5 cells (fp32 [20968, 3036] 73.7 -> 77.1, [858854, 66]
#   123.1 -> 128.3): its exps, not its loads, bound it, so it keeps nvcc's loop (its kernels
#   are the old code again, but for the version comment; fitted to these cells, not judged
#   again).
TAIL_GROUP_TRIPS = 4


def adjacent_lane_rows(segment: Segment, p: object, persistent: bool) -> bool:
    """Whether a lane's rows (rows a lane) are consecutive rows of the tile, not
    `rows_per_block` apart: in a strided reduction of one thread a column (no vector along
    the outputs) whose widest load leaves a warp's load of one row each under a line
    (BLOCK_ROW_BYTES), its rows spanning at most ADJACENT_LANE_BYTES. Apart, each such load
    is one request for part of a line; adjacent, a warp's first load of a row spans whole
    lines and the L1 serves the lane's next rows (as torch.compile's pointwise kernels read,
    8 outputs a thread). ncu, H200, middle bf16 [200000, 2, 171], 4 rows a lane apart:
    memory pipes 66% busy, L1 hits 37%, 2.75 TB/s; torch.compile's kernel 18%, 83%, 3.8
    TB/s. judge.py (`benchmarks/surface/one_group_columns_2026-11-28/`), all such loads
    adjacent, 24 columns of rows a lane: geomean 0.935 of the time apart (bf16 [74011, 7,
    109] 51.8 -> 45.0 us), fp32 within 2% (its warp's load is a line already); 20 fresh bf16
    cells (2 and 4 rows a lane): 0.924, none slower (bf16 [25694, 7, 341] 58.2 -> 49.0;
    torch.compile 45.6)."""
    return (
        getattr(p, "rows_per_lane", 1) > 1
        and getattr(p, "vector", 1) == 1
        and not persistent
        and not getattr(p, "inner", True)
        and getattr(p, "threads_r", 1) == 1
        and WARP * widest_load(segment) < BLOCK_ROW_BYTES
        and getattr(p, "rows_per_lane", 1) * widest_load(segment) <= ADJACENT_LANE_BYTES
    )


def lane_store_widths(segment: Segment, lane_rows: int, adjacent: bool) -> dict[int, int]:
    """The reduced stores a lane writes a vector of its adjacent rows' outputs at a time
    (`adjacent_lane_rows`), by store index: the vector's elements, at most 16 bytes (a lane's
    `lane_rows` outputs in one or more such stores). A store qualifies where a lane's rows
    are consecutive addresses of it, aligned to the vector at the lane's first row (a
    multiple of `lane_rows`): its offset is the row index itself plus a constant (row-major
    over the dims the rows walk), or unit stride along the innermost of those dims and that
    dim divisible by `lane_rows` (a lane's rows never straddle two); its constant, its other
    strides and its pointer aligned to the vector. Stored a row at a time, a warp's store of
    its lanes' q-th outputs spans WARP x `lane_rows` x its size bytes, and where that is more
    than a line each of its `lane_rows` stores writes part of several lines (var_mean0 bf16
    [3, 11613671], fp32 outputs of 4 rows a lane: 16 scalar STG a lane, 114.5 us against
    torch.compile's 47.0; as vectors 45.7). Within a line (2 bf16 rows a lane) a row's store
    is one request already: judged (H200, `benchmarks/surface/lane_stores_2026-11-29/`), the
    vectors lost there (middle bf16 [560891, 4, 9] 20.6 -> 22.8 us), so such stores stay."""
    if not adjacent:
        return {}
    extents = segment.extents
    walked = [j for j in range(len(extents)) if j not in segment.reduce_dims and extents[j] != 1]
    if not walked:
        return {}
    unit = walked[-1]

    def consecutive_dims(offset) -> tuple[int, ...] | None:  # noqa: ANN001
        """The dims a lane's rows run through at consecutive addresses: every walked dim
        where the offset is row-major over them, the innermost alone where a lane's rows
        never leave it; None where they are not consecutive."""
        stride = 1
        for j in reversed(walked):
            if coeff(offset, segment, j) != stride:
                break
            stride *= extents[j]
        else:
            return tuple(walked)
        if coeff(offset, segment, unit) == 1 and extents[unit] % lane_rows == 0:
            return (unit,)
        return None

    widths = {}
    for k, st in enumerate(segment.stores):
        if not st.reduced or not st.offset.is_affine:
            continue
        width = min(lane_rows, MAX_VECTOR_BYTES // st.dtype.itemsize)
        if (
            width < 2
            or lane_rows % width
            or WARP * lane_rows * st.dtype.itemsize <= BLOCK_ROW_BYTES
        ):
            continue
        dims = consecutive_dims(st.offset)
        if dims is not None and vector_fits(segment, st.offset, st.dtype, st.buffer, dims, width):
            widths[k] = width
    return widths


# A lane's adjacent rows span at most this many bytes of each load. H200, ab.py, middle bf16
# [392166, 3, 63]: 4 rows a lane adjacent 69.4 us, 2 rows 67.4, 8 rows 141.3 (apart, 8 rows
# had been the fastest of 2, 4 and 8 on [44410, 3, 665]); [118765, 3, 267] 87.1, 83.7, 177.4.
# The defaults take at most 4 bf16 rows a lane; the tuner's 8 stay apart.
ADJACENT_LANE_BYTES = 8


class _Emitter:
    def __init__(
        self,
        segment: Segment,
        name: str,
        args: list[KernelArg],
        p,  # noqa: ANN001
        persistent: bool,
        min_blocks: int = 0,
    ) -> None:
        self.s = segment
        self.min_blocks = min_blocks  # blocks an SM the launch bounds ask for (kernel_opening)
        self.name = name
        self.args = args
        self.p = p
        self.persistent = persistent
        self.itype = index_ctype(segment)
        self.red = [j for j in range(len(segment.extents)) if j in segment.reduce_dims]
        self.outer = [j for j in range(len(segment.extents)) if j not in segment.reduce_dims]
        # Rows a lane: a lane takes `lane_rows` rows of a tile, `rows_per_block` rows apart (a
        # warp's loads stay coalesced; or adjacent, `adjacent_lane_rows`), and loads every
        # row-moving input of all of them into registers before computing any: their loads are
        # in flight together where a row of a few bytes would leave a lane one small load at a
        # time (memory-level parallelism).
        self.lane_rows = getattr(p, "rows_per_lane", 1)
        self.adjacent_rows = adjacent_lane_rows(segment, p, persistent)
        # Reduced outputs kept a lane (vq<k>) and written a vector of its rows at a time
        # after its last row (`lane_vector_stores`).
        self.lane_stores = lane_store_widths(segment, self.lane_rows, self.adjacent_rows)
        self.cache = (persistent and getattr(p, "cache_row", False)) or self.lane_rows > 1
        # The row staged in shared memory: the first phase that reads an input writes its
        # elements there (sl<k>), later phases read them back; each thread reads only what it
        # wrote itself, so the phases need no barrier of their own.
        self.shared = persistent and not self.cache and getattr(p, "shared_row", False)
        # A row read from memory each pass takes softmax's max and sum in one (MAX_EXP_SUM);
        # a row on chip keeps the two passes, the second's exp(x - max) kept for the outputs.
        self.online = not (self.cache or self.shared)
        self.accs = accumulators(segment, self.online)
        self.sum_terms = exp_sum_terms(segment)
        self.ept = getattr(p, "elements_per_thread", None) or (
            lane_elements(segment, p) if self.lane_rows > 1 else 1
        )
        # Registers a held input takes a thread: its elements, times the lanes of a vector
        # along the outputs (set below).
        self.slots = self.ept
        self.vec = getattr(p, "vector", 1)
        last = len(segment.extents) - 1
        # A vector along the outputs (the innermost dim is not reduced): a lane reduces `vec`
        # consecutive outputs at once, an accumulator each (acc<i>_v[v]), reading each of
        # their unit-stride inputs with one vector load a reduced element. A normalization
        # keeps each pass's totals a lane (red<i>_<k>_v[v]) for the passes after it, its
        # held elements [element][lane] (cl<k>[c * vec + v]), and stores its full-size
        # outputs a vector at a time.
        self.along_outputs = self.vec > 1 and last not in segment.reduce_dims
        self.lane_totals = self.along_outputs and persistent
        assert not (
            self.lane_totals and (getattr(p, "shared_row", False) or getattr(p, "cluster", 1) > 1)
        ), (
            "a vector along the outputs: rows in registers or read again "
            "(schedulers.normalization.is_valid)"
        )
        assert self.lane_rows == 1 or not (
            self.lane_totals or self.shared or getattr(p, "split", 1) > 1
        ), "rows a lane: rows in registers, unsplit (schedulers.reduction.is_valid)"
        self.step = 1 if self.along_outputs else self.vec  # reduced elements a lane reads a step
        if self.along_outputs:
            if self.lane_rows > 1:
                # A lane's share of each of its `vec` columns, every element of it.
                self.ept = column_share(segment, p)
            self.slots = self.ept * self.vec
        # Loads behind a pad/cat guard are read inside their branch, a lane at a time: never
        # vector-loaded or cached ahead of the branch that decides whether they are in range.
        self.guarded = guarded_loads(
            [acc.operand for acc in self.accs] + [st.expr for st in segment.stores]
        )
        self.vec_loads = {
            k
            for k, ld in enumerate(segment.loads)
            if self.vec > 1
            and ld.offset.is_affine
            and k not in self.guarded
            and ld.offset.coeff(Var(last, segment.extents[last])) == 1
        }
        self.vec_stores = {
            k
            for k, st in enumerate(segment.stores)
            if self.vec > 1
            and (self.along_outputs or not st.reduced)
            and st.offset.is_affine
            and st.offset.coeff(Var(last, segment.extents[last])) == 1
        }
        self.last = last
        self.unroll = getattr(p, "unroll", 1)
        self.split = 1 if persistent else getattr(p, "split", 1)
        # A row over a cluster of blocks (sm_90): block `tf_rank` of the cluster holds the
        # row's share r_begin..r_end in registers, and each block total is combined with the
        # other blocks' through distributed shared memory (`cluster_reduce`).
        self.cluster = getattr(p, "cluster", 1) if persistent else 1
        assert not segment.column_partials or (
            persistent
            and self.cache
            and self.lane_rows == 1
            and self.cluster == 1
            and not self.along_outputs
        ), "column sums in parts: rows held one a lane (schedulers.normalization.is_valid)"
        self.shared_partials = persistent and partials_in_shared(segment, p)
        assert self.cluster == 1 or (self.cache and self.lane_rows == 1), (
            "a row over a cluster is held in registers, one row a lane (schedulers.normalization)"
        )
        # Peeled rows (`schedulers.reduction.peeled_accesses`): the strided loop reads a row
        # by vectors at aligned addresses only, from the first such element of the row (its
        # lead load's) to the last whole vector; the head before and the tail after it are
        # read an element a lane (`peeled_edges`). Only the loads and full-size stores lying
        # where the lead does are read and written by vectors; the others an element a lane.
        self.peel = peels(segment, self.vec) and not self.along_outputs
        self.peel_lead = -1
        self.edge = False  # emitting a peeled row's head or tail: no vector, no chunk
        if self.peel:
            assert self.cluster == 1 and self.lane_rows == 1 and not segment.column_partials, (
                "a peeled row: no cluster, one row a lane, no column sums in parts "
                "(schedulers.normalization.is_valid)"
            )
            peeled = peeled_accesses(segment, self.vec)
            assert peeled is not None, "peels only where peeled_accesses allows"
            self.peel_lead = peeled.lead
            self.vec_loads &= peeled.loads
            self.vec_stores &= peeled.stores
            if self.cache:  # the row's head and tail in registers of their own
                self.slots += peeled_edge_slots(p.threads_r, self.vec)
        self.divided_by = self.reductions_used_as_divisors()
        self.lines: list[str] = []
        self.lane_batch_bytes = 0  # the shared arrays of `lanes_block_reduce` so far
        self.counter = [0]
        passes = phases_reading(segment, self.online)
        # A normalization whose rows neither registers nor shared memory hold reads them from
        # memory again each pass, hoping for L2 hits. With evict_first (where the scheduler
        # finds the re-reads fit the L2: `schedulers.normalization.protects_rereads`), its
        # output pass, the rows' last read, and its full-size stores are evict-first, so that
        # neither pushes out of L2 the rows other blocks have yet to read again.
        self.rereads = persistent and not self.cache and not self.shared and p.evict_first
        self.streamed = {
            k
            for k in range(len(segment.loads))
            if p.evict_first
            and moves_with_every_dim(segment, k)
            and (self.cache or self.shared or passes.get(k, 0) <= 1)
        }
        # With the row cached, an input lives in registers across the phases only when more
        # than one phase reads it; one read in a single phase (a norm's weight, read by the
        # output phase alone) is loaded where it is used: fewer registers, more rows in flight;
        # unless `hoist_invariants` holds it from before the row loop (`one_row_invariants`).
        # With rows a lane, every input is loaded ahead (the point of the layout); one that no
        # row moves (a weight) once a lane, before the row loop (`hoisted_loads`). Judged
        # (codegen 31; H200, judge.py, `benchmarks/surface/short_pairs_2026-11-29/
        # judged_hoist_summary.txt`) on the 10 of 1023 drawn cells it changes and 5 more with
        # rows a lane by default: geomean 0.917 of the old time, none slower (0.84-0.998):
        # layernorm bf16 [81442, 103] 22.2 -> 18.8 us, [721600, 186] 190.5 -> 172.4, rmsnorm
        # bf16 [2796203, 3] 18.9 -> 17.2.
        one_row_invariants = self.one_row_invariants()
        self.cached_loads = [
            k
            for k, ld in enumerate(segment.loads)
            if (self.cache or self.shared)
            and (passes.get(k, 0) > 1 or self.lane_rows > 1 or k in one_row_invariants)
            and k not in self.guarded
            and (
                not ld.offset.is_affine
                or any(ld.offset.coeff(Var(j, segment.extents[j])) for j in self.red)
            )
        ]
        self.staged: set[int] = set()  # cached loads a shared row holds already
        self.phase = 0  # the pass being emitted: accumulator position, len(accs) for the outputs
        # A row over a cluster holds as many elements a thread as registers allow already:
        # kept values would double its registers and halve the blocks an SM runs; its exps
        # are computed again instead.
        self.kept_values = (
            self.values_kept_across_passes() if self.cache and self.cluster == 1 else {}
        )
        self.hoisted = self.hoisted_loads()
        self.widened = self.widened_loads()
        # A kernel taking column sums in parts reads its next row's share ahead (nx<k>), where
        # it is one vector an input (schedulers.normalization.prefetched_row_loads).
        ahead = prefetched_row_loads(segment, self.ept) if self.cache else []
        filled = self.filled_loads(False) if self.cache else []
        self.prefetch = (
            ahead
            if ahead and sorted(ahead) == sorted(filled) and set(ahead) <= self.vec_loads
            else []
        )
        self.prefetch_scalars = (
            [k for k in prefetched_row_scalars(segment, self.ept) if k not in self.guarded]
            if self.prefetch
            else []
        )
        # Rows staged through shared memory (`codegen.staged_rows`): the held loads and the
        # full-size stores `staged_accesses` allows.
        self.stage_in: list[staged_rows.StagedAccess] = []
        self.stage_out: list[staged_rows.StagedAccess] = []
        if persistent and getattr(p, "stage_rows", False):
            assert (
                self.cache
                and p.inner
                and self.lane_rows == 1
                and self.cluster == 1
                and not self.peel
                and not self.prefetch
                and not segment.column_partials
            ), "staged rows: held, one a lane, unpeeled (schedulers.normalization.is_valid)"
            loads, stores = staged_accesses(segment)
            self.stage_in = [
                staged_rows.staged(
                    "L",
                    k,
                    segment.loads[k],
                    self.vec if k in self.vec_loads else 1,
                    k in self.streamed,
                )
                for k in self.filled_loads(False)
                if k in loads and k not in self.guarded
            ]
            self.stage_out = [
                staged_rows.staged(
                    "S", k, segment.stores[k], self.vec if k in self.vec_stores else 1
                )
                for k in sorted(stores)
            ]
        self.staged_in = {a.k for a in self.stage_in}
        self.staged_out = {a.k for a in self.stage_out}

    def values_kept_across_passes(self) -> dict[Expr, tuple[int, int]]:
        """Costly element values (an exp, a division...) that one accumulator's pass computes
        and a later pass computes again -> (register array, the pass that fills it). With the
        row in registers, softmax's exp(x - max) is summed by one pass and divided by the sum
        in the output pass: kept, it is computed once an element instead of twice. At most
        MAX_KEPT_VALUES arrays, so that the registers stay a few; Welford passes not."""
        # An accumulator's pass is its run's (`pass_groups`): the position of the run's first.
        pass_at = {acc.index: self.accs.index(run[0]) for run in self.pass_groups() for acc in run}
        first: dict[Expr, int] = {}
        for acc in self.accs:
            pos = pass_at[acc.index]
            if acc.family == "welford":
                continue
            stack = [acc.operand]
            while stack:
                e = stack.pop()
                if _is_costly(e):
                    first.setdefault(e, pos)
                stack.extend(_children(e))
        kept: dict[Expr, tuple[int, int]] = {}
        later = [(pass_at[acc.index], acc.operand) for acc in self.accs if acc.family != "welford"]
        later += [(len(self.accs), st.expr) for st in self.s.stores if not st.reduced]
        for pos, root in later:
            stack = [root]
            while stack:
                e = stack.pop()
                if (
                    _is_costly(e) and e in first and first[e] < pos
                ):  # outermost reuse: its operands are not needed
                    if e not in kept and len(kept) < MAX_KEPT_VALUES:
                        kept[e] = (len(kept), first[e])
                    continue
                stack.extend(_children(e))
        return kept

    def reductions_used_as_divisors(self) -> dict[tuple[int, int], DataType]:
        """(accumulator, reduce) -> the floating compute type of the divisions by it."""
        found: dict[tuple[int, int], DataType] = {}
        for e in post_order([st.expr for st in self.s.stores]):
            if (
                isinstance(e, EOp)
                and e.op in (OpKind.DIV, OpKind.TRUEDIV)
                and e.operand_dtype.compute.is_floating
            ):
                for acc in self.accs:
                    for k, r in enumerate(acc.reduces):
                        if r is e.operands[1] or r == e.operands[1]:
                            found[(acc.index, k)] = e.operand_dtype.compute
        return found

    def w(self, line: str) -> None:
        self.lines.append(line)

    def unravel(self, vars_: list[int], linear: str, indent: str) -> None:
        self.lines += unravel_lines(
            vars_, linear, lambda j: f"E{j}", lambda j: f"i{j}", self.itype, indent
        )

    def var_name(self, in_chunk: bool):  # noqa: ANN201 - the renderer's var naming
        """Inside a chunk of V consecutive elements, the innermost index is the chunk's first
        plus the lane v; every other index is the chunk's."""
        vectorized = in_chunk and self.vec > 1
        return lambda j: f"(i{j} + v)" if vectorized and j == self.last else f"i{j}"

    def offset(self, k: int, in_chunk: bool = False) -> str:
        return render_affine(self.s.loads[k].offset, "L", k, self.var_name(in_chunk), self.itype)

    def load_inline(self, k: int, in_chunk: bool = False) -> str:
        return load_text(self.s.loads[k].buffer, self.offset(k, in_chunk), self.streams(k))

    def streams(self, k: int) -> bool:
        """Whether load k is evict-first where it is emitted now: a load of data read once
        (`streamed`), or, in a kernel that re-reads its rows from memory, the output pass's
        read of them (the last: `rereads`)."""
        last_read = self.rereads and self.phase == len(self.accs)
        return k in self.streamed or (last_read and moves_with_every_dim(self.s, k))

    def renderer(
        self, indent: str, element_cached: bool, in_vector: bool = False, vector_loaded: bool = True
    ) -> ExprRenderer:
        """`in_vector`: inside a vector's lane loop (v); `vector_loaded`: its unit-stride
        inputs were read by vector loads (vl<k>), else each lane loads its own element."""

        def load_form(k: int) -> tuple[str, DataType | None]:
            """Load k's element here, and its type where that is not the load's own."""
            if element_cached and k in self.cached_loads:
                return f"cl{k}[c * {self.vec} + v]", self.held_dtype(k)
            if k in self.prefetch_scalars:
                return f"rs{k}", None
            if in_vector and vector_loaded and k in self.vec_loads:
                if self.widens_by_words(k):
                    return f"tf_b2f_lane(vl{k}, v)", DataType.Float
                return f"vl{k}.v[v]", None
            if in_vector and self.shared and k in self.cached_loads:
                return f"sl{k}[{self.staged_at('r0 + v')}]", None
            return self.load_inline(k, in_vector), None

        def reduce_value(e: EReduce) -> str:
            lane = "_v[v]" if self.lane_totals else ""
            for acc in self.accs:
                for r in acc.reduces:
                    if r is e or r == e:
                        return f"red{acc.index}_{acc.reduces.index(r)}{lane}"
            raise AssertionError("reduce not found")  # pragma: no cover

        r = ExprRenderer(
            self.s,
            lambda k: load_form(k)[0],
            self.var_name(in_vector),
            reduce_value,
            indent=indent,
            prefix="t",
        )
        r.counter = self.counter
        r.reciprocal_of = self.reciprocal_of
        r.load_dtype = lambda k: load_form(k)[1]
        r.sum_terms = self.sum_terms
        if element_cached and self.kept_values:
            phase = self.phase

            def slot(e: Expr, filled_now: bool) -> str | None:
                """The register of `e` where this pass fills it (`filled_now`) or reads what
                an earlier pass filled; None elsewhere."""
                entry = self.kept_values.get(e) if _is_costly(e) else None
                if entry is None:
                    return None
                array, filled_in = entry
                here = filled_in == phase if filled_now else filled_in < phase
                return f"kv{array}[c * {self.vec} + v]" if here else None

            r.kept = lambda e: slot(e, False)
            r.keep = lambda e: slot(e, True)
        return r

    def reciprocal_of(self, divisor: Expr) -> str | None:
        """Dividing every element of a row by that row's reduction (softmax's sum)
        multiplies by a reciprocal computed once a row: a multiply where a division was."""
        for acc in self.accs:
            for k, r in enumerate(acc.reduces):
                if (r is divisor or r == divisor) and (acc.index, k) in self.divided_by:
                    return f"inv{acc.index}_{k}" + ("_v[v]" if self.lane_totals else "")
        return None

    def vector_load(self, k: int, name: str, indent: str) -> None:
        ld = self.s.loads[k]
        vt = f"TfVec<{ld.dtype.cuda}, {self.vec}>"
        self.w(
            f"{indent}const {vt} {name} = {load_text(ld.buffer, self.offset(k), self.streams(k), vt)};"
        )

    def element_loop(
        self,
        body,
        indent: str,
        fill: bool = False,
        chunk_open=None,  # noqa: ANN001
        chunk_close=None,
        reads: Sequence[Expr] = (),
        group=None,  # noqa: ANN001 - a _StepGroup
        hoisted: bool = False,
    ) -> None:  # noqa: ANN001
        """Runs body(indent, cached, in_vector) for each of this thread's elements of the
        current row, in chunks of V consecutive elements: element v of chunk c is
        r = c * (TR * V) + tr * V + v. With the row cached, the chunks are unrolled and the
        elements live in registers (`fill` loads them there); otherwise a strided loop reads
        each chunk with one vector load per unit-stride input, `unroll` chunks in flight.
        chunk_open(indent) and chunk_close(indent) emit code around a chunk's lanes; `reads`
        are the expressions the body computes (their uncached unit-stride inputs are read with
        one vector load a chunk). With a `group` (uncached rows only), the strided loop takes
        `group.steps` chunks a trip, group.body(indent, cached, in_vector) running for each of
        their lanes with `u` the chunk's place in the group, and group.close(indent) after
        them; the trips left over at the row's end run `body` chunk by chunk."""
        tr_n, step, it = self.p.threads_r, self.step, self.itype
        cached = self.cache and not fill
        if self.cache and self.peel:
            self.held_peeled(body, indent, fill, reads, chunk_open, chunk_close)
            return
        if self.cache and fill and not hoisted and not self.p.inner and self.cluster == 1:
            self.clamped_fill(indent)
            return
        if self.cache:
            chunks = self.ept // step
            begin, end = ("r_begin + ", "r_end") if self.cluster > 1 else ("", "n_red")
            row_ok = "" if hoisted else "row_ok && "

            def held_chunks(first: int, last: int, check: bool, ind: str) -> None:
                self.w(f"{ind}#pragma unroll")
                self.w(f"{ind}for (int c = {first}; c < {last}; ++c) {{")
                self.w(
                    f"{ind}  const {it} r0 = {begin}({it})c * {tr_n * step} + ({it})tr * {step};"
                )
                self.w(f"{ind}  if ({row_ok}{f'r0 < {end}' if check else 'true'}) {{")
                if fill:
                    self.fill_chunk(ind + "    ", hoisted)
                else:
                    self.chunk(body, ind + "    ", cached, set(), reads, chunk_open, chunk_close)
                self.w(f"{ind}  }}")
                self.w(f"{ind}}}")

            whole_chunks = getattr(self.p, "whole_chunks", False)
            if not whole_chunks or fill or hoisted or self.cluster > 1 or chunks < 2:
                held_chunks(0, chunks, True, indent)
                return
            # whole_chunks (`normalization.Params`): a row as long as the params' (every
            # chunk but the last within it for every thread) checks its last chunk alone; a
            # shorter one, which the binary also serves, every chunk.
            whole = (chunks - 1) * tr_n * step
            self.w(f"{indent}if (n_red >= {whole}) {{")
            held_chunks(0, chunks - 1, False, indent + "  ")
            held_chunks(chunks - 1, chunks, True, indent + "  ")
            self.w(f"{indent}}} else {{")
            held_chunks(0, chunks, True, indent + "  ")
            self.w(f"{indent}}}")
            return
        read = {e.load for e in post_order(list(reads)) if isinstance(e, ELoad)}
        stage: set[int] = set()
        if self.shared:
            stage = {k for k in self.cached_loads if k in read and k not in self.staged}
            self.staged |= stage
        begin, end = ("r_begin + ", "r_end") if self.split > 1 else ("", "n_red")
        stride = tr_n * step
        if self.peel and stage:
            # A peeled row's elements go to threads by its offset within a vector, which
            # changes from row to row: no thread writes this row's staged elements over the
            # last row's while another may still read them.
            self.w(f"{indent}__syncthreads();")
        self.w(f"{indent}if (row_ok) {{")
        start = f"{begin}({it})tr * {step}"
        if self.peel:
            self.peel_bounds(indent + "  ", "r_begin" if self.split > 1 else f"({it})0", end)
            start, end = f"pa + ({it})tr * {step}", "pb"
        if group is not None:
            last = (group.steps - 1) * stride
            self.w(f"{indent}  {it} rg = {start};")
            self.w(f"{indent}  for (; rg < {end} - {last}; rg += {group.steps * stride}) {{")
            if group.open:
                group.open(indent + "    ")
            self.w(f"{indent}    #pragma unroll")
            self.w(f"{indent}    for (int u = 0; u < {group.steps}; ++u) {{")
            self.w(f"{indent}      const {it} r0 = rg + ({it})u * {stride};")
            self.chunk(group.body, indent + "      ", False, stage, reads, None, None)
            self.w(f"{indent}    }}")
            group.close(indent + "    ")
            self.w(f"{indent}  }}")
            start = "rg"
        if (
            group is None
            and not self.peel
            and not stage
            and self.split == 1
            and self.unroll > 1
            and not self.guarded
            and self.lane_trips() < TAIL_GROUP_TRIPS * self.unroll
            and not any(acc.family == MAX_EXP_SUM for acc in self.accs)
        ):
            self.whole_groups_then_tail(
                body, indent + "  ", start, end, stride, reads, chunk_open, chunk_close
            )
        else:
            # Unrolled, a loop of a few trips (a group's leftovers) has its loads in flight
            # together where its trips are `unroll`; "unroll 1" would forbid nvcc's unrolling.
            if self.unroll > 1:
                self.w(f"{indent}  #pragma unroll {self.unroll}")
            self.w(f"{indent}  for ({it} r0 = {start}; r0 < {end}; r0 += {stride}) {{")
            self.chunk(body, indent + "    ", False, stage, reads, chunk_open, chunk_close)
            self.w(f"{indent}  }}")
        if self.peel:
            self.peeled_edges(body, indent + "  ", stage)
        self.w(f"{indent}}}")

    def lane_trips(self) -> int:
        """The chunks of its row a lane reads in the uncached strided loop (unsplit rows)."""
        _, n_red = sizes(self.s)
        return -(-n_red // (self.p.threads_r * self.step))

    def whole_groups_then_tail(
        self, body, indent: str, start: str, end: str, stride: str, reads, chunk_open, chunk_close
    ) -> None:  # noqa: ANN001
        """The uncached strided loop of a lane's chunks, `unroll` chunks a trip while a whole
        group of them lies within the row, then the fewer left (the tail) as one group whose
        loads are unconditional, each index clamped to the row's last chunk, and whose
        compute is behind `rr < end`. nvcc unrolls `#pragma unroll N` over a runtime trip count
        with the leftover trips first, each load behind its own branch (SASS: LDG BRA LDG BRA
        LDG): a lane of a short row or column has only leftover trips, and its loads went out
        one at a time (bf16 row sums of 13 vectors of 8 in 4 lanes, one row a lane: 151.6 us
        against 84.4 in 8 lanes; the sum over the middle dim of bf16 [243713, 3, 114], a
        column of 3 in 2 trips). A tail chunk past the row's end reads the row's last chunk
        again and uses nothing of it; a lane with no tail loads nothing more. The chunks keep
        their order: the same sums, bit for bit."""
        it, u_n, step = self.itype, self.unroll, self.step
        last = f"({it}){(u_n - 1)} * {stride}"
        self.w(f"{indent}{it} rg = {start};")
        self.w(f"{indent}#pragma unroll 1")
        self.w(f"{indent}for (; rg < {end} - {last}; rg += ({it}){u_n} * {stride}) {{")
        self.w(f"{indent}  #pragma unroll")
        self.w(f"{indent}  for (int u = 0; u < {u_n}; ++u) {{")
        self.w(f"{indent}    const {it} r0 = rg + ({it})u * {stride};")
        self.chunk(body, indent + "    ", False, set(), reads, chunk_open, chunk_close)
        self.w(f"{indent}  }}")
        self.w(f"{indent}}}")
        self.w(f"{indent}if (rg < {end}) {{")
        self.w(f"{indent}  #pragma unroll")
        self.w(f"{indent}  for (int u = 0; u < {u_n - 1}; ++u) {{")
        self.w(f"{indent}    const {it} rr = rg + ({it})u * {stride};")
        self.w(f"{indent}    const {it} r0 = rr < {end} ? rr : {end} - {step};")

        def behind(ind: str) -> None:
            self.w(f"{ind}if (rr < {end}) {{")
            if chunk_open:
                chunk_open(ind + "  ")

        def close(ind: str) -> None:
            if chunk_close:
                chunk_close(ind + "  ")
            self.w(f"{ind}}}")

        self.chunk(body, indent + "    ", False, set(), reads, behind, close)
        self.w(f"{indent}  }}")
        self.w(f"{indent}}}")

    def clamped_fill(self, indent: str) -> None:
        """A held row of an outer layout (a thread's column, or a lane's columns with rows a
        lane) into its registers with a condition only on its last chunk (none with one thread
        a row, whose last chunk is clamped like the rest, codegen 34): every chunk before
        it lies within the row (a thread's share is the row's, `ept`), and its index is
        clamped to the row's last vector as well, so that a kernel run on a row shorter than
        it was made for still reads within it; the row past the last row reads row 0 (rowc).
        Those values are never used: each pass checks row_ok and r0 < n_red. With a
        condition on every load, the predicates outrun the predicate registers and the
        compiler computes on the first loads before it issues the rest: a few loads in
        flight (H200: bf16 column sums of 6 rows with 2 rows a lane 153.6 us, 91.1 clamped;
        middle_softmax bf16 [13110, 26, 17], 13 loads a thread, 20.8 or 36.6 us by how the
        compiler happened to schedule them). Inner layouts keep a condition a load: a lane
        past its row's end would load the row's last vector again for nothing, where many
        lanes of a warp share a short row (softmax fp32 [15811501, 3] 131.0 -> 145.8 us)."""
        it, step, tr_n, chunks = self.itype, self.step, self.p.threads_r, self.ept // self.step
        # One thread a row clamps its last chunk too: its share is the whole row, so a row as
        # long as the params' reads nothing more, and a condition on that one load let the
        # compiler issue it after it had computed on the others, a second trip to memory
        # (sm_90 SASS of middle_softmax bf16 [16693, 27, 142], one thread of 27: 26 loads,
        # then the 27th 90 instructions on; ncu 97.5 us against 82.8 at 26, whose guarded
        # load went first: `benchmarks/surface/pairs_one_thread_2026-11-30/`).
        clamped = chunks if tr_n == 1 else chunks - 1
        if clamped > 0:
            self.w(f"{indent}if (n_red >= {step}) {{")
            self.w(f"{indent}  #pragma unroll")
            self.w(f"{indent}  for (int c = 0; c < {clamped}; ++c) {{")
            self.w(f"{indent}    const {it} rr = ({it})c * {tr_n * step} + ({it})tr * {step};")
            self.w(f"{indent}    const {it} r0 = rr < n_red - {step} ? rr : n_red - {step};")
            self.fill_chunk(indent + "    ", False)
            self.w(f"{indent}  }}")
            self.w(f"{indent}}}")
        if clamped == chunks:
            return
        self.w(f"{indent}{{")
        self.w(f"{indent}  const int c = {chunks - 1};")
        self.w(f"{indent}  const {it} r0 = ({it})c * {tr_n * step} + ({it})tr * {step};")
        self.w(f"{indent}  if (row_ok && r0 < n_red) {{")
        self.fill_chunk(indent + "    ", False)
        self.w(f"{indent}  }}")
        self.w(f"{indent}}}")

    def fill_chunk(self, inner: str, hoisted: bool) -> None:
        """Chunk c of a held row (at r0) into its registers: a vector load an input where
        it can, else lane by lane."""
        vec = self.vec
        self.unravel(self.red, "r0", inner)
        filled = self.filled_loads(hoisted)
        for k in [k for k in filled if k in self.vec_loads]:
            if k in self.staged_in:
                ld = self.s.loads[k]
                vt = f"TfVec<{ld.dtype.cuda}, {vec}>"
                direct = load_text(ld.buffer, self.offset(k), self.streams(k), vt)
                shared = f"*reinterpret_cast<const {vt}*>(&tf_sl{k}[{self.staged_row_at('r0')}])"
                self.w(f"{inner}const {vt} x{k} = tf_stage ? {shared} : {direct};")
            else:
                self.vector_load(k, f"x{k}", inner)
            self.w(f"{inner}#pragma unroll")
            held = self.held_lane(k, f"x{k}")
            self.w(f"{inner}for (int v = 0; v < {vec}; ++v) cl{k}[c * {vec} + v] = {held};")
        scalar_fill = [k for k in filled if k not in self.vec_loads]
        self.lane_copies(scalar_fill, lambda k: f"cl{k}[c * {vec} + v]", inner, self.held_value)

    def staged_row_at(self, index: str) -> str:
        """This lane's element `index` of its row in a staged region (`codegen.staged_rows`)."""
        return staged_rows.at(self.itype, index)

    def held_peeled(self, body, indent: str, fill: bool, reads, chunk_open, chunk_close) -> None:  # noqa: ANN001
        """A held peeled row: chunk c of whole vectors at r0 = pa + c * TR * V + tr * V (while
        r0 < pb) in registers c * V + v, as an unpeeled held row's; then the row's head and
        tail, an element a lane, turn g of a thread in register ept + g (chunk c, lane v of
        it, with the element's index r0 - v + v), `peeled_edge_slots` turns."""
        tr_n, vec, it, ept = self.p.threads_r, self.vec, self.itype, self.ept
        self.w(f"{indent}{{")
        ind = indent + "  "
        self.peel_bounds(ind, f"({it})0", "n_red")
        self.w(f"{ind}#pragma unroll")
        self.w(f"{ind}for (int c = 0; c < {ept // vec}; ++c) {{")
        self.w(f"{ind}  const {it} r0 = pa + ({it})c * {tr_n * vec} + ({it})tr * {vec};")
        self.w(f"{ind}  if (row_ok && r0 < pb) {{")
        if fill:
            self.fill_chunk(ind + "    ", False)
        else:
            self.chunk(body, ind + "    ", not fill, set(), reads, chunk_open, chunk_close)
        self.w(f"{ind}  }}")
        self.w(f"{ind}}}")
        with self.element_by_element():
            self.w(f"{ind}#pragma unroll")
            self.w(f"{ind}for (int g = 0; g < {peeled_edge_slots(tr_n, vec)}; ++g) {{")
            self.w(f"{ind}  const int e = tr + g * {tr_n};")
            self.w(f"{ind}  if (row_ok && e < {EDGE_ELEMENTS}) {{")
            inner = ind + "    "
            self.edge_element(inner)
            self.w(f"{inner}const int c = ({ept} + g) / {vec};")
            self.w(f"{inner}const int v = ({ept} + g) % {vec};")
            self.w(f"{inner}const {it} rv = r0 - v;")
            self.unravel(self.red, "rv", inner)
            if fill:
                for k in self.filled_loads(False):
                    value = self.held_value(k, self.load_inline(k, True))
                    self.w(f"{inner}cl{k}[c * {vec} + v] = {value};")
            else:
                body(inner, True, True)
            self.w(f"{ind}  }}")
            self.w(f"{ind}}}")
        self.w(f"{indent}}}")

    def peel_bounds(self, indent: str, begin: str, end: str) -> None:
        """pa..pb: the whole vectors at aligned addresses of this thread's row (or share of
        it, begin..end): pa the first element of `begin` on whose address the lead load's
        vector is aligned (at most `end`), pb past the last whole vector after it."""
        it, vec = self.itype, self.vec
        ld = self.s.loads[self.peel_lead]
        first = render_affine(
            ld.offset, "L", self.peel_lead, lambda j: "0" if j == self.last else f"i{j}", it
        )
        self.w(f"{indent}const {it} pr = {begin};")
        self.w(f"{indent}const {it} ph = ((-(({first}) + pr)) % {vec} + {vec}) % {vec};")
        self.w(f"{indent}const {it} pa = pr + ph < {end} ? pr + ph : {end};")
        self.w(f"{indent}const {it} pb = pa + ({end} - pa) / {vec} * {vec};")
        self.w(f"{indent}const {it} pe = {end};")
        if self.shared:  # the row's offset within a vector: where it starts staged
            self.w(f"{indent}const {it} sm = (({first}) % {vec} + {vec}) % {vec};")

    def peeled_edges(self, body, indent: str, stage: set[int]) -> None:  # noqa: ANN001
        """A peeled row's head (pr..pa) and tail (pb..pe), fewer than 2 vectors: body for each
        element, a lane an element, every input read element by element; the inputs this pass
        stages (`stage`) written to the shared row first, as the vectors' chunks write theirs."""
        with self.element_by_element():
            self.w(f"{indent}for (int e = tr; e < {EDGE_ELEMENTS}; e += {self.p.threads_r}) {{")
            self.edge_element(indent + "  ")
            self.unravel(self.red, "r0", indent + "  ")
            self.w(f"{indent}  const int v = 0;")
            for k in sorted(stage):
                at = self.staged_at("r0 + v")
                self.w(f"{indent}  sl{k}[{at}] = {self.load_inline(k, True)};")
            body(indent + "  ", False, True)
            self.w(f"{indent}}}")

    @contextlib.contextmanager
    def element_by_element(self):  # noqa: ANN201
        """Emitting a peeled row's head or tail: no vector loads or stores, no chunk."""
        vec_loads, vec_stores = self.vec_loads, self.vec_stores
        self.vec_loads, self.vec_stores, self.edge = set(), set(), True
        try:
            yield
        finally:
            self.vec_loads, self.vec_stores, self.edge = vec_loads, vec_stores, False

    def edge_element(self, indent: str) -> None:
        """r0: the row's element that head-and-tail element e is (the head's first)."""
        self.w(
            f"{indent}const {self.itype} r0 = e < (int)(pa - pr) ? pr + e : pb + (e - (int)(pa - pr));"
        )

    def chunk(self, body, inner: str, cached: bool, stage, reads, chunk_open, chunk_close) -> None:  # noqa: ANN001
        """One chunk of V consecutive elements starting at r0: its indices, its vector loads
        (staging a shared row's inputs where `stage` says so), then body for each lane."""
        self.unravel(self.red, "r0", inner)
        read = {e.load for e in post_order(list(reads)) if isinstance(e, ELoad)}
        for k in sorted(self.vec_loads & read):
            if self.shared and k in self.cached_loads:
                self.shared_vector(k, inner, k in stage)
            elif not cached or k not in self.cached_loads:
                self.vector_load(k, f"vl{k}", inner)
        self.lane_copies(
            sorted(stage - self.vec_loads), lambda k: f"sl{k}[{self.staged_at('r0 + v')}]", inner
        )
        if chunk_open:
            chunk_open(inner)
        self.w(f"{inner}#pragma unroll")
        self.w(f"{inner}for (int v = 0; v < {self.vec}; ++v) {{")
        body(inner + "  ", cached, True)
        self.w(f"{inner}}}")
        if chunk_close:
            chunk_close(inner)

    def lane_copies(self, loads: Sequence[int], target, indent: str, convert=None) -> None:  # noqa: ANN001
        """Each of this chunk's elements of `loads`, read lane by lane into target(k) (through
        convert(k, value) where given: `held_value`)."""
        if not loads:
            return
        self.w(f"{indent}#pragma unroll")
        self.w(f"{indent}for (int v = 0; v < {self.vec}; ++v) {{")
        for k in loads:
            value = self.load_inline(k, True)
            if k in self.staged_in:
                index = self.staged_row_at(self.var_name(True)(self.last))
                value = f"tf_stage ? tf_sl{k}[{index}] : {value}"
            if convert is not None:
                value = convert(k, value)
            self.w(f"{indent}  {target(k)} = {value};")
        self.w(f"{indent}}}")

    def shared_vector(self, k: int, indent: str, stage: bool) -> None:
        """vl<k>, this chunk of a staged input: read from memory and written to the shared
        row (`stage`, the first phase that reads it) or read back from there."""
        vt = f"TfVec<{self.s.loads[k].dtype.cuda}, {self.vec}>"
        if stage:
            self.vector_load(k, f"vl{k}", indent)
            self.w(f"{indent}*reinterpret_cast<{vt}*>(&sl{k}[{self.staged_at('r0')}]) = vl{k};")
        else:
            at = self.staged_at("r0")
            self.w(f"{indent}const {vt} vl{k} = *reinterpret_cast<const {vt}*>(&sl{k}[{at}]);")

    def dynamic_shared_bytes(self) -> int:
        """The shared memory the staged rows take (the launch's dynamic shared memory): a
        16-byte aligned region a staged input, `rows_per_block` rows each."""
        if self.shared_partials:
            return partial_shared_bytes(self.s, self.p)
        if not self.shared:
            return 0
        n_red = 1
        for j in self.red:
            n_red *= self.s.extents[j]
        rows = self.p.rows_per_block
        row = staged_row_elements(self.s, self.vec, n_red)
        return sum(
            -(-(rows * row * self.s.loads[k].dtype.itemsize) // 16) * 16 for k in self.cached_loads
        )

    def staged_at(self, index: str) -> str:
        """The place of a row's element `index` in its staged region: shifted by the row's
        offset within a vector where it is peeled (sm, `peel_bounds`), so that a vector at
        an aligned address lands on an aligned place."""
        return f"{index} + sm" if self.peel else index

    def shared_rows(self) -> None:
        """sl<k>: this row's region of the staged input k in the dynamic shared memory (laid
        out as `dynamic_shared_bytes` counts it)."""
        if not (self.shared and self.cached_loads):
            return
        self.w("  extern __shared__ __align__(16) unsigned char tf_smem[];")
        self.w("  long long tf_at = 0;")
        row = "n_red"
        if self.peel:  # staged_row_elements
            vec = self.vec
            self.w(
                f"  const long long tf_row = ((long long)n_red + {vec - 1}) / {vec} * {vec} + {vec};"
            )
            row = "tf_row"
        for k in self.cached_loads:
            t = self.s.loads[k].dtype.cuda
            self.w(
                f"  {t}* const sl{k} = reinterpret_cast<{t}*>(tf_smem + tf_at) + (long long)to * {row};"
            )
            self.w(
                f"  tf_at += ({self.p.rows_per_block}LL * {row} * (long long)sizeof({t}) + 15) / 16 * 16;"
            )

    def block_reduce(self, acc: _Accumulator, indent: str, declare: bool = True) -> None:
        """acc<i> of every thread of a row combined, the total in every thread of the row.
        `declare`: False reuses the shared arrays an enclosing scope declared (a split
        reduction's second reduce: one set of arrays, not two)."""
        fields = _fields(acc)
        tr_n = self.p.threads_r
        rows = self.p.rows_per_block
        shuffle = self.p.inner and tr_n >= 32
        lanes = tr_n // 32 if shuffle else tr_n
        a = f"acc{acc.index}"
        if tr_n == 1:
            return  # a row's one thread holds its total
        if acc.family == MAX_EXP_SUM:
            self.max_exp_sum_block_reduce(acc, indent, declare)
            return
        if self.p.inner and tr_n < 32:
            # A row's lanes are consecutive lanes of one warp (threadIdx.x, threads_r a power
            # of two): a butterfly over them, offsets below threads_r staying inside the row's
            # group; no shared memory, no barrier. A block of fewer than 32 threads masks the
            # lanes it has.
            block = tr_n * rows
            mask = "0xffffffffu" if block >= 32 else f"{(1 << block) - 1:#x}u"
            self.butterfly(acc, indent, tr_n // 2, mask)
            return
        if shuffle:
            self.butterfly(acc, indent, 16, "0xffffffffu")
        if lanes > 1 or not shuffle:
            slot = "(tr >> 5)" if shuffle else "tr"

            def at(k: str) -> str:
                """A partial's shared-memory cell: a warp's lanes in consecutive words. An
                outer layout's lanes are its outputs (`to`): to-major cells would put a warp's
                32 lanes in one bank, a 32-way conflict at every level of the tree."""
                return f"({k}) * {rows} + to" if not self.p.inner else f"to * {lanes} + {k}"

            cond = "(tr & 31) == 0" if shuffle else "true"
            self.publish_fields(acc, "sm", rows * lanes if declare else 0, cond, at(slot), indent)
            self.w(f"{indent}__syncthreads();")
            if shuffle:
                self.gather_warp_partials(acc, indent, lanes)
                return
            self.w(f"{indent}for (int s = {lanes // 2 if lanes > 1 else 0}; s > 0; s >>= 1) {{")
            self.w(f"{indent}  if ({slot} < s) {{")
            if acc.family in _STRUCT:
                here, there = at(slot), at(f"{slot} + s")
                x = _struct_of(acc, [f"sm{acc.index}_{f_}[{here}]" for f_ in fields])
                y = _struct_of(acc, [f"sm{acc.index}_{f_}[{there}]" for f_ in fields])
                self.w(f"{indent}    const {_acc_type(acc)} z = {_combine(acc, x, y)};")
                for f_ in fields:
                    self.w(f"{indent}    sm{acc.index}_{f_}[{here}] = z.{f_};")
            else:
                cell, other = f"sm{acc.index}[{at(slot)}]", f"sm{acc.index}[{at(slot + ' + s')}]"
                self.w(f"{indent}    {cell} = {_combine(acc, cell, other)};")
            self.w(f"{indent}  }}")
            self.w(f"{indent}  __syncthreads();")
            self.w(f"{indent}}}")
            for f_ in fields:
                sfx, dot = (f"_{f_}", f".{f_}") if f_ else ("", "")
                self.w(f"{indent}{a}{dot} = sm{acc.index}{sfx}[{at('0')}];")
            self.w(f"{indent}__syncthreads();")

    def publish_fields(
        self, acc: _Accumulator, array: str, size: int, cond: str, cell: str, indent: str
    ) -> None:
        """acc<i>'s fields written to shared arrays `array`<i>_<field> at `cell` by the
        threads where `cond` holds; the arrays declared here with `size` cells (0: an
        enclosing scope declared them)."""
        t, a = acc.ctype.cuda, f"acc{acc.index}"
        for f_ in _fields(acc) if size else ():
            sfx = f"_{f_}" if f_ else ""
            self.w(f"{indent}__shared__ {t} {array}{acc.index}{sfx}[{size}];")
        self.w(f"{indent}if ({cond}) {{")
        for f_ in _fields(acc):
            sfx, dot = (f"_{f_}", f".{f_}") if f_ else ("", "")
            self.w(f"{indent}  {array}{acc.index}{sfx}[{cell}] = {a}{dot};")
        self.w(f"{indent}}}")

    def max_exp_sum_block_reduce(self, acc: _Accumulator, indent: str, declare: bool) -> None:
        """A max-and-sum across the row's threads as two plain reductions: the row's max, then
        each thread's sum rescaled to it (one exp a thread) and summed. Merging the pairs
        instead would put an exp on every step of the reduction's serial chain (a block of
        16 warps: 15 in a row), the tail of every row."""
        t, i = acc.ctype.cuda, acc.index
        top = _Accumulator("max", acc.operand, acc.ctype, 0, f"{i}m", ())
        total = _Accumulator("sum", acc.operand, acc.ctype, 0, f"{i}s", ())
        self.w(f"{indent}{t} acc{top.index} = acc{i}.max;")
        self.block_reduce(top, indent, declare)
        self.w(
            f"{indent}{t} acc{total.index} = acc{i}.max == acc{top.index} ? acc{i}.sum : "
            f"acc{i}.sum * tf_exp_sum_term(acc{i}.max - acc{top.index});"
        )
        self.block_reduce(total, indent, declare)
        self.w(f"{indent}acc{i} = TfMaxExpSum<{t}>{{acc{top.index}, acc{total.index}}};")

    def butterfly(self, acc: _Accumulator, indent: str, first_offset: int, mask: str) -> None:
        """acc<i> combined across lanes by xor shuffles, offsets first_offset down to 1: every
        lane of a group of 2 * first_offset ends with the group's total."""
        if first_offset < 1:
            return
        t = acc.ctype.cuda
        a = f"acc{acc.index}"
        self.w(f"{indent}#pragma unroll")
        self.w(f"{indent}for (int off = {first_offset}; off > 0; off >>= 1) {{")
        if acc.family in _STRUCT:
            self.w(f"{indent}  {_acc_type(acc)} other;")
            for f_ in _fields(acc):
                self.w(f"{indent}  other.{f_} = __shfl_xor_sync({mask}, {a}.{f_}, off);")
        else:
            self.w(f"{indent}  const {t} other = __shfl_xor_sync({mask}, {a}, off);")
        self.w(f"{indent}  {a} = {_combine(acc, a, 'other')};")
        self.w(f"{indent}}}")

    def gather_warp_partials(
        self, acc: _Accumulator, indent: str, lanes: int, barrier: bool = True
    ) -> None:
        """Every thread combines the row's warp partials from shared memory itself, in warp
        order: one barrier to publish them and one before the array is written again, where a
        tree would take a barrier per level (`barrier` False: the caller's, after a run of
        accumulators gathered together)."""
        a = f"acc{acc.index}"

        def cell(w: str) -> str:
            return _struct_of(
                acc,
                [
                    f"sm{acc.index}{'_' + f_ if f_ else ''}[to * {lanes} + {w}]"
                    for f_ in _fields(acc)
                ],
            )

        self.w(f"{indent}{a} = {cell('0')};")
        self.w(f"{indent}#pragma unroll")
        self.w(f"{indent}for (int w = 1; w < {lanes}; ++w) {a} = {_combine(acc, a, cell('w'))};")
        if barrier:
            self.w(f"{indent}__syncthreads();")

    def pass_groups(self) -> list[list[_Accumulator]]:
        """The accumulators in pass order, those one pass computes together in one list:
        every run of plain accumulators (sum, prod, max, min) whose operands read no
        reduction. A row read from memory each pass reads it once for them (layernorm's dw
        and db summed the columns of dy in two passes, reading dy twice); a row held in
        registers computes what their operands share once and combines them across the
        block with one pair of barriers (`row_reduce_run`: layernorm's backward has two such
        sums a row). Not a row staged in shared memory, over a cluster, rows a lane or a
        vector of outputs a lane held in registers: those keep a pass an accumulator."""
        held_alone = self.shared or (self.cache and self.along_outputs)
        together = not held_alone and self.cluster == 1 and self.lane_rows == 1
        runs: list[list[_Accumulator]] = []
        joinable = False
        for acc in self.accs:
            plain = (
                together
                and acc.family in ("sum", "prod", "max", "min")
                and not contains_reduce(acc.operand)
            )
            if plain and joinable:
                runs[-1].append(acc)
            else:
                runs.append([acc])
            joinable = plain
        return runs

    def reduce_passes(self, accs: list[_Accumulator], indent: str) -> None:
        """One pass of this thread's elements into several plain accumulators (`pass_groups`),
        their operands rendered together so that what they share is read and computed once."""
        if len(accs) == 1:
            self.reduce_pass(accs[0], indent)
            return
        names = {}
        for acc in accs:
            if self.along_outputs:
                names[acc.index] = f"acc{acc.index}_v[v]"
                self.w(f"{indent}{_acc_type(acc)} acc{acc.index}_v[{self.vec}];")
                self.w(f"{indent}#pragma unroll")
                self.w(
                    f"{indent}for (int v = 0; v < {self.vec}; ++v) {names[acc.index]} = {_init(acc)};"
                )
            else:
                names[acc.index] = f"acc{acc.index}"
                self.w(f"{indent}{_acc_type(acc)} acc{acc.index} = {_init(acc)};")

        def accumulate(ind: str, cached: bool, in_vector: bool) -> None:
            r = self.renderer(ind, cached, in_vector)
            values = [r.value(acc.operand) for acc in accs]
            self.lines.extend(r.lines)
            for acc, v in zip(accs, values, strict=True):
                x = v if r.dtype(acc.operand) is acc.ctype else f"tf_cast<{acc.ctype.cuda}>({v})"
                a = names[acc.index]
                self.w(f"{ind}{a} = {_combine(acc, a, x)};")

        self.element_loop(accumulate, indent, reads=[acc.operand for acc in accs])

    def reduce_pass(self, acc: _Accumulator, indent: str) -> None:
        """This thread's elements of the row (of its share, when split) into acc<i>; with a
        vector along the outputs, each output's into its own acc<i>_v[v]."""
        if self.along_outputs:
            a = f"acc{acc.index}_v[v]"
            self.w(f"{indent}{_acc_type(acc)} acc{acc.index}_v[{self.vec}];")
            self.w(f"{indent}#pragma unroll")
            self.w(f"{indent}for (int v = 0; v < {self.vec}; ++v) {a} = {_init(acc)};")
        else:
            a = f"acc{acc.index}"
            self.w(f"{indent}{_acc_type(acc)} {a} = {_init(acc)};")

        t = acc.ctype.cuda
        # A chunk of V elements of one row into a max-and-sum at once: its own max first,
        # then V exps that do not wait on one another (element by element, each exp waits
        # for the running max the previous element left).
        chunked = acc.family == MAX_EXP_SUM and not self.along_outputs and self.vec > 1
        xs = f"xs{acc.index}"

        def accumulate(ind: str, cached: bool, in_vector: bool) -> None:
            x = self.operand(acc, ind, cached, in_vector)
            if chunked and not self.edge:
                self.w(f"{ind}{xs}[v] = {x};")
            elif acc.family == "welford":
                self.w(f"{ind}tf_welford_add<{t}>({a}, {x});")
            elif acc.family == MAX_EXP_SUM:
                self.w(f"{ind}tf_max_exp_sum_add<{t}>({a}, {x});")
            else:
                self.w(f"{ind}{a} = {_combine(acc, a, x)};")

        self.element_loop(
            accumulate,
            indent,
            chunk_open=(lambda ind: self.w(f"{ind}{t} {xs}[{self.vec}];")) if chunked else None,
            chunk_close=(
                (lambda ind: self.w(f"{ind}tf_max_exp_sum_add_chunk<{t}, {self.vec}>({a}, {xs});"))
                if chunked
                else None
            ),
            reads=[acc.operand],
            group=self.welford_group(acc),
        )

    def welford_group(self, acc: _Accumulator) -> _StepGroup | None:
        """A Welford pass over a row read from memory takes `unroll` chunks a trip into
        registers (xw<i>) and merges them into its state at once (tf_welford_add_chunk): each
        output's elements of the trip get their own mean and squared deviations, without a
        division, then one merge whose factor K / (n + K) all the lanes share. Element by
        element, every element took a division and a chain of dependent adds."""
        if acc.family != "welford" or self.cache:
            return None
        steps, vec = self.unroll, self.vec
        per_output = steps if self.along_outputs else steps * vec
        if per_output < 2:
            return None
        t = acc.ctype.cuda
        xw, a = f"xw{acc.index}", f"acc{acc.index}"

        def open_(ind: str) -> None:
            self.w(f"{ind}{t} {xw}[{steps * vec}];")

        def body(ind: str, cached: bool, in_vector: bool) -> None:
            self.w(f"{ind}{xw}[u * {vec} + v] = {self.operand(acc, ind, cached, in_vector)};")

        def close(ind: str) -> None:
            first = f"{a}_v[0]" if self.along_outputs else a
            self.w(f"{ind}{{")
            self.w(f"{ind}  const {t} wn = {first}.n;")
            self.w(
                f"{ind}  const {t} wf = tf_welford_div(({t}){per_output}, wn + ({t}){per_output});"
            )
            if self.along_outputs:
                self.w(f"{ind}  #pragma unroll")
                self.w(
                    f"{ind}  for (int v = 0; v < {vec}; ++v) "
                    f"tf_welford_add_chunk<{t}, {steps}, {vec}>({a}_v[v], {xw} + v, wn, wf);"
                )
            else:
                self.w(f"{ind}  tf_welford_add_chunk<{t}, {per_output}, 1>({a}, {xw}, wn, wf);")
            self.w(f"{ind}}}")

        return _StepGroup(steps, open_, body, close)

    def reduced_stores(self, indent: str) -> None:
        """The row's reduced outputs, written by its first thread. With a vector along the
        outputs this runs inside the lane loop (v): a vector-stored output's lane goes to
        vo<k> (`write_reduced_vectors` stores it), any other to its own address. An output
        of `lane_stores` goes to its lane of vq<k> unguarded (a row out of range leaves a
        lane `lane_vector_stores` never writes): a branch around it cost the loop its
        unswitched form (middle bf16 [117374, 5, 51], 2 rows a lane: 27.0 -> 30.2 us)."""
        it = self.itype
        reduced = [(k, st) for k, st in enumerate(self.s.stores) if st.reduced]
        kept = [(k, st) for k, st in reduced if k in self.lane_stores]
        stored = [(k, st) for k, st in reduced if k not in self.lane_stores]
        rank0 = " && tf_rank == 0" if self.cluster > 1 else ""  # one block of the cluster
        lanes = self.along_outputs
        for group, guard in ((kept, ""), (stored, f"if (row_ok && tr == 0{rank0}) ")):
            if not group:
                continue
            self.w(f"{indent}{guard}{{")
            for j in self.red:
                self.w(f"{indent}  const {it} i{j} = 0;")
            r = self.renderer(indent + "  ", False, in_vector=lanes, vector_loaded=False)
            for k, st in group:
                v = r.value(st.expr)
                cast = v if r.dtype(st.expr) is st.dtype else f"tf_cast<{st.dtype.cuda}>({v})"
                if lanes and k in self.vec_stores:
                    r.emit(f"vo{k}.v[v] = {cast};")
                elif k in self.lane_stores:
                    width = self.lane_stores[k]
                    r.emit(f"vq{k}[q / {width}].v[q % {width}] = {cast};")
                else:
                    offset = render_affine(st.offset, "S", k, self.var_name(lanes), it)
                    r.emit(f"B{st.buffer}[{offset}] = {cast};")
            self.lines += r.lines
            self.w(f"{indent}}}")

    def write_reduced_vectors(self, indent: str) -> None:
        """After the lane loop: each vector-stored reduced output in one store."""
        it = self.itype
        stored = [
            (k, st) for k, st in enumerate(self.s.stores) if st.reduced and k in self.vec_stores
        ]
        if not stored:
            return
        self.w(f"{indent}if (row_ok && tr == 0) {{")
        for j in self.red:
            self.w(f"{indent}  const {it} i{j} = 0;")
        for k, st in stored:
            offset = render_affine(st.offset, "S", k, lambda j: f"i{j}", it)
            self.w(
                f"{indent}  *reinterpret_cast<TfVec<{st.dtype.cuda}, {self.vec}>*>(&B{st.buffer}[{offset}]) = vo{k};"
            )
        self.w(f"{indent}}}")

    def lane_vector_stores(self, indent: str) -> None:
        """After a lane's rows: each of `lane_stores` (vq<k>, filled row by row in
        `reduced_stores`) in stores of its vector width where every row of the lane is in
        range, else (the last lane) each row's output in range on its own, at the lane's
        first address plus the row (its rows are consecutive addresses). Predicated stores,
        not a branch a case: with a branch nvcc ran the row loop's fill behind branches of its
        own (middle bf16 [117374, 5, 51]: 224 static instructions against 208)."""
        if not self.lane_stores:
            return
        it, lanes = self.itype, self.lane_rows
        inner = indent + "  "
        self.w(f"{indent}{{")
        self.w(f"{inner}const {it} row0 = row_base + ({it})to * {lanes};")
        self.w(f"{inner}const {it} rowc = row0 < n_out ? row0 : 0;")
        self.unravel(self.outer, "rowc", inner)
        for j in self.red:
            self.w(f"{inner}const {it} i{j} = 0;")
        for k, width in self.lane_stores.items():
            st = self.s.stores[k]
            offset = render_affine(st.offset, "S", k, lambda j: f"i{j}", it)
            self.w(f"{inner}{st.dtype.cuda}* const out{k} = &B{st.buffer}[{offset}];")
        self.w(f"{inner}const bool whole = row0 < n_out - {lanes - 1};")
        for k, width in self.lane_stores.items():
            vt = f"TfVec<{self.s.stores[k].dtype.cuda}, {width}>"
            for part in range(lanes // width):
                at = f"out{k} + {part * width}" if part else f"out{k}"
                self.w(f"{inner}if (whole) *reinterpret_cast<{vt}*>({at}) = vq{k}[{part}];")
        self.w(f"{inner}#pragma unroll")
        self.w(f"{inner}for (int q = 0; q < {lanes}; ++q) {{")
        self.w(f"{inner}  if (!whole && row0 + q < n_out) {{")
        for k, width in self.lane_stores.items():
            self.w(f"{inner}    out{k}[q] = vq{k}[q / {width}].v[q % {width}];")
        self.w(f"{inner}  }}")
        self.w(f"{inner}}}")
        self.w(f"{indent}}}")

    def output_lanes(self, indent: str, lane_total=None) -> None:  # noqa: ANN001
        """With a vector along the outputs, after every accumulator's pass: each output
        lane's totals are combined across the row's threads, finalized and stored, one lane
        after another (the block reduction's shared memory serves each in turn).
        `lane_total(acc, indent)` emits acc<i>'s value for lane v before the block reduction
        (default: this thread's own, acc<i>_v[v]; a split's last block: every share's)."""
        for k, st in enumerate(self.s.stores):
            if st.reduced and k in self.vec_stores:
                self.w(f"{indent}TfVec<{st.dtype.cuda}, {self.vec}> vo{k};")
        self.w(f"{indent}#pragma unroll")
        self.w(f"{indent}for (int v = 0; v < {self.vec}; ++v) {{")
        inner = indent + "  "
        for acc in self.accs:
            if lane_total is None:
                self.w(f"{inner}{_acc_type(acc)} acc{acc.index} = acc{acc.index}_v[v];")
            else:
                lane_total(acc, inner)
            self.block_reduce(acc, inner)
            self.finalize(acc, inner)
        self.phase = len(self.accs)
        self.reduced_stores(inner)
        self.w(f"{indent}}}")
        self.write_reduced_vectors(indent)

    # -- split reductions: shares of a row in several blocks, the last to arrive finishes ----
    def split_opening(self) -> None:
        """This block's share of every row (`r_begin`..`r_end`, whole vectors), and the
        workspace: a counter per row tile, then each partial field's [split][n_out] array, in
        the layout `schedulers.reduction.workspace_bytes` sizes."""
        p = self.p
        self.share_bounds(p.split, "blockIdx.y")
        self.w("  unsigned int* tf_counter = reinterpret_cast<unsigned int*>(WS);")
        self.w(
            f"  long long tf_at = (4 * (((long long)n_out + {p.rows_per_block - 1}) / {p.rows_per_block}) + 15)"
            " / 16 * 16;"
        )
        for acc_index, field, ctype in partial_fields(self.s):
            name = _partial_name(acc_index, field)
            self.w(f"  {ctype.cuda}* {name} = reinterpret_cast<{ctype.cuda}*>(WS + tf_at);")
            self.w(
                f"  tf_at += ((long long)sizeof({ctype.cuda}) * {p.split} * (long long)n_out + 15) / 16 * 16;"
            )
        self.w("  __shared__ bool tf_last;")

    def split_body(self) -> None:
        """Inside the row loop: each accumulator over this block's share, reduced across the
        block and published; then a counter per row tile tells the last block to arrive,
        which combines every share in share order (the same order whichever block is last:
        deterministic) and stores. The counter goes back to zero with the last arrival
        (`atomicInc` wraps at split - 1), so the workspace is zeroed only when it is made
        (runtime.launcher.SplitWorkspaces), not before every launch. With a vector along the
        outputs, each of a lane's outputs is published and combined in turn (its partials at
        its own output index)."""
        p, vec = self.p, self.vec
        for run in self.pass_groups():
            self.reduce_passes(run, "    ")
            if not self.along_outputs:
                for acc in run:
                    self.block_reduce(acc, "    ")
        if self.along_outputs:
            self.w("    #pragma unroll")
            self.w(f"    for (int v = 0; v < {vec}; ++v) {{")
            for acc in self.accs:
                self.w(f"      {_acc_type(acc)} acc{acc.index} = acc{acc.index}_v[v];")
                self.block_reduce(acc, "      ")
            self.publish_partials("      ", f"row * {vec} + v")
            self.w("    }")
        else:
            self.publish_partials("    ", "row")
        self.w(
            "    __threadfence();  // this block's partials visible to the block that combines them"
        )
        self.w("    __syncthreads();")
        self.w("    if (threadIdx.x == 0 && threadIdx.y == 0) {")
        self.w(
            "      // the last share's increment wraps the counter to 0: ready for the next launch"
        )
        self.w(
            f"      tf_last = atomicInc(&tf_counter[row_base / {p.rows_per_block}], {p.split - 1}u) == {p.split - 1}u;"
        )
        self.w("    }")
        self.w("    __syncthreads();")
        self.w("    if (tf_last) {")
        self.w("      __threadfence();")
        if self.along_outputs:
            self.output_lanes(
                "      ", lambda acc, ind: self.combine_shares(acc, ind, f"row * {vec} + v")
            )
        else:
            for acc in self.accs:
                self.combine_shares(acc, "      ", "row")
                self.block_reduce(acc, "      ", declare=False)
                self.finalize(acc, "      ")
            self.phase = len(self.accs)
            self.reduced_stores("      ")
        self.w("    }")
        self.w(
            "    __syncthreads();  // tf_last is read by all before it is written for the next tile"
        )

    def share_bounds(self, parts: int, index: str) -> None:
        """r_begin..r_end: the `index`-th of `parts` shares of a row, in whole vectors."""
        it, step = self.itype, self.step
        self.w(f"  const long long tf_chunk = ((long long)n_red + {parts - 1}) / {parts};")
        self.w(f"  const long long tf_share = (tf_chunk + {step - 1}) / {step} * {step};")
        self.w(
            f"  const {it} r_begin = ({it})min((long long){index} * tf_share, (long long)n_red);"
        )
        self.w(f"  const {it} r_end = ({it})min((long long)r_begin + tf_share, (long long)n_red);")

    # -- a row over a cluster of blocks (sm_90) ------------------------------------------
    def row_reduce_run(self, run: list[_Accumulator], indent: str) -> None:
        """The accumulators of one pass (`pass_groups`), each the row's total in every
        thread. Where a row's threads are whole warps of one block, the run's warp partials
        are published together and gathered after one barrier (one more before the arrays
        are written again): a pair of barriers for the run, not a pair an accumulator. Each
        accumulator combines in the order it would alone, so its total is the same bits."""
        tr_n = self.p.threads_r
        whole_warps = self.p.inner and tr_n > 32 and self.cluster == 1
        if len(run) == 1 or not whole_warps or any(a.family == MAX_EXP_SUM for a in run):
            for acc in run:
                self.row_reduce(acc, indent)
            return
        lanes, rows = tr_n // 32, self.p.rows_per_block
        for acc in run:
            self.butterfly(acc, indent, 16, "0xffffffffu")
            self.publish_fields(
                acc, "sm", rows * lanes, "(tr & 31) == 0", f"to * {lanes} + (tr >> 5)", indent
            )
        self.w(f"{indent}__syncthreads();")
        for acc in run:
            self.gather_warp_partials(acc, indent, lanes, barrier=False)
        self.w(f"{indent}__syncthreads();")

    def row_reduce(self, acc: _Accumulator, indent: str) -> None:
        """acc<i> of every thread of the row, the total in every thread: across the block,
        then (a row over a cluster) across the cluster."""
        self.block_reduce(acc, indent)
        if self.cluster == 1:
            return
        # Each block's total in its own shared cell (one per accumulator and field: a later
        # pass never writes a cell an earlier pass's readers may still read; the row's last
        # cluster barrier orders them against the next row). After the barrier every thread
        # combines the cluster's cells in rank order: each block gets the same total, bit
        # for bit, whichever block finished first.
        fields, a = _fields(acc), f"acc{acc.index}"
        self.publish_fields(acc, "cx", self.p.rows_per_block, "tr == 0", "to", indent)
        self.w(f"{indent}tf_cluster_sync();")

        def cell(rank: str) -> str:
            return _struct_of(
                acc,
                [
                    f"*tf_cluster_map(&cx{acc.index}{'_' + f_ if f_ else ''}[to], {rank})"
                    for f_ in fields
                ],
            )

        self.w(f"{indent}{a} = {cell('0')};")
        self.w(f"{indent}#pragma unroll")
        self.w(
            f"{indent}for (unsigned int c = 1; c < {self.cluster}; ++c) {a} = {_combine(acc, a, cell('c'))};"
        )

    def publish_partials(self, indent: str, output: str) -> None:
        """This block's total of every partial field for `output` (an output index), written
        by the row's first thread at [blockIdx.y][output] of the field's workspace array."""
        self.w(f"{indent}if (row_ok && tr == 0) {{")
        self.w(f"{indent}  const long long at = (long long)blockIdx.y * n_out + {output};")
        for acc_index, field, _ in partial_fields(self.s):
            self.w(
                f"{indent}  {_partial_name(acc_index, field)}[at] = acc{acc_index}{'.' + field if field else ''};"
            )
        self.w(f"{indent}}}")

    def combine_shares(self, acc: _Accumulator, indent: str, output: str) -> None:
        """acc<i> of the last block: this thread's shares (tr, tr + threads_r, ...) of
        `output`'s partials combined in share order, before the block reduction."""
        a, t = f"acc{acc.index}", acc.ctype.cuda
        self.w(f"{indent}{_acc_type(acc)} {a} = {_init(acc)};")
        self.w(f"{indent}if (row_ok) {{")
        self.w(f"{indent}  for (int s = tr; s < {self.p.split}; s += {self.p.threads_r}) {{")
        self.w(f"{indent}    const long long at = (long long)s * n_out + {output};")
        share = _struct_of(
            acc, [f"*(volatile {t}*)&{_partial_name(acc.index, f)}[at]" for f in _fields(acc)]
        )
        self.w(f"{indent}    {a} = {_combine(acc, a, share)};")
        self.w(f"{indent}  }}")
        self.w(f"{indent}}}")

    def operand(self, acc: _Accumulator, indent: str, cached: bool, in_vector: bool) -> str:
        r = self.renderer(indent, cached, in_vector)
        v = r.value(acc.operand)
        self.lines.extend(r.lines)
        return v if r.dtype(acc.operand) is acc.ctype else f"tf_cast<{acc.ctype.cuda}>({v})"

    def lanes_batch(self, accs: Sequence[_Accumulator]) -> bool:
        """True where the lanes' totals of `accs` are combined across the row's threads in
        one tree (`lanes_block_reduce`): plain accumulators, an outer layout's threads along
        y of one block, and their arrays within LANE_BATCH_SHARED_BYTES."""
        tr_n = self.p.threads_r
        threads = tr_n * self.p.rows_per_block
        taken = self.lane_batch_bytes + sum(self.vec * threads * a.ctype.itemsize for a in accs)
        return (
            self.along_outputs
            and not self.p.inner
            and self.cluster == 1
            and tr_n > 1
            and all(a.family in ("sum", "prod", "max", "min") for a in accs)
            and taken <= min(LANE_BATCH_SHARED_BYTES, LANE_BATCH_THREAD_BYTES * threads)
        )

    def lanes_block_reduce(self, accs: Sequence[_Accumulator], indent: str) -> None:
        """Each lane's acc<i>_v[v] of `accs` combined across the row's threads (threads_r
        along y) in one tree for all lanes and accumulators: a barrier a level, not a
        barrier a level for each lane (softmax's two reductions over a vector of 4 outputs
        took 40). The same tree as `block_reduce`'s, so the same bits a lane. H100, 24 cells
        old against new: geomean 0.986, softmax over the middle dim fp32 [1024, 64, 64] 20.3 ->
        16.4 us (torch.compile 17.6), bf16 [65536, 32, 64] 219.3 -> 247.6 (415.5; 104 registers
        a thread, not 96): `benchmarks/README.md`, "Every lane's totals in one tree"."""
        tr_n, rows, vec = self.p.threads_r, self.p.rows_per_block, self.vec

        def at(acc: _Accumulator, k: str) -> str:
            """Lane v's cell of the row's thread k: a warp's outputs (`to`) in consecutive
            words, as in `block_reduce`."""
            return f"sv{acc.index}[(v * {tr_n} + {k}) * {rows} + to]"

        for acc in accs:
            self.w(f"{indent}__shared__ {acc.ctype.cuda} sv{acc.index}[{vec * tr_n * rows}];")
            self.lane_batch_bytes += vec * tr_n * rows * acc.ctype.itemsize
        self.w(f"{indent}#pragma unroll")
        self.w(f"{indent}for (int v = 0; v < {vec}; ++v) {{")
        for acc in accs:
            self.w(f"{indent}  {at(acc, 'tr')} = acc{acc.index}_v[v];")
        self.w(f"{indent}}}")
        self.w(f"{indent}__syncthreads();")
        if getattr(self.p, "tree_loop", False):
            self.w(f"{indent}#pragma unroll 1")
        self.w(f"{indent}for (int s = {tr_n // 2}; s > 0; s >>= 1) {{")
        self.w(f"{indent}  if (tr < s) {{")
        self.w(f"{indent}    #pragma unroll")
        self.w(f"{indent}    for (int v = 0; v < {vec}; ++v) {{")
        for acc in accs:
            cell, other = at(acc, "tr"), at(acc, "tr + s")
            self.w(f"{indent}      {cell} = {_combine(acc, cell, other)};")
        self.w(f"{indent}    }}")
        self.w(f"{indent}  }}")
        self.w(f"{indent}  __syncthreads();")
        self.w(f"{indent}}}")
        self.w(f"{indent}#pragma unroll")
        self.w(f"{indent}for (int v = 0; v < {vec}; ++v) {{")
        for acc in accs:
            self.w(f"{indent}  acc{acc.index}_v[v] = {at(acc, '0')};")
        self.w(f"{indent}}}")
        self.w(f"{indent}__syncthreads();")

    def lane_totals_of(
        self,
        accs: list[_Accumulator],
        indent: str,
        lane_value=None,  # noqa: ANN001
    ) -> None:
        """With a vector along the outputs, after a pass: each lane's totals of `accs`
        combined across the row's threads and finalized, one lane after another, and kept in
        red<i>_<k>_v[v] (inv<i>_<k>_v[v]) for the passes and stores after it.
        `lane_value(acc, indent)` emits acc<i> of lane v (default: acc<i>_v[v])."""
        for acc in accs:
            for k, r in enumerate(acc.reduces):
                self.w(f"{indent}{r.dtype.cuda} red{acc.index}_{k}_v[{self.vec}];")
                if (acc.index, k) in self.divided_by:
                    ct = self.divided_by[(acc.index, k)].cuda
                    self.w(f"{indent}{ct} inv{acc.index}_{k}_v[{self.vec}];")
        batched = lane_value is None and self.lanes_batch(accs)
        if batched:
            self.lanes_block_reduce(accs, indent)
        self.w(f"{indent}#pragma unroll")
        self.w(f"{indent}for (int v = 0; v < {self.vec}; ++v) {{")
        inner = indent + "  "
        for acc in accs:
            if lane_value is None:
                self.w(f"{inner}{_acc_type(acc)} acc{acc.index} = acc{acc.index}_v[v];")
                if not batched:
                    self.row_reduce(acc, inner)
            else:
                lane_value(acc, inner)
            self.finalize(acc, inner)
            for k in range(len(acc.reduces)):
                self.w(f"{inner}red{acc.index}_{k}_v[v] = red{acc.index}_{k};")
                if (acc.index, k) in self.divided_by:
                    self.w(f"{inner}inv{acc.index}_{k}_v[v] = inv{acc.index}_{k};")
        self.w(f"{indent}}}")

    def lane_reduced_stores(self, indent: str) -> None:
        """With a vector along the outputs and the totals kept a lane: the reduced outputs of
        each lane, those stored a vector at a time gathered in vo<k> and written after."""
        if not any(st.reduced for st in self.s.stores):
            return
        for k, st in enumerate(self.s.stores):
            if st.reduced and k in self.vec_stores:
                self.w(f"{indent}TfVec<{st.dtype.cuda}, {self.vec}> vo{k};")
        self.w(f"{indent}#pragma unroll")
        self.w(f"{indent}for (int v = 0; v < {self.vec}; ++v) {{")
        self.reduced_stores(indent + "  ")
        self.w(f"{indent}}}")
        self.write_reduced_vectors(indent)

    def two_pass_variance(self, acc: _Accumulator, indent: str) -> None:
        """With the row in registers, mean first and then squared deviations: as exact as
        the reference's two passes, and no division per element (Welford's). With a vector
        along the outputs, each lane's sums apart (`lane_totals_of` finalizes them)."""
        if self.lane_totals:
            self.two_pass_variance_lanes(acc, indent)
            return
        t = acc.ctype.cuda
        total = _Accumulator("sum", acc.operand, acc.ctype, 0, f"{acc.index}s", [])
        squares = _Accumulator("sum", acc.operand, acc.ctype, 0, f"{acc.index}q", [])
        self.w(f"{indent}{t} acc{total.index} = {_init(total)};")

        def add_value(ind: str, cached: bool, in_vector: bool) -> None:
            self.w(f"{ind}acc{total.index} += {self.operand(acc, ind, cached, in_vector)};")

        self.element_loop(add_value, indent, reads=[acc.operand])
        self.row_reduce(total, indent)
        self.w(f"{indent}const {t} mean{acc.index} = {per_element(f'acc{total.index}', t)};")
        self.w(f"{indent}{t} acc{squares.index} = {_init(squares)};")

        def add_square(ind: str, cached: bool, in_vector: bool) -> None:
            x = self.operand(acc, ind, cached, in_vector)
            self.w(f"{ind}{{ const {t} d = {x} - mean{acc.index}; acc{squares.index} += d * d; }}")

        self.element_loop(add_square, indent, reads=[acc.operand])
        self.row_reduce(squares, indent)
        self.w(
            f"{indent}TfWelford<{t}> acc{acc.index}{{mean{acc.index}, acc{squares.index}, ({t})n_red}};"
        )

    def two_pass_variance_lanes(self, acc: _Accumulator, indent: str) -> None:
        """`two_pass_variance` for a vector of `vec` outputs a lane: sums and squared
        deviations in <name>_v[v], each lane's combined across the row in turn."""
        t, i, vec = acc.ctype.cuda, acc.index, self.vec
        total = _Accumulator("sum", acc.operand, acc.ctype, 0, f"{i}s", [])
        squares = _Accumulator("sum", acc.operand, acc.ctype, 0, f"{i}q", [])
        for a in (total, squares):
            self.w(f"{indent}{t} acc{a.index}_v[{vec}];")
            self.w(f"{indent}#pragma unroll")
            self.w(f"{indent}for (int v = 0; v < {vec}; ++v) acc{a.index}_v[v] = {_init(a)};")

        def add_value(ind: str, cached: bool, in_vector: bool) -> None:
            self.w(f"{ind}acc{total.index}_v[v] += {self.operand(acc, ind, cached, in_vector)};")

        self.element_loop(add_value, indent, reads=[acc.operand])
        # Both trees or neither: the bounds are checked for the two arrays together.
        batched = self.lanes_batch([total, squares])
        if batched:
            self.lanes_block_reduce([total], indent)
        self.w(f"{indent}{t} mean{i}_v[{vec}];")
        self.w(f"{indent}#pragma unroll")
        self.w(f"{indent}for (int v = 0; v < {vec}; ++v) {{")
        self.w(f"{indent}  {t} acc{total.index} = acc{total.index}_v[v];")
        if not batched:
            self.row_reduce(total, indent + "  ")
        self.w(f"{indent}  mean{i}_v[v] = {per_element(f'acc{total.index}', t)};")
        self.w(f"{indent}}}")

        def add_square(ind: str, cached: bool, in_vector: bool) -> None:
            x = self.operand(acc, ind, cached, in_vector)
            self.w(
                f"{ind}{{ const {t} d = {x} - mean{i}_v[v]; acc{squares.index}_v[v] += d * d; }}"
            )

        self.element_loop(add_square, indent, reads=[acc.operand])
        if batched:
            self.lanes_block_reduce([squares], indent)

        def lane_value(a: _Accumulator, ind: str) -> None:
            self.w(f"{ind}{t} acc{squares.index} = acc{squares.index}_v[v];")
            if not batched:
                self.row_reduce(squares, ind)
            self.w(f"{ind}TfWelford<{t}> acc{i}{{mean{i}_v[v], acc{squares.index}, ({t})n_red}};")

        self.lane_totals_of([acc], indent, lane_value)

    def finalize(self, acc: _Accumulator, indent: str) -> None:
        t = acc.ctype.cuda
        a = f"acc{acc.index}"
        for k, r in enumerate(acc.reduces):
            if acc.family == MAX_EXP_SUM:
                total = f"tf_max_exp_sum_total<{t}>({a}, (long long)n_red)"
                value = {
                    OpKind.MAX: f"{a}.max",
                    OpKind.SUM: total,
                    OpKind.MEAN: per_element(total, t),
                }[r.op]
            elif r.op in (OpKind.SUM, OpKind.PROD, OpKind.MAX, OpKind.MIN):
                value = a
            elif r.op is OpKind.MEAN:
                value = per_element(a, t)
            elif r.op is OpKind.VAR_MEAN and r.output == 1:
                value = f"{a}.mean"
            else:
                count = f"(n_red > {r.correction} ? n_red - {r.correction} : 0)"
                value = per_element(f"{a}.m2", t, count)
            self.w(
                f"{indent}const {r.dtype.cuda} red{acc.index}_{k} = tf_cast<{r.dtype.cuda}>(({t})({value}));"
            )
            if (acc.index, k) in self.divided_by:
                ct = self.divided_by[(acc.index, k)].cuda
                self.w(
                    f"{indent}const {ct} inv{acc.index}_{k} = ({ct})1 / tf_cast<{ct}>(red{acc.index}_{k});"
                )

    def row_opening(self, indent: str) -> None:
        """row, row_ok, rowc and the outer indices of this lane's row: its `q`-th of the tile
        with rows a lane (`adjacent_lane_rows`: the q-th of its own), else the tile's
        `to`-th."""
        it = self.itype
        n_rows = f"(n_out / {self.vec})" if self.along_outputs else "n_out"
        if self.adjacent_rows:
            self.w(f"{indent}const {it} row = row_base + ({it})to * {self.lane_rows} + q;")
        else:
            step = f" + ({it})q * {self.p.rows_per_block}" if self.lane_rows > 1 else ""
            self.w(f"{indent}const {it} row = row_base{step} + to;")
        self.w(f"{indent}const bool row_ok = row < {n_rows};")
        self.w(f"{indent}const {it} rowc = row_ok ? row : 0;")
        if self.along_outputs:
            last = self.last
            self.lines += unravel_lines(
                self.outer,
                "rowc",
                lambda j: f"(E{j} / {self.vec})" if j == last else f"E{j}",
                lambda j: f"i{j}_v" if j == last else f"i{j}",
                it,
                indent,
            )
            self.w(f"{indent}const {it} i{last} = i{last}_v * {self.vec};")
        else:
            self.unravel(self.outer, "rowc", indent)

    def registers(self, indent: str) -> None:
        """cl<k>: this row's cached elements of input k (with rows a lane, a reference to
        the row's slice of cl<k>_q, declared once a tile)."""
        for k in self.cached_loads if self.cache else []:
            if k in self.hoisted:
                continue  # declared and loaded before the row loop
            t = self.held_dtype(k).cuda
            if self.lane_rows > 1:
                self.w(f"{indent}{t} (&cl{k})[{self.slots}] = cl{k}_q[q];")
            else:
                self.w(f"{indent}{t} cl{k}[{self.slots}];")

    def prefetch_row(self, indent: str) -> None:
        """nx<k>: this lane's share of the row `row_opening` opened, raw vectors (zero past
        the row's end or past the last row), for the trip that computes it."""
        it, step = self.itype, self.step
        for k in self.prefetch_scalars:
            self.w(f"{indent}if (row_ok) nxs{k} = {self.load_inline(k)};")
        self.w(f"{indent}#pragma unroll")
        self.w(f"{indent}for (int c = 0; c < {self.ept // step}; ++c) {{")
        self.w(
            f"{indent}  const {it} r0 = ({it})c * {self.p.threads_r * step} + ({it})tr * {step};"
        )
        self.w(f"{indent}  if (row_ok && r0 < n_red) {{")
        self.unravel(self.red, "r0", indent + "    ")
        for k in self.prefetch:
            ld = self.s.loads[k]
            vt = f"TfVec<{ld.dtype.cuda}, {self.vec}>"
            text = load_text(ld.buffer, self.offset(k), k in self.streamed, vt)
            self.w(f"{indent}    nx{k}[c] = {text};")
        self.w(f"{indent}  }} else {{")
        for k in self.prefetch:
            self.w(f"{indent}    nx{k}[c] = {{}};")
        self.w(f"{indent}  }}")
        self.w(f"{indent}}}")

    def take_prefetched(self, indent: str, tile: int) -> None:
        """This trip's row from nx<k> into its registers (cl<k>), then the next trip's row
        read into nx<k>, in flight while this one is reduced (its own scope: the next
        row's indices shadow this row's)."""
        it, vec = self.itype, self.vec
        for k in self.prefetch_scalars:
            self.w(f"{indent}const {self.s.loads[k].dtype.cuda} rs{k} = nxs{k};")
        self.w(f"{indent}#pragma unroll")
        self.w(f"{indent}for (int c = 0; c < {self.ept // self.step}; ++c) {{")
        for k in self.prefetch:
            self.w(f"{indent}  #pragma unroll")
            held = self.held_lane(k, f"nx{k}[c]")
            self.w(f"{indent}  for (int v = 0; v < {vec}; ++v) cl{k}[c * {vec} + v] = {held};")
        self.w(f"{indent}}}")
        self.w(f"{indent}{{")
        self.w(f"{indent}  const {it} tf_next = row_base + ({it})(gridDim.x) * {tile};")
        self.w(f"{indent}  {{")
        self.w(f"{indent}    const {it} row_base = tf_next;")
        self.row_opening(indent + "    ")
        self.prefetch_row(indent + "    ")
        self.w(f"{indent}  }}")
        self.w(f"{indent}}}")

    def widened_loads(self) -> set[int]:
        """Held loads of a 2-byte float kept as floats, converted once as the row is loaded:
        every use of such an element computes in float (`ir.dtypes`: half and bfloat16 are
        storage types), and a use that stores it rounds it back exactly. Kept in its own
        type, each element took a register anyway (unpacked from its vector) and was
        converted again in every pass that read it. A weight loaded once for many rows
        (`hoisted`) stays packed: two elements a register, where widened each takes one."""
        return {
            k
            for k in self.cached_loads
            if k not in self.hoisted and self.s.loads[k].dtype in (DataType.BFloat16, DataType.Half)
        }

    def held_dtype(self, k: int) -> DataType:
        """The type a held element of load k is kept in (`widened_loads`)."""
        return DataType.Float if k in self.widened else self.s.loads[k].dtype

    def held_value(self, k: int, value: str) -> str:
        """`value`, an element of load k, as its register holds it."""
        return f"tf_cast<float>({value})" if k in self.widened else value

    def held_lane(self, k: int, vector: str) -> str:
        """Lane v of `vector` (a TfVec of load k's elements) as its register holds it."""
        if k in self.widened and self.widens_by_words(k):
            return f"tf_b2f_lane({vector}, v)"
        return self.held_value(k, f"{vector}.v[v]")

    def widens_by_words(self, k: int) -> bool:
        """Whether load k's vectors are bfloat16 in whole 32-bit words (`tf_b2f_lane`), along
        a row. Not a vector of outputs a lane (a column sum): there ptxas kept a lane's output
        vector in local memory (col bf16 [21, 2312016] 30.4 -> 33.2 us, H200)."""
        return (
            self.s.loads[k].dtype is DataType.BFloat16
            and self.vec % 2 == 0
            and not self.along_outputs
        )

    def filled_loads(self, hoisted: bool) -> list[int]:
        """The cached loads a fill loads: those the row loop does not change
        (`hoisted_loads`), or the others."""
        return [k for k in self.cached_loads if (k in self.hoisted) is hoisted]

    def one_row_invariants(self) -> set[int]:
        """With one row a lane and `hoist_invariants` (`schedulers.normalization.Params`), the
        held row's inputs that no row moves (a norm's weight and bias): held in registers from
        before the row loop (`hoisted_loads`), as rows a lane hold them, their loads go out
        with the row's, not after its reductions."""
        if (
            self.lane_rows > 1
            or not getattr(self.p, "hoist_invariants", False)
            or not self.hoistable_layout()
        ):
            return set()
        return {
            k
            for k, ld in enumerate(self.s.loads)
            if k not in self.guarded and same_in_every_row(self.s, ld)
        }

    def hoistable_layout(self) -> bool:
        """Whether the layout can load a row's invariant inputs once, before the row loop."""
        return (
            self.cache
            and not self.along_outputs
            and self.cluster == 1
            and not self.peel  # its elements go to threads row by row (`held_peeled`)
        )

    def hoisted_loads(self) -> set[int]:
        """Cached loads whose elements are the same in every row (a norm's weight, read by
        several passes, or by the rows a lane holds): loaded into registers once, before a
        block walks its rows, where each row would load them again (a grid-stride loop:
        column sums in parts, a capped grid; rows a lane, which held a copy a row)."""
        if not self.hoistable_layout():
            return set()
        return {k for k in self.cached_loads if same_in_every_row(self.s, self.s.loads[k])}

    def fill_registers(self, indent: str, hoisted: bool = False) -> None:
        """Declares (hoisted) and zeroes the cached loads' registers, then loads them:
        `hoisted` the row-invariant ones before the row loop (no row to check), else the
        others in it."""
        loads = self.filled_loads(hoisted) if self.cache else []
        if not loads:
            return
        for k in loads:
            if hoisted:
                self.w(f"{indent}{self.held_dtype(k).cuda} cl{k}[{self.slots}];")
            self.w(f"{indent}#pragma unroll")
            self.w(
                f"{indent}for (int e = 0; e < {self.slots}; ++e) cl{k}[e] = {{}};"
            )  # {} not T{}: long long{} does not parse
        self.element_loop(None, indent, fill=True, hoisted=hoisted)

    def row_body(self, indent: str) -> None:
        """A row's passes (one per accumulator), its reduced outputs and its full-size ones."""
        s, it = self.s, self.itype
        for e, (n, _) in self.kept_values.items():
            self.w(f"{indent}{e.dtype.cuda} kv{n}[{self.slots}];")  # type: ignore[attr-defined]  (an EOp)
        for run in self.pass_groups():
            acc = run[0]
            self.phase = self.accs.index(acc)
            if acc.family == "welford" and self.cache:
                self.two_pass_variance(acc, indent)
                if not self.lane_totals:
                    self.finalize(acc, indent)
                continue
            self.reduce_passes(run, indent)
            if self.lane_totals:
                self.lane_totals_of(run, indent)
                continue
            self.row_reduce_run(run, indent)
            for acc in run:
                self.finalize(acc, indent)
        self.phase = len(self.accs)
        full = [(k, st) for k, st in enumerate(s.stores) if not st.reduced]
        if self.lane_totals:
            self.lane_reduced_stores(indent)
        else:
            self.reduced_stores(indent)
        if not full:
            return
        vt = {k: f"TfVec<{st.dtype.cuda}, {self.vec}>" for k, st in full}
        once = self.row_invariants([st.expr for _, st in full], indent)

        def open_outputs(ind: str) -> None:
            for k, _ in full:
                if k in self.vec_stores:
                    self.w(f"{ind}{vt[k]} vo{k};")

        def store(ind: str, cached: bool, in_vector: bool) -> None:
            r = self.renderer(ind, cached, in_vector)
            r.memo.update(once)
            for k, st in full:
                v = r.value(st.expr)
                cast = v if r.dtype(st.expr) is st.dtype else f"tf_cast<{st.dtype.cuda}>({v})"
                if k in self.vec_stores:
                    r.emit(f"vo{k}.v[v] = {cast};")
                elif k in self.staged_out:
                    offset = render_affine(st.offset, "S", k, self.var_name(True), it)
                    index = self.staged_row_at(self.var_name(True)(self.last))
                    r.emit(f"if (tf_stage) tf_ss{k}[{index}] = {cast};")
                    r.emit(f"else B{st.buffer}[{offset}] = {cast};")
                else:
                    offset = render_affine(st.offset, "S", k, self.var_name(True), it)
                    if self.rereads:
                        r.emit(f"tf_st_stream(&B{st.buffer}[{offset}], {st.dtype.cuda}({cast}));")
                    else:
                        r.emit(f"B{st.buffer}[{offset}] = {cast};")
            self.lines.extend(r.lines)

        def write_outputs(ind: str) -> None:
            for k, st in full:
                if k in self.vec_stores:
                    offset = render_affine(st.offset, "S", k, lambda j: f"i{j}", it)
                    target = f"reinterpret_cast<{vt[k]}*>(&B{st.buffer}[{offset}])"
                    if k in self.staged_out:
                        at = self.staged_row_at(f"i{self.last}")
                        shared = f"reinterpret_cast<{vt[k]}*>(&tf_ss{k}[{at}])"
                        self.w(f"{ind}if (tf_stage) *{shared} = vo{k};")
                        self.w(f"{ind}else *{target} = vo{k};")
                    elif self.rereads:
                        self.w(f"{ind}tf_st_stream({target}, vo{k});")
                    else:
                        self.w(f"{ind}*{target} = vo{k};")

        self.element_loop(
            store,
            indent,
            chunk_open=open_outputs,
            chunk_close=write_outputs,
            reads=[st.expr for _, st in full],
        )

    def row_invariants(self, roots: Sequence[Expr], indent: str) -> dict[int, str]:
        """The ops of `roots` computed from the row's reductions, scalars and constants alone
        (a layernorm's rsqrt(var + eps)), each emitted once at the row's scope: id -> name,
        for the element loop's renderer. Emitted inside the loop they were computed an
        element at a time, the compiler unable to share them across the elements' bounds
        checks (column_layernorm bf16 [23, 350001]: 25 MUFU.RSQ for 24 elements; 1128 SASS
        instructions -> 984). None with a lane's totals (red<i>_<k>_v[v]: a lane's own) or
        reading anything an element loads. H200, judge.py on 9 cells whose code it changes:
        geomean 0.981, none slower past 1.004 (column_layernorm bf16 [12, 540329] 16.7 ->
        15.8 us, layernorm bf16 [262144, 32] 14.6 -> 14.0)."""
        if self.lane_totals:
            return {}
        invariant: dict[int, bool] = {}

        def row_only(e: Expr) -> bool:
            if id(e) not in invariant:
                if isinstance(e, EReduce | EScalar | EConst):
                    invariant[id(e)] = True
                elif isinstance(e, EOp) and e.op not in GroupOp.RANDOM:
                    invariant[id(e)] = all(row_only(x) for x in e.operands)
                else:  # a load, an index, a guard, a gather
                    invariant[id(e)] = False
            return invariant[id(e)]

        r = self.renderer(indent, element_cached=False)
        stack = list(roots)
        while stack:
            e = stack.pop()
            if isinstance(e, EOp) and row_only(e) and e not in self.kept_values:
                r.value(e)
            else:
                stack.extend(_children(e))
        self.lines.extend(r.lines)
        return dict(r.memo)

    def emit(self) -> str:
        p, it = self.p, self.itype
        block = p.threads_r * p.rows_per_block
        self.w(kernel_opening(self.name, self.args, block, self.cluster, self.min_blocks))
        n_out = " * ".join(f"({it})E{j}" for j in self.outer) or f"({it})1"
        n_red = " * ".join(f"({it})E{j}" for j in self.red) or f"({it})1"
        self.w(f"  const {it} n_out = {n_out};")
        self.w(f"  const {it} n_red = {n_red};")
        if p.inner:
            self.w("  const int tr = threadIdx.x; const int to = threadIdx.y;")
        else:
            self.w("  const int to = threadIdx.x; const int tr = threadIdx.y;")
        if self.split > 1:
            self.split_opening()
        if self.cluster > 1:
            self.w("  const unsigned int tf_rank = tf_cluster_rank();")
            self.share_bounds(self.cluster, "tf_rank")
        self.shared_rows()
        staged = self.stage_in + self.stage_out
        held = p.threads_r * p.rows_per_block * self.ept
        if staged:
            self.lines += staged_rows.declarations(
                staged, self.args, self.s.extents[0], held, p.threads_r * self.ept, it
            )
        # A lane's row: one output, or (a vector along the outputs) `vec` consecutive ones,
        # the innermost index the vector's first; a tile is rows_per_block rows, or that many
        # times rows_per_lane with rows a lane.
        n_rows = f"(n_out / {self.vec})" if self.along_outputs else "n_out"
        tile = p.rows_per_block * self.lane_rows
        # A cluster's blocks share their rows: the cluster's index, not the block's, walks them.
        per = f" / {self.cluster}" if self.cluster > 1 else ""
        self.declare_column_partials("  ")
        if self.hoisted:
            self.fill_registers("  ", hoisted=True)
        if self.prefetch:
            # The first row's share, read before the loop; each trip reads the next one's.
            for k in self.prefetch:
                vt = f"TfVec<{self.s.loads[k].dtype.cuda}, {self.vec}>"
                self.w(f"  {vt} nx{k}[{self.ept // self.step}];")
            for k in self.prefetch_scalars:
                self.w(f"  {self.s.loads[k].dtype.cuda} nxs{k} = {{}};")
            self.w("  {")
            self.w(f"    const {self.itype} row_base = ({self.itype})(blockIdx.x) * {tile};")
            self.row_opening("    ")
            self.prefetch_row("    ")
            self.w("  }")
        self.w(
            f"  for ({it} row_base = ({it})(blockIdx.x{per}) * {tile}; row_base < {n_rows}; "
            f"row_base += ({it})(gridDim.x{per}) * {tile}) {{"
        )
        if self.lane_rows > 1:
            # Every row of the lane loaded first (their loads in flight together), then each
            # computed and stored in turn, its registers a slice of cl<k>_q.
            for k in self.cached_loads:
                if k in self.hoisted:
                    continue  # one copy for the lane's rows, loaded before the row loop
                t = self.held_dtype(k).cuda
                self.w(f"    {t} cl{k}_q[{self.lane_rows}][{self.slots}];")
            for k, width in self.lane_stores.items():
                vt = f"TfVec<{self.s.stores[k].dtype.cuda}, {width}>"
                self.w(f"    {vt} vq{k}[{self.lane_rows // width}];")
            for fill in (True, False):
                self.w("    #pragma unroll")
                self.w(f"    for (int q = 0; q < {self.lane_rows}; ++q) {{")
                self.row_opening("      ")
                self.registers("      ")
                if fill:
                    self.fill_registers("      ")
                elif self.along_outputs:
                    for run in self.pass_groups():
                        self.phase = self.accs.index(run[0])
                        self.reduce_passes(run, "      ")
                    self.output_lanes("      ")
                else:
                    self.row_body("      ")
                self.w("    }")
            self.lane_vector_stores("    ")
            self.w("  }")
            self.w("}")
            return "\n".join(self.lines)
        if staged:
            self.lines += staged_rows.copy_in(
                self.stage_in, "    ", block, p.rows_per_block, held, it
            )
        self.row_opening("    ")
        self.registers("    ")
        if self.prefetch:
            self.take_prefetched("    ", tile)
        else:
            self.fill_registers("    ")
        if self.split > 1:
            self.split_body()
        elif self.along_outputs and not self.lane_totals:
            for run in self.pass_groups():
                self.phase = self.accs.index(run[0])
                self.reduce_passes(run, "    ")
            self.output_lanes("    ")
        else:
            self.row_body("    ")
            self.add_column_partials("    ")
            self.lines += staged_rows.copy_out(
                self.stage_out, "    ", block, p.rows_per_block, held, it
            )
        if self.cluster > 1:
            # No block reuses its cells for the next row, or exits (its shared memory gone),
            # while another block of the cluster may still read them.
            self.w("    tf_cluster_sync();")
        self.w("  }")
        self.store_column_partials("  ")
        self.w("}")
        return "\n".join(self.lines)

    # -- column sums taken in parts (planning.column_partials) -----------------------------
    def partial_slot(self, j: int, element: str) -> str:
        """This thread's partial sum j of its held element `element`: a register, or its own
        slot of shared memory (schedulers.normalization.partials_in_shared), laid out
        [element][thread] so that a warp's slots are consecutive words."""
        if self.shared_partials:
            threads = self.p.threads_r * self.p.rows_per_block
            return f"cps{j}[({element}) * {threads} + tf_tid]"
        return f"cp{j}[{element}]"

    def declare_column_partials(self, indent: str) -> None:
        """This thread's sums of its held columns over the rows its group walks, zeroed."""
        if self.shared_partials:
            self.w(f"{indent}extern __shared__ __align__(16) unsigned char tf_smem[];")
            self.w(f"{indent}const int tf_tid = (int)(threadIdx.y * blockDim.x + threadIdx.x);")
            offsets = partial_shared_offsets(self.s, self.p)
            for j, part in enumerate(self.s.column_partials):
                t = part.dtype.cuda
                self.w(
                    f"{indent}{t}* const cps{j} = reinterpret_cast<{t}*>(tf_smem + {offsets[j]});"
                )
        for j, part in enumerate(self.s.column_partials):
            if not self.shared_partials:
                self.w(f"{indent}{part.dtype.cuda} cp{j}[{self.slots}];")
            self.w(f"{indent}#pragma unroll")
            self.w(
                f"{indent}for (int e = 0; e < {self.slots}; ++e) {self.partial_slot(j, 'e')} = 0;"
            )

    def add_column_partials(self, indent: str) -> None:
        """Each held element's operand of every column sum, added to its column's cp<j>."""
        parts = self.s.column_partials
        if not parts:
            return

        def body(ind: str, cached: bool, in_vector: bool) -> None:
            r = self.renderer(ind, cached, in_vector)
            for j, part in enumerate(parts):
                v = r.value(part.operand)
                if r.dtype(part.operand) is not part.dtype:
                    v = f"tf_cast<{part.dtype.cuda}>({v})"
                r.emit(f"{self.partial_slot(j, f'c * {self.vec} + v')} += {v};")
            self.lines.extend(r.lines)

        self.element_loop(body, indent, reads=[part.operand for part in parts])

    def store_column_partials(self, indent: str) -> None:
        """cp<j> to row `blockIdx.x * rows_per_block + to` (the thread's row group) of the
        [column_groups, n_red] partial sums: every column of every group is written (the
        grid is column_groups / rows_per_block blocks, a row's threads hold all its columns)."""
        parts = self.s.column_partials
        if not parts:
            return
        it, step = self.itype, self.step
        self.w(f"{indent}{{")
        self.w(
            f"{indent}  const long long tf_group = (long long)blockIdx.x * {self.p.rows_per_block} + to;"
        )
        self.w(f"{indent}  #pragma unroll")
        self.w(f"{indent}  for (int c = 0; c < {self.ept // step}; ++c) {{")
        self.w(
            f"{indent}    const {it} r0 = ({it})c * {self.p.threads_r * step} + ({it})tr * {step};"
        )
        self.w(f"{indent}    if (r0 < n_red) {{")
        self.w(f"{indent}      #pragma unroll")
        self.w(f"{indent}      for (int v = 0; v < {self.vec}; ++v) {{")
        for j, part in enumerate(parts):
            self.w(
                f"{indent}        B{part.buffer}[tf_group * n_red + r0 + v] = "
                f"{self.partial_slot(j, f'c * {self.vec} + v')};"
            )
        self.w(f"{indent}      }}")
        self.w(f"{indent}    }}")
        self.w(f"{indent}  }}")
        self.w(f"{indent}}}")


def emit_reduction(
    segment: Segment,
    name: str,
    args: list[KernelArg],
    p,
    persistent: bool,  # noqa: ANN001
    min_blocks: int = 0,
) -> tuple[str, int]:
    """The kernel's source and the dynamic shared memory its launch needs; `min_blocks`
    the blocks an SM its launch bounds ask for (`kernel_opening`)."""
    emitter = _Emitter(segment, name, args, p, persistent, min_blocks)
    return emitter.emit(), emitter.dynamic_shared_bytes()
