"""`normalization._long_halves` (heuristics 62): held column rows of 2-byte loads (a reduction
over the outer dims, the outputs one run) hold twice the elements a thread in half the
threads, where that leaves 2 threads a row or more; middle rows and 4-byte loads keep their
layout. The defaults it picks, a property over drawn columns, compiles, and host
AddressSanitizer agreement at the defaults of large columns (their GPU runs:
tests/test_gpu_strided_norms.py's bf16 columns, which take it)."""

from __future__ import annotations

import shutil
import sys

import numpy as np
import pytest
from fusion_zoo import build, column_layernorm, inputs_for
from hypothesis import given, settings
from hypothesis import strategies as st
from test_codegen_compile import ARCHS
from test_gpu_execute import assert_agrees
from test_reduction_defaults import pattern_plan

from tunefuse import DataType
from tunefuse.codegen import generate
from tunefuse.compiler import compile_kernel
from tunefuse.device_info import H100, PROFILES
from tunefuse.planning.kernel_ir import SchedulerKind
from tunefuse.schedulers import normalization, reduction
from tunefuse.schedulers.common import pow2_at_least


def _defaults(pattern: str, shape: tuple[int, ...], dtype: DataType, device=H100):  # noqa: ANN001, ANN202
    (seg,) = pattern_plan(pattern, shape, dtype, device).segments
    return seg, normalization.default_params(seg, device)


@pytest.mark.parametrize(
    "shape, threads, elements, vector",
    [
        # judged (benchmarks/surface/tiny_inner_2026-11-29/judged_halves_summary.txt)
        ((26, 1726114), 2, 13, 2),  # 4 threads of 7 before
        ((28, 313698), 2, 14, 2),
        ((68, 1945479), 4, 17, 1),  # 8 threads of 9 before
        ((53, 763353), 2, 27, 1),  # 4 of 14 before
    ],
)
def test_bf16_columns_hold_twice_the_elements_in_half_the_threads(shape, threads, elements, vector):
    seg, p = _defaults("column_layernorm", shape, DataType.BFloat16)
    assert normalization._long_halves(seg)
    assert (p.threads_r, p.elements_per_thread, p.vector) == (threads, elements, vector), p
    assert p.cache_row and not p.inner


@pytest.mark.parametrize(
    "pattern, shape, dtype, threads",
    [
        ("middle_softmax", (3704, 47, 83), DataType.BFloat16, 4),  # lost 1.365x with 2
        ("middle_softmax", (215, 55, 234), DataType.BFloat16, 8),  # a vector of 2, 8 of 7
        ("column_layernorm", (68, 1945479), DataType.Float, 8),  # 4-byte loads
        ("column_layernorm", (20, 1945479), DataType.BFloat16, 2),  # would leave 1 thread
    ],
)
def test_middle_rows_four_byte_loads_and_two_thread_rows_keep_their_threads(
    pattern, shape, dtype, threads
):
    seg, p = _defaults(pattern, shape, dtype)
    assert p.threads_r == threads, p


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(2, 256), cols=st.integers(1000, 3_000_000))
def test_a_held_bf16_column_takes_half_the_threads_of_16_elements_down_to_two(rows, cols):
    """Wherever the defaults hold a bf16 column along y, one output a lane: the threads a
    row are those of 16 elements each (STRIDED_ELEMENTS) halved where 4 or more, so a thread
    holds at most 32 of its row and the row keeps 2 threads unless it had 1; every such
    layout is valid."""
    seg, p = _defaults("column_layernorm", (rows, cols), DataType.BFloat16)
    assert normalization.is_valid(seg, H100, p) is None, p
    if p.inner or not p.cache_row or p.vector > 1 or p.cluster > 1:
        return
    assert normalization._long_halves(seg)
    sixteen = pow2_at_least(-(-rows // normalization.STRIDED_ELEMENTS))
    assert p.threads_r == (sixteen // 2 if sixteen >= 4 else sixteen), p
    assert p.threads_r * p.elements_per_thread >= rows
    assert p.elements_per_thread <= 2 * normalization.STRIDED_ELEMENTS


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("shape", [(26, 1726114), (68, 1945479)])
def test_column_halves_compile(shape, arch):
    device = PROFILES[arch]
    plan = pattern_plan("column_layernorm", shape, DataType.BFloat16, device)
    (seg,) = plan.segments
    p = normalization.default_params(seg, device)
    kernel = generate(seg, p, device, {b.id: b.dtype for b in plan.buffers})
    assert compile_kernel(kernel.source, kernel.name, arch).cubin


@pytest.mark.skipif(
    shutil.which("g++") is None or not sys.platform.startswith("linux"),
    reason="needs g++ on Linux (ucontext fibers, AddressSanitizer)",
)
@pytest.mark.parametrize(
    "large, cols",
    [((26, 1726114), 1002), ((68, 1945479), 771), ((53, 763353), 515)],
)
def test_column_halves_agree_on_the_host(large, cols):
    """The defaults of a large column, run on one of `cols` outputs (the last block row
    partly empty) on the host under AddressSanitizer, agree with the reference."""
    from host_kernels import run_on_host

    device = PROFILES["sm_90"]
    _, p = _defaults("column_layernorm", large, DataType.BFloat16, device)
    fd = build(column_layernorm, DataType.BFloat16)
    inputs = inputs_for(fd, large[0], cols, np.random.default_rng(cols))
    norm = SchedulerKind.NORMALIZATION
    norms = [s for s in fd.plan(inputs, device=device).segments if s.scheduler is norm]
    assert len(norms) == 1 and normalization.is_valid(norms[0], device, p) is None
    assert reduction.sizes(norms[0]) == (cols, large[0])
    (run,) = run_on_host(fd, inputs, [lambda s, d: p if s.scheduler is norm else None])
    assert_agrees(fd, inputs, run.outputs, DataType.BFloat16)
