"""One closed enum of op kinds, their named groups, and each op's attrs payload.

An op's arguments that are values (tensors, scalars) are the node's inputs; everything else
is a field of its frozen attrs dataclass. A shape entry that comes from a scalar value is a
`ScalarRef` to the position of that scalar in the node's inputs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Union

from tunefuse.ir.dtypes import DataType


class OpKind(enum.Enum):
    # inputs and constants
    DEFINE_TENSOR = "define_tensor"
    DEFINE_SCALAR = "define_scalar"
    CONSTANT = "constant"
    # unary
    NEG = "neg"
    ABS = "abs"
    EXP = "exp"
    EXP2 = "exp2"
    LOG = "log"
    LOG2 = "log2"
    LOG1P = "log1p"
    EXPM1 = "expm1"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    RECIPROCAL = "reciprocal"
    SIN = "sin"
    COS = "cos"
    TAN = "tan"
    TANH = "tanh"
    SIGMOID = "sigmoid"
    RELU = "relu"
    SILU = "silu"
    GELU = "gelu"
    ERF = "erf"
    ERFC = "erfc"
    FLOOR = "floor"
    CEIL = "ceil"
    ROUND = "round"
    TRUNC = "trunc"
    SIGN = "sign"
    ISNAN = "isnan"
    ISINF = "isinf"
    ISFINITE = "isfinite"
    LOGICAL_NOT = "logical_not"
    BITWISE_NOT = "bitwise_not"
    SIGNBIT = "signbit"
    # binary
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    TRUEDIV = "truediv"
    FMOD = "fmod"
    REMAINDER = "remainder"
    POW = "pow"
    MAXIMUM = "maximum"
    MINIMUM = "minimum"
    ATAN2 = "atan2"
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    LOGICAL_AND = "logical_and"
    LOGICAL_OR = "logical_or"
    BITWISE_AND = "bitwise_and"
    BITWISE_OR = "bitwise_or"
    BITWISE_XOR = "bitwise_xor"
    BITWISE_LEFT_SHIFT = "bitwise_left_shift"
    BITWISE_RIGHT_SHIFT = "bitwise_right_shift"  # arithmetic: the sign bit fills
    LOGICAL_RIGHT_SHIFT = "logical_right_shift"  # zeros fill
    GCD = "gcd"
    NEXTAFTER = "nextafter"
    # ternary (and addcmul, whose fourth operand is a scalar)
    WHERE = "where"
    CLAMP = "clamp"
    LERP = "lerp"
    ADDCMUL = "addcmul"
    CAST = "cast"
    # reductions
    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"
    MEAN = "mean"
    VAR = "var"
    VAR_MEAN = "var_mean"
    # movement: views of their source wherever strides allow
    BROADCAST_IN_DIM = "broadcast_in_dim"
    BROADCAST = "broadcast"
    EXPAND = "expand"
    RESHAPE = "reshape"
    PERMUTE = "permute"
    SQUEEZE = "squeeze"
    UNSQUEEZE = "unsqueeze"
    SLICE = "slice"
    # data movement that writes new memory
    PAD = "pad"
    CAT = "cat"
    SET = "set"
    SEGMENT_SET = "segment_set"
    # data-dependent reads: an index tensor picks elements of a table along one dim
    INDEX_SELECT = "index_select"
    GATHER = "gather"
    # creation
    FULL = "full"
    IOTA = "iota"
    # random numbers: Philox over each element's position, from a (seed, offset) pair
    UNIFORM = "uniform"
    NORMAL = "normal"
    RNG_STATE = "rng_state"  # (seed, offset) drawn from the process's stream at each call
    # shape query: a tensor's extent as an Int scalar
    SIZE = "size"

    @property
    def is_input(self) -> bool:
        return self in (OpKind.DEFINE_TENSOR, OpKind.DEFINE_SCALAR)

    @property
    def is_elementwise(self) -> bool:
        return self in GroupOp.ELEMENTWISE

    @property
    def is_reduction(self) -> bool:
        return self in GroupOp.REDUCTION

    @property
    def is_view(self) -> bool:
        return self in GroupOp.VIEW

    def __repr__(self) -> str:
        return f"OpKind.{self.name}"


class GroupOp:
    """Named groups of op kinds; passes ask a group, never compare strings."""

    UNARY = frozenset(
        OpKind[n]
        for n in (
            "NEG ABS EXP EXP2 LOG LOG2 LOG1P EXPM1 SQRT RSQRT RECIPROCAL SIN COS TAN TANH "
            "SIGMOID RELU SILU GELU ERF ERFC FLOOR CEIL ROUND TRUNC SIGN ISNAN ISINF ISFINITE "
            "LOGICAL_NOT BITWISE_NOT SIGNBIT"
        ).split()
    )
    BINARY = frozenset(
        OpKind[n]
        for n in (
            "ADD SUB MUL DIV TRUEDIV FMOD REMAINDER POW MAXIMUM MINIMUM ATAN2 EQ NE LT LE GT GE "
            "LOGICAL_AND LOGICAL_OR BITWISE_AND BITWISE_OR BITWISE_XOR BITWISE_LEFT_SHIFT "
            "BITWISE_RIGHT_SHIFT LOGICAL_RIGHT_SHIFT GCD NEXTAFTER"
        ).split()
    )
    TERNARY = frozenset({OpKind.WHERE, OpKind.CLAMP, OpKind.LERP, OpKind.ADDCMUL})
    # Elementwise ops: each output element depends on the same element of each operand.
    ELEMENTWISE = UNARY | BINARY | TERNARY | {OpKind.CAST}
    REDUCTION = frozenset(
        {OpKind.SUM, OpKind.PROD, OpKind.MAX, OpKind.MIN, OpKind.MEAN, OpKind.VAR, OpKind.VAR_MEAN}
    )
    VIEW = frozenset(
        {
            OpKind.BROADCAST_IN_DIM,
            OpKind.BROADCAST,
            OpKind.EXPAND,
            OpKind.RESHAPE,
            OpKind.PERMUTE,
            OpKind.SQUEEZE,
            OpKind.UNSQUEEZE,
            OpKind.SLICE,
        }
    )
    COPY = frozenset({OpKind.SET, OpKind.SEGMENT_SET})
    # Reads whose position comes from another tensor's values: the table (operand 0) is read
    # from memory (a buffer), at an index checked against its extent along `dim`.
    INDEXING = frozenset({OpKind.INDEX_SELECT, OpKind.GATHER})
    CREATION = frozenset({OpKind.FULL, OpKind.IOTA})
    # Operands: (a, b, seed, offset, *shape scalars); uniform in [a, b), normal(mean=a, std=b).
    RANDOM = frozenset({OpKind.UNIFORM, OpKind.NORMAL})
    INPUT = frozenset({OpKind.DEFINE_TENSOR, OpKind.DEFINE_SCALAR})


@dataclass(frozen=True, slots=True)
class ScalarRef:
    """A shape entry taken from a scalar value: the index of that scalar in node.inputs."""

    index: int


Dim = Union[int, ScalarRef]


@dataclass(frozen=True, slots=True)
class NoAttrs:
    pass


@dataclass(frozen=True, slots=True)
class TensorInputAttrs:
    """`shape` uses -1 for a symbolic extent and 1 for a broadcast one; `contiguity` has
    None for broadcast dims; `stride_order[i]` is dim i's rank in stride order (as nvFuser:
    the largest number is the outermost dim), None for row-major."""

    shape: tuple[int, ...]
    contiguity: tuple[Union[bool, None], ...]
    dtype: DataType
    stride_order: Union[tuple[int, ...], None] = None


@dataclass(frozen=True, slots=True)
class ScalarInputAttrs:
    dtype: DataType


@dataclass(frozen=True, slots=True)
class ConstantAttrs:
    value: Union[bool, int, float]
    dtype: DataType


@dataclass(frozen=True, slots=True)
class CastAttrs:
    dtype: DataType


@dataclass(frozen=True, slots=True)
class ReductionAttrs:
    """`dims` are normalized (non-negative, sorted, unique); `correction` is for var."""

    dims: tuple[int, ...]
    keepdim: bool = False
    correction: int = 0
    dtype: Union[DataType, None] = None


@dataclass(frozen=True, slots=True)
class BroadcastInDimAttrs:
    shape: tuple[Dim, ...]
    broadcast_dims: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class BroadcastAttrs:
    is_broadcast_dim: tuple[bool, ...]


@dataclass(frozen=True, slots=True)
class ShapeAttrs:
    """A target shape (expand, reshape; -1 keeps / infers the extent)."""

    shape: tuple[Dim, ...]


@dataclass(frozen=True, slots=True)
class PermuteAttrs:
    dims: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DimsAttrs:
    dims: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DimAttrs:
    dim: int


@dataclass(frozen=True, slots=True)
class SliceAttrs:
    start_indices: tuple[int, ...]
    end_indices: tuple[int, ...]
    strides: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PadAttrs:
    """`pad_widths` as torch.nn.functional.pad: (left, right) pairs from the last dim."""

    pad_widths: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class FullAttrs:
    shape: tuple[Dim, ...]
    dtype: DataType


@dataclass(frozen=True, slots=True)
class IotaAttrs:
    dtype: DataType


OpAttrs = Union[
    NoAttrs,
    TensorInputAttrs,
    ScalarInputAttrs,
    ConstantAttrs,
    CastAttrs,
    ReductionAttrs,
    BroadcastInDimAttrs,
    BroadcastAttrs,
    ShapeAttrs,
    PermuteAttrs,
    DimsAttrs,
    DimAttrs,
    SliceAttrs,
    PadAttrs,
    FullAttrs,
    IotaAttrs,
]

ATTRS_CLASS: dict[OpKind, type] = {
    OpKind.DEFINE_TENSOR: TensorInputAttrs,
    OpKind.DEFINE_SCALAR: ScalarInputAttrs,
    OpKind.CONSTANT: ConstantAttrs,
    OpKind.CAST: CastAttrs,
    **{k: ReductionAttrs for k in GroupOp.REDUCTION},
    OpKind.BROADCAST_IN_DIM: BroadcastInDimAttrs,
    OpKind.BROADCAST: BroadcastAttrs,
    OpKind.EXPAND: ShapeAttrs,
    OpKind.RESHAPE: ShapeAttrs,
    OpKind.PERMUTE: PermuteAttrs,
    OpKind.SQUEEZE: DimsAttrs,
    OpKind.UNSQUEEZE: DimAttrs,
    OpKind.SLICE: SliceAttrs,
    OpKind.PAD: PadAttrs,
    OpKind.CAT: DimAttrs,
    OpKind.INDEX_SELECT: DimAttrs,
    OpKind.GATHER: DimAttrs,
    OpKind.FULL: FullAttrs,
    OpKind.IOTA: IotaAttrs,
    OpKind.UNIFORM: FullAttrs,
    OpKind.NORMAL: FullAttrs,
    OpKind.SIZE: DimAttrs,
}
"""The attrs class of every op kind; kinds not listed take `NoAttrs`."""


def attrs_class(op: OpKind) -> type:
    return ATTRS_CLASS.get(op, NoAttrs)
