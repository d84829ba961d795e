"""Per-op table of elementwise math: result-type rule and NumPy semantics.

The NumPy function receives operands already converted to the op's compute type (float for
half and bfloat16) and returns the result in compute type; callers round it to the result
dtype. The CUDA side of each op lives in `tunefuse.codegen.math`, keyed by the same kinds.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tunefuse.errors import DefinitionError
from tunefuse.ir.dtypes import DataType, promote_types, refuse_float8
from tunefuse.ir.ops import OpKind


class ResultType(enum.Enum):
    SAME = "same"  # the promoted operand type
    FLOATING = "floating"  # the promoted type, integral and bool promoted to Float
    BOOL = "bool"  # compare in the promoted type, return Bool
    LOGICAL = "logical"  # operands read as truth values, return Bool
    INTEGRAL = "integral"  # integral and bool operands only, the promoted type
    NUMERIC = "numeric"  # the promoted type, bool operands rejected
    INTEGER = "integer"  # integral operands only (bool rejected), the promoted type
    DIVISION = (
        "division"  # the promoted type, bool promoted to Float (nvFuser's div: ints stay ints)
    )


@dataclass(frozen=True, slots=True)
class ElementwiseRule:
    arity: int
    result: ResultType
    numpy: Callable[..., np.ndarray]
    # How many leading operands decide the promoted type (where: not the condition).
    first_promoted: int = 0


_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _erf_np(x: np.ndarray) -> np.ndarray:
    return _erf(x.astype(np.float64)).astype(x.dtype) if x.size else x


def _erfc_np(x: np.ndarray) -> np.ndarray:
    return _erfc(x.astype(np.float64)).astype(x.dtype) if x.size else x


def _relu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.where(x != x, x, np.zeros_like(x)))


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """nvFuser's div: C's division, truncating toward zero, on integers (x / 0 is 0, as
    fmod's x % 0 is; MIN / -1 wraps to MIN, as the kernel's tf_div does); true division
    otherwise."""
    if not np.issubdtype(np.result_type(a, b), np.integer):
        return np.divide(a, b)
    a, b = np.broadcast_arrays(a, b)
    with np.errstate(all="ignore"):
        safe = np.where((b == 0) | (b == -1), 1, b)
        q = a // safe
        q = np.where((a % safe != 0) & ((a < 0) != (safe < 0)), q + 1, q)
        out = np.where(b == 0, np.zeros_like(q), np.where(b == -1, np.negative(a), q)).astype(
            q.dtype
        )
    return out[()] if out.ndim == 0 else out


def _shift(kind: str):  # noqa: ANN202
    """Shifts with every amount defined (C leaves a negative or too wide one undefined): an
    amount outside [0, bits) shifts everything out, leaving 0, or the sign for an arithmetic
    right shift, as torch's CUDA kernels do."""

    def shift(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
        bits = a.dtype.itemsize * 8
        wide = (b < 0) | (b >= bits)
        amount = np.where(wide, 0, b).astype(a.dtype)
        with np.errstate(all="ignore"):
            if kind == "left":
                out = np.where(wide, 0, np.left_shift(a, amount))
            elif kind == "arithmetic":
                out = np.where(wide, np.where(a < 0, -1, 0), np.right_shift(a, amount))
            else:
                unsigned = a.astype(
                    np.dtype(f"u{a.dtype.itemsize}")
                )  # wraps: the two's complement bits
                out = np.where(
                    wide, 0, np.right_shift(unsigned, amount.astype(unsigned.dtype)).astype(a.dtype)
                )
        out = np.asarray(out).astype(a.dtype)
        return out[()] if out.ndim == 0 else out

    return shift


def _sigmoid(x: np.ndarray) -> np.ndarray:
    one = x.dtype.type(1)
    return one / (one + np.exp(-x))


def _gelu(x: np.ndarray) -> np.ndarray:
    half, one = x.dtype.type(0.5), x.dtype.type(1)
    return half * x * (one + _erf_np(x * x.dtype.type(1 / math.sqrt(2.0))))


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer) and np.any(b < 0):
        raise DefinitionError("pow: integers to negative integer powers are undefined")
    return np.power(a, b)


ELEMENTWISE: dict[OpKind, ElementwiseRule] = {
    OpKind.NEG: ElementwiseRule(1, ResultType.NUMERIC, np.negative),
    OpKind.ABS: ElementwiseRule(1, ResultType.SAME, np.abs),
    OpKind.EXP: ElementwiseRule(1, ResultType.FLOATING, np.exp),
    OpKind.EXP2: ElementwiseRule(1, ResultType.FLOATING, np.exp2),
    OpKind.LOG: ElementwiseRule(1, ResultType.FLOATING, np.log),
    OpKind.LOG2: ElementwiseRule(1, ResultType.FLOATING, np.log2),
    OpKind.LOG1P: ElementwiseRule(1, ResultType.FLOATING, np.log1p),
    OpKind.EXPM1: ElementwiseRule(1, ResultType.FLOATING, np.expm1),
    OpKind.SQRT: ElementwiseRule(1, ResultType.FLOATING, np.sqrt),
    OpKind.RSQRT: ElementwiseRule(1, ResultType.FLOATING, lambda x: x.dtype.type(1) / np.sqrt(x)),
    OpKind.RECIPROCAL: ElementwiseRule(1, ResultType.FLOATING, lambda x: x.dtype.type(1) / x),
    OpKind.SIN: ElementwiseRule(1, ResultType.FLOATING, np.sin),
    OpKind.COS: ElementwiseRule(1, ResultType.FLOATING, np.cos),
    OpKind.TAN: ElementwiseRule(1, ResultType.FLOATING, np.tan),
    OpKind.TANH: ElementwiseRule(1, ResultType.FLOATING, np.tanh),
    OpKind.SIGMOID: ElementwiseRule(1, ResultType.FLOATING, _sigmoid),
    OpKind.RELU: ElementwiseRule(1, ResultType.NUMERIC, _relu),
    OpKind.SILU: ElementwiseRule(1, ResultType.FLOATING, lambda x: x * _sigmoid(x)),
    OpKind.GELU: ElementwiseRule(1, ResultType.FLOATING, _gelu),
    OpKind.ERF: ElementwiseRule(1, ResultType.FLOATING, _erf_np),
    OpKind.ERFC: ElementwiseRule(1, ResultType.FLOATING, _erfc_np),
    OpKind.FLOOR: ElementwiseRule(1, ResultType.NUMERIC, np.floor),
    OpKind.CEIL: ElementwiseRule(1, ResultType.NUMERIC, np.ceil),
    OpKind.ROUND: ElementwiseRule(1, ResultType.NUMERIC, np.rint),
    OpKind.TRUNC: ElementwiseRule(1, ResultType.NUMERIC, np.trunc),
    OpKind.SIGN: ElementwiseRule(1, ResultType.NUMERIC, np.sign),
    OpKind.ISNAN: ElementwiseRule(1, ResultType.BOOL, np.isnan),
    OpKind.ISINF: ElementwiseRule(1, ResultType.BOOL, np.isinf),
    OpKind.ISFINITE: ElementwiseRule(1, ResultType.BOOL, np.isfinite),
    OpKind.LOGICAL_NOT: ElementwiseRule(1, ResultType.LOGICAL, np.logical_not),
    OpKind.BITWISE_NOT: ElementwiseRule(1, ResultType.INTEGRAL, np.invert),
    OpKind.SIGNBIT: ElementwiseRule(1, ResultType.BOOL, np.signbit),
    OpKind.ADD: ElementwiseRule(2, ResultType.SAME, np.add),
    OpKind.SUB: ElementwiseRule(2, ResultType.NUMERIC, np.subtract),
    OpKind.MUL: ElementwiseRule(2, ResultType.SAME, np.multiply),
    OpKind.DIV: ElementwiseRule(2, ResultType.DIVISION, _div),
    OpKind.TRUEDIV: ElementwiseRule(2, ResultType.FLOATING, np.divide),
    OpKind.FMOD: ElementwiseRule(2, ResultType.NUMERIC, np.fmod),
    OpKind.REMAINDER: ElementwiseRule(2, ResultType.NUMERIC, np.remainder),
    OpKind.POW: ElementwiseRule(2, ResultType.NUMERIC, _pow),
    OpKind.MAXIMUM: ElementwiseRule(2, ResultType.SAME, np.maximum),
    OpKind.MINIMUM: ElementwiseRule(2, ResultType.SAME, np.minimum),
    OpKind.ATAN2: ElementwiseRule(2, ResultType.FLOATING, np.arctan2),
    OpKind.EQ: ElementwiseRule(2, ResultType.BOOL, np.equal),
    OpKind.NE: ElementwiseRule(2, ResultType.BOOL, np.not_equal),
    OpKind.LT: ElementwiseRule(2, ResultType.BOOL, np.less),
    OpKind.LE: ElementwiseRule(2, ResultType.BOOL, np.less_equal),
    OpKind.GT: ElementwiseRule(2, ResultType.BOOL, np.greater),
    OpKind.GE: ElementwiseRule(2, ResultType.BOOL, np.greater_equal),
    OpKind.LOGICAL_AND: ElementwiseRule(2, ResultType.LOGICAL, np.logical_and),
    OpKind.LOGICAL_OR: ElementwiseRule(2, ResultType.LOGICAL, np.logical_or),
    OpKind.BITWISE_AND: ElementwiseRule(2, ResultType.INTEGRAL, np.bitwise_and),
    OpKind.BITWISE_OR: ElementwiseRule(2, ResultType.INTEGRAL, np.bitwise_or),
    OpKind.BITWISE_XOR: ElementwiseRule(2, ResultType.INTEGRAL, np.bitwise_xor),
    OpKind.BITWISE_LEFT_SHIFT: ElementwiseRule(2, ResultType.INTEGER, _shift("left")),
    OpKind.BITWISE_RIGHT_SHIFT: ElementwiseRule(2, ResultType.INTEGER, _shift("arithmetic")),
    OpKind.LOGICAL_RIGHT_SHIFT: ElementwiseRule(2, ResultType.INTEGER, _shift("logical")),
    OpKind.GCD: ElementwiseRule(2, ResultType.INTEGER, np.gcd),
    # The next representable value after a toward b: in float and double (a half or bfloat16
    # step is not a float step; refused by name).
    OpKind.NEXTAFTER: ElementwiseRule(2, ResultType.FLOATING, np.nextafter),
    # where(condition, a, b): the condition is read as a truth value.
    OpKind.WHERE: ElementwiseRule(3, ResultType.SAME, np.where, first_promoted=1),
    # clamp(x, min, max): torch.clamp, NaN propagates.
    OpKind.CLAMP: ElementwiseRule(
        3, ResultType.NUMERIC, lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi)
    ),
    # lerp(start, end, weight) = start + weight * (end - start)
    OpKind.LERP: ElementwiseRule(3, ResultType.FLOATING, lambda a, b, w: a + w * (b - a)),
    # addcmul(x, t1, t2, value) = x + value * t1 * t2
    OpKind.ADDCMUL: ElementwiseRule(4, ResultType.NUMERIC, lambda x, a, b, v: x + v * a * b),
}


@dataclass(frozen=True, slots=True)
class ElementwiseTypes:
    """Result dtype, and the dtype operands are converted to before computing."""

    result: DataType
    operand: DataType


def elementwise_types(
    op: OpKind, tensor_dtypes: list[DataType | None], scalar_dtypes: list[DataType | None]
) -> ElementwiseTypes:
    """Types of an elementwise op; each position holds its operand's dtype in one of the two
    lists (tensor or scalar) and None in the other."""
    rule = ELEMENTWISE[op]
    first = rule.first_promoted
    tensors = [d for d in tensor_dtypes[first:] if d is not None]
    scalars = [d for d in scalar_dtypes[first:] if d is not None]
    computed = [d for d in [*tensor_dtypes, *scalar_dtypes] if d is not None]
    if op is OpKind.WHERE:  # a selection: its branches may be 8-bit floats, its condition not
        computed = [d for d in [tensor_dtypes[0], scalar_dtypes[0]] if d is not None]
    eight = [d for d in computed if d.is_float8]
    if eight:
        refuse_float8(eight[0], f"an operand of {op.value}")
    promoted = promote_types(tensors, scalars)
    if rule.result is ResultType.BOOL:
        return ElementwiseTypes(DataType.Bool, promoted.compute)
    if rule.result is ResultType.LOGICAL:
        return ElementwiseTypes(DataType.Bool, DataType.Bool)
    if rule.result is ResultType.INTEGRAL:
        if promoted.is_floating:
            raise DefinitionError(
                f"{op.value}: needs integral or bool operands, got {promoted.value}"
            )
        return ElementwiseTypes(promoted, promoted)
    if rule.result is ResultType.INTEGER:
        if not promoted.is_integral or promoted.is_bool:
            raise DefinitionError(f"{op.value}: needs integer operands, got {promoted.value}")
        return ElementwiseTypes(promoted, promoted)
    if op is OpKind.NEXTAFTER and promoted in (DataType.Half, DataType.BFloat16):
        raise DefinitionError(
            f"nextafter: steps of {promoted.value} are not supported; cast to float first"
        )
    if rule.result is ResultType.NUMERIC and promoted.is_bool and op is not OpKind.ADDCMUL:
        raise DefinitionError(f"{op.value}: bool operands are not supported; cast them first")
    if rule.result is ResultType.DIVISION and promoted.is_bool:
        promoted = DataType.Float
    if rule.result is ResultType.FLOATING and not promoted.is_floating:
        promoted = DataType.Float
    return ElementwiseTypes(promoted, promoted.compute)
