"""What one kernel computes: expressions over an iteration space, loads and stores.

A segment evaluates, for every point of its iteration space, expressions built from loads
(a buffer read at an index-dependent offset), scalar arguments, constants, elementwise ops
and reductions over the segment's reduction dims. Everything here is frozen and hashable:
equal structure means equal generated code.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Union

from tunefuse.ir.dtypes import DataType
from tunefuse.ir.ops import OpKind
from tunefuse.planning.indexing import Affine


@dataclass(frozen=True, slots=True)
class ELoad:
    load: int  # index into Segment.loads


@dataclass(frozen=True, slots=True)
class EScalar:
    arg: int  # index into Segment.scalars


@dataclass(frozen=True, slots=True)
class EConst:
    value: Union[bool, int, float]
    dtype: DataType


@dataclass(frozen=True, slots=True)
class EIndex:
    """The integer value of an index expression (iota)."""

    index: Affine


@dataclass(frozen=True, slots=True)
class EOp:
    """An elementwise op (or cast): operands converted to `operand_dtype`, computed in its
    compute type, result rounded to `dtype`."""

    op: OpKind
    operands: tuple[Expr, ...]
    dtype: DataType
    operand_dtype: DataType


@dataclass(frozen=True, slots=True)
class EReduce:
    """A reduction of `operand` over the segment's reduction dims. `op` is one of SUM, PROD,
    MAX, MIN, MEAN, VAR, VAR_MEAN; `output` picks var (0) or mean (1) of VAR_MEAN; `value`
    is the fusion value it computes (what a plan materializes to run it as a kernel of its
    own)."""

    op: OpKind
    operand: Expr
    dtype: DataType
    correction: int
    output: int
    value: int


@dataclass(frozen=True, slots=True)
class EGuard:
    """`then` where every `lo <= index < hi` holds, else `other` (pad, cat)."""

    conditions: tuple[tuple[Affine, int, int], ...]
    then: Expr
    other: Expr
    dtype: DataType


@dataclass(frozen=True, slots=True)
class EGather:
    """Segment.gathers[gather] read at its base offset plus `index` times its stride, where
    0 <= index < its extent; elsewhere nothing is read, the value is 0 and the kernel reports
    the gather's fusion value through its index-error word (index_select, gather)."""

    gather: int
    index: Expr
    dtype: DataType


Expr = Union[ELoad, EScalar, EConst, EIndex, EOp, EReduce, EGuard, EGather]


def children(e: Expr) -> tuple[Expr, ...]:
    """The expressions `e` reads directly (a reduction's operand included)."""
    if isinstance(e, EOp):
        return e.operands
    if isinstance(e, EReduce):
        return (e.operand,)
    if isinstance(e, EGuard):
        return (e.then, e.other)
    if isinstance(e, EGather):
        return (e.index,)
    return ()


def expr_dtype(e: Expr, loads: tuple, scalars: tuple) -> DataType:
    if isinstance(e, ELoad):
        return loads[e.load].dtype
    if isinstance(e, EScalar):
        return scalars[e.arg].dtype
    if isinstance(e, EIndex):
        return DataType.Int
    return e.dtype  # type: ignore[union-attr]


class SchedulerKind(enum.Enum):
    POINTWISE = "pointwise"
    REDUCTION = "reduction"
    NORMALIZATION = "normalization"
    TRANSPOSE = "transpose"


class BufferKind(enum.Enum):
    INPUT = "input"
    OUTPUT = "output"
    INTERMEDIATE = "intermediate"


@dataclass(frozen=True, slots=True)
class Buffer:
    """Memory a kernel reads or writes. Inputs are the caller's; outputs and intermediates
    are allocated contiguously with `shape`."""

    id: int
    kind: BufferKind
    dtype: DataType
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    value: int  # the fusion value it holds
    input_index: int | None = None  # position among the fusion's inputs
    out_index: int | None = None  # position in execute(out=[...]): a preallocated output
    alignment: int = 16  # bytes the data pointer is known to be aligned to (at most 16)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True, slots=True)
class Load:
    buffer: int
    dtype: DataType
    offset: Affine  # element offset, over the segment's iteration variables


@dataclass(frozen=True, slots=True)
class GatherLoad:
    """A data-dependent read: `offset` places the table's element with index 0 along the
    gathered dim; an index i in [0, extent) adds i * stride to it."""

    buffer: int
    dtype: DataType
    offset: Affine
    extent: int
    stride: int
    value: int  # the fusion value (index_select, gather) it computes: named in the error


@dataclass(frozen=True, slots=True)
class Store:
    buffer: int
    dtype: DataType
    offset: Affine
    expr: Expr
    value: int  # the fusion value stored
    reduced: bool  # stored once per outer index (a reduction result)


@dataclass(frozen=True, slots=True)
class ColumnPartial:
    """A sum over the rows of a normalization's 2-d space [rows, row length], taken in parts
    by the kernel that holds each row (nvFuser's inner-outer persistent form): the row group
    g (rows g, g + G, g + 2G, ...; G = Segment.column_groups) sums `operand` into
    buffer[g * row length + column], an fp32/fp64 [G, row length] intermediate that a small
    reduction kernel then sums over g. Layernorm's backward reads dy and x once for dx, dw
    and db this way, where a column kernel of its own would read them again."""

    buffer: int
    dtype: DataType  # the partial sums' type (the sum's accumulator type)
    operand: Expr  # over the segment's space, reads no reduction
    value: int  # the fusion value (a column sum) whose partials these are


@dataclass(frozen=True, slots=True)
class ScalarArg:
    value: int  # fusion value id of the scalar (an input or host-computed)
    dtype: DataType
