"""Normalization scheduler (inner persistent): a row is reduced, the result broadcast back
and combined, in one kernel. With `cache_row` each thread holds its `elements_per_thread`
elements of every row-dependent input in registers across all phases; without it each
phase reads them again (any row length)."""

from __future__ import annotations

from dataclasses import dataclass

import optuna

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


def default_params(segment: Segment, device: DeviceInfo) -> Params:
    base = reduction.default_params(segment, device)
    _, n_red = reduction.sizes(segment)
    threads = 32
    while threads < 1024 and -(-n_red // threads) > 8:
        threads *= 2
    ept = max(1, -(-n_red // threads))
    cache = ept <= 32
    rows = max(1, min(4, 256 // threads)) if base.inner else base.rows_per_block
    return Params(threads, rows, base.inner, 32, cache, ept if cache else 1)


def is_valid(segment: Segment, device: DeviceInfo, p: Params) -> str | None:
    why = reduction.is_valid(segment, device, reduction.Params(p.threads_r, p.rows_per_block, p.inner, p.blocks_per_sm))
    if why:
        return why
    _, n_red = reduction.sizes(segment)
    if p.cache_row and p.elements_per_thread * p.threads_r < n_red:
        return f"a row of {n_red} does not fit {p.elements_per_thread} x {p.threads_r} registers"
    if p.elements_per_thread < 1 or p.elements_per_thread > 64:
        return "elements_per_thread"
    return None


def search_space(segment: Segment, device: DeviceInfo) -> dict[str, optuna.distributions.BaseDistribution]:
    return {
        "threads_r": optuna.distributions.CategoricalDistribution([32, 64, 128, 256, 512, 1024]),
        "rows_per_block": optuna.distributions.CategoricalDistribution([1, 2, 4, 8]),
        "inner": optuna.distributions.CategoricalDistribution([True, False]),
        "blocks_per_sm": optuna.distributions.CategoricalDistribution([4, 8, 16, 32, 64]),
        "cache_row": optuna.distributions.CategoricalDistribution([True, False]),
        "elements_per_thread": optuna.distributions.CategoricalDistribution([1, 2, 4, 8, 16, 32]),
    }


def grid(segment: Segment, device: DeviceInfo, p: Params) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    return reduction.grid(segment, device, reduction.Params(p.threads_r, p.rows_per_block, p.inner, p.blocks_per_sm))
