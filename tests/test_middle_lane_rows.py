"""`normalization.MIDDLE_LANE_BYTES` (heuristics 66): held rows of a middle dim (the outputs'
run shorter than all outputs, as softmax over C of [N, C, L]) kept by MIDDLE_LANE_THREADS
threads or more take rows a lane until a lane's loads come to 64 bytes, where other held
strided rows stop at STRIDED_LANE_BYTES (32). The judged points, a property over drawn shapes
(rows a lane the most the bounds allow), compiles, host AddressSanitizer agreement at large
shapes' defaults run on small ones, and the GPU."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pattern_runs import (
    SM90,
    agree_on_gpu,
    agree_on_host,
    assert_compiles,
    needs_host_compiler,
    pattern_defaults,
    rows_a_lane_allowed,
)
from test_codegen_compile import ARCHS

from tunefuse import DataType
from tunefuse.device_info import H100, PROFILES
from tunefuse.schedulers import normalization, reduction


@pytest.mark.parametrize(
    "pattern, dtype, shape, threads, lanes",
    [
        # judged (benchmarks/surface/block_threads_2026-11-29/judged_E_summary.txt)
        ("middle_softmax", DataType.Float, (51585, 36, 31), 4, 2),  # 193.9 -> 130.8 us
        ("middle_softmax", DataType.Float, (7180, 34, 141), 4, 2),  # 119.1 -> 82.0
        ("middle_softmax", DataType.Float, (16601, 181, 16), 16, 2),  # 165.5 -> 121.7
        ("middle_softmax", DataType.BFloat16, (8441, 62, 81), 4, 2),  # 93.7 -> 85.6
        ("middle_softmax", DataType.Float, (23672, 230, 10), 16, 2),  # lost: 179.8 -> 231.1
        # columns lost when judged (judged_D_summary.txt), rows of 2 threads too: 32 bytes
        ("column_layernorm", DataType.Float, (129, 84755), 16, 1),
        ("column_layernorm", DataType.Float, (40, 146695), 4, 1),
        ("middle_softmax", DataType.Float, (111730, 22, 21), 2, 1),
    ],
)
def test_the_judged_points(pattern, dtype, shape, threads, lanes):
    _, _, p = pattern_defaults(pattern, shape, dtype)
    assert p.cache_row and not p.inner and p.vector == 1, p
    assert (p.threads_r, p.rows_per_lane) == (threads, lanes), p


@settings(max_examples=80, deadline=None)
@given(
    pattern=st.sampled_from(["middle_softmax", "column_layernorm"]),
    dtype=st.sampled_from([DataType.BFloat16, DataType.Float, DataType.Half]),
    reduced=st.integers(33, 256),
    outer=st.integers(1, 40000),
    inner=st.integers(1, 300),
)
def test_drawn_rows_take_rows_a_lane_as_the_rule_says(pattern, dtype, reduced, outer, inner):
    """Drawn middle softmaxes [outer, reduced, inner] and columns [reduced, outer * inner]
    whose default holds a row of one output a lane along y, in runs of a sector or more: rows
    a lane are the most that keep a lane's loads under MIDDLE_LANE_BYTES (a middle dim's rows
    of MIDDLE_LANE_THREADS threads or more), COLUMN_HALF_LANE_BYTES (a column's 2-byte lanes
    of STRIDED_LANE_BYTES or more) or STRIDED_LANE_BYTES, its elements within
    LANE_ELEMENTS and 8 blocks an SM; the params are valid."""
    shape = (outer, reduced, inner) if pattern == "middle_softmax" else (reduced, outer * inner)
    _, seg, p = pattern_defaults(pattern, shape, dtype)
    run_bytes = reduction.outputs_run(seg) * dtype.itemsize
    if not p.cache_row or p.inner or p.vector > 1 or run_bytes < reduction.SECTOR_BYTES:
        return
    assert normalization.is_valid(seg, H100, p) is None
    n_out, _ = reduction.sizes(seg)
    middle = reduction.outputs_run(seg) < n_out
    lane_bytes = p.elements_per_thread * dtype.itemsize
    if middle and p.threads_r >= normalization.MIDDLE_LANE_THREADS:
        most = normalization.MIDDLE_LANE_BYTES
    elif not middle and dtype.itemsize == 2 and lane_bytes >= normalization.STRIDED_LANE_BYTES:
        most = normalization.COLUMN_HALF_LANE_BYTES  # heuristics 67
    else:
        most = normalization.STRIDED_LANE_BYTES

    def allowed(r: int) -> bool:
        return rows_a_lane_allowed(seg, p, lane_bytes, most, r)

    assert p.rows_per_lane == 1 or allowed(p.rows_per_lane), (shape, p)
    assert not allowed(2 * p.rows_per_lane), (shape, p)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    "shape, dtype",
    [((51585, 36, 31), DataType.Float), ((8441, 62, 81), DataType.BFloat16)],
)
def test_middle_lane_rows_compile(shape, dtype, arch):
    plan, seg, p = pattern_defaults("middle_softmax", shape, dtype, PROFILES[arch])
    assert p.threads_r >= normalization.MIDDLE_LANE_THREADS and p.rows_per_lane == 2, p
    assert_compiles(plan, seg, p, arch)


# (large shape whose defaults are taken, small shape they run on: the last block row partly
# empty, and a row shorter than the params' in the last case)
HOST_CASES = [
    ((51585, 36, 31), (5, 36, 31), DataType.Float),
    ((8441, 62, 81), (3, 62, 81), DataType.BFloat16),
    ((16601, 181, 16), (3, 181, 16), DataType.Float),
    ((51585, 36, 31), (4, 29, 31), DataType.Float),
]


@needs_host_compiler
@pytest.mark.parametrize("large, small, dtype", HOST_CASES)
def test_middle_lane_rows_agree_on_the_host(large, small, dtype):
    """The defaults of a large shape, run on a small one on the host under AddressSanitizer,
    agree with the reference."""
    _, _, p = pattern_defaults("middle_softmax", large, dtype, SM90)
    assert p.threads_r >= normalization.MIDDLE_LANE_THREADS and p.rows_per_lane == 2, p
    agree_on_host("middle_softmax", p, small, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "shape, dtype, threads",
    [
        ((5001, 36, 31), DataType.Float, 4),
        ((3001, 62, 81), DataType.BFloat16, 4),
        ((4501, 181, 16), DataType.Float, 16),
    ],
)
def test_middle_lane_rows_agree_on_the_gpu(shape, dtype, threads, rng):
    """The executor's own defaults on the device: 2 rows a lane, the last block partly
    empty."""
    launched = agree_on_gpu("middle_softmax", shape, dtype, rng)
    assert [(k.params["threads_r"], k.params["rows_per_lane"]) for k in launched] == [(threads, 2)]
