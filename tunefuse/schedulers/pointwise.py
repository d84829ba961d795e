"""Pointwise scheduler: each thread takes `unroll` groups of `vector` consecutive innermost
elements; flat (one grid-stride loop over the collapsed space) or 2-D (`split` s: threads
along x over dims [s, rank), a grid-stride loop along y over dims [0, s)); see
codegen/pointwise.py for why 2-D saves index math."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tunefuse.device_info import DeviceInfo
from tunefuse.planning.segment import Segment
from tunefuse.schedulers.common import (
    coeff,
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
    no index math in the loop, broadcast operands of the inner dims read once a thread;
    where those would be read again from memory for every row (`rereads_broadcast`), one
    wave of blocks whose threads loop over the rows."""
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
    if inner_groups < 32 or (covered - inner_groups) * 8 > covered:
        return flat
    if rereads_broadcast(segment, two_d.split, device):
        # One wave of blocks (each row block after the first would read the broadcast
        # operands again from memory): every thread loops over the rows.
        return replace(two_d, blocks_per_sm=device.max_threads_per_sm // block)
    return two_d


# A 2-D grid runs its blocks x-fastest: the row blocks of one inner chunk come a whole pass
# over the inner dims apart. An operand broadcast along the rows (a layernorm's weight and
# bias) is read again by each of them, from L2 only while that pass fits in part of it; past
# that, from memory. H100 (`benchmarks/ab.py CASE DTYPE SHAPE blocks_per_sm=8`, one wave of
# blocks whose threads loop over the rows, against the uncapped grid): bias_gelu fp32 [16,
# 2**22] (a pass of 48 MB) 267.0 -> 195.0 us (torch.compile 259.3), [128, 2**21] (24 MB)
# 837.9 -> 769.6, [256, 2**20] (12 MB) 756.4 -> 766.7 (1% slower), [8192, 4096] 92.7 -> 99.0;
# layernorm's normalizing kernel fp32 [16, 2**22] 456.7 -> 304.7 (torch.compile 452.4),
# [32, 2**21] 404.4 -> 305.8, [16, 2**18] (4 MB) 28.8 -> 29.1; rmsnorm bf16 [4, 2**25]
# 368.8 -> 307.7 (425.4), fp32 [64, 2**20] (12 MB) 301.3 -> 300.1.
REREAD_L2_SHARE = 4  # a pass over more than 1 / REREAD_L2_SHARE of the L2 reads from memory


def rereads_broadcast(segment: Segment, split: int, device: DeviceInfo) -> bool:
    """True where a 2-D kernel (dims [0, split) outer) with one block a row would read its
    operands broadcast along the outer dims again from memory for every row: there are such
    operands, more than one row, and a pass over the inner dims touches more bytes than
    1 / REREAD_L2_SHARE of the L2."""
    rank = len(segment.extents)
    if not 0 < split < rank or math.prod(segment.extents[:split]) <= 1:
        return False

    def moves(offset, dims: range) -> bool:  # noqa: ANN001
        return any(coeff(offset, segment, j) != 0 for j in dims)

    outer, inner = range(split), range(split, rank)
    if not any(moves(ld.offset, inner) and not moves(ld.offset, outer) for ld in segment.loads):
        return False
    accesses = {
        (a.buffer, a.dtype.itemsize)
        for a in (*segment.loads, *segment.stores)
        if moves(a.offset, inner)
    }
    pass_bytes = math.prod(segment.extents[split:]) * sum(size for _, size in accesses)
    return pass_bytes * REREAD_L2_SHARE > device.l2_bytes


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
