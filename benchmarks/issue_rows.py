"""Issue 19's four unseen fusions, measured as its table measures them (GPU): the default
heuristics, a 30-trial tuning, torch.compile, Liger-Kernel where it has the op, and the
limit (the bytes moved at the copy bandwidth of the same run).

    python3 benchmarks/issue_rows.py --out DIR [--trials 30] [--rounds 3] [--only softmax ...]

Each fusion is tuned into a throw-away SQLite cache; its tuned run is an Executor reading
that cache, as a user's library call would. The rounds alternate every column (drift hits
them all alike); a column's figure is the median of its rounds' medians. Every column's
outputs are checked against the default's. Writes issue_rows.json and issue_rows.md.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

import torch  # noqa: E402
from ab import case  # noqa: E402
from run import copy_bandwidth, moved_bytes, timed  # noqa: E402
from surface import _torch_fn  # noqa: E402

from tunefuse import Cache, DataType, tune  # noqa: E402
from tunefuse.runtime.executor import Executor  # noqa: E402

# (label, case as ab.py names it, dtype, shape as that case lays it out): the rows.
ROWS = (
    ("var_mean over dim 0", "var_mean0", "float", (262144, 256)),
    ("softmax", "softmax", "float", (2048, 50257)),
    ("logsumexp", "logsumexp", "bfloat16", (8192, 32000)),
    ("sum over the middle dim", "middle", "float", (64, 512, 1024)),
)


def liger_of(name: str):  # noqa: ANN201
    """Liger-Kernel's function for the case, or None (no such op, or not installed)."""
    if name != "softmax":
        return None
    try:
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
    except ImportError:
        return None
    return LigerSoftmaxFunction.apply


def as_list(result) -> list:  # noqa: ANN001
    return list(result) if isinstance(result, (list, tuple)) else [result]


def agrees(got: list, want: list, dtype: DataType) -> bool:
    """Every output within 4x the dtype's tolerance of the default's (another reduction
    order rounds differently); torch's var_mean returns (var, mean) as the fusion does."""
    if len(got) != len(want):
        return False
    rtol, atol = (4 * t for t in dtype.tolerance)
    for g, w in zip(got, want, strict=True):
        g, w = g.float().reshape(w.shape), w.float()
        if not bool(((g - w).abs() <= atol + rtol * w.abs()).all()):
            return False
    return True


def measure(label: str, name: str, dtype_name: str, shape, trials: int, rounds: int) -> dict:  # noqa: ANN001
    dtype = DataType(dtype_name)
    fd, inputs = case(name, dtype, shape)
    default = Executor(fd.fusion, params_source=lambda s, d: None)
    want = as_list(default.run(inputs))
    row: dict = {"fusion": label, "case": name, "dtype": dtype_name, "shape": list(shape)}
    with tempfile.TemporaryDirectory() as tmp:
        cache = Cache(f"sqlite:///{tmp}/tune.sqlite")
        report = tune(fd, inputs, trials=trials, patience=trials, progress=False, cache=cache)
        row["tuner"] = [
            {
                "default_us": s.default_us,
                "best_us": s.best_us,
                "trials": s.trials,
                "params": s.params,
            }
            for s in report.segments
        ]
        tuned = Executor(fd.fusion, cache=cache)
        calls = {"default": lambda: default.run(inputs), "tuned": lambda: tuned.run(inputs)}
        compiled = torch.compile(_torch_fn(name))  # the surface's peer: run.torch_of for norms
        calls["torch.compile"] = lambda: compiled(*inputs)
        liger = liger_of(name)
        if liger is not None:
            calls["Liger-Kernel"] = lambda: liger(*inputs)
        row["correct"] = {}
        for column, call in calls.items():
            row["correct"][column] = agrees(as_list(call()), want, dtype)
        times: dict[str, list[float]] = {column: [] for column in calls}
        for _ in range(rounds):
            for column, call in calls.items():
                times[column].append(timed(call))
        row["rounds_us"] = times
        row["us"] = {column: statistics.median(ts) for column, ts in times.items()}
    row["moved_bytes"] = moved_bytes(inputs, want)
    return row


def table(rows: list[dict], bandwidth: float) -> str:
    peers = ("torch.compile", "Liger-Kernel")
    lines = [
        f"Device: {torch.cuda.get_device_name()}; copy {bandwidth:.2f} TB/s. us, medians of the rounds' medians.",
        "",
        "| fusion | default | tuned | torch.compile | Liger-Kernel | limit"
        " | default / fastest peer | tuned / fastest peer | correct |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        us = r["us"]
        fastest = min(us[p] for p in peers if p in us)
        limit = r["moved_bytes"] / (bandwidth * 1e12) * 1e6
        cells = [
            f"{r['fusion']} {r['dtype']} {list(r['shape'])}",
            f"{us['default']:.1f}",
            f"{us['tuned']:.1f}",
            f"{us['torch.compile']:.1f}",
            f"{us['Liger-Kernel']:.1f}" if "Liger-Kernel" in us else "-",
            f"{limit:.1f}",
            f"{us['default'] / fastest:.2f}",
            f"{us['tuned'] / fastest:.2f}",
            str(all(r["correct"].values())),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None, help="cases (ab.py names) to run")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    bandwidth = copy_bandwidth()
    rows = []
    for label, name, dtype_name, shape in ROWS:
        if args.only and name not in args.only:
            continue
        rows.append(measure(label, name, dtype_name, shape, args.trials, args.rounds))
        print(json.dumps({k: rows[-1][k] for k in ("fusion", "us", "correct")}), flush=True)
    (args.out / "issue_rows.json").write_text(
        json.dumps(
            {"device": torch.cuda.get_device_name(), "copy_tbps": bandwidth, "rows": rows}, indent=1
        )
    )
    text = table(rows, bandwidth)
    (args.out / "issue_rows.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
