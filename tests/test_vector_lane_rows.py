"""Rows a lane of vector lanes (heuristics 51): a strided reduction of one thread a column
whose lane takes a vector of consecutive outputs also takes rows a lane, `rows_per_block`
vectors apart, every row's vector loads in flight before any is reduced; the kernels that
take them, their shape, and that they compile (no GPU). Their results: the host runs in
tests/test_host_kernels.py, the GPU ones in tests/test_gpu_rows_per_lane.py."""

import pytest
from test_codegen_compile import ARCHS
from test_tail_groups import _kernel_source

from tunefuse import DataType
from tunefuse.compiler import compile_kernel

# (pattern, dtype, shape, vector a lane, rows a lane): the defaults on deep grids
VECTOR_LANES = [
    ("middle", DataType.BFloat16, (243713, 3, 114), 2, 4),
    ("middle", DataType.Float, (500000, 3, 50), 2, 4),
    ("middle_var_mean", DataType.BFloat16, (243713, 3, 114), 2, 4),
    ("col", DataType.Float, (3, 9000000), 4, 2),
    ("middle", DataType.BFloat16, (6787546, 2, 6), 2, 8),
]


@pytest.mark.parametrize("pattern,dtype,shape,vector,rows", VECTOR_LANES)
def test_a_vector_lane_loads_every_row_before_it_reduces_one(pattern, dtype, shape, vector, rows):
    source = _kernel_source(pattern, dtype, shape, {})
    body = source.split("__global__", 1)[1]
    vt = f"TfVec<{dtype.cuda}, {vector}>"
    # rows rows_per_block vectors apart (a warp's load of a vector each is whole sectors)
    assert "const int row = row_base + (int)q * 256 + to;" in body
    assert "(int)to * " not in body
    fill, compute = body.split(f"for (int q = 0; q < {rows}; ++q)")[1:3]
    assert f"const {vt} x0 = " in fill and "acc" not in fill
    assert "x0 = " not in compute and "acc0_v[v]" in compute
    # the outputs of a row: one vector store (each of a var_mean's two, in fp32)
    stores = compute.count(f", {vector}>*>(&B")
    assert stores == (2 if "var_mean" in pattern else 1)


@pytest.mark.parametrize("pattern,dtype,shape,vector,rows", VECTOR_LANES)
@pytest.mark.parametrize("arch", ARCHS)
def test_vector_lane_rows_compile(pattern, dtype, shape, vector, rows, arch):
    source = _kernel_source(pattern, dtype, shape, {})
    name = source.split("__global__ void", 1)[1].split("(", 1)[0].split()[-1]
    assert compile_kernel(source, name, arch).cubin


def test_a_normalizations_vector_lane_keeps_one_row():
    """A normalization's vector lanes keep each pass's totals a lane (lane_totals): rows a
    lane of them are refused by is_valid, not left to an assertion in codegen."""
    import dataclasses

    from test_reduction_defaults import pattern_plan

    from tunefuse.device_info import H100
    from tunefuse.schedulers import normalization

    (seg,) = pattern_plan("middle_softmax", (13110, 26, 16), DataType.BFloat16).segments
    p = normalization.default_params(seg, H100)
    assert p.vector > 1 and not p.inner, p
    assert normalization.is_valid(seg, H100, p) is None
    why = normalization.is_valid(seg, H100, dataclasses.replace(p, rows_per_lane=2))
    assert why == "a normalization's vector along the outputs takes one row a lane"


@pytest.mark.parametrize("dtype", [DataType.Float, DataType.BFloat16])
def test_rows_a_lane_along_the_outputs_of_reductions_that_read_one_another(dtype):
    """logsumexp over dim 0: held rows take its max and its sum of exp(x - max) as two
    passes, and rows a lane of a vector along the outputs combine a pass's lane totals only
    after every pass, so is_valid refuses them (nvrtc refused the kernel, "red0_0 is
    undefined": fuzz seed 100's random params); every point of rows a lane, vector and
    threads a column it accepts compiles, and rows a lane of one output a lane stay valid."""
    import dataclasses
    import itertools

    from fusion_zoo import build, logsumexp_over
    from test_reduction_defaults import planning_view

    from tunefuse.codegen import generate
    from tunefuse.device_info import H100
    from tunefuse.schedulers import reduction

    fd = build(logsumexp_over(0), dtype)
    plan = fd.plan([planning_view(37, 1000, dtype)], device=H100)
    (seg,) = plan.segments
    buffers = {b.id: b.dtype for b in plan.buffers}
    default = reduction.default_params(seg, H100)
    along = dataclasses.replace(default, inner=False, split=1, threads_r=8, rows_per_block=32)
    why = reduction.is_valid(seg, H100, dataclasses.replace(along, vector=2, rows_per_lane=2))
    assert why is not None and "read one another's results" in why
    assert reduction.is_valid(seg, H100, dataclasses.replace(along, rows_per_lane=2)) is None
    compiled = 0
    for lanes, vector, threads_r in itertools.product((1, 2, 4, 8), (1, 2, 4), (8, 32)):
        p = dataclasses.replace(along, rows_per_lane=lanes, vector=vector, threads_r=threads_r)
        if reduction.is_valid(seg, H100, p) is not None:
            continue
        assert not (lanes > 1 and vector > 1), p
        source = generate(seg, p, H100, buffers)
        assert compile_kernel(source.source, source.name, "sm_90").cubin, p
        compiled += 1
    assert compiled >= 8
