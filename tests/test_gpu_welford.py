"""GPU: a Welford pass over a row read from memory merges `unroll` chunks a trip at once
(codegen.reduction.welford_group, tf_welford_add_chunk) and finishes the row element by
element. Every layout (inner, outer with a vector along the outputs), unroll, split and tail
length gives torch's var_mean, computed here in float64 from the same inputs, on data whose
mean is far from zero (where a sum of squares would cancel)."""

import dataclasses

import numpy as np
import pytest
from test_gpu_execute import TOL, to_device, to_host

from tunefuse import DataType, FusionDefinition

pytestmark = pytest.mark.gpu


def _var_mean(dtype, rank, dims, correction=1):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1] * rank, dtype=dtype)
        var, mean = fd.ops.var_mean(x, dims=dims, correction=correction)
        fd.add_output(var)
        fd.add_output(mean)
    return fd


def _layernorm(dtype):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        xf = fd.ops.cast(x, DataType.Float) if dtype is not DataType.Float else x
        var, mean = fd.ops.var_mean(xf, dims=[1], correction=0, keepdim=True)
        y = fd.ops.mul(fd.ops.sub(xf, mean), fd.ops.rsqrt(fd.ops.add(var, fd.define_scalar(1e-5))))
        fd.add_output(fd.ops.cast(y, dtype) if dtype is not DataType.Float else y)
    return fd


def _run(fd, inputs, kinds, changes):
    """The fusion with the default params of its kernels of `kinds` changed, each change
    where the params have the field and the change is valid; the host results and the params
    of those kernels."""
    from tunefuse.runtime.executor import Executor
    from tunefuse.schedulers import scheduler_for

    used = []

    def choose(seg, device):
        sched = scheduler_for(seg.scheduler)
        params = sched.default_params(seg, device)
        if seg.scheduler.value not in kinds:
            return params
        changed = params
        for name, value in changes.items():
            if not hasattr(params, name):
                continue
            candidate = dataclasses.replace(changed, **{name: value})
            if sched.is_valid(seg, device, candidate) is None:
                changed = candidate
        used.append(changed)
        return changed

    executor = Executor(fd.fusion, params_source=choose)
    return [to_host(g) for g in executor.run(to_device(inputs))], used


def _data(dtype, shape, rng):
    x = rng.standard_normal(shape) * 0.5 + 1000.0
    return x.astype(dtype.numpy)


def _assert_var_mean(got, x, dims, correction, dtype):
    x64 = x.astype(np.float64)
    want_mean = x64.mean(axis=tuple(dims))
    n = np.prod([x.shape[d] for d in dims])
    want_var = ((x64 - x64.mean(axis=tuple(dims), keepdims=True)) ** 2).sum(axis=tuple(dims))
    want_var = want_var / max(n - correction, 0) if n > correction else want_var * np.nan
    rtol, atol = TOL[dtype]
    # The variance (about 0.25 here) of data near 1000: a cancelling sum of squares in fp32
    # would be off by far more than this.
    np.testing.assert_allclose(got[1].astype(np.float64), want_mean, rtol=rtol * 4, atol=atol * 4)
    np.testing.assert_allclose(got[0].astype(np.float64), want_var, rtol=rtol * 20, atol=atol * 20)


# (rank, dims, shape): reduced extents with and without a tail of a trip of chunks.
SHAPES = [
    (2, [0], (1, 40)),
    (2, [0], (7, 40)),
    (2, [0], (1000, 37)),
    (2, [0], (4099, 256)),
    (2, [1], (3, 1)),
    (2, [1], (5, 33)),
    (2, [1], (9, 4095)),  # a normalization: rows of 257 to 4096 no vector fits
    (2, [1], (9, 4097)),  # a reduction
    (2, [1], (2, 70001)),
    (3, [1], (3, 1023, 16)),
]


# (unroll, vector, split): a value the segment cannot take leaves the default's
LAYOUTS = [(1, 1, 1), (2, 1, 1), (8, 1, 1), (4, 2, 1), (8, 4, 1), (2, 8, 1), (4, 1, 3), (8, 4, 3)]


@pytest.mark.parametrize("dtype", [DataType.Float, DataType.BFloat16, DataType.Double], ids=str)
@pytest.mark.parametrize("shape_case", range(len(SHAPES)))
@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_var_mean_of_every_trip_layout_is_torchs(dtype, shape_case, layout, rng):
    rank, dims, shape = SHAPES[shape_case]
    unroll, vector, split = layout
    fd = _var_mean(dtype, rank, dims)
    x = _data(dtype, shape, rng)
    got, _ = _run(fd, [x], ("reduction",), {"unroll": unroll, "vector": vector, "split": split})
    _assert_var_mean(got, x, dims, 1, dtype)


@pytest.mark.parametrize("dtype", [DataType.Float, DataType.BFloat16], ids=str)
@pytest.mark.parametrize("shape", [(4, 8191), (3, 2**17 + 5), (64, 768)])
@pytest.mark.parametrize("unroll", [1, 2, 4])
@pytest.mark.parametrize("shared_row", [False, True])
def test_a_layernorm_whose_rows_are_read_again_normalizes(dtype, shape, unroll, shared_row, rng):
    """Rows not kept on chip (cache_row False): the statistics pass is a Welford pass over
    memory (with `shared_row`, the pass that also stages the row in shared memory). Rows too
    few to fill the GPU are split: their statistics are a reduction kernel's."""
    fd = _layernorm(dtype)
    x = _data(dtype, shape, rng)
    changes = {"unroll": unroll, "cache_row": False, "shared_row": shared_row}
    got, used = _run(fd, [x], ("normalization", "reduction"), changes)
    assert used and not any(getattr(p, "cache_row", False) for p in used)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    want = (x64 - mean) / np.sqrt(((x64 - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    rtol, atol = TOL[dtype]
    # the normalized values are O(1); fp32 statistics of data near 1000 carry ~1e-4 relative
    tol = 2e-3 if dtype is DataType.Float else 4 * atol
    np.testing.assert_allclose(got[0].astype(np.float64), want, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "dtype,shape", [(DataType.Float, (16384, 1001)), (DataType.BFloat16, (2000, 777))], ids=str
)
def test_a_var_mean_of_short_odd_rows_held_in_registers_is_torchs(dtype, shape, rng):
    """Rows no vector fits, of 257 to 4096 elements: a normalization that holds each row in
    registers and takes its mean, then its squared deviations."""
    fd = _var_mean(dtype, 2, [1], correction=0)
    x = _data(dtype, shape, rng)
    got, used = _run(fd, [x], ("normalization",), {})
    assert used and all(p.cache_row for p in used)
    _assert_var_mean(got, x, [1], 0, dtype)
