import numpy as np
import pytest

from tunefuse import DataType
from tunefuse.errors import DefinitionError
from tunefuse.ir.dtypes import from_any_dtype, promote_types, python_scalar_dtype

F, D, H, B, I, I32, BO = (  # noqa: E741 - the dtypes' initials
    DataType.Float,
    DataType.Double,
    DataType.Half,
    DataType.BFloat16,
    DataType.Int,
    DataType.Int32,
    DataType.Bool,
)


@pytest.mark.parametrize(
    "tensors, scalars, expected",
    [
        ([F, F], [], F),
        ([F, D], [], D),
        ([H, B], [], F),  # torch.promote_types(half, bfloat16) == float
        ([H, H], [D], H),  # a Double scalar does not widen a Half tensor
        ([I], [D], F),  # int tensor * python float -> default float
        ([I32, I], [], I),
        ([BO], [I], I),
        ([BO, BO], [], BO),
        ([I32], [I], I32),  # same category: the tensor wins
        ([], [D, I], D),
    ],
)
def test_promotion_matches_torch(tensors, scalars, expected):
    assert promote_types(tensors, scalars) is expected


def test_numpy_and_torch_names():
    assert from_any_dtype(np.float16) is H
    assert from_any_dtype(DataType.BFloat16.numpy) is B
    assert from_any_dtype("torch.bfloat16") is B
    assert (
        python_scalar_dtype(0.5) is D
        and python_scalar_dtype(2) is I
        and python_scalar_dtype(True) is BO
    )
    with pytest.raises(DefinitionError, match="complex"):
        from_any_dtype(np.complex64)
    with pytest.raises(DefinitionError, match="unknown dtype 'float8'"):
        DataType.parse("float8")


def test_half_and_bfloat16_compute_in_float():
    assert H.compute is F and B.compute is F and D.compute is D and I.compute is I
