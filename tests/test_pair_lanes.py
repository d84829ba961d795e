"""Short rows of 2-byte elements read as pairs over the fewest lanes that hold at most 5 each
(`normalization.PAIR_LANES`): the defaults at the points judged, the rows the rule leaves, a
property over widths, the rows on the host under AddressSanitizer and on the GPU (the
executor's default launches)."""

from __future__ import annotations

import shutil
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from norm_defaults import zoo_norm_default
from zoo_agreement import zoo_norm_agrees_on_gpu, zoo_norm_agrees_on_host

from tunefuse import DataType
from tunefuse.device_info import A100, H100
from tunefuse.schedulers import normalization, reduction

BF16 = DataType.BFloat16

# (name, rows, cols, lanes, elements a lane): judged on the H200 against heuristics 56
# (`benchmarks/surface/short_pairs_2026-11-29/judged_pairs_summary.txt`), the old layout and
# the time ratio new / old in the comment
JUDGED = [
    ("layernorm", 466033, 18, 2, 10),  # 4 lanes of 3 pairs; 0.855
    ("layernorm", 6710886, 20, 2, 10),  # 4 lanes of 3 pairs; 0.783
    ("rmsnorm", 299593, 28, 4, 8),  # 4 lanes of 2 quads; 0.842
    ("softmax", 246723, 34, 4, 10),  # 8 lanes of 3 pairs; 0.797
    ("rmsnorm", 161319, 52, 8, 8),  # 8 lanes of 2 quads; 0.925
    ("softmax", 127100, 66, 8, 10),  # 16 lanes of 3 pairs; 0.794
    ("layernorm", 113359, 74, 8, 10),  # 16 lanes of 3 pairs; 0.895
]


@pytest.mark.parametrize("name, rows, cols, lanes, ept", JUDGED)
@pytest.mark.parametrize("device", [H100, A100])
def test_the_judged_rows_take_pairs_over_their_lanes(name, rows, cols, lanes, ept, device):
    seg, p = zoo_norm_default(name, rows, cols, BF16, device)
    assert (p.threads_r, p.elements_per_thread, p.vector, p.rows_per_lane) == (lanes, ept, 2, 1), p
    assert p.inner and p.cache_row
    assert normalization.is_valid(seg, device, p) is None


@pytest.mark.parametrize(
    "name, rows, cols, dtype, layout, why",
    [
        ("layernorm", 2796202, 48, BF16, (4, 12, 4), "octets: its own vector is 16 bytes"),
        ("rmsnorm", 524288, 16, BF16, (2, 8, 8), "octets"),
        ("softmax", 99864, 84, BF16, (8, 12, 4), "pairs would take 16 lanes"),
        ("rmsnorm", 1 << 20, 10, BF16, (2, 6, 2), "5 pairs: no more than one lane holds"),
        ("logsumexp", 466033, 18, BF16, (4, 6, 2), "every store reduced"),
        ("rmsnorm", 1 << 20, 20, DataType.Float, (4, 6, 2), "4-byte elements"),
    ],
)
def test_rows_the_pair_rule_leaves_keep_theirs(name, rows, cols, dtype, layout, why):
    _, p = zoo_norm_default(name, rows, cols, dtype)
    assert (p.threads_r, p.elements_per_thread, p.vector) == layout, (why, p)


@settings(max_examples=200, deadline=None)
@given(
    cols=st.integers(2, 300),
    name=st.sampled_from(["softmax", "layernorm", "rmsnorm"]),
)
def test_short_bf16_rows_of_quads_or_pairs_take_the_fewest_lanes_of_five_pairs(cols, name):
    """Any width: where the rule applies (a row whose own vector is pairs or quads, more than
    5 pairs, at most 8 lanes of 5) the default reads pairs over the fewest power-of-two lanes
    holding at most 5 each, one row a lane, and holds the row; rows of octets and longer ones
    never take it."""
    seg, p = zoo_norm_default(name, 4096, cols, BF16)
    assert normalization.is_valid(seg, H100, p) is None, p
    own = reduction.reduced_vector(seg)
    applies = normalization.pairs_take_lanes(seg, cols)
    assert applies == (own in (2, 4) and 10 < cols <= 80), (cols, own)
    if not applies:
        return
    lanes = p.threads_r
    assert (p.vector, p.rows_per_lane) == (2, 1), p
    assert lanes * p.elements_per_thread >= cols, p
    pairs = -(-cols // 2)
    assert -(-pairs // lanes) <= normalization.PAIR_LANE_VECTORS, p
    assert lanes == 1 or -(-pairs // (lanes // 2)) > normalization.PAIR_LANE_VECTORS, p
    assert lanes <= normalization.PAIR_MOST_LANES, p


HOST_ROWS = [("layernorm", 18), ("softmax", 44), ("rmsnorm", 70)]


@pytest.mark.skipif(
    shutil.which("g++") is None or not sys.platform.startswith("linux"),
    reason="needs g++ on Linux (ucontext fibers, AddressSanitizer)",
)
@pytest.mark.parametrize("name, cols", HOST_ROWS)
def test_pair_rows_agree_on_the_host(name, cols):
    """37 rows (a partial last block) in the default pair layout of many rows, on the host
    under AddressSanitizer, against the reference."""
    seg, p = zoo_norm_default(name, 1 << 20, cols, BF16)
    assert normalization.pairs_take_lanes(seg, cols) and p.vector == 2, p
    zoo_norm_agrees_on_host(name, cols, BF16, [p])


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name, rows, cols, lanes",
    [
        ("layernorm", 46603, 18, 2),
        ("rmsnorm", 29959, 28, 4),
        ("softmax", 24672, 34, 4),
        ("layernorm", 19065, 44, 8),
        ("rmsnorm", 11983, 70, 8),
    ],
)
def test_pair_rows_agree_on_the_gpu(name, rows, cols, lanes):
    """The executor's default launch of each, pairs over its lanes, against the reference."""
    launched = zoo_norm_agrees_on_gpu(name, rows, cols, BF16)
    assert [(k.params["threads_r"], k.params["vector"]) for k in launched] == [(lanes, 2)]
