"""A fusion as runnable Python: `print(fd)` gives code that rebuilds the same fusion."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from tunefuse.arrays import to_allocation_order
from tunefuse.ir.dtypes import DataType
from tunefuse.ir.ops import GroupOp, OpKind, ScalarRef

if TYPE_CHECKING:
    from tunefuse.ir.fusion import Fusion, Node


def python_literal(value: object) -> str:
    if isinstance(value, DataType):
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else 'float("-inf")'
        return repr(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(python_literal(v) for v in value) + "]"
    return repr(value)


def _shape(fusion: Fusion, node: Node, shape: tuple) -> str:
    parts = [
        fusion.name(node.inputs[e.index]) if isinstance(e, ScalarRef) else str(e) for e in shape
    ]
    return "[" + ", ".join(parts) + "]"


def node_to_python(fusion: Fusion, node: Node) -> str:
    """One line of Python that adds `node` to a FusionDefinition named `fd`."""
    names = [fusion.name(v) for v in node.inputs]
    lhs = ", ".join(fusion.name(v) for v in node.outputs)
    a = node.attrs
    op = node.op
    if op is OpKind.DEFINE_TENSOR:
        contiguity = (
            a.contiguity
            if a.stride_order is None
            else to_allocation_order(a.contiguity, a.stride_order)
        )
        call = (
            f"fd.define_tensor(shape={python_literal(a.shape)}, contiguity={python_literal(contiguity)}, "
            f"dtype={a.dtype!r}, stride_order={python_literal(a.stride_order)})"
        )
    elif op is OpKind.DEFINE_SCALAR:
        call = f"fd.define_scalar(dtype={a.dtype!r})"
    elif op is OpKind.CONSTANT:
        call = f"fd.define_scalar({python_literal(a.value)}, dtype={a.dtype!r})"
    elif op.is_elementwise and op is not OpKind.CAST:
        call = f"fd.ops.{op.value}({', '.join(names)})"
    elif op is OpKind.CAST:
        call = f"fd.ops.cast({names[0]}, dtype={a.dtype!r})"
    elif op in GroupOp.REDUCTION:
        extra = f", correction={a.correction}" if op in (OpKind.VAR, OpKind.VAR_MEAN) else ""
        extra += f", dtype={a.dtype!r}" if a.dtype is not None else ""
        call = f"fd.ops.{op.value}({names[0]}, dims={python_literal(a.dims)}{extra}, keepdim={a.keepdim})"
    elif op is OpKind.BROADCAST_IN_DIM:
        call = (
            f"fd.ops.broadcast_in_dim({names[0]}, shape={_shape(fusion, node, a.shape)}, "
            f"broadcast_dims={python_literal(a.broadcast_dims)})"
        )
    elif op is OpKind.BROADCAST:
        call = (
            f"fd.ops.broadcast({names[0]}, is_broadcast_dim={python_literal(a.is_broadcast_dim)})"
        )
    elif op is OpKind.EXPAND:
        call = f"fd.ops.expand({names[0]}, shape={_shape(fusion, node, a.shape)})"
    elif op is OpKind.RESHAPE:
        call = f"fd.ops.reshape({names[0]}, new_shape={_shape(fusion, node, a.shape)})"
    elif op is OpKind.PERMUTE:
        call = f"fd.ops.permute({names[0]}, dims={python_literal(a.dims)})"
    elif op is OpKind.SQUEEZE:
        call = f"fd.ops.squeeze({names[0]}, dims={python_literal(a.dims)})"
    elif op in (OpKind.UNSQUEEZE, OpKind.SIZE):
        call = f"fd.ops.{op.value}({names[0]}, dim={a.dim})"
    elif op is OpKind.SLICE:
        call = (
            f"fd.ops.slice({names[0]}, start_indices={python_literal(a.start_indices)}, "
            f"end_indices={python_literal(a.end_indices)}, strides={python_literal(a.strides)})"
        )
    elif op is OpKind.PAD:
        call = (
            f"fd.ops.pad({names[0]}, pad_widths={python_literal(a.pad_widths)}, value={names[1]})"
        )
    elif op is OpKind.CAT:
        call = f"fd.ops.cat([{', '.join(names)}], dim={a.dim})"
    elif op in GroupOp.INDEXING:
        call = f"fd.ops.{op.value}({names[0]}, {names[1]}, dim={a.dim})"
    elif op in GroupOp.COPY:
        call = f"fd.ops.{op.value}({names[0]})"
    elif op is OpKind.FULL:
        call = (
            f"fd.ops.full(shape={_shape(fusion, node, a.shape)}, fill_value={names[0]}, "
            f"dtype={a.dtype!r})"
        )
    elif op in GroupOp.RANDOM:
        state = fusion.producer(node.inputs[2]).op is OpKind.RNG_STATE
        seeded = "" if state else f", rng_seed={names[2]}, rng_offset={names[3]}"
        call = (
            f"fd.ops.{op.value}({names[0]}, {names[1]}, shape={_shape(fusion, node, a.shape)}{seeded}, "
            f"dtype={a.dtype!r})"
        )
    elif op is OpKind.IOTA:
        call = f"fd.ops.iota({', '.join(names)}, dtype={a.dtype!r})"
    else:  # pragma: no cover - every kind is listed above
        raise AssertionError(f"no printer for {op}")
    return f"{lhs} = {call}"


def fusion_to_python(
    fusion: Fusion, number: int = 0, vectors: Mapping[int, int] | None = None
) -> str:
    """The definition as a script, in nvFuser's printed form: its second line defines
    `nvfuser_fusion_id<number>` (the name nvFuser's tooling finds there), `nvfuser_fusion`
    names it too (the direct frontend's name), and the script ends by defining `fd`.
    `vectors` (input position -> n): the scalar inputs a `define_vector(n)` made, printed as
    that call so the script takes the same inputs (a list at that position)."""
    name = f"nvfuser_fusion_id{number}"
    lines = [
        "from tunefuse import FusionDefinition, DataType",
        f"def {name}(fd : FusionDefinition) -> None :",
    ]
    pending = dict(vectors or {})
    position = 0  # inputs defined so far
    skip = 0  # scalar inputs of a define_vector already printed
    for node in fusion.nodes:
        if node.op is OpKind.RNG_STATE:
            continue  # a draw from the process's stream is made by the op that reads it
        if node.op.is_input:
            while pending.get(position) == 0:
                lines.append("    fd.define_vector(0)")
                del pending[position]
            n = pending.pop(position, None)
            position += 1
            if skip:
                skip -= 1
                continue
            if n:
                names = ", ".join(
                    fusion.name(v) for v in fusion.inputs[position - 1 : position - 1 + n]
                )
                lines.append(f"    {names}, = fd.define_vector({n})")
                skip = n - 1
                continue
        lines.append("    " + node_to_python(fusion, node))
    lines += ["    fd.define_vector(0)" for n in pending.values() if n == 0]
    for out in fusion.outputs:
        alias = (
            f", alias_input={fusion.name(out.alias_input)}" if out.alias_input is not None else ""
        )
        alias += (
            f", stride_order={python_literal(out.stride_order)}"
            if out.stride_order is not None
            else ""
        )
        lines.append(f"    fd.add_output({fusion.name(out.value)}{alias})")
    lines += [
        "",
        "",
        f"nvfuser_fusion = {name}",
        "",
        "with FusionDefinition() as fd:",
        f"    {name}(fd)",
        "",
    ]
    return "\n".join(lines)
