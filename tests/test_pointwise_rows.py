"""Flat pointwise kernels over short innermost rows take several rows a group (no GPU): the
default's `rows` over a surface of shapes, what `is_valid` refuses, and every rows variant
of the GPU test's cases compiling with NVRTC for sm_80 and sm_90."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gpu_pointwise_rows import CASES, _build, _inputs, flat_with_rows, running_pointwise
from test_pointwise_defaults import view

from tunefuse import DataType, FusionDefinition
from tunefuse.codegen import generate
from tunefuse.compiler import compile_kernel
from tunefuse.device_info import A100, H100, PROFILES
from tunefuse.schedulers import pointwise, scheduler_for

DTYPES = [DataType.Float, DataType.BFloat16]


def bias_add_segment(rows: int, cols: int, dtype: DataType):  # noqa: ANN201
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        b = fd.define_tensor(shape=[-1], dtype=dtype)
        fd.add_output(fd.ops.add(x, fd.ops.broadcast_in_dim(b, x.shape(), [1])))
    (seg,) = fd.plan([view((rows, cols), dtype), view((cols,), dtype)]).segments
    return seg


@given(
    rows_log=st.integers(0, 22),
    odd=st.sampled_from([1, 3, 5]),
    cols=st.integers(1, 40),
    dtype=st.sampled_from(DTYPES),
    device=st.sampled_from([H100, A100]),
)
@settings(max_examples=300, deadline=None)
def test_default_rows_fill_a_16_byte_store_where_rows_are_short(rows_log, odd, cols, dtype, device):
    """x [R, E] + b [E]: rows > 1 only with a vector of the whole row, R divisible by rows
    and at most 16 bytes a group; and as many as that allows."""
    rows = odd << rows_log
    seg = bias_add_segment(rows, cols, dtype)
    p = pointwise.default_params(seg, device)
    assert pointwise.is_valid(seg, device, p) is None
    if cols == 1:  # the bias collapses into a scalar broadcast: one dim
        assert p.rows == 1
        return
    if p.flat_vector:  # wider than a row's vector and its rows: along the flat index
        row_vector = pointwise.max_vector(seg)
        assert p.split == 0 and p.rows == 1 and p.vector == pointwise.max_flat_vector(seg)
        assert p.vector > row_vector * pointwise.widest_rows(seg, row_vector)
        assert p.vector * dtype.itemsize == 16  # x, b's broadcast aside, and the output
        return
    group_bytes = p.vector * p.rows * dtype.itemsize
    if p.rows > 1:
        assert p.split == 0 and p.vector == cols and rows % p.rows == 0 and group_bytes <= 16
    fits_more = (
        p.split == 0 and p.vector == cols and rows % (2 * p.rows) == 0 and 2 * group_bytes <= 16
    )
    assert not fits_more, p
    if p.split == 0 and cols in (2, 4) and cols * dtype.itemsize < 16 and rows % 2 == 0:
        assert p.rows >= 2


def test_the_measured_points():
    assert pointwise.default_params(bias_add_segment(1 << 26, 2, DataType.BFloat16), H100).rows == 4
    assert pointwise.default_params(bias_add_segment(1 << 25, 2, DataType.Float), H100).rows == 2
    assert pointwise.default_params(bias_add_segment(1 << 24, 4, DataType.BFloat16), H100).rows == 2
    # Rows of 16 bytes or more, or long rows: one row a group.
    assert pointwise.default_params(bias_add_segment(1 << 24, 4, DataType.Float), H100).rows == 1
    assert pointwise.default_params(bias_add_segment(1 << 14, 4096, DataType.Float), H100).rows == 1
    # An odd number of rows cannot be grouped in pairs.
    assert pointwise.default_params(bias_add_segment(1001, 2, DataType.Float), H100).rows == 1


def test_rows_are_refused_where_they_cannot_run_and_guards_read_alone():
    seg = bias_add_segment(1024, 2, DataType.BFloat16)
    base = pointwise.default_params(seg, H100)
    assert base.rows == 4

    def why(**changes):
        return pointwise.is_valid(seg, H100, dataclasses.replace(base, **changes))

    assert "flat kernel" in why(split=1)
    assert "whole innermost row" in why(vector=1)
    assert "one of" in why(rows=3)
    assert "at once" in why(rows=8)  # 32 bytes a store
    assert "rows divide" in pointwise.is_valid(
        bias_add_segment(1002, 2, DataType.BFloat16), H100, base
    )  # 1002 rows are not groups of 4
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        y = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.cat([x, y], 0))  # [R, 2] twice -> [2R, 2]: a guard a row
    (cat,) = fd.plan([view((64, 2), DataType.BFloat16)] * 2).segments
    p = pointwise.default_params(cat, H100)
    assert p.rows == 4 and p.vector == 2 and cat.extents == (128, 2)
    # Its loads are behind the cat's guard: read element by element in their branch, never
    # as one vector of the group (whose rows may lie on both sides of the cat).
    source = generate(cat, p, H100, {b: DataType.BFloat16 for b in range(3)}).source
    assert "TfVec<tf_bf16, 8> v" not in source and "TfVec<tf_bf16, 8> o0" in source


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_every_rows_variant_of_the_gpu_cases_compiles(case, arch):
    define, dtype, shape, others = CASES[case]
    fd = _build(define, dtype)
    inputs = _inputs(shape, others, dtype, np.random.default_rng(0))
    device = PROFILES[arch]
    plan = fd.plan(inputs)
    dtypes = {b.id: b.dtype for b in plan.buffers}
    compiled = 0
    for seg in plan.segments:
        sched = scheduler_for(seg.scheduler)
        default = sched.default_params(seg, device)
        for rows in pointwise.ROWS:
            params = running_pointwise(default, flat_with_rows(default, rows, seg))
            if sched.is_valid(seg, device, params) is not None:
                continue
            ks = generate(seg, params, device, dtypes)
            assert f"TfVec<{dtype.cuda}" in ks.source or rows == 1
            assert len(compile_kernel(ks.source, ks.name, arch).cubin) > 0
            compiled += 1
    assert compiled >= 2  # one row a group, and at least one more
