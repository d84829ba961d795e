"""A normalization with a vector of outputs a lane combines every lane's totals across the
row's threads in one tree (codegen 23, `lanes_block_reduce`), without a GPU: the barriers a
row, the fallbacks, the shared-memory bounds, and a compile for sm_80 and sm_90. The GPU
tests (test_gpu_output_vectors, test_gpu_strided_norms) check the values."""

from __future__ import annotations

import math
import re

import pytest
from fusion_zoo import column_layernorm, softmax_over
from hypothesis import given, settings
from hypothesis import strategies as st
from test_codegen_compile import ARCHS
from test_pointwise_defaults import view

from tunefuse import DataType, FusionDefinition
from tunefuse.codegen import code_identity, generate
from tunefuse.codegen.reduction import LANE_BATCH_SHARED_BYTES, LANE_BATCH_THREAD_BYTES
from tunefuse.compiler import compile_kernel
from tunefuse.device_info import H100
from tunefuse.planning.kernel_ir import SchedulerKind
from tunefuse.schedulers import (
    normalization,
    params_from_dict,
    params_to_dict,
    with_values,
)

_softmax_dim1 = softmax_over(3, 1)


def _inputs(define, shape, dtype):  # noqa: ANN001, ANN202
    """x, and column_layernorm's weight of x's last extent."""
    weight = [view((shape[-1],), dtype)] if define is column_layernorm else []
    return [view(shape, dtype), *weight]


def _norm(define, shape, dtype, **changes):  # noqa: ANN001, ANN202
    with FusionDefinition() as fd:
        define(fd, dtype)
    plan = fd.plan(_inputs(define, shape, dtype), device=H100)
    seg = next(s for s in plan.segments if s.scheduler is SchedulerKind.NORMALIZATION)
    p = with_values(normalization.default_params(seg, H100), changes)
    assert normalization.is_valid(seg, H100, p) is None
    return seg, p, generate(seg, p, H100, _dtypes(plan)).source


def _dtypes(plan) -> dict:  # noqa: ANN001
    return {b.id: b.dtype for b in plan.buffers}


def _row_loop(source: str) -> str:
    body = source[source.index("tf_normalization_") :]
    return body[body.index("for (int row_base") :]


@pytest.mark.parametrize(
    "define, shape, dtype, reductions",
    [
        (_softmax_dim1, (1024, 64, 64), DataType.Float, 2),  # max, then the sum of exps
        (_softmax_dim1, (300, 36, 1000), DataType.BFloat16, 2),
        (column_layernorm, (64, 65536), DataType.Float, 2),  # mean, then squared deviations
        (column_layernorm, (56, 150000), DataType.BFloat16, 2),
    ],
)
def test_a_tree_a_reduction_for_all_lanes(define, shape, dtype, reductions):
    seg, p, source = _norm(define, shape, dtype)
    assert p.vector > 1 and p.threads_r > 1 and not p.inner and p.cache_row
    loop = _row_loop(source)
    # One tree a reduction: a barrier after publishing, one a level, one before the arrays
    # are written again; the levels are a loop, so the text has three a reduction.
    assert loop.count("__syncthreads();") == 3 * reductions
    assert loop.count("__shared__") == reductions
    assert "for (int s = " in loop
    # every lane's cells in one array of vector x threads_r x rows_per_block
    cells = p.vector * p.threads_r * p.rows_per_block
    assert f"[{cells}];" in loop


def test_a_max_and_sum_of_exps_keeps_a_tree_a_lane():
    """A re-read softmax keeps its max and sum together (an online accumulator): no batched
    tree, each lane's pair through `block_reduce`."""
    seg, p, source = _norm(_softmax_dim1, (1024, 2048, 64), DataType.BFloat16)
    assert p.vector > 1 and not p.cache_row
    assert "__shared__ float sv" not in source


def test_lanes_past_the_shared_bound_keep_a_tree_a_lane():
    """Blocks whose trees would take more than LANE_BATCH_SHARED_BYTES go lane by lane."""
    seg, p, _ = _norm(_softmax_dim1, (1024, 64, 64), DataType.Float)
    dtypes = {b: DataType.Float for b in seg.buffer_ids}
    big = with_values(p, {"rows_per_block": 128})  # 8 threads x 128 lanes of 4 fp32 outputs
    assert normalization.is_valid(seg, H100, big) is None
    cells = big.vector * big.threads_r * big.rows_per_block
    assert cells * 4 > LANE_BATCH_SHARED_BYTES
    source = generate(seg, big, H100, dtypes).source
    assert "__shared__ float sv" not in source


@given(
    n=st.integers(1, 512),
    c=st.integers(2, 128),
    l_vectors=st.integers(1, 64),
    dtype=st.sampled_from([DataType.Float, DataType.BFloat16]),
    define=st.sampled_from([_softmax_dim1, column_layernorm]),
)
@settings(max_examples=150, deadline=None)
def test_lane_trees_stay_within_their_shared_bounds(n, c, l_vectors, dtype, define):
    shape = (n, c, 4 * l_vectors) if define is _softmax_dim1 else (c, n * 4 * l_vectors)
    with FusionDefinition() as fd:
        define(fd, dtype)
    plan = fd.plan(_inputs(define, shape, dtype), device=H100)
    norms = [s for s in plan.segments if s.scheduler is SchedulerKind.NORMALIZATION]
    if not norms:
        return
    seg = norms[0]
    p = normalization.default_params(seg, H100)
    source = generate(seg, p, H100, _dtypes(plan)).source
    sizes = [int(m) for m in _shared_sizes(source, "sv")]
    threads = p.threads_r * p.rows_per_block
    taken = 4 * sum(sizes)  # float accumulators
    assert taken <= min(LANE_BATCH_SHARED_BYTES, LANE_BATCH_THREAD_BYTES * threads)
    if sizes:
        assert p.vector > 1 and not p.inner and p.threads_r > 1
        assert all(s == p.vector * threads for s in sizes)
        assert math.log2(p.threads_r).is_integer()


def _shared_sizes(source: str, prefix: str) -> list[str]:
    return re.findall(rf"__shared__ \w+ {prefix}\w+\[(\d+)\];", source)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    "define, shape, dtype",
    [
        (_softmax_dim1, (97, 61, 36), DataType.Float),
        (_softmax_dim1, (129, 32, 64), DataType.BFloat16),
        (column_layernorm, (13, 20004), DataType.Float),
        (column_layernorm, (260, 40000), DataType.Float),  # 32 threads a row, held
    ],
)
def test_lane_trees_compile(define, shape, dtype, arch):
    seg, p, source = _norm(define, shape, dtype)
    assert "__shared__ float sv" in source
    name = source[source.index("tf_normalization_") :].split("(")[0]
    assert compile_kernel(source, name, arch).cubin


def test_tree_loop_keeps_the_levels_a_loop_and_nothing_else():
    seg, p, unrolled = _norm(_softmax_dim1, (4096, 32, 64), DataType.BFloat16)
    _, looped_p, looped = _norm(_softmax_dim1, (4096, 32, 64), DataType.BFloat16, tree_loop=True)
    assert looped_p.tree_loop and not p.tree_loop
    body_u, body_l = _row_loop(unrolled), _row_loop(looped)
    assert "#pragma unroll 1" not in body_u
    # one pragma a tree (max, then the sum of exps), right before its levels
    assert body_l.count("#pragma unroll 1\n") == 2
    lines_l = [ln for ln in body_l.splitlines() if ln.strip() != "#pragma unroll 1"]
    assert lines_l == body_u.splitlines()


@pytest.mark.parametrize(
    "define, shape, dtype",
    [
        (_softmax_dim1, (1024, 2048, 64), DataType.BFloat16),  # re-read: a max-and-sum
        (_softmax_dim1, (256, 256, 64), DataType.Float),  # one output a lane
        (column_layernorm, (1024, 4096), DataType.Float),  # one output a lane
    ],
)
def test_tree_loop_leaves_other_kernels_as_they_are(define, shape, dtype):
    """Where no lanes meet in one tree the flag changes nothing but the params: one kernel by
    its code, which the tuner measures once (`code_identity`)."""
    seg, p, _ = _norm(define, shape, dtype)
    _, q, _ = _norm(define, shape, dtype, tree_loop=True)
    with FusionDefinition() as fd:
        define(fd, dtype)
    dtypes = _dtypes(fd.plan(_inputs(define, shape, dtype), device=H100))
    a, b = generate(seg, p, H100, dtypes), generate(seg, q, H100, dtypes)
    assert code_identity(a) == code_identity(b)


def test_tree_loop_is_in_the_space_and_stored_params_without_it_load():
    seg, p, _ = _norm(_softmax_dim1, (1024, 64, 64), DataType.Float)
    space = normalization.search_space(seg, H100)
    assert list(space["tree_loop"].choices) == [False, True]
    stored = params_to_dict(p)
    del stored["tree_loop"]  # a record of codegen 23 before the flag
    assert params_from_dict(SchedulerKind.NORMALIZATION, stored) == p
    assert params_from_dict(SchedulerKind.NORMALIZATION, {**stored, "tree_loop": 1}) is None
    assert "tree_loop" in normalization.is_valid(seg, H100, with_values(p, {"tree_loop": "1"}))


@pytest.mark.parametrize("arch", ARCHS)
def test_tree_loop_compiles(arch):
    for define, shape, dtype in [
        (_softmax_dim1, (129, 32, 64), DataType.BFloat16),
        (column_layernorm, (260, 40000), DataType.Float),
    ]:
        _, _, source = _norm(define, shape, dtype, tree_loop=True)
        assert "#pragma unroll 1" in source
        name = source[source.index("tf_normalization_") :].split("(")[0]
        assert compile_kernel(source, name, arch).cubin


def test_a_two_pass_variance_batches_both_trees_within_the_bound_or_neither():
    """Column layernorm's mean and squared deviations each take an array of lanes x block
    threads: 512 threads of 4 fp32 lanes fill the 8 KB bound with one, so neither batches."""
    seg, p, source = _norm(
        column_layernorm,
        (64, 65536),
        DataType.Float,
        threads_r=16,
        rows_per_block=32,
        elements_per_thread=4,
    )
    assert p.vector * p.threads_r * p.rows_per_block * 4 == LANE_BATCH_SHARED_BYTES
    assert _shared_sizes(source, "sv") == []
    _, _, small = _norm(column_layernorm, (64, 65536), DataType.Float)
    assert len(_shared_sizes(small, "sv")) == 2  # the default's 128 threads: both batched
