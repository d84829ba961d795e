"""A flat pointwise kernel's vector along the flat index (`flat_vector`, no GPU): which
accesses are dense, how wide the vector may be, when the default takes it, what `is_valid`
refuses, and every variant of the GPU test's cases compiling with NVRTC for sm_80 and sm_90."""

import dataclasses
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gpu_flat_vector import CASES, _flat_variant
from test_gpu_pointwise_rows import _build, _inputs, cat_rows, running_pointwise
from test_pointwise_defaults import view
from test_pointwise_rows import bias_add_segment

from tunefuse import DataType, FusionDefinition
from tunefuse.codegen import generate
from tunefuse.compiler import compile_kernel
from tunefuse.device_info import A100, H100, PROFILES
from tunefuse.planning.kernel_ir import SchedulerKind
from tunefuse.schedulers import pointwise, scheduler_for

DTYPES = [DataType.Float, DataType.BFloat16, DataType.Half, DataType.Double]


@given(
    rows=st.integers(1, 1 << 22),
    cols=st.integers(2, 1 << 14),
    dtype=st.sampled_from(DTYPES),
    device=st.sampled_from([H100, A100]),
)
@settings(max_examples=300, deadline=None)
def test_the_default_takes_the_flat_vector_exactly_where_it_moves_more_bytes(
    rows, cols, dtype, device
):
    """x [R, C] + b [C]: x and the output are dense, b is not. The flat vector is 16 bytes
    (aligned whole tensors); the default takes it where a row's vector (and its rows a
    group) moves fewer elements, and only then, unless the 2-D kernel loops over the rows to
    read the bias once (a flat kernel would read it again from memory for each row)."""
    seg = bias_add_segment(rows, cols, dtype)
    p = pointwise.default_params(seg, device)
    assert pointwise.is_valid(seg, device, p) is None
    assert pointwise.max_flat_vector(seg) * dtype.itemsize == 16
    row_vector = pointwise.max_vector(seg)
    row_group = row_vector * pointwise.widest_rows(seg, row_vector)
    wider = pointwise.max_flat_vector(seg) > row_group
    assert pointwise.narrowed_loads(seg) == ([1] if rows > 1 else [])  # b alone (one row: dense)
    assert p.flat_vector == (wider and not pointwise.rereads_broadcast(seg, 1, device))
    if p.flat_vector:
        assert p.vector == pointwise.max_flat_vector(seg) and p.split == 0 and p.rows == 1


def test_dense_offsets_and_the_widest_flat_vector():
    seg = bias_add_segment(1001, 261, DataType.BFloat16)
    x, b = seg.loads
    assert pointwise.dense_offset(seg, x.offset) and not pointwise.dense_offset(seg, b.offset)
    assert pointwise.dense_offset(seg, seg.stores[0].offset)
    assert pointwise.max_vector(seg) == 1 and pointwise.max_flat_vector(seg) == 8
    # A transposed read is not dense: read element by element, the stores still vectors.
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.add(fd.ops.permute(t, [1, 0]), fd.define_scalar(1.0)))
    (seg,) = fd.plan([view((5, 1001), DataType.Float)]).segments
    assert not pointwise.dense_offset(seg, seg.loads[0].offset)
    assert pointwise.max_flat_vector(seg) == 4
    # A store that is not dense (the output's rows apart by more than a row) allows none.
    assert (
        pointwise.max_flat_vector(
            dataclasses.replace(
                seg, stores=(dataclasses.replace(seg.stores[0], offset=seg.loads[0].offset),)
            )
        )
        == 1
    )


def test_a_misaligned_dense_load_narrows_the_flat_vector():
    """x viewed one element past its start: dense, but its vector would start misaligned."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.BFloat16)
        fd.add_output(
            fd.ops.add(fd.ops.slice(x, [1], [1002]), fd.define_scalar(1.0, DataType.BFloat16))
        )
    (seg,) = fd.plan([view((1002,), DataType.BFloat16)]).segments
    assert pointwise.dense_offset(seg, seg.loads[0].offset)
    assert pointwise.max_flat_vector(seg) == 1


def test_flat_vectors_are_refused_where_they_cannot_run():
    seg = bias_add_segment(1001, 261, DataType.Float)
    base = pointwise.default_params(seg, H100)
    assert base.flat_vector and base.vector == 4

    def why(**changes):
        return pointwise.is_valid(seg, H100, dataclasses.replace(base, **changes))

    assert "flat kernel" in why(split=1)
    assert "rows 1" in why(rows=2)
    assert "along the flat index" in why(vector=8)  # 32 bytes
    assert "at most 1" in why(flat_vector=False)  # a row's vector: 261 is odd
    assert why(vector=2) is None and why(vector=1) is None


def test_loads_behind_a_guard_are_read_alone_and_do_not_narrow_it():
    """cat of [1027, 3] and [1029, 3] bf16: y's constant offset (-3081) is no multiple of 8,
    but both loads sit behind the cat's guard: read element by element in their branch."""
    dtype, shape, others = DataType.BFloat16, (1027, 3), [(1029, 3)]
    fd = _build(cat_rows, dtype)
    (seg,) = fd.plan(_inputs(shape, others, dtype, np.random.default_rng(0))).segments
    p = pointwise.default_params(seg, H100)
    assert p.flat_vector and p.vector == 8
    source = generate(seg, p, H100, {b: dtype for b in range(3)}).source
    assert "TfVec<tf_bf16, 8> v" not in source and "TfVec<tf_bf16, 8> o0" in source
    assert "if (++c1 == E1)" in source  # the carried indices each element reads at


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_every_flat_vector_of_the_gpu_cases_compiles(case, arch):
    define, dtype, shape, others = CASES[case]
    fd = _build(define, dtype)
    device = PROFILES[arch]
    plan = fd.plan(_inputs(shape, others, dtype, np.random.default_rng(0)))
    dtypes = {b.id: b.dtype for b in plan.buffers}
    compiled = 0
    for seg in plan.segments:
        sched = scheduler_for(seg.scheduler)
        default = sched.default_params(seg, device)
        for vector in (2, 4, 8, 16):
            for static in (False, True):
                flat = dataclasses.replace(_flat_variant(default, vector), static_shape=static)
                params = running_pointwise(default, flat)
                if sched.is_valid(seg, device, params) is not None:
                    continue
                ks = generate(seg, params, device, dtypes)
                assert "tail_first" in ks.source
                assert len(compile_kernel(ks.source, ks.name, arch).cubin) > 0
                compiled += 1
    assert compiled >= 2


def test_a_rows_vector_keeps_its_loads_where_several_would_go_scalar():
    """column_layernorm bf16 [40058, 2320] (layernorm over dim 0): its normalizing kernel
    reads a mean, a rstd, a weight and a bias of each column. A row's vector (4: the fp32
    statistics' 16 bytes) reads them 4 at a time; a flat vector would read them one by one
    (247.6 -> 361.0 us, H100). With a row's vector of 1 (odd widths) nothing is lost."""
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
    from patterns import pattern_fusion, planning_inputs

    for shape, flat in (((40058, 2320), False), ((40058, 2321), True)):
        fd = pattern_fusion("column_layernorm", DataType.BFloat16)
        plan = fd.plan(planning_inputs(fd, shape, DataType.BFloat16), device=H100)
        (seg,) = [s for s in plan.segments if s.scheduler is SchedulerKind.POINTWISE]
        assert len(pointwise.narrowed_loads(seg)) >= 2
        p = pointwise.default_params(seg, H100)
        assert p.flat_vector == flat and (flat or p.vector == pointwise.max_vector(seg) == 4)
