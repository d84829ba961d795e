"""Exhaustive sweep of one scheduler's parameters for a benchmark case (GPU): which
params win, and how far the default heuristic is from them.

    python3 benchmarks/sweep.py softmax float 8192 4096 [name=value ...]

Each name=value fixes one parameter (e.g. cache_row=True unroll=4); the rest are swept
(blocks_per_sm and inner stay at the default unless fixed or --all is given).
"""

from __future__ import annotations

import itertools
import pathlib
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fusion_zoo import ZOO, build  # noqa: E402
from run import timed  # noqa: E402

from tunefuse import DataType  # noqa: E402
from tunefuse.runtime.allocators import torch_dtype  # noqa: E402
from tunefuse.runtime.executor import Executor  # noqa: E402
from tunefuse.schedulers import scheduler_for, with_values  # noqa: E402


def choice(space: dict, kind: str, name: str, text: str):  # noqa: ANN201
    """The value of search-space parameter `name` spelled `text` (as str() spells it);
    SystemExit naming the parameter or the choices when there is no such one."""
    if name not in space:
        raise SystemExit(f"{name} is not a parameter of {kind}: {sorted(space)}")
    by_text = {str(c): c for c in space[name].choices}
    if text not in by_text:
        raise SystemExit(f"{name}={text}: choose one of {sorted(by_text)}")
    return by_text[text]


def zoo_case(name: str, dtype: DataType, rows: int, cols: int):  # noqa: ANN201
    """(fusion definition, torch inputs) of a fusion_zoo case."""
    fd = build(ZOO[name], dtype)
    tdtype = torch_dtype(dtype)
    inputs = [
        torch.randn(rows, cols, device="cuda").to(tdtype)
        if fd.fusion.values[v].rank == 2
        else torch.randn(cols, device="cuda").to(tdtype)
        for v in fd.fusion.inputs
    ]
    return fd, inputs


def only_segment(fd, inputs):  # noqa: ANN001, ANN201
    """The plan's one segment (the cases swept here are one kernel each)."""
    from tunefuse.planning.plan import make_plan

    (segment,) = make_plan(fd.fusion, inputs).segments
    return segment


def valid_points(
    segment, device, fixed: dict[str, str] | None = None, every_dim: bool = False
) -> list:  # noqa: ANN001
    """Every valid point of the scheduler's search space (the default's blocks_per_sm and
    inner unless `every_dim`), with the `fixed` names held at the given values."""
    sched = scheduler_for(segment.scheduler)
    default = sched.default_params(segment, device)
    space = sched.search_space(segment, device)
    skipped = () if every_dim else ("blocks_per_sm", "inner")
    choices = {n: tuple(d.choices) for n, d in space.items() if n not in skipped}
    for n, text in (fixed or {}).items():
        choices[n] = (choice(space, segment.scheduler.value, n, text),)
    names = sorted(choices)
    points = []
    for values in itertools.product(*(choices[n] for n in names)):
        p = with_values(default, dict(zip(names, values)))
        if sched.is_valid(segment, device, p) is not None:
            continue
        if hasattr(p, "cache_row") and not p.cache_row and p.elements_per_thread != p.vector:
            continue  # elements_per_thread means nothing without cache_row: one copy of each
        points.append(p)
    return points


def time_params(fd, inputs, params, reps: int = 20) -> float | None:  # noqa: ANN001
    """Median µs of the fusion run with `params` (None if they fail to compile or run)."""
    ex = Executor(fd.fusion, params_source=lambda s, d, p=params: p)
    try:
        ex.run(inputs)
        return timed(lambda: ex.run(inputs), reps=reps, warmup=2)
    except Exception as e:  # noqa: BLE001
        print("failed", params, e)
        return None


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--all"]
    name, dtype_name, rows, cols = args[0], args[1], int(args[2]), int(args[3])
    fixed = dict(arg.split("=", 1) for arg in args[4:])
    fd, inputs = zoo_case(name, DataType(dtype_name), rows, cols)
    segment = only_segment(fd, inputs)
    from tunefuse.runtime.device import runtime

    device = runtime(0).info
    default = scheduler_for(segment.scheduler).default_params(segment, device)
    results = [
        (us, p)
        for p in valid_points(segment, device, fixed, "--all" in sys.argv)
        if (us := time_params(fd, inputs, p)) is not None
    ]
    results.sort(key=lambda r: r[0])
    dex = Executor(fd.fusion)
    dex.run(inputs)
    d_us = timed(lambda: dex.run(inputs), reps=20, warmup=2)
    print(
        f"{name} {dtype_name} {rows}x{cols}: {len(results)} valid points; default {d_us:.1f} us {default}"
    )
    for us, p in results[:8]:
        print(f"  {us:8.1f} us  {p}")


if __name__ == "__main__":
    main()
