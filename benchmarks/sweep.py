"""Exhaustive sweep of one scheduler's parameters for a benchmark case (GPU): which
params win, and how far the default heuristic is from them.

    python3 benchmarks/sweep.py softmax float 8192 4096 [name=value ...]

Each name=value fixes one parameter (e.g. cache_row=True unroll=4); the rest are swept.
"""

from __future__ import annotations

import dataclasses
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
from tunefuse.runtime.executor import Executor  # noqa: E402
from tunefuse.schedulers import scheduler_for  # noqa: E402


def main() -> None:
    name, dtype_name, rows, cols = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    fixed = dict(arg.split("=", 1) for arg in sys.argv[5:])
    dtype = DataType(dtype_name)
    fd = build(ZOO[name], dtype)
    tdtype = {DataType.Float: torch.float32, DataType.BFloat16: torch.bfloat16, DataType.Half: torch.float16}[dtype]
    inputs = [torch.randn(rows, cols, device="cuda").to(tdtype) if fd.fusion.values[v].rank == 2
              else torch.randn(cols, device="cuda").to(tdtype) for v in fd.fusion.inputs]
    fd.execute(inputs)
    seg = next(iter(fd._runner.plans.values())).plan.segments[0]
    from tunefuse.runtime.device import runtime

    device = runtime(0).info
    sched = scheduler_for(seg.scheduler)
    default = sched.default_params(seg, device)
    space = sched.search_space(seg, device)
    names = sorted(n for n in space if n not in ("blocks_per_sm", "inner"))
    choices = {n: space[n].choices for n in names}
    for n, text in fixed.items():
        if n not in space:
            raise SystemExit(f"{n} is not a parameter of {seg.scheduler.value}: {sorted(space)}")
        by_text = {str(c): c for c in space[n].choices}
        if text not in by_text:
            raise SystemExit(f"{n}={text}: choose one of {sorted(by_text)}")
        choices[n] = (by_text[text],)
        names = sorted(set(names) | {n})
    results = []
    for values in itertools.product(*(choices[n] for n in names)):
        try:
            p = dataclasses.replace(default, **dict(zip(names, values)))
        except TypeError:
            continue
        if sched.is_valid(seg, device, p) is not None:
            continue
        if hasattr(p, "cache_row") and not p.cache_row and p.elements_per_thread != p.vector:
            continue
        ex = Executor(fd.fusion, params_source=lambda s, d, p=p: p)
        try:
            ex.run(inputs)
            us = timed(lambda: ex.run(inputs), reps=20, warmup=2)
        except Exception as e:  # noqa: BLE001
            print("failed", p, e)
            continue
        results.append((us, p))
    results.sort(key=lambda r: r[0])
    dex = Executor(fd.fusion)
    dex.run(inputs)
    d_us = timed(lambda: dex.run(inputs), reps=20, warmup=2)
    print(f"{name} {dtype_name} {rows}x{cols}: {len(results)} valid points; default {d_us:.1f} us {default}")
    for us, p in results[:8]:
        print(f"  {us:8.1f} us  {p}")


if __name__ == "__main__":
    main()
