"""Held rows read at the vector that fills their lanes' slots (`normalization.filling_vector`)
and lanes of 8-byte vectors that hold up to 24 bytes (EIGHT_BYTE_LANES): the defaults at the
points judged, the rows they leave alone, a property over widths, the rows on the host under
AddressSanitizer and on the GPU (the executor's default launches)."""

from __future__ import annotations

import shutil
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from norm_defaults import column_partials_default, zoo_norm_default
from zoo_agreement import zoo_norm_agrees_on_gpu, zoo_norm_agrees_on_host

from tunefuse import DataType
from tunefuse.device_info import A100, H100
from tunefuse.schedulers import normalization


def _slots(cols: int, lanes: int, vector: int) -> int:
    return lanes * normalization.vectors_of_share(cols, lanes, vector)


# (name, rows, cols, dtype, lanes, elements a lane, vector): judged on the H200
# (`benchmarks/surface/filling_vector_2026-11-29/`), the old layout in the comment
FILLED = [
    ("softmax", 209715, 40, DataType.BFloat16, 4, 10, 2),  # 4 lanes of 2 vectors of 8
    ("rmsnorm", 116508, 72, DataType.BFloat16, 8, 10, 2),  # 8 lanes of 2 vectors of 8
    ("softmax", 55188, 152, DataType.BFloat16, 16, 10, 2),  # 16 lanes of 2 vectors of 8
    ("softmax", 11282, 556, DataType.BFloat16, 32, 20, 4),  # 32 lanes of 3 peeled at 8
    ("softmax", 116508, 36, DataType.Float, 8, 6, 2),  # 8 lanes of 2 vectors of 4
    ("layernorm", 188258, 24, DataType.BFloat16, 4, 6, 2),  # 3 vectors of 8 over 4 lanes
]
EIGHT_BYTE_LANES = [
    ("layernorm", 123361, 34, DataType.Float, 8, 6, 2),  # 16 lanes of 2 vectors of 2
    ("layernorm", 63550, 66, DataType.Float, 16, 6, 2),  # held: a warp of 2 vectors of 2
    ("softmax", 745654, 90, DataType.Float, 16, 6, 2),  # held: a warp of 2 vectors of 2
    ("softmax", 400000, 36, DataType.BFloat16, 4, 10, 2),  # 8 lanes of 2 of 4, then filled
]


@pytest.mark.parametrize("name, rows, cols, dtype, lanes, ept, vector", FILLED + EIGHT_BYTE_LANES)
@pytest.mark.parametrize("device", [H100, A100])
def test_the_judged_rows_take_the_filled_layout(
    name, rows, cols, dtype, lanes, ept, vector, device
):
    seg, p = zoo_norm_default(name, rows, cols, dtype, device)
    assert p.inner and p.cache_row
    assert (p.threads_r, p.elements_per_thread, p.vector) == (lanes, ept, vector), p
    assert p.threads_r * p.elements_per_thread >= cols
    assert normalization.is_valid(seg, device, p) is None


@pytest.mark.parametrize(
    "name, rows, cols, dtype, vector, why",
    [
        ("softmax", 632, 13260, DataType.BFloat16, 8, "512 lanes: 4 saves an eighth"),
        ("logsumexp", 349525, 24, DataType.BFloat16, 8, "every store reduced"),
        ("rmsnorm", 16384, 512, DataType.BFloat16, 8, "every slot filled"),
        ("layernorm", 500000, 12, DataType.Float, 4, "3 vectors of 4 over 4 lanes"),
        ("rmsnorm", 22636, 157, DataType.Float, 1, "scalar chunks"),
    ],
)
def test_rows_the_filling_vector_leaves_keep_theirs(name, rows, cols, dtype, vector, why):
    _, p = zoo_norm_default(name, rows, cols, dtype)
    assert p.vector == vector, (why, p)


@pytest.mark.parametrize(
    "cols, dtype, lanes",
    [
        (6, DataType.Float, 2),  # 3 of 8 bytes: 2 lanes by NARROW_LANE_BYTES, not halved again
        (90, DataType.BFloat16, 16),  # 4-byte vectors keep NARROW_LANE_BYTES
        (10, DataType.Float, 4),  # 5 of 8 bytes: 2 lanes would leave fewer than 4
        (84, DataType.BFloat16, 8),  # 21 of 8 bytes (pairs would take 16 lanes, PAIR_LANES)
    ],
)
def test_lanes_the_eight_byte_rule_leaves(cols, dtype, lanes):
    _, p = zoo_norm_default("rmsnorm", 1 << 20, cols, dtype)
    assert p.threads_r == lanes, p


@pytest.mark.parametrize(
    "name, cols, lanes, ept, vector",
    [
        ("layernorm", 34, 16, 4, 2),  # fitted: 8 lanes of 3 (EIGHT_BYTE_LANES)
        ("layernorm", 36, 8, 8, 4),  # fitted: 8 lanes of 3 of 2 (filling_vector)
        ("layernorm", 66, 32, 4, 2),  # fitted: a half-warp of 3 of 2
        ("rmsnorm", 34, 16, 4, 2),
        ("rmsnorm", 90, 32, 4, 2),
    ],
)
def test_rows_whose_column_sums_are_taken_in_parts_are_not_fitted(name, cols, lanes, ept, vector):
    """A norm backward's dx kernel taking dw (and db) in parts keeps the layout it had before
    either rule (each thread keeps its columns' sums beside its row; half-warp rows lost
    there, `test_half_warp_rows`): the values are the old code's."""
    _, p = column_partials_default(name, 65536, cols, DataType.Float)
    assert (p.threads_r, p.elements_per_thread, p.vector) == (lanes, ept, vector), p


@settings(max_examples=150, deadline=None)
@given(
    cols=st.integers(2, 2048),
    name=st.sampled_from(["softmax", "layernorm", "rmsnorm"]),
    dtype=st.sampled_from([DataType.Float, DataType.BFloat16]),
)
def test_a_filled_row_is_held_unpeeled_in_fewer_slots(cols, name, dtype):
    """Any width: the default is valid and holds the row; a vector narrower than the row's
    own is unpeeled, at least 2 elements and 4 bytes, and leaves at most FILL_SLOTS_MOST of
    the slots the row's own vector would over the same lanes."""
    seg, p = zoo_norm_default(name, 4096, cols, dtype)
    assert normalization.is_valid(seg, H100, p) is None, p
    if not (p.inner and p.cache_row and p.cluster == 1):
        return
    assert p.threads_r * p.elements_per_thread >= cols, p
    own = normalization._defaults(seg, H100, fitted=False).vector
    if normalization.pairs_take_lanes(seg, cols):
        return  # lanes and vector chosen together (PAIR_LANES, `test_pair_lanes`)
    if p.vector < own:
        assert cols % p.vector == 0 and p.vector >= 2 and p.vector * dtype.itemsize >= 4, p
        assert 6 * _slots(cols, p.threads_r, p.vector) <= 5 * _slots(cols, p.threads_r, own), p


HOST_ROWS = [
    ("softmax", 40, DataType.BFloat16),
    ("rmsnorm", 72, DataType.BFloat16),
    ("layernorm", 24, DataType.BFloat16),
    ("layernorm", 34, DataType.Float),
    ("layernorm", 66, DataType.Float),
    ("softmax", 556, DataType.BFloat16),
]


@pytest.mark.skipif(
    shutil.which("g++") is None or not sys.platform.startswith("linux"),
    reason="needs g++ on Linux (ucontext fibers, AddressSanitizer)",
)
@pytest.mark.parametrize("name, cols, dtype", HOST_ROWS)
def test_filled_rows_agree_on_the_host(name, cols, dtype):
    """37 rows (a partial last block) in the default filled layout of many rows, on the host
    under AddressSanitizer, against the reference."""
    seg, p = zoo_norm_default(name, 1 << 20, cols, dtype)
    assert p != normalization._defaults(seg, H100, fitted=False), p  # a fitted layout
    zoo_norm_agrees_on_host(name, cols, dtype, [p])


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name, rows, cols, dtype, vector",
    [
        ("softmax", 20971, 40, DataType.BFloat16, 2),
        ("rmsnorm", 11651, 72, DataType.BFloat16, 2),
        ("layernorm", 18825, 24, DataType.BFloat16, 2),
        ("softmax", 1127, 556, DataType.BFloat16, 4),
        ("layernorm", 12337, 34, DataType.Float, 2),
        ("layernorm", 6355, 66, DataType.Float, 2),
        ("softmax", 7457, 90, DataType.Float, 2),
    ],
)
def test_filled_rows_agree_on_the_gpu(name, rows, cols, dtype, vector):
    """The executor's default launch of each, at its filled vector, against the reference."""
    launched = zoo_norm_agrees_on_gpu(name, rows, cols, dtype)
    assert [k.params["vector"] for k in launched] == [vector]
