"""Transpose scheduler: tiles of the two dims that are innermost for the reads and for the
writes go through shared memory (padded against bank conflicts), so that both sides are
coalesced. When the reads and the writes share their innermost dim, a tile is a plain copy
and the pointwise kernel runs instead (`tile == 0`)."""

from __future__ import annotations

from dataclasses import dataclass

from tunefuse.device_info import DeviceInfo
from tunefuse.schedulers import pointwise
from tunefuse.schedulers.common import coeff
from tunefuse.segment import Segment


@dataclass(frozen=True, slots=True)
class Params:
    tile: int = 32  # 0: no tile (pointwise kernel)
    block_rows: int = 8
    padding: int = 1
    pointwise: pointwise.Params = pointwise.Params()


def tiled_dims(segment: Segment) -> tuple[int, int] | None:
    """(write-innermost dim, read-innermost dim) when they differ, else None."""
    def unit(offset) -> int | None:  # noqa: ANN001
        if not offset.is_affine:
            return None
        units = [j for j in range(len(segment.extents)) if coeff(offset, segment, j) == 1 and segment.extents[j] > 1]
        return units[0] if units else None

    write = [unit(st.offset) for st in segment.stores]
    if not write or write[0] is None or any(w != write[0] for w in write):
        return None
    for ld in segment.loads:
        read = unit(ld.offset)
        if read is not None and read != write[0]:
            return write[0], read
    return None


def default_params(segment: Segment, device: DeviceInfo) -> Params:
    if tiled_dims(segment) is None:
        return Params(tile=0, pointwise=pointwise.default_params(segment, device))
    # 64 x 64 tiles, 16 rows of threads: the best of the 36 points of the space for an
    # 8192 x 4096 fp32 transpose on H100 (105.9 us against 118.4 us for 32 x 8).
    # Kernels with several outputs may not have the shared memory for it: then 32 x 32.
    wide = Params(tile=64, block_rows=16, padding=1)
    return wide if is_valid(segment, device, wide) is None else Params(tile=32, block_rows=8, padding=1)


def is_valid(segment: Segment, device: DeviceInfo, p: Params) -> str | None:
    if p.tile == 0:
        return pointwise.is_valid(segment, device, p.pointwise)
    if tiled_dims(segment) is None:
        return "no pair of dims to tile"
    if p.tile not in (8, 16, 32, 64) or p.block_rows < 1 or p.tile % p.block_rows:
        return f"tile {p.tile} x block_rows {p.block_rows}"
    if p.tile * p.block_rows > device.max_threads_per_block:
        return "too many threads"
    smem = len(segment.stores) * p.tile * (p.tile + p.padding) * 8
    if smem > device.shared_per_block:
        return f"{smem} bytes of shared memory"
    return None


def search_space(segment: Segment, device: DeviceInfo) -> dict:
    """Tile shapes; or, when there is nothing to tile (reads and writes share their
    innermost dim), the space of the pointwise kernel that runs instead, as "pointwise.*"."""
    import optuna  # the tuner's dependency: imported only when a search space is asked for

    if tiled_dims(segment) is None:
        return {f"pointwise.{name}": d for name, d in pointwise.search_space(segment, device).items()}
    return {
        "tile": optuna.distributions.CategoricalDistribution([16, 32, 64]),
        "block_rows": optuna.distributions.CategoricalDistribution([2, 4, 8, 16]),
        "padding": optuna.distributions.CategoricalDistribution([0, 1, 2]),
    }


def grid(segment: Segment, device: DeviceInfo, p: Params) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    if p.tile == 0:
        return pointwise.grid(segment, device, p.pointwise)
    a, b = tiled_dims(segment)  # type: ignore[misc]
    rest = 1
    for j, e in enumerate(segment.extents):
        if j not in (a, b):
            rest *= e
    tiles_b = -(-segment.extents[b] // p.tile)
    tiles_a = -(-segment.extents[a] // p.tile)
    return (tiles_b, tiles_a, rest), (p.tile, p.block_rows, 1), 0
