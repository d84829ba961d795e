"""Inputs rebuilt from a stored input signature (what a tuning job carries)."""

from __future__ import annotations

import json

import numpy as np

from tunefuse.ir.dtypes import DataType
from tunefuse.ir.fusion import Fusion
from tunefuse.ir.ops import GroupOp, OpKind


def make_inputs(signature_json: str, seed: int = 0, fusion: Fusion | None = None) -> list:
    """NumPy arrays (contiguous; standard normal, small integers, random bools) and
    scalars (the stored value, or 1 where only the dtype was kept). Given the `fusion`, an
    input that is an index of index_select/gather (directly or through views and casts)
    holds indices inside the table it indexes, so that the fusion runs."""
    rng = np.random.default_rng(seed)
    out: list = []
    for item in json.loads(signature_json):
        dtype = DataType(item["dtype"])
        if item["kind"] == "tensor":
            shape = tuple(item["shape"])
            if dtype.is_floating:
                out.append(rng.standard_normal(shape).astype(dtype.numpy))
            elif dtype.is_bool:
                out.append(rng.integers(0, 2, shape).astype(bool))
            else:
                out.append(rng.integers(-8, 8, shape).astype(dtype.numpy))
        else:
            value = item["value"]
            if value is None:
                value = 1.0 if dtype.is_floating else True if dtype.is_bool else 1
            out.append(value)
    if fusion is not None:
        for position, extent in index_extents(fusion, out).items():
            out[position] = rng.integers(0, max(extent, 1), out[position].shape).astype(
                out[position].dtype
            )
    return out


def index_extents(fusion: Fusion, inputs: list) -> dict[int, int]:
    """Input position -> the extent of the table it indexes (the smallest, when several)."""
    from tunefuse.planning.concretize import concretize
    from tunefuse.planning.signature import bind_inputs

    cf = concretize(fusion, bind_inputs(fusion, inputs))
    passes = GroupOp.VIEW | GroupOp.COPY | {OpKind.CAST}
    found: dict[int, int] = {}
    for node in fusion.nodes:
        if node.op not in GroupOp.INDEXING:
            continue
        extent = cf.shape(node.inputs[0])[node.attrs.dim]  # type: ignore[attr-defined]
        source = node.inputs[1]
        while fusion.producer(source).op in passes:
            source = fusion.producer(source).inputs[0]
        if fusion.producer(source).op is OpKind.DEFINE_TENSOR:
            position = fusion.inputs.index(source)
            found[position] = min(found.get(position, extent), extent)
    return found
