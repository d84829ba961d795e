"""`normalization._short_run_lanes` (heuristics 61): held strided rows along y whose outputs'
run is shorter than a sector (softmax over C of [N, C, L], L odd) take a block row of fewer
outputs than a warp, so that a warp reads adjacent runs of consecutive reduced elements. The
defaults it picks, a property over drawn shapes, compiles, host AddressSanitizer agreement at
the defaults of large shapes, and the GPU."""

from __future__ import annotations

import pathlib
import shutil
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_codegen_compile import ARCHS
from test_gpu_execute import assert_agrees
from test_reduction_defaults import pattern_plan

from tunefuse import DataType, FusionDefinition
from tunefuse.codegen import generate
from tunefuse.compiler import compile_kernel
from tunefuse.device_info import H100, PROFILES
from tunefuse.schedulers import normalization, reduction

WARP = reduction.WARP


def _segment(shape: tuple[int, ...], dtype: DataType, device=H100):  # noqa: ANN001, ANN202
    (seg,) = pattern_plan("middle_softmax", shape, dtype, device).segments
    return seg


@pytest.mark.parametrize(
    "shape, dtype, threads, outputs",
    [
        # measured (benchmarks/surface/tiny_inner_2026-11-29/): the default's threads a row,
        # a block row of 16, 8, 16 or 32 outputs where it had 32-256. Two of those points,
        # bf16 [755203, 24, 3] and [1398101, 8, 3], hold 7 elements a thread or fewer and have
        # put their threads along x since heuristics 71 (`test_few_thread_inner.py`).
        ((755203, 40, 3), DataType.BFloat16, 4, 8),  # 2 threads a row before
        ((280100, 74, 3), DataType.BFloat16, 8, 8),
        ((90687, 74, 5), DataType.BFloat16, 16 // 2, 16),
        ((23967, 200, 7), DataType.BFloat16, 16, 16),
        ((300000, 24, 5), DataType.Float, 2, 16),
        ((64776, 74, 7), DataType.Float, 8, 16),
    ],
)
def test_short_runs_take_a_block_row_of_few_outputs(shape, dtype, threads, outputs):
    p = normalization.default_params(_segment(shape, dtype), H100)
    assert (p.threads_r, p.rows_per_block) == (threads, outputs), p
    assert p.cache_row and not p.inner and p.vector == 1


@pytest.mark.parametrize(
    "shape, dtype",
    [
        ((100000, 24, 9), DataType.Float),  # a run of 36 bytes: a sector or more
        ((200000, 24, 4), DataType.BFloat16),  # a vector of outputs a lane
        ((699050, 24, 2), DataType.BFloat16),  # a row's threads along x (inner)
        ((7989, 600, 7), DataType.BFloat16),  # rows too long to hold: a block a slab
    ],
)
def test_other_strided_rows_keep_their_layout(shape, dtype):
    seg = _segment(shape, dtype)
    p = normalization.default_params(seg, H100)
    assert normalization._short_run_lanes(seg, H100, p) == p
    assert p.inner or not p.cache_row or p.vector > 1 or p.rows_per_block >= WARP


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 400000),
    c=st.integers(2, 256),
    run=st.sampled_from([1, 3, 5, 6, 7, 9, 11, 13, 15]),
    dtype=st.sampled_from([DataType.BFloat16, DataType.Float, DataType.Half]),
)
def test_a_short_run_s_block_row_reads_whole_pieces_of_each_slab(n, c, run, dtype):
    """Wherever the defaults hold strided rows along y, one output a lane, in runs under a
    sector, the block row is the largest power of two at most half a warp whose piece of each
    slab a warp reads is SHORT_RUN_PIECE bytes or more, or as many outputs as fill a warp with
    the block's threads if that is more, a row's threads doubled first while each holds 4
    elements or more; fewer outputs only where the block row holds every output. Every such
    layout is valid."""
    seg = _segment((n, c, run), dtype)
    p = normalization.default_params(seg, H100)
    assert normalization.is_valid(seg, H100, p) is None, p
    run_bytes = reduction.outputs_run(seg) * reduction.widest_load(seg)
    if p.inner or not p.cache_row or p.vector > 1 or p.shared_row or run_bytes >= 32:
        return
    x, t = p.rows_per_block, min(p.threads_r, WARP)
    piece = max(
        (w for w in (1, 2, 4, 8, 16) if WARP * run_bytes // w >= normalization.SHORT_RUN_PIECE),
        default=1,
    )
    want = max(piece, WARP // t)
    n_out, _ = reduction.sizes(seg)
    assert x == want or (x < want and x >= n_out), (p, want)
    assert x * t >= WARP or x >= n_out, p
    if x > piece and x < n_out:  # the warp's threads set the row: they could not double
        assert t == WARP or -(-c // (2 * t)) < normalization.STRIDED_INNER_ELEMENTS, p


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    "shape, dtype",
    [((755203, 40, 3), DataType.BFloat16), ((64776, 74, 7), DataType.Float)],
)
def test_short_run_layouts_compile(shape, dtype, arch):
    device = PROFILES[arch]
    plan = pattern_plan("middle_softmax", shape, dtype, device)
    (seg,) = plan.segments
    p = normalization.default_params(seg, device)
    assert p.rows_per_block < WARP, p
    kernel = generate(seg, p, device, {b.id: b.dtype for b in plan.buffers})
    assert compile_kernel(kernel.source, kernel.name, arch).cubin


def _middle_softmax(dtype: DataType) -> FusionDefinition:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
    from patterns import pattern_fusion

    return pattern_fusion("middle_softmax", dtype)


# (large shape whose defaults are taken, small shape they run on)
HOST_CASES = [
    ((755203, 40, 3), (37, 40, 3), DataType.BFloat16),  # 2 rows a lane, 8 outputs a row
    ((90687, 74, 5), (11, 74, 5), DataType.BFloat16),
    ((300000, 24, 5), (29, 24, 5), DataType.Float),
    ((280100, 74, 3), (43, 74, 3), DataType.BFloat16),
]


@pytest.mark.skipif(
    shutil.which("g++") is None or not sys.platform.startswith("linux"),
    reason="needs g++ on Linux (ucontext fibers, AddressSanitizer)",
)
@pytest.mark.parametrize("large, small, dtype", HOST_CASES)
def test_short_run_defaults_agree_on_the_host(large, small, dtype):
    """The defaults of a large shape, run on a small one (a last block row partly empty) on
    the host under AddressSanitizer, agree with the reference."""
    from host_kernels import run_on_host

    p = normalization.default_params(_segment(large, dtype, PROFILES["sm_90"]), PROFILES["sm_90"])
    assert p.rows_per_block <= WARP, p  # 32-256 before heuristics 61
    fd = _middle_softmax(dtype)
    rng = np.random.default_rng(small[0])
    inputs = [(rng.standard_normal(small) * 3).astype(dtype.numpy)]
    (seg,) = fd.plan(inputs, device=PROFILES["sm_90"]).segments
    assert normalization.is_valid(seg, PROFILES["sm_90"], p) is None
    (run,) = run_on_host(fd, inputs, [lambda s, d: p])
    assert_agrees(fd, inputs, run.outputs, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "shape, dtype",
    [
        ((150001, 40, 3), DataType.BFloat16),  # 4 threads a row (from 2), 2 rows a lane
        ((30001, 74, 5), DataType.BFloat16),
        ((10001, 200, 7), DataType.BFloat16),
        ((30001, 24, 5), DataType.Float),
        ((5001, 74, 7), DataType.Float),
        ((300007, 40, 3), DataType.Half),
        ((200001, 8, 5), DataType.Float),
    ],
)
def test_short_run_defaults_agree_on_the_gpu(shape, dtype, rng):
    """The executor's own defaults on the device: a block row under a warp, rows a lane where
    the defaults take them, the last block partly empty."""
    from test_gpu_split import run_with_reduction_params

    fd = _middle_softmax(dtype)
    inputs = [(rng.standard_normal(shape) * 3).astype(dtype.numpy)]
    got, launched = run_with_reduction_params(fd, inputs, kind="normalization")
    assert [k.params["rows_per_block"] < WARP for k in launched] == [True]
    assert_agrees(fd, inputs, got, dtype)
