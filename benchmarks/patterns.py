"""The surface's patterns as fusions, without torch: each pattern's definition, its grid of
shapes at fixed bytes, and the extent each cell reduces. `surface.py` times them on the GPU;
`ab.py` and `sass_count.py` take a pattern where they take a fusion_zoo case."""

from __future__ import annotations

import math
import pathlib
import random
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
for _path in (str(ROOT), str(ROOT / "tests")):  # appended: a caller's tunefuse stays first
    if _path not in sys.path:
        sys.path.append(_path)

import numpy as np  # noqa: E402
from fusion_zoo import (  # noqa: E402
    bias_gelu,
    column_layernorm,
    layernorm,
    logsumexp,
    rmsnorm,
    softmax,
    softmax_over,
    transpose2d,
)

from tunefuse import DataType, FusionDefinition  # noqa: E402
from tunefuse.device_info import DeviceInfo  # noqa: E402

# [outputs, reduced]; the pointwise patterns [rows, cols] (a cell's "reduced" is its cols)
ROW_PATTERNS = ("row", "softmax", "layernorm", "rmsnorm", "logsumexp", "bias_gelu", "transpose2d")
# patterns that are no fusion_zoo case; "middle_softmax" normalizes the middle dim of
# [outputs/64, reduced, 64] (softmax over the channels: a strided row, 5x torch.compile
# before the twenty-sixth session, and no pattern caught it)
# "column_layernorm" normalizes dim 0 of [reduced, outputs] with a weight of [outputs]
# (BatchNorm1d's training forward: a strided row with a Welford, laid out as "col");
# "middle_var_mean" is var_mean over the middle dim (a strided Welford whose outputs' runs
# are short between the grid's points: a block a slab, `reduction._whole_slabs`)
SURFACE_ONLY = (
    "row",
    "col",
    "var_mean0",
    "middle",
    "middle_var_mean",
    "middle_softmax",
    "column_layernorm",
)
COLUMN_PATTERNS = ("col", "var_mean0", "column_layernorm")  # laid out [reduced, outputs]
# laid out [outputs/64, reduced, 64]
MIDDLE_PATTERNS = ("middle", "middle_var_mean", "middle_softmax")
NORMALIZATIONS = {
    "softmax": softmax,
    "layernorm": layernorm,
    "rmsnorm": rmsnorm,
    "logsumexp": logsumexp,
}
# Pointwise with a broadcast (x [rows, cols] plus a bias of [cols], then GELU) and a
# transpose: the zoo's definitions.
POINTWISE = {"bias_gelu": bias_gelu, "transpose2d": transpose2d}
# Inputs beside x, each of x's last extent: a norm's weight (and bias), bias_gelu's bias.
ROW_OPERANDS = {"layernorm": 2, "rmsnorm": 1, "bias_gelu": 1, "column_layernorm": 1}


def pattern_fusion(pattern: str, dtype: DataType) -> FusionDefinition:
    """The fusion a surface pattern times (x, and the ROW_OPERANDS of the zoo's norms and
    bias_gelu)."""
    with FusionDefinition() as fd:
        if pattern in NORMALIZATIONS or pattern in POINTWISE:  # the zoo's definitions
            {**NORMALIZATIONS, **POINTWISE}[pattern](fd, dtype)
        elif pattern == "middle":
            x = fd.define_tensor(shape=[-1, -1, -1], dtype=dtype)
            fd.add_output(fd.ops.sum(x, dims=[1]))
        elif pattern == "middle_var_mean":
            x = fd.define_tensor(shape=[-1, -1, -1], dtype=dtype)
            var, mean = fd.ops.var_mean(fd.ops.cast(x, DataType.Float), dims=[1], correction=1)
            fd.add_output(var)
            fd.add_output(mean)
        elif pattern == "middle_softmax":
            softmax_over(3, 1)(fd, dtype)
        elif pattern == "column_layernorm":
            column_layernorm(fd, dtype)
        else:
            x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
            if pattern == "row":
                fd.add_output(fd.ops.sum(x, dims=[1]))
            elif pattern == "col":
                fd.add_output(fd.ops.sum(x, dims=[0]))
            else:  # var_mean0: BatchNorm's statistics
                var, mean = fd.ops.var_mean(fd.ops.cast(x, DataType.Float), dims=[0], correction=1)
                fd.add_output(var)
                fd.add_output(mean)
    return fd


def shapes(pattern: str, elements: int, step: int) -> list[tuple[int, ...]]:
    """(outputs, reduced) from 1 x N to N x 1 in factors of `step`, as the pattern lays them
    out (a column reduction is [reduced, outputs]; the middle one [outputs/64, reduced, 64])."""
    out = []
    outputs = 1
    while outputs <= elements:
        reduced = elements // outputs
        if pattern in ROW_PATTERNS:
            out.append((outputs, reduced))
        elif pattern in COLUMN_PATTERNS:
            out.append((reduced, outputs))
        elif outputs >= 64:
            out.append((outputs // 64, reduced, 64))
        outputs *= step
    return out


def laid_out(pattern: str, outputs: int, reduced: int, inner: int = 1) -> tuple[int, ...]:
    """A cell's shape as the pattern lays it out: [outputs, reduced] for rows, [reduced,
    outputs] for columns, [outputs, reduced, inner] for a middle dim."""
    if pattern in ROW_PATTERNS:
        return (outputs, reduced)
    if pattern in COLUMN_PATTERNS:
        return (reduced, outputs)
    return (outputs, reduced, inner)


def between_shapes(pattern: str, elements: int, count: int, seed: int) -> list[tuple[int, ...]]:
    """`count` shapes of about `elements` elements (within a factor of 2 under it) off the
    grid of `shapes`: the reduced extent log-uniform from 1 to all of them, then moved off
    its power of two, and (middle patterns) an innermost extent log-uniform from 1 to 512
    in place of the grid's 64. A heuristic right on the grid's points and wrong between
    them shows here. Deterministic in (pattern, elements, count, seed)."""
    rng = random.Random(f"{pattern}:{elements}:{seed}")
    out = []
    while len(out) < count:
        reduced = max(1, round(2 ** rng.uniform(0, math.log2(elements))))
        reduced = max(1, reduced + rng.randint(-reduced // 3, reduced // 3))
        inner = max(1, round(2 ** rng.uniform(0, 9))) if pattern in MIDDLE_PATTERNS else 1
        most = elements // (reduced * inner)
        least = max(1, -(-elements // (2 * reduced * inner)))
        if most < least:
            continue
        shape = laid_out(pattern, rng.randint(least, most), reduced, inner)
        if shape not in out:
            out.append(shape)
    return out


def reduced_extent(pattern: str, shape: tuple[int, ...]) -> int:
    """The elements a cell reduces an output (as `shapes` lays the pattern out)."""
    return shape[0] if pattern in COLUMN_PATTERNS else shape[1]


def planning_inputs(fd: FusionDefinition, shape: tuple[int, ...], dtype: DataType) -> list:
    """Inputs of `shape` for planning `fd` without a GPU: zero-stride views of one element
    (planning reads no data); an input of lower rank (a norm's weight) takes the trailing
    extents."""
    base = np.zeros(1, dtype.numpy)
    ranks = [fd.fusion.values[v].rank for v in fd.fusion.inputs]
    rank = len(shape)
    return [np.lib.stride_tricks.as_strided(base, shape[rank - r :], (0,) * r) for r in ranks]


def pattern_plan(pattern: str, shape: tuple[int, ...], dtype: DataType, device: DeviceInfo):  # noqa: ANN201
    """The plan of a surface pattern on `shape` for `device`, made without a GPU
    (`planning_inputs`)."""
    fd = pattern_fusion(pattern, dtype)
    return fd.plan(planning_inputs(fd, shape, dtype), device=device)
