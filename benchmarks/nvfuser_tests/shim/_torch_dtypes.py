"""Harness helper (nvFuser keeps it in nvfuser.pytorch_utils): torch dtype -> DataType."""

import torch

from tunefuse import DataType

_MAP = {
    torch.float64: DataType.Double,
    torch.float32: DataType.Float,
    torch.float16: DataType.Half,
    torch.bfloat16: DataType.BFloat16,
    torch.int64: DataType.Int,
    torch.int32: DataType.Int32,
    torch.bool: DataType.Bool,
}
for _t, _n in [
    ("float8_e4m3fn", "Float8_e4m3fn"),
    ("float8_e5m2", "Float8_e5m2"),
    ("float8_e8m0fnu", "Float8_e8m0fnu"),
    ("complex64", "ComplexFloat"),
    ("complex128", "ComplexDouble"),
]:
    if hasattr(torch, _t) and hasattr(DataType, _n):
        _MAP[getattr(torch, _t)] = getattr(DataType, _n)


def torch_dtype_to_nvfuser_dtype(dtype):
    return _MAP[dtype]
