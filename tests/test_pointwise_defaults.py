"""The pointwise scheduler's defaults over a surface of shapes (no GPU): a 2-D kernel whose
operands broadcast along the rows would be read again from memory for every row block loops
over the rows in each thread instead (`pointwise.rereads_broadcast`)."""

import math

import ml_dtypes
import numpy as np
from fusion_zoo import bias_gelu, build, layernorm
from hypothesis import given, settings
from hypothesis import strategies as st

from tunefuse import DataType, FusionDefinition
from tunefuse.device_info import A100, H100
from tunefuse.planning.kernel_ir import SchedulerKind
from tunefuse.schedulers import pointwise

NUMPY = {
    DataType.Float: np.float32,
    DataType.BFloat16: ml_dtypes.bfloat16,
    DataType.Half: np.float16,
    DataType.Double: np.float64,
}


def view(shape: tuple[int, ...], dtype: DataType) -> np.ndarray:
    """A contiguous-looking view of `shape` over one element: planning reads no data."""
    base = np.zeros(1, NUMPY[dtype])
    strides = [base.itemsize * math.prod(shape[d + 1 :]) for d in range(len(shape))]
    return np.lib.stride_tricks.as_strided(base, shape, strides)


def bias_gelu_segment(rows: int, cols: int, dtype: DataType):  # noqa: ANN201
    fd = build(bias_gelu, dtype)
    (seg,) = fd.plan([view((rows, cols), dtype), view((cols,), dtype)]).segments
    return seg


def add_segment(rows: int, cols: int, dtype: DataType):  # noqa: ANN201
    """x + y of two full [rows, cols] tensors: nothing broadcast."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        y = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        fd.add_output(fd.ops.add(x, y))
    (seg,) = fd.plan([view((rows, cols), dtype), view((rows, cols), dtype)]).segments
    return seg


def pass_bytes(cols: int, dtype: DataType) -> int:
    """bias_gelu's bytes a pass over a row: x, the bias and the output."""
    return cols * 3 * dtype.itemsize


@given(
    rows_log=st.integers(0, 14),
    cols_log=st.integers(5, 25),
    odd=st.booleans(),
    dtype=st.sampled_from(list(NUMPY)),
    device=st.sampled_from([H100, A100]),
)
@settings(max_examples=300, deadline=None)
def test_broadcast_operands_are_not_read_again_from_memory(rows_log, cols_log, odd, dtype, device):
    """bias+GELU of [rows, cols] with a bias of [cols]: a 2-D default takes one wave of
    blocks whose threads loop over the rows exactly where there is more than one row and a
    pass over a row touches more than 1 / REREAD_L2_SHARE of the device's L2; else the
    grid is uncapped. Either way the params are valid, and a capped grid has one block a
    column of the inner chunks where those chunks alone fill the wave."""
    rows, cols = 1 << rows_log, (1 << cols_log) + (1 if odd else 0)
    seg = bias_gelu_segment(rows, cols, dtype)
    assert seg.scheduler is SchedulerKind.POINTWISE
    p = pointwise.default_params(seg, device)
    assert pointwise.is_valid(seg, device, p) is None
    far = rows > 1 and pass_bytes(cols, dtype) * pointwise.REREAD_L2_SHARE > device.l2_bytes
    assert pointwise.rereads_broadcast(seg, 1, device) == far
    if p.split == 0:
        assert p.blocks_per_sm == 0
        return
    assert p.blocks_per_sm == (device.max_threads_per_sm // p.block_size if far else 0)
    (bx, by, _), (tx, ty, _), _ = pointwise.grid(seg, device, p)
    assert tx * ty == p.block_size
    if far:
        wave = device.max_threads_per_sm // p.block_size * device.sm_count
        assert by == max(1, min(-(-rows // ty), wave // bx))
    else:
        assert by == min(-(-rows // ty), 65535)


@given(rows_log=st.integers(1, 12), cols_log=st.integers(20, 25))
@settings(max_examples=50, deadline=None)
def test_without_a_broadcast_operand_the_grid_is_not_capped(rows_log, cols_log):
    """Rows read once each (no operand shared between rows): nothing to read again."""
    seg = add_segment(1 << rows_log, 1 << cols_log, DataType.Float)
    assert not pointwise.rereads_broadcast(seg, 1, H100)
    assert pointwise.default_params(seg, H100).blocks_per_sm == 0


def test_the_measured_points():
    """H100 (benchmarks/ab.py, the comment at REREAD_L2_SHARE): passes of 48 and 24 MB loop
    over the rows, of 12 MB and less do not; the same 12 MB pass does on an A100 (40 MB)."""
    points = [
        (16, 1 << 22, H100, 8),
        (128, 1 << 21, H100, 8),
        (256, 1 << 20, H100, 0),
        (8192, 4096, H100, 0),
        (1, 1 << 24, H100, 0),
        (256, 1 << 20, A100, 8),
    ]
    for rows, cols, device, blocks_per_sm in points:
        seg = bias_gelu_segment(rows, cols, DataType.Float)
        assert pointwise.default_params(seg, device).blocks_per_sm == blocks_per_sm, (rows, cols)


def test_a_layernorm_split_into_passes_normalizes_its_rows_in_one_wave():
    """layernorm fp32 [16, 2**22] on an H100: statistics, then the normalizing kernel, whose
    weight and bias (32 MB) would otherwise be read from memory again for each of the 16
    rows (456.7 -> 304.7 us, ab.py)."""
    fd = build(layernorm, DataType.Float)
    x, w = view((16, 1 << 22), DataType.Float), view((1 << 22,), DataType.Float)
    segments = fd.plan([x, w, w], device=H100).segments
    assert [s.scheduler for s in segments] == [SchedulerKind.REDUCTION, SchedulerKind.POINTWISE]
    p = pointwise.default_params(segments[1], H100)
    assert p.split == 1 and p.blocks_per_sm == 8
    (_, by, _), _, _ = pointwise.grid(segments[1], H100, p)
    assert by == 1
