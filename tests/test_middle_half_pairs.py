"""Heuristics 72 (`normalization._middle_half_pairs`): held rows of a middle dim (softmax
over C of [N, C, L]) of 2-byte loads in a vector of 2 outputs a lane, which would take
MIDDLE_HELD_BLOCK_THREADS (4) threads of STRIDED_VECTOR_ELEMENTS, take twice the elements a
thread in half the threads, as columns have since heuristics 62. The judged points, a property
over drawn shapes, compiles, host AddressSanitizer agreement at large shapes' defaults run on
small ones (the last block partly empty, and a shorter row), and the GPU."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pattern_runs import (
    SM90,
    agree_on_gpu,
    agree_on_host,
    assert_compiles,
    needs_host_compiler,
    pattern_defaults,
)
from test_codegen_compile import ARCHS
from test_middle_pairs_one_thread import one_thread_takes

from tunefuse import DataType
from tunefuse.device_info import H100, PROFILES
from tunefuse.schedulers import normalization, reduction


@pytest.mark.parametrize(
    "dtype, shape, threads",
    [
        # swept (benchmarks/surface/column_lanes_2026-11-29/sweep_mid.log): 4 threads of 8 in a
        # vector of 2, 54.2 us; 2 threads of 15, 51.0-52.3
        (DataType.BFloat16, (20360, 29, 50), 2),
        (DataType.BFloat16, (9647, 31, 342), 2),
        (DataType.BFloat16, (4355, 30, 138), 2),
        (DataType.Half, (4355, 30, 138), 2),
        # judged (benchmarks/surface/inner_short_runs_2026-11-30/judged_K_summary.txt)
        (DataType.BFloat16, (17744, 18, 38), 2),  # 30.7 -> 24.6 us
        (DataType.BFloat16, (138536, 31, 14), 2),  # 105.2 -> 92.0
        (DataType.BFloat16, (5468, 29, 10), 2),  # lost: 7.9 -> 8.5
        # fp32 lanes of a vector of 2 keep their threads
        (DataType.Float, (4355, 30, 138), 4),
        # rows of 8 threads keep them (33-64 elements)
        (DataType.BFloat16, (4355, 60, 138), 8),
    ],
)
def test_the_judged_points(dtype, shape, threads):
    """Heuristics 72's threads, and after it 74's and 75's: 2 threads a row take one where
    that grid fills the device (bfloat16 rows of more than 24), else bf16 pairs go along x."""
    _, _, p = pattern_defaults("middle_softmax", shape, dtype)
    assert p.cache_row and p.vector == 2, p
    if threads == 2 and one_thread_takes(shape, dtype):
        threads = 1  # heuristics 75 (test_middle_pairs_one_thread.py)
    assert p.threads_r == threads, p
    # heuristics 74 puts bf16 pairs of 2 threads along x (test_middle_pairs_along_x.py)
    assert p.inner is (threads == 2 and dtype == DataType.BFloat16), p


@settings(max_examples=80, deadline=None)
@given(
    dtype=st.sampled_from([DataType.BFloat16, DataType.Half]),
    reduced=st.integers(9, 40),
    outer=st.integers(0, 16).flatmap(lambda k: st.integers(1 << k, 2 << k)),
    inner=st.integers(1, 200).map(lambda i: 2 * i),
)
@example(dtype=DataType.BFloat16, reduced=17, outer=1, inner=6)  # one slab: a column's outputs
def test_drawn_middle_pairs_of_2_byte_loads_hold_16_elements(dtype, reduced, outer, inner):
    """Drawn middle softmaxes [outer, reduced, 2 * inner] of 2-byte loads: where the default
    holds a vector of 2 outputs a lane along y, its threads are the fewest (a power of two) of
    STRIDED_VECTOR_ELEMENTS elements or fewer, halved where that comes to
    MIDDLE_HELD_BLOCK_THREADS (4); the params are valid."""
    shape = (outer, reduced, inner)
    _, seg, p = pattern_defaults("middle_softmax", shape, dtype)
    assert normalization.is_valid(seg, H100, p) is None
    if not p.cache_row or p.vector != 2 or p.rows_per_lane != 1:
        return
    n_out, n_red = reduction.sizes(seg)
    if reduction.outputs_run(seg) == n_out:
        return  # one outer slab: the outputs are one run, a column's (`_long_halves`)
    if p.inner and reduction.outputs_run(seg) * 2 <= normalization.STRIDED_INNER_RUN_BYTES:
        return  # short runs along x (heuristics 29, `_strided_rows`)
    threads = normalization.pow2_at_least(-(-n_red // normalization.STRIDED_VECTOR_ELEMENTS))
    if threads == normalization.MIDDLE_HELD_BLOCK_THREADS:
        threads //= 2
    if threads == 2 and reduction.outputs_run(seg) * 2 > normalization.STRIDED_INNER_RUN_BYTES:
        threads = 1 if one_thread_takes(shape, dtype) else 2  # heuristics 75
    assert p.threads_r == threads, (shape, p)
    if threads > 1:  # one thread holds its whole row (heuristics 75)
        assert p.elements_per_thread <= 2 * normalization.STRIDED_VECTOR_ELEMENTS, (shape, p)
    if reduction.outputs_run(seg) * 2 > normalization.STRIDED_INNER_RUN_BYTES:
        assert p.inner is (threads == 2 and dtype == DataType.BFloat16), (shape, p)  # 74, 75


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    "shape, dtype",
    [((2036, 29, 50), DataType.BFloat16), ((1500, 30, 138), DataType.Half)],
)
def test_middle_half_pairs_compile(shape, dtype, arch):
    plan, seg, p = pattern_defaults("middle_softmax", shape, dtype, PROFILES[arch])
    assert (p.threads_r, p.vector) == (2, 2), p
    assert_compiles(plan, seg, p, arch)


# (large shape whose defaults are taken, small shape they run on: the last block partly
# empty, and a row shorter than the params' in the second case)
HOST_CASES = [  # grids that keep 2 threads a row (one thread would not fill the device)
    ((2036, 29, 50), (3, 29, 50), DataType.BFloat16),
    ((2036, 29, 50), (5, 21, 50), DataType.BFloat16),
    ((1500, 30, 138), (2, 30, 138), DataType.Half),
]


@needs_host_compiler
@pytest.mark.parametrize("large, small, dtype", HOST_CASES)
def test_middle_half_pairs_agree_on_the_host(large, small, dtype):
    """The defaults of a large shape, run on a small one on the host under AddressSanitizer,
    agree with the reference."""
    _, _, p = pattern_defaults("middle_softmax", large, dtype, SM90)
    assert (p.threads_r, p.vector) == (2, 2), p
    agree_on_host("middle_softmax", p, small, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "shape, dtype",
    [
        ((5003, 29, 50), DataType.BFloat16),
        ((1001, 31, 342), DataType.BFloat16),
        ((3001, 30, 138), DataType.Half),
    ],
)
def test_middle_half_pairs_agree_on_the_gpu(shape, dtype, rng):
    """The executor's own defaults on the device: 2 threads a row, a vector of 2 outputs, the
    last block partly empty."""
    launched = agree_on_gpu("middle_softmax", shape, dtype, rng)
    assert [(k.params["threads_r"], k.params["vector"]) for k in launched] == [(2, 2)]
