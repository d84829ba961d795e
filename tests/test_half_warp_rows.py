"""Held rows of 16-byte vectors that a half-warp holds (`normalization.half_warp_rows_start`):
two rows a warp, sixteen threads a row, where a warp a row left each thread one or two
vectors. Defaults without a GPU, a property over widths, the rows on the host under
AddressSanitizer and on the GPU (the executor's default launches)."""

from __future__ import annotations

import shutil
import sys
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from norm_defaults import column_partials_default, zoo_norm_default
from zoo_agreement import zoo_norm_agrees_on_gpu, zoo_norm_agrees_on_host

from tunefuse import DataType
from tunefuse.device_info import A100, H100
from tunefuse.schedulers import normalization, reduction


@pytest.mark.parametrize(
    "name, cols, dtype",
    [
        ("rmsnorm", 188, DataType.Float),  # 47 vectors: 3 a thread
        ("layernorm", 256, DataType.Float),
        ("rmsnorm", 417, DataType.Float),  # odd: peeled at 4
        ("softmax", 512, DataType.Float),  # 128 vectors: 8 a thread, the most held
        ("layernorm", 344, DataType.BFloat16),
        ("rmsnorm", 512, DataType.BFloat16),
    ],
)
@pytest.mark.parametrize("device", [H100, A100])
def test_rows_of_16_byte_vectors_a_half_warp_holds_take_one(name, cols, dtype, device):
    seg, p = zoo_norm_default(name, 8192, cols, dtype, device)
    assert p.inner and p.cache_row
    # SHARED_WEIGHT_ROWS may spread the half-warp's rows over a warp: the half-warp is its start
    _, start = zoo_norm_default(name, 8192, cols, dtype, device, SHARED_WEIGHT_WAVES=0)
    assert (start.threads_r, start.rows_per_block) == (16, 8), start
    # (held from before the row loop with one row a lane, HOISTED_INVARIANTS; two rows a lane
    # hold them so in any case)
    shared = normalization.weight_shared_rows(seg, device, replace(start, hoist_invariants=False))
    assert p in (start, shared), p
    assert p.vector * dtype.itemsize == 16
    assert p.threads_r * p.elements_per_thread >= cols
    assert p.elements_per_thread <= normalization.held_elements_most(seg)


@pytest.mark.parametrize(
    "name, cols, dtype, why",
    [
        ("rmsnorm", 157, DataType.Float, "scalar chunks: a half-warp loads 64 bytes a row"),
        ("softmax", 1024, DataType.Float, "256 vectors: more than 16 threads hold"),
        ("softmax", 556, DataType.BFloat16, "70 vectors of 8: 40 elements a thread"),
        ("layernorm", 2048, DataType.BFloat16, "a long row"),
    ],
)
def test_other_held_rows_keep_a_warp_or_more(name, cols, dtype, why):
    _, p = zoo_norm_default(name, 8192, cols, dtype)
    assert p.cache_row and p.threads_r >= reduction.WARP, (why, p)


@pytest.mark.parametrize("cols", [188, 256, 300, 512])
@pytest.mark.parametrize("name", ["layernorm", "rmsnorm"])
def test_rows_whose_column_sums_are_taken_in_parts_keep_a_warp(name, cols):
    """A norm backward's dx kernel taking dw (and db) in parts keeps a warp a row: each
    thread keeps its columns' sums beside its row, and half-warp rows lost there."""
    _, p = column_partials_default(name, 65536, cols, DataType.Float)
    assert p.cache_row and p.threads_r == reduction.WARP, p


@pytest.mark.parametrize(
    "name, cols, dtype",
    [
        ("layernorm", 24, DataType.BFloat16),
        ("rmsnorm", 128, DataType.Float),
        ("softmax", 256, DataType.BFloat16),
    ],
)
def test_rows_of_a_warp_s_vectors_or_fewer_are_still_lanes(name, cols, dtype):
    """Rows of at most 32 vectors take the short rows' lanes (`_short_rows`), as before:
    the half-warp start applies to longer rows only."""
    seg, p = zoo_norm_default(name, 65536, cols, dtype)
    short = normalization._short_rows(seg, H100, fitted=True)
    hoist = normalization.hoists_invariants(seg, H100, short)
    assert p == replace(short, hoist_invariants=hoist)


@settings(max_examples=60, deadline=None)
@given(
    cols=st.integers(33 * 4, 4096),
    name=st.sampled_from(["softmax", "layernorm", "rmsnorm"]),
    dtype=st.sampled_from([DataType.Float, DataType.BFloat16]),
)
def test_a_held_row_s_default_holds_it_and_a_half_warp_only_at_16_bytes(cols, name, dtype):
    seg, p = zoo_norm_default(name, 4096, cols, dtype)
    assert normalization.is_valid(seg, H100, p) is None, p
    if p.inner and p.cache_row and p.cluster == 1:
        assert p.threads_r * p.elements_per_thread >= cols
        # rows of at most a warp's 16-byte vectors are lanes (`_short_rows`), any threads;
        # a half-warp starts rows of 16-byte chunks, or of 8-byte ones it holds within
        # EIGHT_BYTE_LANE_BYTES a lane, before `filling_vector` may narrow them
        if p.threads_r == 16 and cols > 32 * (16 // dtype.itemsize):
            row_vector = reduction.default_row_vector(seg)
            assert normalization.half_warp_rows_start(seg, row_vector) == 16, p
            assert p.vector in (row_vector, normalization.filling_vector(seg, 16, row_vector))
            assert p.rows_per_block == 8


HOST_ROWS = [
    ("rmsnorm", 188, DataType.Float),
    ("layernorm", 299, DataType.Float),
    ("softmax", 417, DataType.Float),
    ("layernorm", 344, DataType.BFloat16),
    ("softmax", 312, DataType.BFloat16),
    ("rmsnorm", 512, DataType.BFloat16),
]


@pytest.mark.skipif(
    shutil.which("g++") is None or not sys.platform.startswith("linux"),
    reason="needs g++ on Linux (ucontext fibers, AddressSanitizer)",
)
@pytest.mark.parametrize("name, cols, dtype", HOST_ROWS)
def test_half_warp_rows_agree_on_the_host(name, cols, dtype):
    """37 rows (a last block of 5 rows of its 8) in the default half-warp layout of many
    rows, on the host under AddressSanitizer, against the reference."""
    _, p = zoo_norm_default(name, 1 << 20, cols, dtype)
    assert p.threads_r == 16, p
    zoo_norm_agrees_on_host(name, cols, dtype, [p])


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name, rows, cols, dtype",
    [
        # fp32 norms of more than SHARED_WEIGHT_WAVES waves: fewer take a warp, 2 rows a lane
        ("rmsnorm", 40961, 188, DataType.Float),
        ("layernorm", 49153, 256, DataType.Float),
        ("softmax", 1037, 417, DataType.Float),
        ("layernorm", 24385, 344, DataType.BFloat16),
        ("softmax", 333, 312, DataType.BFloat16),
        ("rmsnorm", 16384, 512, DataType.BFloat16),
    ],
)
def test_half_warp_rows_agree_on_the_gpu(name, rows, cols, dtype):
    """The executor's default launch of each, a half-warp a row, against the reference."""
    launched = zoo_norm_agrees_on_gpu(name, rows, cols, dtype)
    assert [k.params["threads_r"] for k in launched] == [16]
