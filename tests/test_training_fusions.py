"""Training fusions (tests/training_fusions.py) without a GPU: the reference against NumPy
formulas, the plan interpreter (every kernel's indexing) against the reference, the
kernels each default plan runs, and NVRTC for sm_80 and sm_90."""

from __future__ import annotations

import numpy as np
import pytest
from fusion_zoo import build
from test_codegen_compile import ARCHS, compile_plan
from training_fusions import (
    CASES,
    cross_entropy,
    group_norm,
    layernorm_backward,
    scaled_where,
)

from tunefuse import DataType, FusionDefinition, reference
from tunefuse.device_info import PROFILES
from tunefuse.planning.kernel_ir import BufferKind, SchedulerKind
from tunefuse.planning.plan_interpreter import run_plan
from tunefuse.schedulers import scheduler_for

DTYPES = [DataType.Float, DataType.BFloat16]
TOLERANCE = {DataType.Float: 2e-5, DataType.BFloat16: 2e-2}


def _close(got, want, dtype: DataType) -> None:  # noqa: ANN001
    tol = TOLERANCE[dtype]
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol, atol=tol * scale)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.value)
@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_and_plan_interpreter_compute_the_formula(name, dtype, rng):
    define, formula, make = CASES[name]
    fd = build(define, dtype)
    inputs = make(dtype, rng)
    want = formula(*inputs)
    expected = reference.run(fd.fusion, inputs)
    for e, w in zip(expected, want, strict=True):
        _close(e, w, dtype)
    for g, e in zip(run_plan(fd.plan(inputs), inputs), expected, strict=True):
        _close(g, np.asarray(e, np.float64), dtype)


def _planning_inputs(shapes_and_types) -> list:  # noqa: ANN001
    """Zero-stride views of one element: planning reads no data."""
    return [
        np.lib.stride_tricks.as_strided(np.zeros(1, t), shape, (0,) * len(shape))
        for shape, t in shapes_and_types
    ]


def _kernels(fd, inputs, arch: str = "sm_90") -> tuple:  # noqa: ANN001 - (plan, [(segment, params)])
    device = PROFILES[arch]
    plan = fd.plan(inputs, device=device)
    return plan, [(s, scheduler_for(s.scheduler).default_params(s, device)) for s in plan.segments]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.value)
@pytest.mark.parametrize("rows, cols", [(8192, 4096), (32768, 768), (1000, 1000)])
def test_layernorm_backward_is_a_row_kernel_and_a_column_kernel(rows, cols, dtype):
    """dx needs reductions over the rows, dw and db over the columns: a normalization of
    the rows and a strided reduction of the columns, each reading dy and x once (a kernel
    for each row statistic, then a column normalization re-reading both, ran 3.8-4.6x
    torch.compile at 8192 x 4096 on an H100)."""
    fd = build(layernorm_backward, dtype)
    t = dtype.numpy
    f32 = np.float32
    inputs = _planning_inputs(
        [((rows, cols), t), ((rows, cols), t), ((rows,), f32), ((rows,), f32), ((cols,), t)]
    )
    _, kernels = _kernels(fd, inputs)
    assert [s.scheduler for s, _ in kernels] == [
        SchedulerKind.NORMALIZATION,
        SchedulerKind.REDUCTION,
    ]
    (rows_kernel, rows_params), (cols_kernel, cols_params) = kernels
    assert rows_kernel.reduce_dims == (1,) and rows_params.inner
    # dy, x and w held: a bf16 row takes at most 16 elements a thread (32: 15-20% slower)
    most = 16 if dtype is DataType.BFloat16 else 32
    assert rows_params.elements_per_thread <= most
    assert cols_kernel.reduce_dims == (0,) and not cols_params.inner
    assert len(cols_kernel.stores) == 2


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.value)
def test_cross_entropy_picks_its_logit_from_the_input(dtype):
    """take_along_axis(cast(z), t): one kernel reads the picked logit from z and casts it,
    rather than a kernel writing cast(z) whole (1 GB of fp32 for a bf16 [8192, 32000]) for
    another to pick from (2.5-2.8x torch.compile)."""
    fd = build(cross_entropy, dtype)
    inputs = _planning_inputs([((8192, 32000), dtype.numpy), ((8192, 1), np.int64)])
    plan, kernels = _kernels(fd, inputs)
    ((seg, params),) = kernels
    assert seg.scheduler is SchedulerKind.REDUCTION and params.inner
    (gather,) = seg.gathers
    (table,) = [b for b in plan.buffers if b.id == gather.buffer]
    assert table.kind is BufferKind.INPUT and table.dtype is dtype


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.value)
@pytest.mark.parametrize(
    "shape, groups, one_kernel",
    [((32, 256, 56, 56), 32, True), ((8, 512, 64, 64), 32, True), ((2, 320, 96, 96), 32, False)],
)
def test_group_norm_is_one_row_kernel_in_wide_vectors(shape, groups, one_kernel, dtype, affine):
    """The reshape to [N, G, C/G*H*W] and back: one normalization of contiguous rows,
    stored in [N, C, H, W] (it was a kernel for each statistic and one for the rest, with
    the rows read along their reshaped index: 4.6x torch.compile), 16-byte vectors; the
    weight at channel (g*C/G + i // HW) is read element by element. 64 rows of 92160 fp32
    are split into a kernel a pass (`split_reason`), each still in 16-byte vectors."""
    fd = build(group_norm(shape, groups, affine), dtype)
    t = dtype.numpy
    inputs = _planning_inputs([(shape, t)] + ([((shape[1],), t)] * 2 if affine else []))
    _, kernels = _kernels(fd, inputs)
    if one_kernel:
        ((seg, params),) = kernels
        assert seg.scheduler is SchedulerKind.NORMALIZATION and params.inner
    for seg, params in kernels:
        assert all(st.offset.is_affine for st in seg.stores)
        assert params.vector * dtype.itemsize == 16


def test_lower_ranks_are_one_pointwise_kernel():
    fd = build(scaled_where, DataType.Float)
    f32 = np.float32
    inputs = _planning_inputs([((4096, 1000), f32), ((), f32), ((1000,), f32)])
    _, kernels = _kernels(fd, inputs)
    assert [s.scheduler for s, _ in kernels] == [SchedulerKind.POINTWISE]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_training_fusions_compile(name, arch, rng):
    define, _, make = CASES[name]
    for dtype in DTYPES:
        fd = build(define, dtype)
        assert compile_plan(fd.plan(make(dtype, rng)), arch)


def test_an_output_without_reductions_rides_with_the_reduction_of_its_shape():
    """Outputs sum(x, 1) [N], y = x * x [N, M] and sum(y, 0) [M]: y has no reduction of its
    own, so it is not split from the column sums (that would write y and read it back); the
    row sums take a kernel, y and its column sums another. (8192 columns: 1000 would leave
    the re-read columns too few blocks; 1024 rows: 4096 would re-read 134 MB at a time,
    past the L2; the scheduler runs either a kernel a pass.)"""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(x, [1]))
        y = fd.ops.mul(x, x)
        fd.add_output(y)
        fd.add_output(fd.ops.sum(y, [0]))
    inputs = _planning_inputs([((1024, 8192), np.float32)])
    _, kernels = _kernels(fd, inputs)
    assert sorted(len(s.stores) for s, _ in kernels) == [1, 2]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.value)
def test_a_row_of_one_held_input_keeps_32_elements_a_thread(dtype):
    """softmax, layernorm and rmsnorm hold one input: 32 elements a thread (128 threads a
    row of 4096), as measured for them."""
    from fusion_zoo import ZOO

    for name in ("softmax", "layernorm", "rmsnorm"):
        fd = build(ZOO[name], dtype)
        shapes = [((8192, 4096), dtype.numpy)] + [((4096,), dtype.numpy)] * (
            len(fd.fusion.inputs) - 1
        )
        _, ((seg, params),) = _kernels(fd, _planning_inputs(shapes))
        assert params.elements_per_thread == 32 and params.threads_r == 128, (name, params)
