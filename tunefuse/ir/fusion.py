"""The fusion IR: immutable, SSA, topologically ordered.

A `Fusion` is a tuple of `Node`s. Each node has an `OpKind`, the ids of the values it reads,
a frozen attrs payload with named fields, and the ids of the values it defines. Value ids
are positions in `Fusion.values` and are assigned in definition order, so a fusion rebuilt
from its JSON has exactly the same ids.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Union

from tunefuse import keys
from tunefuse.ir.canonical import fusion_to_json
from tunefuse.ir.dtypes import DataType
from tunefuse.ir.ops import OpAttrs, OpKind
from tunefuse.ir.printer import fusion_to_python


@dataclass(frozen=True, slots=True)
class Sym:
    """A symbolic extent, known only once inputs are given (`T0.1` is input T0's dim 1)."""

    name: str

    def __repr__(self) -> str:
        return self.name


Extent = Union[int, Sym]


@dataclass(frozen=True, slots=True)
class TensorType:
    dtype: DataType
    shape: tuple[Extent, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True, slots=True)
class ScalarType:
    dtype: DataType


ValueType = Union[TensorType, ScalarType]


@dataclass(frozen=True, slots=True)
class Node:
    op: OpKind
    inputs: tuple[int, ...]
    attrs: OpAttrs
    outputs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """A fusion output; `alias_input` is the input value it is written into in place."""

    value: int
    alias_input: int | None = None
    stride_order: tuple[int, ...] | None = (
        None  # the output's memory layout (nvFuser's convention); None: row-major
    )


_NUMBERS: dict[str, int] = {}
_NUMBERED: dict[int, Fusion] = {}  # number -> the first definition given it
_NUMBERS_LOCK = threading.Lock()


def numbered(number: int) -> Fusion:
    """The definition this process gave `number` (nvFuser's `FusionDefinition(fusion_id)`);
    KeyError where none has it."""
    with _NUMBERS_LOCK:
        return _NUMBERED[number]


@dataclass(frozen=True)
class Fusion:
    nodes: tuple[Node, ...]
    values: tuple[ValueType, ...]
    outputs: tuple[OutputSpec, ...]

    @property
    def inputs(self) -> tuple[int, ...]:
        """Value ids of the fusion's inputs (tensors and scalar inputs), in order."""
        return tuple(n.outputs[0] for n in self.nodes if n.op.is_input)

    def producer(self, value: int) -> Node:
        return self._producers[value]

    @cached_property
    def _producers(self) -> dict[int, Node]:
        return {out: node for node in self.nodes for out in node.outputs}

    @cached_property
    def uses(self) -> dict[int, tuple[Node, ...]]:
        """Nodes reading each value, in definition order."""
        table: dict[int, list[Node]] = {v: [] for v in range(len(self.values))}
        for node in self.nodes:
            for v in dict.fromkeys(node.inputs):
                table[v].append(node)
        return {v: tuple(ns) for v, ns in table.items()}

    def is_tensor(self, value: int) -> bool:
        return isinstance(self.values[value], TensorType)

    def tensor_type(self, value: int) -> TensorType:
        vt = self.values[value]
        assert isinstance(vt, TensorType), f"value {value} is not a tensor"
        return vt

    def name(self, value: int) -> str:
        """Printed name of a value: T<id> for tensors, S<id> for scalars (nvFuser's style)."""
        return ("T" if self.is_tensor(value) else "S") + str(value)

    @cached_property
    def _json(self) -> str:
        return fusion_to_json(self)

    def to_json(self) -> str:
        """The canonical JSON (`tunefuse.ir.canonical`); `serialize.fusion_from_json` reads it."""
        return self._json

    @property
    def fusion_id(self) -> str:
        """sha256 of the canonical JSON: equal definitions share it."""
        return keys.fusion_key(self.to_json())

    @property
    def number(self) -> int:
        """This definition's number in this process, in order of first asking (nvFuser's
        fusion id, as `fd.id()` and the printed `nvfuser_fusion_id<N>`): equal definitions
        share it."""
        with _NUMBERS_LOCK:
            number = _NUMBERS.setdefault(self.fusion_id, len(_NUMBERS))
            _NUMBERED.setdefault(number, self)
            return number

    def to_python(self, vectors: Mapping[int, int] | None = None) -> str:
        """`fusion_to_python` under this definition's number (`vectors`: its define_vector
        inputs, input position -> length)."""
        return fusion_to_python(self, self.number, vectors)

    def __str__(self) -> str:
        return self.to_python()
