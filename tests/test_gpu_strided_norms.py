"""GPU: normalizations along a strided dim (the innermost dim not reduced: softmax over the
channels of [N, C, L], a layernorm over dim 0) with their defaults (outputs along x, a row
in the registers of threads along y, or re-read where it is too long) agree with the
reference: rows of one element, odd extents, rows longer than the registers hold, and a
weight that moves with the outputs."""

import dataclasses

import numpy as np
import pytest
from fusion_zoo import column_layernorm
from test_gpu_execute import assert_agrees, to_device, to_host
from test_gpu_split import run_with_reduction_params

from tunefuse import DataType, FusionDefinition
from tunefuse.device_info import PROFILES
from tunefuse.planning.kernel_ir import SchedulerKind
from tunefuse.schedulers import normalization, reduction

pytestmark = pytest.mark.gpu


def middle_softmax(fd, dtype):
    """softmax over dim 1 of [N, C, L], in float."""
    x = fd.define_tensor(shape=[-1, -1, -1], dtype=dtype)
    xf = fd.ops.cast(x, DataType.Float)
    e = fd.ops.exp(fd.ops.sub(xf, fd.ops.max(xf, dims=[1], keepdim=True)))
    fd.add_output(fd.ops.cast(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)), dtype))


def computed(dtype):
    """The coarser of `dtype` and Float: these fusions compute in Float."""
    return DataType.Float if dtype is DataType.Double else dtype


CASES = [
    # (fusion, dtype, shape of x)
    (middle_softmax, DataType.Float, (3, 256, 1000)),  # 16 threads a row, 32 outputs a block
    (middle_softmax, DataType.BFloat16, (2, 19, 4099)),  # 2 threads a row of 19
    (middle_softmax, DataType.Half, (5, 1, 77)),  # rows of one element
    (middle_softmax, DataType.Float, (2, 4096, 40)),  # 32 elements a thread, 8 outputs a block
    (middle_softmax, DataType.BFloat16, (2, 9000, 16)),  # few, long: a kernel a pass
    (middle_softmax, DataType.Double, (7, 33, 3)),  # fewer outputs than a block row
    (column_layernorm, DataType.Float, (1000, 300)),
    (column_layernorm, DataType.BFloat16, (37, 4097)),
    # rows of 300 re-read (more than 16 threads would hold), 264 blocks: one kernel
    (column_layernorm, DataType.Float, (300, 8448)),
    # vectors of outputs fit: bf16 rows of 45 with a weight, of 40 over 96 outputs
    (column_layernorm, DataType.BFloat16, (45, 1024)),
    (middle_softmax, DataType.BFloat16, (3, 40, 96)),
    # fp32 rows of 257-1024 held 4 outputs a lane (16-byte lanes), odd and even lengths
    (middle_softmax, DataType.Float, (4, 700, 4096)),
    (column_layernorm, DataType.Float, (1024, 20000)),
]


def case_fusion(case, rng):
    """CASES[case]: its fusion, dtype and inputs (x, and a layernorm's weight)."""
    define, dtype, shape = CASES[case]
    with FusionDefinition() as fd:
        define(fd, dtype)
    inputs = [(rng.standard_normal(shape) * 3).astype(dtype.numpy)]
    if define is column_layernorm:
        inputs.append(rng.standard_normal(shape[1]).astype(dtype.numpy))
    return fd, dtype, inputs


@pytest.mark.parametrize("case", range(len(CASES)))
def test_strided_normalizations_agree_with_the_reference(case, rng):
    fd, dtype, inputs = case_fusion(case, rng)
    norms = [s for s in fd.plan(inputs).segments if s.scheduler is SchedulerKind.NORMALIZATION]
    assert all(not normalization.default_params(s, PROFILES["sm_90"]).inner for s in norms)
    got = [to_host(g) for g in fd.execute(to_device(inputs))]
    assert_agrees(fd, inputs, got, computed(dtype))
    assert all(np.isfinite(g.astype(np.float64)).all() for g in got)


@pytest.mark.parametrize("case", [0, 1, 7, 8])
def test_strided_rows_read_again_agree_with_the_reference(case, rng):
    """The layout for rows too long for the registers (re-read by each pass), forced on
    shapes whose rows would fit: 16 threads a row, 32 outputs a block, 4 chunks in flight."""
    fd, dtype, inputs = case_fusion(case, rng)
    changes = dict(
        threads_r=16,
        rows_per_block=32,
        cache_row=False,
        elements_per_thread=1,
        unroll=4,
        rows_per_lane=1,
    )
    got, launched = run_with_reduction_params(fd, inputs, kind="normalization", **changes)
    assert any(not k.params["cache_row"] and not k.params["inner"] for k in launched)
    assert_agrees(fd, inputs, got, computed(dtype))


@pytest.mark.parametrize("case", [0, 1, 2, 5, 6, 7])
@pytest.mark.parametrize("rows_per_lane", [2, 4, 8])
def test_strided_rows_a_lane_agree_with_the_reference(case, rows_per_lane, rng):
    """Held strided rows, several a lane (rows_per_block apart, each block row consecutive
    outputs), forced on every held case: the last tile partly empty, rows of one element,
    a weight that moves with the outputs."""
    fd, dtype, inputs = case_fusion(case, rng)
    norms = [s for s in fd.plan(inputs).segments if s.scheduler is SchedulerKind.NORMALIZATION]
    if not norms:
        pytest.skip("rows of one element: a pointwise kernel")
    p = normalization.default_params(norms[0], PROFILES["sm_90"])
    if not p.cache_row or p.elements_per_thread * rows_per_lane > 64:
        pytest.skip("re-read rows, or too many elements a lane")
    if p.vector > 1:
        pytest.skip("a lane of a vector of outputs (rows a lane are lanes of one output)")
    got, launched = run_with_reduction_params(
        fd, inputs, kind="normalization", rows_per_lane=rows_per_lane
    )
    assert any(k.params["rows_per_lane"] == rows_per_lane for k in launched)
    assert_agrees(fd, inputs, got, computed(dtype))


@pytest.mark.parametrize("dtype", [DataType.BFloat16, DataType.Float])
def test_the_defaults_take_strided_rows_a_lane_where_a_lane_holds_a_few_bytes(dtype, rng):
    """softmax over dim 1 of [16384, 2, 63]: 2 elements a lane (4 or 8 bytes), and no
    vector of outputs (63 is odd)."""
    with FusionDefinition() as fd:
        middle_softmax(fd, dtype)
    inputs = [(rng.standard_normal((16384, 2, 63)) * 3).astype(dtype.numpy)]
    got, launched = run_with_reduction_params(fd, inputs, kind="normalization")
    assert max(k.params.get("rows_per_lane", 1) for k in launched) > 1
    assert_agrees(fd, inputs, got, computed(dtype))


@pytest.mark.parametrize(
    "define,dtype,shape",
    [
        (middle_softmax, DataType.BFloat16, (4096, 32, 64)),
        (middle_softmax, DataType.Float, (333, 64, 96)),
        (column_layernorm, DataType.BFloat16, (100, 4096)),
        (column_layernorm, DataType.Float, (7, 1000)),
    ],
)
def test_the_defaults_take_a_vector_of_outputs_a_lane_where_rows_are_short(
    define, dtype, shape, rng
):
    """Rows of at most 128 whose outputs allow a vector: 4 outputs a lane by default."""
    with FusionDefinition() as fd:
        define(fd, dtype)
    inputs = [(rng.standard_normal(shape) * 3).astype(dtype.numpy)]
    if define is column_layernorm:
        inputs.append(rng.standard_normal(shape[1]).astype(dtype.numpy))
    got, launched = run_with_reduction_params(fd, inputs, kind="normalization")
    assert any(k.params.get("vector", 1) == 4 for k in launched)
    assert_agrees(fd, inputs, got, computed(dtype))


@pytest.mark.parametrize(
    "dtype,shape,inner",
    [
        (DataType.Float, (7, 33, 3), True),  # fewer outputs than a block row
        (DataType.BFloat16, (300, 31, 5), True),  # 8 threads a row of 31 along x
        (DataType.Float, (1000, 11, 2), True),  # a pair of outputs a lane, rows along x
        (DataType.BFloat16, (500, 28, 4), True),  # 4 outputs a lane, rows along x
        (DataType.BFloat16, (300, 13, 2), True),  # threads doubled while 4 elements remain
        (DataType.Float, (2000, 170, 2), True),  # 16 threads of 11
        (DataType.BFloat16, (40, 200, 6), True),  # a pair of 2-byte outputs, 16 threads
        (DataType.Float, (3000, 12, 3), True),  # a row one thread held, now 2 along x
        (DataType.Half, (50, 3, 5), False),  # a row of 3 a thread: stays outer
        (DataType.Double, (9, 17, 7), False),  # runs of 56 bytes: outer
        (DataType.Float, (300, 1067, 14), False),  # re-read: outer
    ],
)
def test_short_runs_of_outputs_put_a_rows_threads_along_x(dtype, shape, inner, rng):
    """Outputs in runs of a few bytes (L of [N, C, L]): a held row's threads along x
    (`normalization.STRIDED_INNER_RUN_BYTES`), meeting by shuffles; the results agree with
    the reference either way."""
    with FusionDefinition() as fd:
        middle_softmax(fd, dtype)
    inputs = [(rng.standard_normal(shape) * 3).astype(dtype.numpy)]
    got, launched = run_with_reduction_params(fd, inputs, kind="normalization")
    norms = [k for k in launched if "cache_row" in k.params]
    assert norms and norms[0].params["inner"] is inner
    assert_agrees(fd, inputs, got, computed(dtype))


@pytest.mark.parametrize(
    "dtype,shape,staged",
    [
        (DataType.Float, (1188, 1235, 6), True),  # 64 threads a row, the slab staged
        (DataType.BFloat16, (1188, 1045, 2), True),
        (DataType.BFloat16, (1188, 519, 15), False),  # a run of 15: re-read
        (DataType.BFloat16, (1188, 5534, 2), True),  # 128 threads a row
        (DataType.Float, (1200, 333, 31), False),  # a run one short of a warp
        (DataType.Half, (1188, 777, 3), True),
    ],
)
def test_runs_shorter_than_a_warp_take_a_block_a_slab(dtype, shape, staged, rng):
    """Rows too long to hold whose outputs' run is shorter than a warp: a block a slab's
    outputs (`normalization.SLAB_THREADS`), staged or re-read; the results agree with the
    reference."""
    with FusionDefinition() as fd:
        middle_softmax(fd, dtype)
    inputs = [(rng.standard_normal(shape) * 3).astype(dtype.numpy)]
    got, launched = run_with_reduction_params(fd, inputs, kind="normalization")
    (norm,) = [k for k in launched if "cache_row" in k.params]
    assert norm.params["rows_per_block"] == shape[2]
    assert norm.params.get("shared_row", False) is staged
    assert_agrees(fd, inputs, got, computed(dtype))


# (case, held): the held cases whose rows fit the registers; the re-read cases whose plan
# runs one normalization on the GPU (3 and 6 run a kernel a pass there).
VECTOR_CASES = [(c, True) for c in (0, 1, 2, 5, 9, 10)] + [(c, False) for c in (0, 1, 7, 8, 9, 10)]


@pytest.mark.parametrize("case,cache_row", VECTOR_CASES)
@pytest.mark.parametrize("vector", [2, 4, 8])
@pytest.mark.parametrize("tree_loop", [False, True])
def test_strided_rows_a_vector_of_outputs_a_lane_agree_with_the_reference(
    case, cache_row, vector, tree_loop, rng
):
    """A lane takes `vector` consecutive outputs (one vector load a reduced element, the
    totals of each pass kept a lane and combined across the row in one tree, its levels
    unrolled or a loop, full-size outputs stored a vector at a time), its rows held or read
    again; where the extents or alignment allow no such vector it is refused by name and
    skipped."""
    fd, dtype, inputs = case_fusion(case, rng)
    norms = [s for s in fd.plan(inputs).segments if s.scheduler is SchedulerKind.NORMALIZATION]
    if not norms:
        pytest.skip("no normalization kernel in this plan")
    device = PROFILES["sm_90"]
    p = normalization.default_params(norms[0], device)
    _, n_red = reduction.sizes(norms[0])
    changes = dict(
        vector=vector, rows_per_lane=1, shared_row=False, cache_row=cache_row, tree_loop=tree_loop
    )
    if cache_row:
        threads = max(p.threads_r, 1)
        changes.update(threads_r=threads, elements_per_thread=-(-n_red // threads))
    else:
        changes.update(threads_r=16, elements_per_thread=1, unroll=4)
    why = normalization.is_valid(norms[0], device, dataclasses.replace(p, **changes))
    if why is not None:
        pytest.skip(why)
    got, launched = run_with_reduction_params(fd, inputs, kind="normalization", **changes)
    assert any(
        k.params["vector"] == vector and k.params["tree_loop"] == tree_loop for k in launched
    )
    assert_agrees(fd, inputs, got, computed(dtype))


@pytest.mark.parametrize(
    "define,dtype,shape",
    [
        (column_layernorm, DataType.BFloat16, (32768, 4096)),  # 256 MB re-read at a time
        (middle_softmax, DataType.Float, (64, 16384, 64)),
    ],
)
def test_strided_rows_re_read_from_beyond_the_l2_run_a_kernel_a_pass(define, dtype, shape, rng):
    """Rows whose resident blocks would re-read more than the L2 holds: the plan runs a kernel
    a pass (a split strided Welford or max-and-sum, then the normalizing pointwise kernel),
    and agrees with the reference."""
    with FusionDefinition() as fd:
        define(fd, dtype)
    inputs = [rng.standard_normal(shape, dtype=np.float32).astype(dtype.numpy)]
    if define is column_layernorm:
        inputs.append(rng.standard_normal(shape[1], dtype=np.float32).astype(dtype.numpy))
    from tunefuse.runtime.device import runtime

    segments = fd.plan(inputs, device=runtime(0).info).segments
    assert all(s.scheduler is not SchedulerKind.NORMALIZATION for s in segments)
    got = [to_host(g) for g in fd.execute(to_device(inputs))]
    assert_agrees(fd, inputs, got, computed(dtype))


def test_long_bf16_columns_summed_four_a_lane_split_agree_with_the_reference(rng):
    """bf16 sums over dim 0 of [32768, 4096]: 4 outputs a lane, split 8 ways by default."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.sum(x, dims=[0]))
    inputs = [rng.standard_normal((32768, 4096), dtype=np.float32).astype(DataType.BFloat16.numpy)]
    got, launched = run_with_reduction_params(fd, inputs)
    assert [(k.params["vector"], k.params["split"]) for k in launched] == [(4, 8)]
    assert_agrees(fd, inputs, got, DataType.BFloat16)


@pytest.mark.parametrize("case", [11, 12])
def test_long_fp32_strided_rows_are_held_four_outputs_a_lane(case, rng):
    """fp32 strided rows of 257-1024 whose held blocks fill the GPU: 4 outputs a lane in
    registers by default, and they agree with the reference."""
    fd, dtype, inputs = case_fusion(case, rng)
    got, launched = run_with_reduction_params(fd, inputs, kind="normalization")
    assert [(k.params["cache_row"], k.params["vector"]) for k in launched] == [(True, 4)]
    assert_agrees(fd, inputs, got, computed(dtype))


@pytest.mark.parametrize("shape", [(0, 300, 3), (5, 300, 0), (0, 7, 0)])
def test_a_strided_normalization_of_no_rows_returns_empty_outputs(shape):
    """Softmax over dim 1 with an empty dim not reduced: planned (its layout once divided by
    the zero outputs), nothing launched, an empty output of the input's shape."""
    with FusionDefinition() as fd:
        middle_softmax(fd, DataType.Float)
    (out,) = fd.execute([np.zeros(shape, np.float32)])
    assert tuple(out.shape) == shape
