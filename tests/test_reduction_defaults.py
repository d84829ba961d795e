"""The reduction scheduler's defaults over a surface of shapes (no GPU): properties that
hold between the benchmarked points, not only on them."""

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tunefuse import DataType, FusionDefinition
from tunefuse.device_info import H100
from tunefuse.schedulers import reduction

NUMPY = {DataType.Float: np.float32, DataType.BFloat16: ml_dtypes.bfloat16}


def row_sum_segment(rows: int, cols: int, dtype: DataType):  # noqa: ANN201
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        fd.add_output(fd.ops.sum(fd.ops.cast(x, DataType.Float), dims=[1]))
    base = np.zeros(
        1, NUMPY[dtype]
    )  # a view of the shape, nothing allocated: planning reads no data
    itemsize = base.itemsize
    x = np.lib.stride_tricks.as_strided(base, (rows, cols), (cols * itemsize, itemsize))
    (seg,) = fd.plan([x]).segments
    return seg


@given(
    rows_log=st.integers(0, 24), cols=st.integers(2, 1 << 16), dtype=st.sampled_from(list(NUMPY))
)
@settings(max_examples=200, deadline=None)
def test_inner_rows_are_read_in_runs_a_warp_coalesces(rows_log, cols, dtype):
    """A row of at most 32 vectors is read up to 4 vectors a lane, a row's lanes reading runs
    of at least 64 bytes or the whole row (a warp reads whole rows back to back); a longer row
    in chunks of at least 32 elements or vectors (128 bytes of fp32). Either way the params
    are valid and the block fits."""
    seg = row_sum_segment(1 << rows_log, cols, dtype)
    p = reduction.default_params(seg, H100)
    assert reduction.is_valid(seg, H100, p) is None
    n_out, n_red = reduction.sizes(seg)
    itemsize = 4 if dtype is DataType.Float else 2
    assert p.inner
    row_vectors = -(-n_red // p.vector)
    if row_vectors <= 32:
        assert p.threads_r * p.vector * p.unroll >= n_red and p.unroll <= 4
        assert p.threads_r >= row_vectors or p.threads_r * p.vector * itemsize >= 64
        assert p.threads_r < 2 * row_vectors  # no more lanes than the row's vectors, rounded up
    else:
        assert p.threads_r * p.vector >= 32
    assert 32 <= reduction.block_threads(p) <= 1024 or n_out * p.threads_r < 32


def column_sum_segment(rows: int, cols: int, dtype: DataType):  # noqa: ANN201
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        fd.add_output(fd.ops.sum(x, dims=[0]))
    base = np.zeros(1, NUMPY[dtype])
    itemsize = base.itemsize
    x = np.lib.stride_tricks.as_strided(base, (rows, cols), (cols * itemsize, itemsize))
    (seg,) = fd.plan([x]).segments
    return seg


@given(
    rows_log=st.integers(1, 24),
    cols_log=st.integers(1, 26),
    odd=st.booleans(),
    dtype=st.sampled_from(list(NUMPY)),
)
@settings(max_examples=200, deadline=None)
def test_outer_reductions_take_vectors_of_outputs_only_where_the_outputs_fill_the_gpu(
    rows_log, cols_log, odd, dtype
):
    """A column sum's lanes take the widest vector of consecutive outputs (at most 16 bytes)
    that still leaves every SM SPLIT_WAVES blocks' worth of 32-lane rows; where the outputs
    are fewer, one output a lane and the rows may be split. Valid either way."""
    rows, cols = 1 << rows_log, (1 << cols_log) + (1 if odd else 0)
    seg = column_sum_segment(rows, cols, dtype)
    p = reduction.default_params(seg, H100)
    assert reduction.is_valid(seg, H100, p) is None and not p.inner
    n_out, _ = reduction.sizes(seg)
    widest = reduction.output_vector(seg)
    itemsize = 4 if dtype is DataType.Float else 2
    assert widest * itemsize <= 16 and n_out % widest == 0 and (widest == 1) == (odd or cols == 1)
    target = reduction.SPLIT_WAVES * H100.sm_count
    if p.vector > 1:
        assert p.split == 1 and n_out // (p.vector * 32) >= target and widest % p.vector == 0
    if p.vector < widest:
        assert n_out // (2 * p.vector * 32) < target  # the next wider vector would starve the GPU
