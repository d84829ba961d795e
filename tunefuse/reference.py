"""A NumPy interpreter of any fusion: the ground truth for tests and for tuned kernels.

Each op computes in its compute type (float for half and bfloat16) and rounds its result
to the value's dtype, as the generated kernels do.

    outputs = tunefuse.reference.run(fd.fusion, [x, y])
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from tunefuse import philox, rng
from tunefuse.arrays import to_numpy
from tunefuse.errors import IndexOutOfRangeError, ShapeError
from tunefuse.ir.dtypes import DataType
from tunefuse.ir.elementwise import ELEMENTWISE, elementwise_types
from tunefuse.ir.fusion import Fusion, Node, ScalarType, TensorType
from tunefuse.ir.ops import Dim, GroupOp, OpKind, ScalarRef
from tunefuse.ir.shapes import resolve_reshape_sizes

Env = dict[int, np.ndarray]


def _concrete_shape(node: Node, shape: Sequence[Dim], env: Env) -> tuple[int, ...]:
    return tuple(int(env[node.inputs[e.index]]) if isinstance(e, ScalarRef) else e for e in shape)


def _elementwise(fusion: Fusion, node: Node, env: Env) -> np.ndarray:
    rule = ELEMENTWISE[node.op]
    types = [fusion.values[v] for v in node.inputs]
    tensor_dtypes = [t.dtype if isinstance(t, TensorType) else None for t in types]
    scalar_dtypes = [t.dtype if isinstance(t, ScalarType) else None for t in types]
    et = elementwise_types(node.op, tensor_dtypes, scalar_dtypes)
    operands = []
    for k, v in enumerate(node.inputs):
        target = DataType.Bool if k < rule.first_promoted else et.operand
        operands.append(np.asarray(env[v]).astype(target.numpy))
    result = np.asarray(rule.numpy(*operands))
    return result.astype(fusion.values[node.outputs[0]].dtype.numpy)


def _reduction(fusion: Fusion, node: Node, env: Env) -> list[np.ndarray]:
    a = node.attrs
    x = env[node.inputs[0]]
    out_dtype = fusion.values[node.outputs[0]].dtype
    compute = out_dtype.compute if out_dtype.is_floating else DataType.Int
    if x.dtype == DataType.Bool.numpy or out_dtype.is_integral:
        xc = x.astype(np.int64)
    else:
        xc = x.astype(compute.numpy)
    kept = [d for d in range(x.ndim) if d not in a.dims]
    shape = (
        [1 if d in a.dims else x.shape[d] for d in range(x.ndim)]
        if a.keepdim
        else [x.shape[d] for d in kept]
    )
    if any(x.shape[d] == 0 for d in kept):  # no output element: nothing is reduced
        return [np.zeros(shape, dtype=fusion.values[v].dtype.numpy) for v in node.outputs]
    if node.op in (OpKind.MAX, OpKind.MIN) and any(x.shape[d] == 0 for d in a.dims):
        raise ShapeError(
            f"{node.op.value}: cannot reduce an empty dim {list(a.dims)} of shape {list(x.shape)}"
        )
    # Canonical order: reduced dims last, one row per output element, reduced along the row.
    # Kernels and the plan interpreter reduce in this order too, so results compare exactly.
    rows = np.ascontiguousarray(np.transpose(xc, kept + list(a.dims)))
    rows = rows.reshape([x.shape[d] for d in kept] + [int(np.prod([x.shape[d] for d in a.dims]))])
    outs = reduce_rows(node.op, rows, a.correction)
    outs = [o.reshape(shape) for o in outs]
    return [np.asarray(o).astype(fusion.values[v].dtype.numpy) for o, v in zip(outs, node.outputs)]


def reduce_rows(op: OpKind, rows: np.ndarray, correction: int) -> list[np.ndarray]:
    """Reduce the last axis of `rows` (C-contiguous): [result], or [var, mean] for var_mean."""
    if op is OpKind.SUM:
        return [rows.sum(axis=-1)]
    if op is OpKind.PROD:
        return [rows.prod(axis=-1)]
    if op is OpKind.MAX:
        return [rows.max(axis=-1)]
    if op is OpKind.MIN:
        return [rows.min(axis=-1)]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the mean of nothing is NaN, as in torch
        mean = rows.mean(axis=-1, keepdims=True)
    if op is OpKind.MEAN:
        return [mean[..., 0]]
    count = rows.shape[-1]
    with np.errstate(all="ignore"):
        var = ((rows - mean) ** 2).sum(axis=-1) / rows.dtype.type(max(count - correction, 0))
    return [var] if op is OpKind.VAR else [var, mean[..., 0]]


def _pad(x: np.ndarray, widths: Sequence[int], value: np.ndarray) -> np.ndarray:
    rank = x.ndim
    pairs = [(0, 0)] * rank
    for k in range(len(widths) // 2):
        pairs[rank - 1 - k] = (widths[2 * k], widths[2 * k + 1])
    # Grow, then crop: output[i] = x[i - left] where that is inside x, else the fill. (Crop
    # first and a crop wider than x's extent on one side would eat into the other side's fill.)
    grow = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
    x = np.pad(x, grow, constant_values=value.astype(x.dtype))
    crop = tuple(slice(max(-lo, 0), x.shape[d] - max(-hi, 0)) for d, (lo, hi) in enumerate(pairs))
    return x[crop]


def index_error_text(fusion: Fusion, node: Node) -> str:
    """What an out-of-range index of an indexing node is called, on the host and on the GPU.
    A table of positions along a tensor's dim (an iota of its extent, broadcast: how
    `scatter` checks its index) is named by that tensor, not by the positions, which the
    definition never named."""
    table, index = node.inputs
    what = f"{node.op.value} (defining T{node.outputs[0]})"
    extent_of = fusion.name(table)
    positions = _positions_of(fusion, table)
    if positions is not None:
        what, extent_of = f"scatter's index check ({what})", fusion.name(positions)
    return (
        f"{what}: an index in {fusion.name(index)} lies outside "
        f"[0, extent of dim {node.attrs.dim} of {extent_of})"
    )


def _positions_of(fusion: Fusion, table: int) -> int | None:
    """The tensor whose positions 0..n-1 along a dim `table` holds (broadcast_in_dim of an
    iota whose length is that tensor's size), else None."""
    producers = {out: n for n in fusion.nodes for out in n.outputs}
    spread = producers.get(table)
    if spread is None or spread.op is not OpKind.BROADCAST_IN_DIM:
        return None
    iota = producers.get(spread.inputs[0])
    if iota is None or iota.op is not OpKind.IOTA:
        return None
    length = producers.get(iota.inputs[0])
    if length is None or length.op is not OpKind.SIZE:
        return None
    return length.inputs[0]


def _indexing(fusion: Fusion, node: Node, table: np.ndarray, index: np.ndarray) -> np.ndarray:
    dim = node.attrs.dim
    extent = table.shape[dim]
    index = index.astype(np.int64)
    bad = (index < 0) | (index >= extent)
    if bad.any():
        raise IndexOutOfRangeError(
            f"{index_error_text(fusion, node)}: {int(index[bad].flat[0])} where the extent "
            f"is {extent}"
        )
    if node.op is OpKind.INDEX_SELECT:
        return np.take(table, index, axis=dim)
    crop = tuple(slice(None) if d == dim else slice(0, e) for d, e in enumerate(index.shape))
    return np.take_along_axis(table[crop], index, axis=dim)


def eval_node(fusion: Fusion, node: Node, env: Env) -> list[np.ndarray]:
    """Evaluate one node given its operands in `env`; returns its outputs."""
    a = node.attrs
    op = node.op
    ins = [env[v] for v in node.inputs]
    out_type = fusion.values[node.outputs[0]]
    if op is OpKind.CONSTANT:
        return [np.asarray(a.value, dtype=a.dtype.numpy)]
    if op in ELEMENTWISE:
        return [_elementwise(fusion, node, env)]
    if op is OpKind.CAST:
        x = np.asarray(ins[0])
        if a.dtype.is_float8 and x.dtype != np.float32:
            x = x.astype(np.float32)  # through float, as the kernels and torch round
        return [x.astype(a.dtype.numpy)]
    if op in GroupOp.REDUCTION:
        return _reduction(fusion, node, env)
    x = ins[0] if ins else None
    if op is OpKind.BROADCAST_IN_DIM:
        shape = _concrete_shape(node, a.shape, env)
        expanded = [1] * len(shape)
        for in_dim, out_dim in enumerate(a.broadcast_dims):
            expanded[out_dim] = x.shape[in_dim]
        return [np.broadcast_to(x.reshape(expanded), shape)]
    if op is OpKind.BROADCAST:
        source = iter(x.shape)
        return [x.reshape([1 if b else next(source) for b in a.is_broadcast_dim])]
    if op is OpKind.EXPAND:
        shape = _concrete_shape(node, a.shape, env)
        shape = tuple(x.shape[d] if s == -1 else s for d, s in enumerate(shape))
        return [np.broadcast_to(x, shape)]
    if op is OpKind.RESHAPE:
        new_shape = _concrete_shape(node, a.shape, env)
        sizes = resolve_reshape_sizes(f"reshape (defining T{node.outputs[0]})", x.shape, new_shape)
        return [x.reshape(sizes)]
    if op is OpKind.PERMUTE:
        return [np.transpose(x, a.dims)]
    if op is OpKind.SQUEEZE:
        for d in a.dims:
            if x.shape[d] != 1:
                raise ShapeError(
                    f"squeeze (defining T{node.outputs[0]}): dim {d} of T{node.inputs[0]} has extent "
                    f"{x.shape[d]}, not 1"
                )
        return [np.squeeze(x, axis=a.dims)]
    if op is OpKind.UNSQUEEZE:
        return [np.expand_dims(x, a.dim)]
    if op is OpKind.SLICE:
        index = tuple(
            slice(s, e, st) for s, e, st in zip(a.start_indices, a.end_indices, a.strides)
        )
        return [x[index]]
    if op is OpKind.PAD:
        return [_pad(x, a.pad_widths, np.asarray(ins[1]))]
    if op is OpKind.CAT:
        dtype = out_type.dtype.numpy
        return [np.concatenate([t.astype(dtype) for t in ins], axis=a.dim)]
    if op in GroupOp.INDEXING:
        return [_indexing(fusion, node, x, np.asarray(ins[1]))]
    if op in GroupOp.COPY:
        return [np.array(x, copy=True)]
    if op is OpKind.FULL:
        shape = _concrete_shape(node, a.shape, env)
        return [np.full(shape, np.asarray(ins[0]).astype(a.dtype.numpy), dtype=a.dtype.numpy)]
    if op is OpKind.RNG_STATE:
        return [np.asarray(v, dtype=np.int64) for v in rng.next_state()]
    if op in GroupOp.RANDOM:
        shape = _concrete_shape(node, a.shape, env)
        position = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
        draw = philox.uniform if op is OpKind.UNIFORM else philox.normal
        return [draw(position, int(ins[2]), int(ins[3]), ins[0], ins[1], a.dtype)]
    if op is OpKind.IOTA:
        length = int(ins[0])
        if length < 0:
            raise ShapeError(f"iota: length must be >= 0, got {length}")
        compute = a.dtype.compute.numpy
        start, step = np.asarray(ins[1]).astype(compute), np.asarray(ins[2]).astype(compute)
        return [(start + step * np.arange(length, dtype=compute)).astype(a.dtype.numpy)]
    if op is OpKind.SIZE:
        return [np.asarray(x.shape[a.dim], dtype=np.int64)]
    raise AssertionError(f"no reference for {op}")  # pragma: no cover


def bind_inputs(fusion: Fusion, inputs: Sequence[object]) -> Env:
    """Host values for the fusion's inputs, checked as execution checks them."""
    from tunefuse.planning.signature import bind_inputs as check_inputs

    bound = check_inputs(fusion, inputs)
    env: Env = {}
    for k, vid in enumerate(fusion.inputs):
        if vid in bound.arrays:
            env[vid] = to_numpy(inputs[k], name=f"input {k} ({fusion.name(vid)})")
        else:
            env[vid] = np.asarray(bound.scalars[vid]).astype(fusion.values[vid].dtype.numpy)
    return env


def run(
    fusion: Fusion, inputs: Sequence[object], *, include_aliased: bool = False
) -> list[np.ndarray]:
    """Evaluate `fusion` on `inputs` (arrays of any kind, Python scalars); returns the
    outputs as NumPy arrays. Outputs written in place into an input (`alias_input`) are left
    out, as execution leaves them out, unless `include_aliased`."""
    if not isinstance(
        fusion, Fusion
    ):  # a FusionDefinition: its fusion, its inputs as the fusion takes them
        inputs = fusion.flat_inputs(inputs)
        fusion = fusion.fusion
    env = bind_inputs(fusion, inputs)
    with np.errstate(all="ignore"):
        for node in fusion.nodes:
            if node.op.is_input:
                continue
            for v, result in zip(node.outputs, eval_node(fusion, node, env)):
                env[v] = result
    return [
        np.array(env[o.value], order="C", copy=True)
        for o in fusion.outputs
        if include_aliased or o.alias_input is None
    ]
