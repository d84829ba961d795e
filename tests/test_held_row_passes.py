"""Codegen of rows held in registers (codegen 20), without a GPU: a run of independent sums is
one pass with one pair of barriers, a load the row loop does not change is held from before
it, and a kernel taking column sums in parts is compiled to fit the blocks an SM its row
groups count on. The GPU tests (test_gpu_column_partials, test_gpu_balanced_rows) check the
values; these check that the kernels are the ones meant."""

from __future__ import annotations

import re

import numpy as np
import pytest
from fusion_zoo import ZOO, build, inputs_for
from test_codegen_compile import ARCHS
from training_fusions import NORM_BACKWARDS

from tunefuse import DataType
from tunefuse.codegen import generate, partial_blocks
from tunefuse.device_info import PROFILES
from tunefuse.planning.kernel_ir import SchedulerKind
from tunefuse.planning.plan import make_plan
from tunefuse.schedulers import normalization

H100 = PROFILES["sm_90"]


def _norm_source(fd, inputs, device=H100, params=None):  # noqa: ANN001, ANN202
    plan = make_plan(fd.fusion, inputs, None, device)
    seg = next(s for s in plan.segments if s.scheduler is SchedulerKind.NORMALIZATION)
    p = params or normalization.default_params(seg, device)
    dtypes = {b.id: b.dtype for b in plan.buffers}
    return seg, p, generate(seg, p, device, dtypes).source


def _backward(name: str, rows: int, cols: int, dtype: DataType):  # noqa: ANN202
    define, make, _ = NORM_BACKWARDS[name]
    return build(define, dtype), make(rows, cols, dtype, np.random.default_rng(0))


def _row_loop(source: str) -> tuple[str, str]:
    """(the kernel before its row loop, the row loop)."""
    body = source[source.index("tf_normalization_") :]
    at = body.index("for (int row_base")
    return body[:at], body[at:]


@pytest.mark.parametrize(
    "dtype, cols",
    [
        (DataType.BFloat16, 1024),
        (DataType.BFloat16, 2560),
        (DataType.Float, 2560),
        (DataType.Float, 8192),
    ],
)
def test_layernorm_backward_sums_its_two_means_in_one_pass_and_one_pair_of_barriers(cols, dtype):
    fd, inputs = _backward("layernorm", 8192, cols, dtype)
    seg, p, source = _norm_source(fd, inputs)
    assert p.threads_r > 32  # a row of several warps: its sums meet in shared memory
    _, loop = _row_loop(source)
    # acc0 and acc1 (mean(g w), mean(g w xhat)) declared together, one loop, two barriers
    assert re.search(r"float acc0 = 0\.0f;\s*float acc1 = 0\.0f;", loop)
    assert loop.count("__syncthreads();") == 2


def test_a_sum_that_reads_another_keeps_its_own_pass():
    """layernorm's forward: the variance's operand reads the mean, so two passes."""
    fd = build(ZOO["layernorm"], DataType.Float)
    _, p, source = _norm_source(fd, inputs_for(fd, 4096, 4096, np.random.default_rng(0)))
    assert p.cache_row and p.threads_r > 32
    _, loop = _row_loop(source)
    assert loop.count("__syncthreads();") == 4


def test_the_weight_is_held_from_before_the_row_loop():
    fd, inputs = _backward("layernorm", 8192, 2560, DataType.BFloat16)
    seg, _, source = _norm_source(fd, inputs)
    before, loop = _row_loop(source)
    (w,) = [k for k, ld in enumerate(seg.loads) if ld.offset.coeff(_outer_var(seg)) == 0]
    # the kernel's argument of that load is read before the rows, and never inside them
    arg = re.search(rf"cl{w}\[c \* 8 \+ v\] = x{w}\.v\[v\]", before)
    assert arg is not None and f"cl{w}[c * 8 + v] = x{w}" not in loop
    assert f"cl{w}[" in loop  # read from its registers by the passes


def _outer_var(seg):  # noqa: ANN001, ANN202
    from tunefuse.planning.indexing import Var

    return Var(0, seg.extents[0])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    "name, dtype, rows, cols",
    [
        ("layernorm", DataType.BFloat16, 10000, 3000),
        ("layernorm", DataType.BFloat16, 16384, 1536),
        ("rmsnorm", DataType.BFloat16, 16384, 1024),
        ("layernorm", DataType.Float, 16384, 1024),
    ],
)
def test_a_fused_kernel_is_compiled_to_fit_the_blocks_its_row_groups_count_on(
    name, dtype, rows, cols, arch
):
    device = PROFILES[arch]
    fd, inputs = _backward(name, rows, cols, dtype)
    seg, p, source = _norm_source(fd, inputs, device)
    assert seg.column_partials
    per_sm = seg.column_groups // p.rows_per_block // device.sm_count
    assert per_sm == normalization.partial_blocks_resident(seg, device, p)
    threads = p.threads_r * p.rows_per_block
    bounds = re.search(r"__launch_bounds__\((\d+)(?:, (\d+))?\)", source)
    assert int(bounds.group(1)) == threads
    assert int(bounds.group(2) or 1) == per_sm == partial_blocks(seg, device, p)


def test_tuned_params_are_not_squeezed_into_the_default_layouts_residency():
    """A tuner's layout of more threads than G was sized for asks only for what its own
    estimate fits (3 blocks of 256 where G counts on 6 of 128)."""
    from dataclasses import replace

    fd, inputs = _backward("layernorm", 16384, 1024, DataType.BFloat16)
    seg, p, _ = _norm_source(fd, inputs)
    wide = replace(p, threads_r=256, elements_per_thread=8)  # a vector a thread, half idle
    assert normalization.is_valid(seg, H100, wide) is None
    fits = normalization.partial_blocks_resident(seg, H100, wide)
    assert partial_blocks(seg, H100, wide) == min(
        fits, seg.column_groups // wide.rows_per_block // H100.sm_count
    )
    assert partial_blocks(seg, H100, wide) < seg.column_groups // H100.sm_count


def test_kernels_without_column_partials_keep_plain_launch_bounds():
    fd = build(ZOO["softmax"], DataType.BFloat16)
    seg, p, source = _norm_source(fd, inputs_for(fd, 4096, 2560, np.random.default_rng(0)))
    assert partial_blocks(seg, H100, p) == 0
    assert re.search(r"__launch_bounds__\(\d+\)", source)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    "name, dtype, cols, ahead",
    [
        ("layernorm", DataType.BFloat16, 1024, True),  # a vector of dy and of x a thread
        ("rmsnorm", DataType.BFloat16, 768, True),
        ("layernorm", DataType.Float, 16, True),  # 4 fp32 elements: one vector too
        ("layernorm", DataType.Float, 33, False),  # odd rows: no vector to read ahead
        ("layernorm", DataType.BFloat16, 2560, False),  # 16 elements: two vectors in flight
        ("rmsnorm", DataType.Float, 1024, False),
    ],
)
def test_a_share_of_one_vector_is_read_a_row_ahead(name, dtype, cols, ahead, arch):
    """A kernel taking column sums in parts whose thread holds one vector of each row input
    loads the next row's (and its mean and rstd) before it reduces this one; the register
    estimate G is sized by counts those raw words; it compiles for every arch."""
    from tunefuse.compiler import compile_kernel

    fd, inputs = _backward(name, 300000 if cols < 64 else 16384, cols, dtype)
    seg, p, source = _norm_source(fd, inputs, PROFILES[arch])
    assert seg.column_partials
    loop_head, loop = _row_loop(source)
    ahead_loads = normalization.prefetched_row_loads(seg, p.elements_per_thread)
    assert bool(ahead_loads) == ahead
    assert ("nx" in loop_head and "const int tf_next" in loop) == ahead
    if ahead:
        words = sum(
            -(-p.elements_per_thread * seg.loads[k].dtype.itemsize // 4) for k in ahead_loads
        )
        scalars = normalization.prefetched_row_scalars(seg, p.elements_per_thread)
        assert len(scalars) == (2 if name == "layernorm" else 1)  # mean, rstd / rstd
        assert "rs%d" % scalars[0] in loop
        assert normalization.partial_registers(seg, p) == normalization.held_registers(
            seg, p.elements_per_thread
        )
        without = len(normalization.held_row_inputs(seg)) + len(seg.column_partials)
        assert normalization.partial_registers(seg, p) == (
            p.elements_per_thread * without
            + words
            + 2 * len(scalars)
            + normalization.PARTIAL_OTHER_REGISTERS
        )
    name_ = source[source.index("tf_normalization_") :].split("(")[0]
    compile_kernel(source, name_, arch)


@pytest.mark.parametrize(
    "pattern,dtype,shape",
    [
        ("column_layernorm", DataType.BFloat16, (23, 350001)),  # threads_r 2, rows a lane
        ("column_layernorm", DataType.Float, (4, 571459)),  # one thread a column
        ("layernorm", DataType.BFloat16, (4096, 2048)),  # an inner row
        ("rmsnorm", DataType.Float, (1024, 4096)),
    ],
)
def test_a_rows_invariant_ops_are_computed_once_a_row(pattern, dtype, shape):
    """Codegen 30 (`_Emitter.row_invariants`): a layernorm's rsqrt(var + eps), computed from
    the row's reductions and a constant alone, is emitted once at the row's scope, before
    the output pass's element loop, not in it (column_layernorm bf16 [23, 350001]: 25
    MUFU.RSQ for 24 elements a thread before); the element loop reads it by name."""
    from test_reduction_defaults import pattern_plan

    plan = pattern_plan(pattern, shape, dtype)
    (seg,) = plan.segments
    p = normalization.default_params(seg, H100)
    source = generate(seg, p, H100, {b.id: b.dtype for b in plan.buffers}).source
    body = source.split("__global__", 1)[1]
    (rsqrt,) = re.findall(r"const float (t\d+) = tf_rsqrt\(", body)
    output_pass = body.split("= tf_rsqrt(", 1)[1].split(f"B{seg.stores[0].buffer}[", 1)[0]
    # the element loop opens after it (before codegen 30 it was computed inside that loop)
    assert "for (int c = 0;" in output_pass, output_pass
    assert re.search(rf"\* {rsqrt}\)", output_pass), output_pass


def test_a_lanes_own_totals_keep_their_ops_in_the_lane():
    """With a vector of outputs a lane each lane's totals are its own (red<i>_<k>_v[v]):
    their ops stay in the lane's loop (`row_invariants` takes none), and the kernel
    compiles."""
    from test_reduction_defaults import pattern_plan

    from tunefuse.compiler import compile_kernel

    plan = pattern_plan("column_layernorm", (12, 540336), DataType.BFloat16)
    (seg,) = plan.segments
    p = normalization.default_params(seg, H100)
    assert p.vector > 1 and not p.inner, p
    kernel = generate(seg, p, H100, {b.id: b.dtype for b in plan.buffers})
    (operand,) = re.findall(r"= tf_rsqrt\((t\d+)\);", kernel.source)
    (value,) = re.findall(rf"const float {operand} = ([^;]*);", kernel.source)
    assert "_v[v]" in value, value
    assert compile_kernel(kernel.source, kernel.name, "sm_90").cubin
