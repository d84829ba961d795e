"""Every scheduler x a grid of params x each dtype compiles with NVRTC for sm_80 and sm_90
(no GPU needed). The GPU tests prove the same kernels compute the right thing."""

import dataclasses
import itertools
import re

import numpy as np
import pytest
from fusion_zoo import ZOO, build, inputs_for, shared_costly_values
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import fusions
from test_frontend import ROOT
from test_gpu_output_vectors import CASES as OUTPUT_VECTOR_CASES
from test_gpu_output_vectors import case_inputs as output_vector_inputs
from test_gpu_peeled_rows import CASES as PEEL_CASES
from test_gpu_peeled_rows import LAYOUTS as PEEL_LAYOUTS
from test_gpu_peeled_rows import VARIANTS as PEEL_VARIANTS
from test_gpu_peeled_rows import peel_variant
from test_gpu_rows_per_lane import CASES as LANE_CASES
from test_gpu_rows_per_lane import lane_variant

from tunefuse import DataType, FusionDefinition
from tunefuse.codegen import generate
from tunefuse.compiler import CompileError, compile_kernel
from tunefuse.device_info import PROFILES
from tunefuse.fusion_file import load_fusion_file
from tunefuse.planning.kernel_ir import SchedulerKind
from tunefuse.schedulers import reduction, scheduler_for, with_values

ARCHS = ["sm_80", "sm_90"]
DTYPES = [DataType.Float, DataType.Half, DataType.BFloat16, DataType.Double]


def compile_plan(plan, arch, params_for=None):
    device = PROFILES[arch]
    dtypes = {b.id: b.dtype for b in plan.buffers}
    kinds = []
    for seg in plan.segments:
        sched = scheduler_for(seg.scheduler)
        params = params_for(seg, device) if params_for else sched.default_params(seg, device)
        assert sched.is_valid(seg, device, params) is None
        ks = generate(seg, params, device, dtypes)
        ck = compile_kernel(ks.source, ks.name, arch)
        assert len(ck.cubin) > 0 and ck.arch == arch
        kinds.append(seg.scheduler)
    return kinds


def segment_dtypes(seg) -> dict:  # noqa: ANN001
    """The dtype of each buffer a segment planned alone reads or writes."""
    return {ld.buffer: ld.dtype for ld in seg.loads} | {st.buffer: st.dtype for st in seg.stores}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.value)
@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_compiles_with_default_params(name, dtype, arch):
    fd = build(ZOO[name], dtype)
    plan = fd.plan(inputs_for(fd, 64, 96, np.random.default_rng(0)))
    assert compile_plan(plan, arch)


def grid_points(segment, device):
    """A spread of valid points of the scheduler's search space."""
    sched = scheduler_for(segment.scheduler)
    space = sched.search_space(segment, device)
    names = sorted(space)
    base = sched.default_params(segment, device)
    points = []
    for name in names:
        for choice in space[name].choices:
            p = with_values(base, {name: choice})
            if sched.is_valid(segment, device, p) is None:
                points.append(p)
    return points


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", ["softmax", "row_sum", "col_sum", "bias_gelu", "transpose2d"])
def test_search_space_points_compile(name, arch):
    fd = build(ZOO[name], DataType.Float)
    plan = fd.plan(inputs_for(fd, 64, 96, np.random.default_rng(0)))
    device = PROFILES[arch]
    dtypes = {b.id: b.dtype for b in plan.buffers}
    compiled = 0
    for seg in plan.segments:
        for params in grid_points(seg, device):
            ks = generate(seg, params, device, dtypes)
            compile_kernel(ks.source, ks.name, arch)
            compiled += 1
    assert compiled >= 5


@pytest.mark.parametrize("arch", ARCHS)
def test_seed_fusions_compile(arch):
    rng = np.random.default_rng(0)
    for case in load_fusion_file(ROOT / "examples" / "seed_fusions.py"):
        fd = case.build()
        plan = fd.plan([np.zeros(x.shape, x.dtype) for x in case.example_inputs(rng)])
        compile_plan(plan, arch)


def test_every_op_compiles():
    """One fusion per elementwise op family and dtype: the math table renders for each."""
    from tunefuse.ir.elementwise import ELEMENTWISE, ResultType

    for dtype in (DataType.Float, DataType.Double, DataType.Half, DataType.Int32, DataType.Int):
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1], dtype=dtype)
            y = fd.define_tensor(shape=[-1], dtype=dtype)
            c = fd.ops.gt(x, y)
            for op, rule in ELEMENTWISE.items():
                if rule.result in (ResultType.INTEGRAL, ResultType.INTEGER) and dtype.is_floating:
                    continue
                if (
                    op.value == "nextafter" and dtype is DataType.Half
                ):  # float and double steps only
                    continue
                args = {
                    1: (x,),
                    2: (x, y),
                    3: (c, x, y) if op.value == "where" else (x, y, x),
                    4: (x, y, x, 2),
                }[rule.arity]
                fd.add_output(getattr(fd.ops, op.value)(*args))
        plan = fd.plan([np.ones(8, dtype.numpy), np.ones(8, dtype.numpy)])
        assert compile_plan(plan, "sm_90") == [SchedulerKind.POINTWISE]


def test_pad_cat_iota_and_index_math_compile():
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
        fd.add_output(fd.ops.reshape(fd.ops.permute(x, dims=[1, 0]), new_shape=[-1]))
    plan = fd.plan([np.zeros((3, 5), np.float32)])
    compile_plan(plan, "sm_90")


def test_compile_error_carries_source_and_log():
    with pytest.raises(CompileError) as info:
        compile_kernel('extern "C" __global__ void k() { this is not C++; }', "k", "sm_90")
    assert "this is not C++" in info.value.source and "NVRTC" in str(info.value)


def test_compile_time_per_kernel_is_small():
    """NVRTC cost without CUDA headers (measured, not asserted tightly: CI machines vary)."""
    import time

    fd = build(ZOO["softmax"], DataType.BFloat16)
    plan = fd.plan(inputs_for(fd, 64, 96, np.random.default_rng(0)))
    seg = plan.segments[0]
    device = PROFILES["sm_90"]
    params = dataclasses.replace(
        scheduler_for(seg.scheduler).default_params(seg, device), blocks_per_sm=7
    )
    ks = generate(seg, params, device, {b.id: b.dtype for b in plan.buffers})
    start = time.perf_counter()
    compile_kernel(ks.source, ks.name, "sm_90")
    assert time.perf_counter() - start < 2.0


@given(
    fusions(max_ops=6, dtypes=(DataType.Float, DataType.BFloat16, DataType.Half)),
    st.randoms(use_true_random=False),
)
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
def test_random_fusions_compile_at_random_valid_params(case, rnd):
    """Any fusion's kernels, at any valid point of their scheduler's space, compile (a
    session's fuzzing of this ran 600 fusions and 3,337 points clean)."""
    fd, inputs = case
    plan = fd.plan(inputs)
    device = PROFILES["sm_90"]
    dtypes = {b.id: b.dtype for b in plan.buffers}
    for seg in plan.segments:
        sched = scheduler_for(seg.scheduler)
        base = sched.default_params(seg, device)
        space = sched.search_space(seg, device)
        for _ in range(3):
            params = with_values(base, {name: rnd.choice(d.choices) for name, d in space.items()})
            if sched.is_valid(seg, device, params) is None:
                ks = generate(seg, params, device, dtypes)
                assert compile_kernel(ks.source, ks.name, "sm_90").cubin


@pytest.mark.parametrize("arch", ARCHS)
def test_a_cached_row_computes_each_costly_value_once(arch):
    """Softmax's exp(x - max) is summed by one pass and divided by the sum in the output pass:
    with the row in registers it is kept there, one exp an element. Re-reading the row, the
    max and the sum are one pass (tf_max_exp_sum_add[_chunk], with exps of its own) and the
    output pass computes exp(x - max) again; tanh(x), summed and used again, is computed in both passes
    (nothing to keep it in). GPU: tests/test_gpu_execute.py checks the values against the
    reference."""
    device = PROFILES[arch]
    for define, calls_cached, calls_reread in [
        (ZOO["softmax"], {"tf_exp(": 1}, {"tf_exp(": 1, "tf_max_exp_sum_add": 1}),
        (
            shared_costly_values,
            {"tf_exp(": 1, "tf_tanh(": 1},
            {"tf_exp(": 1, "tf_tanh(": 2, "tf_max_exp_sum_add": 1},
        ),
    ]:
        fd = build(define, DataType.BFloat16)
        plan = fd.plan(inputs_for(fd, 64, 4096, np.random.default_rng(0)))
        (seg,) = plan.segments
        dtypes = {b.id: b.dtype for b in plan.buffers}
        sched = scheduler_for(seg.scheduler)
        cached = sched.default_params(seg, device)
        assert cached.cache_row
        for params, calls, once in [
            (cached, calls_cached, True),
            (
                with_values(cached, {"cache_row": False, "elements_per_thread": cached.vector}),
                calls_reread,
                False,
            ),
        ]:
            assert sched.is_valid(seg, device, params) is None
            ks = generate(seg, params, device, dtypes)
            body = ks.source.split("end of preamble", 1)[1]
            for call, count in {"tf_max_exp_sum_add": 0, **calls}.items():
                assert body.count(call) == count, (define.__name__, call, params)
            assert ("kv0[" in body) is once
            assert compile_kernel(ks.source, ks.name, arch).cubin


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("case", range(len(OUTPUT_VECTOR_CASES)))
def test_vectors_of_outputs_compile(case, arch):
    """Each reduction of the GPU test of vectors along the outputs, at every vector its
    outputs allow, in both layouts, unsplit and split 3 ways (the GPU test runs them against
    the reference)."""
    build, dtype, shape = OUTPUT_VECTOR_CASES[case]
    with FusionDefinition() as fd:
        build(fd, dtype)
    plan = fd.plan(output_vector_inputs(build, dtype, shape, np.random.default_rng(0)))
    device = PROFILES[arch]
    dtypes = {b.id: b.dtype for b in plan.buffers}
    (seg,) = [s for s in plan.segments if s.scheduler is SchedulerKind.REDUCTION]
    widest = reduction.output_vector(seg)
    assert widest >= 2
    base = reduction.default_params(seg, device)
    for vector in (v for v in (2, 4, 8) if widest % v == 0):
        for (threads_r, inner), split in itertools.product(
            ((1, False), (32, False), (4, True)), (1, 3)
        ):
            rows = 256 // threads_r if not inner else 8
            p = dataclasses.replace(
                base,
                vector=vector,
                threads_r=threads_r,
                inner=inner,
                rows_per_block=rows,
                split=split,
            )
            assert reduction.is_valid(seg, device, p) is None
            ks = generate(seg, p, device, dtypes)
            assert "TfVec<" in ks.source and "acc0_v[" in ks.source
            assert ("tf_last" in ks.source) == (split > 1)
            compile_kernel(ks.source, ks.name, arch)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("case", range(len(LANE_CASES)))
def test_rows_a_lane_compile(case, arch):
    """Each kernel of the GPU test of rows a lane, at every rows_per_lane its registers allow,
    with the default lanes a row and with 2, inner and outer layouts (the GPU test runs them
    against the reference); more rows than registers allow are refused by name."""
    compiled = 0
    for rows_per_lane, threads_r, inner in itertools.product(
        (1, 2, 4, 8), (None, 2), (True, False)
    ):
        v = lane_variant(case, rows_per_lane, threads_r, np.random.default_rng(0), inner)
        if v.why is not None:
            assert rows_per_lane > 1 or threads_r is not None, v.why
            continue
        ks = generate(v.segment, v.params, PROFILES[arch], v.buffer_dtypes)
        compile_kernel(ks.source, ks.name, arch)
        compiled += 1
        assert (f"q < {rows_per_lane}; ++q" in ks.source) == (rows_per_lane > 1)
    assert compiled >= 6


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("case", range(len(PEEL_CASES)))
def test_peeled_rows_compile(case, arch):
    """Each kernel of the GPU test of peeled rows, at every vector it peels and every
    variant, re-read, staged or held (the GPU test runs them against the reference): the head's
    and tail's element loop is there, and the vector loads start at the row's first aligned
    element."""
    compiled = 0
    layouts = PEEL_LAYOUTS if PEEL_CASES[case][3] == "normalization" else ("reread",)
    for vector, variant, layout in itertools.product((2, 4, 8), range(len(PEEL_VARIANTS)), layouts):
        v = peel_variant(case, vector, variant, np.random.default_rng(0), layout)
        if v.why is not None or not reduction.peels(v.segment, vector):
            continue
        ks = generate(v.segment, v.params, PROFILES[arch], v.buffer_dtypes)
        compile_kernel(ks.source, ks.name, arch)
        compiled += 1
        assert "= pa + (" in ks.source and "(pe - pb)" in ks.source, layout
        if getattr(PEEL_CASES[case][0], "__name__", "") == "_sliced_softmax":
            # its load and store lie at different places of a vector: the row is read by
            # vectors, its output written an element a lane
            assert "reinterpret_cast<const TfVec<tf_bf16" in ks.source, layout
            assert not re.search(r"reinterpret_cast<TfVec<[^>]*>\*>\(&B", ks.source), layout
    assert compiled >= 4


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    "name,dtype,cols",
    [
        ("softmax", DataType.Float, 50257),
        ("layernorm", DataType.BFloat16, 100000),
        ("rmsnorm", DataType.Half, 60000),
    ],
)
def test_rows_too_long_for_registers_are_staged_where_shared_memory_holds_them(
    name, dtype, cols, arch
):
    """The default stages a row of more than 32 elements a thread in shared memory when the
    device's opt-in shared memory holds it (the A100's 163 KB does not hold 200 KB), else
    re-reads it; every kernel compiles and asks for the bytes its staged inputs take."""
    from tunefuse.schedulers.normalization import SHARED_ROW_RESERVE, shared_row_bytes

    fd = build(ZOO[name], dtype)
    plan = fd.plan(inputs_for(fd, 4, cols, np.random.default_rng(0)))
    device = PROFILES[arch]
    (seg,) = plan.segments
    params = scheduler_for(seg.scheduler).default_params(seg, device)
    staged = shared_row_bytes(seg, 1)
    assert staged == -(-cols * dtype.itemsize // 16) * 16  # x alone: weight and bias read once
    assert params.shared_row == (staged + SHARED_ROW_RESERVE <= device.shared_optin_per_block)
    assert not params.cache_row
    ks = generate(seg, params, device, {b.id: b.dtype for b in plan.buffers})
    assert ks.shared_bytes == (staged if params.shared_row else 0)
    compile_kernel(ks.source, ks.name, arch)
    too_many = dataclasses.replace(params, shared_row=True, rows_per_block=2, threads_r=256)
    assert "shared memory" in scheduler_for(seg.scheduler).is_valid(seg, device, too_many)


@pytest.mark.parametrize("name", ["softmax", "layernorm", "rmsnorm"])
def test_rows_over_a_cluster_compile_for_sm_90(name):
    """The default of fp32 rows of 65536 on an H100 is a cluster kernel (__cluster_dims__,
    distributed shared memory); it compiles for sm_90."""
    fd = build(ZOO[name], DataType.Float)
    x = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (64, 65536), (0, 0))
    vec = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (65536,), (0,))
    inputs = [x] + [vec] * (len(fd.fusion.inputs) - 1)
    plan = fd.plan(inputs, device=PROFILES["sm_90"])
    (seg,) = plan.segments
    params = scheduler_for(seg.scheduler).default_params(seg, PROFILES["sm_90"])
    assert params.cluster == 2
    ks = generate(seg, params, PROFILES["sm_90"], {b.id: b.dtype for b in plan.buffers})
    assert "__cluster_dims__(2, 1, 1)" in ks.source and ks.grid[0] % 2 == 0
    assert len(compile_kernel(ks.source, ks.name, "sm_90").cubin) > 0


@pytest.mark.parametrize("arch", ARCHS)
def test_strided_rows_with_a_vector_of_outputs_compile(arch):
    """Each strided normalization of the GPU test of vectors of outputs a lane (held and
    re-read, every vector its extents allow) compiles; the GPU test runs them against the
    reference."""
    import dataclasses

    from test_gpu_strided_norms import VECTOR_CASES, case_fusion

    from tunefuse.schedulers import normalization

    device = PROFILES[arch]
    compiled = 0
    for (case, cache_row), vector in itertools.product(VECTOR_CASES, (2, 4, 8)):
        fd, _, inputs = case_fusion(case, np.random.default_rng(0))
        plan = fd.plan(inputs, device=device)
        dtypes = {b.id: b.dtype for b in plan.buffers}
        for seg in plan.segments:
            if seg.scheduler is not SchedulerKind.NORMALIZATION:
                continue
            p = normalization.default_params(seg, device)
            _, n_red = reduction.sizes(seg)
            changes = dict(vector=vector, rows_per_lane=1, shared_row=False, cache_row=cache_row)
            if cache_row:
                changes.update(elements_per_thread=-(-n_red // p.threads_r))
            else:
                changes.update(threads_r=16, elements_per_thread=1, unroll=4)
            params = dataclasses.replace(p, **changes)
            if normalization.is_valid(seg, device, params) is not None:
                continue
            ks = generate(seg, params, device, dtypes)
            compile_kernel(ks.source, ks.name, arch)
            compiled += 1
            assert "_v[v]" in ks.source  # totals kept a lane
    assert compiled >= 10


@pytest.mark.parametrize("arch", ARCHS)
def test_a_reduction_compiled_to_fit_its_blocks_says_so_in_its_launch_bounds(arch):
    """min_blocks > 1 is the launch bounds' second argument (the compiler then caps a
    thread's registers so that many blocks fit an SM); 0 leaves the bound at the block."""
    from test_reduction_defaults import column_sum_segment

    device = PROFILES[arch]
    seg = column_sum_segment(512, 262144, DataType.BFloat16)
    p = reduction.default_params(seg, device)
    dtypes = segment_dtypes(seg)
    threads = reduction.block_threads(p)
    for blocks, bounds in (
        (4, f"__launch_bounds__({threads}, 4)"),
        (0, f"__launch_bounds__({threads})"),
    ):
        ks = generate(seg, dataclasses.replace(p, min_blocks=blocks), device, dtypes)
        assert bounds in ks.source
        compile_kernel(ks.source, ks.name, arch)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_normalization_compiled_to_fit_its_blocks_says_so_in_its_launch_bounds(arch):
    """A normalization's min_blocks (the tuner's to choose; the defaults leave it 0) is its
    launch bounds' second argument; blocks that cannot fit an SM are refused by name."""
    from tunefuse.schedulers import normalization

    device = PROFILES[arch]
    fd = build(ZOO["softmax"], DataType.Float)
    (seg,) = fd.plan([np.zeros((1024, 4096), np.float32)], device=device).segments
    p = normalization.default_params(seg, device)
    assert p.min_blocks == 0
    threads = reduction.block_threads(p.as_reduction())
    dtypes = segment_dtypes(seg)
    ks = generate(seg, dataclasses.replace(p, min_blocks=8), device, dtypes)
    assert f"__launch_bounds__({threads}, 8)" in ks.source
    compile_kernel(ks.source, ks.name, arch)
    # more than the block's threads allow: capped at what they allow, not refused (a block
    # the tuner reshapes stays valid); more than any SM holds: refused by name
    fits = device.max_threads_per_sm // threads
    capped = dataclasses.replace(p, min_blocks=min(2 * fits, device.max_blocks_per_sm))
    assert normalization.is_valid(seg, device, capped) is None
    ks = generate(seg, capped, device, dtypes)
    assert f"__launch_bounds__({threads}, {fits})" in ks.source
    nonsense = dataclasses.replace(p, min_blocks=device.max_blocks_per_sm + 1)
    assert "min_blocks" in normalization.is_valid(seg, device, nonsense)


@pytest.mark.parametrize("arch", ARCHS)
def test_columns_of_odd_pitch_compile_with_their_wider_block_rows(arch):
    """Column sums whose rows are not a multiple of 128 bytes apart take block rows of up to
    256 bytes (`reduction.block_row_bytes`) by default; those kernels compile (the GPU
    timing that chose them checked each against torch)."""
    from test_reduction_defaults import column_sum_segment

    device = PROFILES[arch]
    for rows, cols, dtype in [
        (100000, 600, DataType.BFloat16),
        (50000, 1000, DataType.Float),
        (400000, 100, DataType.Float),
        (20000, 5000, DataType.BFloat16),
    ]:
        seg = column_sum_segment(rows, cols, dtype)
        assert reduction.block_row_bytes(seg) == reduction.ODD_PITCH_ROW_BYTES
        p = reduction.default_params(seg, device)
        dtypes = segment_dtypes(seg)
        ks = generate(seg, p, device, dtypes)
        compile_kernel(ks.source, ks.name, arch)


@pytest.mark.parametrize("arch", ARCHS)
def test_sums_over_an_odd_pitch_compile_with_their_wider_lanes(arch):
    """Sums over the middle dim whose rows are an odd pitch apart take lanes of 2 or 4
    outputs by default (`reduction._odd_pitch_lanes_pay`); those kernels compile (the GPU
    runs that chose them checked each against torch, under compute-sanitizer)."""
    from test_reduction_defaults import middle_sum_segment

    device = PROFILES[arch]
    vectors = set()
    for shape, dtype in [
        ((64, 4000, 100), DataType.Float),
        ((64, 1000, 300), DataType.BFloat16),
        ((512, 300, 60), DataType.BFloat16),
        ((200, 700, 150), DataType.Float),
    ]:
        seg = middle_sum_segment(*shape, dtype)
        p = reduction.default_params(seg, device)
        vectors.add(p.vector)
        ks = generate(seg, p, device, segment_dtypes(seg))
        compile_kernel(ks.source, ks.name, arch)
    assert vectors >= {2, 4}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("strided", [False, True], ids=["back_to_back", "strided"])
def test_staged_rows_compile(strided, arch):
    """Every layout of the host and GPU tests of rows staged through shared memory
    (`normalization.Params.stage_rows`) compiles, with the staged copies, the barriers and the
    run-time check of the rows' stride in its source."""
    from fuzz import FuzzCase, device_plan
    from test_host_kernels import STAGED_ROWS, _rows_apart

    from tunefuse.schedulers import normalization

    device = PROFILES[arch]
    for k, (name, dtype, cols, changes) in enumerate(STAGED_ROWS):
        fd = build(_rows_apart(ZOO[name]) if strided else ZOO[name], dtype)
        inputs = inputs_for(fd, 37, cols + (4 if strided else 0), np.random.default_rng(k))
        if strided:
            inputs = [x[:, :cols] if x.ndim == 2 else x[:cols] for x in inputs]
        plan = device_plan(
            FuzzCase(k, fd, inputs, layouts=["contiguous"] * len(inputs)), device=device
        )
        (seg,) = plan.segments
        p = dataclasses.replace(
            normalization.default_params(seg, device), **changes, stage_rows=True, rows_per_lane=1
        )
        assert normalization.is_valid(seg, device, p) is None
        ks = generate(seg, p, device, {b.id: b.dtype for b in plan.buffers})
        assert "tf_stage" in ks.source and "__syncthreads();" in ks.source
        assert "(int)(L0_s0) == n_red" in ks.source
        compile_kernel(ks.source, ks.name, arch)
