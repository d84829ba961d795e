"""GPU: peeled rows (`schedulers.reduction.peeled_accesses`: rows whose length, row stride or
offset is not a multiple of the vector, read by vectors at aligned addresses, each row's head
and tail an element a lane) compute what the reference computes: every accumulator family
(sums, max, Welford, max-and-sum of exp), re-read normalizations (softmax, layernorm whose
weight lies elsewhere in the vector, rmsnorm), staged ones (rows in shared memory) and held
ones (rows in registers, the head and tail in registers of their own),
a sliced input (rows starting one element past an alignment), a split row, rows shorter than
a vector; the defaults of the same rows (peeled where `reduction.default_row_vector` says);
rows peeled and not of one structure, each run by its own kernel."""

import dataclasses

import numpy as np
import pytest
from fusion_zoo import layernorm, logsumexp, rmsnorm, softmax
from test_gpu_execute import assert_agrees
from test_gpu_rows_per_lane import KernelVariant
from test_gpu_split import _row_stats, _row_var_mean, run_with_reduction_params

from tunefuse import DataType, FusionDefinition
from tunefuse.device_info import PROFILES
from tunefuse.schedulers import reduction, scheduler_for

pytestmark = pytest.mark.gpu


def _sliced_row_sum(fd, dtype):
    """sum over dim 1 of x[:, 1:] of x [41, 1030]: row i starts at 1030 * i + 1."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    fd.add_output(fd.ops.sum(fd.ops.slice(x, [0, 1], [41, 1030]), dims=[1]))


def _sliced_softmax(fd, dtype):
    """softmax over dim 1 of x[:, 1:] of x [33, 1030], its output dense: the load and the
    store lie at different places of a vector, so a peeled row is read by vectors and
    written an element a lane."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    xf = fd.ops.cast(fd.ops.slice(x, [0, 1], [33, 1030]), DataType.Float)
    m = fd.ops.max(xf, dims=[1], keepdim=True)
    e = fd.ops.exp(fd.ops.sub(xf, m))
    fd.add_output(fd.ops.cast(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)), dtype))


CASES = [
    # (fusion, dtype, shape of x, scheduler of the kernel under test)
    (_row_stats, DataType.Float, (37, 1001), "reduction"),
    (_row_stats, DataType.BFloat16, (13, 3003), "reduction"),
    (_row_stats, DataType.Half, (7, 999), "reduction"),
    (_row_stats, DataType.BFloat16, (1, 100003), "reduction"),  # one row: split
    (_row_stats, DataType.BFloat16, (513, 5), "reduction"),  # rows shorter than a vector
    (_row_stats, DataType.Float, (1001, 9), "reduction"),
    (_row_var_mean, DataType.Float, (11, 5001), "reduction"),
    (_row_var_mean, DataType.BFloat16, (5, 4097), "reduction"),
    (logsumexp, DataType.BFloat16, (17, 4001), "reduction"),
    (_sliced_row_sum, DataType.BFloat16, (41, 1030), "reduction"),
    (softmax, DataType.BFloat16, (9, 5003), "normalization"),
    (softmax, DataType.Float, (5, 2051), "normalization"),
    (layernorm, DataType.BFloat16, (7, 3001), "normalization"),
    (rmsnorm, DataType.Float, (6, 1999), "normalization"),
    (_sliced_softmax, DataType.BFloat16, (33, 1030), "normalization"),
    (softmax, DataType.Float, (37, 20011), "normalization"),  # staged or re-read
    (layernorm, DataType.BFloat16, (5, 30001), "normalization"),
]

VARIANTS = [
    # changes to the kernel's default params, besides the vector (re-read rows for a
    # normalization: elements_per_thread = vector)
    {},
    {"threads_r": 32, "rows_per_block": 4, "unroll": 1},
    {"threads_r": 128, "rows_per_block": 1, "unroll": 4},
    {"threads_r": 512, "rows_per_block": 1, "unroll": 2},
]


def _inputs(fd, shape, rng):
    out = []
    for vid in fd.fusion.inputs:
        t = fd.fusion.values[vid]
        dims = shape if t.rank == len(shape) else (shape[-1],)
        out.append((rng.standard_normal(dims) * 2 + 1).astype(t.dtype.numpy))
    return out


LAYOUTS = ("reread", "staged", "held")  # a normalization's rows: from memory each pass,
# staged in shared memory, or held in registers (a reduction's: "reread", its strided loop)


def peel_variant(
    case: int, vector: int, variant: int, rng, layout: str = "reread", rows: int | None = None
) -> KernelVariant:
    """CASES[case] at `vector` with VARIANTS[variant] on the sm_90 profile, one row a lane,
    no split unless the default splits (a split row's shares are peeled each); a
    normalization's rows laid out as `layout` says (LAYOUTS), never over a cluster, a held
    row's elements a thread as few as hold it; `rows`: at most that many rows (a sliced
    input's fusion slices its own)."""
    define, dtype, shape, kind = CASES[case]
    if rows is not None and define not in (_sliced_row_sum, _sliced_softmax):
        shape = (min(shape[0], rows), *shape[1:])
    with FusionDefinition() as fd:
        define(fd, dtype)
    inputs = _inputs(fd, shape, rng)
    device = PROFILES["sm_90"]
    plan = fd.plan(inputs)
    (seg,) = [s for s in plan.segments if s.scheduler.value == kind]
    sched = scheduler_for(seg.scheduler)
    default = sched.default_params(seg, device)
    changes = {"vector": vector, "rows_per_lane": 1, **VARIANTS[variant]}
    if kind == "normalization":
        ept = vector
        if layout == "held":
            _, n_red = reduction.sizes(seg)
            threads = changes.get("threads_r", default.threads_r)
            ept = -(-n_red // (threads * vector)) * vector
        changes.update(
            cache_row=layout == "held",
            shared_row=layout == "staged",
            cluster=1,
            elements_per_thread=ept,
        )
    params = dataclasses.replace(default, **changes)
    why = sched.is_valid(seg, device, params)
    dtypes = {b.id: b.dtype for b in plan.buffers}
    return KernelVariant(fd, inputs, kind, changes, seg, params, dtypes, why)


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("vector", [2, 4, 8])
@pytest.mark.parametrize("variant", range(len(VARIANTS)))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_peeled_rows_agree_with_the_reference(case, vector, variant, layout, rng):
    if layout != "reread" and CASES[case][3] != "normalization":
        pytest.skip("a reduction reads its row once, by its strided loop")
    v = peel_variant(case, vector, variant, rng, layout)
    if v.why is not None:
        pytest.skip(v.why)
    if not reduction.peels(v.segment, vector):
        pytest.skip(f"vector {vector} is not peeled here")
    got, launched = run_with_reduction_params(v.fd, v.inputs, kind=v.kind, **v.changes)
    assert any(k.params["vector"] == vector for k in launched)
    assert_agrees(v.fd, v.inputs, got, CASES[case][1])


@pytest.mark.parametrize("case", range(len(CASES)))
def test_default_params_agree_with_the_reference(case, rng):
    define, dtype, shape, kind = CASES[case]
    with FusionDefinition() as fd:
        define(fd, dtype)
    inputs = _inputs(fd, shape, rng)
    got, _ = run_with_reduction_params(fd, inputs, kind=kind)
    assert_agrees(fd, inputs, got, dtype)


def test_a_peeled_row_sum_is_deterministic(rng):
    """The same plan twice: the same bits (a row's head and tail join its total in a fixed
    order)."""
    with FusionDefinition() as fd:
        _row_stats(fd, DataType.Float)
    inputs = [rng.standard_normal((64, 20011)).astype(np.float32)]
    peeled = {"vector": 4, "rows_per_lane": 1}
    first, launched = run_with_reduction_params(fd, inputs, kind="reduction", **peeled)
    assert any(k.params["vector"] == 4 for k in launched)
    second, _ = run_with_reduction_params(fd, inputs, kind="reduction", **peeled)
    for a, b in zip(first, second, strict=True):
        assert np.array_equal(a, b)


def test_rows_peeled_and_not_of_one_structure_run_their_own_kernels(rng):
    """Softmax rows of 4100 (read by vectors of 4 unpeeled) and then of 4099 (peeled) with
    the same params, in one process: each runs its own kernel (one name once served both,
    and the second ran the first's code: a misaligned vector)."""
    with FusionDefinition() as fd:
        softmax(fd, DataType.Float)
    params = {
        "vector": 4,
        "elements_per_thread": 4,
        "threads_r": 256,
        "rows_per_block": 1,
        "cache_row": False,
        "shared_row": True,
        "cluster": 1,
        "rows_per_lane": 1,
    }
    runs = []
    for cols in (4100, 4099, 4100):
        inputs = [rng.standard_normal((8, cols)).astype(np.float32)]
        got, launched = run_with_reduction_params(fd, inputs, kind="normalization", **params)
        assert_agrees(fd, inputs, got, DataType.Float)
        (k,) = launched
        runs.append((k.kernel_key, k.params, k.kernel_name))
    assert runs[0][:2] == runs[1][:2]  # one structure, one set of params
    assert runs[0] == runs[2] and runs[0][2] != runs[1][2]
