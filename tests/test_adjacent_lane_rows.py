"""Rows a lane taken adjacent (codegen 29, `codegen.reduction.adjacent_lane_rows`): which
kernels take them, the row a lane's q-th load reads, and that they compile (no GPU)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_codegen_compile import ARCHS
from test_reduction_defaults import pattern_plan
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
        ("var_mean0", DataType.BFloat16, (3, 11613671)),  # a float4 of each output a lane
    ],
)
def test_adjacent_rows_compile(pattern, dtype, shape, arch):
    source = _kernel_source(pattern, dtype, shape, {})
    assert "(int)to * " in source
    name = source.split("__global__ void", 1)[1].split("(", 1)[0].split()[-1]
    assert compile_kernel(source, name, arch).cubin


LANE_VECTOR = "if (whole) *reinterpret_cast<TfVec<{}, {}>*>(out"


@pytest.mark.parametrize(
    "pattern,shape,changes,stores",
    [
        # fp32 mean and variance of 4 bf16 rows a lane: a float4 each, the odd row count
        # leaving the last lane partly empty
        ("var_mean0", (3, 11613671), {}, [("float", 4), ("float", 4)]),
        ("var_mean0", (3, 1003), {"rows_per_lane": 2, "vector": 1}, [("float", 2)] * 2),
        # bf16 sums of 4 rows: 4 outputs in 8 bytes
        ("col", (7, 4131367), {"rows_per_lane": 4}, [("tf_bf16", 4)]),
        # outputs [A, C] row-major: a lane's rows are consecutive even where C is odd
        ("middle", (200000, 2, 171), {}, [("tf_bf16", 4)]),
    ],
)
def test_a_lane_stores_its_adjacent_rows_outputs_as_vectors(pattern, shape, changes, stores):
    """Adjacent rows a lane keep each reduced output a lane (vq<k>) and store it a vector
    after the lane's rows (`codegen.reduction.lane_store_widths`): one store a vector where
    every row of the lane is in range, each row's own in range (the last lane) else."""
    source = _kernel_source(pattern, DataType.BFloat16, shape, changes)
    for ctype, width in stores:
        assert LANE_VECTOR.format(ctype, width) in source
    for k in range(len(stores)):
        assert f"out{k}[q] = vq{k}[q / " in source
    assert "const bool whole = row0 < n_out - " in source


@pytest.mark.parametrize(
    "pattern,shape,changes",
    [
        # rows apart are not consecutive
        ("middle", (2003, 3, 37), {"rows_per_lane": 8}),
        # 2 bf16 rows a lane: a warp's store of a row each is within a line already
        ("col", (7, 4131367), {"rows_per_lane": 2}),
        ("middle", (117374, 5, 51), {"rows_per_lane": 2}),
    ],
)
def test_other_rows_a_lane_store_each_output_on_its_own(pattern, shape, changes):
    source = _kernel_source(pattern, DataType.BFloat16, shape, changes)
    assert "vq" not in source


def test_lane_store_widths_need_consecutive_aligned_outputs():
    """The widths of a middle sum's bf16 output: 4 rows a lane in 8 bytes, none for 2 (a
    warp's store of a row each within a line); a lane's rows straddling two outer indices
    (an innermost extent not divisible by the rows a lane) only where the offset is the row
    index itself; a constant offset off the vector leaves the store alone."""
    import dataclasses

    from tunefuse.codegen.reduction import lane_store_widths
    from tunefuse.planning.indexing import Affine

    (seg,) = pattern_plan("middle", (2003, 3, 37), DataType.BFloat16).segments
    (k,) = [k for k, st in enumerate(seg.stores) if st.reduced]
    assert lane_store_widths(seg, 4, adjacent=True) == {k: 4}
    assert lane_store_widths(seg, 4, adjacent=False) == {}
    assert lane_store_widths(seg, 2, adjacent=True) == {}
    store = seg.stores[k]

    def with_offset(offset: Affine):  # noqa: ANN202
        stores = list(seg.stores)
        stores[k] = dataclasses.replace(store, offset=offset)
        return dataclasses.replace(seg, stores=tuple(stores))

    # 2 elements in: aligned to pairs, not quads
    shifted = with_offset(dataclasses.replace(store.offset, const=store.offset.const + 2))
    assert lane_store_widths(shifted, 4, adjacent=True) == {}
    # a pitch of 40 for rows of 37: a lane's 4 rows may straddle two rows of the output
    pitched = with_offset(
        Affine(tuple((v, 40 if c == 37 else c) for v, c in store.offset.terms), 0)
    )
    assert [c for _, c in pitched.stores[k].offset.terms] == [40, 1]
    assert lane_store_widths(pitched, 4, adjacent=True) == {}
    # a pitch of 40 for rows of 40: never straddled, every stride a multiple of 4
    (seg40,) = pattern_plan("middle", (2003, 3, 40), DataType.BFloat16).segments
    (k40,) = [k for k, st in enumerate(seg40.stores) if st.reduced]
    assert lane_store_widths(seg40, 4, adjacent=True) == {k40: 4}


def _store_offset(seg, st, row: int) -> int:  # noqa: ANN001
    """The element offset of store `st` at output row `row`: the row unravelled over the
    segment's outer dims (the innermost fastest, as the kernel unravels it), reduced dims 0."""
    index = {}
    for j in reversed([j for j in range(len(seg.extents)) if j not in seg.reduce_dims]):
        row, index[j] = divmod(row, seg.extents[j])
    return st.offset.const + sum(c * index.get(atom.k, 0) for atom, c in st.offset.terms)


@given(
    pattern=st.sampled_from(["col", "var_mean0", "middle", "middle_var_mean"]),
    dtype=st.sampled_from([DataType.BFloat16, DataType.Float]),
    outer=st.integers(1, 9),
    reduced=st.integers(1, 5),
    inner=st.integers(1, 70),
    lane_rows=st.sampled_from([2, 4, 8]),
)
@settings(max_examples=150, deadline=None, derandomize=True)
def test_a_lane_vector_store_covers_its_rows_consecutive_and_aligned(
    pattern, dtype, outer, reduced, inner, lane_rows
):
    """Wherever `lane_store_widths` gives a store a width, every lane's rows (row0 = a multiple
    of `lane_rows`, those below n_out) lie at consecutive offsets from the lane's first, which
    is a multiple of the width: the kernel's vector store and its last lane's row-by-row
    stores at out + q write exactly the rows' own addresses."""
    from tunefuse.codegen.reduction import lane_store_widths

    shape = (reduced, inner) if pattern in ("col", "var_mean0") else (outer, reduced, inner)
    (seg,) = pattern_plan(pattern, shape, dtype).segments
    n_out = 1
    for j, e in enumerate(seg.extents):
        n_out *= 1 if j in seg.reduce_dims else e
    for k, width in lane_store_widths(seg, lane_rows, adjacent=True).items():
        stored = seg.stores[k]
        assert stored.reduced and lane_rows % width == 0
        assert 32 * lane_rows * stored.dtype.itemsize > 128  # more than a line a warp
        for row0 in range(0, n_out, lane_rows):
            first = _store_offset(seg, stored, row0)
            assert first % width == 0, (row0, first)
            for q in range(min(lane_rows, n_out - row0)):
                assert _store_offset(seg, stored, row0 + q) == first + q, (row0, q)
