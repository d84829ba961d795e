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
        (DataType.Float, 1000003, 3),  # input rows of 3: tiles of whole rows (4 long)
        (DataType.BFloat16, 70001, 2),
        (DataType.BFloat16, 4194304, 8),  # whole rows of 16 bytes, 16-byte writes
        (DataType.Double, 5000, 4),
        (DataType.Float, 262147, 13),  # 16-tiles, ragged on both sides
        (DataType.Double, 9999, 16),
        (DataType.Float, 64 * 65536 + 5, 16),  # 262145 rows of 16-tiles: more than a grid y holds
        (DataType.BFloat16, 64 * 65536 + 64, 24),  # 131074 rows of 32-tiles (rows of 24)
        (DataType.BFloat16, 300001, 26),  # 32-tiles of rows of 17-32, ragged
        (DataType.Float, 500002, 20),  # 32-tiles, 16-byte reads
        (DataType.Float, 1000002, 8),  # fp32 rows of 8, 8-byte writes: tiles of whole rows
        (DataType.Float, 1048576, 8),  # 16-byte writes: the looping kernel
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


def batched_transpose(fd, dtype):  # noqa: ANN001
    """[B, R, C] -> [B, C, R] + 1: tiles of two dims, the batch looped over by gridDim.z."""
    x = fd.define_tensor(shape=[-1, -1, -1], dtype=dtype)
    fd.add_output(fd.ops.add(fd.ops.permute(x, dims=[0, 2, 1]), fd.define_scalar(1.0)))


def run_transpose(dtype, shape, choose):  # noqa: ANN001, ANN201
    """A [R, C] transpose (or a batched one of [B, R, C], + 1) of random data run with the
    params `choose` gives: (the output, torch's)."""
    import torch

    from tunefuse import FusionDefinition
    from tunefuse.runtime.executor import Executor

    x = torch.randn(*shape, device="cuda").to(getattr(torch, TORCH[dtype]))
    if len(shape) == 2:
        fd = build(transpose2d, dtype)
        expected = x.t().contiguous()
    else:
        with FusionDefinition() as fd:
            batched_transpose(fd, dtype)
        expected = x.transpose(1, 2) + 1
    (out,) = Executor(fd.fusion, params_source=choose).run([x])
    return out, expected


@pytest.mark.parametrize("unswitch", [False, True])
@pytest.mark.parametrize("along_writes", [True, False])
@pytest.mark.parametrize(
    "dtype,shape",
    [
        (DataType.BFloat16, (777, 1111)),  # vector 1, ragged both sides
        (DataType.Float, (100003, 67)),  # many tiles along the writes, 3 along the reads
        (DataType.Float, (67, 100003)),
        (DataType.Float, (1024, 4096)),  # 16-byte vectors
        (DataType.BFloat16, (3, 333, 1025)),  # a batch
        (DataType.Float, (5, 1000, 64)),
    ],
)
def test_either_tile_order_equals_torch(dtype, shape, along_writes, unswitch):
    """Consecutive tiles along the writes' innermost dim or along the reads', tiles
    unswitched or checked element by element: the same output, bit for bit, with any
    tile and vector the default takes."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from tunefuse.schedulers import scheduler_for

    seen = []

    def choose(seg, device):
        default = scheduler_for(seg.scheduler).default_params(seg, device)
        assert default.tile > 0
        seen.append(default)
        return dataclasses.replace(default, along_writes=along_writes, unswitch=unswitch)

    out, expected = run_transpose(dtype, shape, choose)
    assert seen and torch.equal(out, expected)


@pytest.mark.parametrize(
    "dtype,shape,changes",
    [
        (
            DataType.BFloat16,
            (18, 100001),
            dict(tile=18, tile_reads=288, vector=2, read_vector=1, block_rows=32),
        ),
        (
            DataType.BFloat16,
            (18, 100001),
            dict(tile=18, tile_reads=96, vector=2, read_vector=1, block_rows=32, padding=0),
        ),
        (
            DataType.BFloat16,
            (1000006, 2),
            dict(tile=512, tile_reads=2, vector=2, read_vector=2, block_rows=1, padding=0),
        ),
        (
            DataType.Float,
            (100000, 4),
            dict(tile=256, tile_reads=4, vector=4, read_vector=2, block_rows=2, padding=0),
        ),
        (
            DataType.BFloat16,
            (323, 14176),
            dict(tile=32, tile_reads=64, vector=1, read_vector=8, block_rows=4),
        ),
        (
            DataType.Float,
            (54, 65310),
            dict(tile=54, tile_reads=108, vector=2, read_vector=2, block_rows=8, padding=0),
        ),
        (DataType.Float, (61, 3333), dict(tile=24, tile_reads=40, vector=1, block_rows=5)),
        (DataType.BFloat16, (323, 14176), dict(tile=32, vector=1, block_rows=4, min_blocks=16)),
        (DataType.Float, (1000, 4100), dict(tile=64, vector=4, block_rows=16, min_blocks=8)),
        (
            DataType.BFloat16,
            (3, 333, 1026),
            dict(tile=96, tile_reads=64, vector=1, read_vector=2, block_rows=2),
        ),
    ],
)
@pytest.mark.parametrize("unswitch", [False, True])
def test_rectangular_tiles_equal_torch(dtype, shape, changes, unswitch):
    """Tiles longer along one dim than the other, whole rows of a short dim, reads of
    other widths than the writes, rows of threads that do not divide the tile, either
    layout in shared memory, unswitched or not: bit for bit."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from tunefuse.schedulers import scheduler_for, transpose

    def choose(seg, device):
        default = scheduler_for(seg.scheduler).default_params(seg, device)
        p = dataclasses.replace(default, **{"unswitch": unswitch, **changes})
        assert transpose.is_valid(seg, device, p) is None, transpose.is_valid(seg, device, p)
        return p

    out, expected = run_transpose(dtype, shape, choose)
    assert torch.equal(out, expected)
