import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tunefuse.errors import ShapeError
from tunefuse.ir.fusion import Sym
from tunefuse.ir.shapes import (
    ViewKind,
    analyze_reshape,
    apply_reshape_transforms,
    broadcast_extents,
    resolve_reshape_sizes,
)


def kinds(analysis):
    return [t.kind for t in analysis.transforms]


def test_seed_example_keep_keep_split():
    a = analyze_reshape([2, 10, 40], [2, 10, 2, 20])
    assert kinds(a) == [ViewKind.KEEP, ViewKind.KEEP, ViewKind.SPLIT]
    assert a.transforms[2].in_dims == (2,) and a.transforms[2].out_dims == (2, 3)


def test_merge_squeeze_broadcast_and_merge_split():
    assert kinds(analyze_reshape([64, 128, 3072], [8192, 3072])) == [ViewKind.MERGE, ViewKind.KEEP]
    assert kinds(analyze_reshape([4, 1, 6], [4, 6])) == [
        ViewKind.KEEP,
        ViewKind.SQUEEZE,
        ViewKind.KEEP,
    ]
    assert kinds(analyze_reshape([4, 6], [4, 1, 6])) == [
        ViewKind.KEEP,
        ViewKind.BROADCAST,
        ViewKind.KEEP,
    ]
    assert kinds(analyze_reshape([6, 4], [4, 6])) == [ViewKind.MERGE_SPLIT]
    assert kinds(analyze_reshape([768, 128, 64], [64, 12, 128, 64])) == [
        ViewKind.SPLIT,
        ViewKind.KEEP,
        ViewKind.KEEP,
    ]


def test_minus_one_is_inferred():
    assert analyze_reshape([2, 10, 40], [2, -1, 20]).out_sizes == (2, 20, 20)
    assert resolve_reshape_sizes("r", (6, 4), (-1,)) == (24,)


@pytest.mark.parametrize(
    "in_sizes, out_sizes, message",
    [
        ([2, 3], [-1, -1], "only one dim may be -1"),
        ([2, 3], [7], "6 elements"),
        ([2, 3], [4, -1], "invalid for input of size 6"),
        ([2, 3], [-2, 3], "negative"),
        ([0, 3], [0, -1], "cannot infer the -1"),
    ],
)
def test_reshape_errors(in_sizes, out_sizes, message):
    with pytest.raises(ShapeError, match=message):
        analyze_reshape(in_sizes, out_sizes)


def test_symbolic_sizes_stay_symbolic():
    out = resolve_reshape_sizes("r", (Sym("a"), 4), (-1, 2), unknown="T1")
    assert out == (Sym("T1.0"), 2)


def test_broadcast_extents_rules():
    assert broadcast_extents("add", [(1, 5), (3, 1)], ["T0", "T1"]) == (3, 5)
    assert broadcast_extents("add", [(Sym("a"), 5), (3, 5)], ["T0", "T1"]) == (3, 5)
    with pytest.raises(ShapeError, match="dim 1 of operand T1 has extent 4 but operand T0 has 5"):
        broadcast_extents("add", [(3, 5), (3, 4)], ["T0", "T1"])
    with pytest.raises(ShapeError, match="rank 1 but T0 has rank 2"):
        broadcast_extents("add", [(3, 5), (5,)], ["T0", "T1"])


@st.composite
def reshape_pairs(draw):
    """A random shape and a random valid target of the same element count."""
    factors = draw(st.lists(st.sampled_from([1, 2, 3, 5]), min_size=0, max_size=7))

    def split(factors):
        sizes = []
        rest = list(factors)
        while rest:
            take = draw(st.integers(1, len(rest)))
            sizes.append(math.prod(rest[:take]))
            rest = rest[take:]
        ones = draw(st.integers(0, 2))
        for _ in range(ones):
            sizes.insert(draw(st.integers(0, len(sizes))), 1)
        return sizes

    in_sizes = split(factors)
    out_sizes = split(factors)
    if out_sizes and draw(st.booleans()):
        out_sizes[draw(st.integers(0, len(out_sizes) - 1))] = -1
    return in_sizes, out_sizes


@given(reshape_pairs())
@settings(max_examples=300, deadline=None)
def test_decomposition_applied_to_an_array_equals_numpy_reshape(pair):
    in_sizes, out_sizes = pair
    array = np.arange(math.prod(in_sizes)).reshape(in_sizes)
    analysis = analyze_reshape(in_sizes, out_sizes)
    expected = array.reshape(out_sizes)
    result = apply_reshape_transforms(array, analysis)
    assert result.shape == expected.shape
    np.testing.assert_array_equal(result, expected)
    # Each group keeps its element count, and every dim is covered exactly once.
    for t in analysis.transforms:
        if t.kind not in (ViewKind.SQUEEZE, ViewKind.BROADCAST):
            assert math.prod(analysis.in_sizes[d] for d in t.in_dims) == math.prod(
                analysis.out_sizes[d] for d in t.out_dims
            )
    assert sorted(d for t in analysis.transforms for d in t.in_dims) == list(range(len(in_sizes)))
    assert sorted(d for t in analysis.transforms for d in t.out_dims) == list(
        range(len(expected.shape))
    )


@given(st.lists(st.integers(0, 4), min_size=1, max_size=4), st.data())
@settings(max_examples=100, deadline=None)
def test_empty_tensors_reshape(in_sizes, data):
    if math.prod(in_sizes) != 0:
        return
    out = data.draw(st.lists(st.integers(0, 4), min_size=1, max_size=4))
    if math.prod(out) != 0:
        out = out + [0]
    a = analyze_reshape(in_sizes, out)
    assert a.out_sizes == tuple(out)
