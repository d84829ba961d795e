"""Column sums taken in parts by the normalization that holds the rows
(planning.column_partials), without a GPU: which plans take them, the plan interpreter
against NumPy (the partial sums' indexing), what params may run them, NVRTC for sm_80 and
sm_90."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from fusion_zoo import build
from test_codegen_compile import ARCHS, compile_plan
from training_fusions import NORM_BACKWARDS

from tunefuse import DataType
from tunefuse.device_info import PROFILES
from tunefuse.planning.column_partials import MIN_ROWS_A_GROUP
from tunefuse.planning.kernel_ir import BufferKind, SchedulerKind
from tunefuse.planning.plan import make_plan
from tunefuse.planning.plan_interpreter import run_plan
from tunefuse.runtime.lower import default_chooser, generate_launches
from tunefuse.schedulers import normalization

DTYPES = [DataType.Float, DataType.BFloat16]
TOLERANCE = {DataType.Float: 2e-5, DataType.BFloat16: 2e-2}
CASES = NORM_BACKWARDS


def _plan(name: str, rows: int, cols: int, dtype: DataType, arch: str = "sm_90", seed: int = 0):  # noqa: ANN202
    define, make, _ = CASES[name]
    fd = build(define, dtype)
    inputs = make(rows, cols, dtype, np.random.default_rng(seed))
    return fd, inputs, make_plan(fd.fusion, inputs, None, PROFILES[arch])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.value)
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("rows, cols", [(9001, 1000), (4100, 4096), (1500, 12288)])
def test_the_column_sums_are_summed_in_parts_and_agree_with_numpy(name, rows, cols, dtype, arch):
    fd, inputs, plan = _plan(name, rows, cols, dtype, arch)
    norm, column = plan.segments
    assert norm.scheduler is SchedulerKind.NORMALIZATION and norm.column_partials
    groups = norm.column_groups
    assert rows >= MIN_ROWS_A_GROUP * groups
    assert column.scheduler is SchedulerKind.REDUCTION and column.extents == (groups, cols)
    # The column kernel reads only the partial sums: dy and x are read once, by the rows.
    partials = {p.buffer for p in norm.column_partials}
    assert all(0 <= b < len(plan.buffers) for b in partials)  # every sum got its buffer
    assert {ld.buffer for ld in column.loads} == partials
    for b in partials:
        buf = plan.buffers[b]
        assert buf.kind is BufferKind.INTERMEDIATE and buf.shape == (groups, cols)
        assert buf.dtype is DataType.Float
    params = normalization.default_params(norm, PROFILES[arch])
    assert normalization.grid(norm, PROFILES[arch], params)[0] == (
        groups // params.rows_per_block,
        1,
        1,
    )
    want = CASES[name][2](*inputs)
    for got, w in zip(run_plan(plan, inputs), want, strict=True):
        scale = max(1.0, float(np.abs(w).max()))
        tol = TOLERANCE[dtype]
        np.testing.assert_allclose(np.asarray(got, np.float64), w, rtol=tol, atol=tol * scale)


@pytest.mark.parametrize("arch", ARCHS)
def test_kernels_with_column_partials_compile(arch):
    for name in CASES:
        for dtype in DTYPES:
            for rows, cols in [(9001, 1000), (4100, 4096)]:
                _, _, plan = _plan(name, rows, cols, dtype, arch)
                assert plan.segments[0].column_partials
                assert compile_plan(plan, arch) == [
                    SchedulerKind.NORMALIZATION,
                    SchedulerKind.REDUCTION,
                ]


def test_without_a_device_or_with_few_rows_nothing_is_summed_in_parts():
    define, make, _ = CASES["layernorm"]
    fd = build(define, DataType.Float)
    inputs = make(9001, 1000, DataType.Float, np.random.default_rng(0))
    assert not any(s.column_partials for s in make_plan(fd.fusion, inputs).segments)
    _, _, few = _plan("layernorm", 300, 1024, DataType.Float)
    assert not any(s.column_partials for s in few.segments)
    # fd.segment's kernels are definitions of their own: no partial sums there.
    planned = make_plan(fd.fusion, inputs, None, PROFILES["sm_90"], column_partials=False)
    assert [s.extents for s in planned.segments] == [(9001, 1000), (9001, 1000)]


def test_params_that_cannot_keep_a_columns_sums_are_refused_by_name():
    _, _, plan = _plan("layernorm", 9001, 1000, DataType.Float)
    norm = plan.segments[0]
    device = PROFILES["sm_90"]
    p = normalization.default_params(norm, device)
    assert normalization.is_valid(norm, device, p) is None
    for bad in (
        replace(p, cache_row=False),
        replace(p, rows_per_lane=2),
        replace(p, cluster=2),
    ):
        assert "column sums taken in parts" in normalization.is_valid(norm, device, bad)
    odd = replace(norm, column_groups=norm.column_groups + 1)
    assert "does not divide" in normalization.is_valid(odd, device, replace(p, rows_per_block=2))


def test_the_plan_printout_names_the_partial_sums():
    _, _, plan = _plan("rmsnorm", 4100, 4096, DataType.BFloat16)
    text = str(plan)
    assert f"column sums in {plan.segments[0].column_groups} row groups" in text
    assert "sums the row groups' partial sums" in text


def test_a_launch_plan_with_partial_sums_reads_back_exactly():
    """The persistent cache's launch plan (JSON) keeps the partial sums' buffers and the
    fused kernel's grid of column_groups / rows_per_block blocks."""
    from tunefuse.runtime.launch_plan import LaunchPlan

    fd, _, plan = _plan("layernorm", 4100, 4096, DataType.BFloat16)
    device = PROFILES["sm_90"]
    _, lp = generate_launches(plan, device, default_chooser(device))
    back = LaunchPlan.from_json(lp.to_json(), len(fd.fusion.nodes))
    assert back == lp
    norm = plan.segments[0]
    rows_per_block = normalization.default_params(norm, device).rows_per_block
    assert back.kernels[0].grid == (norm.column_groups // rows_per_block, 1, 1)
    partial_buffers = {p.buffer for p in norm.column_partials}
    assert partial_buffers <= {b.id for b in back.buffers}


@pytest.mark.parametrize(
    "name, dtype, rows, cols, fused",
    [
        # partial sums at 0.79 and 0.68 of the reads they save: lost on an H100
        ("layernorm", DataType.BFloat16, 300000, 16, False),
        ("layernorm", DataType.BFloat16, 100000, 64, False),
        # at 0.45, 0.36 and 0.25: won
        ("rmsnorm", DataType.BFloat16, 300000, 16, True),
        ("layernorm", DataType.BFloat16, 70000, 33, True),
        ("layernorm", DataType.Float, 300000, 16, True),
    ],
)
def test_partial_sums_costing_over_half_the_reads_they_save_are_not_taken(
    name, dtype, rows, cols, fused
):
    _, _, plan = _plan_without_data(name, dtype, rows, cols)
    assert bool(plan.segments[0].column_partials) is fused


@pytest.mark.parametrize(
    "name, dtype, rows, cols, shared",
    [
        # 1024 threads of 16 held bf16 elements: 64 registers a thread at most (it spilled)
        ("layernorm", DataType.BFloat16, 2048, 12288, True),
        ("rmsnorm", DataType.BFloat16, 2048, 12288, True),
        ("layernorm", DataType.Float, 1024, 16384, True),
        # 128 threads may take 255 registers: the partial sums stay in registers
        ("layernorm", DataType.Float, 8192, 4096, False),
        ("rmsnorm", DataType.Float, 2048, 12288, False),
    ],
)
def test_partial_sums_go_to_shared_memory_where_registers_would_spill(
    name, dtype, rows, cols, shared
):
    _, _, plan = _plan(name, rows, cols, dtype)
    norm = plan.segments[0]
    device = PROFILES["sm_90"]
    p = normalization.default_params(norm, device)
    assert normalization.partials_in_shared(norm, p) is shared
    source = generate_launches(plan, device, default_chooser(device))[0][0]
    assert ("cps0" in source.source) is shared
    assert source.shared_bytes >= normalization.partial_shared_bytes(norm, p)
    if shared:
        threads = p.threads_r * p.rows_per_block
        assert normalization.partial_shared_bytes(norm, p) >= threads * p.elements_per_thread * 4


@pytest.mark.parametrize(
    "dtype, cols, layout",
    [
        # rows of 33-128 vectors of 2-byte elements: a vector a thread, a row a block
        (DataType.BFloat16, 1024, (128, 1, 8)),
        (DataType.Half, 768, (96, 1, 8)),  # 96 vectors: three warps
        (DataType.BFloat16, 384, (64, 1, 8)),
        (DataType.BFloat16, 264, (64, 1, 8)),
        # longer rows, short-row lanes and fp32 keep the rows' default layout
        (DataType.BFloat16, 2560, None),
        (DataType.BFloat16, 256, None),
        (DataType.Float, 1024, None),
    ],
)
def test_short_rows_of_narrow_elements_take_a_vector_a_thread(dtype, cols, layout):
    rows = 300000
    _, _, plan = _plan_without_data("layernorm", dtype, rows, cols)
    norm = plan.segments[0]
    assert norm.column_partials
    device = PROFILES["sm_90"]
    p = normalization.default_params(norm, device)
    plain = normalization.default_params(replace(norm, column_partials=(), column_groups=0), device)
    if layout is None:
        assert (p.threads_r, p.rows_per_block, p.elements_per_thread) == (
            plain.threads_r,
            plain.rows_per_block,
            plain.elements_per_thread,
        )
    else:
        assert (p.threads_r, p.rows_per_block, p.elements_per_thread) == layout


def _plan_without_data(name: str, dtype: DataType, rows: int, cols: int):  # noqa: ANN202
    define, _, _ = CASES[name]
    fd = build(define, dtype)
    t, f32 = dtype.numpy, np.float32
    shapes = [((rows, cols), t), ((rows, cols), t), ((rows,), f32)]
    shapes += [((rows,), f32), ((cols,), t)] if name == "layernorm" else [((cols,), t)]
    inputs = [  # zero-stride views of one element: planning reads no data
        np.lib.stride_tricks.as_strided(np.zeros(1, ty), shape, (0,) * len(shape))
        for shape, ty in shapes
    ]
    return fd, inputs, make_plan(fd.fusion, inputs, None, PROFILES["sm_90"])
