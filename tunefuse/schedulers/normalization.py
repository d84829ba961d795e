"""Normalization scheduler (inner persistent): a row is reduced, the result broadcast back
and combined, in one kernel. With `cache_row` each thread holds its `elements_per_thread`
elements of every row-dependent input in registers across all phases; without it each
phase reads them again (any row length)."""

from __future__ import annotations

from dataclasses import dataclass

from tunefuse.device_info import DeviceInfo
from tunefuse.schedulers import reduction
from tunefuse.segment import Segment


@dataclass(frozen=True, slots=True)
class Params:
    threads_r: int = 256
    rows_per_block: int = 1
    inner: bool = True
    blocks_per_sm: int = 32
    cache_row: bool = True
    elements_per_thread: int = 8
    vector: int = 1


def default_params(segment: Segment, device: DeviceInfo) -> Params:
    """Measured on H100 (benchmarks/sweep.py, 8192 x 4096 softmax, rmsnorm, layernorm):
    re-reading the row through L1/L2 with 256 threads and 8-byte vectors beats holding it
    in registers, except when a variance needs the row three times."""
    base = reduction.default_params(segment, device)
    _, n_red = reduction.sizes(segment)
    itemsize = min((ld.dtype.itemsize for ld in segment.loads), default=4)
    vector = min(reduction.max_vector(segment), max(1, 8 // itemsize))
    threads = 32
    while threads < 256 and threads * vector * 2 < n_red:
        threads *= 2
    from tunefuse.codegen.reduction import accumulators

    needs_variance = any(acc.family == "welford" for acc in accumulators(segment))
    ept = -(-(-(-n_red // threads)) // vector) * vector
    if needs_variance and ept <= 16:
        return Params(threads, 2 if threads <= 256 else 1, base.inner, 32, True, ept, vector)
    return Params(threads, 1, base.inner, 32, False, vector, vector)


def is_valid(segment: Segment, device: DeviceInfo, p: Params) -> str | None:
    why = reduction.is_valid(segment, device, reduction.Params(p.threads_r, p.rows_per_block, p.inner, p.blocks_per_sm, p.vector))
    if why:
        return why
    if p.elements_per_thread % p.vector:
        return f"elements_per_thread {p.elements_per_thread} is not a multiple of vector {p.vector}"
    _, n_red = reduction.sizes(segment)
    if p.cache_row and p.elements_per_thread * p.threads_r < n_red:
        return f"a row of {n_red} does not fit {p.elements_per_thread} x {p.threads_r} registers"
    if p.elements_per_thread < 1 or p.elements_per_thread > 64:
        return "elements_per_thread"
    return None


def search_space(segment: Segment, device: DeviceInfo) -> dict:
    import optuna  # the tuner's dependency: imported only when a search space is asked for

    return {
        "threads_r": optuna.distributions.CategoricalDistribution([32, 64, 128, 256, 512, 1024]),
        "rows_per_block": optuna.distributions.CategoricalDistribution([1, 2, 4, 8]),
        "inner": optuna.distributions.CategoricalDistribution([True, False]),
        "blocks_per_sm": optuna.distributions.CategoricalDistribution([4, 8, 16, 32, 64]),
        "cache_row": optuna.distributions.CategoricalDistribution([True, False]),
        "elements_per_thread": optuna.distributions.CategoricalDistribution([1, 2, 4, 8, 16, 32]),
        "vector": optuna.distributions.CategoricalDistribution(
            [v for v in (1, 2, 4, 8) if reduction.max_vector(segment) % v == 0]),
    }


def grid(segment: Segment, device: DeviceInfo, p: Params) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    return reduction.grid(segment, device, reduction.Params(p.threads_r, p.rows_per_block, p.inner, p.blocks_per_sm))
