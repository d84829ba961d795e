"""A normalization along a strided dim (the innermost dim not reduced) takes the outputs
along x and a row in the registers of the threads along y (no GPU): the default over a
surface of shapes, and the measured points."""

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_codegen_compile import ARCHS
from test_gpu_strided_norms import middle_softmax
from test_pointwise_defaults import view

from tunefuse import DataType, FusionDefinition
from tunefuse.codegen import generate
from tunefuse.compiler import compile_kernel
from tunefuse.device_info import A100, H100
from tunefuse.planning.kernel_ir import SchedulerKind
from tunefuse.schedulers import normalization, reduction


def norm_segment(shape, dtype, device):  # noqa: ANN001, ANN201
    """The softmax's normalization kernel, or None where the plan splits it into a pass a
    kernel (too few outputs for the length of their rows: `normalization.split_reason`)."""
    with FusionDefinition() as fd:
        middle_softmax(fd, dtype)
    segments = fd.plan([view(shape, dtype)], device=device).segments
    norms = [s for s in segments if s.scheduler is SchedulerKind.NORMALIZATION]
    return norms[0] if len(segments) == 1 and norms else None


@given(
    n=st.integers(1, 64),
    c_log=st.integers(1, 15),
    c_odd=st.sampled_from([0, 1, 3]),
    l_log=st.integers(1, 16),
    dtype=st.sampled_from([DataType.Float, DataType.BFloat16]),
    device=st.sampled_from([H100, A100]),
)
@settings(max_examples=300, deadline=None)
def test_strided_rows_take_outputs_along_x(n, c_log, c_odd, l_log, dtype, device):
    c = (1 << c_log) + c_odd
    seg = norm_segment((n, c, 1 << l_log), dtype, device)
    if seg is None:
        return
    p = normalization.default_params(seg, device)
    assert normalization.is_valid(seg, device, p) is None
    n_out, n_red = reduction.sizes(seg)
    run_bytes = reduction.outputs_run(seg) * dtype.itemsize
    assert reduction.outputs_run(seg) == 1 << l_log
    if p.inner:
        # runs of a few bytes: a held row's threads along x, doubled to a 64-byte patch
        # while a thread keeps 4 elements of its row
        assert p.cache_row and run_bytes <= normalization.STRIDED_INNER_RUN_BYTES
        assert 1 < p.threads_r <= reduction.WARP and p.rows_per_lane == 1
        assert p.threads_r * p.elements_per_thread >= n_red
        assert p.elements_per_thread <= normalization.STRIDED_ELEMENTS
        doubled = normalization.vectors_of_share(n_red, 2 * p.threads_r, 1)
        assert (
            p.threads_r * run_bytes >= normalization.STRIDED_INNER_SPAN_BYTES
            or p.threads_r == reduction.WARP
            or doubled < normalization.STRIDED_INNER_ELEMENTS
        )
        return
    # held rows of short runs stay outer where one thread holds a row too short to share
    # (a thread keeps 4 elements), with rows a lane, or in a block of less than a warp (an
    # inner layout's rows fill warps)
    shared = normalization.vectors_of_share(n_red, 2 * p.threads_r, 1)
    assert not (p.cache_row and run_bytes <= normalization.STRIDED_INNER_RUN_BYTES) or (
        (p.threads_r == 1 and shared < normalization.STRIDED_INNER_ELEMENTS)
        or p.rows_per_lane > 1
        or p.threads_r > normalization.STRIDED_HELD_THREADS
        or p.threads_r * p.rows_per_block < reduction.WARP
    )
    if p.vector > 1 and not p.cache_row:
        # re-read rows of 2-byte elements: 4-byte lanes, 32 x 32 threads, a block an SM
        assert p.vector * dtype.itemsize <= normalization.REREAD_LANE_BYTES
        assert reduction.output_vector(seg) % p.vector == 0
        assert (p.threads_r, p.rows_per_block, p.unroll) == (32, 32, 4)
        assert -(-n_out // normalization.outputs_a_block(seg, p)) >= device.sm_count
        return
    if p.vector > 1 and p.threads_r > normalization.STRIDED_HELD_THREADS:
        # rows of 257-1024 with 16-byte lanes, held where their blocks fill half the GPU
        assert p.vector * dtype.itemsize == 16 and p.cache_row
        assert p.threads_r <= normalization.STRIDED_WIDE_HELD_THREADS
        assert p.threads_r * p.rows_per_block <= normalization.STRIDED_WIDE_BLOCK
        assert normalization.STRIDED_ELEMENTS >= p.elements_per_thread
        assert p.threads_r * p.elements_per_thread >= n_red
        blocks = -(-n_out // (p.rows_per_block * p.vector))
        resident = device.sm_count * device.max_threads_per_sm
        assert 2 * blocks * p.threads_r * p.rows_per_block >= resident
        return
    if p.vector == 2 and p.elements_per_thread > normalization.STRIDED_VECTOR_ELEMENTS:
        # rows of 2-byte elements too long for 4 outputs of 8: a pair of 16 at most
        assert dtype.itemsize == 2 and p.cache_row and p.rows_per_lane == 1
        assert reduction.output_vector(seg) % 2 == 0
        assert p.elements_per_thread <= normalization.STRIDED_PAIR_ELEMENTS
        assert p.threads_r * p.elements_per_thread >= n_red
        assert p.threads_r <= normalization.STRIDED_HELD_THREADS
        assert p.rows_per_block * p.vector <= normalization.STRIDED_BLOCK_ROWS
        return
    if p.vector > 1:  # short rows: a vector of outputs a lane, 8 elements of each at most
        assert p.vector <= normalization.STRIDED_VECTOR
        assert reduction.output_vector(seg) % p.vector == 0
        assert p.cache_row and p.rows_per_lane == 1
        assert p.elements_per_thread <= normalization.STRIDED_VECTOR_ELEMENTS
        assert p.threads_r * p.elements_per_thread >= n_red
        assert p.threads_r <= normalization.STRIDED_HELD_THREADS
        assert p.threads_r * p.rows_per_block <= normalization.STRIDED_VECTOR_THREADS
        return
    vector_fits = reduction.output_vector(seg) > 1
    short = -(-n_red // normalization.STRIDED_VECTOR_ELEMENTS) <= normalization.STRIDED_HELD_THREADS
    assert not (vector_fits and short)
    pairs = -(-n_red // normalization.STRIDED_PAIR_ELEMENTS) <= normalization.STRIDED_HELD_THREADS
    assert not (vector_fits and pairs and dtype.itemsize == 2)
    held = -(-n_red // normalization.STRIDED_ELEMENTS) <= normalization.STRIDED_HELD_THREADS
    assert p.cache_row == held  # rows that 16 threads of 16 elements hold; longer re-read
    if p.cache_row:
        assert p.threads_r * p.elements_per_thread >= n_red
        assert p.elements_per_thread <= normalization.STRIDED_ELEMENTS
        # a block row reads 32 outputs or more (fewer only where there are fewer)
        assert p.rows_per_block >= min(32, 2 ** math.ceil(math.log2(n_out)))
        # rows a lane only while a lane's loads come to less than 32 bytes (64 for a middle
        # dim's rows of 4 threads or more: heuristics 66)
        lane_bytes = p.elements_per_thread * dtype.itemsize
        wide = (
            reduction.outputs_run(seg) < n_out and p.threads_r >= normalization.MIDDLE_LANE_THREADS
        )
        most = normalization.MIDDLE_LANE_BYTES if wide else normalization.STRIDED_LANE_BYTES
        assert (p.rows_per_lane // 2) * lane_bytes < most
        assert p.rows_per_lane * p.elements_per_thread <= reduction.LANE_ELEMENTS
        return
    assert p.rows_per_lane == 1 and p.unroll == 4
    if not takes_whole_slabs(seg, device):
        assert p.threads_r * p.rows_per_block == 1024 or p.rows_per_block < 32
        return
    assert_whole_slabs(seg, device, p, dtype)


def takes_whole_slabs(seg, device) -> bool:  # noqa: ANN001
    """Whether re-read or staged strided rows take a block a slab: runs shorter than a warp,
    and slabs enough to keep the SMs busy."""
    n_out, _ = reduction.sizes(seg)
    run = reduction.outputs_run(seg)
    return run < reduction.WARP and normalization.sm_balance(-(-n_out // run), device) >= 0.8


def assert_whole_slabs(seg, device, p, dtype) -> None:  # noqa: ANN001
    """A block a slab's outputs (a warp's loads consecutive), 32 threads a row doubled while
    a thread's share is over 128 bytes (128 threads at most), staged where the run is under
    8 elements and the slab fits."""
    _, n_red = reduction.sizes(seg)
    run = reduction.outputs_run(seg)
    assert not p.cache_row and p.rows_per_lane == 1 and p.unroll == 4
    assert p.rows_per_block == run and p.vector == 1 and p.elements_per_thread == 1
    assert 32 <= p.threads_r <= 128 and p.threads_r * run <= device.max_threads_per_block
    halved = -(-n_red // (p.threads_r // 2)) * dtype.itemsize
    assert p.threads_r == 32 or halved > normalization.SLAB_SHARE_BYTES
    doubled = -(-n_red // p.threads_r) * dtype.itemsize
    assert (
        p.threads_r == 128
        or 2 * p.threads_r * run > device.max_threads_per_block
        or doubled <= normalization.SLAB_SHARE_BYTES
    )
    staged = replace(p, shared_row=True)
    assert p.shared_row == (run < 8 and normalization.is_valid(seg, device, staged) is None)


@given(
    n=st.integers(50, 60000),
    c=st.integers(257, 40000),
    run=st.integers(2, 40),
    dtype=st.sampled_from([DataType.Float, DataType.BFloat16]),
    device=st.sampled_from([H100, A100]),
)
@settings(max_examples=300, deadline=None)
def test_rows_too_long_to_hold_in_runs_shorter_than_a_warp_take_a_block_a_slab(
    n, c, run, dtype, device
):
    """Strided rows too long for registers whose outputs' run (L of [N, C, L]) is shorter
    than a warp: a block a slab's L outputs where the N slabs keep the SMs busy
    (`normalization.SLAB_THREADS`); valid either way."""
    seg = norm_segment((n, c, run), dtype, device)
    if seg is None:  # a kernel a pass (`split_reason`)
        return
    p = normalization.default_params(seg, device)
    assert normalization.is_valid(seg, device, p) is None
    if p.cache_row or not takes_whole_slabs(seg, device):
        assert p.rows_per_block != run or p.cache_row or run >= 32 or run == 1
        return
    assert_whole_slabs(seg, device, p, dtype)


def test_whole_slabs_at_the_measured_points():
    """H200 (`benchmarks/surface/whole_slabs_2026-11-27/`): (threads a row, staged) of the
    probed cells; fewer slabs than keep the SMs busy, and runs of a warp, keep the old
    layout."""

    def params(shape, dtype):  # noqa: ANN001, ANN202
        seg = norm_segment(shape, dtype, H100)
        return None if seg is None else normalization.default_params(seg, H100)

    for shape, dtype, want in [
        ((9005, 1235, 6), DataType.Float, (64, 6, True)),
        ((5710, 1203, 2), DataType.Float, (64, 2, True)),
        ((8488, 559, 3), DataType.Float, (32, 3, True)),
        ((16021, 1045, 2), DataType.BFloat16, (32, 2, True)),
        ((2604, 519, 15), DataType.BFloat16, (32, 15, False)),
        ((7213, 5534, 2), DataType.BFloat16, (128, 2, True)),
    ]:
        p = params(shape, dtype)
        assert (p.threads_r, p.rows_per_block, p.shared_row) == want, (shape, p)
    for shape, dtype in [
        ((148, 17874, 2), DataType.BFloat16),  # 148 slabs: 56% of the SMs' time
        ((56, 13520, 3), DataType.Float),
        ((300, 1067, 14), DataType.Float),
        ((4000, 1000, 32), DataType.Float),  # a warp's run
    ]:
        p = params(shape, dtype)
        assert p is None or p.rows_per_block != shape[2], (shape, p)


def test_the_measured_points():
    def params(shape):
        return normalization.default_params(norm_segment(shape, DataType.Float, H100), H100)

    # (shape, threads, lanes a block, elements a thread, rows a lane, vector); 0 elements:
    # re-read. Rows of at most 128 take 4 outputs a lane, 8 elements a thread at most.
    for shape, threads, outputs, ept, lanes, vector in [
        ((32, 256, 3136), 16, 32, 16, 1, 1),
        ((64, 19, 65536), 4, 32, 5, 1, 4),
        ((8, 64, 262144), 8, 16, 8, 1, 4),
        ((2048, 12, 1024), 2, 64, 6, 1, 4),
        ((16, 3, 1048576), 1, 128, 3, 1, 4),
        ((16, 3, 1048575), 1, 256, 3, 4, 1),  # an odd extent: no vector, 4 rows a lane
        ((16, 300, 65536), 32, 8, 10, 1, 4),  # 16-byte lanes: held, 4 outputs a lane
        ((1024, 1024, 64), 64, 4, 16, 1, 4),  # 16-byte lanes: held, 4 outputs a lane
    ]:
        p = params(shape)
        got = (p.threads_r, p.rows_per_block, p.elements_per_thread if p.cache_row else 0)
        assert (*got, p.rows_per_lane, p.vector) == (threads, outputs, ept, lanes, vector), shape
        assert not p.inner
    bf16 = [  # (shape, threads, rows a lane, vector)
        ((1048576, 2, 64), 1, 1, 4),
        ((262144, 8, 64), 1, 1, 4),
        ((128, 96, 4096), 16, 1, 4),
        ((65536, 32, 64), 4, 1, 4),
        ((1048576, 2, 63), 1, 8, 1),  # 4 bytes a lane and no vector: 8 rows a lane
        ((128, 96, 4095), 8, 2, 1),  # 12 elements (24 bytes) in each of 8 threads
        ((300, 160, 96), 16, 1, 2),  # rows of 129-256: a pair of outputs a lane
        ((2000, 200, 30), 16, 1, 2),
        ((8192, 256, 64), 16, 1, 2),
        ((2000, 200, 31), 16, 1, 1),  # an odd extent: one a lane
    ]
    for shape, threads, lanes, vector in bf16:
        seg = norm_segment(shape, DataType.BFloat16, H100)
        p = normalization.default_params(seg, H100)
        assert (p.threads_r, p.rows_per_lane, p.vector) == (threads, lanes, vector), shape
    reread = normalization.default_params(
        norm_segment((1024, 2048, 64), DataType.BFloat16, H100), H100
    )
    assert not reread.cache_row and reread.threads_r == 32  # held by 128 threads before
    long_rows = norm_segment((2, 900, 4096), DataType.Float, H100)  # 256 blocks of 32
    assert not normalization.default_params(long_rows, H100).cache_row  # re-read
    # 9000 rows of those: 295 MB re-read by the resident blocks, past the L2
    assert norm_segment((2, 9000, 4096), DataType.Float, H100) is None
    assert norm_segment((2, 9000, 16), DataType.Float, H100) is None  # 1 block: a kernel a pass


def test_strided_rows_re_read_from_beyond_the_l2_run_a_kernel_a_pass():
    """A strided row re-read by its block comes back from L2 only while the rows the
    resident blocks re-read fit in it; past that, a kernel a pass (measured: softmax over the
    middle dim fp32 [64, 16384, 64] 315.0 -> 285.6 us, bf16 [64, 32768, 64] 434 -> 405, fp32
    [4, 4096, 8192] in 1024 blocks re-reading 132 MB). Where they fit (bf16 [1024, 2048, 64]:
    33 MB; 329 us one kernel, 372 split), and for contiguous rows, one kernel; bf16 rows of
    two outputs a lane keep one kernel past the L2 (the next test)."""
    for shape, dtype in [
        ((64, 16384, 64), DataType.Float),
        ((64, 32768, 64), DataType.BFloat16),
        ((4, 4096, 8192), DataType.Float),
        ((256, 4096, 64), DataType.Float),
    ]:
        assert norm_segment(shape, dtype, H100) is None, shape
    for shape, dtype in [
        ((64, 1024, 64), DataType.Float),
        ((64, 2048, 64), DataType.BFloat16),
    ]:
        seg = norm_segment(shape, dtype, H100)
        p = normalization.default_params(seg, H100)
        blocks = -(-reduction.sizes(seg)[0] // normalization.outputs_a_block(seg, p))
        resident = normalization.rereads_resident_bytes(seg, H100, p, blocks)
        assert not p.cache_row and p.vector == 1 and resident <= H100.l2_bytes, shape
        assert normalization.split_reason(seg, H100) is None


def test_re_read_bf16_rows_take_two_outputs_a_lane_and_keep_one_kernel_past_the_l2():
    """Re-read strided rows of bf16 take 2 outputs a lane (4-byte lanes) where 64 outputs a
    block give every SM a block, and keep their one kernel though their re-reads pass the L2
    (H100: softmax over the middle dim bf16 [256, 8192, 64] 367.7 us split, 300.8 one kernel
    2 a lane, torch.compile 358.9; [1024, 2048, 64] 329.4 -> 299.6; layernorm over dim 0
    [2048, 65536] 343.7 -> 295.7). Where 64 a block leave SMs without one ([64, 2048, 64]:
    64 blocks, 27.5 -> 35.7 us) one a lane stays."""
    for shape in [(256, 8192, 64), (1024, 2048, 64), (512, 4096, 64), (8192, 300, 64)]:
        seg = norm_segment(shape, DataType.BFloat16, H100)
        assert seg is not None, shape  # one kernel
        p = normalization.default_params(seg, H100)
        assert not p.cache_row and (p.vector, p.threads_r, p.rows_per_block) == (2, 32, 32), shape
    few = normalization.default_params(norm_segment((64, 2048, 64), DataType.BFloat16, H100), H100)
    assert few.vector == 1
    # one output a lane past the L2 still runs a kernel a pass; fp32 lanes are 4 bytes already
    assert norm_segment((64, 32768, 64), DataType.BFloat16, H100) is None
    assert norm_segment((64, 16384, 64), DataType.Float, H100) is None


@given(
    n=st.integers(1, 64),
    c_log=st.integers(9, 16),
    l_log=st.integers(5, 14),
    dtype=st.sampled_from([DataType.Float, DataType.BFloat16]),
    device=st.sampled_from([H100, A100]),
)
@settings(max_examples=200, deadline=None)
def test_a_re_read_strided_row_stays_one_kernel_only_where_its_re_reads_fit_the_l2(
    n, c_log, l_log, dtype, device
):
    """Over a surface of strided softmaxes: every one-kernel plan that re-reads its rows
    one output a lane keeps the rows its resident blocks re-read within the L2, and every
    one its SMs balanced; each streams its output pass (evict_first) exactly where those
    re-reads fit the L2 and the input does not."""
    seg = norm_segment((n, 1 << c_log, 1 << l_log), dtype, device)
    if seg is None:
        return
    p = normalization.default_params(seg, device)
    if p.cache_row or p.shared_row:
        return
    n_out, n_red = reduction.sizes(seg)
    blocks = -(-n_out // normalization.outputs_a_block(seg, p))
    resident = normalization.rereads_resident_bytes(seg, device, p, blocks)
    if p.vector == 1:  # lanes of a vector keep one kernel past the L2
        assert resident <= device.l2_bytes
    assert normalization.sm_balance(blocks, device) >= normalization.MIN_SM_BALANCE
    assert p.evict_first == (resident <= device.l2_bytes < n_out * n_red * dtype.itemsize)


def test_rows_along_the_innermost_dim_keep_their_layout():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        e = fd.ops.exp(fd.ops.sub(x, fd.ops.max(x, dims=[1], keepdim=True)))
        fd.add_output(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)))
    (seg,) = fd.plan([np.zeros((64, 4096), np.float32)], device=H100).segments
    assert normalization.default_params(seg, H100).inner


def test_a_re_reading_kernel_streams_its_output_pass_only_where_its_re_reads_fit_the_l2():
    """evict_first on a re-reading normalization (its output pass and stores evict-first)
    where the rows its resident blocks re-read fit the L2 and the input does not; measured
    (H100, bf16): softmax over the middle dim [4096, 512, 64] 255.6 -> 242.5 us on, [256,
    8192, 64] 304.3 -> 331.7 had it been on (256 MB re-read), [64, 2048, 64] (16 MB, the L2
    holds it whole) 27.6 -> 29.4."""
    on = norm_segment((4096, 512, 64), DataType.BFloat16, H100)
    p = normalization.default_params(on, H100)
    assert not p.cache_row and not p.shared_row and p.evict_first
    for shape in [(256, 8192, 64), (64, 2048, 64), (1024, 2048, 64)]:
        p = normalization.default_params(norm_segment(shape, DataType.BFloat16, H100), H100)
        assert not p.cache_row and not p.evict_first, shape


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    "shape, dtype, inner, vector",
    [
        ((300, 31, 5), DataType.BFloat16, True, 1),  # short runs: 8 threads along x
        ((1000, 11, 2), DataType.Float, True, 2),
        ((500, 28, 4), DataType.BFloat16, True, 4),
        ((3000, 12, 3), DataType.Float, True, 1),  # a row one thread held, 2 along x now
        ((300, 160, 96), DataType.BFloat16, False, 2),  # a pair of 2-byte outputs a lane
        ((40, 200, 6), DataType.BFloat16, True, 2),  # a pair, its 16 threads along x
    ],
)
def test_short_run_and_pair_layouts_compile(shape, dtype, inner, vector, arch):
    """The defaults' kernels for short runs of outputs (a row's threads along x, meeting by
    shuffles: no barrier) and for pairs of 2-byte outputs compile for sm_80 and sm_90 (the
    GPU tests, test_gpu_strided_norms, check their values)."""
    seg = norm_segment(shape, dtype, H100)
    p = normalization.default_params(seg, H100)
    assert (p.inner, p.vector) == (inner, vector)
    with FusionDefinition() as fd:
        middle_softmax(fd, dtype)
    plan = fd.plan([view(shape, dtype)], device=H100)
    source = generate(seg, p, H100, {b.id: b.dtype for b in plan.buffers}).source
    if inner:
        assert "__shfl_xor_sync" in source and "__syncthreads" not in source
    name = source[source.index("tf_normalization_") :].split("(")[0]
    assert compile_kernel(source, name, arch).cubin


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    "shape, dtype, staged",
    [
        ((1188, 1235, 6), DataType.Float, True),  # 64 threads a row, the slab staged
        ((1188, 1045, 2), DataType.BFloat16, True),
        ((1188, 519, 15), DataType.BFloat16, False),  # a run of 15: re-read
        ((1188, 5534, 2), DataType.BFloat16, True),  # 128 threads a row
    ],
)
def test_whole_slab_layouts_compile(shape, dtype, staged, arch):
    """The defaults' kernels of a block a slab compile for sm_80 and sm_90 (the GPU tests,
    test_gpu_strided_norms, check their values)."""
    seg = norm_segment(shape, dtype, H100)
    p = normalization.default_params(seg, H100)
    assert (p.rows_per_block, p.shared_row) == (shape[2], staged), p
    with FusionDefinition() as fd:
        middle_softmax(fd, dtype)
    plan = fd.plan([view(shape, dtype)], device=H100)
    kernel = generate(seg, p, H100, {b.id: b.dtype for b in plan.buffers})
    assert compile_kernel(kernel.source, kernel.name, arch).cubin
