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
    most SKINNY_ROW_BYTES: the 2-D pointwise kernel looping over them in one wave of
    blocks, a thread's rows SKINNY_ROW_BYTES in all where its vector allows; rows of at
    most SMALL_TILE elements of 4 bytes or more: 16-tiles; else 64-tiles, or SCALAR_TILE
    tiles where the loads are one element (odd extents), however many rows of tiles (the
    grid's x holds them all). Valid either way."""
    seg = transpose_segment(rows, cols, dtype)
    assert seg.scheduler is SchedulerKind.TRANSPOSE
    p = transpose.default_params(seg, device)
    assert transpose.is_valid(seg, device, p) is None
    itemsize = np.dtype(NUMPY[dtype]).itemsize
    if rows < 64:
        assert p.tile == 0 and p.pointwise == pointwise.default_params(seg, device)
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
        assert p.tile == (
            transpose.SMALL_TILE if small else transpose.SCALAR_TILE if scalar else 64
        )
        (bx, by, bz), (tx, ty, _), _ = transpose.grid(seg, device, p)
        assert bx == -(-rows // p.tile) * -(-cols // p.tile) <= transpose.MAX_GRID_X
        assert by == 1 and bz == 1 and tx * p.vector == p.tile and ty == p.block_rows
        # consecutive tiles along the writes, unless a row of tiles along the reads is short
        assert p.along_writes is (-(-cols // p.tile) > transpose.READ_ROW_TILES)
        if scalar:
            # each thread's rows' loads come to 16 bytes: 8 rows of bf16, 4 of fp32
            assert p.tile // p.block_rows * itemsize == transpose.SCALAR_THREAD_BYTES
        else:
            # a 64-tile of narrow loads (2-8 elements under 16 bytes) takes 4 rows of threads
            narrow = p.tile == 64 and p.vector * itemsize < 16
            assert p.block_rows == (transpose.NARROW_BLOCK_ROWS if narrow else 16)


def test_the_measured_points():
    """H100 (the comment at SKINNY_ROW_BYTES): each skinny shape's winner."""
    for rows, cols, dtype, tile, split in [
        (1 << 24, 8, DataType.BFloat16, 0, 1),  # 436.4 tiled -> 190.4 looping, 2 rows a thread
        (1 << 23, 8, DataType.Float, 0, 1),  # 319.7 -> 187.5
        (4, 1 << 24, DataType.Float, 0, 0),  # 599.4 tiled -> 184.6 us
        (1 << 24, 4, DataType.Float, 0, 1),  # 872.2 tiled -> 186.9 looping
        (1 << 26, 2, DataType.BFloat16, 0, 1),  # 6719.6 -> 185.5
        (1 << 22, 16, DataType.Float, 16, None),  # 282.7 -> 200.5
        (1 << 22, 32, DataType.BFloat16, 64, None),  # 3806 before one grid dim of tiles: 200.2
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
