"""Transpose scheduler: tiles of the two dims that are innermost for the reads and for the
writes go through shared memory (padded against bank conflicts), so that both sides are
coalesced. When the reads and the writes share their innermost dim, a tile is a plain copy
and the pointwise kernel runs instead (`tile == 0`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from tunefuse.device_info import DeviceInfo
from tunefuse.planning.segment import Segment
from tunefuse.schedulers import pointwise
from tunefuse.schedulers.common import (
    MAX_VECTOR_BYTES,
    coeff,
    evict_first_pays,
    flag_space,
    flags_error,
    holding_default,
    min_blocks_error,
    widest_vector,
)


@dataclass(frozen=True, slots=True)
class Params:
    tile: int = 32  # a tile's extent along the writes' innermost dim; 0: no tile (pointwise kernel)
    block_rows: int = 8  # rows of threads: a block is tile / vector x block_rows threads
    padding: int = 1
    pointwise: pointwise.Params = pointwise.Params()
    # consecutive elements a thread writes (along the write dim) and, unless read_vector, reads
    # (along the read dim)
    vector: int = 1
    evict_first: bool = (
        True  # data read once is loaded evict-first (ld.global.cs); False: the default cache policy
    )
    static_shape: bool = (
        False  # sizes, strides and offsets as constants: a binary for this shape alone
    )
    along_writes: bool = True  # consecutive tiles along the writes' innermost dim, else the reads'
    # A tile's extent along the reads' innermost dim (0: `tile`, a square tile). A tile as long
    # as a short dim (an input row of 2 elements, an output row of 18) holds whole rows of it:
    # a warp's accesses along that dim run on into the next row, which lies next to it.
    tile_reads: int = 0
    read_vector: int = 0  # consecutive elements a thread reads along the read dim; 0: `vector`
    # Tiles wholly inside both extents run a copy of the phases without the per-element
    # bounds checks (nvFuser's "unswitch"): a scalar 32-tile's thread evaluates 45 compares
    # and moves 19 predicates through registers for its 8 elements (bf16 [323, 14176],
    # `benchmarks/sass_count.py`; torch.compile's kernel of the same tiles runs in 8.2 us to
    # our 11.8, at 21 registers to our 56). The kernel then holds both copies: 328
    # instructions and 80 registers, against 240 and 56. H200, benchmarks/ab.py
    # unswitch=True (`surface/short_scalar_rows_2026-11-27/probe.log`): bf16 [323, 14176]
    # 11.9 -> 12.4 us, [777, 111011] 140.5 -> 176.6, [73247, 109] 19.0 -> 21.9, [269, 22454]
    # 14.0 -> 15.5; fp32 [8192, 4096] 73.7 -> 69.0, [151, 277319] 119.4 -> 115.3. Off by
    # default; the tuner's to choose.
    unswitch: bool = False
    # Blocks an SM the launch bounds ask the compiler to fit (their second argument; 0: none):
    # 16 blocks of 128 threads cap a thread at 32 registers, where the scalar 32-tile of bf16
    # [323, 14176] takes 56 (9 blocks an SM) and torch.compile's kernel of the same tiles 21
    # (sm_90, benchmarks/sass_count.py min_blocks=16: 32 registers, no stack, 280
    # instructions against 240). H200, benchmarks/ab.py (`surface/staged_rows_2026-11-27/
    # probe_transpose_min_blocks_h200.log`): bf16 [777, 111011] 140.2 -> 133.7 us with 16,
    # fp32 [8192, 4096] 73.2 -> 71.8 with 8; bf16 [323, 14176] 11.9 -> 12.3, [269, 22454]
    # 14.0 -> 14.4 with 16 and 13.9, 16.5 with 8. Off by default; the tuner's to choose (in
    # the search space; memcheck over the GPU transpose tests' min_blocks cases: 0 errors).
    min_blocks: int = 0


def tile_extents(p: Params) -> tuple[int, int]:
    """(along the writes' innermost dim, along the reads')."""
    return p.tile, p.tile_reads or p.tile


def vectors(p: Params) -> tuple[int, int]:
    """(elements a thread writes at once, elements it reads at once)."""
    return p.vector, p.read_vector or p.vector


def block_threads(p: Params) -> int:
    return p.tile // p.vector * p.block_rows


def read_lanes(p: Params) -> int:
    """Threads that read one row of a tile (along the read dim)."""
    along_reads, read_vector = tile_extents(p)[1], vectors(p)[1]
    return along_reads // read_vector


def tiled_dims(segment: Segment) -> tuple[int, int] | None:
    """(write-innermost dim, read-innermost dim) when they differ, else None."""

    def unit(offset) -> int | None:  # noqa: ANN001
        if not offset.is_affine:
            return None
        units = [
            j
            for j in range(len(segment.extents))
            if coeff(offset, segment, j) == 1 and segment.extents[j] > 1
        ]
        return units[0] if units else None

    write = [unit(st.offset) for st in segment.stores]
    if not write or write[0] is None or any(w != write[0] for w in write):
        return None
    for ld in segment.loads:
        read = unit(ld.offset)
        if read is not None and read != write[0]:
            return write[0], read
    return None


MAX_GRID_YZ = 65535  # blocks a grid's y and z dims hold
MAX_GRID_X = 2**31 - 1  # blocks a grid's x dim holds: the tiles of both tiled dims


def _write_accesses(segment: Segment, a: int) -> list:
    return [(st.offset, st.dtype, st.buffer, a) for st in segment.stores]


def _read_accesses(segment: Segment, b: int) -> list:
    return [
        (ld.offset, ld.dtype, ld.buffer, b)
        for ld in segment.loads
        if ld.offset.is_affine and coeff(ld.offset, segment, b) == 1
    ]


def max_tile_vector(segment: Segment) -> int:
    """The widest vector that every load unit-stride along the read dim and every store
    (unit-stride along the write dim) allows: both tiled extents, offsets and other strides
    divisible, pointers aligned, at most 16 bytes; 1 when nothing is tiled."""
    dims = tiled_dims(segment)
    if dims is None:
        return 1
    a, b = dims
    accesses = _write_accesses(segment, a) + _read_accesses(segment, b)
    return widest_vector(segment, accesses, (a, b), (2, 4, 8))


def max_side_vector(segment: Segment, writes: bool) -> int:
    """The widest vector of one side alone: the stores along the write dim (`writes`), or
    the loads unit-stride along the read dim, whose extent it divides; 1 when nothing is
    tiled."""
    dims = tiled_dims(segment)
    if dims is None:
        return 1
    a, b = dims
    accesses = _write_accesses(segment, a) if writes else _read_accesses(segment, b)
    return widest_vector(segment, accesses, (a if writes else b,), (2, 4, 8))


def max_write_vector(segment: Segment) -> int:
    return max_side_vector(segment, writes=True)


def max_read_vector(segment: Segment) -> int:
    return max_side_vector(segment, writes=False)


# Consecutive tiles run along the writes' innermost dim (a), so that the sectors a tile's
# stores leave part-written at its edges (rows not a multiple of a sector long) are finished
# by the next tile's while both are in L2 (codegen 25), except where a row of tiles along
# the reads' innermost dim (b) is at most READ_ROW_TILES tiles: there consecutive tiles read
# whole rows, and a tile's neighbour along a comes that few tiles later. H200, 32-tiles of
# one element a load, along b against along a (`tile_order_isolated_h200.jsonl`): a row of
# 2-14 tiles along b: fp32 [1000000, 67] 166.4 -> 207.8 us, bf16 [3149725, 33] 268.1 ->
# 307.6, [327945, 214] 143.9 -> 156.8, fp32 [10000, 419] 13.5 -> 14.1, [100981, 364] 117.1
# -> 120.8 (bf16 [15031, 312] the exception: 12.4 -> 11.9); more: fp32 [38215, 1321] (42
# tiles) 165.5 -> 152.9, [10870, 4045] 142.3 -> 107.3, [1999, 30001] 231.2 -> 140.0, bf16
# [777, 111011] 269.8 -> 137.5. 16-byte 64-tiles moved 2% at most either way.
READ_ROW_TILES = 16


def tiles_along(segment: Segment, tile: int, tile_reads: int = 0) -> tuple[int, int]:
    """Tiles of `tile` along the writes' innermost dim and of `tile_reads` (0: `tile`) along
    the reads' (at least 1 each)."""
    a, b = tiled_dims(segment)  # type: ignore[misc]
    along_b = tile_reads or tile
    return max(1, -(-segment.extents[a] // tile)), max(1, -(-segment.extents[b] // along_b))


def runs_along_writes(segment: Segment, tile: int, tile_reads: int = 0) -> bool:
    """The default `along_writes`: a row of tiles along the reads is more than
    READ_ROW_TILES."""
    return tiles_along(segment, tile, tile_reads)[1] > READ_ROW_TILES


def tile_count(segment: Segment, tile: int, tile_reads: int = 0) -> int:
    """Tiles of `tile` x `tile_reads` over the two tiled dims (at least one): the grid's x."""
    along_a, along_b = tiles_along(segment, tile, tile_reads)
    return along_a * along_b


# Skinny transposes (H100; every layout timed alternately, each result exact; copying 256 MB
# takes ~181 us). Input [R, C], output [C, R]:
# - output rows shorter than a tile (R < 64): the pointwise kernel, whose stores run along
#   the short rows and whose loads a warp reads along C: fp32 [4, 2**24] 599.4 us tiled ->
#   184.6, [16, 2**22] 207.9 -> 188.9, bf16 [16, 2**23] 229.4 -> 192.8, [4, 2**21] 75.2 ->
#   14.8; [32, 2**21] 191.8 -> 192.3; [64, 2**20] 186.8 tiled against 202.8.
# - input rows of at most SKINNY_ROW_BYTES: the 2-D pointwise kernel with one wave of blocks
#   whose threads loop over C, so that a row's loads after the first hit in L1, each thread
#   taking rows of at most SKINNY_ROW_BYTES in all (a wider vector's strided loads crowd L1):
#   fp32 [2**24, 4] 872.2 tiled, 438.7 one block a row of the output, 186.9 looping; bf16
#   [2**26, 2] 6719.6 / 266.2 / 185.5; fp32 [2**20, 4] 50.6 / 18.5 / 16.1. By the vector:
#   bf16 [2**24, 8] tiled 436.4, looping 553.2 / 282.6 / 190.4 / 186.9 with 8 / 4 / 2 / 1
#   rows a thread (torch.compile 181.3); bf16 [2**20, 8] 30.5 tiled, 13.7 with 1 (16.1); fp32
#   [2**23, 8] 319.7 tiled, 186.3 / 187.5 with 2 / 1; [2**21, 8] 83.1 / 50.9 / 48.2 (48.9);
#   bf16 [2**25, 4] 279.2 with 8, 185.6 with 4.
# - input rows of at most SMALL_TILE elements of at least 4 bytes: 16 x 16 tiles, whose
#   64-byte output runs stay whole where a 64-tile is three quarters empty: fp32 [2**22, 16]
#   282.7 -> 200.5 us, [2**18, 16] 19.3 -> 14.1. (bf16 16-tiles write 32-byte runs: [2**24,
#   8] 433.7 -> 634.3.)
SKINNY_ROW_BYTES = 32
SMALL_TILE = 16

# Input rows of at most SKINNY_ROW_BYTES, of elements narrower than 4 bytes, a power of two
# long, whose output rows take vectors (their length even), take a tile of whole rows
# (`whole_rows_tile`): WHOLE_ROWS_TILE rows of the input (along the writes' dim),
# WHOLE_ROWS_THREADS threads a block (more where a row of the tile's writes needs them),
# vectors as wide as each side allows, no padding. A warp's reads run through consecutive
# rows, which lie next to each other; its writes are vectors of the output's long rows; the
# tile in shared memory runs along the writes (`codegen.transpose.tile_runs_along_writes`).
# First as ab.py variants (H200, `tile=T,tile_reads=R,...`): bf16 [53380944, 2] 129.7 ->
# 106.9 us with 512-tiles (256: 132.6, 1024: 109.7; padding 1: 124.7), torch.compile 103.0.
# Then for every input of rows of at most SKINNY_ROW_BYTES, old code against new on the 24
# such cells of the between surfaces of seeds 12, 313, 777, 999, 2024 and 1-6 and the grid
# (H200, `benchmarks/judge.py`, `surface/whole_rows_2026-11-27/judged_h200_summary.txt`):
# bf16 rows of 2, 4 or 8 with vectors of writes gained on all 9 (geomean 0.86; [16777216, 8]
# 166.0 -> 134.4, torch.compile 130.6; [25211908, 4] 125.8 -> 104.0, 100.8; [13504802, 8]
# at write vector 2 138.3 -> 128.3); rows of other lengths leave lanes idle and lost or
# tied (bf16 [629620, 12] 17.0 -> 17.4, [1014904, 6] 12.8 -> 12.8); output rows of odd
# length (scalar writes) lost up to 1.85x (bf16 [671655, 10] 16.0 -> 29.7, fp32 [720165, 5]
# 14.6 -> 18.2); fp32 rows lost 2-10% even at 16-byte vectors both sides ([1000000, 4] 14.2
# -> 15.6, [16777216, 4] 135.4 -> 137.7), where the looping kernel already ran within 4-20%
# of torch.compile. Those keep it, but for rows the looping kernel reads an element at a time
# (a vector of two rows passes SKINNY_ROW_BYTES: fp32 rows of 8) whose output rows take
# vectors under 16 bytes: H200, judge.py, old against new
# (`surface/odd_lanes_2026-11-27/judged_transposes_h200_summary.txt`): fp32 [7723410, 8]
# 158.7 -> 135.2 us (torch.compile 127.4), [2097154, 8] 48.1 -> 42.2, [1000002, 8] 26.3 ->
# 24.0; output rows of 16-byte vectors lost 1-3% ([8388608, 8] 139.6 -> 141.5, [524288, 8]
# 14.7 -> 15.1) and keep the looping kernel.
WHOLE_ROWS_TILE = 512
WHOLE_ROWS_THREADS = 128


def whole_rows_tile(segment: Segment, device: DeviceInfo, evict_first: bool) -> Params | None:
    """A tile of WHOLE_ROWS_TILE input rows, each whole, for inputs of rows of at most
    SKINNY_ROW_BYTES of elements under 4 bytes (or that the looping kernel reads an element
    at a time, whose output rows take vectors under 16 bytes), a power of two long, whose
    output rows take vectors; None elsewhere or where it is not valid."""
    a, b = tiled_dims(segment)  # type: ignore[misc]
    vec, rvec = max_write_vector(segment), max_read_vector(segment)
    along_b = segment.extents[b]
    widest = max(ac.dtype.itemsize for ac in (*segment.loads, *segment.stores))
    # rows the looping kernel reads an element at a time, written by vectors under 16 bytes
    scalar_loop = 2 * along_b * widest > SKINNY_ROW_BYTES and vec * widest < MAX_VECTOR_BYTES
    if (widest >= 4 and not scalar_loop) or along_b & (along_b - 1) or vec == 1:
        return None
    p = Params(
        tile=WHOLE_ROWS_TILE,
        tile_reads=along_b,
        vector=vec,
        read_vector=rvec,
        block_rows=max(1, WHOLE_ROWS_THREADS * vec // WHOLE_ROWS_TILE),
        padding=0,
        evict_first=evict_first,
        along_writes=runs_along_writes(segment, WHOLE_ROWS_TILE, along_b),
    )
    return p if is_valid(segment, device, p) is None else None


# A 64-tile whose loads are narrower than 16 bytes (odd extents leave vector 1) takes 4 rows
# of threads, so that a thread has 16 of its rows' loads in flight (codegen unrolls them),
# not 4. H100 (`benchmarks/ab.py transpose2d DTYPE SHAPE tile=64,block_rows=R`, R = 16 / 8 /
# 4 / 2): bf16 [777, 111011] 345.3 / 317.7 / 302.5 / 358.8 us, [513, 248417] 541.4 / 498.2 /
# 482.7 / 568.2, [1000, 134217] 413.5 / 399.7 / 394.5 / 483.8, [323, 14176] 17.4 / 17.1 /
# 16.8 / 20.1; fp32 [151, 277319] 231.1 / 227.3 / 225.7 / 241.3, [363, 159619] 314.4 /
# 305.7 / 301.0 / 324.6, [3775, 1050] 18.9 / 18.6 / 18.3 / 20.7; bf16 [73247, 109] 22.9 /
# 23.2 / 23.6 / 30.0 (the one loss). 32-tiles were slower at 2 or 4 rows on 6 of the 8.
# (Measured with tiles along the reads. Tiles of one element a load now take SCALAR_TILE;
# this rule keeps loads of 2-8 elements under 16 bytes, where, with tiles along the writes,
# 16 rows of threads beat 4 for fp32 vector 2, [1000, 100002] 239.2 -> 206.1 us, [3002,
# 20002] 149.4 -> 131.2, and lost for bf16, [1002, 50006] vector 2 64.6 -> 66.1, [1004,
# 50012] vector 4 70.9 -> 77.3: H200, left for a rule judged on more cells.)
NARROW_BLOCK_ROWS = 4
# Input rows of at most SCALAR_TILE elements read by vectors (a 64-tile half empty or more
# along them; rows under SMALL_TILE of 4-byte elements take 16-tiles, shorter rows of 2-byte
# elements are skinny): a SCALAR_TILE tile, SHORT_READS_BLOCK_ROWS rows of threads. H200,
# benchmarks/ab.py bf16 [280994, 26] 17.0 -> 15.5 us with `tile=32,block_rows=8`
# (torch.compile 16.5; `surface/odd_lanes_2026-11-27/probe_transposes_h200.log`); judged old
# against new on the 4 cells of 12 seeds' between cells it moves and 6 more
# (`judged_transposes_h200_summary.txt`): 9 of 10 faster, 0.49-0.94 (fp32 [2000000, 18]
# 160.5 -> 78.7, torch.compile 76.4; bf16 [4633800, 18] 197.2 -> 122.2, 100.5; [300000, 28]
# 22.1 -> 15.2, 14.2), bf16 [4194304, 32] 162.4 -> 162.8.
SHORT_READS_BLOCK_ROWS = 8
# A tile of one element a load (odd extents) is 32 x 32, with as many rows of threads as
# leave each thread SCALAR_THREAD_BYTES of its rows' loads (8 rows of bf16, 4 of fp32).
# Measured with tiles along the writes (codegen 25), H200, 64 x 64 with 4 rows of threads
# against this (`benchmarks/ab.py transpose2d DTYPE SHAPE tile=32,block_rows=R`, R = 4 / 8):
# bf16 [777, 111011] 169.3 -> 137.6 / 146.2 us (torch.compile 129.6), [513, 248417] 249.6
# -> 202.7 / 216.3, [2049, 8191] 36.9 -> 30.9 / 32.1, [323, 14176] 13.5 -> 11.6 / 12.0,
# [73247, 109] 21.0 -> 18.9 / 19.6; fp32 [151, 277319] 116.6 -> 126.3 / 103.5, [363,
# 159619] 148.8 -> 169.3 / 136.4, [3775, 1050] 15.3 -> 15.4 / 15.1, and the one loss
# [1999, 30001] 154.3 -> 178.8 / 162.3. Loads of 2-8 elements keep 64-tiles: 32-tiles lost
# at every point tried (fp32 [3002, 20002] vector 2 149.4 -> 180.2 / 183.2, bf16 [1004,
# 50012] vector 4 70.9 -> 90.3 / 93.5).
SCALAR_TILE = 32
SCALAR_THREAD_BYTES = MAX_VECTOR_BYTES


def scalar_tile_rows(segment: Segment) -> int:
    """Rows of threads of a SCALAR_TILE tile: each thread's rows' loads of the widest
    element come to SCALAR_THREAD_BYTES."""
    widest = max(ld.dtype.itemsize for ld in segment.loads)
    return max(1, SCALAR_TILE * widest // SCALAR_THREAD_BYTES)


def narrow_loads(segment: Segment, vector: int) -> bool:
    """True when some load of a tile moves fewer than 16 bytes at once (`vector` elements):
    codegen then unrolls a thread's rows so that their loads are in flight together."""
    return any(vector * ld.dtype.itemsize < MAX_VECTOR_BYTES for ld in segment.loads)


def default_params(segment: Segment, device: DeviceInfo) -> Params:
    """64 x 64 tiles, 16 rows of threads, 16-byte vectors along both sides where the sizes
    and alignment allow: 98.4 us for an 8192 x 4096 fp32 transpose on H100, the best of the
    41 points of the space with padding 1 (one element a thread: 106.0; 32 x 32 tiles: 104.2;
    `benchmarks/sweep.py transpose2d float 8192 4096 padding=1`). Kernels with several
    outputs may not have the shared memory for it: then 32 x 32, one element a thread.
    Skinny shapes (the comment above): the pointwise kernel, or 16 x 16 tiles."""
    evict_first = evict_first_pays(segment)
    flat = pointwise.default_params(segment, device)
    dims = tiled_dims(segment)
    if dims is None or segment.extents[dims[0]] < 64:
        return Params(tile=0, pointwise=flat, evict_first=evict_first)
    a, b = dims
    row_bytes = segment.extents[b] * max(
        a.dtype.itemsize for a in (*segment.loads, *segment.stores)
    )
    if row_bytes <= SKINNY_ROW_BYTES:
        whole = whole_rows_tile(segment, device, evict_first)
        if whole is not None:
            return whole
        vector = pointwise.max_vector(segment)  # a row's vector: the 2-D kernel's
        while vector > 1 and vector * row_bytes > SKINNY_ROW_BYTES:
            vector //= 2
        looping = replace(
            flat,
            split=1,
            rows=1,
            vector=vector,
            flat_vector=False,
            blocks_per_sm=device.max_threads_per_sm // flat.block_size,
        )
        if pointwise.is_valid(segment, device, looping) is None:
            return Params(tile=0, pointwise=looping, evict_first=evict_first)
    small = segment.extents[b] <= SMALL_TILE and all(
        st.dtype.itemsize * SMALL_TILE >= 64 for st in segment.stores
    )
    tile = SMALL_TILE if small else 64
    vector = min(max_tile_vector(segment), tile // 4)
    if tile == 64 and vector == 1:
        tile, block_rows = SCALAR_TILE, scalar_tile_rows(segment)
    elif tile == 64 and segment.extents[b] <= SCALAR_TILE:
        tile, block_rows = SCALAR_TILE, SHORT_READS_BLOCK_ROWS
        vector = min(vector, tile // 4)
    elif tile == 64 and narrow_loads(segment, vector):
        block_rows = NARROW_BLOCK_ROWS
    else:
        block_rows = 16
    wide = Params(
        tile=tile,
        block_rows=block_rows,
        padding=1,
        vector=vector,
        evict_first=evict_first,
        along_writes=runs_along_writes(segment, tile),
    )
    narrow = Params(
        tile=32,
        block_rows=8,
        padding=1,
        evict_first=evict_first,
        along_writes=runs_along_writes(segment, 32),
    )
    for p in (wide, narrow):
        if is_valid(segment, device, p) is None:
            return p
    # More tiles than a grid's x holds: the pointwise kernel reads it with strides.
    return Params(tile=0, pointwise=flat, evict_first=evict_first)


MAX_TILE = 1024  # a tile's extent along either dim at most


def is_valid(segment: Segment, device: DeviceInfo, p: Params) -> str | None:
    if p.tile == 0:
        return pointwise.is_valid(segment, device, p.pointwise)
    if tiled_dims(segment) is None:
        return "no pair of dims to tile"
    along_a, along_b = tile_extents(p)
    write_vector, read_vector = vectors(p)
    if not (1 <= along_a <= MAX_TILE and 0 <= p.tile_reads <= MAX_TILE and p.block_rows >= 1):
        return f"tile {along_a} x {along_b}, block_rows {p.block_rows}"
    if p.tile_reads == 0 and along_a % p.block_rows:
        return f"tile {p.tile} x block_rows {p.block_rows}"
    tiles = tile_count(segment, along_a, along_b)
    if tiles > MAX_GRID_X:
        return f"{tiles} {along_a} x {along_b} tiles (a grid's x holds {MAX_GRID_X})"
    if p.read_vector == 0 and p.tile_reads == 0:
        if p.vector < 1 or max_tile_vector(segment) % p.vector or p.tile % p.vector:
            return f"vector {p.vector} (at most {max_tile_vector(segment)} here, dividing the tile)"
    else:
        if write_vector < 1 or max_write_vector(segment) % write_vector or along_a % write_vector:
            return (
                f"vector {write_vector} (at most {max_write_vector(segment)} along the writes "
                f"here, dividing the tile's {along_a})"
            )
        if read_vector < 1 or max_read_vector(segment) % read_vector or along_b % read_vector:
            return (
                f"read_vector {read_vector} (at most {max_read_vector(segment)} along the reads "
                f"here, dividing the tile's {along_b})"
            )
    threads = block_threads(p)
    if threads > device.max_threads_per_block:
        return "too many threads"
    if threads % read_lanes(p):
        return (
            f"{threads} threads a block do not read whole rows of the tile "
            f"({read_lanes(p)} threads a row)"
        )
    smem = sum(st.dtype.itemsize for st in segment.stores) * along_a * (along_b + p.padding)
    if smem > device.shared_per_block:
        return f"{smem} bytes of shared memory"
    if (why := min_blocks_error(p.min_blocks, device)) is not None:
        return why
    if p.min_blocks * threads > device.max_threads_per_sm:
        return (
            f"min_blocks {p.min_blocks} of {threads} threads: more than an SM's "
            f"{device.max_threads_per_sm} threads"
        )
    for name in ("along_writes", "unswitch"):
        if not isinstance(getattr(p, name), bool):
            return f"{name} {getattr(p, name)!r} (True or False)"
    return flags_error(p)


# A tile's shape has no product to keep; a transpose run as a pointwise kernel trades as
# one does.
TRADES = (("pointwise.vector", "pointwise.unroll"),)


def search_space(segment: Segment, device: DeviceInfo) -> dict:
    """Tile shapes; or, when there is nothing to tile (reads and writes share their
    innermost dim), the space of the pointwise kernel that runs instead, as "pointwise.*"."""
    import optuna  # the tuner's dependency: imported only when a search space is asked for

    if tiled_dims(segment) is None:
        space = {
            f"pointwise.{name}": d for name, d in pointwise.search_space(segment, device).items()
        }
        return holding_default(space, default_params(segment, device))
    default = default_params(segment, device)
    # A skinny transpose's default runs the pointwise kernel (tile 0): its params are then
    # the space's too.
    own = (
        {f"pointwise.{name}": d for name, d in pointwise.search_space(segment, device).items()}
        if default.tile == 0
        else {}
    )
    a, b = tiled_dims(segment)
    # Besides the square tiles, tiles as long as a short dim (whole rows of it in a tile)
    # and long tiles along the reads; reads and writes of vectors of their own widths.
    short = [e for e in (segment.extents[a],) if e < 64]
    space = {
        **own,
        "tile": optuna.distributions.CategoricalDistribution(
            sorted({0, 16, 32, 64, 256, 512, *short})
        ),
        "tile_reads": optuna.distributions.CategoricalDistribution(
            sorted({0, 32, 64, 128, 256, *[e for e in (segment.extents[b],) if e < 64]})
        ),
        "block_rows": optuna.distributions.CategoricalDistribution([1, 2, 4, 8, 16, 32]),
        "padding": optuna.distributions.CategoricalDistribution([0, 1, 2]),
        "vector": optuna.distributions.CategoricalDistribution(
            [v for v in (1, 2, 4, 8) if max_write_vector(segment) % v == 0]
        ),
        "read_vector": optuna.distributions.CategoricalDistribution(
            [0, *[v for v in (1, 2, 4, 8) if max_read_vector(segment) % v == 0]]
        ),
        "along_writes": optuna.distributions.CategoricalDistribution([True, False]),
        "unswitch": optuna.distributions.CategoricalDistribution([False, True]),
        "min_blocks": optuna.distributions.CategoricalDistribution([0, 4, 8, 16]),
        **flag_space(),
    }
    return holding_default(space, default)


def grid(
    segment: Segment, device: DeviceInfo, p: Params
) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    if p.tile == 0:
        return pointwise.grid(segment, device, p.pointwise)
    a, b = tiled_dims(segment)  # type: ignore[misc]
    rest = 1
    for j, e in enumerate(segment.extents):
        if j not in (a, b):
            rest *= e
    # The kernel strides over the other dims by gridDim.z: at most 65535 of them at once,
    # at least one (an empty segment is not launched, but its launch is still described).
    return (
        (tile_count(segment, *tile_extents(p)), 1, max(1, min(rest, MAX_GRID_YZ))),
        (p.tile // p.vector, p.block_rows, 1),
        0,
    )
