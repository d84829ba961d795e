"""planning/reductions.py: which reductions one accumulator computes. A max and the sum of
exp(x - max) over the same x, all in one floating type, are one (MAX_EXP_SUM) where asked
for; anything else that looks like them is not. Then what that changes downstream: the
scheduler a segment gets, the first pass a split plan materializes, the kernel's passes."""

import numpy as np
import pytest
from fusion_zoo import ZOO, build, inputs_for, logsumexp_over
from fuzz import fuzz_case

from tunefuse import DataType, FusionDefinition
from tunefuse.codegen import generate
from tunefuse.device_info import H100
from tunefuse.ir.ops import OpKind
from tunefuse.planning.kernel_ir import EReduce, SchedulerKind
from tunefuse.planning.reductions import (
    MAX_EXP_SUM,
    contains_reduce,
    independent_reductions,
    post_order,
    reduction_groups,
)
from tunefuse.schedulers import scheduler_for


def roots_of(fd: FusionDefinition, rows: int = 64, cols: int = 4096):  # noqa: ANN201
    (seg,) = fd.plan(inputs_for(fd, rows, cols, np.random.default_rng(0))).segments
    return seg, [s.expr for s in seg.stores]


def define(body):  # noqa: ANN001, ANN201
    """A fusion of one [-1, -1] input of `dtype` whose output is body(fd, x)."""

    def make(dtype: DataType) -> FusionDefinition:
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
            fd.add_output(body(fd, x))
        return fd

    return make


def exp_sum_of(fd, x, m):  # noqa: ANN001, ANN201
    return fd.ops.sum(fd.ops.exp(fd.ops.sub(x, m)), dims=[1], keepdim=True)


@pytest.mark.parametrize("dtype", [DataType.Float, DataType.BFloat16, DataType.Double])
@pytest.mark.parametrize("name", ["softmax", "logsumexp"])
def test_softmax_and_logsumexp_pair_their_max_and_sum_only_when_asked(name, dtype):
    seg, roots = roots_of(build(ZOO[name], dtype))
    two = reduction_groups(roots, online=False)
    assert [g.family for g in two] == ["max", "sum"]
    (one,) = reduction_groups(roots, online=True)
    assert one.family == MAX_EXP_SUM and one.operand == two[0].operand
    assert [r.op for r in one.reduces] == [OpKind.MAX, OpKind.SUM]
    assert independent_reductions(roots)
    # logsumexp stores reduced values only: one pass, the reduction scheduler's.
    want = SchedulerKind.REDUCTION if name == "logsumexp" else SchedulerKind.NORMALIZATION
    assert seg.scheduler is want


UNPAIRED = {
    # exp(x - max) rounded to bf16 before the sum: the running form would not round it.
    "bf16 arithmetic": (
        define(lambda fd, x: exp_sum_of(fd, x, fd.ops.max(x, dims=[1], keepdim=True))),
        DataType.BFloat16,
    ),
    # the max of another operand
    "max of 2x": (
        define(
            lambda fd, x: exp_sum_of(fd, x, fd.ops.max(fd.ops.mul(x, 2.0), dims=[1], keepdim=True))
        ),
        DataType.Float,
    ),
    # exp(max - x)
    "reversed": (
        define(
            lambda fd, x: fd.ops.sum(
                fd.ops.exp(fd.ops.sub(fd.ops.max(x, dims=[1], keepdim=True), x)),
                dims=[1],
                keepdim=True,
            )
        ),
        DataType.Float,
    ),
    # 2 * exp(x - max): not the sum of exp(x - max)
    "scaled": (
        define(
            lambda fd, x: fd.ops.sum(
                fd.ops.mul(fd.ops.exp(fd.ops.sub(x, fd.ops.max(x, dims=[1], keepdim=True))), 2.0),
                dims=[1],
                keepdim=True,
            )
        ),
        DataType.Float,
    ),
    # x itself reads a reduction (x - mean): the max is of a second pass's value
    "nested": (
        define(
            lambda fd, x: (lambda c: exp_sum_of(fd, c, fd.ops.max(c, dims=[1], keepdim=True)))(
                fd.ops.sub(x, fd.ops.mean(x, dims=[1], keepdim=True))
            )
        ),
        DataType.Float,
    ),
}


@pytest.mark.parametrize("case", sorted(UNPAIRED))
def test_what_only_looks_like_a_max_and_its_exp_sum_is_not_paired(case):
    make, dtype = UNPAIRED[case]
    seg, roots = roots_of(make(dtype))
    assert MAX_EXP_SUM not in [g.family for g in reduction_groups(roots, online=True)]
    assert not independent_reductions(roots)
    assert seg.scheduler is SchedulerKind.NORMALIZATION  # the sum needs the max first


def test_groups_cover_every_reduction_once_and_come_after_what_they_read():
    """On 400 fuzzed fusions (softmax and logsumexp among their steps), with and without
    pairing: every reduction in exactly one group; a group's operand reads only reductions of
    groups before it; a pair's x reads no reduction and its sums are of exp."""
    paired = 0
    for seed in range(400):
        case = fuzz_case(seed)
        for seg in case.fd.plan(case.inputs).segments:
            roots = [s.expr for s in seg.stores]
            every = {id(e) for e in post_order(roots) if isinstance(e, EReduce)}
            for online in (False, True):
                groups = reduction_groups(roots, online)
                assert sorted(id(r) for g in groups for r in g.reduces) == sorted(every)
                before: set = set()
                for g in groups:
                    read = {id(e) for e in post_order([g.operand]) if isinstance(e, EReduce)}
                    assert read <= before, seed
                    before |= {id(r) for r in g.reduces}
                    if g.family == MAX_EXP_SUM:
                        paired += online
                        assert not contains_reduce(g.operand)
                        sums = [r for r in g.reduces if r.op is not OpKind.MAX]
                        assert sums and all(r.operand.op is OpKind.EXP for r in sums)
    assert paired >= 3  # the corpus reaches the pair


def test_a_split_plan_materializes_the_max_and_the_sum_as_one_kernel():
    """softmax of two rows of 2**20 on an H100: the first pass (max and sum, one accumulator)
    is a reduction kernel split across blocks, storing both; then the outputs."""
    fd = build(ZOO["softmax"], DataType.Float)
    plan = fd.plan(inputs_for(fd, 2, 1 << 20, np.random.default_rng(0)), device=H100)
    first, rest = plan.segments
    assert (first.scheduler, rest.scheduler) == (SchedulerKind.REDUCTION, SchedulerKind.POINTWISE)
    assert [s.expr.op for s in first.stores] in ([OpKind.MAX, OpKind.SUM], [OpKind.SUM, OpKind.MAX])
    params = scheduler_for(first.scheduler).default_params(first, H100)
    assert params.split > 1
    src = generate(first, params, H100, {b.id: b.dtype for b in plan.buffers})
    body = src.source.split("end of preamble", 1)[1]
    assert "tf_part0_max" in body and "tf_part0_sum" in body
    assert body.count("tf_max_exp_sum_add") == 1  # one pass (a chunk of 4 floats a call)


@pytest.mark.parametrize(
    "dtype,rows,cols,kind,threads",
    [
        (DataType.Float, 16384, 4096, SchedulerKind.REDUCTION, 128),  # 8 vectors a thread
        (DataType.Float, 65536, 1024, SchedulerKind.REDUCTION, 32),
        (DataType.BFloat16, 16384, 8192, SchedulerKind.REDUCTION, 128),
        (DataType.Float, 1 << 22, 16, SchedulerKind.NORMALIZATION, None),  # 4 vectors a row
        (DataType.BFloat16, 1 << 24, 8, SchedulerKind.NORMALIZATION, None),
        (DataType.BFloat16, 1 << 20, 264, SchedulerKind.REDUCTION, 8),  # 33 vectors of 8
    ],
)
def test_logsumexp_is_one_pass_unless_its_rows_are_a_few_vectors(dtype, rows, cols, kind, threads):
    """Rows of at most 32 vectors sit in a few lanes' registers: two passes over them
    (normalization.keeps_two_passes); longer rows are one pass, 8 vectors a thread."""
    fd = build(ZOO["logsumexp"], dtype)
    base = np.zeros(1, dtype.numpy)  # a view of the shape: planning reads no data
    x = np.lib.stride_tricks.as_strided(base, (rows, cols), (cols * base.itemsize, base.itemsize))
    (seg,) = fd.plan([x], device=H100).segments
    assert seg.scheduler is kind
    params = scheduler_for(seg.scheduler).default_params(seg, H100)
    if threads is not None:
        assert params.threads_r == threads
    src = generate(seg, params, H100, {0: dtype, 1: DataType.Float})
    body = src.source.split("end of preamble", 1)[1]
    assert ("tf_max_exp_sum" in body) is (kind is SchedulerKind.REDUCTION)


@pytest.mark.parametrize(
    "dtype,rows,cols,kind",
    [
        (DataType.Float, 16384, 1001, SchedulerKind.NORMALIZATION),  # odd: no vector
        (DataType.BFloat16, 20000, 777, SchedulerKind.NORMALIZATION),
        (DataType.Float, 4000, 3001, SchedulerKind.NORMALIZATION),
        (DataType.Float, 2500, 7777, SchedulerKind.REDUCTION),  # longer than 4096
        (DataType.Float, 16384, 1024, SchedulerKind.REDUCTION),  # a vector fits
        (DataType.BFloat16, 4096, 4096, SchedulerKind.REDUCTION),
        (DataType.Float, 65536, 255, SchedulerKind.REDUCTION),  # 256 or fewer: not measured
    ],
)
def test_a_var_mean_of_short_odd_rows_is_a_normalization(dtype, rows, cols, kind):
    """var_mean over rows no vector fits, of 257 to 4096 elements, holds each row in
    registers and takes its mean, then its squared deviations (two_pass_variance), not a
    Welford merge every 2 scalar loads (normalization.keeps_two_passes)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        var, mean = fd.ops.var_mean(fd.ops.cast(x, DataType.Float), dims=[1], correction=0)
        fd.add_output(var)
        fd.add_output(mean)
    base = np.zeros(1, dtype.numpy)
    x = np.lib.stride_tricks.as_strided(base, (rows, cols), (cols * base.itemsize, base.itemsize))
    (seg,) = fd.plan([x], device=H100).segments
    assert seg.scheduler is kind
    params = scheduler_for(seg.scheduler).default_params(seg, H100)
    if kind is SchedulerKind.NORMALIZATION:
        assert params.cache_row
        src = generate(seg, params, H100, {0: dtype, 1: DataType.Float, 2: DataType.Float})
        assert "const float mean" in src.source.split("end of preamble", 1)[1]


def _exp_output_too(fd, x):  # noqa: ANN001, ANN201 - exp(x - max) written as well as summed
    m = fd.ops.max(x, dims=[1], keepdim=True)
    e = fd.ops.exp(fd.ops.sub(x, m))
    fd.add_output(e)
    return fd.ops.sum(e, dims=[1], keepdim=True)


@pytest.mark.parametrize(
    "make,fast",
    [
        (ZOO["logsumexp"], True),  # the sum's exps read by nothing else
        (
            define(
                lambda fd, x: fd.ops.log(exp_sum_of(fd, x, fd.ops.max(x, dims=[1], keepdim=True)))
            ),
            True,
        ),
        (ZOO["softmax"], False),  # the outputs divide the same exps: they keep tf_exp
        (define(_exp_output_too), False),
        (define(lambda fd, x: fd.ops.sum(fd.ops.exp(x), dims=[1], keepdim=True)), False),  # no max
        (define(lambda fd, x: exp_sum_of(fd, x, fd.ops.min(x, dims=[1], keepdim=True))), False),
    ],
)
def test_the_two_pass_form_spells_a_max_exp_sums_terms_as_the_one_pass_form(make, fast):
    """A row held in registers takes logsumexp's max and its sum of exp(x - max) in two passes;
    the sum's terms are the one-pass form's (tf_exp_sum_term), so a row's sum does not depend
    on which form the params chose. An exp that anything else reads keeps tf_exp."""
    fd = build(make, DataType.Float) if make in ZOO.values() else make(DataType.Float)
    base = np.zeros(1, np.float32)
    x = np.lib.stride_tricks.as_strided(base, (1 << 22, 16), (64, 4))
    (seg,) = fd.plan([x], device=H100).segments
    assert (seg.scheduler is SchedulerKind.NORMALIZATION) or not fast  # rows in registers
    params = scheduler_for(seg.scheduler).default_params(seg, H100)
    src = generate(seg, params, H100, {b: DataType.Float for b in range(4)})
    body = src.source.split("end of preamble", 1)[1]
    assert ("tf_exp_sum_term(" in body) is fast
    assert ("tf_exp(" in body) is not fast


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_layout_of_the_one_pass_pair_compiles(arch):
    """The GPU tests' layouts of MAX_EXP_SUM, compiled by NVRTC without a GPU: rows unsplit and
    split (partials of (max, sum)), columns (one output a lane, and a vector of consecutive
    outputs a lane where the outputs fill the GPU), fp64, and a softmax row read again each
    pass (a normalization without cache_row or shared_row)."""
    from tunefuse.compiler import compile_kernel
    from tunefuse.device_info import A100
    from tunefuse.schedulers import with_values

    device = {"sm_80": A100, "sm_90": H100}[arch]
    cases = [
        (build(logsumexp_over(1), DataType.Float), (300, 5000), {}),
        (build(logsumexp_over(1), DataType.BFloat16), (9, 300001), {}),
        (build(logsumexp_over(1), DataType.Float), (64, 8192), {"split": 3}),
        (build(logsumexp_over(1), DataType.Double), (40, 777), {}),
        (build(logsumexp_over(0), DataType.Float), (3000, 256), {}),
        (build(logsumexp_over(0), DataType.BFloat16), (100003, 8), {}),
        (build(logsumexp_over(0), DataType.Float), (16, 262144), {}),  # outputs enough for vectors
        (build(ZOO["softmax"], DataType.Float), (396, 70000), {}),
        (build(ZOO["softmax"], DataType.BFloat16), (8, 2**20), {}),
    ]
    seen = set()
    for fd, (rows, cols), changes in cases:
        base = np.zeros(1, fd.fusion.values[fd.fusion.inputs[0]].dtype.numpy)
        x = np.lib.stride_tricks.as_strided(
            base, (rows, cols), (cols * base.itemsize, base.itemsize)
        )
        plan = fd.plan([x], device=device)
        for seg in plan.segments:
            sched = scheduler_for(seg.scheduler)
            params = sched.default_params(seg, device)
            if changes and seg.scheduler is SchedulerKind.REDUCTION:
                params = with_values(params, {**changes, "vector": 1})
            assert sched.is_valid(seg, device, params) is None
            ks = generate(seg, params, device, {b.id: b.dtype for b in plan.buffers})
            body = ks.source.split("end of preamble", 1)[1]
            seen |= {k for k in ("tf_max_exp_sum_add", "tf_part0_max", "acc0_v[") if k in body}
            assert compile_kernel(ks.source, ks.name, arch).cubin
    # the one pass, split partials, and vectors of outputs ([16, 262144] over dim 0)
    assert seen == {"tf_max_exp_sum_add", "tf_part0_max", "acc0_v["}


def test_a_printed_plan_names_each_kernels_accumulators():
    """`print(fd.plan(...))` and `tunefuse explain` show which reductions share a pass."""
    lse = build(ZOO["logsumexp"], DataType.Float)
    soft = build(ZOO["softmax"], DataType.Float)
    inputs = inputs_for(lse, 64, 4096, np.random.default_rng(0))
    assert "accumulators: max_exp_sum (T2, T5)" in str(lse.plan(inputs))
    text = str(soft.plan(inputs))
    assert "accumulators: max (T2); sum (T5) (max and sum in one pass where the row is read" in text
