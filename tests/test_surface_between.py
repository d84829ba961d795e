"""The surface's cells between the grid's points (`benchmarks/patterns.between_shapes`): the
shapes that judge a heuristic where it was not fitted (no GPU)."""

import math
import pathlib
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.append(str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))

from patterns import (  # noqa: E402
    COLUMN_PATTERNS,
    MIDDLE_PATTERNS,
    ROW_PATTERNS,
    between_shapes,
    reduced_extent,
    shapes,
)

PATTERNS = sorted({*ROW_PATTERNS, *COLUMN_PATTERNS, *MIDDLE_PATTERNS})


@given(
    pattern=st.sampled_from(PATTERNS),
    elements_log=st.integers(6, 28),
    count=st.integers(0, 12),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=200, deadline=None)
def test_between_shapes_hold_half_to_all_of_the_elements_in_the_patterns_layout(
    pattern, elements_log, count, seed
):
    elements = 1 << elements_log
    cells = between_shapes(pattern, elements, count, seed)
    assert len(cells) == count
    assert len(set(cells)) == count, "each cell once"
    for shape in cells:
        assert all(n >= 1 for n in shape)
        assert elements // 2 <= math.prod(shape) <= elements, shape
        assert len(shape) == (3 if pattern in MIDDLE_PATTERNS else 2)
        assert 1 <= reduced_extent(pattern, shape) <= elements
        if pattern in MIDDLE_PATTERNS:
            assert shape[2] <= 512
    assert between_shapes(pattern, elements, count, seed) == cells, "deterministic"


def test_between_shapes_leave_the_grid():
    """Most cells are off the grid's points: extents that are not powers of two, and middle
    patterns' innermost extent other than the grid's 64."""
    elements = 1 << 22
    for pattern in ("col", "middle_softmax", "softmax"):
        cells = between_shapes(pattern, elements, 40, seed=0)
        grid = set(shapes(pattern, elements, 2))
        assert len([c for c in cells if c in grid]) <= 4
        reduced = [reduced_extent(pattern, c) for c in cells]
        assert sum(1 for r in reduced if r & (r - 1)) >= 30, reduced
        spans = math.log2(max(reduced)) - math.log2(min(reduced))
        assert spans >= 12, f"{pattern}: reduced extents {min(reduced)}..{max(reduced)}"
        if pattern in MIDDLE_PATTERNS:
            assert len({c[2] for c in cells}) >= 20


def test_between_shapes_differ_by_seed_and_pattern():
    a = between_shapes("col", 1 << 22, 8, seed=0)
    assert a != between_shapes("col", 1 << 22, 8, seed=1)
    assert a != [s[::-1] for s in between_shapes("row", 1 << 22, 8, seed=0)]
