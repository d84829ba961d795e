"""`normalization.COLUMN_HALF_LANE_BYTES` (heuristics 67): held column rows of 2-byte loads (a
layernorm over dim 0 of bf16 [R, N], N odd so no vector of outputs) whose lane loads
STRIDED_LANE_BYTES or more in one row, 16 elements a thread, take a second row a lane; lanes
of fewer bytes keep the 32-byte bound. The judged points, a property over drawn columns (rows
a lane the most the bounds allow, and never fewer elements a lane than a row of 15), compiles,
host AddressSanitizer agreement at large shapes' defaults run on small ones, and the GPU."""

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
from tunefuse.schedulers import normalization


@pytest.mark.parametrize(
    "shape, dtype, threads, lanes",
    [
        # judged (benchmarks/surface/column_lanes_2026-11-29/judged_D_summary.txt)
        ((32, 1546083), DataType.BFloat16, 2, 2),  # 93.3 -> 79.9 us
        ((16, 8332423), DataType.BFloat16, 1, 2),  # 228.0 -> 195.8
        ((31, 410089), DataType.BFloat16, 2, 2),  # 29.3 -> 27.3
        ((16, 1000001), DataType.Half, 1, 2),  # the same loads, not judged
        # lost when every 2-byte column lane took 64 bytes (judged_B_summary.txt): 32 bytes
        ((4, 13339435), DataType.BFloat16, 1, 4),  # 89.9 -> 118.9 at 8 rows a lane
        ((8, 1148133), DataType.BFloat16, 1, 2),  # 18.7 -> 21.6 at 4
        # fp32 lanes of 32 bytes keep one row (columns lost at 64 bytes, heuristics 66's judge)
        ((16, 1000001), DataType.Float, 1, 1),
    ],
)
def test_the_judged_points(shape, dtype, threads, lanes):
    _, _, p = pattern_defaults("column_layernorm", shape, dtype)
    assert p.cache_row and not p.inner and p.vector == 1, p
    assert (p.threads_r, p.rows_per_lane) == (threads, lanes), p


@settings(max_examples=120, deadline=None)
@given(
    dtype=st.sampled_from([DataType.BFloat16, DataType.Half]),
    reduced=st.integers(2, 256),
    columns=st.integers(1, 4_000_000).map(lambda n: 2 * n + 1),
)
def test_drawn_columns_hold_rows_up_to_the_bound(dtype, reduced, columns):
    """Drawn 2-byte columns [reduced, columns] held a row of one output a lane along y: rows a
    lane are the most that keep the lane's loads under COLUMN_HALF_LANE_BYTES where one row
    loads STRIDED_LANE_BYTES or more (else under STRIDED_LANE_BYTES), its elements within
    LANE_ELEMENTS and 8 blocks an SM. So a lane of 16 elements holds as many rows as one of
    15 where the grid allows (the step the rule removes)."""
    _, seg, p = pattern_defaults("column_layernorm", (reduced, columns), dtype)
    if not p.cache_row or p.inner or p.vector > 1:
        return
    assert normalization.is_valid(seg, H100, p) is None
    lane_bytes = p.elements_per_thread * dtype.itemsize
    most = (
        normalization.COLUMN_HALF_LANE_BYTES
        if lane_bytes >= normalization.STRIDED_LANE_BYTES
        else normalization.STRIDED_LANE_BYTES
    )

    def allowed(r: int) -> bool:
        return rows_a_lane_allowed(seg, p, lane_bytes, most, r)

    assert p.rows_per_lane == 1 or allowed(p.rows_per_lane), (reduced, columns, p)
    assert not allowed(2 * p.rows_per_lane), (reduced, columns, p)
    if p.elements_per_thread in (15, 16) and allowed(2):
        assert p.rows_per_lane == 2, (reduced, columns, p)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("shape", [(32, 1546083), (16, 8332423)])
def test_column_half_lanes_compile(shape, arch):
    plan, seg, p = pattern_defaults("column_layernorm", shape, DataType.BFloat16, PROFILES[arch])
    assert p.elements_per_thread == 16 and p.rows_per_lane == 2, p
    assert_compiles(plan, seg, p, arch)


# (large shape whose defaults are taken, small shape they run on: the last block row partly
# empty, and rows shorter than the params' in the last two cases)
HOST_CASES = [
    ((32, 1546083), (32, 301)),
    ((16, 8332423), (16, 517)),
    ((32, 1546083), (27, 259)),
    ((16, 8332423), (11, 263)),
]


@needs_host_compiler
@pytest.mark.parametrize("large, small", HOST_CASES)
def test_column_half_lanes_agree_on_the_host(large, small):
    """The defaults of a large shape, run on a small one on the host under AddressSanitizer,
    agree with the reference."""
    _, _, p = pattern_defaults("column_layernorm", large, DataType.BFloat16, SM90)
    assert p.elements_per_thread == 16 and p.rows_per_lane == 2, p
    agree_on_host("column_layernorm", p, small, DataType.BFloat16)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "shape, threads",
    [((32, 1546083), 2), ((16, 2565581), 1), ((31, 410089), 2)],
)
def test_column_half_lanes_agree_on_the_gpu(shape, threads, rng):
    """The executor's own defaults on the device: 2 rows a lane of 16 elements, the last
    block partly empty."""
    launched = agree_on_gpu("column_layernorm", shape, DataType.BFloat16, rng)
    assert [(k.params["threads_r"], k.params["rows_per_lane"]) for k in launched] == [(threads, 2)]
