"""GPU: split reductions (a row's reduced extent shared by several blocks, the last to arrive
combining the shares) compute what the reference computes, for every reduction family, inner
and outer layouts, even and uneven shares, empty shares, and are deterministic."""

import dataclasses
import functools
import os

import numpy as np
import pytest
from fusion_zoo import col_sum
from test_gpu_execute import TOL, to_device, to_host

from tunefuse import DataType, FusionDefinition, reference

pytestmark = pytest.mark.gpu


def _var_mean(fd, dtype, dim, rank=2):
    x = fd.define_tensor(shape=[-1] * rank, dtype=dtype)
    var, mean = fd.ops.var_mean(x, dims=[dim], correction=1)
    fd.add_output(var)
    fd.add_output(mean)


_var_mean0 = functools.partial(_var_mean, dim=0)  # over columns: BatchNorm's statistics
_row_var_mean = functools.partial(_var_mean, dim=1)
_middle_var_mean = functools.partial(_var_mean, dim=1, rank=3)  # over [A, C, L]'s C


def _row_stats(fd, dtype):
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    fd.add_output(fd.ops.sum(x, dims=[1]))
    fd.add_output(fd.ops.max(x, dims=[1]))
    fd.add_output(fd.ops.mean(fd.ops.mul(x, x), dims=[1]))


def middle_reduction(fd, dtype, op):
    """`op` ("min", "prod", ...) over the middle dim of a rank-3 input."""
    x = fd.define_tensor(shape=[-1, -1, -1], dtype=dtype)
    fd.add_output(getattr(fd.ops, op)(x, dims=[1]))


_middle_min = functools.partial(middle_reduction, op="min")


def int_sum0(fd, dtype):
    x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int32)
    fd.add_output(fd.ops.sum(x, dims=[0]))


CASES = [
    (_var_mean0, DataType.Float, (20001, 37)),
    (_var_mean0, DataType.BFloat16, (4099, 130)),
    (_row_stats, DataType.Float, (3, 100003)),
    (_row_stats, DataType.Half, (5, 8192)),
    (_middle_min, DataType.Float, (3, 5001, 9)),
    (int_sum0, DataType.Int32, (7777, 5)),
]


def _inputs(dtype, shape, rng):
    if dtype is DataType.Int32:
        return [rng.integers(-1000, 1000, shape).astype(np.int32)]
    return [rng.standard_normal(shape).astype(dtype.numpy) + np.float32(3).astype(dtype.numpy)]


def run_with_reduction_params(fd, inputs, split=None, kind="reduction", **changes):
    """The fusion run with its `kind` kernels' default params changed: `split` (None: the
    default's) and any other `changes`, which must be valid; the host results and the
    launches."""
    from tunefuse.runtime.executor import Executor
    from tunefuse.schedulers import scheduler_for

    if split is not None:
        changes["split"] = split

    def choose(seg, device):
        scheduler = scheduler_for(seg.scheduler)
        params = scheduler.default_params(seg, device)
        if seg.scheduler.value != kind or not changes:
            return params
        changed = dataclasses.replace(params, **changes)
        # The executor quietly runs the defaults in place of invalid params; a test that
        # asks for params must run them, so an invalid ask fails here, by name.
        why = scheduler.is_valid(seg, device, changed)
        assert why is None, f"{kind} params {changes} are invalid for {seg.kernel_key}: {why}"
        return changed

    executor = Executor(fd.fusion, params_source=choose)
    got = [to_host(g) for g in executor.run(to_device(inputs))]
    launched = [r.launch for exe in executor.plans.values() for r in exe.recipes if r.launch.numel]
    return got, launched


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("split", [None, 2, 3, 7, 64, 100_000])
def test_split_reductions_agree_with_the_reference(case, split, rng):
    build, dtype, shape = CASES[case]
    with FusionDefinition() as fd:
        build(fd, dtype)
    inputs = _inputs(dtype, shape, rng)
    n_red = max(shape)
    if split is not None and split > 2 * n_red:
        split = n_red + 5  # more shares than elements: some are empty
    if split is not None:
        from tunefuse.schedulers.reduction import MAX_SPLIT

        split = min(split, MAX_SPLIT)  # as many as the grid allows
    got, launched = run_with_reduction_params(fd, inputs, split)
    if split is not None:
        assert any(k.params["split"] == split and k.workspace for k in launched)
    for g, e in zip(got, reference.run(fd.fusion, inputs)):
        assert g.shape == e.shape and g.dtype == e.dtype
        out_dtype = next(d for d in DataType if d.numpy == e.dtype)
        rtol, atol = max(TOL[out_dtype], TOL[dtype])
        np.testing.assert_allclose(
            g.astype(np.float64), e.astype(np.float64), rtol=rtol * 4, atol=atol * 4
        )


def test_the_default_splits_a_reduction_with_few_outputs_and_is_deterministic(rng):
    """BatchNorm's statistics (var_mean over dim 0, 256 channels): the default heuristic
    splits the rows, and two runs give the same bits (shares combined in share order)."""
    with FusionDefinition() as fd:
        _var_mean0(fd, DataType.Float)
    inputs = [rng.standard_normal((65536, 256)).astype(np.float32)]
    first, launched = run_with_reduction_params(fd, inputs, None)
    assert launched[0].params["split"] > 1 and launched[0].grid[1] == launched[0].params["split"]
    for _ in range(3):
        again, _ = run_with_reduction_params(fd, inputs, None)
        for a, b in zip(first, again):
            assert np.array_equal(a, b)
    for g, e in zip(first, reference.run(fd.fusion, inputs)):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "build,dtype,shape",
    [(_row_stats, DataType.Float, (1001, 37)), (_row_var_mean, DataType.BFloat16, (777, 64))],
)
@pytest.mark.parametrize("threads_r", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("rows_per_block", [1, "a warp", "256 threads"])
@pytest.mark.parametrize("split", [None, 3])
def test_rows_reduced_by_lane_groups_smaller_than_a_warp(
    build, dtype, shape, threads_r, rows_per_block, split, rng
):
    """Fewer than 32 lanes a row: the lanes combine by shuffles inside their group (a block of
    fewer than 32 threads masks the lanes it has), alone and as the split's second reduce."""
    with FusionDefinition() as fd:
        build(fd, dtype)
    inputs = _inputs(dtype, shape, rng)
    rows = {1: 1, "a warp": 32 // threads_r, "256 threads": 256 // threads_r}[rows_per_block]
    got, launched = run_with_reduction_params(
        fd, inputs, split, threads_r=threads_r, rows_per_block=rows, inner=True
    )
    assert all(k.params["threads_r"] == threads_r for k in launched)
    for g, e in zip(got, reference.run(fd.fusion, inputs)):
        out_dtype = next(d for d in DataType if d.numpy == e.dtype)
        rtol, atol = max(TOL[out_dtype], TOL[dtype])
        np.testing.assert_allclose(
            g.astype(np.float64), e.astype(np.float64), rtol=rtol * 4, atol=atol * 4
        )


@pytest.mark.parametrize(
    "build,dtype,shape",
    [
        (functools.partial(middle_reduction, op="sum"), DataType.Float, (100, 701, 7)),
        (functools.partial(middle_reduction, op="sum"), DataType.BFloat16, (2000, 257, 2)),
        (functools.partial(middle_reduction, op="sum"), DataType.Float, (5, 513, 31)),
        (functools.partial(middle_reduction, op="sum"), DataType.BFloat16, (4, 100003, 6)),
        (functools.partial(middle_reduction, op="max"), DataType.Half, (6, 65537, 3)),
        (_middle_var_mean, DataType.Float, (33, 4099, 5)),
        (_middle_var_mean, DataType.BFloat16, (12, 12345, 9)),
    ],
)
def test_middle_reductions_of_runs_shorter_than_a_warp_take_a_block_a_slab(
    build, dtype, shape, rng
):
    """A strided reduction whose outputs' run is shorter than a warp (L of [A, C, L]) takes
    a block of one slab's L outputs (`reduction.SLAB_THREADS_R`; 2-byte outputs in pairs
    where L is even), split or not; the results agree with the reference."""
    with FusionDefinition() as fd:
        build(fd, dtype)
    inputs = _inputs(dtype, shape, rng)
    got, launched = run_with_reduction_params(fd, inputs, None)
    (kernel,) = launched
    slab = kernel.params["rows_per_block"] * kernel.params.get("vector", 1)
    assert not kernel.params["inner"] and slab == shape[2]
    assert kernel.params["threads_r"] >= 16
    for g, e in zip(got, reference.run(fd.fusion, inputs)):
        out_dtype = next(d for d in DataType if d.numpy == e.dtype)
        rtol, atol = max(TOL[out_dtype], TOL[dtype])
        np.testing.assert_allclose(
            g.astype(np.float64), e.astype(np.float64), rtol=rtol * 4, atol=atol * 4
        )


@pytest.mark.parametrize(
    "build,dtype,shape",
    [
        (col_sum, DataType.Float, (6896, 378)),  # split 6 -> 13, the last tile part-full
        (col_sum, DataType.BFloat16, (5085, 848)),
        (col_sum, DataType.Float, (21061, 140)),  # the last share shorter than the rest
        (functools.partial(middle_reduction, op="sum"), DataType.Float, (4, 6844, 93)),
    ],
)
def test_a_strided_sum_on_fewer_blocks_than_sms_splits_into_shorter_shares(
    build, dtype, shape, rng
):
    """Heuristics 53 (`reduction._shorter_shares`): a strided sum split as far as unroll 8
    allows on fewer blocks than SMs takes unroll 4 and more shares; it agrees with the
    reference, and two runs give the same bits."""
    (kernel,) = _defaults_agree_and_repeat(build, dtype, shape, rng)
    assert not kernel.params["inner"] and kernel.params["unroll"] == 4, kernel.params
    assert kernel.params["split"] > 1 and kernel.workspace


@pytest.mark.parametrize(
    "build,dtype,shape,split",
    [
        (_var_mean0, DataType.Float, (6676, 418), True),  # the last tile part-full
        (_var_mean0, DataType.Float, (2904, 1083), False),  # unsplit at 16 rows a block
        (_middle_var_mean, DataType.Float, (4, 5700, 138), True),
        (_middle_var_mean, DataType.BFloat16, (16, 2996, 129), True),
    ],
)
def test_a_strided_welford_on_fewer_blocks_than_sms_takes_half_the_rows_a_block(
    build, dtype, shape, split, rng
):
    """Heuristics 54 (`reduction._shorter_shares`): a strided var_mean split as far as its
    work allows on fewer blocks than SMs (of 132) takes 16 rows a block, not 32, where its grid
    keeps its blocks, and keeps unroll 8; it agrees with the reference, and two runs give the
    same bits."""
    (kernel,) = _defaults_agree_and_repeat(build, dtype, shape, rng)
    params = kernel.params
    assert not params["inner"] and params["rows_per_block"] == 16, params
    assert params["unroll"] == 8 and (params["split"] > 1) == split, params


def _defaults_agree_and_repeat(build, dtype, shape, rng):
    """The launches of `build`'s fusion on `shape` at the defaults, once its results agree
    with the reference and a second run gives the same bits."""
    with FusionDefinition() as fd:
        build(fd, dtype)
    inputs = _inputs(dtype, shape, rng)
    got, launched = run_with_reduction_params(fd, inputs, None)
    again, _ = run_with_reduction_params(fd, inputs, None)
    assert all(np.array_equal(a, b) for a, b in zip(got, again))
    for g, e in zip(got, reference.run(fd.fusion, inputs)):
        out_dtype = next(d for d in DataType if d.numpy == e.dtype)
        rtol, atol = max(TOL[out_dtype], TOL[dtype])
        np.testing.assert_allclose(
            g.astype(np.float64), e.astype(np.float64), rtol=rtol * 4, atol=atol * 4
        )
    return launched


@pytest.mark.parametrize(
    "build,dtype,outputs_in_waves,halved",
    [
        (col_sum, DataType.Float, 1.02, True),  # a few blocks past a wave of 1024 threads
        (col_sum, DataType.Float, 1.2, True),
        (functools.partial(middle_reduction, op="sum"), DataType.Float, 1.45, True),
        (functools.partial(middle_reduction, op="max"), DataType.Float, 1.3, True),
        (col_sum, DataType.Float, 1.7, False),  # the halved blocks would need 4 an SM
        (col_sum, DataType.BFloat16, 1.2, False),  # lanes of one 2-byte element
    ],
)
def test_strided_sums_past_one_wave_take_half_the_threads_a_column(
    build, dtype, outputs_in_waves, halved, rng
):
    """A strided reduction whose tiles take more than one wave of resident blocks, and that
    blocks of half the threads hold in one wave at one block an SM fewer than their threads
    allow (`reduction._one_wave_threads`), runs with half the threads a column of the
    strided layout (on this GPU's SM count); past that, or with lanes of one 2-byte
    element (odd output counts take no vector), it keeps them. The results agree with the
    reference."""
    from tunefuse.runtime.executor import device_info_for
    from tunefuse.schedulers import reduction

    with FusionDefinition() as fd:
        build(fd, dtype)
    n_red = 2101  # 32 threads a column, an odd length
    probe = _inputs(dtype, (n_red, 64) if build is col_sum else (3, n_red, 64), rng)
    device = device_info_for(fd, to_device(probe))
    (seg,) = fd.plan(probe, device=device).segments
    strided = reduction._outer_defaults(seg, device)
    wave = device.sm_count * reduction.resident_blocks(strided, device)
    outputs = round(outputs_in_waves * wave * strided.rows_per_block) | 1  # odd: no vector
    shape = (n_red, outputs) if build is col_sum else (7, n_red, -(-outputs // 7) | 1)
    inputs = _inputs(dtype, shape, rng)
    (seg,) = fd.plan(inputs, device=device).segments
    strided = reduction._outer_defaults(seg, device)
    fewer = dataclasses.replace(strided, threads_r=strided.threads_r // 2)
    spare = device.sm_count * (reduction.resident_blocks(fewer, device) - 1)
    assert wave < reduction.row_tiles(seg, strided)
    wide = strided.vector * dtype.itemsize >= reduction.ONE_WAVE_LANE_BYTES
    assert (reduction.row_tiles(seg, strided) <= spare and wide) is halved
    got, launched = run_with_reduction_params(fd, inputs, None)
    (kernel,) = launched
    assert not kernel.params["inner"] and kernel.params.get("split", 1) == 1
    threads_r = strided.threads_r // 2 if halved else strided.threads_r
    assert kernel.params["threads_r"] == threads_r, kernel.params
    for g, e in zip(got, reference.run(fd.fusion, inputs)):
        out_dtype = next(d for d in DataType if d.numpy == e.dtype)
        rtol, atol = max(TOL[out_dtype], TOL[dtype])
        np.testing.assert_allclose(
            g.astype(np.float64), e.astype(np.float64), rtol=rtol * 4, atol=atol * 4
        )


# -- the workspace: zeroed once per stream, its counters left at zero by every launch ----------
def _split_launcher(fd):
    """The launchers of `fd`'s runner that run a split kernel, and those kernels."""
    launchers = list(fd._runner.launchers.values())
    split = [(ln, k) for ln in launchers for k in ln.kernels if k.workspace is not None]
    assert split, "the default did not split"
    return split


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("split", [None, 3, 100_000])
def test_repeat_calls_on_one_stream_reuse_the_workspace_and_stay_right(case, split, rng):
    """Five calls of one executor on new data each: every launch after the first finds its
    tile counters back at zero (the last share wraps them), so the workspace made and zeroed
    at the first call is the one every later call takes, and each call's results are right."""
    from tunefuse.runtime.executor import Executor
    from tunefuse.schedulers import scheduler_for

    build, dtype, shape = CASES[case]
    with FusionDefinition() as fd:
        build(fd, dtype)

    def choose(seg, device):
        params = scheduler_for(seg.scheduler).default_params(seg, device)
        if seg.scheduler.value != "reduction" or split is None:
            return params
        from tunefuse.schedulers.reduction import MAX_SPLIT

        return dataclasses.replace(params, split=min(split, max(shape) + 5, MAX_SPLIT))

    executor = Executor(fd.fusion, params_source=choose)
    pointers = set()
    for _ in range(5):
        inputs = _inputs(dtype, shape, rng)
        got = [to_host(g) for g in executor.run(to_device(inputs))]
        for g, e in zip(got, reference.run(fd.fusion, inputs)):
            out_dtype = next(d for d in DataType if d.numpy == e.dtype)
            rtol, atol = max(TOL[out_dtype], TOL[dtype])
            np.testing.assert_allclose(
                g.astype(np.float64), e.astype(np.float64), rtol=rtol * 4, atol=atol * 4
            )
        kernels = [
            k for ln in executor.launchers.values() for k in ln.kernels if k.workspace is not None
        ]
        if split is None and not kernels:
            pytest.skip("the default does not split this shape")
        assert kernels
        for k in kernels:
            (memory,) = k.workspace[1].kept.values()
            pointers.add(memory.ptr)
    assert len(pointers) == len(kernels)  # made once, at the first call


def test_calls_on_two_streams_at_once_each_take_their_own_workspace(rng):
    """Calls queued on two torch streams with no sync between them: each stream's launches
    count in their own workspace (sharing one, two launches would race on the counters), and
    every result is right."""
    torch = pytest.importorskip("torch")
    with FusionDefinition() as fd:
        _var_mean0(fd, DataType.Float)
    xs = [torch.randn(65536, 256, device="cuda") + 3 for _ in range(4)]
    fd.execute([xs[0]])
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    for s in streams:
        s.wait_stream(torch.cuda.current_stream())
    results = []
    for _ in range(3):
        for x, s in zip(xs, streams * 2):
            with torch.cuda.stream(s):
                results.append((x, fd.execute([x])))
    torch.cuda.synchronize()
    for x, (var, mean) in results:
        want_var, want_mean = torch.var_mean(x, dim=0, correction=1)
        torch.testing.assert_close(var, want_var, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(mean, want_mean, rtol=1e-4, atol=1e-5)
    for _, k in _split_launcher(fd):
        assert len(k.workspace[1].kept) == 3  # the default stream's and the two others'


def test_a_call_captured_in_a_cuda_graph_replays_right_beside_eager_calls(rng):
    """A split call captured into a CUDA graph takes a workspace of its own (zeroed inside
    the graph), never a stream's kept one: replays on new data stay right, and so do eager
    calls between them."""
    torch = pytest.importorskip("torch")
    if os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1":
        pytest.skip("torch captures no allocation without its caching allocator (cudaMalloc)")
    with FusionDefinition() as fd:
        _var_mean0(fd, DataType.Float)
    static = torch.randn(65536, 256, device="cuda")
    fd.execute([static])  # compiled and planned outside the capture
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fd.execute([static])
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        var, mean = fd.execute([static])
    for _ in range(3):
        static.copy_(torch.randn(65536, 256, device="cuda") * 2 + 1)
        graph.replay()
        eager = torch.randn(65536, 256, device="cuda")
        e_var, e_mean = fd.execute([eager])
        torch.testing.assert_close(
            (var, mean), torch.var_mean(static, dim=0, correction=1), rtol=1e-4, atol=1e-5
        )
        torch.testing.assert_close(
            (e_var, e_mean), torch.var_mean(eager, dim=0, correction=1), rtol=1e-4, atol=1e-5
        )


def test_the_hot_path_of_a_split_reduction_repeats_right(rng):
    """torch inputs of one signature: from the third call the generated hot path launches
    the split kernel with its stream's kept workspace, and every call is right."""
    torch = pytest.importorskip("torch")
    with FusionDefinition() as fd:
        _row_stats(fd, DataType.Float)
    for n in range(6):
        x = torch.randn(3, 100003, device="cuda")
        total, biggest, mean_sq = fd.execute([x])
        torch.testing.assert_close(total, x.sum(1), rtol=1e-4, atol=1e-3)
        torch.testing.assert_close(biggest, x.amax(1))
        torch.testing.assert_close(mean_sq, (x * x).mean(1), rtol=1e-4, atol=1e-5)
        if n >= 2:
            assert fd._runner.hot is not None and "W0.pointer" in fd._runner.hot.source
    for _, k in _split_launcher(fd):
        assert len(k.workspace[1].kept) == 1
