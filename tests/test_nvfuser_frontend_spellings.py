"""nvFuser frontend spellings that nvFuser's own tests use (no GPU): contiguity listed in
stride order, define_vector inputs in the printed definition, the legacy FusionDefinition's
`definition()`/`schedule()` and fusion ids, and small API names (`prod(t, dtype)`,
`is_tensor`, `**`, `debug_output`, `add_output(v, stride_order)`)."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tunefuse import (
    DataType,
    DefinitionError,
    FusionDefinition,
    compute_tensor_descriptor,
    philox,
    reference,
)
from tunefuse import nvfuser as legacy
from tunefuse.arrays import contiguity_of, from_allocation_order, to_allocation_order
from tunefuse.errors import CompletedDefinitionError, MissingDefinitionError, NoProfileError

# -- contiguity in stride order ------------------------------------------------------------


@pytest.mark.parametrize(
    ("sizes", "strides", "contiguity", "order"),
    [
        # nvFuser's note on stride order: a size-1 dim's stride counts (ties keep dim order)...
        ((2, 1, 3, 1, 4), (24, 4, 8, 4, 2), [True, True, None, None, False], [4, 2, 3, 1, 0]),
        # ... and a stride-0 dim keeps its row-major rank
        ((2, 2, 2, 2), (8, 4, 0, 2), [True, True, None, False], [3, 2, 1, 0]),
        ((3, 4), (1, 3), [True, True], [0, 1]),
        ((2, 3, 5), (1, 10, 2), [True, True, True], [0, 2, 1]),
    ],
)
def test_the_descriptor_lists_contiguity_outermost_first(sizes, strides, contiguity, order):
    assert compute_tensor_descriptor(sizes, strides) == (contiguity, order)


def test_define_tensor_reads_contiguity_in_stride_order():
    """[2, 2] stored column-major with a gap: memory order (dim 1, dim 0), so contiguity
    [False, True] says dim 1 (outer) is not contiguous and dim 0 (inner) is."""
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[2, 2], contiguity=[False, True], stride_order=[0, 1])
        fd.add_output(fd.ops.relu(t))
    assert fd.fusion.nodes[0].attrs.contiguity == (True, False)
    assert "contiguity=[False, True], dtype=DataType.Float, stride_order=[0, 1]" in str(fd)
    x = np.lib.stride_tricks.as_strided(np.arange(5, dtype=np.float32) - 2, (2, 2), (4, 12))
    np.testing.assert_array_equal(reference.run(fd.fusion, [x])[0], np.maximum(x, 0))
    fd.plan([x])  # the layout is accepted as declared


layouts = st.integers(1, 4).flatmap(
    lambda rank: st.tuples(
        st.lists(st.sampled_from([1, 2, 3, 5]), min_size=rank, max_size=rank),
        st.permutations(list(range(rank))),
        st.lists(st.booleans(), min_size=rank, max_size=rank),
    )
)


@settings(max_examples=150, deadline=None)
@given(layouts)
def test_descriptor_and_define_tensor_agree_on_every_dim(layout):
    """Any permuted layout (some dims expanded to stride 0): define_tensor given the
    descriptor holds each dim's own contiguity, and the printed definition reads back the
    same fusion."""
    sizes, perm, expanded = layout
    strides = [0] * len(sizes)
    step = 1
    for d in reversed(perm):
        strides[d] = 0 if expanded[d] else step
        step *= 1 if expanded[d] else sizes[d]
    contiguity, order = compute_tensor_descriptor(sizes, strides)
    assert from_allocation_order(to_allocation_order(contiguity, order), order) == tuple(
        to_allocation_order(from_allocation_order(contiguity, order), order)
    )
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1] * len(sizes), contiguity=contiguity, stride_order=order)
        fd.add_output(fd.ops.neg(t))
    declared = fd.fusion.nodes[0].attrs.contiguity
    actual = contiguity_of(tuple(sizes), tuple(strides))
    assert [c for c, s in zip(declared, sizes) if s != 1] == [
        c for c, s in zip(actual, sizes) if s != 1
    ]
    scope: dict = {}
    exec(str(fd), scope)
    assert scope["fd"].fusion.fusion_id == fd.fusion.fusion_id


# -- define_vector inputs and shape entries ----------------------------------------------


def test_a_define_vector_input_is_printed_as_itself():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1])
        fd.add_output(fd.ops.sum(fd.ops.reshape(t, fd.define_vector(2)), dims=[0]))
    text = str(fd)
    assert "S1, S2, = fd.define_vector(2)" in text
    scope: dict = {}
    exec(text, scope)
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert scope["fd"].flat_inputs([x, (6, 4)])[1:] == [6, 4]
    np.testing.assert_array_equal(
        reference.run(scope["fd"].fusion, scope["fd"].flat_inputs([x, [6, 4]]))[0],
        x.reshape(6, 4).sum(0),
    )


def test_a_floating_extent_is_cast_and_a_constant_one_must_be_whole():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1])
        n = fd.define_scalar(dtype=DataType.Int)
        rows = fd.ops.mul(fd.define_scalar(192), fd.ops.reciprocal(n))  # a Double: 6.0
        fd.add_output(fd.ops.reshape(t, [n, rows]))
        with pytest.raises(DefinitionError, match="2.5, not a whole number"):
            fd.ops.reshape(t, [fd.define_scalar(2.5), 8])
    x = np.arange(192, dtype=np.float32).reshape(4, 8, 6)
    np.testing.assert_array_equal(reference.run(fd.fusion, [x, 32])[0], x.reshape(32, 6))


def test_pad_widths_and_slice_bounds_may_be_scalars_of_constants():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1])
        width = fd.ops.cast(fd.ops.mul(fd.define_scalar(2.5, DataType.Float), 3), DataType.Int)
        fd.add_output(fd.ops.pad(t, [width, width]))
        fd.add_output(fd.ops.slice(t, [0, fd.ops.add(fd.define_scalar(1), 1)], [2, 4]))
    other = FusionDefinition()
    with pytest.raises(DefinitionError, match="constant integer"):
        other.ops.pad(other.define_tensor(shape=[-1]), [other.define_scalar(dtype=DataType.Int), 0])
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    padded, sliced = reference.run(fd.fusion, [x])
    np.testing.assert_array_equal(padded, np.pad(x, [(0, 0), (7, 7)]))
    np.testing.assert_array_equal(sliced, x[:, 2:4])


def test_a_0_dim_index_keeps_the_dim_as_torch_index_select_does():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1])
        i = fd.define_tensor(shape=[], dtype=DataType.Int)
        fd.add_output(fd.ops.index_select(t, i, 0))
        fd.add_output(fd.ops.index_select(t, i, 1))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    rows, cols = reference.run(fd.fusion, [x, np.array(2)])
    np.testing.assert_array_equal(rows, x[[2]])
    np.testing.assert_array_equal(cols, x[:, [2]])


# -- small names ------------------------------------------------------------------------


def test_small_nvfuser_names():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1])
        c = fd.define_scalar(2.0)
        assert t.is_tensor() and not c.is_tensor()
        fd.add_output(fd.ops.prod(t, DataType.Float))  # every dim, as nvFuser's prod(t, dtype)
        fd.add_output(t**c)
        fd.add_output(fd.ops.exp(t), [1, 0])  # legacy add_output(value, stride_order)
    assert fd.fusion.outputs[2].stride_order is None  # [1, 0] is row-major
    x = np.array([[1.0, 2.0], [3.0, 0.5]], np.float32)
    prod, power, _ = reference.run(fd.fusion, [x])
    np.testing.assert_allclose(prod, 3.0)
    np.testing.assert_allclose(power, x**2)
    assert fd.debug_output() is None
    with pytest.raises(NoProfileError, match="no execute"):
        fd.profile()
    with pytest.raises(ValueError):  # nvFuser's tests catch a ValueError there
        fd.profile()
    with pytest.raises(CompletedDefinitionError, match="Attempting to add to a completed"):
        fd.ops.neg(t)


def test_complex_values_are_refused_by_name():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1])
        with pytest.raises(DefinitionError, match="complex scalar .* not supported"):
            fd.define_scalar(3 + 0.5j)
        with pytest.raises(DefinitionError, match="complex64 is not supported"):
            fd.define_tensor(shape=[-1], dtype=np.complex64)
        fd.add_output(t)
    with pytest.raises(DefinitionError, match="complex128 is not supported"):
        fd.execute([np.zeros(3, np.complex128)])


# -- the legacy FusionDefinition --------------------------------------------------------


def test_a_legacy_definition_by_subclass_by_block_and_by_id():
    x = np.ones((4, 4), np.float32)

    class Sigmoid(legacy.FusionDefinition):
        def definition(self):
            self.add_output(self.ops.sigmoid(self.from_array(x)))

    fd = Sigmoid()
    number = fd.id()
    again = legacy.FusionDefinition(number)
    assert again.fusion is fd.fusion
    with pytest.raises(DefinitionError, match="no definition has that id"):
        legacy.FusionDefinition(10**9)
    with pytest.raises(MissingDefinitionError) as missing:
        legacy.FusionDefinition().fusion
    assert isinstance(missing.value, NotImplementedError)

    class AddsInSchedule(legacy.FusionDefinition):
        def definition(self):
            self.t = self.ops.tanh(self.from_array(x))
            self.add_output(self.t)

        def schedule(self):
            self.ops.relu(self.t)

    with pytest.raises(RuntimeError, match="Attempting to add to a completed definition"):
        AddsInSchedule().fusion


# -- uniform's range -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [DataType.Half, DataType.BFloat16, DataType.Float])
@pytest.mark.parametrize(("lo", "hi"), [(0.0, 1.0), (-1.5, 3.7), (1.8, 1223.5)])
def test_uniform_draws_stay_below_hi_in_their_dtype(dtype, lo, hi):
    """Rounded to half or bfloat16 a draw just below hi becomes hi; it is the largest value
    below hi instead, so [lo, hi) holds in the output's dtype."""
    position = np.arange(1 << 16, dtype=np.int64)
    draws = philox.uniform(position, 7, 0, lo, hi, dtype).astype(np.float64)
    top = np.asarray(hi, np.float32).astype(dtype.numpy)
    assert draws.max() < float(top)
    assert draws.min() >= float(np.asarray(lo, np.float32).astype(dtype.numpy))
    largest_below = philox.below(np.asarray([top]), hi, dtype)[0]
    assert float(largest_below) < float(top)
    if dtype is not DataType.Float:
        assert draws.max() == float(largest_below)  # reached: many draws round up to hi
    assert ml_dtypes  # bfloat16's numpy type comes from ml-dtypes


@pytest.mark.parametrize(
    ("start", "end", "strides", "message"),
    [
        ([-1, -2], [5, 5], [7, 7], "start_indices must be greater-than-or-equal-to 0"),
        ([3, 4], [1, 2], [1, 1], "end_indices must be greater-than-or-equal-to start_indices"),
        ([0, 0], [5, 5], [5, 5], "All slice operation strides must be of size 1"),
        ([0, 0, 0], [4, 4, 4], [1, 1, 1], "Number of tensor dimensions does not match"),
        ([0, 0, 0], [4, 4], [1, 1], "start_indices and strides don't match"),
        ([0, 0], [4, 4, 4], [1, 1], "indexing attribute dimensions don't match"),
    ],
)
def test_the_legacy_slice_refuses_what_legacy_nvfuser_refuses(start, end, strides, message):
    """The legacy frontend takes bounds as given (no counting from the end, unit strides)
    and refuses the rest in nvFuser's words, as RuntimeErrors; the direct frontend
    normalizes a negative bound instead."""
    x = np.zeros((10, 10), np.float32)
    with legacy.FusionDefinition() as fd:
        t = fd.from_array(x)
        with pytest.raises(RuntimeError, match=message):
            fd.ops.slice(t, start, end, strides)
        fd.add_output(fd.ops.slice(t, [2, 2], [4, 4]))
    np.testing.assert_array_equal(reference.run(fd.fusion, [x])[0], x[2:4, 2:4])
    with FusionDefinition() as direct:
        direct.add_output(direct.ops.slice(direct.from_array(x, True), [-2, 0], [10, 10]))
    assert direct.fusion.nodes[-1].attrs.start_indices == (8, 0)
