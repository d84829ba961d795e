"""Rows held in registers by a whole number of warps (schedulers.normalization.balanced_threads
and _fewer_idle_slots), without a GPU: the thread count's properties over any row, the
layouts the measured cells took, validity, the search space, and NVRTC for sm_80 and sm_90."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from fusion_zoo import ZOO, build, inputs_for
from hypothesis import given
from hypothesis import strategies as st
from test_codegen_compile import ARCHS, compile_plan
from training_fusions import NORM_BACKWARDS

from tunefuse import DataType
from tunefuse.device_info import PROFILES
from tunefuse.planning.kernel_ir import SchedulerKind
from tunefuse.planning.plan import make_plan
from tunefuse.schedulers import normalization, reduction

H100 = PROFILES["sm_90"]


@given(
    row_vectors=st.integers(33, 1024 * 8),
    most=st.integers(1, 8),
    max_threads=st.sampled_from([512, 1024]),
)
def test_balanced_threads_are_whole_warps_that_leave_the_fewest_slots_idle(
    row_vectors, most, max_threads
):
    if row_vectors > max_threads * most:
        with pytest.raises(ValueError):
            normalization.balanced_threads(row_vectors, most, max_threads)
        return
    t = normalization.balanced_threads(row_vectors, most, max_threads)
    assert t % reduction.WARP == 0 and t <= max_threads
    each = -(-row_vectors // t)
    assert each <= most
    idle = t * each - row_vectors
    # no whole number of warps holding at most `most` vectors each leaves fewer idle, and
    # none with as few idle has fewer threads
    for other in range(reduction.WARP, max_threads + 1, reduction.WARP):
        if other * most >= row_vectors:
            other_idle = other * -(-row_vectors // other) - row_vectors
            assert (other_idle, other) >= (idle, t)


def _norm(fd, inputs, device=H100):  # noqa: ANN001, ANN202
    plan = make_plan(fd.fusion, inputs, None, device)
    return plan, next(s for s in plan.segments if s.scheduler is SchedulerKind.NORMALIZATION)


def _backward(name: str, rows: int, cols: int, dtype: DataType):  # noqa: ANN202
    define, make, _ = NORM_BACKWARDS[name]
    fd = build(define, dtype)
    return fd, make(rows, cols, dtype, np.random.default_rng(0))


@pytest.mark.parametrize(
    "name, dtype, cols, layout",
    [
        # measured (benchmarks/README.md, "Rows of whole warps"): the bf16 backward's rows
        # hold dy and x, and the power of two left slots idle
        ("layernorm", DataType.BFloat16, 2560, (160, 16)),
        ("rmsnorm", DataType.BFloat16, 5120, (320, 16)),
        ("layernorm", DataType.BFloat16, 1536, (96, 16)),
        ("rmsnorm", DataType.BFloat16, 3000, (192, 16)),
        # 1024 threads of 16 fit no block an SM by the estimate, 768 fit one
        ("layernorm", DataType.BFloat16, 12288, (768, 16)),
        # the power of two held the row exactly: unchanged
        ("layernorm", DataType.BFloat16, 4096, (256, 16)),
        ("layernorm", DataType.Float, 2560, (128, 20)),
        ("rmsnorm", DataType.Float, 3000, (128, 24)),
    ],
)
def test_backward_rows_take_whole_warps_where_the_power_of_two_left_slots_idle(
    name, dtype, cols, layout
):
    fd, inputs = _backward(name, 8192, cols, dtype)
    _, seg = _norm(fd, inputs)
    p = normalization.default_params(seg, H100)
    assert (p.threads_r, p.elements_per_thread) == layout
    assert normalization.is_valid(seg, H100, p) is None


@pytest.mark.parametrize("dtype", [DataType.Float, DataType.BFloat16], ids=lambda d: d.value)
@pytest.mark.parametrize("cols", [2560, 3000, 5120, 10240, 20480])
@pytest.mark.parametrize("name", ["softmax", "layernorm", "rmsnorm"])
def test_one_held_input_keeps_the_power_of_two(name, cols, dtype):
    """softmax bf16 [3276, 10240]: 640 threads of 2 vectors ran 1.05x 512 of 3 (the same
    rows an SM by the register estimate): a row of one held input keeps the power of two."""
    fd = build(ZOO[name], dtype)
    _, seg = _norm(fd, inputs_for(fd, 1024, cols, np.random.default_rng(0)))
    p = normalization.default_params(seg, H100)
    if p.cache_row:
        assert p.threads_r & (p.threads_r - 1) == 0


def test_whole_warps_are_valid_inner_and_refused_outer_or_below_a_warp():
    fd, inputs = _backward("layernorm", 8192, 2560, DataType.BFloat16)
    _, seg = _norm(fd, inputs)
    p = normalization.default_params(seg, H100)
    assert p.threads_r == 160 and normalization.is_valid(seg, H100, p) is None
    assert "power of two" in normalization.is_valid(
        seg, H100, replace(p, threads_r=48, elements_per_thread=56)
    )
    row = build(ZOO["row_sum"], DataType.Float)
    plan = make_plan(row.fusion, inputs_for(row, 4096, 3000, np.random.default_rng(0)), None, H100)
    (red,) = plan.segments
    q = reduction.default_params(red, H100)
    assert reduction.is_valid(red, H100, replace(q, threads_r=96, inner=True)) is None
    assert "power of two" in reduction.is_valid(red, H100, replace(q, threads_r=96, inner=False))


def test_the_search_space_holds_the_whole_warps_that_fit_the_row():
    fd, inputs = _backward("layernorm", 8192, 3000, DataType.Float)
    _, seg = _norm(fd, inputs)
    choices = normalization.search_space(seg, H100)["threads_r"].choices
    # 750 vectors of 4: 96 threads of 8, 128 of 6, 192 of 4, 384 of 2, 768 of 1
    assert {96, 192, 384, 768} <= set(choices)
    assert all(c & (c - 1) == 0 or c % 32 == 0 for c in choices)


@pytest.mark.parametrize("arch", ARCHS)
def test_kernels_of_whole_warps_compile(arch):
    device = PROFILES[arch]
    for name in NORM_BACKWARDS:
        for cols in (1536, 2560, 3000):
            fd, inputs = _backward(name, 4099, cols, DataType.BFloat16)
            plan, seg = _norm(fd, inputs, device)
            t = normalization.default_params(seg, device).threads_r
            assert t & (t - 1)  # not a power of two
            assert compile_plan(plan, arch)
