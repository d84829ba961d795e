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
    base = np.zeros(1, NUMPY[dtype])  # a view of the shape, nothing allocated: planning reads no data
    itemsize = base.itemsize
    x = np.lib.stride_tricks.as_strided(base, (rows, cols), (cols * itemsize, itemsize))
    (seg,) = fd.plan([x]).segments
    return seg


@given(rows_log=st.integers(0, 24), cols=st.integers(2, 1 << 16), dtype=st.sampled_from(list(NUMPY)))
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
