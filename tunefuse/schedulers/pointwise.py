"""Pointwise scheduler: a grid-stride loop over the collapsed iteration space, each thread
taking `unroll` groups of `vector` consecutive innermost elements."""

from __future__ import annotations

from dataclasses import dataclass

from tunefuse.device_info import DeviceInfo
from tunefuse.schedulers.common import max_vector
from tunefuse.segment import Segment


@dataclass(frozen=True, slots=True)
class Params:
    block_size: int = 128
    vector: int = 1
    unroll: int = 1
    blocks_per_sm: int = 8  # grid cap in waves: blocks_per_sm * SM count


def default_params(segment: Segment, device: DeviceInfo) -> Params:
    """16-byte accesses where allowed; one vector a thread and 1024-thread blocks when there
    is enough work to fill every SM twice over, smaller blocks (more of them) when not; the
    grid covers the work in one pass up to 32 blocks an SM. Measured on H100 with an
    exhaustive sweep (benchmarks/trials_to_sweep.py): 1024 x vector 4, unroll 1, 32 blocks
    an SM is the best of 225 points for GELU 8192x3072 and bias+GELU 8192x4096."""
    vector = max_vector(segment)
    groups = segment.numel // vector
    block = min(1024, device.max_threads_per_block)
    while block > 128 and groups < block * device.sm_count * 2:
        block //= 2
    return Params(block_size=block, vector=vector, unroll=1, blocks_per_sm=32)


def is_valid(segment: Segment, device: DeviceInfo, p: Params) -> str | None:
    """None when `p` can run `segment` correctly on `device`, else why not."""
    if p.block_size not in (32, 64, 128, 256, 512, 1024) or p.block_size > device.max_threads_per_block:
        return f"block_size {p.block_size}"
    if p.vector < 1 or max_vector(segment) % p.vector:
        return f"vector {p.vector} (at most {max_vector(segment)} here)"
    if p.unroll not in (1, 2, 4, 8) or p.blocks_per_sm < 1:
        return "unroll / blocks_per_sm"
    return None


def search_space(segment: Segment, device: DeviceInfo) -> dict:
    import optuna  # the tuner's dependency: imported only when a search space is asked for

    vectors = [v for v in (1, 2, 4, 8, 16) if max_vector(segment) % v == 0]
    return {
        "block_size": optuna.distributions.CategoricalDistribution([64, 128, 256, 512, 1024]),
        "vector": optuna.distributions.CategoricalDistribution(vectors),
        "unroll": optuna.distributions.CategoricalDistribution([1, 2, 4]),
        "blocks_per_sm": optuna.distributions.CategoricalDistribution([2, 4, 8, 16, 32]),
    }


def grid(segment: Segment, device: DeviceInfo, p: Params) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    groups = segment.numel // p.vector
    per_block = p.block_size * p.unroll
    blocks = max(1, min(-(-groups // per_block), p.blocks_per_sm * device.sm_count))
    return (blocks, 1, 1), (p.block_size, 1, 1), 0
