"""GPU: normalizations whose rows the GPU can neither hold on chip nor spread over its SMs
run as a kernel a pass (plan.py's split policy: the first pass's reductions a kernel across
the GPU, softmax's max and sum of exp(x - max) one accumulator, then a pointwise kernel
reading their results), and compute what the reference computes; rows enough to fill the
SMs keep their one kernel. logsumexp, reductions only, is one reduction kernel."""

import pytest
from fusion_zoo import ZOO, build, inputs_for
from test_gpu_execute import assert_agrees
from test_gpu_split import run_with_reduction_params

from tunefuse import DataType
from tunefuse.planning.kernel_ir import SchedulerKind

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(
    "name,dtype,shape",
    [
        ("softmax", DataType.Float, (2, 70000)),  # 280 KB a row: more than a block's smem
        ("softmax", DataType.BFloat16, (1, 2**20 + 3)),  # one row, odd: no vector
        # 100 rows for 132 SMs: 76% busy (rows of 65536 an H100 holds over a cluster)
        ("softmax", DataType.Float, (100, 100000)),
        ("layernorm", DataType.Float, (3, 2**18)),  # var_mean: one reduction kernel
        ("rmsnorm", DataType.BFloat16, (7, 150001)),
        ("logsumexp", DataType.BFloat16, (5, 2**18)),  # reductions only: one pass, one kernel
    ],
)
def test_rows_the_gpu_cannot_hold_nor_spread_run_a_kernel_a_pass(name, dtype, shape, rng):
    fd = build(ZOO[name], dtype)
    inputs = inputs_for(fd, shape[0], shape[1], rng)
    got, launched = run_with_reduction_params(fd, inputs)
    kinds = [SchedulerKind(k.scheduler) for k in launched]
    assert SchedulerKind.NORMALIZATION not in kinds, kinds
    # softmax: max and sum, output; layernorm/rmsnorm: var_mean or mean, output; logsumexp:
    # max and sum storing log(sum) + max (a reduction's epilogue).
    expected = {"logsumexp": [SchedulerKind.REDUCTION]}.get(
        name, [SchedulerKind.REDUCTION, SchedulerKind.POINTWISE]
    )
    assert kinds == expected, kinds
    if shape[0] < 33:  # too few rows to fill the GPU alone: each reduction split across blocks
        reductions = [k for k in launched if SchedulerKind(k.scheduler) is SchedulerKind.REDUCTION]
        assert all(k.params["split"] > 1 for k in reductions), [k.params for k in launched]
    assert_agrees(fd, inputs, got, dtype)


def test_rows_that_fill_the_sms_keep_one_kernel(rng):
    from tunefuse.runtime.device import runtime

    sms = runtime(0).info.sm_count
    fd = build(ZOO["softmax"], DataType.Float)
    inputs = inputs_for(fd, sms, 70000, rng)
    got, launched = run_with_reduction_params(fd, inputs)
    assert [SchedulerKind(k.scheduler) for k in launched] == [SchedulerKind.NORMALIZATION]
    assert_agrees(fd, inputs, got, DataType.Float)


@pytest.mark.parametrize(
    "name,dtype,share,cols",
    [
        ("rmsnorm", DataType.Float, 0.83, 430050),  # rows of 1.7 MB, 2 a vector
        ("softmax", DataType.BFloat16, 0.91, 664623),  # odd rows: peeled vectors
        ("layernorm", DataType.Float, 1.0, 2**19),  # a row for every SM
    ],
)
def test_rows_re_read_by_one_block_an_sm_run_a_kernel_a_pass(name, dtype, share, cols, rng):
    """About as many rows as SMs, each too long to hold and re-read past the L2: one block
    of 512 threads an SM keeps too few loads in flight, so each pass is a kernel across the
    GPU (`normalization.MIN_RESIDENT_THREADS_SHARE`), and agrees with the reference."""
    from tunefuse.runtime.device import runtime

    rows = int(share * runtime(0).info.sm_count)
    fd = build(ZOO[name], dtype)
    inputs = inputs_for(fd, rows, cols, rng)
    got, launched = run_with_reduction_params(fd, inputs)
    kinds = [SchedulerKind(k.scheduler) for k in launched]
    assert kinds == [SchedulerKind.REDUCTION, SchedulerKind.POINTWISE], kinds
    assert_agrees(fd, inputs, got, dtype)


@pytest.mark.parametrize(
    "name,dtype,shape",
    [
        ("layernorm", DataType.Float, (3, 2**22 + 4)),  # weight and bias: 32 MB a pass
        ("rmsnorm", DataType.BFloat16, (5, 3 * 2**21)),  # odd rows of a 12 MB weight
        ("bias_gelu", DataType.BFloat16, (7, 2**22 + 8)),  # one pointwise kernel
    ],
)
def test_rows_whose_broadcast_operands_l2_cannot_keep_loop_in_each_thread(name, dtype, shape, rng):
    """A pointwise pass whose operands broadcast along the rows would be read from memory
    again for each row runs one wave of blocks whose threads loop over the rows (one block a
    column of the grid: `pointwise.rereads_broadcast`), and computes what the reference does."""
    fd = build(ZOO[name], dtype)
    inputs = inputs_for(fd, shape[0], shape[1], rng)
    got, launched = run_with_reduction_params(fd, inputs)
    (pw,) = [k for k in launched if SchedulerKind(k.scheduler) is SchedulerKind.POINTWISE]
    assert pw.params["split"] == 1 and pw.params["blocks_per_sm"] > 0, pw.params
    assert pw.grid[1] == 1 and pw.block[1] == 1, (pw.grid, pw.block)
    assert_agrees(fd, inputs, got, dtype)
