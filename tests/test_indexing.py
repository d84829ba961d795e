"""index_select, gather, take_along_axis and embedding_fwd on the CPU: their meaning in the
reference (against NumPy's take / take_along_axis and torch's embedding formula), the plan
interpreter agreeing with it through every scheduler they land in, the errors that name a
bad definition or an out-of-range index, the printer and JSON round trips, and NVRTC
compiling every kernel they make. tests/test_gpu_indexing.py runs the same cases on a GPU."""

from __future__ import annotations

import numpy as np
import pytest
from test_codegen_compile import ARCHS, compile_plan

from tunefuse import DataType, FusionDefinition, reference
from tunefuse.errors import DefinitionError, IndexOutOfRangeError, ShapeError
from tunefuse.ir.serialize import fusion_from_json
from tunefuse.planning.kernel_ir import BufferKind, SchedulerKind
from tunefuse.planning.plan_interpreter import run_plan


def _table(fd, rank=2, dtype=DataType.Float):  # noqa: ANN001, ANN202
    return fd.define_tensor(shape=[-1] * rank, contiguity=[True] * rank, dtype=dtype)


def _index(fd, rank=1, dtype=DataType.Int):  # noqa: ANN001, ANN202
    return fd.define_tensor(shape=[-1] * rank, contiguity=[True] * rank, dtype=dtype)


def index_select_rows(fd, dtype):  # noqa: ANN001, ANN201
    """Rows of a table picked by a 1-D index, times 2 (pointwise)."""
    t, i = _table(fd, 2, dtype), _index(fd, 1)
    fd.add_output(fd.ops.mul(fd.ops.index_select(t, i, 0), 2.0))


def index_select_columns(fd, dtype):  # noqa: ANN001, ANN201
    """Columns picked by an int32 index: the index varies along the innermost dim."""
    t, i = _table(fd, 3, dtype), _index(fd, 1, DataType.Int32)
    fd.add_output(fd.ops.index_select(t, i, 2))


def embedding(fd, dtype):  # noqa: ANN001, ANN201
    """A 2-D index into a 2-D table (torch's embedding)."""
    i, w = _index(fd, 2), _table(fd, 2, dtype)
    fd.add_output(fd.ops.embedding_fwd(i, w))


def embedding_max_norm(fd, dtype):  # noqa: ANN001, ANN201
    """max_norm and norm_type as scalar inputs: a normalization over each gathered row."""
    i, w = _index(fd, 1), _table(fd, 2, dtype)
    max_norm = fd.define_scalar(dtype=DataType.Float)
    norm_type = fd.define_scalar(dtype=DataType.Float)
    fd.add_output(fd.ops.embedding_fwd(i, w, None, max_norm, norm_type))


def gather_rows_sum(fd, dtype):  # noqa: ANN001, ANN201
    """torch.gather along dim 1 with an index narrower than the table, then a row sum."""
    t, i = _table(fd, 2, dtype), _index(fd, 2)
    g = fd.ops.gather(t, i, 1)
    fd.add_output(g)
    fd.add_output(fd.ops.sum(fd.ops.cast(g, DataType.Float), [1]))


def take_along_computed(fd, dtype):  # noqa: ANN001, ANN201
    """take_along_axis from a computed table (exp) and a computed index (|i| mod extent)."""
    t, i = _table(fd, 2, dtype), _index(fd, 2)
    e = fd.ops.exp(t)
    n = fd.ops.size(t, 0)
    fd.add_output(fd.ops.take_along_axis(e, fd.ops.remainder(fd.ops.abs(i), n), 0))


CASES = {
    "index_select_rows": (
        index_select_rows,
        lambda n, m: [(n, m), (m // 2 + 1,)],
        {1: (0, 0, np.int64)},
    ),
    "index_select_columns": (
        index_select_columns,
        lambda n, m: [(3, n, m), (7,)],
        {1: (0, 2, np.int32)},
    ),
    "embedding": (embedding, lambda n, m: [(5, 3), (n, m)], {0: (1, 0, np.int64)}),
    "embedding_max_norm": (embedding_max_norm, lambda n, m: [(17,), (n, m)], {0: (1, 0, np.int64)}),
    "gather_rows_sum": (gather_rows_sum, lambda n, m: [(n, m), (n, 5)], {1: (0, 1, np.int64)}),
    "take_along_computed": (take_along_computed, lambda n, m: [(n, m), (4, m)], {}),
}
"""name -> (builder, shapes of its tensor inputs, {index input: (table input, dim, dtype)})."""


def build(name: str, dtype: DataType = DataType.Float) -> FusionDefinition:
    fd = FusionDefinition()
    with fd:
        CASES[name][0](fd, dtype)
    return fd


def case_inputs(
    name: str,
    n: int,
    m: int,
    rng: np.random.Generator,
    dtype: DataType = DataType.Float,
    out_of_range: bool = False,
) -> list:
    """Inputs for a case: tables standard normal, indices inside their table (one index
    equal to the extent when `out_of_range`), max_norm 1 and norm_type 2 for the embedding;
    take_along_computed's index is any integer (the fusion brings it in range)."""
    _, shapes_of, index_of = CASES[name]
    shapes = shapes_of(n, m)
    arrays: list = []
    for k, shape in enumerate(shapes):
        if k in index_of:
            table, dim, index_dtype = index_of[k]
            extent = shapes[table][dim]
            ix = rng.integers(0, extent, shape).astype(index_dtype)
            if out_of_range and ix.size:
                ix.flat[ix.size // 2] = extent
            arrays.append(ix)
        elif name == "take_along_computed" and k == 1:
            arrays.append(rng.integers(-50, 50, shape).astype(np.int64))
        else:
            arrays.append(rng.standard_normal(shape).astype(dtype.numpy))
    if name == "embedding_max_norm":
        arrays += [1.0, 2.0]
    return arrays


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("n, m", [(1, 1), (7, 9), (33, 128)])
def test_plans_of_indexing_agree_with_the_reference(name, n, m, rng):
    fd = build(name)
    inputs = case_inputs(name, n, m, rng)
    plan = fd.plan(inputs)
    got = run_plan(plan, inputs)
    for g, want in zip(got, reference.run(fd.fusion, inputs), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)


def test_reference_meaning_of_each_op(rng):
    table = rng.standard_normal((6, 4, 5)).astype(np.float32)
    with FusionDefinition() as fd:
        t, i, j = _table(fd, 3), _index(fd, 2), _index(fd, 3)
        fd.add_output(fd.ops.index_select(t, i, 1))
        fd.add_output(fd.ops.gather(t, j, 2))
    ix = rng.integers(0, 4, (2, 3))
    jx = rng.integers(0, 5, (3, 2, 7))
    a, b = reference.run(fd.fusion, [table, ix, jx])
    np.testing.assert_array_equal(a, np.take(table, ix, axis=1))
    assert a.shape == (6, 2, 3, 5)
    np.testing.assert_array_equal(b, np.take_along_axis(table[:3, :2], jx, axis=2))


def test_embedding_follows_torch_renormalization(rng):
    """torch.nn.functional.embedding with max_norm: rows whose p-norm exceeds it are scaled
    by max_norm / (norm + 1e-7); others are as stored."""
    fd = build("embedding_max_norm")
    weight = rng.standard_normal((9, 6)).astype(np.float32)
    weight[2] *= 0.01  # a row under the bound
    idx = np.array([2, 0, 8, 2])
    for p, bound in ((2.0, 1.0), (1.0, 0.5), (3.0, 100.0)):
        (got,) = reference.run(fd.fusion, [idx, weight, bound, p])
        rows = weight[idx].astype(np.float64)
        norm = (np.abs(rows) ** p).sum(1, keepdims=True) ** (1 / p)
        want = rows * np.where(norm > bound, bound / (norm + 1e-7), 1.0)
        np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_out_of_range_index_is_a_named_error(name, rng):
    fd = build(name)
    inputs = case_inputs(name, 7, 9, rng, out_of_range=True)
    if name == "take_along_computed":
        pytest.skip("its index is computed in range")
    with pytest.raises(IndexOutOfRangeError, match=r"lies outside \[0, extent of dim"):
        reference.run(fd.fusion, inputs)
    with pytest.raises(IndexOutOfRangeError, match="outside"):
        run_plan(fd.plan(inputs), inputs)


def test_negative_indices_are_out_of_range(rng):
    fd = build("index_select_rows")
    with pytest.raises(IndexOutOfRangeError, match="-1 where the extent is 4"):
        reference.run(
            fd.fusion, [rng.standard_normal((4, 3)).astype(np.float32), np.array([0, -1])]
        )


def test_bad_definitions_name_what_is_wrong():
    with pytest.raises(DefinitionError, match="must be an integer tensor"):
        with FusionDefinition() as fd:
            fd.ops.index_select(_table(fd), _table(fd, 1), 0)
    with pytest.raises(ShapeError, match="rank 1, the table T0 rank 2"):
        with FusionDefinition() as fd:
            fd.ops.gather(_table(fd), _index(fd, 1), 0)
    with pytest.raises(ShapeError, match="dim 0 of the index T1 has extent 5, more than"):
        with FusionDefinition() as fd:
            t = fd.define_tensor(shape=[3, 4], dtype=DataType.Float)
            fd.ops.gather(t, fd.define_tensor(shape=[5, 2], dtype=DataType.Int), 1)
    with pytest.raises(DefinitionError, match="weight T1 must have rank 2"):
        with FusionDefinition() as fd:
            fd.ops.embedding_fwd(_index(fd, 1), _table(fd, 3))
    with pytest.raises(DefinitionError, match="dim"):
        with FusionDefinition() as fd:
            fd.ops.index_select(_table(fd), _index(fd), 2)


def test_a_gather_of_an_elementwise_table_reads_the_tables_input(rng):
    """take_along_axis(exp(t), i): one kernel gathers from t and takes the exp of what it
    read, rather than a kernel writing exp(t) whole for another to pick from."""
    fd = build("take_along_computed")
    plan = fd.plan(case_inputs("take_along_computed", 8, 16, rng))
    (seg,) = plan.segments
    (gather,) = seg.gathers
    (table,) = [b for b in plan.buffers if b.id == gather.buffer]
    assert table.kind is BufferKind.INPUT and table.input_index == 0
    assert "OpKind.EXP" in repr(seg.stores[0].expr)


def test_a_kernel_never_gathers_from_what_it_stores(rng):
    """A table that is no elementwise function of one input (here t plus its column sums) is
    written by one kernel and gathered by another."""
    with FusionDefinition() as fd:
        t, i = _table(fd, 2, DataType.Float), _index(fd, 2)
        total = fd.ops.broadcast_in_dim(fd.ops.sum(t, [0]), [8, 16], [1])
        fd.add_output(fd.ops.take_along_axis(fd.ops.add(t, total), i, 0))
    table = rng.standard_normal((8, 16), dtype=np.float32)
    index = rng.integers(0, 8, (4, 16))
    plan = fd.plan([table, index])
    assert len(plan.segments) >= 2
    (gathering,) = [s for s in plan.segments if s.gathers]
    assert not gathering.read_buffers & gathering.stored_buffers
    (got,) = reference.run(fd.fusion, [table, index])
    np.testing.assert_allclose(got, np.take_along_axis(table + table.sum(0), index, 0), rtol=1e-6)


def test_schedulers_indexing_lands_in(rng):
    kinds = {
        name: {s.scheduler for s in build(name).plan(case_inputs(name, 8, 64, rng)).segments}
        for name in CASES
    }
    assert kinds["embedding"] == {SchedulerKind.POINTWISE}
    assert kinds["embedding_max_norm"] == {SchedulerKind.NORMALIZATION}
    assert (
        SchedulerKind.REDUCTION in kinds["gather_rows_sum"]
        or SchedulerKind.NORMALIZATION in kinds["gather_rows_sum"]
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_printed_and_json_definitions_round_trip(name, rng):
    fd = build(name)
    namespace: dict = {}
    exec(compile(repr(fd), "<printed>", "exec"), namespace)  # noqa: S102 - our own printer's output
    again = namespace["fd"]
    assert again.fusion.fusion_id == fd.fusion.fusion_id
    assert fusion_from_json(fd.fusion.to_json()).fusion_id == fd.fusion.fusion_id


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    "dtype",
    [DataType.Float, DataType.BFloat16, DataType.Half, DataType.Double],
    ids=lambda d: d.value,
)
@pytest.mark.parametrize("name", sorted(CASES))
def test_indexing_kernels_compile(name, dtype, arch, rng):
    fd = build(name, dtype)
    assert compile_plan(fd.plan(case_inputs(name, 8, 64, rng, dtype)), arch)


@pytest.mark.parametrize("dim", [0, 1])
def test_a_scatter_index_out_of_range_names_the_tensor_written(dim):
    """scatter checks its index with a gather of positions the definition never named: the
    error names the tensor scattered into (T0) and says it is scatter's check."""
    from tunefuse import FusionDefinition
    from tunefuse.ir.dtypes import DataType

    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        i = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int)
        s = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.scatter(a, i, s, dim))
    x = np.zeros((4, 4), np.float32)
    index = np.array([[0, 5, 1, 2]]) if dim == 0 else np.array([[0], [5], [1], [2]])
    src = np.ones(index.shape, np.float32)
    with pytest.raises(
        IndexOutOfRangeError,
        match=rf"scatter's index check \(gather \(defining T\d+\)\): an index in T1 lies "
        rf"outside \[0, extent of dim {dim} of T0\): 5 where the extent is 4",
    ):
        reference.run(fd.fusion, [x, index, src])
