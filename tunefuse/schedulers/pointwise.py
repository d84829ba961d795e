"""Pointwise scheduler: each thread takes `unroll` groups of `vector` consecutive innermost
elements; flat (one grid-stride loop over the collapsed space) or 2-D (`split` s: threads
along x over dims [s, rank), a grid-stride loop along y over dims [0, s)); see
codegen/pointwise.py for why 2-D saves index math. A flat kernel whose vector is a whole
innermost row (rows of 2 or 4 elements) may take `rows` rows a group (`row_access`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tunefuse.device_info import DeviceInfo
from tunefuse.planning.segment import Segment
from tunefuse.schedulers.common import (
    coeff,
    evict_first_pays,
    flag_space,
    flags_error,
    grid_cap,
    holding_default,
    max_vector,
    vector_fits,
    widest_vector,
)


@dataclass(frozen=True, slots=True)
class Params:
    block_size: int = 128
    vector: int = 1
    unroll: int = 1
    blocks_per_sm: int = (
        8  # grid cap: blocks_per_sm * SM count blocks; 0: no cap (one pass, no striding)
    )
    split: int = 0  # 0: flat; s >= 1: dims [0, s) outer (grid y), dims [s, rank) inner (x)
    rows: int = 1  # flat, vector = the innermost extent: innermost rows a group spans
    evict_first: bool = (
        True  # data read once is loaded evict-first (ld.global.cs); False: the default cache policy
    )
    static_shape: bool = (
        False  # sizes, strides and offsets as constants: a binary for this shape alone
    )
    flat_vector: bool = (
        False  # flat, rows 1: the vector runs along the flat index and may cross rows
    )


def block_shape(segment: Segment, p: Params) -> tuple[int, int]:
    """(x, y) threads of a 2-D block: x covers the inner groups (a power of two, at most the
    block), y the rest of the block."""
    inner_groups = max(1, math.prod(segment.extents[p.split :]) // p.vector)
    x = 1
    while x < p.block_size and x < inner_groups:
        x *= 2
    return x, p.block_size // x


def dense_offset(segment: Segment, offset) -> bool:  # noqa: ANN001
    """True when an access walks the iteration space row-major and contiguous (its stride
    along each dim the product of the extents after it): its element at a flat index is at
    that index plus a constant."""
    if not offset.is_affine:
        return False
    stride = 1
    for j in reversed(range(len(segment.extents))):
        if segment.extents[j] != 1 and coeff(offset, segment, j) != stride:
            return False
        stride *= segment.extents[j]
    return True


def max_flat_vector(segment: Segment) -> int:
    """The widest vector a group of the flat index may take where it need not divide the
    innermost extent (`Params.flat_vector`): every store dense (`dense_offset`) and, with
    every dense load, able to move that many elements at once from any multiple of them
    (`vector_fits` along every dim: constant offset divisible, pointer aligned, at most 16
    bytes). Loads that are not dense, or sit behind a pad/cat guard, are read element by
    element and do not narrow it. 1 where a store is not dense."""
    # (imported here: the codegen package's own import reaches this module)
    from tunefuse.codegen.guards import guarded_loads

    if not segment.extents or not all(dense_offset(segment, st.offset) for st in segment.stores):
        return 1
    guarded = guarded_loads(st.expr for st in segment.stores)
    dims = tuple(range(len(segment.extents)))
    accesses = [
        (a.offset, a.dtype, a.buffer, dims)
        for k, a in enumerate(segment.loads)
        if k not in guarded and dense_offset(segment, a.offset)
    ] + [(st.offset, st.dtype, st.buffer, dims) for st in segment.stores]
    return widest_vector(segment, accesses, ())


def narrowed_loads(segment: Segment) -> list[int]:
    """The loads a flat vector reads element by element that a row's vector reads a vector at
    a time: not dense, unit-stride along the innermost dim (a bias, a per-column statistic)."""
    last = len(segment.extents) - 1
    return [
        k
        for k, ld in enumerate(segment.loads)
        if ld.offset.is_affine
        and coeff(ld.offset, segment, last) == 1
        and not dense_offset(segment, ld.offset)
    ]


def default_params(segment: Segment, device: DeviceInfo) -> Params:
    """16-byte accesses where allowed; one vector a thread, 256-thread blocks (smaller, so
    more of them, when there is too little work to fill every SM twice over), and as many
    blocks as the work needs: one pass, no grid-stride. Measured on H100
    (`benchmarks/sweep.py bias_gelu float 8192 4096 vector=4 unroll=1 --all`, 60 points):
    every one of the 8 best points is uncapped; 256 flat 93.3 us, 512 2-D 93.4, against
    94.7 for 1024-thread blocks capped at 32 an SM (the previous default).
    2-D (split 1) wherever the inner dims fill the block's x with at most 1/8 of it idle:
    no index math in the loop, broadcast operands of the inner dims read once a thread;
    where those would be read again from memory for every row (`rereads_broadcast`), one
    wave of blocks whose threads loop over the rows. A flat kernel over rows of fewer
    elements than a 16-byte vector takes several rows a group (`widest_rows`).

    Where the vector along the flat index is wider than a row's vector and its rows (odd
    widths: a row's vector is 1 or 2 elements), the flat kernel takes it (`flat_vector`),
    unless the 2-D kernel loops over the rows to read a broadcast once (a flat kernel reads
    it from memory again for each row: bias_gelu fp32 [4, 10045113] 130.0 -> 163.6 us,
    [13, 3518481] 163.2 -> 181.7), or a row's vector of 2 or more would give way to scalar
    reads of two or more loads (`narrowed_loads`: column_layernorm bf16 [40058, 2320], whose
    normalizing kernel reads a mean, a rstd, a weight and a bias of each column, went 247.6
    -> 361.0 us at 8 along the flat index from 4 a row; one bias, fp32 [21772, 2910] 201.6
    -> 170.8 from 2 a row). H100, judged on 61 cells drawn after the rule was set
    (`benchmarks/surface/flat_vector_2026-11-26/`): geomean 0.707 of the row vector's time,
    0.906 of torch.compile's (1.281 before); bias_gelu bf16 [414447, 261] 426.9 -> 185.6
    (torch.compile 248.3), [6237079, 19] 467.4 -> 202.6 (270.8); transpose bf16 [3, 1859025]
    25.9 -> 12.9 (13.4). Two cells lose 5-8% (a normalizing kernel reading per-row
    statistics, or a weight and bias, element by element), both under torch.compile."""
    vector = max_vector(segment)
    rows = widest_rows(segment, vector)
    along_flat = max_flat_vector(segment)
    flat_vector = (
        along_flat > vector * rows
        and (vector == 1 or len(narrowed_loads(segment)) <= 1)
        and not rereads_broadcast(segment, 1, device)
    )
    if flat_vector:
        vector, rows = along_flat, 1
    groups = segment.numel // (vector * rows)
    block = min(256, device.max_threads_per_block)
    while block > 64 and groups < block * device.sm_count * 2:
        block //= 2
    evict_first = evict_first_pays(segment)
    flat = Params(
        block_size=block,
        vector=vector,
        unroll=1,
        blocks_per_sm=0,
        rows=rows,
        evict_first=evict_first,
        flat_vector=flat_vector,
    )
    if len(segment.extents) < 2 or rows > 1 or flat_vector:
        # Several short rows a group: 16-byte accesses, which a 2-D kernel's vector of one
        # row cannot make (rope, GPT-J style, bf16 [4, 2048, 32, 64, 2]: 72.4 us 2-D, 58.0
        # flat at 4 rows a group, torch.compile 55.0).
        return flat
    two_d = replace(flat, split=1, rows=1)
    inner_groups = math.prod(segment.extents[1:]) // vector
    x, _ = block_shape(segment, two_d)
    covered = -(-inner_groups // x) * x
    if inner_groups < 32 or (covered - inner_groups) * 8 > covered:
        return flat
    if rereads_broadcast(segment, two_d.split, device):
        # One wave of blocks (each row block after the first would read the broadcast
        # operands again from memory): every thread loops over the rows.
        return replace(two_d, blocks_per_sm=device.max_threads_per_sm // block)
    return two_d


# A 2-D grid runs its blocks x-fastest: the row blocks of one inner chunk come a whole pass
# over the inner dims apart. An operand broadcast along the rows (a layernorm's weight and
# bias) is read again by each of them, from L2 only while that pass fits in part of it; past
# that, from memory. H100 (`benchmarks/ab.py CASE DTYPE SHAPE blocks_per_sm=8`, one wave of
# blocks whose threads loop over the rows, against the uncapped grid): bias_gelu fp32 [16,
# 2**22] (a pass of 48 MB) 267.0 -> 195.0 us (torch.compile 259.3), [128, 2**21] (24 MB)
# 837.9 -> 769.6, [256, 2**20] (12 MB) 756.4 -> 766.7 (1% slower), [8192, 4096] 92.7 -> 99.0;
# layernorm's normalizing kernel fp32 [16, 2**22] 456.7 -> 304.7 (torch.compile 452.4),
# [32, 2**21] 404.4 -> 305.8, [16, 2**18] (4 MB) 28.8 -> 29.1; rmsnorm bf16 [4, 2**25]
# 368.8 -> 307.7 (425.4), fp32 [64, 2**20] (12 MB) 301.3 -> 300.1.
REREAD_L2_SHARE = 4  # a pass over more than 1 / REREAD_L2_SHARE of the L2 reads from memory


def rereads_broadcast(segment: Segment, split: int, device: DeviceInfo) -> bool:
    """True where a 2-D kernel (dims [0, split) outer) with one block a row would read its
    operands broadcast along the outer dims again from memory for every row: there are such
    operands, more than one row, and a pass over the inner dims touches more bytes than
    1 / REREAD_L2_SHARE of the L2."""
    rank = len(segment.extents)
    if not 0 < split < rank or math.prod(segment.extents[:split]) <= 1:
        return False

    def moves(offset, dims: range) -> bool:  # noqa: ANN001
        return any(coeff(offset, segment, j) != 0 for j in dims)

    outer, inner = range(split), range(split, rank)
    if not any(moves(ld.offset, inner) and not moves(ld.offset, outer) for ld in segment.loads):
        return False
    accesses = {
        (a.buffer, a.dtype.itemsize)
        for a in (*segment.loads, *segment.stores)
        if moves(a.offset, inner)
    }
    pass_bytes = math.prod(segment.extents[split:]) * sum(size for _, size in accesses)
    return pass_bytes * REREAD_L2_SHARE > device.l2_bytes


# Rows shorter than a 16-byte vector (bias_gelu bf16 [2**26, 2]: 4-byte accesses, and an
# index split a pair of elements) read and write several rows a group where every store runs
# on across the rows: H100, `benchmarks/ab.py bias_gelu bfloat16 67108864x2`: 345.8 us flat
# at vector 2, 241.4 2-D (split 1, no index math but 4-byte accesses), torch.compile 209.0.
ROWS = (1, 2, 4, 8, 16)


def row_access(segment: Segment, offset, vector: int) -> str | None:  # noqa: ANN001
    """How an access walks a group of several innermost rows of `vector` elements: "span"
    (contiguous across the rows: one vector of them all), "row" (the same row for each: a
    broadcast along the rows, one vector of a row), "column" (unit-stride along the rows:
    one vector along them for each element of a row), or None (element by element)."""
    if not offset.is_affine or len(segment.extents) < 2:
        return None
    last = len(segment.extents) - 1
    along, across = coeff(offset, segment, last), coeff(offset, segment, last - 1)
    if along == 1 and across == vector:
        return "span"
    if along == 1 and across == 0:
        return "row"
    if across == 1:
        return "column"
    return None


def spans_fit(segment: Segment, offset, dtype, buffer: int, elements: int) -> bool:  # noqa: ANN001
    """True when a "span" access moves a group's `elements` at once: `vector_fits` across
    the two innermost dims (a group starts at a multiple of them)."""
    rank = len(segment.extents)
    return vector_fits(segment, offset, dtype, buffer, (rank - 2, rank - 1), elements)


def load_walk(segment: Segment, k: int, p: Params) -> str | None:
    """How load k of a group of `p.rows` rows is read (`row_access`) where its vector fits;
    None (element by element) where it does not. (Codegen reads a load behind a pad/cat
    guard element by element too, in its branch.)"""
    ld = segment.loads[k]
    walk = row_access(segment, ld.offset, p.vector)
    if walk == "span" and not spans_fit(segment, ld.offset, ld.dtype, ld.buffer, p.vector * p.rows):
        return None
    if walk == "column" and not vector_fits(
        segment, ld.offset, ld.dtype, ld.buffer, len(segment.extents) - 2, p.rows
    ):
        return None
    return walk


def rows_error(segment: Segment, p: Params) -> str | None:
    """Why `p.rows` cannot run `segment`, or None: several rows a group need the flat
    kernel, a vector of a whole innermost row, rows dividing the next dim's extent, and
    every store contiguous across them within 16 bytes. (A load behind a pad/cat guard is
    read element by element in its branch.)"""
    if p.rows not in ROWS:
        return f"rows {p.rows} (one of {ROWS})"
    if p.rows == 1:
        return None
    extents = segment.extents
    if p.split or len(extents) < 2:
        return f"rows {p.rows}: several rows a group need the flat kernel (split 0)"
    if p.vector != extents[-1] or extents[-2] % p.rows:
        return (
            f"rows {p.rows}: the vector ({p.vector}) must be the whole innermost row "
            f"({extents[-1]}) and rows divide the next extent ({extents[-2]})"
        )
    elements = p.vector * p.rows
    for st in segment.stores:
        if row_access(segment, st.offset, p.vector) != "span" or not spans_fit(
            segment, st.offset, st.dtype, st.buffer, elements
        ):
            return f"rows {p.rows}: a store cannot write {elements} elements at once"
    return None


def widest_rows(segment: Segment, vector: int) -> int:
    """The most rows a flat group may span (1 where rows are not short), at most 16 bytes
    a store."""
    best = 1
    for rows in ROWS[1:]:
        if rows_error(segment, Params(vector=vector, rows=rows)) is not None:
            break
        best = rows
    return best


def is_valid(segment: Segment, device: DeviceInfo, p: Params) -> str | None:
    """None when `p` can run `segment` correctly on `device`, else why not."""
    if (
        p.block_size not in (32, 64, 128, 256, 512, 1024)
        or p.block_size > device.max_threads_per_block
    ):
        return f"block_size {p.block_size}"
    if p.flat_vector:
        if p.split or p.rows != 1:
            return "flat_vector: the flat kernel (split 0) of one row a group (rows 1)"
        if p.vector < 1 or max_flat_vector(segment) % p.vector:
            return (
                f"vector {p.vector} along the flat index (at most {max_flat_vector(segment)} here)"
            )
    elif p.vector < 1 or max_vector(segment) % p.vector:
        return f"vector {p.vector} (at most {max_vector(segment)} here)"
    if p.unroll not in (1, 2, 4, 8) or p.blocks_per_sm < 0:
        return "unroll / blocks_per_sm"
    if p.split < 0 or (p.split and p.split >= len(segment.extents)):
        return f"split {p.split} (0 to {max(0, len(segment.extents) - 1)} here)"
    return rows_error(segment, p) or flags_error(p)


# A thread's elements are vector x unroll: the tuner's local search trades one for the other.
TRADES = (("vector", "unroll"),)


def search_space(segment: Segment, device: DeviceInfo) -> dict:
    import optuna  # the tuner's dependency: imported only when a search space is asked for

    widest = max(max_vector(segment), max_flat_vector(segment))
    vectors = [v for v in (1, 2, 4, 8, 16) if widest % v == 0]
    space = {
        "block_size": optuna.distributions.CategoricalDistribution([64, 128, 256, 512, 1024]),
        "vector": optuna.distributions.CategoricalDistribution(vectors),
        "unroll": optuna.distributions.CategoricalDistribution([1, 2, 4]),
        "blocks_per_sm": optuna.distributions.CategoricalDistribution([0, 2, 4, 8, 16, 32]),
        "split": optuna.distributions.CategoricalDistribution(
            list(range(max(1, len(segment.extents))))
        ),
        "rows": optuna.distributions.CategoricalDistribution(list(ROWS)),
        "flat_vector": optuna.distributions.CategoricalDistribution([False, True]),
        **flag_space(),
    }
    return holding_default(space, default_params(segment, device))


def grid(
    segment: Segment, device: DeviceInfo, p: Params
) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    cap = grid_cap(device, p.blocks_per_sm)
    if p.split:
        x, y = block_shape(segment, p)
        inner_groups = math.prod(segment.extents[p.split :]) // p.vector
        blocks_x = max(1, -(-inner_groups // x))
        outer = math.prod(segment.extents[: p.split])
        blocks_y = max(1, min(-(-outer // (y * p.unroll)), max(1, cap // blocks_x), 65535))
        return (blocks_x, blocks_y, 1), (x, y, 1), 0
    groups = segment.numel // (p.vector * p.rows)
    per_block = p.block_size * p.unroll
    blocks = max(1, min(-(-groups // per_block), cap))
    return (blocks, 1, 1), (p.block_size, 1, 1), 0
