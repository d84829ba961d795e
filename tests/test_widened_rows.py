"""A held row of 2-byte floats is kept as floats, converted once as it is loaded
(`codegen.reduction._Emitter.widened_loads`; a bf16 vector's lanes from their 32-bit words,
`tf_b2f_lane`), and a mean or a variance multiplies its total by
the count's reciprocal (`codegen.reduction.per_element`). The source's shape, its compile for
sm_80 and sm_90, the rows on the host under AddressSanitizer against the reference, an input
written back through its float exactly, and the same on the GPU."""

from __future__ import annotations

import re
import shutil
import sys

import numpy as np
import pytest
from fusion_zoo import ZOO, build, inputs_for
from norm_defaults import zoo_norm_plan
from zoo_agreement import zoo_norm_agrees_on_gpu, zoo_norm_agrees_on_host

from tunefuse import DataType, FusionDefinition
from tunefuse.codegen import generate
from tunefuse.codegen.reduction import per_element
from tunefuse.compiler import compile_kernel
from tunefuse.device_info import H100
from tunefuse.schedulers import normalization, with_values
from tunefuse.schedulers.reduction import peels

BF16, HALF, FP32 = DataType.BFloat16, DataType.Half, DataType.Float
ROWS = 1 << 14
# torch.compile's layout of a row of 200: a warp a block, 4 rows a lane, a vector of 8 a lane
FOUR_ROWS_A_LANE = {
    "threads_r": 32,
    "rows_per_block": 1,
    "elements_per_thread": 8,
    "vector": 8,
    "rows_per_lane": 4,
}
# (name, cols, dtype, changes): held rows of every fill path
CASES = [
    ("layernorm", 200, BF16, {}),  # octets, one row a lane
    ("layernorm", 200, BF16, FOUR_ROWS_A_LANE),  # rows a lane, the weight held from before
    ("rmsnorm", 73, BF16, {}),  # an element at a time, the weight hoisted (packed)
    ("softmax", 203, HALF, {}),  # half, an element at a time
    ("softmax", 4099, BF16, {}),  # peeled: the row's head and tail an element a lane
    ("logsumexp", 12, BF16, {}),  # quads, many rows a block
    ("layernorm", 200, FP32, {}),  # 4-byte rows: held as they are
]


def _case(name: str, cols: int, dtype: DataType, changes: dict, rows: int = ROWS):  # noqa: ANN202
    plan = zoo_norm_plan(name, rows, cols, dtype)
    (seg,) = plan.segments
    p = with_values(normalization.default_params(seg, H100), changes)
    assert p.cache_row and normalization.is_valid(seg, H100, p) is None, p
    return seg, p, generate(seg, p, H100, {b.id: b.dtype for b in plan.buffers})


def _row_input(seg) -> int:  # noqa: ANN001 - a Segment
    (k,) = [k for k, ld in enumerate(seg.loads) if not normalization.same_in_every_row(seg, ld)]
    return k


@pytest.mark.parametrize("name, cols, dtype, changes", CASES)
def test_a_held_row_of_halves_is_floats_converted_once(name, cols, dtype, changes):
    seg, p, kernel = _case(name, cols, dtype, changes)
    src, k = kernel.source, _row_input(seg)
    held = re.search(rf"\b(\w+) cl{k}(_q)?\[", src)
    assert held is not None, "the row is held"
    if dtype is FP32:
        assert held[1] == "float" and f"tf_cast<float>(x{k}" not in src
        return
    assert held[1] == "float", held[0]
    # bf16 vectors by 32-bit words (`tf_b2f_lane`), else an element's own conversion
    by_words = dtype is BF16 and p.vector % 2 == 0
    conversion = f"tf_b2f_lane(x{k}, v)" if by_words else "tf_cast<float>("
    assert f"cl{k}[c * {p.vector} + v] = {conversion}" in src, "converted where it is loaded"
    assert f"tf_cast<float>(cl{k}[" not in src, "and never again where it is used"
    if peels(seg, p.vector):  # the row's head and tail, an element a lane
        assert f"cl{k}[c * {p.vector} + v] = tf_cast<float>(" in src


@pytest.mark.parametrize("hoist", [False, True])
def test_a_weight_loaded_once_for_many_rows_stays_packed(hoist):
    """rmsnorm bf16: the weight hoisted before the row loop is held in its own type (two
    elements a register), the row widened."""
    seg, p, kernel = _case("rmsnorm", 73, BF16, {"hoist_invariants": hoist})
    (w,) = [k for k, ld in enumerate(seg.loads) if normalization.same_in_every_row(seg, ld)]
    src = kernel.source
    assert (f"tf_bf16 cl{w}[" in src) is hoist
    assert f"float cl{_row_input(seg)}[" in src


def test_bf16_vectors_read_at_use_convert_by_words():
    """layernorm bf16 octets: the weight and bias, read in the output pass, convert a lane
    from its 32-bit word; bf16 read an element at a time (rmsnorm's 73) cannot."""
    seg, _, kernel = _case("layernorm", 200, BF16, {})
    invariant = [k for k, ld in enumerate(seg.loads) if normalization.same_in_every_row(seg, ld)]
    for k in invariant:
        assert f"tf_b2f_lane(vl{k}, v)" in kernel.source, k
        assert f"tf_cast<float>(vl{k}.v[v])" not in kernel.source, k
    _, p, kernel = _case("rmsnorm", 73, BF16, {})
    assert p.vector == 1 and "tf_b2f_lane(" not in kernel.source.split("end of preamble")[1]


def test_a_vector_of_outputs_a_lane_keeps_its_lanes_as_loaded():
    """A column sum of bf16 reads a vector of 8 outputs a lane: converted lane by lane as
    before (by words, ptxas kept the lane's output vector in local memory)."""
    from fusion_zoo import unfilled_inputs

    from tunefuse.schedulers import scheduler_for

    fd = build(ZOO["col_sum"], BF16)
    plan = fd.plan(unfilled_inputs(fd, 21, 1 << 20), device=H100)
    (seg,) = plan.segments
    p = scheduler_for(seg.scheduler).default_params(seg, H100)
    assert p.vector == 8 and not p.inner, p
    src = generate(seg, p, H100, {b.id: b.dtype for b in plan.buffers}).source
    assert "tf_b2f_lane(" not in src.split("end of preamble")[1]
    assert "vl0.v[v]" in src


def test_means_multiply_by_the_count_reciprocal():
    seg, _, kernel = _case("layernorm", 200, BF16, {})
    src = kernel.source
    assert re.search(r"acc\w*(\.m2)? /", src) is None, "no total divided a row"
    assert "mean0 = (acc0s * ((float)1 / (float)n_red));" in src
    assert ".m2 * ((float)1 / (float)(n_red > 0 ? n_red - 0 : 0))" in src  # the variance
    assert per_element("a", "double", "m") == "(a * ((double)1 / (double)m))"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name, cols, dtype, changes", CASES)
def test_widened_rows_compile(name, cols, dtype, changes, arch):
    _, _, kernel = _case(name, cols, dtype, changes)
    assert compile_kernel(kernel.source, kernel.name, arch).cubin


def softmax_and_negation(fd: FusionDefinition, dtype: DataType = BF16) -> None:
    """softmax of x and -x, both in x's type: -x is x's element through its held float,
    negated and rounded back, so it must come out exact."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    xf = fd.ops.cast(x, FP32)
    m = fd.ops.max(xf, dims=[1], keepdim=True)
    e = fd.ops.exp(fd.ops.sub(xf, m))
    fd.add_output(fd.ops.cast(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)), dtype))
    fd.add_output(fd.ops.cast(fd.ops.neg(xf), dtype))


def _negation_is_exact(got: list, x: np.ndarray) -> None:
    negated = got[1]
    assert negated.dtype == x.dtype and negated.shape == x.shape
    assert np.array_equal(negated.view(np.uint16), (-x).view(np.uint16))


host_only = pytest.mark.skipif(
    shutil.which("g++") is None or not sys.platform.startswith("linux"),
    reason="needs g++ on Linux (ucontext fibers, AddressSanitizer)",
)


@host_only
@pytest.mark.parametrize("name, cols, dtype, changes", [c for c in CASES if c[2] is not FP32])
def test_widened_rows_agree_on_the_host(name, cols, dtype, changes):
    """37 rows (a partial last tile) on the host under AddressSanitizer, against the
    reference."""
    _, p, _ = _case(name, cols, dtype, changes)
    zoo_norm_agrees_on_host(name, cols, dtype, [p])


@host_only
@pytest.mark.parametrize("dtype", [BF16, HALF])
@pytest.mark.parametrize("cols", [12, 203, 4099])
def test_an_input_written_back_through_its_float_is_exact_on_the_host(dtype, cols):
    from host_kernels import run_on_host

    fd = build(softmax_and_negation, dtype)
    inputs = inputs_for(fd, 37, cols, np.random.default_rng(cols))
    (run,) = run_on_host(fd, inputs, [None])
    _negation_is_exact(run.outputs, inputs[0])


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name, rows, cols, dtype, changes",
    [
        ("layernorm", 41943, 200, BF16, {}),
        ("layernorm", 20011, 200, BF16, FOUR_ROWS_A_LANE),
        ("rmsnorm", 20011, 73, BF16, {"hoist_invariants": True}),
        ("softmax", 5003, 203, HALF, {}),
        ("softmax", 1001, 4099, BF16, {}),
        ("logsumexp", 300007, 12, BF16, {}),
    ],
)
def test_gpu_widened_rows_agree(name, rows, cols, dtype, changes):
    zoo_norm_agrees_on_gpu(name, rows, cols, dtype, **changes)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [BF16, HALF])
@pytest.mark.parametrize("rows, cols", [(300007, 12), (5003, 203), (1001, 4099)])
def test_gpu_an_input_written_back_through_its_float_is_exact(dtype, rows, cols):
    from test_gpu_split import run_with_reduction_params

    fd = build(softmax_and_negation, dtype)
    inputs = inputs_for(fd, rows, cols, np.random.default_rng(cols))
    got, _ = run_with_reduction_params(fd, inputs, kind="normalization")
    _negation_is_exact(got, inputs[0])


def test_the_zoo_cases_above_exist():
    assert {name for name, *_ in CASES} <= set(ZOO)
