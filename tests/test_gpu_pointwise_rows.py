"""GPU: flat pointwise kernels whose groups span several short innermost rows (`rows`)
compute what the reference computes, and what the same kernel one row a group computes, bit
for bit: a bias broadcast along the rows, a per-row scale, an operand contiguous across the
rows of a middle dim, transposed reads (one vector along the rows for each element of a
row), misaligned reads (element by element), two outputs of two types, and random draws
(whose position is each element's own index), and loads behind a cat's guard (read
element by element in their branch, a group's rows on both sides of the cat)."""

import dataclasses
import functools

import numpy as np
import pytest
from test_gpu_execute import assert_agrees, to_device, to_host

from tunefuse import DataType, FusionDefinition
from tunefuse.device_info import PROFILES
from tunefuse.schedulers import pointwise, scheduler_for

pytestmark = pytest.mark.gpu


def bias_gelu(fd, dtype):
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    b = fd.ops.broadcast_in_dim(fd.define_tensor(shape=[-1], dtype=dtype), x.shape(), [1])
    y = fd.ops.add(fd.ops.cast(x, DataType.Float), fd.ops.cast(b, DataType.Float))
    y = fd.ops.mul(y, fd.ops.sigmoid(fd.ops.mul(y, fd.define_scalar(1.702))))
    fd.add_output(fd.ops.cast(y, dtype))


def row_scale(fd, dtype):
    """x * s[:, None]: s moves along the rows and stays put along each row."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    s = fd.define_tensor(shape=[-1], dtype=dtype)
    fd.add_output(fd.ops.mul(x, fd.ops.broadcast_in_dim(s, x.shape(), [0])))


def middle_weight(fd, dtype):
    """x [A, B, E] * w [A, E]: the rows of B; w stays put along them and moves along A."""
    x = fd.define_tensor(shape=[-1, -1, -1], dtype=dtype)
    w = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    fd.add_output(fd.ops.mul(x, fd.ops.broadcast_in_dim(w, x.shape(), [0, 2])))


def transpose(fd, dtype):
    """[E, R] -> [R, E]: the output's short rows, read one vector along R for each of E."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    fd.add_output(fd.ops.add(fd.ops.permute(x, [1, 0]), fd.define_scalar(1.0, dtype)))


def sliced_transpose(fd, dtype):
    """x[:, 1:] transposed: the reads along the rows start one element past an alignment, so
    they go element by element."""
    x = fd.define_tensor(shape=[4, 4105], dtype=dtype)
    cols = fd.ops.slice(x, [0, 1], [4, 4105])
    fd.add_output(fd.ops.mul(fd.ops.permute(cols, [1, 0]), fd.define_scalar(2.0, dtype)))


def two_outputs(fd, dtype):
    """exp(x + b) in float and x - b in x's type."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    b = fd.ops.broadcast_in_dim(fd.define_tensor(shape=[-1], dtype=dtype), x.shape(), [1])
    xf, bf = fd.ops.cast(x, DataType.Float), fd.ops.cast(b, DataType.Float)
    fd.add_output(fd.ops.exp(fd.ops.add(xf, bf)))
    fd.add_output(fd.ops.sub(x, b))


def interleaved_rope(fd, dtype, n, p):
    """Rotary embedding on pairs (GPT-J style): x [n, p, 2] and cos, sin [p]; the pair's
    two results joined by a cat along the last dim (a guard a lane, each its own)."""
    x = fd.define_tensor(shape=[n, p, 2], dtype=dtype)
    cos, sin = (
        fd.ops.broadcast_in_dim(fd.define_tensor(shape=[-1], dtype=dtype), [n, p], [1])
        for _ in range(2)
    )
    x0 = fd.ops.squeeze(fd.ops.slice(x, [0, 0, 0], [n, p, 1]), [2])
    x1 = fd.ops.squeeze(fd.ops.slice(x, [0, 0, 1], [n, p, 2]), [2])
    o0 = fd.ops.sub(fd.ops.mul(x0, cos), fd.ops.mul(x1, sin))
    o1 = fd.ops.add(fd.ops.mul(x0, sin), fd.ops.mul(x1, cos))
    halves = [fd.ops.broadcast_in_dim(o, [n, p, 1], [0, 1]) for o in (o0, o1)]
    fd.add_output(fd.ops.cat(halves, 2))


def cat_rows(fd, dtype):
    """cat([x, y]) along the rows, then + 1: a group of rows may straddle the two inputs."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    y = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    fd.add_output(fd.ops.add(fd.ops.cat([x, y], 0), fd.define_scalar(1.0, dtype)))


def draws(fd, dtype):
    """x + uniform(0, 1) of x's shape, seeded: each element's draw is its own position's."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    u = fd.ops.uniform(
        fd.define_scalar(0.0),
        fd.define_scalar(1.0),
        x.shape(),
        dtype=DataType.Float,
        rng_seed=fd.define_scalar(7, DataType.Int),
        rng_offset=fd.define_scalar(3, DataType.Int),
    )
    fd.add_output(fd.ops.add(fd.ops.cast(x, DataType.Float), u))


CASES = [
    # (fusion, dtype, shape of x, shapes of the other inputs)
    (bias_gelu, DataType.BFloat16, (4104, 2), [(2,)]),
    (bias_gelu, DataType.Float, (1030, 2), [(2,)]),
    (bias_gelu, DataType.Half, (2048, 4), [(4,)]),
    (bias_gelu, DataType.BFloat16, (8, 2), [(2,)]),  # fewer groups than a block
    (row_scale, DataType.BFloat16, (4096, 2), [(4096,)]),
    (row_scale, DataType.Float, (998, 2), [(998,)]),
    (middle_weight, DataType.BFloat16, (5, 1028, 2), [(5, 2)]),
    (middle_weight, DataType.Half, (3, 24, 4), [(3, 4)]),
    (transpose, DataType.BFloat16, (4, 4104), []),
    (transpose, DataType.Float, (2, 2052), []),
    (transpose, DataType.Half, (2, 1026), []),
    (sliced_transpose, DataType.BFloat16, (4, 4105), []),
    (two_outputs, DataType.BFloat16, (2056, 2), [(2,)]),
    (draws, DataType.BFloat16, (1032, 2), []),
    (
        functools.partial(interleaved_rope, n=3, p=1028),
        DataType.BFloat16,
        (3, 1028, 2),
        [(1028,)] * 2,
    ),
    (functools.partial(interleaved_rope, n=5, p=36), DataType.Float, (5, 36, 2), [(36,)] * 2),
    (cat_rows, DataType.BFloat16, (1027, 2), [(1029, 2)]),
    (cat_rows, DataType.Half, (5, 4), [(3, 4)]),
]


def _inputs(shape, others, dtype, rng):
    return [(rng.standard_normal(s) * 2).astype(dtype.numpy) for s in [shape, *others]]


def _build(define, dtype):
    with FusionDefinition() as fd:
        define(fd, dtype)
    return fd


def _pointwise_of(params):
    return params.pointwise if hasattr(params, "pointwise") else params


def flat_with_rows(params, rows, seg):
    """The pointwise params of `params` (a transpose's own) with `rows`, flat where rows > 1;
    a vector along the flat index (`flat_vector`) gives way to the vector of a row."""
    flat = _pointwise_of(params)
    if flat.flat_vector:
        flat = dataclasses.replace(flat, flat_vector=False, vector=pointwise.max_vector(seg))
    return dataclasses.replace(flat, rows=rows, split=0 if rows > 1 else flat.split)


def running_pointwise(default, flat):
    """Params of the segment whose default is `default` that run pointwise params `flat`: a
    transpose's own run as its pointwise kernel (tile 0)."""
    if hasattr(default, "pointwise"):
        return dataclasses.replace(default, tile=0, pointwise=flat)
    return flat


def run_with_rows(fd, inputs, rows):
    """The fusion run with its flat pointwise kernels' `rows` set (the rest default); the
    host results and the rows each launch ran with."""
    from tunefuse.runtime.executor import Executor

    def choose(seg, device):
        params = scheduler_for(seg.scheduler).default_params(seg, device)
        return running_pointwise(params, flat_with_rows(params, rows, seg))

    executor = Executor(fd.fusion, params_source=choose)
    got = [to_host(g) for g in executor.run(to_device(inputs))]
    launched = [
        _pointwise_of_launch(r.launch.params)
        for exe in executor.plans.values()
        for r in exe.recipes
        if r.launch.numel
    ]
    return got, launched


def _pointwise_of_launch(params):
    return params["pointwise"]["rows"] if "pointwise" in params else params["rows"]


def rows_valid(fd, inputs, rows):
    """None when every kernel of the plan can take `rows`, else why not (sm_90 profile)."""
    device = PROFILES["sm_90"]
    for seg in fd.plan(inputs).segments:
        params = scheduler_for(seg.scheduler).default_params(seg, device)
        why = pointwise.is_valid(seg, device, flat_with_rows(params, rows, seg))
        if why is not None:
            return why
    return None


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("rows", [2, 4, 8])
def test_rows_a_group_agree_with_one_row_a_group(case, rows, rng):
    define, dtype, shape, others = CASES[case]
    fd = _build(define, dtype)
    inputs = _inputs(shape, others, dtype, rng)
    why = rows_valid(fd, inputs, rows)
    if why is not None:
        pytest.skip(why)
    got, launched = run_with_rows(fd, inputs, rows)
    assert launched and all(r == rows for r in launched)
    assert_agrees(fd, inputs, got, dtype)
    one, _ = run_with_rows(fd, inputs, 1)
    for g, o in zip(got, one, strict=True):
        assert np.array_equal(g.view(np.uint8), o.view(np.uint8))


@pytest.mark.parametrize(
    "define,dtype,shape,others,rows",
    [
        (bias_gelu, DataType.BFloat16, (1 << 20, 2), [(2,)], 4),
        (bias_gelu, DataType.Float, (1 << 19, 2), [(2,)], 2),
        (bias_gelu, DataType.BFloat16, (1 << 18, 4), [(4,)], 2),
        (transpose, DataType.BFloat16, (4, 1 << 20), [], 2),
    ],
)
def test_default_rows_of_short_rows_agree_with_the_reference(
    define, dtype, shape, others, rows, rng
):
    fd = _build(define, dtype)
    inputs = _inputs(shape, others, dtype, rng)
    device = PROFILES["sm_90"]
    (seg,) = fd.plan(inputs).segments
    assert _pointwise_of(scheduler_for(seg.scheduler).default_params(seg, device)).rows == rows
    assert_agrees(fd, inputs, [to_host(g) for g in fd.execute(to_device(inputs))], dtype)
