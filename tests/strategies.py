"""Hypothesis strategies: random valid fusions with NumPy inputs for them."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from tunefuse import DataType, FusionDefinition

UNARY = ["neg", "abs", "exp", "tanh", "sigmoid", "relu", "sin", "silu", "floor", "log1p", "sqrt"]
BINARY = ["add", "sub", "mul", "maximum", "minimum", "div"]
SAFE_POSITIVE = {"sqrt", "log1p"}


@st.composite
def fusions(draw, max_ops: int = 8, dtypes=(DataType.Float,)):
    """(FusionDefinition, inputs): random elementwise / reduction / view fusions."""
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 4, 6]), min_size=rank, max_size=rank)))
    dtype = draw(st.sampled_from(dtypes))
    n_inputs = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    fd = FusionDefinition()
    with fd:
        pool = []  # (tensor, concrete shape)
        inputs = []
        for _ in range(n_inputs):
            symbolic = draw(st.booleans())
            declared = [-1 if symbolic and s != 1 else s for s in shape]
            t = fd.define_tensor(shape=declared, contiguity=[True] * rank, dtype=dtype)
            pool.append((t, shape))
            inputs.append(rng.uniform(0.1, 2.0, size=shape).astype(dtype.numpy))
        for _ in range(draw(st.integers(1, max_ops))):
            kind = draw(
                st.sampled_from(
                    ["unary", "binary", "binary", "scalar", "reduce", "permute", "reshape", "cast"]
                )
            )
            t, s = pool[draw(st.integers(0, len(pool) - 1))]
            if kind == "unary":
                pool.append((getattr(fd.ops, draw(st.sampled_from(UNARY)))(fd.ops.abs(t)), s))
            elif kind == "binary":
                same = [p for p in pool if p[1] == s]
                u, _ = same[draw(st.integers(0, len(same) - 1))]
                pool.append((getattr(fd.ops, draw(st.sampled_from(BINARY)))(t, u), s))
            elif kind == "scalar":
                c = fd.define_scalar(draw(st.sampled_from([0.5, 2.0, -1.25])))
                pool.append((fd.ops.mul(t, c), s))
            elif kind == "reduce" and len(s) > 1:
                dim = draw(st.integers(0, len(s) - 1))
                op = draw(st.sampled_from(["sum", "max", "mean"]))
                r = getattr(fd.ops, op)(t, dims=[dim], keepdim=True)
                b = fd.ops.broadcast_in_dim(r, shape=list(s), broadcast_dims=list(range(len(s))))
                pool.append(
                    (b, s)
                    if all(isinstance(x, int) for x in s) and not any(e == -1 for e in s)
                    else (r, tuple(1 if d == dim else x for d, x in enumerate(s)))
                )
            elif kind == "permute" and len(s) > 1:
                perm = draw(st.permutations(range(len(s))))
                pool.append((fd.ops.permute(t, dims=list(perm)), tuple(s[d] for d in perm)))
            elif kind == "reshape":
                new = (math.prod(s),)
                pool.append((fd.ops.reshape(t, new_shape=list(new)), new))
            elif kind == "cast":
                pool.append((fd.ops.cast(fd.ops.cast(t, DataType.Double), dtype), s))
        n_out = draw(st.integers(1, min(2, len(pool))))
        for t, _ in pool[-n_out:]:
            fd.add_output(t)
    return fd, inputs
