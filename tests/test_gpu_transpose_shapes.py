"""GPU: transposes of skinny and tall inputs (the pointwise kernel, looping over short
input rows, 16-tiles, more rows of tiles than a grid's y holds) equal torch's, bit for bit."""

import pytest
from fusion_zoo import build, transpose2d

from tunefuse import DataType

pytestmark = pytest.mark.gpu

TORCH = {DataType.Float: "float32", DataType.BFloat16: "bfloat16", DataType.Double: "float64"}


@pytest.mark.parametrize(
    "dtype,rows,cols",
    [
        (DataType.Float, 4, 100003),  # output rows shorter than a tile: pointwise
        (DataType.BFloat16, 33, 70001),
        (DataType.Float, 1000003, 3),  # input rows of 3: looping over them
        (DataType.BFloat16, 70001, 2),
        (DataType.Double, 5000, 4),
        (DataType.Float, 262147, 13),  # 16-tiles, ragged on both sides
        (DataType.Double, 9999, 16),
        (DataType.Float, 64 * 65536 + 5, 16),  # 262145 rows of 16-tiles: more than a grid y holds
        (DataType.BFloat16, 64 * 65536 + 64, 24),  # 65537 rows of 64-tiles
        (DataType.Float, 64, 65),
    ],
)
def test_skinny_and_tall_transposes_equal_torch(dtype, rows, cols):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    fd = build(transpose2d, dtype)
    x = torch.randn(rows, cols, device="cuda").to(getattr(torch, TORCH[dtype]))
    (out,) = fd.execute([x])
    assert out.shape == (cols, rows)
    assert torch.equal(out, x.t().contiguous())
