"""The transpose scheduler's defaults over a surface of shapes (no GPU): skinny inputs take
the pointwise kernel or small tiles, tall inputs stay tiled (one grid dim of tiles), and
every default is valid."""

import ml_dtypes
import numpy as np
import pytest
from fusion_zoo import build, transpose2d
from hypothesis import given, settings
from hypothesis import strategies as st

from tunefuse import DataType
from tunefuse.codegen import generate
from tunefuse.compiler import compile_kernel
from tunefuse.device_info import A100, H100, PROFILES
from tunefuse.planning.kernel_ir import SchedulerKind
from tunefuse.schedulers import pointwise, transpose

NUMPY = {
    DataType.Float: np.float32,
    DataType.BFloat16: ml_dtypes.bfloat16,
    DataType.Double: np.float64,
}


def transpose_segment(rows: int, cols: int, dtype: DataType):  # noqa: ANN201
    """x [rows, cols] written as [cols, rows]; a view of one element (no data)."""
    base = np.zeros(1, NUMPY[dtype])
    x = np.lib.stride_tricks.as_strided(base, (rows, cols), (cols * base.itemsize, base.itemsize))
    (seg,) = build(transpose2d, dtype).plan([x]).segments
    return seg


@given(
    rows=st.integers(2, 1 << 26),
    cols=st.integers(2, 1 << 14),
    dtype=st.sampled_from(list(NUMPY)),
    device=st.sampled_from([H100, A100]),
)
@settings(max_examples=300, deadline=None)
def test_skinny_and_tall_transposes(rows, cols, dtype, device):
    """Output rows shorter than a tile (rows < 64): the pointwise kernel; input rows of at
    most SKINNY_ROW_BYTES: a tile of whole rows where they are of 2-byte elements (or rows
    the looping kernel would read an element at a time, written by vectors under 16 bytes),
    a power of two long, and the output's rows take vectors; else the 2-D pointwise kernel looping
    over them in one wave of blocks, a thread's rows SKINNY_ROW_BYTES in all where its
    vector allows; rows of at
    most SMALL_TILE elements of 4 bytes or more: 16-tiles; else 64-tiles, or SCALAR_TILE
    tiles where the loads are one element (odd extents) or the input rows are at most
    SCALAR_TILE long (SHORT_READS_BLOCK_ROWS rows of threads), however many rows of tiles (the
    grid's x holds them all). Valid either way."""
    seg = transpose_segment(rows, cols, dtype)
    assert seg.scheduler is SchedulerKind.TRANSPOSE
    p = transpose.default_params(seg, device)
    assert transpose.is_valid(seg, device, p) is None
    itemsize = np.dtype(NUMPY[dtype]).itemsize
    if rows < 64:
        assert p.tile == 0 and p.pointwise == pointwise.default_params(seg, device)
    elif (
        cols * itemsize <= transpose.SKINNY_ROW_BYTES
        and (
            itemsize < 4
            # rows the looping kernel would read an element at a time (fp32 rows of 8),
            # written by vectors under 16 bytes
            or (
                2 * cols * itemsize > transpose.SKINNY_ROW_BYTES
                and transpose.max_write_vector(seg) * itemsize < 16
            )
        )
        and cols & (cols - 1) == 0
        and transpose.max_write_vector(seg) > 1
    ):
        # a tile of whole rows: WHOLE_ROWS_TILE rows, vectors as wide as each side allows
        assert (p.tile, p.tile_reads, p.padding) == (transpose.WHOLE_ROWS_TILE, cols, 0)
        assert p.vector == transpose.max_write_vector(seg) > 1
        assert p.read_vector == transpose.max_read_vector(seg)
        threads = transpose.block_threads(p)
        assert threads == max(transpose.WHOLE_ROWS_THREADS, transpose.WHOLE_ROWS_TILE // p.vector)
    elif cols * itemsize <= transpose.SKINNY_ROW_BYTES:
        assert p.tile == 0 and p.pointwise.split == 1
        assert p.pointwise.blocks_per_sm == device.max_threads_per_sm // p.pointwise.block_size
        rows_bytes = p.pointwise.vector * cols * itemsize
        assert p.pointwise.vector == 1 or rows_bytes <= transpose.SKINNY_ROW_BYTES
        widest = pointwise.max_vector(seg)
        assert p.pointwise.vector == widest or 2 * rows_bytes > transpose.SKINNY_ROW_BYTES
    else:
        small = cols <= transpose.SMALL_TILE and itemsize >= 4
        scalar = not small and p.vector == 1
        # input rows of at most SCALAR_TILE read by vectors: a SCALAR_TILE tile too
        short_reads = not small and not scalar and cols <= transpose.SCALAR_TILE
        assert p.tile == (
            transpose.SMALL_TILE
            if small
            else transpose.SCALAR_TILE
            if scalar or short_reads
            else 64
        )
        (bx, by, bz), (tx, ty, _), _ = transpose.grid(seg, device, p)
        assert bx == -(-rows // p.tile) * -(-cols // p.tile) <= transpose.MAX_GRID_X
        assert by == 1 and bz == 1 and tx * p.vector == p.tile and ty == p.block_rows
        # consecutive tiles along the writes, unless a row of tiles along the reads is short
        assert p.along_writes is (-(-cols // p.tile) > transpose.READ_ROW_TILES)
        if scalar:
            # each thread's rows' loads come to 16 bytes: 8 rows of bf16, 4 of fp32
            assert p.tile // p.block_rows * itemsize == transpose.SCALAR_THREAD_BYTES
        elif short_reads:
            assert p.block_rows == transpose.SHORT_READS_BLOCK_ROWS
        else:
            # a 64-tile of narrow loads (2-8 elements under 16 bytes) takes 4 rows of threads
            narrow = p.tile == 64 and p.vector * itemsize < 16
            assert p.block_rows == (transpose.NARROW_BLOCK_ROWS if narrow else 16)


def test_the_measured_points():
    """H100 (the comment at SKINNY_ROW_BYTES) and H200 (at WHOLE_ROWS_TILE): each skinny
    shape's winner."""
    for rows, cols, dtype, tile, split in [
        (
            1 << 24,
            8,
            DataType.BFloat16,
            512,
            None,
        ),  # 436.4 tiled -> 190.4 looping; H200 whole rows 166.0 -> 134.4
        (1 << 23, 8, DataType.Float, 0, 1),  # 319.7 -> 187.5
        (4, 1 << 24, DataType.Float, 0, 0),  # 599.4 tiled -> 184.6 us
        (1 << 24, 4, DataType.Float, 0, 1),  # 872.2 tiled -> 186.9 looping
        (1 << 26, 2, DataType.BFloat16, 512, None),  # 6719.6 -> 185.5; whole rows (H200)
        (53380944, 2, DataType.BFloat16, 512, None),  # H200: 129.1 -> 107.8 us whole rows
        (1000000, 4, DataType.Float, 0, 1),  # H200: 14.2 looping, 15.6 whole rows
        (671655, 10, DataType.BFloat16, 0, 1),  # H200: 16.0 looping, 29.7 whole rows
        (1 << 22, 16, DataType.Float, 16, None),  # 282.7 -> 200.5
        # 3806 before one grid dim of tiles: 200.2 with 64-tiles (H100); a 32-tile (rows of at
        # most SCALAR_TILE) 162.4 -> 162.8 (H200, odd_lanes_2026-11-27/judged_transposes)
        (1 << 22, 32, DataType.BFloat16, 32, None),
        # rows of 17-32 in 32-tiles (H200, the same judge): bf16 [4633800, 18] 197.2 -> 122.2,
        # fp32 [2000000, 18] 160.5 -> 78.7, [500000, 20] 40.6 -> 30.3
        (4633800, 18, DataType.BFloat16, 32, None),
        (2000000, 18, DataType.Float, 32, None),
        (500000, 20, DataType.Float, 32, None),
        # fp32 rows of 8 whose output rows take 8-byte vectors: whole rows (H200, the same
        # judge: [7723410, 8] 158.7 -> 135.2); 16-byte vectors keep the looping kernel
        # ([8388608, 8] 139.6, 141.5 whole rows; [524288, 8] 14.7, 15.1)
        (7723410, 8, DataType.Float, 512, None),
        (2097154, 8, DataType.Float, 512, None),
        (8388608, 8, DataType.Float, 0, 1),
        (524288, 8, DataType.Float, 0, 1),
        (8192, 4096, DataType.Float, 64, None),
    ]:
        p = transpose.default_params(transpose_segment(rows, cols, dtype), H100)
        assert p.tile == tile, (rows, cols, dtype, p)
        if split is not None:
            assert p.pointwise.split == split, (rows, cols, dtype, p)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(
    "rows, cols, dtype, unrolled",
    [
        (777, 111011, DataType.BFloat16, 8),  # vector 1: 2-byte loads, 8 rows a thread
        (151, 277319, DataType.Float, 4),
        (1000, 100002, DataType.Float, 16),  # vector 2: 8-byte loads, a 64-tile
        (8192, 4096, DataType.Float, 0),  # vector 4: 16-byte loads, the loop as it was
        (1024, 131072, DataType.BFloat16, 0),
    ],
)
def test_narrow_tiles_unroll_a_threads_rows(rows, cols, dtype, unrolled, arch):
    """A tile whose loads are under 16 bytes loops over a thread's rows a known count of
    times (`unrolled` rows: their loads in flight together); 16-byte tiles (0) loop from
    threadIdx.y. Both compile for sm_80 and sm_90."""
    seg = transpose_segment(rows, cols, dtype)
    device = PROFILES[arch]
    p = transpose.default_params(seg, device)
    assert p.tile // p.block_rows == (unrolled or 4)
    ks = generate(seg, p, device, {0: dtype, 1: dtype})
    assert (f"for (int r = 0; r < {unrolled}; ++r)" in ks.source) == bool(unrolled)
    assert ("for (int y = threadIdx.y;" in ks.source) == (not unrolled)
    assert len(compile_kernel(ks.source, ks.name, arch).cubin) > 0


# Rectangular tiles and reads wider than the writes (transpose `tile_reads`, `read_vector`):
# (rows, cols, dtype, changes) of x [rows, cols] written as [cols, rows]. Tiles as long as a
# short dim, tiles past a dim's end, rows of threads that do not divide the tile, and a
# tile's reads spread over the block's threads differently from its writes.
RECTANGULAR_TILES = [
    (
        18,
        1001,
        DataType.BFloat16,
        dict(tile=18, tile_reads=288, vector=2, read_vector=1, block_rows=32),
    ),
    (
        2000,
        2,
        DataType.BFloat16,
        dict(tile=512, tile_reads=2, vector=8, read_vector=2, block_rows=2, padding=0),
    ),
    (1000, 4, DataType.Float, dict(tile=256, tile_reads=4, vector=4, read_vector=4, block_rows=2)),
    (
        323,
        1416,
        DataType.BFloat16,
        dict(tile=32, tile_reads=64, vector=1, read_vector=8, block_rows=4),
    ),
    (
        323,
        1416,
        DataType.BFloat16,
        dict(tile=32, tile_reads=0, vector=1, read_vector=8, block_rows=4),
    ),
    (61, 333, DataType.Float, dict(tile=24, tile_reads=40, vector=1, block_rows=5)),
    (323, 1416, DataType.BFloat16, dict(tile=32, block_rows=4, vector=1, unswitch=True)),
    (
        95,
        63,
        DataType.Float,
        dict(tile=32, block_rows=8, vector=1, unswitch=True),
    ),  # a tile short by 1
    (61, 333, DataType.Float, dict(tile=24, tile_reads=40, vector=1, block_rows=5, unswitch=True)),
    (
        2000,
        2,
        DataType.BFloat16,
        dict(
            tile=512, tile_reads=2, vector=8, read_vector=2, block_rows=2, padding=0, unswitch=True
        ),
    ),
    (61, 330, DataType.Float, dict(tile=20, tile_reads=30, vector=1, read_vector=2, block_rows=3)),
    (
        6,
        1001,
        DataType.Float,
        dict(tile=8, tile_reads=128, vector=2, read_vector=1, block_rows=32, along_writes=False),
    ),
    # the defaults' tiles of whole fp32 rows of 8 (8-byte writes) and 32-tiles of rows of
    # 17-32 (SHORT_READS_BLOCK_ROWS), ragged
    (
        1002,
        8,
        DataType.Float,
        dict(tile=512, tile_reads=8, vector=2, read_vector=4, block_rows=1, padding=0),
    ),
    (334, 26, DataType.BFloat16, dict(tile=32, block_rows=8, vector=2, along_writes=False)),
    (336, 24, DataType.BFloat16, dict(tile=32, block_rows=8, vector=8, along_writes=False)),
    (104, 20, DataType.Float, dict(tile=32, block_rows=8, vector=4, along_writes=False)),
]


def test_a_square_tile_keeps_its_layout_and_whole_rows_run_along_the_writes():
    """Shared memory holds a tile as tile[a][b] where both layouts take as many bank
    wavefronts (every square tile), tile[b][a] where the writes' vectors would otherwise
    read lanes rows apart (a tile of whole short rows)."""
    from tunefuse.codegen.transpose import bank_wavefronts, tile_runs_along_writes

    assert bank_wavefronts(list(range(32)), 4) == 1
    assert bank_wavefronts([32 * i for i in range(32)], 4) == 32
    assert bank_wavefronts(list(range(64)), 2) == 1  # two bf16 a word
    for tile, rows, vector, itemsize in [
        (32, 4, 1, 2),
        (32, 8, 1, 4),
        (64, 16, 4, 4),
        (16, 16, 4, 4),
    ]:
        p = transpose.Params(tile=tile, block_rows=rows, vector=vector)
        assert not tile_runs_along_writes(p, itemsize)
    whole = transpose.Params(
        tile=512, tile_reads=8, vector=8, read_vector=8, block_rows=2, padding=0
    )
    assert tile_runs_along_writes(whole, 2)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(
    "rows, cols, dtype, changes",
    [
        (1 << 20, 2, DataType.BFloat16, {}),  # the default: whole rows
        (1 << 20, 8, DataType.BFloat16, {}),
        *RECTANGULAR_TILES,
    ],
)
def test_rectangular_tiles_compile(rows, cols, dtype, changes, arch):
    """Tiles of two extents and reads of their own vector width compile for sm_80 and
    sm_90; a tile of whole rows declares its shared memory along the writes."""
    import dataclasses

    seg = transpose_segment(rows, cols, dtype)
    device = PROFILES[arch]
    p = dataclasses.replace(transpose.default_params(seg, device), **changes)
    assert transpose.is_valid(seg, device, p) is None
    ks = generate(seg, p, device, {0: dtype, 1: dtype})
    if not changes:
        assert p.tile == transpose.WHOLE_ROWS_TILE
        assert f"tile0[{cols}][{transpose.WHOLE_ROWS_TILE}]" in ks.source
    assert len(compile_kernel(ks.source, ks.name, arch).cubin) > 0


def test_rectangular_tiles_refuse_what_cannot_run():
    """A block whose threads do not read whole rows of the tile, a read vector the reads'
    extent does not take, a tile past 1024: refused, naming why."""
    seg = transpose_segment(1000, 1001, DataType.Float)
    p = transpose.Params(tile=32, tile_reads=256, vector=1, read_vector=1, block_rows=4)
    assert "do not read whole rows" in transpose.is_valid(seg, H100, p)
    p = transpose.Params(tile=32, tile_reads=64, vector=1, read_vector=2, block_rows=4)
    assert "read_vector 2" in transpose.is_valid(seg, H100, p)
    p = transpose.Params(tile=2048, tile_reads=2, vector=1, block_rows=1)
    assert "tile 2048" in transpose.is_valid(seg, H100, p)


def test_an_unswitched_tile_checks_its_elements_only_at_the_edges():
    """`unswitch`: a tile wholly inside both extents runs the phases without the
    per-element checks; edge tiles keep them. The default does not unswitch."""
    import dataclasses

    seg = transpose_segment(323, 14176, DataType.BFloat16)
    p = transpose.default_params(seg, H100)
    plain = generate(seg, p, H100, {0: DataType.BFloat16, 1: DataType.BFloat16}).source
    assert not p.unswitch and "<= (int)E" not in plain
    both = generate(
        seg,
        dataclasses.replace(p, unswitch=True),
        H100,
        {0: DataType.BFloat16, 1: DataType.BFloat16},
    ).source
    assert "if (a0 + 32 <= (int)E1 && b0 + 32 <= (int)E0) {" in both
    checks = "if (i0 < E0 && i1 < E1) {"
    assert plain.count(checks) == both.count(checks) == 2  # each phase of the edge copy only
    assert both.count("__syncthreads();") == 2 * plain.count("__syncthreads();")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_min_blocks_asks_the_launch_bounds_for_that_many_blocks_an_sm(arch):
    """`min_blocks`: the launch bounds' second argument (the compiler caps a thread's
    registers to fit that many blocks an SM); 0, the default, asks for none. Out of range,
    or more threads than an SM holds: refused, naming why."""
    import dataclasses

    seg = transpose_segment(323, 14176, DataType.BFloat16)
    device = PROFILES[arch]
    dtypes = {0: DataType.BFloat16, 1: DataType.BFloat16}
    p = transpose.default_params(seg, device)
    threads = transpose.block_threads(p)
    assert p.min_blocks == 0
    assert f"__launch_bounds__({threads})" in generate(seg, p, device, dtypes).source
    fitted = dataclasses.replace(p, min_blocks=device.max_threads_per_sm // threads)
    assert transpose.is_valid(seg, device, fitted) is None
    ks = generate(seg, fitted, device, dtypes)
    assert f"__launch_bounds__({threads}, {fitted.min_blocks})" in ks.source
    assert len(compile_kernel(ks.source, ks.name, arch).cubin) > 0
    too_many = dataclasses.replace(p, min_blocks=fitted.min_blocks + 1)
    assert "more than an SM's" in transpose.is_valid(seg, device, too_many)
    negative = dataclasses.replace(p, min_blocks=-1)
    assert "min_blocks -1" in transpose.is_valid(seg, device, negative)
