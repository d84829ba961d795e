"""`tunefuse tune FILE.py` and `tunefuse jobs enqueue FILE.py`: tune the fusions a fusion
file declares, now (foreground) or later (the daemon's queue)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.table import Table

from cli.common import CacheOption, JsonOption, console, emit, fail


def _cases(file: Path, only: str | None):  # noqa: ANN202
    from tunefuse.errors import TunefuseError
    from tunefuse.fusion_file import load_fusion_file

    try:
        cases = load_fusion_file(file)
    except TunefuseError as e:
        fail(str(e), 2)
    if only is not None:
        cases = [c for c in cases if c.name == only]
        if not cases:
            fail(f"no fusion named {only!r} in {file}", 2)
    return cases


def tune(
    file: Annotated[Path, typer.Argument(help="A fusion file declaring FUSIONS.")],
    cache: CacheOption = None,
    only: Annotated[
        str | None, typer.Option("--only", help="Only the fusion of this name.")
    ] = None,
    trials: Annotated[int, typer.Option(help="Trials per kernel.")] = 40,
    timeout: Annotated[float | None, typer.Option(help="Seconds per kernel.")] = None,
    device: Annotated[
        int, typer.Option(min=0, help="The GPU to tune on (its env is the records').")
    ] = 0,
    as_json: JsonOption = False,
) -> None:
    """Tune every kernel of the file's fusions now, with a progress bar and a final table."""
    import tunefuse

    store_cache = tunefuse.Cache(cache) if cache else "default"
    rows = []
    for case in _cases(file, only):
        fd = case.build()
        report = tunefuse.tune(
            fd,
            case.example_inputs(np.random.default_rng(0)),
            trials=trials,
            timeout=timeout,
            cache=store_cache,
            progress=not as_json,
            device=device,
        )
        for s in report.segments:
            rows.append(
                {
                    "fusion": case.name,
                    "segment": s.segment,
                    "scheduler": s.scheduler,
                    "default_us": s.default_us,
                    "best_us": s.best_us,
                    "speedup": s.speedup,
                    "trials": s.trials,
                    "failed": s.failed,
                    "params": s.params,
                    "stored": s.stored,
                }
            )
    table = Table(
        "fusion", "kernel", "scheduler", "default µs", "best µs", "speedup", "trials", "params"
    )
    for r in rows:
        table.add_row(
            r["fusion"],
            r["segment"],
            r["scheduler"],
            f"{r['default_us']:.1f}",
            f"{r['best_us']:.1f}",
            f"{r['speedup']:.2f}x",
            str(r["trials"]),
            str(r["params"]),
        )
    emit(rows, as_json, table)


def enqueue(
    file: Annotated[Path, typer.Argument(help="A fusion file declaring FUSIONS.")],
    cache: CacheOption = None,
    only: Annotated[
        str | None, typer.Option("--only", help="Only the fusion of this name.")
    ] = None,
    device: Annotated[int, typer.Option(help="The GPU whose env the jobs are for.")] = 0,
    as_json: JsonOption = False,
) -> None:
    """Queue a tuning job for every kernel of the file's fusions (for the daemon)."""
    from cli.common import open_store
    from tunefuse.cache import signature_json
    from tunefuse.planning.plan import plan_for
    from tunefuse.planning.signature import bind_inputs

    try:
        from tunefuse.runtime.device import runtime

        env = runtime(device).env
    except Exception as e:  # noqa: BLE001
        fail(f"jobs are queued for a GPU's env, and GPU {device} is not usable here: {e}", 2)
    store = open_store(cache)
    queued = []
    for case in _cases(file, only):
        fusion = case.build().fusion
        bound = bind_inputs(fusion, case.example_inputs(np.random.default_rng(0)))
        plan = plan_for(fusion, bound)
        store.put_fusion(fusion.fusion_id, fusion.to_json(), case.name)
        for index, seg in enumerate(plan.segments):
            new = store.enqueue(
                fusion.fusion_id,
                index,
                seg.kernel_key,
                seg.shape_key,
                env,
                signature_json(bound.signature),
            )
            queued.append(
                {
                    "fusion": case.name,
                    "segment": index,
                    "kernel_key": seg.kernel_key,
                    "shape_key": seg.shape_key,
                    "new": new,
                }
            )
    emit(
        queued,
        as_json,
        text=f"{sum(q['new'] for q in queued)} jobs queued, "
        f"{sum(not q['new'] for q in queued)} already there (hits counted)",
    )
    console.print("", end="")
