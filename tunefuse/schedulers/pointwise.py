"""Pointwise scheduler: each thread takes `unroll` groups of `vector` consecutive innermost
elements; flat (one grid-stride loop over the collapsed space) or 2-D (`split` s: threads
along x over dims [s, rank), a grid-stride loop along y over dims [0, s)); see
codegen/pointwise.py for why 2-D saves index math."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tunefuse.device_info import DeviceInfo
from tunefuse.planning.segment import Segment
from tunefuse.schedulers.common import (
    evict_first_pays,
    flag_space,
    flags_error,
    grid_cap,
    holding_default,
    max_vector,
)


@dataclass(frozen=True, slots=True)
class Params:
    block_size: int = 128
    vector: int = 1
    unroll: int = 1
    blocks_per_sm: int = (
        8  # grid cap: blocks_per_sm * SM count blocks; 0: no cap (one pass, no striding)
    )
    split: int = 0  # 0: flat; s >= 1: dims [0, s) outer (grid y), dims [s, rank) inner (x)
    evict_first: bool = (
        True  # data read once is loaded evict-first (ld.global.cs); False: the default cache policy
    )
    static_shape: bool = (
        False  # sizes, strides and offsets as constants: a binary for this shape alone
    )


def block_shape(segment: Segment, p: Params) -> tuple[int, int]:
    """(x, y) threads of a 2-D block: x covers the inner groups (a power of two, at most the
    block), y the rest of the block."""
    inner_groups = max(1, math.prod(segment.extents[p.split :]) // p.vector)
    x = 1
    while x < p.block_size and x < inner_groups:
        x *= 2
    return x, p.block_size // x


def default_params(segment: Segment, device: DeviceInfo) -> Params:
    """16-byte accesses where allowed; one vector a thread, 256-thread blocks (smaller, so
    more of them, when there is too little work to fill every SM twice over), and as many
    blocks as the work needs: one pass, no grid-stride. Measured on H100
    (`benchmarks/sweep.py bias_gelu float 8192 4096 vector=4 unroll=1 --all`, 60 points):
    every one of the 8 best points is uncapped; 256 flat 93.3 us, 512 2-D 93.4, against
    94.7 for 1024-thread blocks capped at 32 an SM (the previous default).
    2-D (split 1) wherever the inner dims fill the block's x with at most 1/8 of it idle:
    no index math in the loop, broadcast operands of the inner dims read once a thread."""
    vector = max_vector(segment)
    groups = segment.numel // vector
    block = min(256, device.max_threads_per_block)
    while block > 64 and groups < block * device.sm_count * 2:
        block //= 2
    evict_first = evict_first_pays(segment)
    flat = Params(
        block_size=block, vector=vector, unroll=1, blocks_per_sm=0, evict_first=evict_first
    )
    if len(segment.extents) < 2:
        return flat
    two_d = Params(
        block_size=block, vector=vector, unroll=1, blocks_per_sm=0, split=1, evict_first=evict_first
    )
    inner_groups = math.prod(segment.extents[1:]) // vector
    x, _ = block_shape(segment, two_d)
    covered = -(-inner_groups // x) * x
    return two_d if inner_groups >= 32 and (covered - inner_groups) * 8 <= covered else flat


def is_valid(segment: Segment, device: DeviceInfo, p: Params) -> str | None:
    """None when `p` can run `segment` correctly on `device`, else why not."""
    if (
        p.block_size not in (32, 64, 128, 256, 512, 1024)
        or p.block_size > device.max_threads_per_block
    ):
        return f"block_size {p.block_size}"
    if p.vector < 1 or max_vector(segment) % p.vector:
        return f"vector {p.vector} (at most {max_vector(segment)} here)"
    if p.unroll not in (1, 2, 4, 8) or p.blocks_per_sm < 0:
        return "unroll / blocks_per_sm"
    if p.split < 0 or (p.split and p.split >= len(segment.extents)):
        return f"split {p.split} (0 to {max(0, len(segment.extents) - 1)} here)"
    return flags_error(p)


def search_space(segment: Segment, device: DeviceInfo) -> dict:
    import optuna  # the tuner's dependency: imported only when a search space is asked for

    vectors = [v for v in (1, 2, 4, 8, 16) if max_vector(segment) % v == 0]
    space = {
        "block_size": optuna.distributions.CategoricalDistribution([64, 128, 256, 512, 1024]),
        "vector": optuna.distributions.CategoricalDistribution(vectors),
        "unroll": optuna.distributions.CategoricalDistribution([1, 2, 4]),
        "blocks_per_sm": optuna.distributions.CategoricalDistribution([0, 2, 4, 8, 16, 32]),
        "split": optuna.distributions.CategoricalDistribution(
            list(range(max(1, len(segment.extents))))
        ),
        **flag_space(),
    }
    return holding_default(space, default_params(segment, device))


def grid(
    segment: Segment, device: DeviceInfo, p: Params
) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    cap = grid_cap(device, p.blocks_per_sm)
    if p.split:
        x, y = block_shape(segment, p)
        inner_groups = math.prod(segment.extents[p.split :]) // p.vector
        blocks_x = max(1, -(-inner_groups // x))
        outer = math.prod(segment.extents[: p.split])
        blocks_y = max(1, min(-(-outer // (y * p.unroll)), max(1, cap // blocks_x), 65535))
        return (blocks_x, blocks_y, 1), (x, y, 1), 0
    groups = segment.numel // p.vector
    per_block = p.block_size * p.unroll
    blocks = max(1, min(-(-groups // per_block), cap))
    return (blocks, 1, 1), (p.block_size, 1, 1), 0
