"""Rows a lane taken adjacent (codegen 29, `codegen.reduction.adjacent_lane_rows`): which
kernels take them, the row a lane's q-th load reads, and that they compile (no GPU)."""

import pytest
from test_codegen_compile import ARCHS
from test_tail_groups import _kernel_source

from tunefuse import DataType
from tunefuse.compiler import compile_kernel

ADJACENT = "const int row = row_base + (int)to * {} + q;"


@pytest.mark.parametrize(
    "pattern,dtype,shape,changes,adjacent",
    [
        # one thread a bf16 column, rows a lane as the defaults take them (4 and 2)
        ("middle", DataType.BFloat16, (200000, 2, 171), {}, True),
        ("col", DataType.BFloat16, (7, 4131367), {}, True),
        ("var_mean0", DataType.BFloat16, (3, 1003), {"rows_per_lane": 4, "vector": 1}, True),
        # fp32: a warp's load of one row each is a line already
        ("middle", DataType.Float, (2701053, 3, 3), {}, False),
        ("col", DataType.Float, (2, 3396961), {}, False),
        # 8 bf16 rows a lane span 16 bytes: apart (adjacent they ran 2x slower)
        ("middle", DataType.BFloat16, (2003, 3, 37), {"rows_per_lane": 8}, False),
        # threads along the column, or one row a lane
        (
            "middle",
            DataType.BFloat16,
            (200000, 2, 171),
            {"threads_r": 2, "rows_per_block": 64},
            False,
        ),
        ("middle", DataType.BFloat16, (200000, 2, 171), {"rows_per_lane": 1}, False),
    ],
)
def test_which_kernels_take_adjacent_rows(pattern, dtype, shape, changes, adjacent):
    """A strided reduction of one thread a column takes its rows a lane adjacent where its
    widest load is under 4 bytes (a warp's load of one row each under a line) and its rows
    span at most ADJACENT_LANE_BYTES; else `rows_per_block` rows apart."""
    source = _kernel_source(pattern, dtype, shape, changes)
    assert any(ADJACENT.format(n) in source for n in (2, 4, 8)) is adjacent


def test_a_tile_holds_the_rows_of_its_lanes():
    """Adjacent, the lane `to` reads rows to * 4 + q of a tile of 256 lanes x 4 rows: the tile
    still steps by rows_per_block * rows_per_lane, and each row is guarded by its own test."""
    source = _kernel_source("middle", DataType.BFloat16, (200000, 2, 171), {})
    assert ADJACENT.format(4) in source
    assert "row_base += (int)(gridDim.x) * 1024" in source
    assert source.count("const bool row_ok = row < n_out;") == 2  # the fill and the compute


def test_a_normalization_keeps_its_rows_apart():
    """A normalization's rows a lane (inner, its row held) are never adjacent."""
    source = _kernel_source("softmax", DataType.BFloat16, (4099, 6), {"rows_per_lane": 2})
    assert "(int)to * 2 + q" not in source


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    "pattern,dtype,shape",
    [
        ("middle", DataType.BFloat16, (200000, 2, 171)),
        ("col", DataType.BFloat16, (7, 4131367)),
    ],
)
def test_adjacent_rows_compile(pattern, dtype, shape, arch):
    source = _kernel_source(pattern, dtype, shape, {})
    assert "(int)to * " in source
    name = source.split("__global__ void", 1)[1].split("(", 1)[0].split()[-1]
    assert compile_kernel(source, name, arch).cubin
