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
from tunefuse.errors import DefinitionError, LegacyRuleError, MissingDefinitionError
from tunefuse.frontend import FusionDefinition as _FusionDefinition
from tunefuse.frontend import Ops, Tensor
from tunefuse.ir.dtypes import DataType
from tunefuse.ir.fusion import numbered

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


class LegacyOps(Ops):
    """The legacy frontend's ops: as the direct frontend's, but for `slice`, whose bounds the
    legacy frontend takes as given (no negative bound counting from the end, unit strides)
    and checks in its own words."""

    def slice(
        self,
        arg: Tensor,
        start_indices: Sequence[Any],
        end_indices: Sequence[Any],
        strides: Sequence[Any] | None = None,
    ) -> Tensor:
        rank = self._rank(self._tensor(arg, "slice"))
        if strides is None:
            strides = [1] * len(start_indices)
        if len(start_indices) != len(strides):
            raise LegacyRuleError(
                "Slice start_indices and strides don't match! "
                f"Start Indices: {list(start_indices)} Strides: {list(strides)}"
            )
        if len(start_indices) != len(end_indices):
            raise LegacyRuleError(
                "Slice indexing attribute dimensions don't match! "
                f"Start Indices: {list(start_indices)} End Indices: {list(end_indices)}"
            )
        if rank != len(start_indices):
            raise LegacyRuleError(
                "Number of tensor dimensions does not match slice dimensions! "
                f"Tensor-dims: {rank} Slice-dims: {len(start_indices)}"
            )
        for start, end, stride in zip(start_indices, end_indices, strides):
            start, end = (
                self._constant_int(start, "slice start"),
                self._constant_int(end, "slice end"),
            )
            if start < 0:
                raise LegacyRuleError(
                    "Slice operation start_indices must be greater-than-or-equal-to 0. "
                    f"Start Indices: {list(start_indices)}"
                )
            if end < start:
                raise LegacyRuleError(
                    "Slice operation end_indices must be greater-than-or-equal-to start_indices. "
                    f"Start Indices: {list(start_indices)} End Indices: {list(end_indices)}"
                )
            if self._constant_int(stride, "slice stride") != 1:
                raise LegacyRuleError(
                    "nvFuser Limitation: All slice operation strides must be of size 1. "
                    f"Strides: {list(strides)}"
                )
        return super().slice(arg, start_indices, end_indices, strides)


class FusionDefinition(_FusionDefinition):
    """The legacy frontend's FusionDefinition: filled by a `with` block, by a subclass's
    `definition()` (run at the first `execute`), or, given a fusion id (`fd.id()` of an
    earlier definition in this process), that definition again.

    A subclass's `schedule()` runs after its definition is complete (an op added there is an
    error, as in nvFuser); tunefuse schedules every kernel itself, so a user schedule's
    transforms are not applied."""

    def __init__(self, fusion: Fusion | int | None = None) -> None:
        super().__init__()
        self.ops = LegacyOps(self)
        self._container: Fusion | None = None
        self._in_block = False
        if isinstance(fusion, int) and not isinstance(fusion, bool):
            try:
                self._fusion = numbered(fusion)
            except KeyError:
                raise DefinitionError(
                    f"FusionDefinition({fusion}): no definition has that id in this process"
                ) from None
        else:
            self._container = fusion

    def __enter__(self) -> FusionDefinition:
        super().__enter__()
        self._in_block = True
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._in_block = False
        super().__exit__(exc_type, exc, tb)
        if exc_type is None and self._container is not None:
            self._container.definition = self

    def definition(self) -> None:
        """Override to define the fusion (nvFuser's subclass style); run at first use."""
        raise MissingDefinitionError(
            "this FusionDefinition has no definition: fill it in a `with` block, or subclass "
            "it and override definition()"
        )

    def schedule(self) -> None:
        """nvFuser's user schedule hook: run after the definition; tunefuse applies none."""

    def _defined(self) -> None:
        if self._fusion is not None or self._in_block:
            return
        with self:
            self.definition()
        if type(self).schedule is not FusionDefinition.schedule:
            self.schedule()

    @property
    def fusion(self) -> Any:
        self._defined()
        return super().fusion

    def execute(self, inputs: Sequence[object], *args: Any, **options: Any) -> list:
        self._defined()
        return super().execute(inputs, *args, **options)

    def permute(self, arg: Tensor, dims: Sequence[int]) -> Tensor:
        """Legacy `fd.permute(t, dims)`."""
        return self.ops.permute(arg, dims)
