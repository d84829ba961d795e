"""Concretization: a symbolic fusion plus one call's inputs -> concrete extents and the
decisions that shape the compute graph (seed 002).

`ConcretizationInfo` records only decisions, never sizes: each dynamic reshape's
keep/merge/split transforms, and which symbolic extents are 0, 1 (broadcast) or larger.
Two calls whose inputs lead to the same decisions share a `conc_key`; a scalar input that
changes a reshape's transforms changes the key (the bug the seed fixed in nvFuser).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tunefuse import keys
from tunefuse.errors import ShapeError
from tunefuse.ir.fusion import Fusion, ScalarType, Sym, TensorType
from tunefuse.ir.infer import RULES, InferContext
from tunefuse.ir.ops import OpKind
from tunefuse.ir.shapes import ReshapeAnalysis, analyze_reshape
from tunefuse.planning.signature import BoundInputs
from tunefuse.reference import eval_node


def extent_class(extent: int) -> str:
    return "0" if extent == 0 else "1" if extent == 1 else "n"


@dataclass(frozen=True, slots=True)
class ConcretizationInfo:
    fusion_id: str
    # (reshape output value id, transforms as text), for reshapes whose sizes were symbolic
    reshapes: tuple[tuple[int, tuple[str, ...]], ...]
    # (value id, class of each dim: "0", "1", "n", or "" where the extent was static)
    extents: tuple[tuple[int, str], ...]

    @property
    def conc_key(self) -> str:
        return keys.concretization_key(self.fusion_id, self.reshapes, self.extents)


@dataclass(frozen=True)
class ConcreteFusion:
    """The fusion with every extent known for one call."""

    fusion: Fusion
    types: tuple[object, ...]  # TensorType with int shapes, or ScalarType, per value
    host_scalars: dict[int, object]  # scalar values known on the host (inputs, constants, ...)
    reshapes: dict[int, ReshapeAnalysis]  # by reshape output value id
    info: ConcretizationInfo

    def shape(self, value: int) -> tuple[int, ...]:
        t = self.types[value]
        assert isinstance(t, TensorType)
        return t.shape  # type: ignore[return-value]


def concretize(fusion: Fusion, bound: BoundInputs) -> ConcreteFusion:
    """Replay every node's shape rule on concrete extents; record the decisions."""
    types: list[object] = [None] * len(fusion.values)
    host: dict[int, object] = dict(bound.scalars)
    reshapes: dict[int, ReshapeAnalysis] = {}
    reshape_info: list[tuple[int, tuple[str, ...]]] = []
    for node in fusion.nodes:
        out0 = node.outputs[0]
        if node.op is OpKind.DEFINE_TENSOR:
            sig = bound.signature[fusion.inputs.index(out0)]
            types[out0] = TensorType(fusion.values[out0].dtype, sig.shape)  # type: ignore[union-attr]
            continue
        if node.op is OpKind.DEFINE_SCALAR:
            types[out0] = fusion.values[out0]
            continue
        scalar_extents = tuple(
            int(host[v])
            if v in host and isinstance(types[v], ScalarType) and types[v].dtype.is_integral
            else None
            for v in node.inputs
        )
        ctx = InferContext(
            op=node.op,
            attrs=node.attrs,
            inputs=node.inputs,
            types=tuple(types[v] for v in node.inputs),  # type: ignore[misc]
            scalar_extents=scalar_extents,
            first_output=out0,
        )
        out_types = RULES[node.op](ctx)
        for v, t in zip(node.outputs, out_types):
            if isinstance(t, TensorType) and any(isinstance(e, Sym) for e in t.shape):
                raise ShapeError(
                    f"{ctx.where}: extents {t.shape} could not be concretized"
                )  # pragma: no cover
            types[v] = t
        if all(isinstance(t, ScalarType) for t in out_types) and all(
            v in host for v in node.inputs
        ):
            env = {v: np.asarray(host[v]) for v in node.inputs}
            if node.op is OpKind.CONSTANT or node.inputs:
                for v, r in zip(node.outputs, eval_node(fusion, node, env)):
                    host[v] = r.item()
        elif node.op is OpKind.SIZE:
            host[out0] = types[node.inputs[0]].shape[node.attrs.dim]  # type: ignore[union-attr]
        if node.op is OpKind.RESHAPE:
            src = types[node.inputs[0]].shape  # type: ignore[union-attr]
            analysis = analyze_reshape(src, types[out0].shape)  # type: ignore[union-attr]
            reshapes[out0] = analysis
            symbolic = fusion.values[node.inputs[0]].shape + fusion.values[out0].shape  # type: ignore[union-attr]
            if any(isinstance(e, Sym) for e in symbolic) or len(node.inputs) > 1:
                reshape_info.append((out0, tuple(repr(t) for t in analysis.transforms)))
    extents = []
    for v, declared in enumerate(fusion.values):
        if isinstance(declared, TensorType) and any(isinstance(e, Sym) for e in declared.shape):
            concrete = types[v].shape  # type: ignore[union-attr]
            classes = "".join(
                extent_class(c) if isinstance(e, Sym) else "."
                for e, c in zip(declared.shape, concrete)
            )
            extents.append((v, classes))
    info = ConcretizationInfo(fusion.fusion_id, tuple(reshape_info), tuple(extents))
    return ConcreteFusion(fusion, tuple(types), host, reshapes, info)
