"""A normalization along a strided dim (the innermost dim not reduced) takes the outputs
along x and a row in the registers of the threads along y (no GPU): the default over a
surface of shapes, and the measured points."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gpu_strided_norms import middle_softmax
from test_pointwise_defaults import view

from tunefuse import DataType, FusionDefinition
from tunefuse.device_info import A100, H100
from tunefuse.planning.kernel_ir import SchedulerKind
from tunefuse.schedulers import normalization, reduction


def norm_segment(shape, dtype, device):  # noqa: ANN001, ANN201
    """The softmax's normalization kernel, or None where the plan splits it into a pass a
    kernel (too few outputs for the length of their rows: `normalization.split_reason`)."""
    with FusionDefinition() as fd:
        middle_softmax(fd, dtype)
    segments = fd.plan([view(shape, dtype)], device=device).segments
    norms = [s for s in segments if s.scheduler is SchedulerKind.NORMALIZATION]
    return norms[0] if len(segments) == 1 and norms else None


@given(
    n=st.integers(1, 64),
    c_log=st.integers(1, 15),
    c_odd=st.sampled_from([0, 1, 3]),
    l_log=st.integers(1, 16),
    dtype=st.sampled_from([DataType.Float, DataType.BFloat16]),
    device=st.sampled_from([H100, A100]),
)
@settings(max_examples=300, deadline=None)
def test_strided_rows_take_outputs_along_x(n, c_log, c_odd, l_log, dtype, device):
    c = (1 << c_log) + c_odd
    seg = norm_segment((n, c, 1 << l_log), dtype, device)
    if seg is None:
        return
    p = normalization.default_params(seg, device)
    assert normalization.is_valid(seg, device, p) is None
    assert not p.inner and p.vector == 1 and p.rows_per_lane == 1
    n_out, n_red = reduction.sizes(seg)
    assert p.threads_r * p.rows_per_block <= device.max_threads_per_block
    if p.cache_row:  # the row in registers: at most 32 elements a thread, 16 where that fits
        assert p.threads_r * p.elements_per_thread >= n_red
        assert p.elements_per_thread <= normalization.MAX_CACHED_ELEMENTS
        if p.elements_per_thread > normalization.STRIDED_ELEMENTS:
            wider = 2 * p.threads_r  # 16 elements a thread would leave under 8 outputs a block
            assert device.max_threads_per_block // wider < min(8, n_out)
        # a block row reads 32 outputs (fewer only for threads or outputs)
        assert p.rows_per_block >= min(8, 2 ** math.ceil(math.log2(n_out)))
    else:
        assert n_red > normalization.MAX_CACHED_ELEMENTS * device.max_threads_per_block // 8


def test_the_measured_points():
    def params(shape):
        return normalization.default_params(norm_segment(shape, DataType.Float, H100), H100)

    for shape, threads, outputs, ept in [
        ((32, 256, 3136), 16, 32, 16),
        ((64, 19, 65536), 2, 128, 10),
        ((8, 64, 262144), 4, 64, 16),
        ((4, 4096, 8192), 128, 8, 32),
    ]:
        p = params(shape)
        assert (p.threads_r, p.rows_per_block, p.elements_per_thread) == (threads, outputs, ept)
        assert p.cache_row and not p.inner
    long_rows = norm_segment((2, 9000, 4096), DataType.Float, H100)  # 256 blocks of 32
    assert not normalization.default_params(long_rows, H100).cache_row  # re-read
    assert norm_segment((2, 9000, 16), DataType.Float, H100) is None  # 1 block: a kernel a pass


def test_rows_along_the_innermost_dim_keep_their_layout():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        e = fd.ops.exp(fd.ops.sub(x, fd.ops.max(x, dims=[1], keepdim=True)))
        fd.add_output(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)))
    (seg,) = fd.plan([np.zeros((64, 4096), np.float32)], device=H100).segments
    assert normalization.default_params(seg, H100).inner
