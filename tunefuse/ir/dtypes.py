"""Data types of fusion values and PyTorch's type-promotion rules.

Half and bfloat16 are storage types: every op computes in float and rounds its result to the
value's declared dtype, which is exactly what the generated CUDA does.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import NoReturn

import ml_dtypes
import numpy as np

from tunefuse.errors import DefinitionError


class DataType(enum.Enum):
    """Element type of a tensor or scalar. The value is the canonical (JSON) spelling."""

    Double = "double"
    Float = "float"
    Half = "half"
    BFloat16 = "bfloat16"
    # 8-bit floats: stored, read and written, cast to and from; not computed with (as torch,
    # which promotes no arithmetic on them). e4m3fn has no infinity: what rounds past 448 is
    # NaN; e5m2 rounds past 57344 to infinity.
    Float8_e4m3fn = "float8_e4m3fn"
    Float8_e5m2 = "float8_e5m2"
    Int = "int64"
    Int32 = "int32"
    Bool = "bool"

    # nvFuser's DataType.Null ("no dtype given": a reduction's dtype=, a define_vector's) is
    # set to None below, outside the members, so that `for d in DataType` stays the types.

    # Category and width drive promotion: bool < integral < floating.
    @property
    def is_floating(self) -> bool:
        return self in _FLOATING

    @property
    def is_integral(self) -> bool:
        return self in (DataType.Int, DataType.Int32)

    @property
    def is_bool(self) -> bool:
        return self is DataType.Bool

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self]

    @property
    def numpy(self) -> np.dtype:
        """The NumPy dtype that stores this type (bfloat16 through ml-dtypes)."""
        return _NUMPY[self]

    @property
    def compute(self) -> DataType:
        """The type arithmetic happens in: float for half, bfloat16 and the 8-bit floats,
        else itself."""
        return DataType.Float if self in _NARROW_FLOATS else self

    @property
    def is_float8(self) -> bool:
        return self in (DataType.Float8_e4m3fn, DataType.Float8_e5m2)

    @property
    def ml_dtypes(self) -> bool:
        """Stored in NumPy through ml-dtypes: no NumPy (or CuPy) type of its own."""
        return self is DataType.BFloat16 or self.is_float8

    @property
    def cuda(self) -> str:
        """The C++ type name used by generated kernels (see codegen's preamble)."""
        return _CUDA[self]

    @property
    def tolerance(self) -> tuple[float, float]:
        """(rtol, atol) within which two correct results of one computation stored in this
        type may differ (another summation order rounds differently): a few of its ulps."""
        return _TOLERANCE[self]

    def __repr__(self) -> str:
        return f"DataType.{self.name}"

    @classmethod
    def parse(cls, spelling: str) -> DataType:
        try:
            return cls(spelling)
        except ValueError:
            known = ", ".join(d.value for d in cls)
            raise DefinitionError(f"unknown dtype {spelling!r}; expected one of {known}") from None


DataType.Null = None  # type: ignore[attr-defined, misc]  # nvFuser's "no dtype given"


class RefusedDataType:
    """An nvFuser dtype tunefuse does not build: it exists, so that a definition naming it
    loads, and any use of it is refused by name (a clear error, never a wrong answer)."""

    def __init__(self, name: str, why: str) -> None:
        self.__dict__.update(_name=name, _why=why)

    def refuse(self) -> NoReturn:
        raise DefinitionError(f"DataType.{self._name} is not supported by tunefuse: {self._why}")

    def __repr__(self) -> str:
        return f"DataType.{self._name} (not supported)"

    def __getattr__(self, attr: str) -> NoReturn:
        self.refuse()


_COMPLEX = "complex numbers are not built (no complex arithmetic in the kernels); use real and imaginary parts"
_NARROW = (
    "this 8-bit or 4-bit float is not built (Float8_e4m3fn and Float8_e5m2 are); "
    "cast to and from it outside the fusion"
)
for _name, _why in (
    ("ComplexFloat", _COMPLEX),
    ("ComplexDouble", _COMPLEX),
    ("Float8_e8m0fnu", _NARROW),
    ("Float4_e2m1fn", _NARROW),
):
    setattr(DataType, _name, RefusedDataType(_name, _why))

_FLOATING = (
    DataType.Double,
    DataType.Float,
    DataType.Half,
    DataType.BFloat16,
    DataType.Float8_e4m3fn,
    DataType.Float8_e5m2,
)
_NARROW_FLOATS = (DataType.Half, DataType.BFloat16, DataType.Float8_e4m3fn, DataType.Float8_e5m2)
_ITEMSIZE = {
    DataType.Double: 8,
    DataType.Float: 4,
    DataType.Half: 2,
    DataType.BFloat16: 2,
    DataType.Float8_e4m3fn: 1,
    DataType.Float8_e5m2: 1,
    DataType.Int: 8,
    DataType.Int32: 4,
    DataType.Bool: 1,
}
_NUMPY = {
    DataType.Double: np.dtype(np.float64),
    DataType.Float: np.dtype(np.float32),
    DataType.Half: np.dtype(np.float16),
    DataType.BFloat16: np.dtype(ml_dtypes.bfloat16),
    DataType.Float8_e4m3fn: np.dtype(ml_dtypes.float8_e4m3fn),
    DataType.Float8_e5m2: np.dtype(ml_dtypes.float8_e5m2),
    DataType.Int: np.dtype(np.int64),
    DataType.Int32: np.dtype(np.int32),
    DataType.Bool: np.dtype(np.bool_),
}
_CUDA = {
    DataType.Double: "double",
    DataType.Float: "float",
    DataType.Half: "tf_half",
    DataType.BFloat16: "tf_bf16",
    DataType.Float8_e4m3fn: "tf_fp8e4m3",
    DataType.Float8_e5m2: "tf_fp8e5m2",
    DataType.Int: "long long",
    DataType.Int32: "int",
    DataType.Bool: "bool",
}
_FROM_NUMPY = {v: k for k, v in _NUMPY.items()}


def from_numpy_dtype(dtype: np.dtype | str) -> DataType:
    """DataType of a NumPy (or ml-dtypes) dtype; raises naming the dtype when unsupported."""
    dt = np.dtype(dtype)
    try:
        return _FROM_NUMPY[dt]
    except KeyError:
        raise DefinitionError(f"unsupported array dtype {dt}") from None


_TORCH_NAMES = {
    "torch.float64": DataType.Double,
    "torch.float32": DataType.Float,
    "torch.float16": DataType.Half,
    "torch.bfloat16": DataType.BFloat16,
    "torch.float8_e4m3fn": DataType.Float8_e4m3fn,
    "torch.float8_e5m2": DataType.Float8_e5m2,
    "torch.int64": DataType.Int,
    "torch.int32": DataType.Int32,
    "torch.bool": DataType.Bool,
}


def torch_dtype_name(dtype: DataType) -> str:
    """The name of a DataType's torch dtype (`getattr(torch, name)`): the one table both ways."""
    for name, dt in _TORCH_NAMES.items():
        if dt is dtype:
            return name.removeprefix("torch.")
    raise DefinitionError(
        f"{dtype!r} has no torch dtype"
    )  # pragma: no cover - every DataType has one


def from_any_dtype(dtype: object) -> DataType:
    """DataType of a NumPy, ml-dtypes, torch or CuPy dtype, without importing torch."""
    if isinstance(dtype, DataType):
        return dtype
    if isinstance(dtype, RefusedDataType):
        dtype.refuse()
    name = str(dtype)
    if name in _TORCH_NAMES:
        return _TORCH_NAMES[name]
    if "complex" in name:  # torch.complex64, numpy's complex128, ...
        shown = name if name.startswith("torch.") else np.dtype(dtype).name  # type: ignore[call-overload]
        raise DefinitionError(f"the dtype {shown} is not supported by tunefuse: {_COMPLEX}")
    return from_numpy_dtype(dtype)  # type: ignore[arg-type]


def python_scalar_dtype(value: object) -> DataType:
    """nvFuser's mapping of Python scalars: bool -> Bool, int -> Int, float -> Double."""
    if isinstance(value, (bool, np.bool_)):
        return DataType.Bool
    if isinstance(value, (int, np.integer)):
        return DataType.Int
    if isinstance(value, (float, np.floating)):
        return DataType.Double
    if isinstance(value, (complex, np.complexfloating)):
        raise DefinitionError(
            f"the complex scalar {value!r} is not supported by tunefuse: {_COMPLEX}"
        )
    raise DefinitionError(f"unsupported scalar {value!r} of type {type(value).__name__}")


def _category(dt: DataType) -> int:
    return 2 if dt.is_floating else 1 if dt.is_integral else 0


def _promote_pair(a: DataType, b: DataType) -> DataType:
    if a is b:
        return a
    ca, cb = _category(a), _category(b)
    if ca != cb:
        return a if ca > cb else b
    if {a, b} == {DataType.Half, DataType.BFloat16}:
        return DataType.Float
    return a if a.itemsize >= b.itemsize else b


def promote_types(
    tensor_dtypes: Iterable[DataType], scalar_dtypes: Iterable[DataType] = ()
) -> DataType:
    """PyTorch's result type: scalars only count when they are of a higher category than
    every tensor (a Double scalar times a Half tensor stays Half; a float scalar times an
    Int tensor gives the default float type, Float). An 8-bit float promotes with nothing
    but itself (torch refuses to as well)."""
    tensors = list(tensor_dtypes)
    scalars = list(scalar_dtypes)
    eight = [d for d in tensors + scalars if d.is_float8]
    if eight and len(set(tensors + scalars)) > 1:
        refuse_float8(
            eight[0],
            "mixed with "
            + ", ".join(sorted({d.value for d in tensors + scalars} - {eight[0].value})),
        )
    if not tensors:
        result = scalars[0]
        for dt in scalars[1:]:
            result = _promote_pair(result, dt)
        return result
    result = tensors[0]
    for dt in tensors[1:]:
        result = _promote_pair(result, dt)
    top_scalar = max((_category(s) for s in scalars), default=-1)
    if top_scalar > _category(result):
        result = DataType.Float if top_scalar == 2 else DataType.Int
    return result


def refuse_float8(dtype: DataType, what: str) -> NoReturn:
    raise DefinitionError(
        f"{dtype!r} is stored and cast, not computed with ({what}): cast it to Float first"
    )


_TOLERANCE = {
    DataType.Double: (1e-9, 1e-9),
    DataType.Float: (1e-3, 1e-3),
    DataType.Half: (4e-3, 4e-3),
    DataType.BFloat16: (2e-2, 2e-2),
    DataType.Float8_e4m3fn: (1.25e-1, 1.25e-1),  # 3 mantissa bits
    DataType.Float8_e5m2: (2.5e-1, 2.5e-1),
    DataType.Int: (0.0, 0.0),
    DataType.Int32: (0.0, 0.0),
    DataType.Bool: (0.0, 0.0),
}
