"""Heuristics 74 (`normalization._middle_pairs_along_x`): held rows of a middle dim (softmax
over C of [N, C, L]) of bfloat16 loads in a vector of 2 outputs a lane in 2 threads put those
threads along x (`inner`), each holding a whole number of vectors of its row. The judged and
swept points, fp16, fp32 and vectors of 4 unchanged, a property over drawn shapes, compiles, host
AddressSanitizer agreement at large shapes' defaults run on small ones (the last block partly
empty, and a shorter row), and the GPU."""

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
)
from test_codegen_compile import ARCHS

from tunefuse import DataType
from tunefuse.device_info import H100, PROFILES
from tunefuse.schedulers import normalization, reduction


@pytest.mark.parametrize(
    "dtype, shape, inner",
    [
        # (inner None: one thread a row since heuristics 75, test_middle_pairs_one_thread.py)
        # swept (benchmarks/surface/middle_inner_chunks_2026-11-30/sweep_pairs.log)
        (DataType.BFloat16, (3863, 26, 74), True),  # 17.6 -> 15.8 us
        (DataType.BFloat16, (3057, 25, 90), True),  # 16.8 -> 15.7
        (DataType.BFloat16, (63904, 19, 106), True),  # 238.6 -> 197.6
        # judged (judged_N_summary.txt), bf16 pairs
        (DataType.BFloat16, (62027, 22, 54), True),  # 127.8 -> 106.4
        (DataType.BFloat16, (470, 24, 382), True),  # 12.1 -> 11.0
        (DataType.BFloat16, (14800, 10, 398), True),  # 116.7 -> 97.4
        (DataType.BFloat16, (24842, 17, 198), True),  # lost: 138.4 -> 142.6
        # the first form's losers, left along y: a vector of 4, and fp32
        (DataType.BFloat16, (43245, 10, 20), False),  # 1.086
        (DataType.Float, (15144, 14, 234), False),  # 1.174
        (DataType.Float, (59432, 9, 54), False),  # 1.033
        # judged_N2_summary.txt: bf16 gained, fp16 split by C (left along y)
        (DataType.BFloat16, (3845, 20, 254), True),  # 41.5 -> 34.0 us
        (DataType.BFloat16, (175252, 10, 26), True),  # 91.0 -> 73.3
        (DataType.Half, (2760, 17, 102), False),  # 11.5 -> 14.0
        (DataType.Half, (953, 18, 110), False),  # 7.2 -> 8.8
        (DataType.Half, (11651, 28, 86), None),  # 49.7 -> 42.0, not taken
        # as written (judged_N3_summary.txt)
        (DataType.BFloat16, (61183, 12, 122), True),  # 164.0 -> 132.3 us
        (DataType.BFloat16, (8765, 20, 106), True),  # 40.3 -> 32.7
        (DataType.BFloat16, (6232, 31, 326), None),  # lost: 101.9 -> 108.6
        (DataType.BFloat16, (6742, 32, 142), None),  # lost: 54.2 -> 55.3
    ],
)
def test_the_judged_points(dtype, shape, inner):
    _, _, p = pattern_defaults("middle_softmax", shape, dtype)
    if inner is None:
        assert (p.threads_r, p.vector, p.inner) == (1, 2, False), p
        return
    assert p.cache_row and p.threads_r == 2 and p.rows_per_lane == 1, p
    assert p.inner is inner, p
    if inner:
        assert p.vector == 2 and p.elements_per_thread % 2 == 0, p


@settings(max_examples=120, deadline=None)
@given(
    dtype=st.sampled_from([DataType.BFloat16, DataType.Half, DataType.Float]),
    reduced=st.integers(2, 40),
    outer=st.integers(0, 16).flatmap(lambda k: st.integers(1 << k, 2 << k)),
    inner=st.integers(1, 200).map(lambda i: 2 * i),
)
def test_drawn_middle_pairs_in_2_threads_go_along_x(dtype, reduced, outer, inner):
    """Drawn middle softmaxes [outer, reduced, 2 * inner] whose outputs' runs are longer than
    STRIDED_INNER_RUN_BYTES (shorter runs: heuristics 29's layouts): a default holding a vector
    of 2 outputs a lane in 2 threads holds them along x for bfloat16 loads, each thread a whole
    number of vectors of its row, and along y for fp16 and fp32 loads; the params are valid."""
    shape = (outer, reduced, inner)
    _, seg, p = pattern_defaults("middle_softmax", shape, dtype)
    assert normalization.is_valid(seg, H100, p) is None
    n_out, n_red = reduction.sizes(seg)
    if reduction.outputs_run(seg) == n_out:
        return  # one outer slab: the outputs are one run, a column's
    if inner * dtype.itemsize <= normalization.STRIDED_INNER_RUN_BYTES:
        return
    if not p.cache_row or p.vector != 2 or p.threads_r != 2 or p.rows_per_lane != 1:
        return
    assert p.inner is (dtype == DataType.BFloat16), (shape, p)
    if p.inner:
        vectors = -(-n_red // 2)
        assert p.elements_per_thread == 2 * -(-vectors // 2), (shape, p)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    "shape, dtype",
    [((3863, 26, 74), DataType.BFloat16), ((14800, 10, 398), DataType.BFloat16)],
)
def test_middle_pairs_along_x_compile(shape, dtype, arch):
    plan, seg, p = pattern_defaults("middle_softmax", shape, dtype, PROFILES[arch])
    assert p.inner and (p.threads_r, p.vector) == (2, 2), p
    assert_compiles(plan, seg, p, arch)


# (large shape whose defaults are taken, small shape they run on: the last block partly
# empty, and a row shorter than the params' in the second case)
HOST_CASES = [
    ((3863, 26, 74), (3, 26, 74), DataType.BFloat16),
    ((3863, 26, 74), (5, 19, 74), DataType.BFloat16),
    ((14800, 10, 398), (2, 10, 398), DataType.BFloat16),
    ((14800, 10, 398), (3, 7, 398), DataType.BFloat16),
]


@needs_host_compiler
@pytest.mark.parametrize("large, small, dtype", HOST_CASES)
def test_middle_pairs_along_x_agree_on_the_host(large, small, dtype):
    """The defaults of a large shape, run on a small one on the host under AddressSanitizer,
    agree with the reference."""
    _, _, p = pattern_defaults("middle_softmax", large, dtype, SM90)
    assert p.inner and (p.threads_r, p.vector) == (2, 2), p
    agree_on_host("middle_softmax", p, small, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "shape, dtype",
    [
        ((3001, 26, 74), DataType.BFloat16),
        ((20001, 19, 106), DataType.BFloat16),
        ((1001, 25, 90), DataType.BFloat16),
        ((5001, 11, 398), DataType.BFloat16),
    ],
)
def test_middle_pairs_along_x_agree_on_the_gpu(shape, dtype, rng):
    """The executor's own defaults on the device: 2 threads a row along x, a vector of 2
    outputs, the last block partly empty."""
    launched = agree_on_gpu("middle_softmax", shape, dtype, rng)
    assert [(k.params["threads_r"], k.params["vector"], k.params["inner"]) for k in launched] == [
        (2, 2, True)
    ]
