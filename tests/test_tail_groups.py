"""Codegen's tail group (`codegen.reduction.whole_groups_then_tail`, no GPU): which kernels
read their strided loop as whole groups of `unroll` chunks then one tail group of clamped
loads, and that those kernels compile. Their values: `test_host_kernels.py::
test_tail_groups_agree_on_the_host` (under AddressSanitizer) and the GPU tests."""

import dataclasses

import pytest
from test_codegen_compile import ARCHS
from test_reduction_defaults import pattern_plan

from tunefuse import DataType
from tunefuse.codegen import generate
from tunefuse.codegen import reduction as codegen_reduction
from tunefuse.compiler import compile_kernel
from tunefuse.device_info import H100
from tunefuse.schedulers import scheduler_for

TAIL = "if (rg < n_red) {"


def _kernel_source(pattern: str, dtype: DataType, shape: tuple[int, ...], changes: dict) -> str:
    """The source of the one kernel of a surface pattern on `shape` (H100, the defaults with
    `changes`)."""
    plan = pattern_plan(pattern, shape, dtype)
    (seg,) = plan.segments
    sched = scheduler_for(seg.scheduler)
    p = dataclasses.replace(sched.default_params(seg, H100), **changes)
    assert sched.is_valid(seg, H100, p) is None, sched.is_valid(seg, H100, p)
    return generate(seg, p, H100, {b.id: b.dtype for b in plan.buffers}).source


def takes_tail_group(pattern: str, dtype: DataType, shape: tuple[int, ...], changes: dict) -> bool:
    return TAIL in _kernel_source(pattern, dtype, shape, changes)


@pytest.mark.parametrize(
    "pattern,dtype,shape,changes,tail",
    [
        # short strided columns: 3 chunks a lane in groups of 2, of 11 in groups of 8
        ("middle", DataType.BFloat16, (24371, 3, 114), {}, True),
        ("middle", DataType.BFloat16, (390660, 11, 19), {}, True),
        # a row of 862 vectors in 256 lanes: 4 chunks a lane in groups of 2
        ("middle", DataType.BFloat16, (15651, 6896, 1), {}, True),
        ("col", DataType.Float, (240, 14180), {}, True),
        # 512 chunks a lane in groups of 8: nvcc's unrolled loop (TAIL_GROUP_TRIPS)
        ("col", DataType.BFloat16, (16384, 8192), {}, False),
        # peeled rows (466 floats: no vector of 4 lies at every row's start) keep nvcc's loop
        ("row", DataType.Float, (106422, 466), {}, False),
        # a running max-and-sum of exp keeps nvcc's loop
        ("logsumexp", DataType.Float, (20968, 3036), {}, False),
        # unroll 1: one chunk a trip, nothing to group
        ("middle", DataType.BFloat16, (24371, 3, 114), {"unroll": 1}, False),
    ],
)
def test_which_kernels_take_the_tail_group(pattern, dtype, shape, changes, tail):
    """The tail group where a lane has fewer than TAIL_GROUP_TRIPS groups of `unroll` chunks
    of an unpeeled, unsplit row whose accumulators are no running max-and-sum of exp."""
    assert takes_tail_group(pattern, dtype, shape, changes) is tail


def test_the_tail_bound_is_in_groups_of_unroll():
    """A lane's chunks against TAIL_GROUP_TRIPS * unroll: the same column in groups of 8 takes
    the tail group at 31 chunks a lane and not at 32."""
    bound = codegen_reduction.TAIL_GROUP_TRIPS * 8
    changes = {"threads_r": 1, "vector": 1, "unroll": 8, "rows_per_lane": 1}
    assert takes_tail_group("middle", DataType.Float, (4096, bound - 1, 64), changes)
    assert not takes_tail_group("middle", DataType.Float, (4096, bound, 64), changes)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    "pattern,dtype,shape",
    [
        ("middle", DataType.BFloat16, (24371, 3, 114)),
        ("middle", DataType.Float, (495, 28, 286)),
        ("row", DataType.BFloat16, (120782, 584)),
        ("col", DataType.BFloat16, (41, 118381)),
    ],
)
def test_tail_groups_compile(pattern, dtype, shape, arch):
    source = _kernel_source(pattern, dtype, shape, {})
    assert TAIL in source
    name = source.split("__global__ void", 1)[1].split("(", 1)[0].split()[-1]
    assert compile_kernel(source, name, arch).cubin


def test_a_tail_chunk_past_the_row_reads_its_last_chunk():
    """The tail's loads are unconditional: an index past the row's end is clamped to the
    row's last chunk, and only the compute is behind the row's end."""
    source = _kernel_source("middle", DataType.BFloat16, (24371, 3, 114), {})
    tail = source.split(TAIL, 1)[1]
    assert "const int r0 = rr < n_red ? rr : n_red - 1;" in tail
    assert tail.index("tf_ld_stream") < tail.index("if (rr < n_red) {")
