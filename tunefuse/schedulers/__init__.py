"""Schedulers: for each kind of segment, a frozen Params dataclass, a default heuristic
from device properties and sizes, a validity check, and an Optuna search space."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from tunefuse.device_info import DeviceInfo
from tunefuse.planning.kernel_ir import SchedulerKind
from tunefuse.planning.segment import Segment
from tunefuse.schedulers import normalization, pointwise, reduction, transpose


@runtime_checkable
class Scheduler(Protocol):
    """What the pipeline asks of a scheduler (each is a module of this package): its frozen
    `Params`, the pairs its tuner trades (`TRADES`), the default heuristic, the validity
    check that refuses what cannot run, the Optuna search space around the default, and the
    launch geometry."""

    Params: type
    # Pairs of parameters whose product a block's size or a row's share keeps: the tuner's
    # local search steps one up and the other down (`tuning.neighbours`).
    TRADES: tuple[tuple[str, str], ...]

    def default_params(self, segment: Segment, device: DeviceInfo) -> Any: ...

    def is_valid(self, segment: Segment, device: DeviceInfo, p: Any) -> str | None: ...

    def search_space(self, segment: Segment, device: DeviceInfo) -> dict: ...

    def grid(
        self, segment: Segment, device: DeviceInfo, p: Any
    ) -> tuple[tuple[int, int, int], tuple[int, int, int], int]: ...


# Bump when a default heuristic changes: stored launch plans (whose kernels the defaults may
# have chosen) are then planned again, so that a new process runs the new defaults. Tuned
# records and binaries stay: the generated code for given params did not change.
# 2: contiguous reductions, 2 vectors a thread on rows of 256 vectors or more, no grid cap.
# 3: reductions whose rows cannot fill the GPU are split across blocks (split).
# 4: inner rows of at most 32 vectors one vector a lane; reductions of extent-1 dims are
#    pointwise (segmentation).
# 6: normalization rows too long for registers staged in shared memory (shared_row); rows
#    of at most 32 vectors laid out as the reduction scheduler lays them (lanes below a warp).
# 7: normalizations whose rows a GPU can neither hold on chip nor spread over its SMs are
#    planned as a kernel a pass (plan.py's split policy: the plan depends on the device);
#    var and var_mean over dims of 1 are elementwise (segmentation).
# 8: a reduction is not split where its rows alone fill a quarter of the GPU's threads.
# 9: a max and the sum of exp(x - max) are one accumulator where the row is read from memory
#    each pass (planning/reductions.py): logsumexp is a reduction (one pass, any layout, split
#    across blocks), a split softmax's first kernel computes both.
# 10: rows a lane (rows_per_lane): a lane whose share of a row is a few bytes takes several
#    rows, all loaded before any is reduced (reductions and normalizations).
# 11: strided reductions take vectors of outputs where that costs no parallelism, split (now
#    valid with such vectors) by the bytes their loads keep in flight.
# 12: normalizations of rows of at most 32 vectors take blocks of 128 threads (were 512).
# 13: short strided columns trade outputs a block for threads a column until half the GPU's
#    threads are busy; a kernel whose inputs a later kernel reads again (within half the
#    L2) does not load them evict-first.
# 14: a strided reduction unrolls at most as many chunks as a thread's column has (a Welford
#    pass merges a trip's chunks at once: codegen 15).
# 15: normalization rows of 4-byte elements too long for one block's registers and shared
#    memory are held over a thread-block cluster on sm_90 (cluster), where its blocks span
#    at most two SMs.
# 16: a 2-D pointwise kernel whose operands broadcast along the rows would read them again
#    from memory for every row block (a pass over the inner dims past a quarter of the L2)
#    runs one wave of blocks whose threads loop over the rows; rows of at most 32 vectors
#    take at most 2 vectors a lane (were 4), reductions and normalizations alike; skinny
#    transposes take the pointwise kernel (output rows under 64; input rows of at most 32
#    bytes, looped over)
#    or 16-tiles (input rows of at most 16 elements of 4 bytes or more), and tall ones stay
#    tiled (codegen 16: one grid dim of tiles).
# 17: a flat pointwise kernel whose vector is a whole innermost row of fewer than 16 bytes
#    takes several rows a group (`pointwise.Params.rows`, codegen 17; loads behind a cat's
#    guard read element by element), in place of a 2-D kernel; a transpose's pointwise
#    kernel too; a skinny transpose's search space holds its pointwise params. A
#    normalization along a strided dim (the innermost dim not reduced) takes the outputs
#    along x (inner=False), its row in the registers of threads along y.
# 18: plans: outputs of each shape whose reductions share a space are a kernel each (dx
#    over the rows, dw and db over the columns of layernorm's backward); a gather reads its
#    table's input through elementwise ops of it; a value reshaped from the reduction's
#    space is stored from its kernel (GroupNorm); reshape indices simplify to affine ones.
#    Defaults: a reduction is laid out by the bytes its loads read unit-stride along the
#    reduced dim; loads that are not affine no longer narrow a vector; rows of 256 vectors
#    or more take as many threads as leave each thread its chunks whole; a row of 2-byte
#    elements holding two or more inputs takes at most 16 elements a thread.
# 19: strided normalizations (the innermost dim not reduced): rows more than 16 threads
#    would hold are re-read (16 threads a row and 64 outputs a block, or 32 and 32 where
#    blocks of 32 outputs are fewer than 16 an SM); held rows take rows a lane while a
#    lane's loads are under 32 bytes (rows a lane in the outer layout, vector 1). Long
#    contiguous rows whose vector is under 16 bytes (odd lengths) take more chunks a trip,
#    up to 8 and as many as a thread's share holds, so that a thread keeps 16 bytes in
#    flight (sums, not a max-and-sum or a Welford). A var_mean of contiguous rows no vector
#    fits, of 257 to 4096 elements, runs as a normalization (two passes over registers).
#    Strided rows of at most 128 take a vector of 4 outputs a lane (codegen 19), 8
#    elements a thread at most, blocks of 128 threads.
# 20: a column sum over the rows of a normalization's [R, C] space (layernorm's and rmsnorm's
#    dw, db) is summed in parts by the normalization holding each row, in G row groups (one
#    wave of its blocks), then a reduction of the [G, C] partials (planning.column_partials),
#    where the partials cost at most half the reads they save; partial sums in shared memory
#    where registers would spill; rows of 33-128 vectors of 2-byte elements held a vector a
#    thread, a row a block.
# 21: a row held in registers whose power-of-two thread count leaves vector slots idle takes
#    the whole number of warps that leaves the fewest (at most as many elements a thread),
#    where the register estimate keeps more of its rows resident an SM (a backward's rows
#    holding dy and x); short partial rows round up to warps, not to a power of two.
# 22: the register estimate of a kernel taking column sums in parts counts the raw words of
#    the next row it reads ahead (codegen 21): G of such rows (a vector a thread) smaller.
# 23: a normalization of strided rows that its resident blocks re-read from beyond the L2
#    runs as a kernel a pass; strided reductions of 2-byte outputs one a lane that fill the
#    GPU unsplit take 4 a lane, split, where each share still loops long enough; strided
#    rows of 257-1024 whose lanes load 16 bytes (4 fp32 outputs) are held in registers
#    where their blocks fill half the GPU.
# 24: re-read strided rows of 2-byte elements take 2 outputs a lane (4-byte lanes, 64
#    outputs a block of 32 x 32 threads) where such blocks give every SM one, and keep one
#    kernel past the L2 (the kernel-a-pass split applies to one output a lane); re-reading
#    normalizations take evict_first (codegen 22: their output pass and stores evict-first)
#    where their re-reads fit the L2 and their input does not.
# 25: a reduction whose grid is one wave only with every block its threads allow on each
#    SM is compiled to fit them (`min_blocks`, the launch bounds' second argument): 33-40
#    registers a thread had held 3 blocks of 512 threads an SM, not 4, and run a third of a
#    second wave.
# 26: strided reductions whose rows are not a multiple of 128 bytes apart read block rows of
#    up to 256 bytes (`reduction.block_row_bytes`), not 128: a row straddles two lines.
# 27: a strided reduction whose rows are an odd pitch apart takes the widest lane vector whose
#    grid keeps a third of the GPU's resident threads, even where one output a lane fills it
#    (`reduction._odd_pitch_lanes_pay`).
# 28: held strided normalization rows of 2-byte elements too long for 4 outputs a lane of 8
#    elements (129-256) take a pair of outputs a lane of up to 16
#    (`normalization.STRIDED_PAIR_ELEMENTS`), not one output in 512-thread blocks.
# 29: held strided normalization rows whose outputs run at most 16 bytes (L of [N, C, L])
#    put a row's threads along x (`normalization.STRIDED_INNER_RUN_BYTES`).
# 30: a flat pointwise kernel takes its vector along the flat index (`pointwise.Params.
#    flat_vector`, codegen 24) where that moves more of its dense operands at once than a
#    row's vector and its rows a group (odd innermost widths), except where the 2-D kernel
#    loops over the rows to read a broadcast operand once (`rereads_broadcast`) or where a
#    row's vector of 2 or more would give way to scalar reads of two or more loads
#    (`narrowed_loads`: a column layernorm's statistics, weight and bias). A 64-tile
#    transpose whose loads are under 16 bytes takes 4 rows of threads, not 16
#    (`transpose.NARROW_BLOCK_ROWS`). A normalization row that only a block of every thread
#    could hold in registers (one held input, more rows than SMs) is staged in shared
#    memory, 512 threads a block (`normalization.STAGED_ROW_THREADS`).
# 31: a strided reduction of one thread a column whose consecutive reduced elements lie at
#    most a sector apart (the sum over the middle dim of [A, C, L] with L of 8 fp32 or 16
#    bf16 at most) and more than one trip of loads a column loads with the default cache
#    policy, not evict-first (`reduction.shares_sectors_across_trips`).
#    A transpose tile of one element a load is 32 x 32 with 16 bytes of loads a thread
#    (`transpose.SCALAR_TILE`); consecutive tiles run along the writes unless a row of tiles
#    along the reads is short (`transpose.READ_ROW_TILES`, `Params.along_writes`). Short
#    rows of one element a vector take at most 2 elements a lane, 4 where every store is
#    reduced (`reduction.SCALAR_ROW_ELEMENTS`), not lanes of 64-byte runs.
# 33: strided normalization rows too long to hold whose outputs' run is shorter than a warp
#    take a block a slab's outputs, staged where the run is under 8 elements
#    (`normalization.SLAB_THREADS`). A strided reduction of one thread a column of a few
#    bytes takes rows a lane (`reduction._outer_rows_a_lane`).
# 34: a strided reduction whose outputs' run is shorter than its block row (the sum over
#    the middle dim of [A, C, L], L under a warp; at least 4 slabs, columns of 256) takes a
#    block of one slab's outputs, 2-byte outputs in pairs where L is even
#    (`reduction.SLAB_THREADS_R`); a split of blocks under 256 threads counts them as a
#    fraction of one (`reduction.SPLIT_BLOCK_THREADS`).
# 35: a strided reduction of one thread a column takes rows a lane up to 16 loads a lane
#    (`reduction.OUTER_LANE_LOADS`, was 8), since a lane's rows load unpredicated (codegen 27).
# 36: a transpose of input rows of 2, 4 or 8 two-byte elements whose output rows take
#    vectors takes a tile of whole input rows (`transpose.whole_rows_tile`: 512 x the row,
#    vectors of their own widths each side), not the looping pointwise kernel. A strided
#    reduction's rows a lane load with the default cache policy, not evict-first
#    (`reduction._outer_rows_a_lane`). Contiguous rows of 33-255 one-element vectors take
#    threads for 2 trips of their chunks and 2 rows a lane (`reduction.SCALAR_ROW_TRIPS`).
# 37: a normalization's short rows of 5-32 one-element vectors (odd lengths) take as few
#    lanes as hold 6 elements each (2 at least) and one row a lane
#    (`normalization.SCALAR_NORM_ROW_ELEMENTS`), not lanes of 2 and rows a lane. Short
#    normalization rows of vectors under 16 bytes take half the lanes while a lane holds at
#    most 16 bytes (`normalization.NARROW_LANE_BYTES`).
# 38: a normalization's short rows over several lanes take rows a lane only while a lane's
#    loads of them stay within 16 bytes (`normalization.lane_rows_within`). A transpose's
#    params take launch bounds of blocks an SM (`transpose.Params.min_blocks`; the default
#    asks for none, the search space holds none until timed on a GPU).
# 39: a normalization's odd rows of 33-96 one-element vectors take the short rows' layout
#    (`normalization.SCALAR_NORM_MOST_ROW`: lanes of at most 6 elements, one row a lane),
#    not 32 lanes of 2-3 and 2-4 rows a lane (one held input). Odd rows of 33-96 whose
#    stores are all reduced take 16 lanes, 8 rows a block, 2 rows a lane
#    (`reduction.REDUCED_ODD_ROW_LANES`; row sums while a lane loads at most 16 bytes of a
#    row). The normalization's params may stage their rows through shared memory
#    (`normalization.Params.stage_rows`) and a transpose's search space holds `min_blocks`:
#    the tuner's to choose, the defaults do not.
# 40: odd normalization rows held over a warp or more of lanes take rows a lane only while a
#    lane loads at most 16 bytes of them (`normalization.lane_rows_within`, ODD_ROWS_A_LANE:
#    bf16 rows of 5-7 elements a lane, one row a lane, not 2); rows of bf16 pairs of 33-64
#    vectors (lengths 2 mod 4, 66-126) take the short rows' 16 lanes, one row a lane
#    (`normalization._narrow_lanes_hold`), not 32 lanes of 2 rows.
# 41: transposes of input rows of 17-32 elements read by vectors take 32-tiles of 8 rows of
#    threads (`transpose.SHORT_READS_BLOCK_ROWS`), not 64-tiles half empty; fp32 rows of 8
#    whose output rows take vectors under 16 bytes take the tile of whole rows
#    (`transpose.whole_rows_tile`), not the looping kernel's scalar reads.
# 42: rows a lane are doubled while the grid keeps 8 x 128 threads an SM
#    (`reduction.GRID_THREADS_AN_SM`), not 8 blocks: blocks of 1024 threads (a middle sum of
#    rows of 58) took 2 rows a lane, short row sums of 4-32 lanes more rows.
# 43: row sums of 3, 5, 6 or 7 vectors within 32 bytes are read whole by one lane, 2 rows a
#    lane (`reduction.one_lane_rows`, ONE_LANE_ROW_BYTES), not lanes of 64-byte runs.
# 44: row sums of 33-255 vectors (not peeled) take 2 rows a lane at least
#    (`reduction.MIDDLE_ROW_LANE_ROWS`), registers and the grid allowing.
# 45: strided plain sums whose tiles take more than one wave of resident blocks, which blocks
#    of half the threads hold in one wave at one block an SM to spare, take half the threads
#    along the reduction where a lane loads 4 bytes or more and the halved threads still
#    read a sector a step (`reduction._one_wave_threads`).
# 46: a row sum's short rows of 9-31 vectors (not a power of two) take lanes of up to 4
#    vectors and 2 rows a lane, not runs of 64 bytes, where a lane holds its 2 rows and the
#    grid holds 2 rows a lane (`reduction.few_row_lanes`).
# 47: a logsumexp's short rows of 9-31 vectors (not a power of two) take the same lanes of up
#    to 4 vectors (`reduction.few_lanes`, normalization FEW_LANE_MAX_EXP_SUMS).
# 48: a contiguous row re-read by its block past the L2, its blocks leaving each SM under half
#    its threads (one block of 512 an SM), runs a kernel a pass (normalization
#    MIN_RESIDENT_THREADS_SHARE, `split_reason`).
# 49: a row sum's short rows of 9-31 bf16 vectors of 8 take lanes of at most 3 vectors, 2 rows a
#    lane (`reduction.few_lane_vectors`, SHORT_ROW_LANE_ELEMENTS).
# 50: a strided plain sum's lane of 3 chunks loads them in one group of 4 (`unroll` 4, the
#    tail group's clamp), not 2 and a tail (`reduction.strided_unroll`, ONE_GROUP_CHUNKS).
# 51: a strided reduction of one thread a column of a vector of outputs takes rows a lane
#    while its loads stay within OUTER_LANE_LOADS and VECTOR_LANE_BYTES and the grid keeps
#    VECTOR_LANES_AN_SM lanes an SM (`reduction._vector_rows_a_lane`).
# 52: a row sum whose row unpeeled holds 33-255 vectors of 2 or more reads it unpeeled, two
#    rows a lane where that layout takes them, not peeled at a wider vector one row a lane
#    (`reduction.default_params`, `_short_unpeeled_row`, UNPEELED_LANE_ROW_VECTORS).
# 53: a 2-byte row sum peeled at 16 bytes whose row holds 256+ vectors of 2 is read at a vector
#    of 2 by the peeled layout's lanes where the grid runs 2 waves or more
#    (`reduction._peeled_lanes_unpeeled`); a strided plain sum split as far as its work allows
#    on fewer blocks than SMs halves its unroll for twice the shares (`_shorter_shares`).
# 54: a strided Welford in the same place takes half the rows a block, twice the row tiles,
#    where that grid launches as many blocks (`reduction._shorter_shares`,
#    `_split_short_of_sms`).
# 55: a held row of 16-byte vectors longer than a warp's (33 vectors or more) starts from a
#    half-warp a row, two rows a warp, where sixteen threads hold it
#    (`normalization.half_warp_rows_start`).
# 56: a held contiguous row is read at the narrower unpeeled vector that fills its lanes'
#    slots where that leaves at most five sixths of them (`normalization.filling_vector`);
#    lanes of 8-byte vectors hold up to 24 bytes while 4 lanes remain, and held rows of them
#    start from a half-warp where it holds them so (`normalization.EIGHT_BYTE_LANES`).
# 57: a short row of 2-byte elements whose own vector is under 16 bytes is read as pairs over
#    the fewest lanes that hold at most 5 each, where those are 8 or fewer
#    (`normalization.PAIR_LANES`).
# 58: a normalization of 4-byte elements with a weight or bias, whose lanes (at most half a
#    warp) hold 2 vectors or more of a row, spreads each row over twice the lanes with 2 rows
#    a lane where the grid runs at most 2 waves (`normalization.SHARED_WEIGHT_ROWS`).
# 59: a held row of one row a lane loads its weight and bias before the row loop
#    (`Params.hoist_invariants`) where they are 4-byte elements or read one at a time, take at
#    most 24 registers a thread, and the grid runs at most 8 waves
#    (`normalization.HOISTED_INVARIANTS`).
# 60: a held row of an outer layout of 2-byte loads, 8 chunks a thread or more and 24 elements
#    a thread or more checks only its last chunk against the row's end (`Params.whole_chunks`,
#    `normalization.WHOLE_CHUNKS`).
# 61: a held strided row along y whose outputs' run is under a sector (one output a lane)
#    takes a block row of the widest power of two outputs at most half a warp whose slab
#    pieces a warp reads are 16 bytes or more, and no fewer than fill a warp
#    (`normalization._short_run_lanes`).
# 62: a held column row of 2-byte loads (the outputs one run) holds twice the elements a
#    thread in half the threads, where that leaves 2 threads a row or more
#    (`normalization._long_halves`).
# 63: a held row of an outer layout in one thread (5 chunks or more, any load width) checks
#    only its last chunk against the row's end (`Params.whole_chunks`,
#    `normalization.WHOLE_CHUNKS`).
# 64: so does a held row of an outer layout in 2 threads, 8 chunks a thread or more, any load
#    width and however few elements a thread holds (`normalization.TWO_THREAD_ROWS`).
# 65: held rows of a middle dim in 2 threads take 128-thread blocks, a block row of 64
#    outputs (`normalization.MIDDLE_HELD_BLOCK`).
# 66: held rows of a middle dim in 4 threads or more take rows a lane until a lane loads 64
#    bytes, not 32 (`normalization.MIDDLE_LANE_BYTES`).
# 67: held column rows of 2-byte loads whose lane loads 32 bytes or more in one row take rows
#    a lane until a lane loads 64 bytes (`normalization.COLUMN_HALF_LANE_BYTES`).
# 68: so do held rows of a middle dim in 4 threads: 128-thread blocks, a block row of 32
#    outputs (`normalization.MIDDLE_HELD_BLOCK_THREADS`).
# 69: held rows of a middle dim of 2-byte loads in up to 4 threads take whole_chunks from 8
#    chunks a thread, as 2-thread rows do (`normalization.MIDDLE_HALF_ROWS`).
# 70: so do held rows of a middle dim of any load width in up to 4 threads where a thread keeps
#    one output's row (`normalization._one_output_a_thread`).
# 71: held rows of a middle dim of outputs' runs of 16 bytes or fewer, left along y with rows a
#    lane in 2 to 4 threads of 7 elements or fewer, put their threads along x
#    (`normalization.FEW_THREAD_INNER_ELEMENTS`).
# 72: held rows of a middle dim of 2-byte loads in a vector of 2 outputs a lane that would take 4
#    threads of 8 take 2 threads of 16 (`normalization._middle_half_pairs`).
# 73: a middle dim's held rows along x (`inner`) in up to 4 threads take whole_chunks from 8
#    chunks a thread; heuristics 71's rows of 8-16 elements a thread go along x too where the
#    layout along y checks its chunks one by one or runs fewer threads than the device holds
#    (`normalization._along_y_falls_short`).
# 74: held rows of a middle dim of bfloat16 loads in a vector of 2 outputs a lane in 2 threads put
#    those threads along x (`normalization._middle_pairs_along_x`).
# 75: held rows of a middle dim of 2-byte loads in a vector of 2 outputs a lane in 2 threads take
#    one thread a row along y where that grid fills the device, bfloat16 rows of more than 24
#    elements (`normalization._middle_pairs_one_thread`).
HEURISTICS_VERSION = 75

SCHEDULERS: dict[SchedulerKind, Scheduler] = {
    SchedulerKind.POINTWISE: pointwise,
    SchedulerKind.REDUCTION: reduction,
    SchedulerKind.NORMALIZATION: normalization,
    SchedulerKind.TRANSPOSE: transpose,
}


def scheduler_for(kind: SchedulerKind) -> Scheduler:
    return SCHEDULERS[kind]


def with_values(params: object, values: dict) -> object:
    """`params` with a search space's sampled values set. A dotted name sets a field of a
    nested Params ("pointwise.vector": the pointwise kernel a transpose runs as)."""
    import dataclasses

    direct = {name: v for name, v in values.items() if "." not in name}
    nested: dict[str, dict] = {}
    for name, v in values.items():
        if "." in name:
            head, rest = name.split(".", 1)
            nested.setdefault(head, {})[rest] = v
    for head, inner in nested.items():
        direct[head] = with_values(getattr(params, head), inner)
    return dataclasses.replace(params, **direct)  # type: ignore[type-var]


def value_of(params: object, name: str) -> object:
    """The value a (possibly dotted) search-space name has in `params`."""
    for part in name.split("."):
        params = getattr(params, part)
    return params


def params_to_dict(params: object) -> dict:
    import dataclasses

    return dataclasses.asdict(params)  # type: ignore[call-overload]


def params_from_dict(kind: SchedulerKind, data: dict) -> object | None:
    """Params of `kind` from stored JSON; None when they do not fit this tunefuse's Params
    (a record from another codegen version is then ignored, never misread)."""
    import dataclasses

    module = SCHEDULERS[kind]
    fields = {f.name: f for f in dataclasses.fields(module.Params)}
    if not isinstance(data, dict) or set(data) - set(fields):
        return None
    for name, value in data.items():
        default = fields[name].default
        # Each value of the type its field's default has (a bool is not an int here): a
        # stored "4" or null is refused, never compared or multiplied later.
        if isinstance(default, (bool, int, float)) and type(value) is not type(default):
            return None
    values = dict(data)
    if kind is SchedulerKind.TRANSPOSE and isinstance(values.get("pointwise"), dict):
        inner = params_from_dict(SchedulerKind.POINTWISE, values["pointwise"])
        if inner is None:
            return None
        values["pointwise"] = inner
    try:
        return module.Params(**values)
    except TypeError:
        return None
