"""A column normalization (dim 0 of [R, C]: BatchNorm1d's training forward) in every layout
its scheduler takes (a held row, a re-read one, a vector of outputs a lane, rows a lane, a
thread a column; held rows with and without whole_chunks), with a weight read behind cat's
guard on the outputs' index and a bias of one value a row: on the host under
AddressSanitizer (tests/host_kernels.py) and on the GPU, against the reference. The rows past
the last row read at the clamped row (rowc); cat's parts only inside their branch."""

from __future__ import annotations

import dataclasses
import shutil
import sys

import numpy as np
import pytest
from fusion_zoo import build, column_layernorm
from test_gpu_execute import assert_agrees

from tunefuse import DataType, FusionDefinition
from tunefuse.device_info import PROFILES
from tunefuse.schedulers import normalization

H100 = PROFILES["sm_90"]


def cat_weight_layernorm(fd: FusionDefinition, dtype: DataType) -> None:
    """(x - mean) * rstd * cat(w1, w2) + b over dim 0 of x [R, C]: the weight's two loads
    behind cat's guard on the outputs' index, the bias a bare load of one value a row."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    w1 = fd.define_tensor(shape=[-1], dtype=dtype)
    w2 = fd.define_tensor(shape=[-1], dtype=dtype)
    b = fd.define_tensor(shape=[-1], dtype=dtype)
    xf = fd.ops.cast(x, DataType.Float)
    var, mean = fd.ops.var_mean(xf, [0], correction=0, keepdim=True)
    rstd = fd.ops.rsqrt(fd.ops.add(var, fd.define_scalar(1e-5)))
    w = fd.ops.cat([w1, w2], 0)
    wb = fd.ops.broadcast_in_dim(fd.ops.cast(w, DataType.Float), x.shape(), [1])
    bb = fd.ops.broadcast_in_dim(fd.ops.cast(b, DataType.Float), x.shape(), [1])
    y = fd.ops.add(fd.ops.mul(fd.ops.mul(fd.ops.sub(xf, mean), rstd), wb), bb)
    fd.add_output(fd.ops.cast(y, dtype))


def _inputs(fd: FusionDefinition, rows: int, cols: int, rng: np.random.Generator) -> list:
    """x [rows, cols] and vectors of the outputs: cat's two parts split `cols` unevenly."""
    np_dtype = fd.fusion.values[fd.fusion.inputs[0]].dtype.numpy
    n_vectors = len(fd.fusion.inputs) - 1
    shapes = [(cols,)] if n_vectors == 1 else [(cols // 3,), (cols - cols // 3,), (cols,)]
    return [rng.standard_normal(s).astype(np_dtype) for s in [(rows, cols), *shapes]]


def _fusion(name: str, dtype: DataType) -> FusionDefinition:
    if name == "column_layernorm":
        return build(column_layernorm, dtype)
    with FusionDefinition() as fd:
        cat_weight_layernorm(fd, dtype)
    return fd


# The layouts of a column normalization (its threads_r, cache_row, vector and rows_per_lane):
# a held row, a re-read one, a vector of outputs a lane (held or re-read), rows a lane, a
# thread a column; held rows with whole_chunks.
LAYOUTS = [
    {},
    {"vector": 1, "cache_row": True},
    {"vector": 1, "cache_row": False},
    {"vector": 2, "cache_row": False},
    {"vector": 2, "cache_row": False, "elements_per_thread": 2},
    {"vector": 2, "cache_row": True},
    {"vector": 1, "rows_per_lane": 2},
    {"vector": 1, "threads_r": 1, "elements_per_thread": 40},
    {"vector": 1, "threads_r": 4, "cache_row": False, "rows_per_block": 8},
    # whole_chunks: 37 rows reach the params' whole chunks (9 x 4 <= 37: the last chunk
    # checked alone), or fall short of them (15 x 4 > 37: every chunk checked)
    {"vector": 1, "threads_r": 4, "elements_per_thread": 10, "whole_chunks": True},
    {"vector": 1, "threads_r": 4, "elements_per_thread": 16, "whole_chunks": True},
    {"vector": 1, "rows_per_lane": 2, "whole_chunks": True},
    {"vector": 2, "cache_row": True, "whole_chunks": True},
]


def _valid_layouts(fd: FusionDefinition, inputs: list) -> list[tuple[dict, object]]:
    """(changes, params) of each of LAYOUTS that is valid for `fd`'s one kernel on `inputs`."""
    (seg,) = fd.plan(inputs, device=H100).segments
    base = normalization.default_params(seg, H100)
    changed = [(c, dataclasses.replace(base, **c)) for c in LAYOUTS]
    return [(c, p) for c, p in changed if normalization.is_valid(seg, H100, p) is None]


@pytest.mark.skipif(
    shutil.which("g++") is None or not sys.platform.startswith("linux"),
    reason="needs g++ on Linux (ucontext fibers, AddressSanitizer)",
)
@pytest.mark.parametrize("cols", [45, 46])
@pytest.mark.parametrize("dtype", [DataType.Float, DataType.BFloat16])
@pytest.mark.parametrize("name", ["column_layernorm", "cat_weight"])
def test_column_norms_agree_on_the_host_in_every_layout(name, dtype, cols):
    """37 rows (the reduced extent) of `cols` outputs, the last block's rows past the end,
    under AddressSanitizer."""
    from host_kernels import run_on_host

    fd = _fusion(name, dtype)
    inputs = _inputs(fd, 37, cols, np.random.default_rng(cols))
    valid = [p for _, p in _valid_layouts(fd, inputs)]
    # the layouts the rule tells apart are all among them
    if name == "column_layernorm" and cols % 2 == 0:  # a vector of 2 outputs a lane
        assert any(p.vector > 1 and not p.cache_row for p in valid)
        assert any(p.vector > 1 and p.cache_row for p in valid)
    assert any(p.vector == 1 and p.rows_per_lane > 1 for p in valid)
    assert any(p.threads_r == 1 for p in valid)
    assert sum(p.whole_chunks for p in valid) >= 3
    runs = run_on_host(fd, inputs, [lambda s, d, p=p: p for p in valid])
    for run in runs:
        assert_agrees(fd, inputs, run.outputs, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("rows, cols", [(37, 45), (37, 46), (5, 70001), (300, 8191)])
@pytest.mark.parametrize("dtype", [DataType.Float, DataType.BFloat16])
@pytest.mark.parametrize("name", ["column_layernorm", "cat_weight"])
def test_column_norms_agree_on_the_gpu_in_every_layout(name, dtype, rows, cols):
    """As the host test, on the device (the executor's launches), and on rows long and short
    enough for the defaults to take other layouts: each valid layout agrees with the
    reference."""
    from test_gpu_split import run_with_reduction_params

    fd = _fusion(name, dtype)
    inputs = _inputs(fd, rows, cols, np.random.default_rng(cols))
    valid = _valid_layouts(fd, inputs)
    for changes, _ in valid:
        got, _ = run_with_reduction_params(fd, inputs, kind="normalization", **changes)
        assert_agrees(fd, inputs, got, dtype)
    assert len(valid) >= 2
