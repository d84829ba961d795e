"""How a held row is loaded into registers (`codegen.reduction.clamped_fill`): an outer
layout's chunks load without a condition of their own but the last (their index clamped into
the row), and with one thread a row the last too (codegen 34); an inner layout's keep a
condition a load; both compile for sm_80 and sm_90. Their
values: `test_host_kernels.py::test_held_strided_rows_agree_on_the_host` and
`::test_short_columns_rows_a_lane_agree_on_the_host` (under the host's bounds checks), and on
the GPU `test_gpu_rows_per_lane.py`, `test_gpu_strided_norms.py`."""

from __future__ import annotations

import pathlib
import sys

import pytest

from tunefuse import DataType
from tunefuse.codegen import generate
from tunefuse.compiler import compile_kernel
from tunefuse.device_info import PROFILES
from tunefuse.schedulers import scheduler_for, with_values

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
from patterns import pattern_fusion, planning_inputs  # noqa: E402

H100 = PROFILES["sm_90"]
CLAMP = "rr < n_red - 1 ? rr : n_red - 1"


def _kernel(pattern: str, dtype: DataType, shape: tuple[int, ...], changes: dict):  # noqa: ANN202
    fd = pattern_fusion(pattern, dtype)
    plan = fd.plan(planning_inputs(fd, shape, dtype), device=H100)
    (seg,) = plan.segments
    sched = scheduler_for(seg.scheduler)
    p = (
        with_values(sched.default_params(seg, H100), changes)
        if changes
        else sched.default_params(seg, H100)
    )
    assert sched.is_valid(seg, H100, p) is None
    return p, generate(seg, p, H100, {b.id: b.dtype for b in plan.buffers})


OUTER = [
    ("col", DataType.BFloat16, (6, 18111961), {}),  # rows a lane: 2 of 6 loads
    ("middle", DataType.BFloat16, (11869490, 3, 3), {}),  # 4 of 3
    ("middle_softmax", DataType.BFloat16, (13110, 26, 17), {}),  # held, 13 a thread
    ("middle_softmax", DataType.Float, (5000, 10, 7), {"threads_r": 1, "elements_per_thread": 16}),
    ("middle_softmax", DataType.BFloat16, (16693, 27, 142), {}),  # one thread of 27 (75)
]
INNER = [
    ("softmax", DataType.Float, (15811501, 3), {}),
    ("layernorm", DataType.BFloat16, (207210, 34), {"rows_per_lane": 2}),
]


@pytest.mark.parametrize("case", range(len(OUTER)))
def test_an_outer_held_row_loads_unconditionally_but_a_shared_row_s_last_chunk(case):
    pattern, dtype, shape, changes = OUTER[case]
    p, kernel = _kernel(pattern, dtype, shape, changes)
    assert not p.inner and (p.rows_per_lane > 1 or p.cache_row), p
    src = kernel.source
    fill = src[src.index("if (n_red >= 1) {") :]
    assert CLAMP in fill
    if p.threads_r == 1:
        # the thread's share is the row: every chunk clamped, none with a condition alone
        # (a guarded last load went out after the others had been computed on, codegen 34)
        assert "const int c = " not in src
        return
    # the last chunk: its own condition, once a lane's row
    last = fill[: fill.index("#pragma unroll\n", fill.index("const int c = "))]
    assert last.count("if (row_ok && r0 < n_red)") == 1


@pytest.mark.parametrize("case", range(len(INNER)))
def test_an_inner_held_row_keeps_a_condition_a_load(case):
    pattern, dtype, shape, changes = INNER[case]
    p, kernel = _kernel(pattern, dtype, shape, changes)
    assert p.inner and p.rows_per_lane > 1, p
    assert "rr <" not in kernel.source and "if (row_ok && r0 < n_red)" in kernel.source


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", range(len(OUTER) + len(INNER)))
def test_held_fills_compile(case, arch):
    pattern, dtype, shape, changes = (OUTER + INNER)[case]
    _, kernel = _kernel(pattern, dtype, shape, changes)
    assert compile_kernel(kernel.source, kernel.name, arch).cubin
