"""`normalization.Params.whole_chunks`, without a GPU: a held row's passes check only their
last chunk where the row is as long as the params hold (one uniform branch on n_red), every
chunk in a shorter row; the flag is in the tuner's space, stored params without it load, and
kernels without held chunks do not change with it. Values: tests/test_column_norm_layouts.py
and the rows below, on the host under AddressSanitizer (and on the GPU there)."""

from __future__ import annotations

import shutil
import sys

import numpy as np
import pytest
from fusion_zoo import ZOO, build, column_layernorm, inputs_for
from test_codegen_compile import ARCHS
from test_gpu_execute import assert_agrees
from zoo_agreement import zoo_norm_agrees_on_gpu

from tunefuse import DataType
from tunefuse.codegen import code_identity, generate
from tunefuse.compiler import compile_kernel
from tunefuse.device_info import H100
from tunefuse.planning.kernel_ir import SchedulerKind
from tunefuse.schedulers import normalization, params_from_dict, params_to_dict, with_values


def _kernel(define, rows: int, cols: int, dtype: DataType, **changes):  # noqa: ANN001, ANN202
    fd = build(define, dtype)
    plan = fd.plan(inputs_for(fd, rows, cols, np.random.default_rng(0)), device=H100)
    (seg,) = plan.segments
    assert seg.scheduler is SchedulerKind.NORMALIZATION
    p = with_values(normalization.default_params(seg, H100), changes)
    assert normalization.is_valid(seg, H100, p) is None, p
    return seg, p, generate(seg, p, H100, {b.id: b.dtype for b in plan.buffers})


HELD = [
    (column_layernorm, 23, 350001, DataType.BFloat16),  # a column of 2 threads, rows a lane
    (column_layernorm, 198, 11574, DataType.Float),  # a column of 16 threads
    (ZOO["softmax"], 4096, 4096, DataType.Float),  # an inner row of vectors
    (ZOO["layernorm"], 4096, 2048, DataType.BFloat16),
]


@pytest.mark.parametrize("define, rows, cols, dtype", HELD)
def test_a_held_row_as_long_as_the_params_checks_only_its_last_chunk(define, rows, cols, dtype):
    seg, p, plain = _kernel(define, rows, cols, dtype, whole_chunks=False)
    _, q, whole = _kernel(define, rows, cols, dtype, whole_chunks=True)
    assert p.cache_row and not p.whole_chunks and q.whole_chunks
    step = normalization.chunk_step(seg, p)
    chunks = p.elements_per_thread // step
    bound = (chunks - 1) * p.threads_r * step
    assert f"if (n_red >= {bound}) {{" not in plain.source
    # each pass over the held elements: its whole chunks unchecked, its last checked, and
    # the shorter row's every chunk checked
    fast = whole.source.count(f"if (n_red >= {bound}) {{")
    assert fast >= 2, whole.source
    assert whole.source.count(f"for (int c = {chunks - 1}; c < {chunks}; ++c) {{") == fast
    assert whole.source.count("if (row_ok && true) {") == fast


@pytest.mark.parametrize(
    "define, rows, cols, dtype",
    [
        (column_layernorm, 1024, 4096, DataType.Float),  # rows re-read from memory
        (ZOO["softmax"], 8192, 16, DataType.Float),  # a row of one chunk a thread
    ],
)
def test_kernels_without_held_chunks_do_not_change_with_it(define, rows, cols, dtype):
    _, p, plain = _kernel(define, rows, cols, dtype)
    _, _, whole = _kernel(define, rows, cols, dtype, whole_chunks=True)
    assert code_identity(plain) == code_identity(whole)


def test_whole_chunks_is_in_the_space_and_stored_params_without_it_load():
    seg, p, _ = _kernel(ZOO["softmax"], 4096, 4096, DataType.Float)
    space = normalization.search_space(seg, H100)
    assert list(space["whole_chunks"].choices) == [False, True]
    stored = params_to_dict(p)
    del stored["whole_chunks"]  # a record from before the flag
    assert params_from_dict(SchedulerKind.NORMALIZATION, stored) == p
    assert params_from_dict(SchedulerKind.NORMALIZATION, {**stored, "whole_chunks": 1}) is None
    why = normalization.is_valid(seg, H100, with_values(p, {"whole_chunks": "1"}))
    assert "whole_chunks" in why


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("define, rows, cols, dtype", HELD)
def test_whole_chunks_compile(define, rows, cols, dtype, arch):
    _, _, kernel = _kernel(define, rows, cols, dtype, whole_chunks=True)
    assert compile_kernel(kernel.source, kernel.name, arch).cubin


@pytest.mark.skipif(
    shutil.which("g++") is None or not sys.platform.startswith("linux"),
    reason="needs g++ on Linux (ucontext fibers, AddressSanitizer)",
)
@pytest.mark.parametrize("cols", [45, 300, 1003, 4096])
@pytest.mark.parametrize("dtype", [DataType.Float, DataType.BFloat16])
@pytest.mark.parametrize("name", ["softmax", "layernorm", "rmsnorm"])
def test_held_rows_with_whole_chunks_agree_on_the_host(name, dtype, cols):
    """37 rows of `cols`, held as the defaults of 2**21 rows lay them, with whole_chunks, and
    with a thread's share of twice the row (the shorter row's every chunk checked)."""
    from host_kernels import run_on_host
    from test_host_kernels import _defaults_of_many_rows

    fd = build(ZOO[name], dtype)
    p = _defaults_of_many_rows(fd, cols, dtype)
    inputs = inputs_for(fd, 37, cols, np.random.default_rng(cols))
    (seg,) = fd.plan(inputs, device=H100).segments
    sets = []
    for changes in ({}, {"elements_per_thread": 2 * p.elements_per_thread}):
        q = with_values(p, {**changes, "whole_chunks": True})
        if normalization.is_valid(seg, H100, q) is None:
            sets.append(q)
    assert sets
    for run in run_on_host(fd, inputs, [lambda s, d, q=q: q for q in sets]):
        assert_agrees(fd, inputs, run.outputs, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name, rows, cols, dtype",
    [
        ("softmax", 4096, 4096, DataType.Float),
        ("softmax", 1000, 12000, DataType.BFloat16),
        ("layernorm", 4096, 2048, DataType.BFloat16),
        ("layernorm", 1037, 1000, DataType.Float),
        ("rmsnorm", 2048, 5000, DataType.Float),
        ("rmsnorm", 511, 300, DataType.BFloat16),
    ],
)
def test_held_rows_with_whole_chunks_agree_on_the_gpu(name, rows, cols, dtype):
    """The default layout of each row with whole_chunks, on the device (the executor's
    launches), against the reference: rows held in registers, whose passes take the
    unchecked chunks."""
    fd = build(ZOO[name], dtype)
    inputs = inputs_for(fd, rows, cols, np.random.default_rng(cols))
    (seg,) = fd.plan(inputs, device=H100).segments
    p = normalization.default_params(seg, H100)
    assert p.cache_row, p
    launched = zoo_norm_agrees_on_gpu(name, rows, cols, dtype, whole_chunks=True)
    assert [k.params["whole_chunks"] for k in launched] == [True]


@pytest.mark.parametrize(
    "pattern, dtype, shape, default",
    [
        # outer layouts of 2-byte loads, 8 chunks a thread or more (WHOLE_CHUNKS)
        ("middle_softmax", DataType.BFloat16, (12518, 27, 71), True),  # 14 elements, 2 rows
        ("middle_softmax", DataType.BFloat16, (1024, 128, 64), True),  # 8 a column, 4 columns
        ("column_layernorm", DataType.BFloat16, (23, 350001), True),
        # 11 chunks but 22 elements a thread (judged 155.1 -> 184.0 us with it)
        ("middle_softmax", DataType.BFloat16, (55967, 163, 10), False),
        # under 8 chunks a thread (middle_softmax bf16 [2048, 96, 64]: 23.9 -> 28.5 us with it)
        ("middle_softmax", DataType.BFloat16, (2048, 96, 64), False),
        # 2 threads of 13 a column, a vector of 2 (heuristics 62, `_long_halves`): 13 chunks
        ("column_layernorm", DataType.BFloat16, (26, 1594466), True),
        # 4-byte loads (column_layernorm fp32 [198, 11574]: 10.8 -> 12.7 us with it)
        ("column_layernorm", DataType.Float, (198, 11574), False),
        ("middle_softmax", DataType.Float, (256, 256, 64), False),
        # an inner layout
        ("layernorm", DataType.BFloat16, (4096, 2048), False),
    ],
)
def test_the_default_takes_whole_chunks_for_long_outer_columns_of_halves(
    pattern, dtype, shape, default
):
    """`normalization.whole_chunks_pay`: an outer held layout of 2-byte loads whose thread
    holds 8 chunks or more of a row and 24 elements or more; the chunks counted as the codegen
    steps them (a vector along the outputs steps one element a chunk)."""
    from test_reduction_defaults import pattern_plan

    (seg,) = pattern_plan(pattern, shape, dtype).segments
    p = normalization.default_params(seg, H100)
    assert p.cache_row, p
    assert p.whole_chunks is default, p
    assert normalization.whole_chunks_pay(seg, p) is default
