"""nvFuser's spellings, so that scripts written for nvFuser run with one import changed:

    from tunefuse.nvfuser import Fusion, FusionDefinition, DataType

    fs = Fusion()
    with FusionDefinition(fs) as fd:
        t0 = fd.define_tensor(symbolic_sizes=[-1, -1], contiguous=[True, True], dtype=DataType.Float)
        t1 = fd.ops.view(t0, original_shape=[8192, 3072], new_shape=[64, 128, 3072])
        fd.add_output(fd.ops.relu(t1))
    out = fs.execute(inputs)

The current nvFuser frontend's names (`fd.from_pytorch`, `fd.execute(inputs)` returning a
list) are those of `tunefuse.FusionDefinition` itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tunefuse import version
from tunefuse.arrays import compute_contiguity, compute_tensor_descriptor
from tunefuse.errors import DefinitionError
from tunefuse.frontend import FusionDefinition as _FusionDefinition
from tunefuse.frontend import Tensor
from tunefuse.ir.dtypes import DataType

__all__ = [
    "DataType",
    "Fusion",
    "FusionDefinition",
    "compute_contiguity",
    "compute_tensor_descriptor",
    "version",
]


class Fusion:
    """The legacy container a `FusionDefinition(fs)` block fills; `fs.execute` runs it."""

    def __init__(self) -> None:
        self.definition: _FusionDefinition | None = None

    def execute(self, inputs: Sequence[object], **options: Any) -> list:
        if self.definition is None:
            raise DefinitionError(
                "this Fusion is empty: fill it with `with FusionDefinition(fs) as fd:`"
            )
        return self.definition.execute(inputs, **options)

    def __str__(self) -> str:
        return str(self.definition) if self.definition is not None else "<empty Fusion>"


class FusionDefinition(_FusionDefinition):
    def __init__(self, fusion: Fusion | None = None) -> None:
        super().__init__()
        self._container = fusion

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        super().__exit__(exc_type, exc, tb)
        if exc_type is None and self._container is not None:
            self._container.definition = self

    def permute(self, arg: Tensor, dims: Sequence[int]) -> Tensor:
        """Legacy `fd.permute(t, dims)`."""
        return self.ops.permute(arg, dims)
