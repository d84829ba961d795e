"""Concretization, aliasing and segmentation (CPU): the plan of the seed fusions and more,
and proof that running the plan kernel by kernel keeps the fusion's meaning."""

import functools

import fusion_zoo
import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hyp
from strategies import fusions
from test_frontend import ROOT
from test_gpu_split import middle_reduction
from test_pointwise_defaults import view

from tunefuse import DataType, FusionDefinition, InputMismatchError, ShapeError, reference
from tunefuse.arrays import strides_in_order
from tunefuse.fusion_file import load_fusion_file
from tunefuse.planning.concretize import concretize
from tunefuse.planning.kernel_ir import BufferKind, SchedulerKind
from tunefuse.planning.plan_interpreter import run_plan, run_via_plan
from tunefuse.planning.signature import bind_inputs

SEEDS = {c.name: c for c in load_fusion_file(ROOT / "examples" / "seed_fusions.py")}


def assert_plan_matches_reference(fd, inputs, out=None):
    expected = reference.run(fd.fusion, inputs, include_aliased=True)
    returned = [o for o in fd.fusion.outputs if o.alias_input is None]
    order = [k for k, o in enumerate(fd.fusion.outputs) if o.alias_input is None] + [
        k for k, o in enumerate(fd.fusion.outputs) if o.alias_input is not None
    ]
    got = run_via_plan(fd.fusion, inputs, out)
    assert len(got) == len(expected)
    for k, g in zip(order, got):
        assert g.shape == expected[k].shape and g.dtype == expected[k].dtype
        np.testing.assert_array_equal(g, expected[k])
    return returned


# -- the seeds -------------------------------------------------------------------------------


def test_seed_gelu_with_bookend_views_is_one_pointwise_kernel(rng):
    fd = SEEDS["gelu_with_views"].build()
    x = np.zeros((8192, 3072), np.float32)
    plan = fd.plan([x])
    assert plan.num_kernels == 1
    (seg,) = plan.segments
    assert seg.scheduler is SchedulerKind.POINTWISE and seg.extents == (8192 * 3072,)
    # The same kernel as GELU without views: same code, same shape.
    plain = SEEDS["gelu_without_views"].build().plan([np.zeros((64, 128, 3072), np.float32)])
    assert plain.segments[0].kernel_key == seg.kernel_key
    assert plain.segments[0].shape_key == seg.shape_key


def test_seed_gelu_second_output_is_an_alias_of_the_input():
    fd = SEEDS["gelu_with_views_two_outputs"].build()
    plan = fd.plan([np.zeros((8192, 3072), np.float32)])
    assert plan.num_kernels == 1
    t1 = plan.outputs[0]
    assert plan.buffers[t1.buffer].kind is BufferKind.INPUT
    assert t1.view.shape == (64, 128, 3072) and t1.view.strides == (128 * 3072, 3072, 1)
    assert len(plan.aliases) == 1


def test_seed_transpose_with_views_is_one_transpose_kernel():
    plan = SEEDS["transpose_with_views"].build().plan([np.zeros((768, 128, 64), np.float32)])
    assert [s.scheduler for s in plan.segments] == [SchedulerKind.TRANSPOSE]
    assert plan.outputs[0].view.shape == (8192, 768)


@pytest.mark.parametrize("name", [n for n in SEEDS if n.startswith("sequential")])
def test_each_view_placement_of_the_sequential_study_is_one_kernel(name):
    plan = SEEDS[name].build().plan([np.zeros((8192, 3072), np.float32)])
    assert plan.num_kernels == 1
    assert plan.segments[0].scheduler is SchedulerKind.POINTWISE
    assert plan.segments[0].extents == (8192 * 3072,)


@pytest.mark.parametrize(
    "name",
    [
        "transpose_with_views",
        "reshape_2_10_40",
        "sequential_views_ABC",
        "sequential_views_B",
        "sequential_views_",
    ],
)
def test_seed_plans_compute_exactly_the_reference(name, rng):
    case = SEEDS[name]
    assert_plan_matches_reference(case.build(), case.example_inputs(rng))


# -- views only, in place, preallocated ---------------------------------------------------------


def test_a_fusion_of_views_only_runs_no_kernel(rng):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1])
        y = fd.ops.permute(fd.ops.reshape(x, new_shape=[4, 6, -1]), dims=[2, 0, 1])
        fd.add_output(y)
        fd.add_output(fd.ops.slice(x, [0, 1, 0], [2, 3, 5], [1, 1, 2]))
        fd.add_output(fd.ops.expand(fd.ops.unsqueeze(x, dim=0), shape=[3, -1, -1, -1]))
    x = rng.standard_normal((2, 12, 5), dtype=np.float32)
    plan = fd.plan([x])
    assert plan.num_kernels == 0 and len(plan.aliases) == 3
    assert plan.outputs[2].view.strides[0] == 0  # expand is a zero stride
    assert_plan_matches_reference(fd, [x])


def test_a_view_that_needs_index_arithmetic_is_copied(rng):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.reshape(fd.ops.permute(x, dims=[1, 0]), new_shape=[-1]))
    x = rng.standard_normal((3, 4), dtype=np.float32)
    plan = fd.plan([x])
    assert plan.num_kernels == 1 and not plan.aliases
    assert_plan_matches_reference(fd, [x])


def test_in_place_output_writes_into_its_input(rng):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        y = fd.ops.mul(x, 2.0)
        fd.add_output(y, alias_input=x)
        fd.add_output(fd.ops.exp(x))
    x = rng.standard_normal((4, 5), dtype=np.float32)
    plan = fd.plan([x])
    assert plan.num_kernels == 1
    inplace = [o for o in plan.outputs if not o.returned]
    assert plan.buffers[inplace[0].buffer].kind is BufferKind.INPUT
    assert_plan_matches_reference(fd, [x])


def test_illegal_in_place_aliasing_is_made_safe(rng):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[4, 4])
        fd.add_output(fd.ops.permute(fd.ops.neg(x), dims=[1, 0]), alias_input=x)
    x = rng.standard_normal((4, 4), dtype=np.float32)
    plan = fd.plan([x])
    # Writing x transposed into x while reading it would race: a temporary and a copy.
    assert plan.num_kernels == 2
    assert "through a temporary" in plan.segments[0].why
    assert "after every read" in plan.segments[1].why
    assert_plan_matches_reference(fd, [x])


def _issue_2664(example: int, n: int) -> FusionDefinition:
    """nvFuser's issue 2664 repros: an input written in place while other threads (or
    blocks) still read it through a broadcast or a reduction."""
    with FusionDefinition() as fd:
        if example == 4:
            t0 = fd.define_tensor(shape=[-1, 1], contiguity=[True, None])
            t1 = fd.define_tensor(shape=[-1, -1])
            fd.add_output(fd.ops.add(t1, t0))
            fd.add_output(fd.ops.neg(t0), t0)
            return fd
        t1 = fd.define_tensor(shape=[-1])
        t2 = fd.define_tensor(shape=[], contiguity=[])
        if example == 1:  # the written value is broadcast and read by every element
            t4 = fd.ops.add(t2, 1.0)
            fd.add_output(t4, t2)
            fd.add_output(fd.ops.mul(t1, fd.ops.broadcast_in_dim(t4, shape=[n], broadcast_dims=[])))
        elif example == 2:  # a reduction of the broadcast input written into that input
            t7 = fd.ops.broadcast_in_dim(t2, shape=[n], broadcast_dims=[])
            fd.add_output(fd.ops.sum(t7, dims=[0]), t2)
            fd.add_output(fd.ops.mul(t1, t7))
            fd.add_output(fd.ops.add(t1, t7))
        else:  # two in-place writes, one a reduction over a broadcast of the other's input
            t3 = fd.define_tensor(shape=[], contiguity=[])
            t5 = fd.ops.add(t1, fd.ops.broadcast_in_dim(t2, shape=t1.shape(), broadcast_dims=[]))
            fd.add_output(fd.ops.sum(t5, dims=[0]), t3)
            fd.add_output(fd.ops.add(t3, 1.0), t2)
    return fd


def issue_2664_inputs(example: int, n: int, rng) -> list:
    if example == 4:
        return [
            rng.standard_normal((n, 1), dtype=np.float32),
            rng.standard_normal((n, 128), dtype=np.float32),
        ]
    scalars = 2 if example == 3 else 1
    return [rng.standard_normal(n, dtype=np.float32)] + [
        np.array(rng.standard_normal(), dtype=np.float32) for _ in range(scalars)
    ]


@pytest.mark.parametrize("example", [1, 2, 3, 4])
def test_an_input_written_in_place_is_written_after_every_read_of_it(example, rng):
    """A kernel may write its input in place only where each element is read by the one
    iteration point that writes it; a reduced store, or a store read back through a
    broadcast, goes through a temporary copied in by a last kernel (issue 2664's races)."""
    n = 4096
    fd = _issue_2664(example, n)
    inputs = issue_2664_inputs(example, n, rng)
    plan = fd.plan(inputs)
    written = {
        plan.buffers[st.buffer].value
        for seg in plan.segments
        for st in seg.stores
        if plan.buffers[st.buffer].kind is BufferKind.INPUT
    }
    for seg in plan.segments:
        for st in seg.stores:
            if plan.buffers[st.buffer].kind is BufferKind.INPUT:
                assert "after every read" in seg.why and not seg.values  # a copy kernel
                later = plan.segments[plan.segments.index(seg) + 1 :]
                assert not any(st.buffer in s.read_buffers for s in later)
    assert written == {
        fd.fusion.inputs[k] for k in ((0,) if example == 4 else (1, 2) if example == 3 else (1,))
    }
    assert_plan_matches_reference(fd, inputs)


def test_a_pointwise_in_place_update_stays_one_kernel(rng):
    """Each element read and written by one thread (x = x * 2 + y): no temporary."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        y = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.add(fd.ops.mul(x, 2.0), y), x)
    inputs = [rng.standard_normal((64, 33), dtype=np.float32) for _ in range(2)]
    plan = fd.plan(inputs)
    assert plan.num_kernels == 1
    assert_plan_matches_reference(fd, inputs)


def test_an_output_also_written_in_place_is_returned_as_that_input():
    """nvFuser's returning_aliased_outputs: T4 written into T0 and also returned comes back
    as T0 itself (one store, no second copy). T0 returned is T0 as it was passed in: a copy
    taken before the write (nvFuser returns the input, written: a value the definition does
    not have)."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1, -1, -1])
        t4 = fd.ops.where(fd.ops.gt(t0, 0.0), t0, 0.0)
        fd.add_output(t4)
        fd.add_output(t4, t0)
        fd.add_output(t4)
        fd.add_output(t0)
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 4), dtype=np.float32)
    plan = fd.plan([x])
    returned = [o for o in plan.outputs if o.returned]
    assert len(returned) == 3
    kinds = [plan.buffers[o.buffer].kind for o in returned]
    assert kinds == [BufferKind.INPUT, BufferKind.INPUT, BufferKind.OUTPUT]
    got = run_via_plan(fd.fusion, [x.copy()])
    np.testing.assert_array_equal(got[0], np.maximum(x, 0))
    np.testing.assert_array_equal(got[1], np.maximum(x, 0))
    np.testing.assert_array_equal(got[2], x)


def test_views_of_an_input_written_in_place_are_read_before_the_write(rng):
    """A slice (or the input itself) returned beside an in-place write of that input holds the
    input as passed in; the kernels that read it run before the one that writes it (a cycle in
    the kernel order before: found by the fuzzer's in-place outputs)."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, 1], contiguity=[True, None])
        t1 = fd.ops.segment_set(t0)
        t5 = fd.ops.minimum(t1, fd.ops.where(fd.ops.gt(t1, 0.25), t1, t0))
        fd.add_output(fd.ops.slice(t0, [0, 0], [128, 1]))
        fd.add_output(fd.ops.max(fd.ops.slice(t1, [85, 0], [108, 1], [3, 1]), dims=[0]))
        fd.add_output(t5, alias_input=t0)
        fd.add_output(t5)
    x = rng.standard_normal((128, 1), dtype=np.float32)
    plan = fd.plan([x])
    writer = next(k for k, seg in enumerate(plan.segments) if 0 in seg.stored_buffers)
    assert all(0 not in seg.read_buffers for seg in plan.segments[writer + 1 :])
    assert_plan_matches_reference(fd, [x])


def test_in_place_shape_mismatch_is_refused():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.sum(x, dims=[1], keepdim=True), alias_input=x)
    with pytest.raises(InputMismatchError, match="cannot be written in place into T0"):
        fd.plan([np.zeros((3, 4), np.float32)])


def test_preallocated_outputs_are_checked_and_written(rng):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.relu(x))
        fd.add_output(fd.ops.reshape(x, new_shape=[-1]))
    x = rng.standard_normal((3, 4), dtype=np.float32)
    out0 = np.zeros((4, 3), np.float32).T  # a transposed buffer: written through its strides
    out1 = np.zeros(12, np.float32)
    got = run_via_plan(fd.fusion, [x], [out0, out1])
    assert got[0] is out0 and got[1] is out1
    np.testing.assert_array_equal(out0, np.maximum(x, 0))
    np.testing.assert_array_equal(out1, x.ravel())
    with pytest.raises(InputMismatchError, match="out\\[0\\] \\(for T1\\): shape \\[4, 3\\]"):
        fd.plan([x], out=[np.zeros((4, 3), np.float32), None])
    with pytest.raises(InputMismatchError, match="dtype double"):
        fd.plan([x], out=[np.zeros((3, 4)), None])
    with pytest.raises(InputMismatchError, match="2 outputs"):
        fd.plan([x], out=[None])
    with pytest.raises(InputMismatchError, match="overlap"):
        fd.plan([x], out=[np.broadcast_to(np.zeros(4, np.float32), (3, 4)), None])


# -- normalization, reductions ----------------------------------------------------------------


def softmax(fd):
    x = fd.define_tensor(shape=[-1, -1])
    m = fd.ops.max(x, dims=[1], keepdim=True)
    e = fd.ops.exp(fd.ops.sub(x, m))
    fd.add_output(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)))


def layernorm(fd):
    x = fd.define_tensor(shape=[-1, -1])
    w = fd.define_tensor(shape=[-1])
    b = fd.define_tensor(shape=[-1])
    var, mean = fd.ops.var_mean(x, dims=[1], correction=0, keepdim=True)
    y = fd.ops.mul(fd.ops.sub(x, mean), fd.ops.rsqrt(fd.ops.add(var, 1e-5)))
    y = fd.ops.mul(y, fd.ops.broadcast_in_dim(w, shape=x.shape(), broadcast_dims=[1]))
    fd.add_output(fd.ops.add(y, fd.ops.broadcast_in_dim(b, shape=x.shape(), broadcast_dims=[1])))


def rmsnorm(fd):
    x = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
    w = fd.define_tensor(shape=[-1], dtype=DataType.BFloat16)
    xf = fd.ops.cast(x, DataType.Float)
    ms = fd.ops.mean(fd.ops.mul(xf, xf), dims=[1], keepdim=True)
    y = fd.ops.mul(xf, fd.ops.rsqrt(fd.ops.add(ms, 1e-6)))
    y = fd.ops.mul(
        y,
        fd.ops.broadcast_in_dim(
            fd.ops.cast(w, DataType.Float), shape=x.shape(), broadcast_dims=[1]
        ),
    )
    fd.add_output(fd.ops.cast(y, DataType.BFloat16))


@pytest.mark.parametrize(
    "define, dtype",
    [(softmax, np.float32), (layernorm, np.float32), (rmsnorm, DataType.BFloat16.numpy)],
)
def test_normalizations_are_one_persistent_kernel(define, dtype, rng):
    with FusionDefinition() as fd:
        define(fd)
    n_tensors = len([v for v in fd.fusion.inputs])
    inputs = [rng.standard_normal((16, 40)).astype(dtype)] + [
        rng.standard_normal(40).astype(dtype) for _ in range(n_tensors - 1)
    ]
    plan = fd.plan(inputs)
    assert [s.scheduler for s in plan.segments] == [SchedulerKind.NORMALIZATION]
    assert_plan_matches_reference(fd, inputs)


def test_row_and_column_sums_are_reductions(rng):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.sum(x, dims=[1]))
        fd.add_output(fd.ops.sum(x, dims=[0]))
    x = rng.standard_normal((30, 20), dtype=np.float32)
    plan = fd.plan([x])
    assert sorted(s.scheduler.value for s in plan.segments) == ["reduction", "reduction"]
    assert {s.reduce_dims for s in plan.segments} == {(1,), (0,)}
    assert_plan_matches_reference(fd, [x])


def test_a_reduction_read_elsewhere_is_materialized(rng):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        s = fd.ops.sum(x, dims=[1])  # [N]
        t = fd.ops.sum(fd.ops.broadcast_in_dim(s, shape=[4, 6], broadcast_dims=[0]), dims=[0])
        fd.add_output(t)
    x = rng.standard_normal((4, 5), dtype=np.float32)
    plan = fd.plan([x])
    assert plan.num_kernels == 2
    assert any(b.kind is BufferKind.INTERMEDIATE for b in plan.buffers)
    assert_plan_matches_reference(fd, [x])


def test_segment_set_is_a_kernel_boundary(rng):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1])
        fd.add_output(fd.ops.exp(fd.ops.segment_set(fd.ops.neg(x))))
    x = rng.standard_normal(7, dtype=np.float32)
    assert fd.plan([x]).num_kernels == 2
    assert_plan_matches_reference(fd, [x])


def test_pad_cat_iota_full_inside_kernels(rng):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        p = fd.ops.pad(x, [1, 2], 9.0)
        c = fd.ops.cat([p, fd.ops.full([2, 8], 0.5, DataType.Float)], dim=0)
        fd.add_output(
            fd.ops.add(
                c,
                fd.ops.broadcast_in_dim(
                    fd.ops.iota(8, 0.0, 1.0, DataType.Float), shape=[5, 8], broadcast_dims=[1]
                ),
            )
        )
    x = rng.standard_normal((3, 5), dtype=np.float32)
    assert fd.plan([x]).num_kernels == 1
    assert_plan_matches_reference(fd, [x])


def test_index_type_is_int64_only_when_needed():
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.neg(fd.define_tensor(shape=[-1])))
    small = fd.plan([np.zeros(10, np.float32)]).segments[0]
    assert small.index_type == "int32"
    with FusionDefinition() as fd2:
        x = fd2.define_tensor(shape=[-1, -1])
        fd2.add_output(fd2.ops.neg(x))
    # A transposed view of 2**31 + elements would need int64 offsets; check the rule directly.
    from tunefuse.planning.indexing import Var, scale, var
    from tunefuse.planning.segment import _index_type

    big = scale(var(Var(0, 2**20)), 2**12)
    assert _index_type((2**20,), [], [type("S", (), {"offset": big})()], {}) == "int64"


# -- signatures and concretization ----------------------------------------------------------


def test_input_checks_name_input_dim_declared_and_given():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, 1, 8], contiguity=[True, None, True])
        fd.add_output(fd.ops.neg(x))
    f = fd.fusion
    with pytest.raises(
        InputMismatchError,
        match="input 0 \\(T0\\): dim 1 is declared broadcast \\(size 1\\), got size 3",
    ):
        bind_inputs(f, [np.zeros((2, 3, 8), np.float32)])
    with pytest.raises(InputMismatchError, match="dim 2 declared size 8, got 9"):
        bind_inputs(f, [np.zeros((2, 1, 9), np.float32)])
    with pytest.raises(InputMismatchError, match="declared rank 3, got rank 2"):
        bind_inputs(f, [np.zeros((2, 8), np.float32)])
    with pytest.raises(InputMismatchError, match="declared dtype float, got half"):
        bind_inputs(f, [np.zeros((2, 1, 8), np.float16)])
    with pytest.raises(
        InputMismatchError, match="dim 0 is declared contiguous but its stride is 16"
    ):
        bind_inputs(f, [np.zeros((2, 1, 16), np.float32)[:, :, :8]])
    with pytest.raises(InputMismatchError, match="declared stride order"):
        bind_inputs(f, [np.zeros((8, 1, 2), np.float32).transpose(2, 1, 0)])
    with pytest.raises(InputMismatchError, match="expected a tensor, got float"):
        bind_inputs(f, [1.5])
    bind_inputs(f, [np.zeros((2, 1, 8), np.float32)])


def dynamic_reshape():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1, -1])
        n = fd.define_scalar(dtype=DataType.Int)
        fd.add_output(fd.ops.reshape(x, new_shape=[8, n, -1, 9]))
    return fd


def conc(fd, *inputs):
    return concretize(fd.fusion, bind_inputs(fd.fusion, list(inputs)))


def test_same_decisions_share_conc_key_whatever_the_sizes():
    fd = dynamic_reshape()
    a = conc(fd, np.zeros((8, 15, 7, 9), np.float32), 3)  # merge(1) split -> [8, 3, 35, 9]
    b = conc(fd, np.zeros((8, 21, 11, 9), np.float32), 3)  # same transforms, other sizes
    assert a.info.conc_key == b.info.conc_key


def test_a_scalar_that_changes_the_transforms_changes_conc_key():
    """Seed 002's bug: only the scalar input changes, the reshape must not be reused."""
    fd = dynamic_reshape()
    x = np.zeros((8, 15, 7, 9), np.float32)
    a, b = conc(fd, x, 3), conc(fd, x, 15)  # [8,3,35,9] (merge+split) vs [8,15,7,9] (keep)
    assert a.info.conc_key != b.info.conc_key
    assert a.reshapes != b.reshapes
    pa, pb = fd.plan([x, 3]), fd.plan([x, 15])
    assert pa.conc_key != pb.conc_key
    np.testing.assert_array_equal(run_plan(pa, [x, 3])[0], x.reshape(8, 3, 35, 9))
    np.testing.assert_array_equal(run_plan(pb, [x, 15])[0], x.reshape(8, 15, 7, 9))


def test_broadcast_and_empty_extents_are_decisions():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        y = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.add(x, y))
    f = lambda a, b: conc(fd, np.zeros(a, np.float32), np.zeros(b, np.float32)).info.conc_key  # noqa: E731
    assert f((3, 4), (3, 4)) == f((5, 6), (5, 6))
    assert f((3, 4), (1, 4)) != f((3, 4), (3, 4))
    assert f((0, 4), (0, 4)) != f((3, 4), (3, 4))
    with pytest.raises(ShapeError, match="dim 0 of operand T1 has extent 2 but operand T0 has 3"):
        conc(fd, np.zeros((3, 4), np.float32), np.zeros((2, 4), np.float32))


def test_impossible_dynamic_reshape_is_a_clear_error():
    fd = dynamic_reshape()
    with pytest.raises(ShapeError, match="invalid for input of size"):
        fd.plan([np.zeros((8, 15, 7, 9), np.float32), 4])


def test_plan_prints_what_runs_and_why():
    plan = SEEDS["gelu_with_views_two_outputs"].build().plan([np.zeros((8192, 3072), np.float32)])
    text = str(plan)
    assert "1 kernel" in text and "pointwise" in text and "alias of an input, no kernel" in text
    assert "kernel_key" in text and "shape_key 25165824" in text


@given(fusions(max_ops=6))
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
def test_random_fusions_plan_equals_reference(case):
    fd, inputs = case
    assert_plan_matches_reference(fd, inputs)


def test_a_reduction_feeding_a_reshaped_output_gets_its_own_kernel(rng):
    """Found by the random GPU fusions: the stored value's shape is neither the reduction's
    space nor its result, and there is nothing to split apart."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        s = fd.ops.sum(x, dims=[1], keepdim=True)
        y = fd.ops.add(x, fd.ops.broadcast_in_dim(s, shape=[2, 2], broadcast_dims=[0, 1]))
        fd.add_output(fd.ops.reshape(fd.ops.permute(y, dims=[1, 0]), new_shape=[4]))
    x = rng.standard_normal((2, 2), dtype=np.float32)
    plan = fd.plan([x])
    assert plan.num_kernels >= 1
    assert_plan_matches_reference(fd, [x])


def test_an_output_that_is_no_strided_view_of_an_earlier_outputs_root_is_computed(rng):
    """Found by the random GPU fusions: T9 = reshape(broadcast(sum)) shares its root with the
    output T8, but merging a broadcast dim with a real one is no strided view: T9 gets its
    own buffer and kernel, T8 stays a stride-0 view of the sum."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[2, 2], contiguity=[True, True])
        wide = fd.ops.broadcast_in_dim(
            fd.ops.sum(x, dims=[0], keepdim=True), shape=[2, 2], broadcast_dims=[0, 1]
        )
        fd.add_output(wide)
        fd.add_output(fd.ops.reshape(wide, new_shape=[4]))
    x = rng.standard_normal((2, 2), dtype=np.float32)
    plan = fd.plan([x])
    assert plan.outputs[0].view.strides == (0, 1)
    assert_plan_matches_reference(fd, [x])


@pytest.mark.parametrize("op", ["sum", "max", "min", "prod", "mean"])
@pytest.mark.parametrize(
    "shape,dims,keepdim",
    [
        ((4096, 1), [1], False),
        ((1, 4096), [0], True),
        ((64, 1, 32), [1], False),
        ((1, 8, 1), [0, 2], False),
    ],
)
def test_a_reduction_over_extent_one_dims_is_pointwise(op, shape, dims, keepdim, rng):
    """It reduces nothing: the element itself, cast, with the pointwise scheduler's wide loads."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1] * len(shape), dtype=DataType.BFloat16)
        fd.add_output(getattr(fd.ops, op)(x, dims=dims, keepdim=keepdim))
    x = rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
    plan = fd.plan([x])
    assert [s.scheduler for s in plan.segments] == [SchedulerKind.POINTWISE]
    assert_plan_matches_reference(fd, [x])


@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_mean_over_an_extent_one_dim_is_elementwise(correction, rng):
    """The var of one element is (x - x)**2 / max(1 - correction, 0): 0 or NaN (NaN for a
    non-finite x), elementwise, the mean the element: one pointwise kernel, with exactly the
    reference's values (layernorm over a dim of 1 was a reduction of one element a thread)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        var, mean = fd.ops.var_mean(x, dims=[0], correction=correction)
        fd.add_output(var)
        fd.add_output(mean)
        fd.add_output(fd.ops.var(x, dims=[0], correction=correction))
    x = rng.standard_normal((1, 300), dtype=np.float32)
    x[0, :3] = [np.inf, -np.inf, np.nan]
    plan = fd.plan([x])
    assert [s.scheduler for s in plan.segments] == [SchedulerKind.POINTWISE]
    for got, want in zip(run_plan(plan, [x]), reference.run(fd.fusion, [x]), strict=True):
        np.testing.assert_array_equal(got, want)


def test_an_extent_one_reduction_inside_a_real_one_keeps_the_real_ones_space(rng):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1])
        fd.add_output(fd.ops.sum(fd.ops.max(x, dims=[1]), dims=[1]))
    x = rng.standard_normal((40, 1, 70), dtype=np.float32)
    plan = fd.plan([x])
    assert [s.scheduler for s in plan.segments] == [SchedulerKind.REDUCTION]
    assert_plan_matches_reference(fd, [x])


def test_views_of_a_stride_ordered_output_read_its_layout(rng):
    """A slice of an output laid out in its own stride order is a view of that layout (it was
    computed as if the buffer were row-major: a wrong answer the fuzzer found), whichever of
    the two comes first; one value in two stride orders is stored in both."""
    for view_first in (False, True):
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1, -1, -1, -1], dtype=DataType.Half)
            t = fd.ops.add(x, 0.5)
            view = fd.ops.slice(t, [1, 0, 1, 29], [3, 5, 4, 32], [1, 1, 2, 1])
            if view_first:
                fd.add_output(view)
            fd.add_output(t, stride_order=[1, 2, 3, 0])
            if not view_first:
                fd.add_output(view)
            fd.add_output(t, stride_order=[0, 1, 2, 3])
        x = rng.standard_normal((4, 5, 5, 32)).astype(np.float16)
        plan = fd.plan([x])
        layouts = {
            o.position: o.view.strides
            for o in plan.outputs
            if fd.fusion.outputs[o.position].stride_order is not None
        }
        for position, strides in layouts.items():
            order = fd.fusion.outputs[position].stride_order
            assert strides == strides_in_order((4, 5, 5, 32), order)
        assert_plan_matches_reference(fd, [x])


def test_an_in_place_writer_splits_from_a_store_another_kernel_reads(rng):
    """One kernel stores T19 and writes T15 into T0 in place; another reads T19 and T0 (a cat of
    different shape): the writer is split, the reader runs between its halves (the fuzzer
    found the kernel order failing with a cycle)."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(
            shape=[-1, 1, -1], contiguity=[True, None, True], dtype=DataType.Double
        )
        t19 = fd.ops.neg(fd.ops.exp(t0))
        fd.add_output(t19)
        fd.add_output(fd.ops.cat([t19, t0, t19], dim=0))
        fd.add_output(fd.ops.mul(t0, 3.0), alias_input=t0)
    x = rng.standard_normal((64, 1, 31))
    plan = fd.plan([x])
    writer = next(k for k, seg in enumerate(plan.segments) if 0 in seg.stored_buffers)
    assert all(0 not in seg.read_buffers for seg in plan.segments[writer + 1 :])
    assert_plan_matches_reference(fd, [x])


def test_a_reshape_of_an_empty_view_is_empty():
    """A reshape of an empty slice into another empty shape (row-major strides of 0: the index
    arithmetic divided by zero)."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[9, 64, 2, 16])
        t1 = fd.ops.slice(t0, [2, 0, 1, 12], [5, 64, 1, 13], [1, 1, 1, 2])
        fd.add_output(fd.ops.reshape(t1, new_shape=[3, 64, 0]))
    x = np.zeros((9, 64, 2, 16), np.float32)
    plan = fd.plan([x])
    assert plan.outputs[0].view.shape == (3, 64, 0)
    assert_plan_matches_reference(fd, [x])


def empty_reductions_fusion() -> FusionDefinition:
    """Every reduction over an empty dim with outputs left: a sum, a product, a mean, a
    variance and a var_mean, and a pointwise output of the same (empty) space beside them."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1])
        fd.add_output(fd.ops.sum(x, dims=[1]))
        fd.add_output(fd.ops.prod(x, dims=[1], keepdim=True))
        fd.add_output(fd.ops.mean(x, dims=[0, 1]))
        fd.add_output(fd.ops.var(x, dims=[1], correction=1))
        var, mean = fd.ops.var_mean(x, dims=[1], correction=0)
        fd.add_output(fd.ops.add(var, mean))
        fd.add_output(
            fd.ops.div(x, fd.ops.broadcast_in_dim(fd.ops.sum(x, dims=[1]), [4, 0, 6], [0, 2]))
        )
    return fd


def test_a_reduction_over_an_empty_dim_is_its_value_of_nothing():
    """The output elements are there, the reduced elements are not: each output is the op's value
    of an empty set (0, 1, NaN), written by a pointwise kernel. (A kernel over the empty space
    is never launched, so a reduction scheduled there left its outputs unwritten: the GPU
    returned uninitialized memory.)"""
    fd = empty_reductions_fusion()
    x = np.zeros((4, 0, 6), np.float32)
    plan = fd.plan([x])
    assert all(s.scheduler is SchedulerKind.POINTWISE for s in plan.segments if s.numel)
    got = run_via_plan(fd.fusion, [x])
    np.testing.assert_array_equal(got[0], np.zeros((4, 6), np.float32))
    np.testing.assert_array_equal(got[1], np.ones((4, 1, 6), np.float32))
    for nan in got[2:5]:
        assert np.isnan(nan).all() and nan.size == 24 // (4 if nan is got[2] else 1)
    assert got[5].shape == (4, 0, 6)
    assert_plan_matches_reference(fd, [x])


@pytest.mark.parametrize("op", ["max", "min"])
def test_the_max_of_an_empty_dim_is_refused_by_name(op):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1])
        fd.add_output(getattr(fd.ops, op)(x, dims=[1]))
    with pytest.raises(ShapeError, match=rf"{op} T1: cannot reduce the empty dims \[1\]"):
        fd.plan([np.zeros((3, 0), np.float32)])
    # no output element: nothing to reduce, nothing refused
    assert fd.plan([np.zeros((0, 0), np.float32)]).outputs[0].view.shape == (0,)


def test_a_layernorm_whose_rows_an_h100_cannot_hold_nor_spread_is_a_kernel_a_pass(rng):
    """Three rows of 70000 floats (280 KB: more than a block's shared memory, 3 rows for 132
    SMs): var_mean's one pass (var and mean stored by one kernel), then the output reading
    them; the same numbers as the reference. Without a device: one kernel."""
    from fusion_zoo import ZOO, build

    from tunefuse.device_info import H100

    fd = build(ZOO["layernorm"], DataType.Float)
    x = rng.standard_normal((3, 70000)).astype(np.float32)
    w, b = (rng.standard_normal(70000).astype(np.float32) for _ in range(2))
    assert [s.scheduler for s in fd.plan([x, w, b]).segments] == [SchedulerKind.NORMALIZATION]
    plan = fd.plan([x, w, b], device=H100)
    first, rest = plan.segments
    assert first.scheduler is SchedulerKind.REDUCTION and len(first.stores) == 2
    assert rest.scheduler is SchedulerKind.POINTWISE
    assert "3 of them in 3 blocks keep 2% of 132 SMs busy" in str(plan)
    (got,) = run_plan(plan, [x, w, b])
    (want,) = reference.run(fd.fusion, [x, w, b])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_long_row_no_two_passes_read_is_streamed_and_split_across_the_gpu():
    """Issue 2664's second repro: a sum over 4M broadcast copies of a scalar beside outputs
    that read the row once. Nothing is read twice, so nothing is staged (a staged row of 0
    bytes took 64 threads: one block of them summed 4M floats, 2e-4 off on the H100); the sum
    is a reduction kernel split across blocks, the outputs a pointwise kernel."""
    from tunefuse.device_info import H100
    from tunefuse.schedulers import normalization, reduction

    n = 4194304
    fd = _issue_2664(2, n)
    host = issue_2664_inputs(2, n, np.random.default_rng(0))
    (whole, _) = fd.plan(host).segments
    p = normalization.default_params(whole, H100)
    assert not p.shared_row and not p.cache_row and p.threads_r >= 256
    first, second, _ = fd.plan(host, device=H100).segments
    assert first.scheduler is SchedulerKind.REDUCTION
    assert second.scheduler is SchedulerKind.POINTWISE
    assert reduction.default_params(first, H100).split > 1


def test_a_value_shaped_by_a_reductions_result_is_not_in_its_reduction_space():
    """An extent is known on the host: scatter's table of positions, shaped like the
    softmax it scatters into (its `size`s), is a pointwise kernel, not part of the
    softmax's rows (the fuzzer found it a normalization with no reduction, which the
    split policy could not cut)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        i = fd.define_tensor([-1, -1], dtype=DataType.Int)
        s = fd.define_tensor([-1, -1], dtype=DataType.Float)
        e = fd.ops.exp(fd.ops.sub(x, fd.ops.broadcast_in_dim(fd.ops.max(x, [1]), x.shape(), [0])))
        soft = fd.ops.div(e, fd.ops.broadcast_in_dim(fd.ops.sum(e, [1]), x.shape(), [0]))
        fd.add_output(fd.ops.scatter(soft, i, s, 0))
    rng = np.random.default_rng(0)
    xs = [
        rng.random((7, 64), np.float32),
        rng.integers(0, 7, (1, 64)),
        np.ones((1, 64), np.float32),
    ]
    table = next(s for s in fd.plan(xs).segments if s.why.startswith("gather"))
    assert table.scheduler is SchedulerKind.POINTWISE and table.reduce_dims == ()
    assert_plan_matches_reference(fd, xs)


def _layernorm_plan(shape, device):  # noqa: ANN001, ANN202
    from fusion_zoo import ZOO, build

    from tunefuse.planning.plan import make_plan

    fd = build(ZOO["layernorm"], DataType.Float)
    base = np.zeros(1, np.float32)  # views of the shape: planning reads no data
    ranks = [fd.fusion.values[v].rank for v in fd.fusion.inputs]  # x [rows, cols], w and b [cols]
    inputs = [np.lib.stride_tricks.as_strided(base, shape[2 - r :], (0,) * r) for r in ranks]
    return make_plan(fd.fusion, inputs, device=device)


@pytest.mark.parametrize(
    "shape,again", [((64, 65536), True), ((16, 262144), True), ((4, 1 << 24), False)]
)
def test_a_kernel_whose_rows_the_next_kernel_reads_again_does_not_load_them_evict_first(
    shape, again
):
    """A layernorm of rows too long for one kernel: its statistics kernel reads the rows, and
    the normalizing kernel reads them again. Where the rows fit in half the L2 (16 MB here),
    the first kernel marks them read again and its default loads them with the default cache
    policy, so that the second finds them in L2; 256 MB of rows do not fit, and keep
    evict-first. Without a device nothing is marked."""
    from tunefuse.device_info import A100, H100
    from tunefuse.schedulers import scheduler_for

    for device in (H100, A100):
        plan = _layernorm_plan(shape, device)
        if device is H100 and shape == (64, 65536):
            # An H100 holds such a row over a cluster of blocks: one kernel, read once.
            (only,) = plan.segments
            assert scheduler_for(only.scheduler).default_params(only, device).cluster > 1
            continue
        first, *rest = plan.segments
        assert rest and all(st.reduced for st in first.stores)
        x = next(b.id for b in plan.buffers if b.kind is BufferKind.INPUT and len(b.shape) == 2)
        assert first.read_again == (frozenset({x}) if again else frozenset())
        assert all(x not in s.read_again for s in rest)  # nothing after them reads x
        params = scheduler_for(first.scheduler).default_params(first, device)
        assert params.evict_first is not again
    assert not any(s.read_again for s in _layernorm_plan(shape, None).segments)


@pytest.mark.parametrize(
    "n,index_type",
    [(1 << 30, "int32"), ((1 << 31) - (1 << 21), "int32"), ((1 << 31) - 4096, "int64")],
)
def test_32_bit_indices_leave_room_for_a_loop_that_overshoots_the_last_element(n, index_type):
    """A thread's loop index passes the row's end by up to a trip before its bound test
    stops it: a row of 2**31 - 4096 elements would wrap a 32-bit index there."""
    from fusion_zoo import ZOO, build

    from tunefuse.planning.plan import make_plan

    fd = build(ZOO["row_sum"], DataType.Float)
    x = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (1, n), (0, 0))
    (seg,) = make_plan(fd.fusion, [x]).segments
    assert seg.index_type == index_type


@pytest.mark.parametrize("device_name", ["sm_80", "sm_90"])
@pytest.mark.parametrize(
    "define,shape",
    [
        (fusion_zoo.softmax_over(3, 1), (0, 300, 3)),  # no slabs
        (fusion_zoo.softmax_over(3, 1), (5, 300, 0)),  # slabs of no outputs
        (fusion_zoo.softmax_over(3, 1), (0, 7, 0)),
        (fusion_zoo.column_layernorm, (300, 0)),
        (fusion_zoo.column_layernorm, (0, 0)),
        (fusion_zoo.softmax_over(2, 1), (0, 300)),
        (fusion_zoo.layernorm, (0, 5000)),
    ],
)
def test_normalizations_with_no_output_rows_plan_and_are_empty(define, shape, device_name):
    """A normalization whose rows number zero (an empty dim not reduced) plans on every device
    (its layout's arithmetic divided by the zero outputs and the zero-length runs: softmax
    over dim 1 of [0, 300, 3] raised ZeroDivisionError), launches nothing and returns empty
    outputs."""
    from tunefuse.device_info import PROFILES
    from tunefuse.schedulers import scheduler_for

    device = PROFILES[device_name]
    with FusionDefinition() as fd:
        define(fd, DataType.Float)
    inputs = [
        np.zeros(shape if fd.fusion.values[v].rank == len(shape) else shape[1:], np.float32)
        for v in fd.fusion.inputs
    ]
    plan = fd.plan(inputs, device=device)
    for seg in plan.segments:
        sched = scheduler_for(seg.scheduler)
        assert sched.is_valid(seg, device, sched.default_params(seg, device)) is None
    assert all(o.size == 0 for o in run_via_plan(fd.fusion, inputs))
    assert_plan_matches_reference(fd, inputs)


REDUCING = [
    *(fusion_zoo.ZOO[name] for name in ("softmax", "layernorm", "rmsnorm", "logsumexp")),
    *(fusion_zoo.ZOO[name] for name in ("row_sum", "col_sum")),
    fusion_zoo.column_layernorm,
    fusion_zoo.softmax_over(3, 0),
    fusion_zoo.softmax_over(3, 1),
    fusion_zoo.softmax_over(3, 2),
    fusion_zoo.logsumexp_over(0),
    functools.partial(middle_reduction, op="sum"),
    fusion_zoo.column_var_mean,
]


@given(
    define=hyp.sampled_from(REDUCING),
    dims=hyp.lists(hyp.sampled_from([0, 1, 2, 3, 5, 31, 33, 300, 5000]), min_size=3, max_size=3),
    dtype=hyp.sampled_from([DataType.Float, DataType.BFloat16]),
    device_name=hyp.sampled_from(["sm_80", "sm_90"]),
)
@settings(max_examples=300, deadline=None)
def test_reductions_and_normalizations_plan_every_shape_with_empty_or_tiny_dims(
    define, dims, dtype, device_name
):
    """Every reducing fusion of the zoo, over shapes of empty, tiny and odd extents, plans on
    every device with valid defaults, or is refused by name (the max of an empty dim): no
    arithmetic error from a layout's sizes."""
    from tunefuse.device_info import PROFILES
    from tunefuse.schedulers import scheduler_for

    device = PROFILES[device_name]
    with FusionDefinition() as fd:
        define(fd, dtype)
    rank = fd.fusion.values[fd.fusion.inputs[0]].rank
    shape = tuple(dims[:rank])
    inputs = [view(shape[rank - fd.fusion.values[v].rank :], dtype) for v in fd.fusion.inputs]
    try:
        plan = fd.plan(inputs, device=device)
    except ShapeError as e:
        assert "cannot reduce the empty dims" in str(e)
        return
    for seg in plan.segments:
        sched = scheduler_for(seg.scheduler)
        assert sched.is_valid(seg, device, sched.default_params(seg, device)) is None, seg
