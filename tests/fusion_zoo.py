"""Fusions shared by the compile tests, the GPU tests and the benchmarks."""

from __future__ import annotations

import numpy as np

from tunefuse import DataType, FusionDefinition


def softmax_over(rank: int, dim: int):  # noqa: ANN201
    """softmax along `dim` of a rank-`rank` input, computed in Float, written in its type: a
    define function for `build` (the surface's middle_softmax is softmax_over(3, 1))."""

    def define(fd: FusionDefinition, dtype: DataType = DataType.Float) -> None:
        x = fd.define_tensor(shape=[-1] * rank, dtype=dtype)
        xf = fd.ops.cast(x, DataType.Float)
        m = fd.ops.max(xf, dims=[dim], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(xf, m))
        fd.add_output(fd.ops.cast(fd.ops.div(e, fd.ops.sum(e, dims=[dim], keepdim=True)), dtype))

    return define


def softmax(fd: FusionDefinition, dtype: DataType = DataType.Float) -> None:
    softmax_over(2, 1)(fd, dtype)


def layernorm(fd: FusionDefinition, dtype: DataType = DataType.Float) -> None:
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    w = fd.define_tensor(shape=[-1], dtype=dtype)
    b = fd.define_tensor(shape=[-1], dtype=dtype)
    xf = fd.ops.cast(x, DataType.Float)
    var, mean = fd.ops.var_mean(xf, dims=[1], correction=0, keepdim=True)
    y = fd.ops.mul(fd.ops.sub(xf, mean), fd.ops.rsqrt(fd.ops.add(var, 1e-5)))
    y = fd.ops.mul(
        y,
        fd.ops.broadcast_in_dim(
            fd.ops.cast(w, DataType.Float), shape=x.shape(), broadcast_dims=[1]
        ),
    )
    y = fd.ops.add(
        y,
        fd.ops.broadcast_in_dim(
            fd.ops.cast(b, DataType.Float), shape=x.shape(), broadcast_dims=[1]
        ),
    )
    fd.add_output(fd.ops.cast(y, dtype))


def rmsnorm(fd: FusionDefinition, dtype: DataType = DataType.BFloat16) -> None:
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    w = fd.define_tensor(shape=[-1], dtype=dtype)
    xf = fd.ops.cast(x, DataType.Float)
    ms = fd.ops.mean(fd.ops.mul(xf, xf), dims=[1], keepdim=True)
    y = fd.ops.mul(xf, fd.ops.rsqrt(fd.ops.add(ms, 1e-6)))
    y = fd.ops.mul(
        y,
        fd.ops.broadcast_in_dim(
            fd.ops.cast(w, DataType.Float), shape=x.shape(), broadcast_dims=[1]
        ),
    )
    fd.add_output(fd.ops.cast(y, dtype))


def bias_gelu(fd: FusionDefinition, dtype: DataType = DataType.Float) -> None:
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    b = fd.define_tensor(shape=[-1], dtype=dtype)
    y = fd.ops.add(
        fd.ops.cast(x, DataType.Float),
        fd.ops.broadcast_in_dim(
            fd.ops.cast(b, DataType.Float), shape=x.shape(), broadcast_dims=[1]
        ),
    )
    fd.add_output(fd.ops.cast(fd.ops.gelu(y), dtype))


def row_sum(fd: FusionDefinition, dtype: DataType = DataType.Float) -> None:
    fd.add_output(fd.ops.sum(fd.define_tensor(shape=[-1, -1], dtype=dtype), dims=[1]))


def col_sum(fd: FusionDefinition, dtype: DataType = DataType.Float) -> None:
    fd.add_output(fd.ops.sum(fd.define_tensor(shape=[-1, -1], dtype=dtype), dims=[0]))


def column_var_mean(fd: FusionDefinition, dtype: DataType = DataType.Float) -> None:
    """var and mean over dim 0 of [R, C] in Float (BatchNorm's statistics; not in ZOO)."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    var, mean = fd.ops.var_mean(fd.ops.cast(x, DataType.Float), dims=[0], correction=1)
    fd.add_output(var)
    fd.add_output(mean)


def transpose2d(fd: FusionDefinition, dtype: DataType = DataType.Float) -> None:
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    fd.add_output(fd.ops.set(fd.ops.permute(x, dims=[1, 0])))


def shared_costly_values(fd: FusionDefinition, dtype: DataType = DataType.Float) -> None:
    """exp(x) and tanh(x) each summed by one pass and used again by the outputs: a cached-row
    kernel keeps both in registers (not in ZOO: a codegen case, not a benchmark)."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    xf = fd.ops.cast(x, DataType.Float)
    e = fd.ops.exp(fd.ops.sub(xf, fd.ops.max(xf, dims=[1], keepdim=True)))
    t = fd.ops.tanh(xf)
    y = fd.ops.add(
        fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)),
        fd.ops.mul(t, fd.ops.sum(t, dims=[1], keepdim=True)),
    )
    fd.add_output(fd.ops.cast(y, dtype))


def build(define, dtype: DataType) -> FusionDefinition:  # noqa: ANN001
    with FusionDefinition() as fd:
        define(fd, dtype)
    return fd


def logsumexp(fd: FusionDefinition, dtype: DataType = DataType.BFloat16) -> None:
    """Cross-entropy's normaliser: log(sum(exp(x - max))) + max of each row, one value a row
    (reductions only, the sum reading the max)."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    xf = fd.ops.cast(x, DataType.Float)
    m = fd.ops.max(xf, dims=[1], keepdim=True)
    s = fd.ops.sum(fd.ops.exp(fd.ops.sub(xf, m)), dims=[1], keepdim=True)
    fd.add_output(fd.ops.add(fd.ops.log(s), m))


def column_layernorm(fd: FusionDefinition, dtype: DataType = DataType.Float) -> None:
    """(x - mean) * rstd * w over dim 0 of [R, C] (BatchNorm1d's training forward, a strided
    row); w [C] moves with the outputs."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    w = fd.define_tensor(shape=[-1], dtype=dtype)
    xf = fd.ops.cast(x, DataType.Float)
    var, mean = fd.ops.var_mean(xf, [0], correction=0, keepdim=True)
    rstd = fd.ops.rsqrt(fd.ops.add(var, fd.define_scalar(1e-5)))
    wb = fd.ops.broadcast_in_dim(fd.ops.cast(w, DataType.Float), x.shape(), [1])
    y = fd.ops.mul(fd.ops.mul(fd.ops.sub(xf, mean), rstd), wb)
    fd.add_output(fd.ops.cast(y, dtype))


def logsumexp_over(dim: int):  # noqa: ANN201
    """logsumexp along `dim`, in the input's own type where that is fp32 or fp64 (bf16 and
    half are cast to fp32): a define function for `build` (not in ZOO: a codegen case)."""

    def define(fd: FusionDefinition, dtype: DataType) -> None:
        x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        xf = fd.ops.cast(x, DataType.Float) if dtype.itemsize < 4 else x
        m = fd.ops.max(xf, dims=[dim], keepdim=True)
        s = fd.ops.sum(fd.ops.exp(fd.ops.sub(xf, m)), dims=[dim], keepdim=True)
        fd.add_output(fd.ops.add(fd.ops.log(s), m))

    return define


def input_shapes(
    fd: FusionDefinition, rows: int, cols: int
) -> list[tuple[tuple[int, ...], np.dtype]]:
    """Each input's shape ([rows, cols], or [cols] for a weight) and numpy dtype."""
    out = []
    for vid in fd.fusion.inputs:
        t = fd.fusion.values[vid]
        out.append(((rows, cols) if t.rank == 2 else (cols,), t.dtype.numpy))
    return out


def inputs_for(
    fd: FusionDefinition, rows: int, cols: int, rng: np.random.Generator
) -> list[np.ndarray]:
    return [
        rng.standard_normal(shape).astype(dtype) for shape, dtype in input_shapes(fd, rows, cols)
    ]


def unfilled_inputs(fd: FusionDefinition, rows: int, cols: int) -> list[np.ndarray]:
    """`inputs_for`'s arrays left unfilled: a plan reads their shapes, strides and dtypes,
    not their values (256 MB of random numbers took seconds a plan)."""
    return [np.empty(shape, dtype) for shape, dtype in input_shapes(fd, rows, cols)]


ZOO = {
    "softmax": softmax,
    "layernorm": layernorm,
    "rmsnorm": rmsnorm,
    "logsumexp": logsumexp,
    "bias_gelu": bias_gelu,
    "row_sum": row_sum,
    "col_sum": col_sum,
    "transpose2d": transpose2d,
}
