"""A surface pattern's (benchmarks/patterns.py) one-kernel default, and that default run and
checked against the reference: on the host under AddressSanitizer (the params of a large
shape on a small one, the last block partly empty) or by the executor on the GPU. Shared by
the tests of the normalization rules that pick a held row's layout."""

from __future__ import annotations

import pathlib
import shutil
import sys

import numpy as np
import pytest
from test_gpu_execute import assert_agrees
from test_reduction_defaults import pattern_plan

from tunefuse import DataType, FusionDefinition
from tunefuse.codegen import generate
from tunefuse.compiler import compile_kernel
from tunefuse.device_info import H100, PROFILES
from tunefuse.schedulers import normalization, reduction

SM90 = PROFILES["sm_90"]

needs_host_compiler = pytest.mark.skipif(
    shutil.which("g++") is None or not sys.platform.startswith("linux"),
    reason="needs g++ on Linux (ucontext fibers, AddressSanitizer)",
)


def pattern_defaults(pattern: str, shape: tuple[int, ...], dtype: DataType, device=H100):  # noqa: ANN001, ANN201
    """The plan of `pattern` on `shape`, its one segment and that segment's default params."""
    plan = pattern_plan(pattern, shape, dtype, device)
    (seg,) = plan.segments
    return plan, seg, normalization.default_params(seg, device)


def assert_compiles(plan, seg, params, arch: str) -> None:  # noqa: ANN001
    """The kernel `params` generate for `seg` of `plan` compiles for `arch` (NVRTC, no GPU)."""
    kernel = generate(seg, params, PROFILES[arch], {b.id: b.dtype for b in plan.buffers})
    assert compile_kernel(kernel.source, kernel.name, arch).cubin


def rows_a_lane_allowed(seg, p, lane_bytes: int, most: int, r: int) -> bool:  # noqa: ANN001
    """Whether `r` rows a lane keep held `p` of `seg` within the rows-a-lane bounds on H100:
    at most 8, the lane's loads under `most` bytes before the last doubling, its elements
    within LANE_ELEMENTS, and 8 blocks an SM (`normalization._strided_rows_a_lane`)."""
    n_out, _ = reduction.sizes(seg)
    return (
        r <= 8
        and (r // 2) * lane_bytes < most
        and r * p.elements_per_thread <= reduction.LANE_ELEMENTS
        and -(-n_out // (p.rows_per_block * r)) >= 8 * H100.sm_count
    )


def pattern_fusion(pattern: str, dtype: DataType) -> FusionDefinition:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
    import patterns

    return patterns.pattern_fusion(pattern, dtype)


def pattern_inputs(fd: FusionDefinition, shape: tuple[int, ...], dtype: DataType, rng) -> list:  # noqa: ANN001
    """The pattern's inputs at `shape`: the tensor, and an input of lower rank (a column
    norm's weight) of the trailing extents."""
    ranks = [fd.fusion.values[v].rank for v in fd.fusion.inputs]
    return [(rng.standard_normal(shape[len(shape) - r :]) * 3).astype(dtype.numpy) for r in ranks]


def agree_on_host(pattern: str, params, small: tuple[int, ...], dtype: DataType) -> None:  # noqa: ANN001
    """`params` (a large shape's default) run on `small` on the host under AddressSanitizer:
    valid there, and the results agree with the reference."""
    from host_kernels import run_on_host

    fd = pattern_fusion(pattern, dtype)
    inputs = pattern_inputs(fd, small, dtype, np.random.default_rng(small[0]))
    (seg,) = fd.plan(inputs, device=SM90).segments
    assert normalization.is_valid(seg, SM90, params) is None
    (run,) = run_on_host(fd, inputs, [lambda s, d: params])
    assert_agrees(fd, inputs, run.outputs, dtype)


def agree_on_gpu(pattern: str, shape: tuple[int, ...], dtype: DataType, rng) -> list:  # noqa: ANN001
    """The executor's own defaults for `pattern` on `shape`, run on the device: the results
    agree with the reference; the kernels launched (their params)."""
    from test_gpu_split import run_with_reduction_params

    fd = pattern_fusion(pattern, dtype)
    inputs = pattern_inputs(fd, shape, dtype, rng)
    got, launched = run_with_reduction_params(fd, inputs, kind="normalization")
    assert_agrees(fd, inputs, got, dtype)
    return launched
