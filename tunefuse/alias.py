"""Alias analysis: which tensors are strided views of a buffer.

Movement ops are index maps (`indexing`); a chain of them from a buffer is a strided view
exactly when the composed map gives an affine offset. Views of inputs at a fusion's edges
then cost nothing (their outputs alias the input), and views at the output side become
views of the kernel's output buffer: bookend stripping on both sides, by one mechanism.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunefuse.arrays import contiguous_strides
from tunefuse.concretize import ConcreteFusion
from tunefuse.indexing import Index, Var, offset_of, source_index, var
from tunefuse.ops import GroupOp


@dataclass(frozen=True, slots=True)
class StridedView:
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int

    def __repr__(self) -> str:
        return f"view(shape={list(self.shape)}, strides={list(self.strides)}, offset={self.offset})"


def view_root(cf: ConcreteFusion, value: int) -> int:
    """The value a chain of movement ops starts from (the value itself if none)."""
    node = cf.fusion.producer(value)
    while node.op in GroupOp.VIEW:
        value = node.inputs[0]
        node = cf.fusion.producer(value)
    return value


def index_at_root(cf: ConcreteFusion, value: int, index: Index) -> tuple[int, Index]:
    """Map an index of `value` through its movement ops to an index of its view root."""
    node = cf.fusion.producer(value)
    while node.op in GroupOp.VIEW:
        src = node.inputs[0]
        index = source_index(
            node.op, node.attrs, index, cf.shape(src), cf.shape(value), cf.reshapes.get(value)
        )
        value, node = src, cf.fusion.producer(src)
    return value, index


def strided_view(
    cf: ConcreteFusion,
    value: int,
    root_strides: tuple[int, ...] | None = None,
    root_offset: int = 0,
) -> StridedView | None:
    """`value` as a strided view of its root's memory (contiguous unless `root_strides`
    says otherwise), or None when the view needs index arithmetic (a copy)."""
    shape = cf.shape(value)
    vars_ = tuple(var(Var(k, e)) for k, e in enumerate(shape))
    root, root_index = index_at_root(cf, value, vars_)
    strides = root_strides if root_strides is not None else contiguous_strides(cf.shape(root))
    offset = offset_of(root_index, strides, root_offset)
    if not offset.is_affine:
        return None
    view_strides = tuple(offset.coeff(Var(k, e)) if e != 1 else 0 for k, e in enumerate(shape))
    return StridedView(shape, view_strides, offset.const)
