"""GPU: reductions whose innermost dim is not reduced (column sums, BatchNorm's statistics, a
middle dim) with a vector of consecutive outputs a lane: every family, loads broadcast along
either side, a padded input (its loads behind a guard, a lane at a time), an epilogue that
reads an input along the outputs, a transposed output (not vector-stored), lanes of 1 to 32
threads in either layout; each against the reference."""

import functools

import numpy as np
import pytest
from test_gpu_execute import assert_agrees
from test_gpu_split import int_sum0, middle_reduction, run_with_reduction_params

from tunefuse import DataType, FusionDefinition, reference
from tunefuse.device_info import PROFILES
from tunefuse.schedulers import reduction

pytestmark = pytest.mark.gpu


def _stats0(fd, dtype):
    """var_mean, sum, max, min over dim 0 of one input: four accumulators, one pass."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    var, mean = fd.ops.var_mean(x, dims=[0], correction=1)
    fd.add_output(var)
    fd.add_output(mean)
    fd.add_output(fd.ops.sum(x, dims=[0]))
    fd.add_output(fd.ops.max(x, dims=[0]))
    fd.add_output(fd.ops.min(x, dims=[0]))


def _scaled_bias_sum0(fd, dtype):
    """sum over dim 0 of x * s[:, None] + b[None, :], plus c along the outputs afterwards:
    a load broadcast along the outputs (s, one element a row), one along the rows (b,
    vector-loaded), and one read by the reduced output's epilogue (c)."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    s = fd.define_tensor(shape=[-1], dtype=dtype)
    b = fd.define_tensor(shape=[-1], dtype=dtype)
    c = fd.define_tensor(shape=[-1], dtype=DataType.Float)
    y = fd.ops.add(
        fd.ops.mul(x, fd.ops.broadcast_in_dim(s, [x.shape()[0], x.shape()[1]], [0])),
        fd.ops.broadcast_in_dim(b, [x.shape()[0], x.shape()[1]], [1]),
    )
    fd.add_output(fd.ops.add(fd.ops.sum(fd.ops.cast(y, DataType.Float), dims=[0]), c))


_middle_prod = functools.partial(middle_reduction, op="prod")


def _padded_mean0(fd, dtype):
    """mean over dim 0 of x padded by 8 columns on the left: loads behind a guard."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    fd.add_output(fd.ops.mean(fd.ops.pad(x, [8, 0, 0, 0]), dims=[0]))


def _middle_sum_transposed(fd, dtype):
    """sum over dim 1 of [a, r, c], stored [c, a]: a reduced output strided along the vector."""
    x = fd.define_tensor(shape=[-1, -1, -1], dtype=dtype)
    fd.add_output(fd.ops.permute(fd.ops.sum(x, dims=[1]), [1, 0]))


def case_inputs(build, dtype, shape, rng):
    if build is int_sum0:
        return [rng.integers(-1000, 1000, shape).astype(np.int32)]
    x = (rng.standard_normal(shape) * 0.05 + 1.0).astype(dtype.numpy)  # products of ~1: no overflow
    if build is not _scaled_bias_sum0:
        return [x]
    rows, cols = shape
    return [
        x,
        rng.standard_normal(rows).astype(dtype.numpy),
        rng.standard_normal(cols).astype(dtype.numpy),
        rng.standard_normal(cols).astype(np.float32),
    ]


CASES = [
    (_stats0, DataType.Float, (37, 1024)),
    (_stats0, DataType.BFloat16, (5, 8 * 13)),
    (_scaled_bias_sum0, DataType.Half, (129, 2048)),
    (_middle_prod, DataType.Float, (3, 7, 256)),
    (int_sum0, DataType.Int32, (2, 4096)),
    (_padded_mean0, DataType.Float, (33, 248)),
    (_middle_sum_transposed, DataType.BFloat16, (6, 9, 64)),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("vector", [2, 4, 8])
@pytest.mark.parametrize("threads_r,inner", [(1, False), (4, False), (32, False), (4, True)])
@pytest.mark.parametrize("split", [1, 3])
def test_a_vector_of_outputs_a_lane_agrees_with_the_reference(
    case, vector, threads_r, inner, split, rng
):
    """Split 3 ways too: each lane's outputs published and combined one after another (some
    of these shares are empty: fewer rows than 3 blocks' threads)."""
    build, dtype, shape = CASES[case]
    with FusionDefinition() as fd:
        build(fd, dtype)
    inputs = case_inputs(build, dtype, shape, rng)
    (segment,) = [s for s in fd.plan(inputs).segments if s.scheduler.value == "reduction"]
    widest = reduction.output_vector(segment)
    if widest % vector:
        pytest.skip(f"vector {vector}: the outputs allow {widest}")
    rows = 256 // threads_r if not inner else 32 // threads_r
    changes = dict(
        vector=vector, threads_r=threads_r, inner=inner, rows_per_block=rows, split=split
    )
    params = reduction.replace(reduction.default_params(segment, PROFILES["sm_90"]), **changes)
    assert reduction.is_valid(segment, PROFILES["sm_90"], params) is None
    got, launched = run_with_reduction_params(fd, inputs, **changes)
    assert any(k.params["vector"] == vector and k.params["split"] == split for k in launched)
    assert_agrees(fd, inputs, got, dtype)


def test_the_default_takes_vectors_of_outputs_where_the_outputs_fill_the_gpu(rng):
    """A column sum of 2 rows by 2**20 bf16 columns (outputs that fill the GPU many times
    over): the default reads 16 bytes a load."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.sum(x, dims=[0]))
    inputs = [rng.standard_normal((2, 1 << 20)).astype(DataType.BFloat16.numpy)]
    got, launched = run_with_reduction_params(fd, inputs)
    assert launched[0].params["vector"] == 8
    (expected,) = reference.run(fd.fusion, inputs)
    np.testing.assert_allclose(
        got[0].astype(np.float64), expected.astype(np.float64), rtol=2e-2, atol=2e-2
    )
