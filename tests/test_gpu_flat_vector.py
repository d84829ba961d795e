"""GPU: flat pointwise kernels whose vector runs along the flat index (`flat_vector`: odd
innermost widths, a group crossing rows) compute what the reference computes, and what the
same fusion's kernel of one element a group computes, bit for bit: a bias broadcast along the
rows, a per-row scale, a weight of the outer and inner dims, a transposed read, two outputs of
two types, random draws (each element's position its own), loads behind a cat's guard, a
misaligned view; every vector width the segment allows, tails of 0 to vector - 1 elements
(block 0's threads take them), fewer elements than one vector, and static-shape kernels."""

import dataclasses
import functools

import numpy as np
import pytest
from test_gpu_execute import assert_agrees, to_device, to_host
from test_gpu_pointwise_rows import (
    _build,
    _inputs,
    bias_gelu,
    cat_rows,
    draws,
    interleaved_rope,
    middle_weight,
    row_scale,
    running_pointwise,
    transpose,
    two_outputs,
)

from tunefuse import DataType, FusionDefinition
from tunefuse.device_info import PROFILES
from tunefuse.schedulers import pointwise, scheduler_for

pytestmark = pytest.mark.gpu


def sliced_bias_add(fd, dtype):
    """x[:, 1:] + b: x's reads start one element past an alignment and its rows are 262
    apart, not 261: not dense, so read element by element while the output takes vectors."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    b = fd.define_tensor(shape=[-1], dtype=dtype)
    rows, cols = 1001, 262
    xs = fd.ops.slice(x, [0, 1], [rows, cols])
    fd.add_output(fd.ops.add(xs, fd.ops.broadcast_in_dim(b, [rows, cols - 1], [1])))


CASES = [
    # (fusion, dtype, shape of x, shapes of the other inputs)
    (bias_gelu, DataType.BFloat16, (1001, 261), [(261,)]),
    (bias_gelu, DataType.BFloat16, (4099, 3), [(3,)]),
    (bias_gelu, DataType.Float, (999, 2911), [(2911,)]),
    (bias_gelu, DataType.Half, (27, 22407), [(22407,)]),
    (bias_gelu, DataType.BFloat16, (5, 1), [(1,)]),  # fewer elements than a vector
    (bias_gelu, DataType.BFloat16, (3, 5), [(5,)]),
    (row_scale, DataType.BFloat16, (1031, 17), [(1031,)]),
    (row_scale, DataType.Float, (77, 5), [(77,)]),
    (middle_weight, DataType.BFloat16, (5, 1027, 3), [(5, 3)]),
    (middle_weight, DataType.Float, (3, 33, 7), [(3, 7)]),
    (transpose, DataType.BFloat16, (3, 4107), []),
    (transpose, DataType.Float, (5, 1001), []),
    (two_outputs, DataType.BFloat16, (2055, 5), [(5,)]),
    (draws, DataType.BFloat16, (1031, 3), []),
    (
        functools.partial(interleaved_rope, n=3, p=1027),
        DataType.BFloat16,
        (3, 1027, 2),
        [(1027,)] * 2,
    ),
    (cat_rows, DataType.BFloat16, (1027, 3), [(1029, 3)]),
    (cat_rows, DataType.Float, (5, 7), [(3, 7)]),
    (sliced_bias_add, DataType.BFloat16, (1001, 262), [(261,)]),
]


def _flat_variant(params, vector):
    """The pointwise params of `params` (a transpose's own), flat, one row a group, with
    `vector` along the flat index (vector 1: one element a group, flat_vector off)."""
    flat = params.pointwise if hasattr(params, "pointwise") else params
    return dataclasses.replace(
        flat, split=0, rows=1, vector=vector, flat_vector=vector > 1, blocks_per_sm=0
    )


def _run(fd, inputs, vector, **changes):
    """The fusion's host results with its pointwise kernels flat at `vector` along the flat
    index (plus `changes`), and the params each launch ran with."""
    from tunefuse.runtime.executor import Executor

    def choose(seg, device):
        params = scheduler_for(seg.scheduler).default_params(seg, device)
        return running_pointwise(
            params, dataclasses.replace(_flat_variant(params, vector), **changes)
        )

    executor = Executor(fd.fusion, params_source=choose)
    got = [to_host(g) for g in executor.run(to_device(inputs))]
    launched = [
        r.launch.params.get("pointwise", r.launch.params)
        for exe in executor.plans.values()
        for r in exe.recipes
        if r.launch.numel
    ]
    return got, launched


def _widest(fd, inputs) -> int:
    """The narrowest of the plan's segments' widest vectors along the flat index."""
    return min(pointwise.max_flat_vector(seg) for seg in fd.plan(inputs).segments)


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("vector", [2, 4, 8, 16])
def test_a_vector_along_the_flat_index_agrees_with_one_element_a_group(case, vector, rng):
    define, dtype, shape, others = CASES[case]
    fd = _build(define, dtype)
    inputs = _inputs(shape, others, dtype, rng)
    if _widest(fd, inputs) % vector:
        pytest.skip(f"vector {vector} along the flat index does not fit this segment")
    got, launched = _run(fd, inputs, vector)
    assert launched and all(p["vector"] == vector and p["flat_vector"] for p in launched)
    assert_agrees(fd, inputs, got, dtype)
    one, _ = _run(fd, inputs, 1)
    for g, o in zip(got, one, strict=True):
        assert np.array_equal(g.view(np.uint8), o.view(np.uint8))
    static, _ = _run(fd, inputs, vector, static_shape=True, unroll=2)
    for g, o in zip(static, one, strict=True):
        assert np.array_equal(g.view(np.uint8), o.view(np.uint8))


@pytest.mark.parametrize("tail", range(8))
def test_every_tail_length(tail, rng):
    """bf16 bias + GELU of [R, 9] with R * 9 % 8 == tail: the tail's elements, one a thread of
    block 0, and the whole groups before them."""
    rows = next(r for r in range(1000, 1100) if r * 9 % 8 == tail)
    fd = _build(bias_gelu, DataType.BFloat16)
    inputs = _inputs((rows, 9), [(9,)], DataType.BFloat16, rng)
    got, _ = _run(fd, inputs, 8)
    assert_agrees(fd, inputs, got, DataType.BFloat16)
    one, _ = _run(fd, inputs, 1)
    assert np.array_equal(got[0].view(np.uint8), one[0].view(np.uint8))


@pytest.mark.parametrize(
    "shape, vector",
    [((4099, 261), 8), ((101, 3), 8), ((7, 22407), 8), ((333, 1), 8)],
)
def test_odd_widths_take_the_flat_vector_by_default(shape, vector, rng):
    """bf16 bias + GELU of odd widths: the default's vector runs along the flat index, 16
    bytes a group, and agrees with the reference."""
    fd = _build(bias_gelu, DataType.BFloat16)
    inputs = _inputs(shape, [shape[1:]], DataType.BFloat16, rng)
    (seg,) = fd.plan(inputs).segments
    p = pointwise.default_params(seg, PROFILES["sm_90"])
    assert p.flat_vector and p.vector == vector
    got = [to_host(g) for g in fd.execute(to_device(inputs))]
    assert_agrees(fd, inputs, got, DataType.BFloat16)


def test_a_cat_whose_vector_crosses_both_inputs(rng):
    """cat([x, y]) of [5, 7] and [3, 7] fp32 rows + 1 at vector 4: groups span rows of both
    inputs and the guard's branch changes within a group (each element its own)."""
    with FusionDefinition() as fd:
        cat_rows(fd, DataType.Float)
    inputs = _inputs((5, 7), [(3, 7)], DataType.Float, rng)
    got, launched = _run(fd, inputs, 4)
    assert launched[0]["flat_vector"]
    np.testing.assert_array_equal(got[0], np.concatenate(inputs) + 1)
