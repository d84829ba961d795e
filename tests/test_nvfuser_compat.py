"""nvFuser definition features (no GPU): expanded broadcast dims (contiguity None, any size,
stride 0), `define_scalar()` defaults, `validate`'s comparison, and the repro script of
`execute(print_repro=True)`."""

import ml_dtypes
import numpy as np
import pytest

from tunefuse import DataType, DefinitionError, FusionDefinition, InputMismatchError, reference
from tunefuse.arrays import contiguity_of, stride_order_of
from tunefuse.planning.plan_interpreter import run_via_plan
from tunefuse.runtime.call_options import repro_script
from tunefuse.validate import compare


def _expanded_add():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[None, True], dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(t0, t1))
    return fd


def test_an_expanded_dim_is_declared_with_contiguity_none_and_reads_stride_zero(rng):
    fd = _expanded_add()
    row = rng.standard_normal(5).astype(np.float32)
    x = np.broadcast_to(row, (3, 5))  # strides (0, 4)
    y = rng.standard_normal((3, 5)).astype(np.float32)
    (got,) = reference.run(fd.fusion, [x, y])
    np.testing.assert_array_equal(got, row[None, :] + y)
    plan = fd.plan([x, y])
    assert plan.segments


def test_an_expanded_dim_refuses_an_input_that_is_not_expanded(rng):
    fd = _expanded_add()
    y = np.ones((3, 5), np.float32)
    with pytest.raises(InputMismatchError, match="dim 0 is declared broadcast.*stride 5.*stride 0"):
        fd.plan([np.ones((3, 5), np.float32), y])
    fd.plan([np.ones((1, 5), np.float32), np.ones((1, 5), np.float32)])  # size 1 is a broadcast too


def test_expanded_dims_carry_no_contiguity_or_order():
    # torch.randn(4, 1, 6).expand(4, 5, 6): strides (6, 0, 1); a transposed expand too
    assert contiguity_of((4, 5, 6), (6, 0, 1)) == (True, None, True)
    assert stride_order_of((4, 5, 6), (6, 0, 1)) is None
    assert contiguity_of((3, 5), (1, 0)) == (True, None)
    with FusionDefinition() as fd:
        t = fd.from_array(np.broadcast_to(np.zeros((4, 1, 6), np.float32), (4, 5, 6)))
        fd.add_output(fd.ops.sum(t, dims=[1]))
    node = fd.fusion.nodes[0]
    assert node.attrs.shape == (-1, -1, -1) and node.attrs.contiguity == (True, None, True)
    x = np.broadcast_to(np.arange(24, dtype=np.float32).reshape(4, 1, 6), (4, 5, 6))
    np.testing.assert_allclose(reference.run(fd.fusion, [x])[0], 5 * x[:, 0, :])


def test_define_scalar_without_value_or_dtype_is_a_double_input():
    with FusionDefinition() as fd:
        s = fd.define_scalar()
        i = fd.define_scalar(DataType.Int)  # nvFuser's positional dtype
        t = fd.define_tensor(shape=[-1], dtype=DataType.Double)
        fd.add_output(fd.ops.add(fd.ops.mul(t, s), i))
    kinds = [(n.op.value, n.attrs.dtype) for n in fd.fusion.nodes[:2]]
    assert kinds == [("define_scalar", DataType.Double), ("define_scalar", DataType.Int)]
    (got,) = reference.run(fd.fusion, [2.5, 3, np.arange(4, dtype=np.float64)])
    np.testing.assert_array_equal(got, np.arange(4) * 2.5 + 3)


def test_validate_compares_within_the_dtype_tolerance_and_names_the_worst_element():
    expected = [np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4), np.arange(5, dtype=np.int64)]
    close = [expected[0] + np.float32(1e-5), expected[1].copy()]
    compare(close, expected)
    off = [expected[0].copy(), expected[1].copy()]
    off[0][2, 1] += 0.5
    with pytest.raises(
        AssertionError, match=r"output 0 \(float \[3, 4\]\).*1 of 12.*worst at \[2, 1\]"
    ):
        compare(off, expected)
    ints = [expected[0], expected[1] + np.array([0, 0, 0, 1, 0])]
    with pytest.raises(AssertionError, match=r"output 1 \(int64 \[5\]\).*worst at \[3\]"):
        compare(ints, expected)
    with pytest.raises(AssertionError, match="shape"):
        compare([expected[0].T, expected[1]], expected)
    with pytest.raises(AssertionError, match="2 outputs"):
        compare(expected, expected[:1])
    nan = [np.array([np.nan, 1.0], np.float32)]
    compare(nan, [np.array([np.nan, 1.0], np.float32)])


def test_the_repro_script_rebuilds_the_fusion_and_inputs_of_the_same_layout(rng):
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[None, True], dtype=DataType.BFloat16)
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=[False, True], dtype=DataType.Int32)
        s = fd.define_scalar(dtype=DataType.Double)
        fd.add_output(fd.ops.mul(fd.ops.add(t0, t1), s))
    x = np.broadcast_to(rng.standard_normal(5).astype(ml_dtypes.bfloat16), (3, 5))
    y = np.arange(33, dtype=np.int32).reshape(3, 11)[:, :5]  # row stride 11: not contiguous
    script = repro_script(fd.fusion, [x, y, 0.5])
    namespace = {}
    exec(compile(script.replace("outputs = fd.execute(inputs)", ""), "<repro>", "exec"), namespace)
    rebuilt, inputs = namespace["fd"], namespace["inputs"]
    assert str(rebuilt) == str(fd)
    assert [np.asarray(a).strides for a in inputs[:2]] == [x.strides, y.strides]
    assert [a.dtype for a in inputs[:2]] == [x.dtype, y.dtype] and inputs[2] == 0.5
    rebuilt.plan(inputs)  # binds: the layout is what the definition declares
    assert "outputs = fd.execute(inputs)" in script


def _reshape_max_subtract():
    """nvFuser's shape vectors (define_vector of scalar products), DataType.Null and `axes=`."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1, -1, -1], dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, -1, -1, -1], dtype=DataType.Float)
        t4 = fd.ops.add(t1, t0)
        v9 = fd.define_vector([t0.size(0) * t0.size(1), t0.size(2), t0.size(3)], dtype=DataType.Int)
        t10 = fd.ops.reshape(t4, new_shape=v9)
        t12 = fd.ops.max(t10, dims=[2], keepdim=False, dtype=DataType.Null)
        v16 = fd.define_vector([t0.size(0) * t0.size(1), t0.size(2), 1], dtype=DataType.Int)
        t17 = fd.ops.broadcast_in_dim(t12, shape=v16, broadcast_dims=[0, 1])
        t22 = fd.ops.broadcast_in_dim(t17, shape=v9, broadcast_dims=[0, 1, 2])
        fd.add_output(fd.ops.sum(fd.ops.sub(t10, t22), axes=[2], dtype=DataType.Null))
        fd.add_output(
            fd.ops.full(shape=t0.shape(), fill_value=fd.define_scalar(2.5), dtype=DataType.Float)
        )
    return fd


def test_shape_vectors_null_dtypes_and_axes(rng):
    fd = _reshape_max_subtract()
    a, b = (rng.standard_normal((2, 3, 4, 5)).astype(np.float32) for _ in range(2))
    got, full = reference.run(fd, [a, b])
    x = (a + b).reshape(6, 4, 5)
    np.testing.assert_allclose(got, (x - x.max(2, keepdims=True)).sum(2), rtol=1e-6)
    np.testing.assert_array_equal(full, np.full((2, 3, 4, 5), 2.5, np.float32))
    assert DataType.Null is None and DataType.Null not in list(DataType)


def test_a_vector_input_is_a_shape_given_at_run_time(rng):
    """define_vector(n): the caller passes the shape as one list at that input's position."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[2] * 12, dtype=DataType.Float)
        shape = fd.define_vector(10)
        fd.add_output(fd.ops.sum(fd.ops.reshape(t0, shape), dims=[3]))
    x = rng.standard_normal([2] * 12).astype(np.float32)
    new_shape = [2] * 9 + [8]
    (got,) = reference.run(fd, [x, new_shape])
    np.testing.assert_allclose(got, x.reshape(new_shape).sum(3), rtol=1e-5)
    (again,) = reference.run(fd, [x, tuple([4] + [2] * 8 + [4])])
    assert again.shape == (4, 2, 2, 2, 2, 2, 2, 2, 4)
    assert fd.plan([x, new_shape]).segments
    with pytest.raises(
        InputMismatchError, match=r"define_vector\(10\): pass a list or tuple of 10 ints"
    ):
        fd.plan([x, [2, 2]])


def test_define_vector_refuses_what_is_not_a_shape():
    from tunefuse.errors import DefinitionError

    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        with pytest.raises(DefinitionError, match="only Int vectors"):
            fd.define_vector([1, 2], dtype=DataType.Float)
        with pytest.raises(DefinitionError, match="entry 1 .* must be an int or an integer scalar"):
            fd.define_vector([1, 2.5])
        with pytest.raises(DefinitionError, match="1.5, not a whole number"):
            fd.define_vector([fd.define_scalar(1.5)])
        with pytest.raises(DefinitionError, match="dims once"):
            fd.ops.sum(t, dims=[0], axes=[0])
        fd.add_output(t)


def test_scalar_arithmetic_is_host_arithmetic(rng):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        n = t.size(0) * t.size(1) - 1
        fd.add_output(fd.ops.mul(t, -n / 2))
    x = rng.standard_normal((3, 4)).astype(np.float32)
    (got,) = reference.run(fd, [x])
    np.testing.assert_allclose(got, x * (-(3 * 4 - 1) / 2), rtol=1e-6)


def test_a_cpu_scalar_tensor_is_a_scalar_input(rng):
    """nvFuser's define_tensor(shape=[], is_cpu=True): a 0-dim host tensor broadcast against
    the GPU tensors, of its own dtype (a float32 0-dim times bf16 stays bf16, as in torch)."""
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        s = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float, is_cpu=True)
        fd.add_output(fd.ops.mul(t, s))
    x = rng.standard_normal((3, 4)).astype(ml_dtypes.bfloat16)
    (got,) = reference.run(fd, [x, np.array(2.0, dtype=np.float32)])
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.astype(np.float32), 2 * x.astype(np.float32))
    assert reference.run(fd, [x, 2.0])[0].dtype == ml_dtypes.bfloat16
    with pytest.raises(
        InputMismatchError, match="a float scalar or a 0-dim CPU tensor, got an array of shape"
    ):
        reference.run(fd, [x, np.ones(3, dtype=np.float32)])
    from tunefuse.errors import DefinitionError

    with pytest.raises(DefinitionError, match="must be 0-dim"):
        with FusionDefinition() as fd:
            fd.define_tensor(shape=[3], dtype=DataType.Float, is_cpu=True)


def _stride_ordered_outputs():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.relu(t), stride_order=[0, 2, 1])
        fd.add_output(fd.ops.stride_order(fd.ops.neg(t), [2, 0, 1]))
        fd.add_output(fd.ops.exp(t), stride_order=[2, 1, 0])  # row-major: the default
    return fd


def test_outputs_take_the_stride_order_they_are_given(rng):
    from tunefuse.arrays import strides_in_order
    from tunefuse.ir.serialize import fusion_from_json
    from tunefuse.planning.plan_interpreter import run_plan

    fd = _stride_ordered_outputs()
    assert [o.stride_order for o in fd.fusion.outputs] == [(0, 2, 1), (2, 0, 1), None]
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    got = run_plan(fd.plan([x]), [x])
    for g, want in zip(got, reference.run(fd, [x]), strict=True):
        np.testing.assert_array_equal(g, want)
    views = [o.view for o in fd.plan([x]).outputs]
    assert [v.strides for v in views] == [(1, 8, 2), (12, 1, 3), (12, 4, 1)]
    assert strides_in_order((2, 3, 4), (0, 2, 1)) == (1, 8, 2)
    again = fusion_from_json(fd.fusion.to_json())
    assert again.outputs == fd.fusion.outputs and again.fusion_id == fd.fusion.fusion_id
    namespace: dict = {}
    exec(compile(repr(fd), "<printed>", "exec"), namespace)  # noqa: S102 - our own printer's output
    assert namespace["fd"].fusion.fusion_id == fd.fusion.fusion_id


def test_a_stride_order_must_be_a_permutation():
    from tunefuse.errors import DefinitionError

    with pytest.raises(
        DefinitionError, match=r"stride_order \[0, 0\] of T1 is not a permutation of 0..1"
    ):
        with FusionDefinition() as fd:
            t = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
            fd.add_output(fd.ops.neg(t), stride_order=[0, 0])
    with pytest.raises(DefinitionError, match="in place"):
        with FusionDefinition() as fd:
            t = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
            fd.add_output(fd.ops.neg(t), alias_input=t, stride_order=[0, 1])


def test_slice_bounds_follow_nvfusers_normalization(rng):
    """Negative bounds count from a static extent, bounds past it are clamped, an end before
    the start is empty; constant scalars are bounds; manual_normalization keeps them as given."""
    from tunefuse.errors import DefinitionError, ShapeError

    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[5, 7], dtype=DataType.Float)
        one = fd.define_scalar(1, dtype=DataType.Int)
        fd.add_output(
            fd.ops.slice(t, start_indices=[one, -3], end_indices=[100, -1], strides=[1, 1])
        )
        fd.add_output(fd.ops.slice(t, [0, 5], [5, 2]))
        fd.add_output(fd.ops.slice(t, [-100, 0], [5, 7], [2, 3]))
    x = rng.standard_normal((5, 7)).astype(np.float32)
    a, b, c = reference.run(fd, [x])
    np.testing.assert_array_equal(a, x[1:100, -3:-1])
    assert b.shape == (5, 0)
    np.testing.assert_array_equal(c, x[-100:5:2, 0:7:3])
    with pytest.raises(ShapeError, match="needs 0 <= start <= end"):
        with FusionDefinition() as fd:
            t = fd.define_tensor(shape=[5, 7], dtype=DataType.Float)
            fd.ops.slice(t, [0, -3], [5, 7], manual_normalization=1)
    with pytest.raises(
        DefinitionError, match="counts from an extent known only when the fusion runs"
    ):
        with FusionDefinition() as fd:
            fd.ops.slice(fd.define_tensor(shape=[-1], dtype=DataType.Float), [-2], [4])
    with pytest.raises(DefinitionError, match="must be a constant integer"):
        with FusionDefinition() as fd:
            t = fd.define_tensor(shape=[-1], dtype=DataType.Float)
            fd.ops.slice(t, [fd.define_scalar(dtype=DataType.Int)], [4])


def test_declined_spellings_are_refused_by_name():
    from tunefuse.errors import DefinitionError

    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 1], dtype=DataType.Float)
        with pytest.raises(DefinitionError, match="needs every tensor to be a pad; tensor 0"):
            fd.ops.cat([t, t], dim=0, manual_padding=True)
        wide = fd.define_tensor(shape=[4, 3], contiguity=[True, True], dtype=DataType.Float)
        with pytest.raises(DefinitionError, match="of dim 0 of extent 4, which is not a broadcast"):
            fd.ops.squeeze(wide, [0], squeeze_expanded=True)
        fd.add_output(fd.ops.cat([t, t], dim=0, manual_padding=False))
        fd.add_output(fd.ops.squeeze(t, [1], squeeze_expanded=False))


def test_squeeze_expanded_of_a_dim_of_extent_one_is_a_squeeze():
    """nvFuser's segment printouts squeeze a leading broadcast dim with squeeze_expanded=True:
    where the dim's extent is 1 that is a plain squeeze. A symbolic dim that is not a
    broadcast and is wider when the fusion runs is a ShapeError, not its first element."""
    from tunefuse.errors import ShapeError

    for shape, contiguity in (([1, -1, 56], [None, True, True]), ([-1, -1, 56], [True] * 3)):
        with FusionDefinition() as fd:
            t = fd.define_tensor(shape=shape, contiguity=contiguity, dtype=DataType.Float)
            fd.add_output(fd.ops.squeeze(t, dims=[0], squeeze_expanded=True))
        x = np.arange(5 * 56, dtype=np.float32).reshape(1, 5, 56)
        np.testing.assert_array_equal(reference.run(fd, [x])[0], x[0])
        assert "squeeze(T0, dims=[0]" in repr(fd) and "slice" not in repr(fd)
    wider = np.ascontiguousarray(np.broadcast_to(x, (3, 5, 56)))
    with pytest.raises(ShapeError, match="dim 0 of T0 has extent 3"):
        reference.run(fd, [wider])
    with pytest.raises(ShapeError, match="extent is 3"):
        fd.plan([wider])


def _expanded_dim_squeezed(fd, how):
    """A fusion that squeezes dim 0, a broadcast dim of extent 3 made `how`."""
    if how == "input":
        t = fd.define_tensor(
            shape=[-1, -1, 56], contiguity=[None, True, True], dtype=DataType.Float
        )
    elif how == "static input":
        t = fd.define_tensor(shape=[3, -1, 56], contiguity=[None, True, True], dtype=DataType.Float)
    else:
        row = fd.define_tensor(shape=[-1, 56], dtype=DataType.Float)
        if how == "broadcast_in_dim":
            t = fd.ops.broadcast_in_dim(row, [3, fd.ops.size(row, 0), 56], [1, 2])
        else:  # expand of a dim of extent 1
            t = fd.ops.expand(fd.ops.broadcast(row, [True, False, False]), [3, -1, -1])
    fd.add_output(fd.ops.mul(fd.ops.squeeze(t, dims=[0], squeeze_expanded=True), 2.0))


EXPANDED_HOWS = ["input", "static input", "broadcast_in_dim", "expand"]


def expanded_dim_inputs(how, rng):
    x = rng.standard_normal((5, 56)).astype(np.float32)
    if how in ("input", "static input"):
        return [np.broadcast_to(x, (3, 5, 56))], x  # stride 0 along dim 0
    return [x], x


@pytest.mark.parametrize("how", EXPANDED_HOWS)
def test_squeeze_expanded_drops_a_broadcast_dim_of_any_extent(how, rng):
    """nvFuser drops an expanded broadcast dim: every element along it is the same, so
    tunefuse slices it to its first and squeezes that."""
    with FusionDefinition() as fd:
        _expanded_dim_squeezed(fd, how)
    inputs, x = expanded_dim_inputs(how, rng)
    (got,) = reference.run(fd, inputs)
    np.testing.assert_array_equal(got, x * 2)
    assert "fd.ops.slice(" in repr(fd) and "squeeze_expanded" not in repr(fd)


def test_printed_definitions_follow_nvfusers_form(rng):
    """nvFuser's tooling reads `nvfuser_fusion_id<N>` off the printed definition's second line
    (the direct frontend calls it `nvfuser_fusion`), execs the text and builds from it."""
    import re

    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(fd.ops.exp(t), [1]))
    text = repr(fd)
    (name,) = re.findall(r"(nvfuser_fusion_id\d+)", text.split("\n")[1])
    assert name == f"nvfuser_fusion_id{fd.id()}"
    namespace: dict = {}
    exec(text, namespace)  # noqa: S102 - our own printer's output
    for function in (namespace[name], namespace["nvfuser_fusion"]):
        with FusionDefinition() as again:
            function(again)
        assert again.id() == fd.id() and again.fusion.fusion_id == fd.fusion.fusion_id
    x = rng.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(reference.run(namespace["fd"], [x])[0], np.exp(x).sum(1), rtol=1e-6)
    with FusionDefinition() as other:
        other.add_output(other.ops.neg(other.define_tensor(shape=[-1], dtype=DataType.Float)))
    assert other.id() != fd.id()


def test_nvfusers_layout_helpers_and_static_sizes():
    import tunefuse
    from tunefuse import compute_contiguity, compute_tensor_descriptor

    assert compute_tensor_descriptor((1, 2, 3), (6, 3, 1)) == ([None, True, True], [2, 1, 0])
    assert compute_tensor_descriptor((2, 3, 4), (12, 1, 3)) == ([True, True, True], [2, 0, 1])
    assert compute_contiguity((4, 5), (10, 1)) == [False, True]
    assert tunefuse.version() == tunefuse.__version__
    x = np.zeros((3, 4), dtype=np.float32).T  # (4, 3), column-major
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x, static_sizes=True)
        fd.add_output(t)
    assert fd.fusion.tensor_type(t.id).shape == (4, 3)


# -- ops nvFuser has that tunefuse puts together from its own, and those it refuses -----------


def test_composite_ops_mean_what_torch_means(rng):
    """triu (any diagonal), select (a negative constant from a static extent), shape, and
    welford's (mean, var_sum, n)."""
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, 6], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1, -1], dtype=DataType.Bool)
        k = fd.define_scalar(DataType.Int)
        for diagonal in (0, 2, -1):
            fd.add_output(fd.ops.triu(t, diagonal))
        fd.add_output(fd.ops.triu(t, k))
        fd.add_output(fd.ops.triu(b))
        fd.add_output(fd.ops.select(t, k, 1))
        fd.add_output(fd.ops.select(t, -2, 2))
        mean, var_sum, n = fd.ops.welford(t, [0, 2])
        fd.add_output(mean)
        fd.add_output(fd.ops.div(var_sum, n))
        fd.add_output(n)
        assert len(fd.ops.shape(t)) == 3
    x = rng.standard_normal((3, 4, 6)).astype(np.float32)
    m = rng.random((5, 3)) < 0.5
    outs = reference.run(fd, [x, m, 1])
    want = [
        np.triu(x, 0),
        np.triu(x, 2),
        np.triu(x, -1),
        np.triu(x, 1),
        np.triu(m),
        x[:, 1],
        x[:, :, 4],
        x.mean((0, 2)),
        x.var((0, 2)),
        np.full(4, 18),
    ]
    for got, w in zip(outs, want, strict=True):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
    assert outs[-1].dtype == np.int64 and outs[4].dtype == np.bool_
    from tunefuse.errors import IndexOutOfRangeError

    with pytest.raises(IndexOutOfRangeError):
        reference.run(fd, [x, m, 4])  # select(t, 4, 1) of an extent 4


def test_ops_and_dtypes_tunefuse_declines_are_refused_by_name():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1])
        for name in (
            "argsort",
            "real",
            "imag",
        ):
            with pytest.raises(
                DefinitionError, match=f"fd.ops.{name} is not supported by tunefuse"
            ):
                getattr(fd.ops, name)(t, 0)
        with pytest.raises(AttributeError, match="no op 'no_such_op'"):
            fd.ops.no_such_op(t)
        assert not hasattr(fd.ops, "argsort") and hasattr(fd.ops, "triu")
        for dtype in ("ComplexFloat", "ComplexDouble", "Float8_e8m0fnu", "Float4_e2m1fn"):
            with pytest.raises(
                DefinitionError, match=f"DataType.{dtype} is not supported by tunefuse"
            ):
                fd.define_tensor(shape=[-1], dtype=getattr(DataType, dtype))
            with pytest.raises(DefinitionError, match=f"DataType.{dtype} is not supported"):
                fd.ops.cast(t, getattr(DataType, dtype))
        with pytest.raises(DefinitionError, match="triu: needs a tensor of rank 2"):
            fd.ops.triu(fd.define_tensor(shape=[-1]))
        fd.add_output(t)
    assert DataType.ComplexFloat not in list(DataType)


def scan_fusion() -> FusionDefinition:
    """cumsum, cumprod, cummax and cummin along each dim of a float, an int32 and a bool tensor."""
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        i = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int32)
        b = fd.define_tensor(shape=[-1, -1], dtype=DataType.Bool)
        for x in (t, i, b):
            for dim in (0, -1):
                for op in ("cumsum", "cumprod", "cummax", "cummin"):
                    fd.add_output(getattr(fd.ops, op)(x, dim))
    return fd


def scan_inputs(rng, rows: int, cols: int) -> list:
    x = rng.uniform(0.5, 1.5, (rows, cols)).astype(np.float32)  # products stay finite
    x[rows // 2, cols // 3] = np.nan  # carried on by every scan, as torch's
    return [x, rng.integers(-3, 4, (rows, cols)).astype(np.int32), rng.random((rows, cols)) < 0.5]


def scan_expected(inputs: list) -> list:
    want = []
    for x in inputs:
        wide = x if np.issubdtype(x.dtype, np.floating) else x.astype(np.int64)
        for dim in (0, -1):
            want += [
                np.cumsum(wide, dim),
                np.cumprod(wide, dim),
                np.maximum.accumulate(x, dim),
                np.minimum.accumulate(x, dim),
            ]
    return want


def test_scans_are_torchs(rng):
    """torch's dtypes (an integer or bool sum or product in int64; max and min keep theirs) and
    values, a NaN carried on; the plan agrees with the reference."""
    from tunefuse.planning.plan_interpreter import run_via_plan

    fd = scan_fusion()
    inputs = scan_inputs(rng, 8, 16)
    got = reference.run(fd, inputs)
    for g, w in zip(got, scan_expected(inputs), strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True)
    for g, w in zip(run_via_plan(fd.fusion, inputs), got, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_scan_kernels_compile(arch, rng):
    from test_codegen_compile import compile_plan

    assert compile_plan(scan_fusion().plan(scan_inputs(rng, 8, 16)), arch)


def test_select_counts_a_negative_index_from_the_end(rng):
    """torch.select's negative indices: a constant of a symbolic extent, or one passed at run
    time, counts from the end when the fusion runs; below -extent is out of range."""
    from tunefuse.errors import IndexOutOfRangeError

    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        k = fd.define_scalar(DataType.Int)
        fd.add_output(fd.ops.select(t, -1, 0))
        fd.add_output(fd.ops.select(t, k, 1))
    x = rng.standard_normal((3, 5)).astype(np.float32)
    for index in (-5, -1, 0, 4):
        last, picked = reference.run(fd, [x, index])
        np.testing.assert_array_equal(last, x[-1])
        np.testing.assert_array_equal(picked, x[:, index])
    for index in (-6, 5):
        with pytest.raises(IndexOutOfRangeError):
            reference.run(fd, [x, index])


def test_scans_and_reductions_with_no_output_element_are_empty():
    """A scan over an empty dim (its prefix reductions reduce nothing into nothing) and a max
    whose output is empty give empty results; a max of an empty dim into elements is refused."""
    from tunefuse import ShapeError

    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.cummin(t, 1))
        fd.add_output(fd.ops.cummax(t, 0))
        fd.add_output(fd.ops.max(t, dims=[1]))
    for shape in ((0, 0, 4), (0, 3, 0)):
        outs = reference.run(fd, [np.zeros(shape, np.float32)])
        assert [o.shape for o in outs] == [shape, shape, (shape[0], shape[2])]
    with pytest.raises(ShapeError, match="cannot reduce an empty dim"):
        reference.run(fd, [np.zeros((2, 0, 3), np.float32)])


def _scatter_fusion(dim: int, scalar_src: bool = False) -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1, -1], dtype=DataType.Float)
        i = fd.define_tensor([-1, -1, -1], dtype=DataType.Int)
        src = (
            fd.define_scalar(dtype=DataType.Double)
            if scalar_src
            else fd.define_tensor([-1, -1, -1], dtype=DataType.Float)
        )
        fd.add_output(fd.ops.sigmoid(fd.ops.scatter(x, i, src, dim)))
    return fd


def _scatter_inputs(rng, dim: int, k: int, repeats: bool):  # noqa: ANN001, ANN202
    shape = (6, 5, 7)
    x = rng.standard_normal(shape).astype(np.float32)
    index_shape = tuple(k if d == dim else n for d, n in enumerate(shape))
    if repeats:
        index = rng.integers(0, shape[dim], index_shape)
    else:  # distinct positions along dim, as torch.topk's indices are
        index = np.argsort(
            rng.random(tuple(shape[dim] if d == dim else n for d, n in enumerate(shape))), axis=dim
        )
        index = np.take(index, range(k), axis=dim)
    src = rng.standard_normal(index_shape).astype(np.float32)
    return x, index, src


@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("repeats", [False, True])
def test_scatter_writes_src_where_the_index_says_and_the_last_repeat_wins(dim, repeats, rng):
    """torch.scatter's meaning, the reference's and the plan's (numpy's put_along_axis: in
    order, so a repeated position keeps the last src)."""
    fd = _scatter_fusion(dim)
    x, index, src = _scatter_inputs(rng, dim, 4, repeats)
    want = x.copy()
    np.put_along_axis(want, index, src, axis=dim)
    want = 1 / (1 + np.exp(-want))
    np.testing.assert_allclose(reference.run(fd, [x, index, src])[0], want, rtol=1e-6)
    np.testing.assert_allclose(run_via_plan(fd.fusion, [x, index, src])[0], want, rtol=1e-5)


def test_scatter_of_a_scalar_and_its_refusals(rng):
    fd = _scatter_fusion(1, scalar_src=True)
    x, index, _ = _scatter_inputs(rng, 1, 2, False)
    want = x.copy()
    np.put_along_axis(want, index, np.float32(2.5), axis=1)
    np.testing.assert_allclose(reference.run(fd, [x, index, 2.5])[0], 1 / (1 + np.exp(-want)))
    from tunefuse.errors import IndexOutOfRangeError

    index[0, 1, 3] = 5  # dim 1 has 5 positions
    with pytest.raises(IndexOutOfRangeError, match="outside"):
        reference.run(fd, [x, index, 2.5])
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1], dtype=DataType.Float)
        i = fd.define_tensor([-1, -1], dtype=DataType.Int)
        with pytest.raises(DefinitionError, match="one dtype"):
            fd.ops.scatter(t, i, fd.define_tensor([-1, -1], dtype=DataType.Half), 0)
        with pytest.raises(DefinitionError, match="rank"):
            fd.ops.scatter(t, fd.define_tensor([-1], dtype=DataType.Int), 1.0, 0)
        fd.add_output(fd.ops.scatter(t, i, 1.0, 0))  # a scalar src of another dtype is cast


@pytest.mark.parametrize(
    ("sa", "sb"),
    [
        ((5,), (5,)),
        ((5,), (5, 3)),
        ((4, 5), (5,)),
        ((4, 5), (5, 3)),
        ((2, 4, 5), (5, 3)),
        ((3, 1, 4, 5), (2, 5, 6)),
        ((4, 5), (2, 5, 3)),
    ],
)
def test_matmul_is_torchs_matmul(sa, sb, rng):
    """torch.matmul's shapes (1-D operands, broadcast batch dims, declared 1 where they
    broadcast, as from_pytorch declares them), by the reference and the plan."""
    with FusionDefinition() as fd:
        a = fd.define_tensor([1 if e == 1 else -1 for e in sa], dtype=DataType.Float)
        b = fd.define_tensor([1 if e == 1 else -1 for e in sb], dtype=DataType.Float)
        fd.add_output(fd.ops.matmul(a, b))
    x, y = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    want = np.matmul(x, y)
    for got in (reference.run(fd, [x, y])[0], run_via_plan(fd.fusion, [x, y])[0]):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("sx", "sw", "bias"),
    [
        ((5, 5), (5, 5), (5,)),
        ((2, 4, 16), (16, 16), None),
        ((16,), (8, 16), (8,)),
        ((3, 16), (16,), None),
    ],
)
def test_linear_is_torchs_linear_rounded_once(sx, sw, bias, rng):
    """bf16 in, bf16 out, accumulated in float with the bias added before the one rounding."""
    with FusionDefinition() as fd:
        args = [fd.define_tensor([-1] * len(s), dtype=DataType.BFloat16) for s in (sx, sw)]
        if bias is not None:
            args.append(fd.define_tensor([-1] * len(bias), dtype=DataType.BFloat16))
        fd.add_output(fd.ops.linear(*args))
    bf16 = ml_dtypes.bfloat16
    inputs = [
        rng.standard_normal(s).astype(bf16) for s in (sx, sw, *(() if bias is None else (bias,)))
    ]
    want = inputs[0].astype(np.float32) @ inputs[1].astype(np.float32).T
    if bias is not None:
        want = want + inputs[2].astype(np.float32)
    want = want.astype(bf16)
    for got in (reference.run(fd, inputs)[0], run_via_plan(fd.fusion, inputs)[0]):
        assert got.dtype == bf16 and got.shape == want.shape
        np.testing.assert_allclose(
            got.astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=1e-2
        )


def test_matmul_and_linear_refuse_what_torch_refuses():
    with FusionDefinition() as fd:
        i = fd.define_tensor([-1, -1], dtype=DataType.Int)
        f = fd.define_tensor([-1, -1], dtype=DataType.Float)
        with pytest.raises(DefinitionError, match="matmul: .* is int64"):
            fd.ops.matmul(i, f)
        with pytest.raises(DefinitionError, match="linear: weight"):
            fd.ops.linear(f, fd.define_tensor([-1, -1, -1], dtype=DataType.Float))
        fd.add_output(fd.ops.matmul(f, f))


def manually_padded_cat(fd):
    """nvFuser's fusion translation spells cat([a, b], dim=1) of [-1, 3] and [-1, 5] parts as
    pads to the whole 8 and cat(manual_padding=True)."""
    a = fd.define_tensor(shape=[-1, 3], dtype=DataType.Float)
    b = fd.define_tensor(shape=[-1, 5], dtype=DataType.Float)
    zero = fd.define_scalar(0.0, dtype=DataType.Float)
    pa = fd.ops.pad(a, [0, 5, 0, 0], zero)
    pb = fd.ops.pad(b, [3, 0], zero)
    fd.add_output(fd.ops.cat([pa, pb], dim=1, manual_padding=True))


def test_a_manually_padded_cat_joins_the_parts(rng):
    from tunefuse.errors import DefinitionError

    with FusionDefinition() as fd:
        manually_padded_cat(fd)
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    np.testing.assert_array_equal(reference.run(fd, [a, b])[0], np.concatenate([a, b], 1))
    cases = [
        ([0, 4], [3, 0], "tensor 0 is padded by \\(0, 4\\) along dim 1; .* needs \\(0, 5\\)"),
        ([0, 5], [2, 0], "tensor 1 is padded by \\(2, 0\\) along dim 1; .* needs \\(3, 0\\)"),
        ([0, 5, 1, 0], [3, 0], "tensor 0 is padded along dim 0 too"),
    ]
    for wa, wb, message in cases:
        with pytest.raises(DefinitionError, match=message):
            with FusionDefinition() as bad:
                x = bad.define_tensor(shape=[-1, 3], dtype=DataType.Float)
                y = bad.define_tensor(shape=[-1, 5], dtype=DataType.Float)
                bad.ops.cat([bad.ops.pad(x, wa), bad.ops.pad(y, wb)], dim=1, manual_padding=True)
    with pytest.raises(DefinitionError, match="known only when the fusion runs"):
        with FusionDefinition() as bad:
            x = bad.define_tensor(shape=[-1, -1], dtype=DataType.Float)
            bad.ops.cat(
                [bad.ops.pad(x, [0, 2]), bad.ops.pad(x, [2, 0])], dim=1, manual_padding=True
            )
