"""The tuner's local search (tuning.neighbours): the points one step from a params value
that it measures before its sampler's (no GPU)."""

import numpy as np
from fusion_zoo import ZOO, build, inputs_for
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tunefuse import DataType, FusionDefinition
from tunefuse.codegen import code_identity, generate
from tunefuse.device_info import H100
from tunefuse.schedulers import params_to_dict, scheduler_for, value_of
from tunefuse.schedulers.reduction import resident_blocks
from tunefuse.tuning.neighbours import _step, neighbours


def changed(a, b) -> set:  # noqa: ANN001
    """The fields whose values differ between params a and b."""
    da, db = params_to_dict(a), params_to_dict(b)
    return {k for k in da if da[k] != db[k]}


def middle_sum_segment(outer: int, reduced: int, inner: int):  # noqa: ANN201
    """The sum's segment and its plan's buffer dtypes."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(x, dims=[1]))
    base = np.zeros(1, np.float32)  # a view of the shape: planning reads no data
    x = np.lib.stride_tricks.as_strided(base, (outer, reduced, inner), (0, 0, 0))
    plan = fd.plan([x], device=H100)
    return plan.segments[0], {b.id: b.dtype for b in plan.buffers}


def test_steps_walk_sorted_numbers_and_flip_bools():
    assert _step([1, 2, 4, 8], 2, -1) == 1 and _step([1, 2, 4, 8], 2, 1) == 4
    assert _step([8, 1, 4, 2], 8, 1) is None and _step([1, 2], 1, -1) is None
    assert _step([1, 2, 4], 3, 1) is None  # not a choice: no step from it
    assert _step([True, False], True, 1) is False and _step([True, False], True, -1) is None


@given(
    name=st.sampled_from(sorted(ZOO)),
    dtype=st.sampled_from([DataType.Float, DataType.BFloat16]),
    rows=st.integers(1, 5000),
    cols=st.integers(1, 5000),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(name="transpose2d", dtype=DataType.Float, rows=2, cols=2)  # its own flags emit nothing
def test_neighbours_are_valid_distinct_kernels_one_move_from_the_default(name, dtype, rows, cols):
    """Every neighbour is valid, in the search space, a kernel other than the default's and
    every other neighbour's, and one move away: a single parameter, or a pair the scheduler
    trades. The flags come first, each flipped alone."""
    fd = build(ZOO[name], dtype)
    plan = fd.plan(inputs_for(fd, rows, cols, np.random.default_rng(0)), device=H100)
    dtypes = {b.id: b.dtype for b in plan.buffers}
    for seg in plan.segments:
        sched = scheduler_for(seg.scheduler)
        default = sched.default_params(seg, H100)
        space = sched.search_space(seg, H100)
        got = neighbours(seg, H100, default, space, dtypes, sched.TRADES)
        codes = {code_identity(generate(seg, p, H100, dtypes)) for p in got}
        assert len(codes) == len(got)  # each a kernel of its own, by its generated code
        assert code_identity(generate(seg, default, H100, dtypes)) not in codes
        pairs = [set(t) for t in sched.TRADES]
        for p in got:
            assert sched.is_valid(seg, H100, p) is None, p
            for n, dist in space.items():
                assert value_of(p, n) in dist.choices, (n, p)
            moved = {n for n in space if value_of(p, n) != value_of(default, n)}
            assert len(moved) == 1 or moved in pairs, (moved, p)
        flags = {n for n in space if n.rsplit(".", 1)[-1] in ("evict_first", "static_shape")}
        moves = [{n for n in space if value_of(p, n) != value_of(default, n)} for p in got]
        flipped = [len(m) == 1 and m <= flags for m in moves]
        assert flipped == sorted(flipped, reverse=True)  # the flags first (a kernel of its own)


def test_a_strided_sum_reaches_its_block_reshaped_and_split():
    """The sum over the middle dim of fp32 [64, 512, 1024] (issue 19's fourth row): its
    neighbours hold the block of the same threads reshaped both ways (the tuned winner on
    H100 was 16 x 32 threads for the default's 8 x 64), and a split of its 512 rows, which
    the space refused before a strided share could be under 512 elements."""
    seg, dtypes = middle_sum_segment(64, 512, 1024)
    sched = scheduler_for(seg.scheduler)
    default = sched.default_params(seg, H100)
    got = neighbours(seg, H100, default, sched.search_space(seg, H100), dtypes, sched.TRADES)
    shapes = {
        (p.threads_r, p.rows_per_block)
        for p in got
        if changed(p, default) == {"threads_r", "rows_per_block"}
    }
    t, r = default.threads_r, default.rows_per_block
    assert shapes == {(2 * t, r // 2), (t // 2, 2 * r)}
    assert any(p.split == 2 for p in got)
    assert 16 in sched.search_space(seg, H100)["split"].choices


def test_a_launch_bound_past_the_blocks_threads_allow_is_not_a_neighbour():
    """The middle sum's default asks the compiler to fit the 4 blocks of 512 threads an SM
    holds (min_blocks 4). A step up, 8, asks for more than the threads allow and gives the
    same kernel: it is not measured again. A step down, 2, is a kernel of its own."""
    seg, dtypes = middle_sum_segment(64, 512, 1024)
    sched = scheduler_for(seg.scheduler)
    default = sched.default_params(seg, H100)
    assert default.min_blocks == 4 == resident_blocks(default, H100)
    space = sched.search_space(seg, H100)
    assert 8 in space["min_blocks"].choices
    got = neighbours(seg, H100, default, space, dtypes, sched.TRADES)
    assert {p.min_blocks for p in got if changed(p, default) == {"min_blocks"}} == {2}
