"""A tuning's winner against the default heuristic, measured the way the benchmark table
measures them (GPU): does the tuner's verdict hold outside the tuner?

    python3 benchmarks/tuned_vs_default.py bias_gelu float 8192 4096 [--trials=40] [--rounds=5]

Tunes the case into a throw-away cache, prints what the tuner measured (default and best,
with the winner's params), then times the default and the winner with benchmarks/run.py's
`timed`, alternating, `rounds` times each.
"""

from __future__ import annotations

import pathlib
import statistics
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from run import timed  # noqa: E402
from sweep import only_segment, zoo_case  # noqa: E402

from tunefuse import Cache, DataType, tune  # noqa: E402
from tunefuse.runtime.executor import Executor  # noqa: E402
from tunefuse.schedulers import params_from_dict  # noqa: E402


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    name, dtype_name, rows, cols = args[0], args[1], int(args[2]), int(args[3])
    trials, rounds = int(opts.get("trials", 40)), int(opts.get("rounds", 5))
    fd, inputs = zoo_case(name, DataType(dtype_name), rows, cols)
    segment = only_segment(fd, inputs)
    with tempfile.TemporaryDirectory() as tmp:
        report = tune(
            fd, inputs, trials=trials, progress=False, cache=Cache(f"sqlite:///{tmp}/tune.sqlite")
        )
    (seg,) = report.segments
    print(
        f"tuner: default {seg.default_us:.1f} us, best {seg.best_us:.1f} us after {seg.trials} trials: {seg.params}"
    )
    tuned = params_from_dict(segment.scheduler, seg.params)
    default = Executor(fd.fusion)
    winner = Executor(fd.fusion, params_source=lambda s, d: tuned)
    default.run(inputs)
    winner.run(inputs)
    times: dict[str, list[float]] = {"default": [], "tuned": []}
    for _ in range(rounds):
        times["default"].append(timed(lambda: default.run(inputs)))
        times["tuned"].append(timed(lambda: winner.run(inputs)))
    for label, ts in times.items():
        print(
            f"benchmark timing, {label}: median {statistics.median(ts):.1f} us of {[round(t, 1) for t in ts]}"
        )


if __name__ == "__main__":
    main()
