"""Rows a lane share the loads that are the same in every row (a norm's weight and bias):
one copy a lane, loaded before the row loop (`codegen.reduction._Emitter.hoisted_loads`,
codegen 31), where each row of the lane held and loaded its own. The source's shape, its
compile for sm_80 and sm_90, and the rows on the host under AddressSanitizer against the
reference; on the GPU, `test_gpu_rows_per_lane.py` runs the defaults of rows a lane."""

from __future__ import annotations

import re
import shutil
import sys

import pytest
from norm_defaults import zoo_norm_plan
from zoo_agreement import zoo_norm_agrees_on_host

from tunefuse import DataType
from tunefuse.codegen import generate
from tunefuse.compiler import compile_kernel
from tunefuse.device_info import H100
from tunefuse.planning.indexing import Var
from tunefuse.schedulers import normalization, with_values

BF16, FP32 = DataType.BFloat16, DataType.Float

# (name, cols, dtype, rows a lane): the defaults' rows a lane (bf16 rows of 3, odd rows of
# 100-190) and ones the search space holds
CASES = [
    ("rmsnorm", 3, BF16, None),  # the default: 4 rows a lane
    ("layernorm", 121, BF16, None),  # the default: 2 rows a lane of 32 lanes
    ("layernorm", 28, BF16, 2),
    ("rmsnorm", 60, FP32, 2),
    ("layernorm", 52, FP32, 4),
]


def _case(name: str, cols: int, dtype: DataType, lane_rows: int | None):  # noqa: ANN202
    plan = zoo_norm_plan(name, 1 << 18, cols, dtype)
    (seg,) = plan.segments
    p = normalization.default_params(seg, H100)
    if lane_rows is not None:
        p = with_values(p, {"rows_per_lane": lane_rows})
    assert p.rows_per_lane > 1 and p.cache_row, p
    assert normalization.is_valid(seg, H100, p) is None, p
    return seg, p, generate(seg, p, H100, {b.id: b.dtype for b in plan.buffers})


def _shared(seg) -> set[int]:  # noqa: ANN001 - a Segment
    """The loads no row moves: affine, without a coefficient along the row dim."""
    return {
        k
        for k, ld in enumerate(seg.loads)
        if ld.offset.is_affine and not ld.offset.coeff(Var(0, seg.extents[0]))
    }


@pytest.mark.parametrize("name, cols, dtype, lane_rows", CASES)
def test_rows_a_lane_hold_one_copy_of_the_loads_they_share(name, cols, dtype, lane_rows):
    seg, p, kernel = _case(name, cols, dtype, lane_rows)
    src = kernel.source
    shared = _shared(seg)
    assert shared, "a norm with a weight"
    row_loop = src.index("for (int row_base")
    for k in range(len(seg.loads)):
        if k in shared:
            assert f"cl{k}_q" not in src, k
            assert re.search(rf"\bcl{k}\[\d+\];", src[:row_loop]), k  # declared before the loop
            assert f"B{seg.loads[k].buffer}[" in src[:row_loop], k  # and loaded before it
        else:
            assert f"cl{k}_q[{p.rows_per_lane}]" in src, k  # a copy a row


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name, cols, dtype, lane_rows", CASES)
def test_rows_a_lane_with_shared_loads_compile(name, cols, dtype, lane_rows, arch):
    _, _, kernel = _case(name, cols, dtype, lane_rows)
    assert compile_kernel(kernel.source, kernel.name, arch).cubin


@pytest.mark.skipif(
    shutil.which("g++") is None or not sys.platform.startswith("linux"),
    reason="needs g++ on Linux (ucontext fibers, AddressSanitizer)",
)
@pytest.mark.parametrize("name, cols, dtype, lane_rows", CASES)
def test_rows_a_lane_with_shared_loads_agree_on_the_host(name, cols, dtype, lane_rows):
    """37 rows (a partial last tile of the lane's rows) on the host under AddressSanitizer,
    against the reference."""
    _, p, _ = _case(name, cols, dtype, lane_rows)
    zoo_norm_agrees_on_host(name, cols, dtype, [p])
