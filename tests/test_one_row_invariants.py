"""A held row of one row a lane loads the inputs no row moves (a norm's weight and bias)
before its row loop with `hoist_invariants` (`codegen.reduction._Emitter.one_row_invariants`),
and the defaults set it where those inputs are 4-byte elements or read one at a time, within
HOISTED_ROW_WORDS registers a thread, on a grid of at most HOISTED_WAVES
(`schedulers.normalization.hoists_invariants`). The default's choice, the source's shape
either way, its compile for sm_80 and sm_90, the rows on the host under AddressSanitizer
against the reference, and on the GPU."""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import replace

import pytest
from norm_defaults import zoo_norm_plan
from zoo_agreement import zoo_norm_agrees_on_gpu, zoo_norm_agrees_on_host

from tunefuse import DataType
from tunefuse.codegen import code_identity, generate
from tunefuse.compiler import compile_kernel
from tunefuse.device_info import H100
from tunefuse.schedulers import normalization, reduction, with_values
from tunefuse.schedulers.normalization import HOISTED_ROW_WORDS, HOISTED_WAVES

BF16, FP32 = DataType.BFloat16, DataType.Float
ROWS = 1 << 14  # a grid of at most 2 waves on an H100 for every case below

# (name, cols, dtype): H100's defaults hoist them
HOISTED = [
    ("layernorm", 52, FP32),  # lanes of quads: 2 x 8 words
    ("rmsnorm", 63, FP32),  # elements one at a time
    ("layernorm", 9, FP32),  # 2 lanes of a row of 9, a partial last chunk
    ("layernorm", 73, BF16),  # bf16 read an element at a time: 2 x 5 words
]
# H100's defaults load them in the output pass
KEPT_AT_USE = [
    ("layernorm", 200, BF16),  # octets of bf16: hoisting such vectors lost
    ("layernorm", 1024, FP32),  # 2 x 32 words, over HOISTED_ROW_WORDS
]


def _case(name: str, cols: int, dtype: DataType, rows: int = ROWS, **changes):  # noqa: ANN202
    plan = zoo_norm_plan(name, rows, cols, dtype)
    (seg,) = plan.segments
    p = with_values(normalization.default_params(seg, H100), changes)
    assert p.rows_per_lane == 1 and p.cache_row, p
    assert normalization.is_valid(seg, H100, p) is None, p
    return seg, p, generate(seg, p, H100, {b.id: b.dtype for b in plan.buffers})


def _invariant(seg) -> set[int]:  # noqa: ANN001 - a Segment
    return {k for k, ld in enumerate(seg.loads) if normalization.same_in_every_row(seg, ld)}


def _loaded_before_the_row_loop(src: str, seg, k: int) -> bool:  # noqa: ANN001
    row_loop = src.index("for (int row_base")
    declared = re.search(rf"\bcl{k}\[\d+\];", src[:row_loop]) is not None
    return declared and f"B{seg.loads[k].buffer}[" in src[:row_loop]


@pytest.mark.parametrize("name, cols, dtype", HOISTED)
def test_defaults_hoist_small_invariants_on_few_waves(name, cols, dtype):
    seg, p, _ = _case(name, cols, dtype)
    assert p.hoist_invariants, p
    assert len(_invariant(seg)) * p.elements_per_thread <= HOISTED_ROW_WORDS
    assert reduction.unsplit_occupancy(seg, H100, p) <= HOISTED_WAVES


@pytest.mark.parametrize("name, cols, dtype", KEPT_AT_USE)
def test_defaults_keep_vectors_of_halves_and_wide_shares_at_use(name, cols, dtype):
    seg, p, _ = _case(name, cols, dtype)
    assert not p.hoist_invariants, p
    assert (dtype.itemsize < 4 and p.vector > 1) or (
        len(_invariant(seg)) * p.elements_per_thread > HOISTED_ROW_WORDS
    ), p


def test_defaults_keep_many_waves_at_use():
    """The same row as a hoisted case, on a grid past HOISTED_WAVES."""
    seg, p, _ = _case("layernorm", 73, BF16, rows=1 << 18)
    assert reduction.unsplit_occupancy(seg, H100, p) > HOISTED_WAVES
    assert not p.hoist_invariants, p


def test_the_bound_counts_each_invariant_input():
    """rmsnorm's one weight fits where layernorm's weight and bias, at the same share, do not."""
    ept = HOISTED_ROW_WORDS // 2 + 2
    for name, hoisted in (("rmsnorm", True), ("layernorm", False)):
        seg, p, _ = _case(
            name, 64 * ept, FP32, rows=4096, threads_r=64, vector=2, elements_per_thread=ept
        )
        assert normalization.hoists_invariants(seg, H100, p) is hoisted, name


@pytest.mark.parametrize("name, cols, dtype", HOISTED + KEPT_AT_USE)
def test_the_flag_moves_the_invariant_loads_ahead_of_the_row_loop(name, cols, dtype):
    seg, p, _ = _case(name, cols, dtype)
    invariant = _invariant(seg)
    assert invariant, "a norm with a weight"
    for flag in (False, True):
        _, _, kernel = _case(name, cols, dtype, hoist_invariants=flag)
        src = kernel.source
        row_loop = src.index("for (int row_base")
        for k in invariant:
            assert _loaded_before_the_row_loop(src, seg, k) is flag, (k, flag)
            assert (f"B{seg.loads[k].buffer}[" in src[row_loop:]) is not flag, (k, flag)
        for k in set(range(len(seg.loads))) - invariant:
            assert not _loaded_before_the_row_loop(src, seg, k), k  # the rows' own, in the loop


def test_the_flag_leaves_a_softmax_alone():
    """No input the rows share: the same kernel either way (the tuner measures it once)."""
    plan = zoo_norm_plan("softmax", ROWS, 200, FP32)
    (seg,) = plan.segments
    p = normalization.default_params(seg, H100)
    assert not p.hoist_invariants
    dtypes = {b.id: b.dtype for b in plan.buffers}
    kernels = [generate(seg, replace(p, hoist_invariants=f), H100, dtypes) for f in (False, True)]
    assert code_identity(kernels[0]) == code_identity(kernels[1])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name, cols, dtype", HOISTED + KEPT_AT_USE)
def test_hoisted_invariants_compile(name, cols, dtype, arch):
    _, _, kernel = _case(name, cols, dtype, hoist_invariants=True)
    assert compile_kernel(kernel.source, kernel.name, arch).cubin


@pytest.mark.skipif(
    shutil.which("g++") is None or not sys.platform.startswith("linux"),
    reason="needs g++ on Linux (ucontext fibers, AddressSanitizer)",
)
@pytest.mark.parametrize("name, cols, dtype", HOISTED + KEPT_AT_USE)
def test_hoisted_invariants_agree_on_the_host(name, cols, dtype):
    """37 rows (a partial last tile) on the host under AddressSanitizer, against the
    reference."""
    _, p, _ = _case(name, cols, dtype, hoist_invariants=True)
    zoo_norm_agrees_on_host(name, cols, dtype, [p])


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name, rows, cols, dtype, changes",
    [
        ("layernorm", 50003, 52, FP32, {}),
        ("rmsnorm", 4097, 63, FP32, {}),
        ("layernorm", 300007, 9, FP32, {}),
        ("layernorm", 20011, 73, BF16, {}),
        ("layernorm", 20011, 200, BF16, {"hoist_invariants": True}),  # the tuner's choice
        ("layernorm", 1 << 20, 52, FP32, {"hoist_invariants": True, "blocks_per_sm": 2}),
    ],
)
def test_gpu_hoisted_invariants_agree(name, rows, cols, dtype, changes):
    """The defaults, and the flag where they leave it: on a grid capped at 2 blocks an SM,
    each block walks many row tiles with the weight it loaded once."""
    zoo_norm_agrees_on_gpu(name, rows, cols, dtype, **changes)
