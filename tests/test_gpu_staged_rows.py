"""GPU: rows staged through shared memory (`normalization.Params.stage_rows`) compute what
the reference computes: a lane a row and rows over several lanes, 2-byte vectors and
scalars, row counts that leave the last tile partly empty, and grids of fewer blocks than
tiles (a block stages its next tile over the last one's)."""

import dataclasses

import numpy as np
import pytest
from fusion_zoo import ZOO, build, inputs_for
from test_gpu_execute import assert_agrees
from test_gpu_split import run_with_reduction_params
from test_host_kernels import STAGED_ROWS

from tunefuse import DataType
from tunefuse.device_info import PROFILES
from tunefuse.schedulers import scheduler_for

pytestmark = pytest.mark.gpu

# Row counts: one partly empty tile, and enough tiles for a grid of one block an SM to
# give most blocks several.
ROWS = [37, 300_001]


@pytest.mark.parametrize("blocks_per_sm", [0, 1])
@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("case", range(len(STAGED_ROWS)))
def test_staged_rows_equal_the_reference(case, rows, blocks_per_sm):
    name, dtype, cols, changes = STAGED_ROWS[case]
    fd = build(ZOO[name], dtype)
    inputs = inputs_for(fd, rows, cols, np.random.default_rng(rows + cols))
    staged = {**changes, "stage_rows": True, "blocks_per_sm": blocks_per_sm, "rows_per_lane": 1}
    (seg,) = fd.plan(inputs, device=PROFILES["sm_90"]).segments
    sched = scheduler_for(seg.scheduler)
    p = dataclasses.replace(sched.default_params(seg, PROFILES["sm_90"]), **staged)
    assert sched.is_valid(seg, PROFILES["sm_90"], p) is None
    got, launched = run_with_reduction_params(fd, inputs, kind="normalization", **staged)
    assert [k.params["stage_rows"] for k in launched] == [True]
    assert_agrees(fd, inputs, got, dtype)


def test_a_bf16_layernorm_of_rows_of_22_staged_equals_the_reference():
    """The layout the probe timed: a lane a row of 11 two-byte vectors, 128 rows a block."""
    fd = build(ZOO["layernorm"], DataType.BFloat16)
    inputs = inputs_for(fd, 1_000_003, 22, np.random.default_rng(22))
    changes = dict(threads_r=1, elements_per_thread=22, rows_per_block=128, stage_rows=True)
    got, _ = run_with_reduction_params(fd, inputs, kind="normalization", **changes)
    assert_agrees(fd, inputs, got, DataType.BFloat16)
