"""GPU: transposes of skinny and tall inputs (the pointwise kernel, looping over short
input rows, 16-tiles, more rows of tiles than a grid's y holds), and tiles of odd extents
whose narrow loads a thread unrolls over its rows (any rows of threads), equal torch's, bit
for bit."""

import dataclasses

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
        (DataType.BFloat16, 777, 1111),  # odd extents: vector 1, 4 rows of threads unrolled
        (DataType.Float, 151, 2773),
        (DataType.BFloat16, 323, 14176),  # aligned reads, odd writes
        (DataType.Double, 641, 333),
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


@pytest.mark.parametrize("block_rows", [2, 4, 8, 16, 32])
@pytest.mark.parametrize("tile", [32, 64])
@pytest.mark.parametrize(
    "dtype,rows,cols", [(DataType.BFloat16, 777, 1111), (DataType.Float, 131, 2049)]
)
def test_narrow_tiles_of_any_rows_of_threads_equal_torch(dtype, rows, cols, tile, block_rows):
    """Tiles of 2- and 4-byte loads (vector 1): a thread's tile // block_rows rows, unrolled,
    ragged at both edges."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from tunefuse.runtime.executor import Executor
    from tunefuse.schedulers import scheduler_for

    if tile // block_rows < 1 or tile * block_rows > 1024:
        pytest.skip(f"{tile} x {block_rows}: not a block")

    def choose(seg, device):
        default = scheduler_for(seg.scheduler).default_params(seg, device)
        return dataclasses.replace(default, tile=tile, block_rows=block_rows, vector=1)

    fd = build(transpose2d, dtype)
    x = torch.randn(rows, cols, device="cuda").to(getattr(torch, TORCH[dtype]))
    (out,) = Executor(fd.fusion, params_source=choose).run([x])
    assert torch.equal(out, x.t().contiguous())
