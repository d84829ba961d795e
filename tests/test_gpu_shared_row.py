"""GPU: rows too long for registers staged in shared memory (`shared_row`: read from memory
once, the later passes read the staged row) compute what the reference computes, for the
normalizations, odd and vector lengths, several rows a block, rows a block loops over, a
padded input (read inside its guard, never staged), and a row that another input of the
same length reads once."""

import numpy as np
import pytest
from fusion_zoo import ZOO, build, inputs_for
from test_gpu_execute import assert_agrees
from test_gpu_split import run_with_reduction_params

from tunefuse import DataType, FusionDefinition

pytestmark = pytest.mark.gpu


def padded_softmax(fd, dtype):
    """softmax of a padded row: its loads sit behind the pad's guard."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    xf = fd.ops.pad(fd.ops.cast(x, DataType.Float), [3, 5], 0.5)
    m = fd.ops.max(xf, dims=[1], keepdim=True)
    e = fd.ops.exp(fd.ops.sub(xf, m))
    fd.add_output(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)))


def run_normalization_with(fd, inputs, **changes):
    """Run with the normalization kernels' default params changed; the results, launches."""
    return run_with_reduction_params(fd, inputs, kind="normalization", **changes)


@pytest.mark.parametrize(
    "name,dtype,shape",
    [
        ("softmax", DataType.Float, (3, 50257)),  # a GPT-2 vocabulary row: odd, no vector
        ("softmax", DataType.BFloat16, (5, 40000)),
        ("layernorm", DataType.Float, (4, 40000)),  # its weight and bias are read once
        ("rmsnorm", DataType.BFloat16, (3, 70001)),
        ("rmsnorm", DataType.Half, (2, 100000)),
    ],
)
def test_the_default_stages_a_long_row_in_shared_memory(name, dtype, shape, rng):
    fd = build(ZOO[name], dtype)
    inputs = inputs_for(fd, shape[0], shape[1], rng)
    got, launched = run_normalization_with(fd, inputs)
    (k,) = launched
    assert k.params["shared_row"] and not k.params["cache_row"]
    assert k.shared_bytes > 48 * 1024
    assert_agrees(fd, inputs, got, dtype)


@pytest.mark.parametrize(
    "changes",
    [
        {"threads_r": 32},
        {"threads_r": 256, "unroll": 1},
        {"rows_per_block": 2, "threads_r": 128},  # two staged rows a block
        {"blocks_per_sm": 1},  # a block loops over rows, the staged row rewritten each time
        {"vector": 1},
        {"evict_first": True},
    ],
    ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()),
)
@pytest.mark.parametrize(
    "name,dtype,shape",
    [("softmax", DataType.BFloat16, (37, 20000)), ("layernorm", DataType.Float, (9, 12000))],
)
def test_staged_rows_at_any_valid_params(name, dtype, shape, changes, rng):
    fd = build(ZOO[name], dtype)
    inputs = inputs_for(fd, shape[0], shape[1], rng)
    got, launched = run_normalization_with(fd, inputs, cache_row=False, shared_row=True, **changes)
    assert all(k.params["shared_row"] for k in launched)
    assert_agrees(fd, inputs, got, dtype)


def test_a_padded_row_is_read_inside_its_guard_not_staged(rng):
    with FusionDefinition() as fd:
        padded_softmax(fd, DataType.Float)
    inputs = [rng.standard_normal((6, 30001)).astype(np.float32)]
    got, launched = run_normalization_with(fd, inputs, cache_row=False, shared_row=True)
    assert launched[0].params["shared_row"]
    assert_agrees(fd, inputs, got, DataType.Float)
