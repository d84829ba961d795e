"""GPU (sm_90): rows too long for one block's registers split over a thread-block cluster
(`cluster`: each block holds its share in registers, the blocks' totals combined through
distributed shared memory) compute what the reference computes: every normalization family
(max, sum, two-pass variance, values kept across passes, reduced outputs beside full ones),
odd lengths and lengths without vectors, shares left empty, several rows a block, clusters
that loop over rows (their cells written again), and results the same bit for bit on every
run."""

import numpy as np
import pytest
from fusion_zoo import ZOO, build, inputs_for, shared_costly_values
from test_gpu_execute import assert_agrees
from test_gpu_shared_row import run_normalization_with

from tunefuse import DataType, FusionDefinition

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _needs_clusters():
    from tunefuse.runtime.device import runtime
    from tunefuse.schedulers.normalization import supports_clusters

    if not supports_clusters(runtime(0).info):
        pytest.skip("thread-block clusters take sm_90 or later")


def layernorm_with_statistics(fd, dtype):
    """A layernorm that also returns each row's mean and variance (reduced outputs)."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    xf = fd.ops.cast(x, DataType.Float)
    var, mean = fd.ops.var_mean(xf, dims=[1], correction=0, keepdim=True)
    y = fd.ops.mul(fd.ops.sub(xf, mean), fd.ops.rsqrt(fd.ops.add(var, 1e-5)))
    fd.add_output(fd.ops.cast(y, dtype))
    fd.add_output(mean)
    fd.add_output(var)


CASES = {
    "softmax": ZOO["softmax"],
    "layernorm": ZOO["layernorm"],
    "rmsnorm": ZOO["rmsnorm"],
    "costly": shared_costly_values,
    "statistics": layernorm_with_statistics,
}


@pytest.mark.parametrize(
    "name,dtype,shape",
    [
        # rows no block's shared memory stages, whose blocks keep 132 SMs evenly busy
        ("softmax", DataType.Float, (64, 65536)),  # one wave: 2 blocks of 1024 x 32
        ("softmax", DataType.Float, (300, 60001)),  # odd: no vector; 8 blocks of 256
        ("layernorm", DataType.Float, (200, 62000)),
        ("rmsnorm", DataType.Float, (64, 65536)),
        ("statistics", DataType.Float, (100, 61000)),
    ],
)
def test_the_default_holds_a_long_row_over_a_cluster(name, dtype, shape, rng):
    fd = build(CASES[name], dtype)
    inputs = inputs_for(fd, shape[0], shape[1], rng)
    got, launched = run_normalization_with(fd, inputs)
    (k,) = launched
    assert k.params["cluster"] > 1 and k.params["cache_row"]
    assert k.grid[0] % k.params["cluster"] == 0
    assert_agrees(fd, inputs, got, dtype)


@pytest.mark.parametrize(
    "changes",
    [
        {"cluster": 2, "threads_r": 1024, "elements_per_thread": 16},
        {"cluster": 4, "threads_r": 512, "elements_per_thread": 8},
        {"cluster": 8, "threads_r": 256, "elements_per_thread": 8},
        {"cluster": 8, "threads_r": 64, "elements_per_thread": 32, "vector": 1},
        {"cluster": 2, "threads_r": 128, "rows_per_block": 4, "elements_per_thread": 32},
        {"cluster": 4, "threads_r": 256, "elements_per_thread": 8, "blocks_per_sm": 1},
        {"cluster": 2, "threads_r": 16, "rows_per_block": 8, "elements_per_thread": 64},
        # threads taking strided elements of their share (inner=False): never a default
        {"cluster": 2, "threads_r": 128, "elements_per_thread": 16, "inner": False},
        {"cluster": 8, "threads_r": 64, "elements_per_thread": 8, "vector": 1, "inner": False},
    ],
    ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()),
)
@pytest.mark.parametrize(
    "name,dtype,shape",
    [
        ("softmax", DataType.BFloat16, (37, 2000)),
        ("layernorm", DataType.Float, (9, 1997)),  # odd: shares of whole elements
        ("costly", DataType.Float, (11, 1536)),
        ("statistics", DataType.Half, (300, 2048)),  # more rows than clusters resident at once
    ],
)
def test_rows_over_a_cluster_at_any_valid_params(name, dtype, shape, changes, rng):
    fd = build(CASES[name], dtype)
    inputs = inputs_for(fd, shape[0], shape[1], rng)
    # (generate refuses params that is_valid refuses: each point here is a valid one)
    base = {"cache_row": True, "shared_row": False, "rows_per_lane": 1, "rows_per_block": 1}
    if shape[1] % 2:
        # an odd row allows no vector: the default's wider one peels it, and a peeled row is
        # not held over a cluster (is_valid refuses it; the executor then runs the default)
        base["vector"] = 1
    got, launched = run_normalization_with(fd, inputs, **(base | changes))
    (k,) = launched
    assert k.params["cluster"] == changes["cluster"]
    assert_agrees(fd, inputs, got, dtype)


def test_a_row_shorter_than_its_cluster_leaves_shares_empty(rng):
    """5 elements over 8 blocks of 32 threads: blocks 2 to 7 hold nothing and add the
    identity; the totals are the row's."""
    with FusionDefinition() as fd:
        layernorm_with_statistics(fd, DataType.Float)
    inputs = [rng.standard_normal((40, 5)).astype(np.float32)]
    got, launched = run_normalization_with(
        fd,
        inputs,
        cluster=8,
        threads_r=32,
        rows_per_block=1,
        elements_per_thread=1,
        vector=1,
        rows_per_lane=1,
        cache_row=True,
        shared_row=False,
    )
    assert launched[0].params["cluster"] == 8
    assert_agrees(fd, inputs, got, DataType.Float)


def test_a_cluster_row_is_the_same_bit_for_bit_on_every_run(rng):
    """Every block combines the cluster's totals in rank order: whichever block finishes
    first, the same result."""
    fd = build(ZOO["softmax"], DataType.Float)
    inputs = inputs_for(fd, 128, 65536, rng)
    first, launched = run_normalization_with(fd, inputs)
    assert launched[0].params["cluster"] > 1
    for _ in range(3):
        again, _ = run_normalization_with(fd, inputs)
        np.testing.assert_array_equal(again[0], first[0])
