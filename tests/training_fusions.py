"""Training fusions no scheduler was shaped for, shared by the CPU tests (plans, NumPy
formulas, NVRTC) and the GPU tests: layernorm's backward (dx over the rows, dw and db over
the columns), cross-entropy (a logit picked from the cast of the input), GroupNorm (rows of a
reshape, stored in the input's shape) and nvFuser's implicit broadcast of lower ranks."""

from __future__ import annotations

import numpy as np

from tunefuse import DataType, FusionDefinition

F = DataType.Float


def _along(fd: FusionDefinition, t, like, dims):  # noqa: ANN001, ANN202
    return fd.ops.broadcast_in_dim(t, like.shape(), dims)


def layernorm_backward(fd: FusionDefinition, dtype: DataType) -> None:
    """dx, dw, db of y = (x - mean) * rstd * w + b, given dy, x, mean, rstd, w."""
    gy = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    mean = fd.define_tensor(shape=[-1], dtype=F)
    rstd = fd.define_tensor(shape=[-1], dtype=F)
    w = fd.define_tensor(shape=[-1], dtype=dtype)
    g, xf = fd.ops.cast(gy, F), fd.ops.cast(x, F)
    r = _along(fd, rstd, x, [0])
    xhat = fd.ops.mul(fd.ops.sub(xf, _along(fd, mean, x, [0])), r)
    gw = fd.ops.mul(g, _along(fd, fd.ops.cast(w, F), x, [1]))
    a = fd.ops.mean(gw, [1])
    b = fd.ops.mean(fd.ops.mul(gw, xhat), [1])
    centred = fd.ops.sub(gw, _along(fd, a, x, [0]))
    dx = fd.ops.mul(fd.ops.sub(centred, fd.ops.mul(xhat, _along(fd, b, x, [0]))), r)
    fd.add_output(fd.ops.cast(dx, dtype))
    fd.add_output(fd.ops.cast(fd.ops.sum(fd.ops.mul(g, xhat), [0]), dtype))
    fd.add_output(fd.ops.cast(fd.ops.sum(g, [0]), dtype))


def layernorm_backward_numpy(gy, x, mean, rstd, w) -> list[np.ndarray]:  # noqa: ANN001
    g, xf = gy.astype(np.float64), x.astype(np.float64)
    xhat = (xf - mean[:, None]) * rstd[:, None]
    gw = g * w.astype(np.float64)
    dx = (gw - gw.mean(1, keepdims=True) - xhat * (gw * xhat).mean(1, keepdims=True)) * rstd[
        :, None
    ]
    return [dx, (g * xhat).sum(0), g.sum(0)]


def layernorm_backward_inputs(rows: int, cols: int, dtype: DataType, rng) -> list:  # noqa: ANN001
    gy = rng.standard_normal((rows, cols)).astype(dtype.numpy)
    x = rng.standard_normal((rows, cols)).astype(dtype.numpy)
    mean = rng.standard_normal(rows).astype(np.float32) * np.float32(0.1)
    rstd = (rng.random(rows) + 0.5).astype(np.float32)
    w = rng.standard_normal(cols).astype(dtype.numpy)
    return [gy, x, mean, rstd, w]


def rmsnorm_backward(fd: FusionDefinition, dtype: DataType) -> None:
    """dx and dw of y = x * rstd * w, given dy, x, rstd, w."""
    gy = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    rstd = fd.define_tensor(shape=[-1], dtype=F)
    w = fd.define_tensor(shape=[-1], dtype=dtype)
    g, xf = fd.ops.cast(gy, F), fd.ops.cast(x, F)
    r = _along(fd, rstd, x, [0])
    gw = fd.ops.mul(g, _along(fd, fd.ops.cast(w, F), x, [1]))
    c = fd.ops.mean(fd.ops.mul(gw, xf), [1])
    dx = fd.ops.mul(
        r, fd.ops.sub(gw, fd.ops.mul(xf, fd.ops.mul(_along(fd, c, x, [0]), fd.ops.mul(r, r))))
    )
    fd.add_output(fd.ops.cast(dx, dtype))
    fd.add_output(fd.ops.cast(fd.ops.sum(fd.ops.mul(g, fd.ops.mul(xf, r)), [0]), dtype))


def rmsnorm_backward_numpy(gy, x, rstd, w) -> list[np.ndarray]:  # noqa: ANN001
    g, xf = gy.astype(np.float64), x.astype(np.float64)
    r = rstd.astype(np.float64)[:, None]
    gw = g * w.astype(np.float64)
    c = (gw * xf).mean(1, keepdims=True)
    return [r * (gw - xf * c * r * r), (g * xf * r).sum(0)]


def rmsnorm_backward_inputs(rows: int, cols: int, dtype: DataType, rng) -> list:  # noqa: ANN001
    gy, x, _, rstd, w = layernorm_backward_inputs(rows, cols, dtype, rng)
    return [gy, x, rstd, w]


def cross_entropy(fd: FusionDefinition, dtype: DataType) -> None:
    """The loss of each row: logsumexp(z) - z[target], z read in `dtype`, computed in Float."""
    z = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    target = fd.define_tensor(shape=[-1, 1], dtype=DataType.Int)
    zf = fd.ops.cast(z, F)
    top = fd.ops.max(zf, [1], keepdim=True)
    total = fd.ops.sum(fd.ops.exp(fd.ops.sub(zf, _along(fd, top, z, [0, 1]))), [1], keepdim=True)
    lse = fd.ops.add(fd.ops.log(total), top)
    fd.add_output(fd.ops.squeeze(fd.ops.sub(lse, fd.ops.take_along_axis(zf, target, 1)), [1]))


def cross_entropy_numpy(z, target) -> list[np.ndarray]:  # noqa: ANN001
    zf = z.astype(np.float64)
    top = zf.max(1, keepdims=True)
    lse = np.log(np.exp(zf - top).sum(1, keepdims=True)) + top
    return [(lse - np.take_along_axis(zf, target, 1))[:, 0]]


def cross_entropy_inputs(rows: int, classes: int, dtype: DataType, rng) -> list:  # noqa: ANN001
    z = (rng.standard_normal((rows, classes)) * 3).astype(dtype.numpy)
    return [z, rng.integers(0, classes, (rows, 1))]


def group_norm(shape: tuple[int, int, int, int], groups: int, affine: bool):  # noqa: ANN201
    """GroupNorm over [N, C, H, W]: statistics of each group's C/G*H*W elements, read as rows
    of a reshape, the result reshaped back (then scaled and shifted a channel at a time)."""
    n, c, h, w = shape

    def define(fd: FusionDefinition, dtype: DataType) -> None:
        x = fd.define_tensor(shape=list(shape), dtype=dtype)
        rows = fd.ops.reshape(fd.ops.cast(x, F), [n, groups, c // groups * h * w])
        var, mean = fd.ops.var_mean(rows, [2], correction=0, keepdim=True)
        rstd = fd.ops.rsqrt(fd.ops.add(var, fd.define_scalar(1e-5)))
        y = fd.ops.mul(
            fd.ops.sub(rows, _along(fd, mean, rows, [0, 1, 2])), _along(fd, rstd, rows, [0, 1, 2])
        )
        y = fd.ops.reshape(y, list(shape))
        if affine:
            weight = fd.define_tensor(shape=[c], dtype=dtype)
            bias = fd.define_tensor(shape=[c], dtype=dtype)
            y = fd.ops.mul(y, _along(fd, fd.ops.cast(weight, F), y, [1]))
            y = fd.ops.add(y, _along(fd, fd.ops.cast(bias, F), y, [1]))
        fd.add_output(fd.ops.cast(y, dtype))

    return define


def group_norm_numpy(groups: int):  # noqa: ANN201
    def formula(x, weight=None, bias=None) -> list[np.ndarray]:  # noqa: ANN001
        n, c = x.shape[:2]
        rows = x.astype(np.float64).reshape(n, groups, -1)
        y = (rows - rows.mean(2, keepdims=True)) / np.sqrt(rows.var(2, keepdims=True) + 1e-5)
        y = y.reshape(x.shape)
        if weight is not None:
            at = (1, c) + (1,) * (x.ndim - 2)
            y = y * weight.astype(np.float64).reshape(at) + bias.astype(np.float64).reshape(at)
        return [y]

    return formula


def group_norm_inputs(shape, affine: bool, dtype: DataType, rng) -> list:  # noqa: ANN001
    x = (rng.standard_normal(shape) * 2 + 1).astype(dtype.numpy)
    if not affine:
        return [x]
    c = shape[1]
    return [
        x,
        rng.standard_normal(c).astype(dtype.numpy),
        rng.standard_normal(c).astype(dtype.numpy),
    ]


def scaled_where(fd: FusionDefinition, dtype: DataType) -> None:
    """where(b > 0, x * s, b) of x [N, M], a 0-dim s and b [M]: nvFuser reads s and b as if
    broadcast along new outer dims."""
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    s = fd.define_tensor(shape=[], dtype=dtype)
    b = fd.define_tensor(shape=[-1], dtype=dtype)
    fd.add_output(fd.ops.where(fd.ops.gt(b, 0.0), fd.ops.mul(x, s), b))


def scaled_where_numpy(x, s, b) -> list[np.ndarray]:  # noqa: ANN001
    return [np.where(b > 0, x * s, np.broadcast_to(b, x.shape))]


def scaled_where_inputs(rows: int, cols: int, dtype: DataType, rng) -> list:  # noqa: ANN001
    return [
        rng.standard_normal((rows, cols)).astype(dtype.numpy),
        np.array(1.5, dtype=dtype.numpy),
        rng.standard_normal(cols).astype(dtype.numpy),
    ]


# name -> (define, NumPy formula, inputs(dtype, rng)) at shapes a GPU test runs quickly and
# the CPU's reference runs in a moment; ragged extents where the vectors allow.
CASES = {
    "layernorm_backward": (
        layernorm_backward,
        layernorm_backward_numpy,
        lambda dtype, rng: layernorm_backward_inputs(300, 1024, dtype, rng),
    ),
    "layernorm_backward_ragged": (
        layernorm_backward,
        layernorm_backward_numpy,
        lambda dtype, rng: layernorm_backward_inputs(77, 333, dtype, rng),
    ),
    "rmsnorm_backward": (
        rmsnorm_backward,
        rmsnorm_backward_numpy,
        lambda dtype, rng: rmsnorm_backward_inputs(200, 640, dtype, rng),
    ),
    "cross_entropy": (
        cross_entropy,
        cross_entropy_numpy,
        lambda dtype, rng: cross_entropy_inputs(64, 5000, dtype, rng),
    ),
    "group_norm": (
        group_norm((4, 64, 14, 14), 8, False),
        group_norm_numpy(8),
        lambda dtype, rng: group_norm_inputs((4, 64, 14, 14), False, dtype, rng),
    ),
    "group_norm_affine": (
        group_norm((2, 96, 9, 7), 32, True),
        group_norm_numpy(32),
        lambda dtype, rng: group_norm_inputs((2, 96, 9, 7), True, dtype, rng),
    ),
    "scaled_where": (
        scaled_where,
        scaled_where_numpy,
        lambda dtype, rng: scaled_where_inputs(33, 257, dtype, rng),
    ),
}

# Backward passes whose column sums (dw, db) a normalization of the rows takes in parts on
# a GPU (planning.column_partials): name -> (define, inputs(rows, cols, dtype, rng), formula).
NORM_BACKWARDS = {
    "layernorm": (layernorm_backward, layernorm_backward_inputs, layernorm_backward_numpy),
    "rmsnorm": (rmsnorm_backward, rmsnorm_backward_inputs, rmsnorm_backward_numpy),
}
