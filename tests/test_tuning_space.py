"""Search spaces: every point the tuner would compile is valid and compiles (no GPU)."""

import random

import numpy as np
from fusion_zoo import ZOO, build, inputs_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tunefuse import DataType
from tunefuse.codegen import generate
from tunefuse.compiler import compile_kernel
from tunefuse.device_info import H100
from tunefuse.schedulers import (
    params_from_dict,
    params_to_dict,
    scheduler_for,
    value_of,
    with_values,
)


@given(
    name=st.sampled_from(sorted(ZOO)),
    dtype=st.sampled_from([DataType.Float, DataType.Half, DataType.BFloat16]),
    rows=st.integers(1, 300),
    cols=st.integers(1, 700),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_sampled_points_are_valid_or_refused_and_valid_ones_compile(name, dtype, rows, cols, seed):
    fd = build(ZOO[name], dtype)
    plan = fd.plan(inputs_for(fd, rows, cols, np.random.default_rng(0)))
    rnd = random.Random(seed)
    dtypes = {b.id: b.dtype for b in plan.buffers}
    for seg in plan.segments:
        sched = scheduler_for(seg.scheduler)
        default = sched.default_params(seg, H100)
        assert sched.is_valid(seg, H100, default) is None  # the default is always valid
        space = sched.search_space(seg, H100)
        for _ in range(3):
            point = {n: rnd.choice(d.choices) for n, d in space.items()}
            params = with_values(default, point)
            if sched.is_valid(seg, H100, params) is not None:
                continue  # the tuner never compiles these
            ks = generate(seg, params, H100, dtypes)
            assert compile_kernel(ks.source, ks.name, "sm_90").cubin
        # Params survive the cache's JSON.
        assert params_from_dict(seg.scheduler, params_to_dict(default)) == default


@given(
    name=st.sampled_from(sorted(ZOO)),
    dtype=st.sampled_from([DataType.Float, DataType.BFloat16]),
    rows_log=st.integers(0, 22),
    cols_log=st.integers(0, 22),
    device=st.sampled_from(["sm_80", "sm_90"]),
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_default_is_a_point_of_its_search_space(name, dtype, rows_log, cols_log, device):
    """The tuner's first trial is the default: each of its values is one of its space's
    choices, also where the heuristic computes it from the shape (256 outputs a block, a
    split of 3, 24 elements a thread), or the trial would drop it and sample another."""
    from tunefuse.device_info import PROFILES

    rows, cols = 1 << rows_log, 1 << max(0, min(cols_log, 24 - rows_log))
    fd = build(ZOO[name], dtype)
    plan = fd.plan(inputs_for(fd, rows, cols, np.random.default_rng(0)))
    for seg in plan.segments:
        sched = scheduler_for(seg.scheduler)
        default = sched.default_params(seg, PROFILES[device])
        space = sched.search_space(seg, PROFILES[device])
        for n, dist in space.items():
            assert value_of(default, n) in dist.choices, (n, value_of(default, n), dist.choices)
            numbers = [c for c in dist.choices if type(c) is int]
            assert numbers == sorted(numbers), n


def test_a_computed_default_joins_its_space_and_the_space_keeps_its_choices():
    """A column sum of 4 x 2**20 bf16 lays out 256 outputs a block; [512, 4096] splits 2
    where the space's powers of two stop at 1."""
    for shape, field in [((4, 1 << 20), "rows_per_block"), ((512, 4096), "split")]:
        fd = build(ZOO["col_sum"], DataType.BFloat16)
        (seg,) = fd.plan(inputs_for(fd, *shape, np.random.default_rng(0))).segments
        sched = scheduler_for(seg.scheduler)
        value = value_of(sched.default_params(seg, H100), field)
        choices = sched.search_space(seg, H100)[field].choices
        assert value in choices and 1 in choices


def test_candidates_are_compared_at_the_output_dtypes_rounding():
    """Another summation order moves a bfloat16 result by an ulp (0.8%): that is agreement;
    a wrong kernel's 10% is not. float32 is held to 1e-3, integers exactly."""
    import ml_dtypes
    import numpy as np

    from tunefuse.tuning.measure import outputs_agree

    want = np.linspace(0.5, 4.0, 64).astype(ml_dtypes.bfloat16)
    one_ulp = (want.astype(np.float32) * np.float32(1 + 2**-8)).astype(ml_dtypes.bfloat16)
    assert (one_ulp != want).any() and outputs_agree(one_ulp, want)
    assert not outputs_agree((want.astype(np.float32) * 1.1).astype(ml_dtypes.bfloat16), want)
    floats = np.linspace(0.5, 4.0, 64, dtype=np.float32)
    assert outputs_agree(floats * np.float32(1 + 1e-5), floats)
    assert not outputs_agree(floats * np.float32(1.01), floats)
    assert not outputs_agree(np.arange(4) + 1, np.arange(4)) and outputs_agree(
        np.arange(4), np.arange(4)
    )
    assert not outputs_agree(floats[:8], floats)


def test_a_transpose_with_nothing_to_tile_is_tuned_as_its_pointwise_kernel():
    """The seed's transpose with views shares its innermost dim between reads and writes: it
    runs as a pointwise kernel, and the tuner searches that kernel's space (it used to search
    tile shapes that were all invalid, and tuned nothing)."""
    from test_frontend import ROOT

    from tunefuse.fusion_file import load_fusion_file

    seeds = {c.name: c for c in load_fusion_file(ROOT / "examples" / "seed_fusions.py")}
    plan = seeds["transpose_with_views"].build().plan([np.zeros((768, 128, 64), np.float32)])
    (seg,) = plan.segments
    sched = scheduler_for(seg.scheduler)
    default = sched.default_params(seg, H100)
    assert default.tile == 0
    space = sched.search_space(seg, H100)
    assert space and all(name.startswith("pointwise.") for name in space)
    assert all(value_of(default, n) in space[n].choices for n in space)  # trial 0 is the default
    dtypes = {b.id: b.dtype for b in plan.buffers}
    compiled = set()
    for block in space["pointwise.block_size"].choices:
        params = with_values(default, {"pointwise.block_size": block, "pointwise.unroll": 2})
        assert (
            params.tile == 0
            and params.pointwise.block_size == block
            and params.pointwise.unroll == 2
        )
        assert sched.is_valid(seg, H100, params) is None
        ks = generate(seg, params, H100, dtypes)
        compiled.add(compile_kernel(ks.source, ks.name, "sm_90").cubin)
    assert len(compiled) == len(space["pointwise.block_size"].choices)


def test_loads_are_evict_first_by_default_only_where_the_kernel_writes_little():
    """`evict_first` is a tunable flag; its default follows what was measured (a reduction
    reads much and writes little: evict-first; a full-size output: the default policy), and
    the flag alone decides whether the kernel streams its loads."""
    expected = {
        "row_sum": True,
        "col_sum": True,
        "bias_gelu": False,
        "softmax": False,
        "layernorm": False,
        "rmsnorm": False,
        "transpose2d": False,
    }
    for name, evict_first in expected.items():
        fd = build(ZOO[name], DataType.Float)
        plan = fd.plan(inputs_for(fd, 256, 512, np.random.default_rng(0)))
        dtypes = {b.id: b.dtype for b in plan.buffers}
        (seg,) = plan.segments
        sched = scheduler_for(seg.scheduler)
        default = sched.default_params(seg, H100)
        assert default.evict_first is evict_first, name
        assert "evict_first" in sched.search_space(seg, H100)
        for flag in (True, False):
            source = generate(seg, with_values(default, {"evict_first": flag}), H100, dtypes).source
            body = source.split("end of preamble", 1)[1]
            assert ("tf_ld_stream(" in body) is flag, (name, flag)
        why = sched.is_valid(seg, H100, with_values(default, {"evict_first": 1}))
        assert why is not None and "evict_first" in why


def static_shape_params(seg, params):  # noqa: ANN001, ANN201
    """`params` with static_shape set on the kernel that is emitted (a transpose with nothing
    to tile runs its pointwise params)."""
    if seg.scheduler.value == "transpose" and params.tile == 0:
        return with_values(params, {"pointwise.static_shape": True})
    return with_values(params, {"static_shape": True})


def test_static_shape_declares_the_index_arguments_as_constants():
    """`static_shape` (tunable, off by default) makes sizes, strides and offsets constants of
    the kernel: same launch arguments, a name and a binary per shape; without it one binary
    serves every shape of the kernel_key."""
    from tunefuse.runtime.launch_plan import kernel_launch

    for name in sorted(ZOO):
        sources = {}
        default = None
        for rows, cols in ((256, 512), (96, 512)):
            fd = build(ZOO[name], DataType.Float)
            plan = fd.plan(inputs_for(fd, rows, cols, np.random.default_rng(0)))
            dtypes = {b.id: b.dtype for b in plan.buffers}
            (seg,) = plan.segments
            sched = scheduler_for(seg.scheduler)
            default = default or sched.default_params(seg, H100)  # the same params for both shapes
            assert "static_shape" in str(sched.search_space(seg, H100)), name
            static = static_shape_params(seg, default)
            assert sched.is_valid(seg, H100, static) is None
            plain_ks, static_ks = (
                generate(seg, default, H100, dtypes),
                generate(seg, static, H100, dtypes),
            )
            assert "constexpr" not in plain_ks.source.split("end of preamble", 1)[1]
            assert f"constexpr int E0 = {seg.extents[0]};" in static_ks.source, name
            assert (
                kernel_launch(seg, plain_ks, default, "default", "k").static_args
                == kernel_launch(seg, static_ks, static, "default", "k").static_args
            )
            for arch in ("sm_80", "sm_90"):
                assert compile_kernel(static_ks.source, static_ks.name, arch).cubin
            sources[(rows, cols)] = (plain_ks, static_ks, seg.kernel_key)
        (p1, s1, k1), (p2, s2, k2) = sources.values()
        assert k1 == k2, name  # one kernel_key for both shapes: one plain binary, two static ones
        assert p1.name == p2.name and p1.source == p2.source, name
        assert s1.name != s2.name, name
        why = sched.is_valid(seg, H100, with_values(default, {"static_shape": "yes"}))
        assert why is not None and "static_shape" in why


def test_every_scheduler_is_a_scheduler():
    """Each scheduler module has what the pipeline asks of it (tunefuse.schedulers.Scheduler)."""
    from tunefuse.planning.kernel_ir import SchedulerKind
    from tunefuse.schedulers import SCHEDULERS, Scheduler

    assert set(SCHEDULERS) == set(SchedulerKind)
    for kind, module in SCHEDULERS.items():
        assert isinstance(module, Scheduler), kind
