"""How fast does the tuner find the best point? (GPU)

For each case: time every valid point of the scheduler's whole search space (an exhaustive
sweep), then tune the same fusion from scratch with `tunefuse.tune(trials=40)`, and replay
the tuner's trials in order against the sweep's times (one timer for both): the trial at
which the best-so-far comes within 3% of the sweep's best, and how far the stored winner is
from it. Trial 1 is the default heuristic (enqueued by the tuner), so "trials to within 3%"
is 1 wherever the default is that good; "search alone" leaves trial 1 out: the trial at which
the sampled points by themselves come within 3%.

    python3 benchmarks/trials_to_sweep.py --out DIR      # DIR/trials.json and DIR/trials.md
    python3 benchmarks/trials_to_sweep.py --out DIR --cases transpose2d   # names containing it
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from sweep import only_segment, time_params, valid_points, zoo_case  # noqa: E402

from tunefuse import Cache, DataType, tune  # noqa: E402
from tunefuse.fusion_file import load_fusion_file  # noqa: E402
from tunefuse.runtime.device import runtime  # noqa: E402
from tunefuse.schedulers import params_from_dict, scheduler_for, with_values  # noqa: E402

WITHIN = 1.03


def cases():  # noqa: ANN201
    import torch

    seeds = {c.name: c for c in load_fusion_file(ROOT / "examples" / "seed_fusions.py")}
    yield (
        "gelu_with_views 8192x3072",
        seeds["gelu_with_views"].build(),
        [torch.randn(8192, 3072, device="cuda")],
    )
    yield ("bias_gelu float 8192x4096", *zoo_case("bias_gelu", DataType.Float, 8192, 4096))
    yield ("transpose2d float 8192x4096", *zoo_case("transpose2d", DataType.Float, 8192, 4096))


def replay(study, default, sweep: dict) -> list[float]:  # noqa: ANN001
    """The sweep's time of each trial the tuner compiled, in the tuner's order."""
    import optuna

    times = []
    for trial in sorted(study.trials, key=lambda t: t.number):
        if trial.state not in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL):
            continue  # pruned: invalid, never compiled
        params = with_values(default, trial.params)
        times.append(sweep.get(params, float("inf")))
    return times


def trials_to_within(times: list[float], best: float, skip_first: bool = False) -> int | None:
    """The trial number (1-based, in the tuner's order) at which the best time so far comes
    within 3% of `best`; with `skip_first`, trial 1 (the default heuristic) does not count."""
    running = float("inf")
    for n, us in enumerate(times, start=1):
        if skip_first and n == 1:
            continue
        running = min(running, us)
        if running <= best * WITHIN:
            return n
    return None


def main() -> None:
    import optuna

    from tunefuse.tuning.tuner import _storage, study_name

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument(
        "--cases", nargs="*", default=[], help="only cases whose label contains one of these"
    )
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    os.environ["TUNEFUSE_STUDIES"] = tmp  # fresh studies: nothing resumed from an earlier run
    device = runtime(0)
    rows = []
    for label, fd, inputs in cases():
        if args.cases and not any(c in label for c in args.cases):
            continue
        segment = only_segment(fd, inputs)
        sched = scheduler_for(segment.scheduler)
        default = sched.default_params(segment, device.info)
        points = valid_points(segment, device.info, every_dim=True)
        sweep = {p: us for p in points if (us := time_params(fd, inputs, p)) is not None}
        best_params = min(sweep, key=sweep.get)
        best = sweep[best_params]
        cache = Cache(f"sqlite:///{tmp}/{len(rows)}.sqlite")
        report = tune(
            fd, inputs, trials=args.trials, cache=cache, progress=False, patience=args.trials
        )
        (seg_report,) = report.segments
        study = optuna.load_study(
            study_name=study_name(segment, device.env), storage=_storage(None)
        )
        times = replay(study, default, sweep)
        reached = trials_to_within(times, best)
        searched = trials_to_within(times, best, skip_first=True)
        winner = params_from_dict(segment.scheduler, seg_report.params)
        winner_us = sweep.get(winner) or time_params(fd, inputs, winner)
        rows.append(
            {
                "case": label,
                "scheduler": segment.scheduler.value,
                "space": len(sweep),
                "sweep_best_us": round(best, 1),
                "sweep_best": repr(best_params),
                "default_us": round(sweep.get(default, float("nan")), 1),
                "trials": len(times),
                "trials_to_within_3pct": reached,
                "search_alone_to_within_3pct": searched,
                "tuned_us": round(winner_us, 1),
                "tuned_over_best": round(winner_us / best, 3),
                "tuned": repr(winner),
            }
        )
        print(rows[-1], flush=True)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "trials.json").write_text(
        json.dumps({"device": device.info.name, "cases": rows}, indent=2)
    )
    lines = [
        f"Device: {device.info.name}; {args.trials} trials a case, sweep and replay timed alike",
        "",
        "| case | scheduler | valid points | sweep best µs | default µs | tuned µs | tuned / best | "
        "trials to within 3% | search alone |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['scheduler']} | {r['space']} | {r['sweep_best_us']} | {r['default_us']} | "
            f"{r['tuned_us']} | {r['tuned_over_best']} | {r['trials_to_within_3pct'] or 'not reached'} | "
            f"{r['search_alone_to_within_3pct'] or 'not reached'} |"
        )
    (out / "trials.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
