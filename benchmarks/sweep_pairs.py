"""A layout sweep's pairs, without a GPU: the points of `layout_sweep.py`'s JSON lines that
differ only in one flag, and their first-time ratio (flag on / off) grouped by the elements a
thread holds of its rows (`normalization.held_elements`). How heuristics 60's whole_chunks
bound was read (`benchmarks/surface/lane_stores_2026-11-29/`).

    python3 benchmarks/sweep_pairs.py FILE.jsonl [--flag whole_chunks] [--edges 8 16 24 32]

First times are one run each: the pairs rank a flag's effect over many layouts, they do not
measure it; judge a rule drawn from them on fresh cells (`judge.py`).
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
from collections.abc import Iterable

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from judge import parse_cell  # noqa: E402
from layout_sweep import one_normalization, read_sweep  # noqa: E402

from tunefuse import DataType  # noqa: E402
from tunefuse.device_info import PROFILES  # noqa: E402
from tunefuse.schedulers import normalization, with_values  # noqa: E402

FLAGS = ("whole_chunks", "hoist_invariants", "tree_loop", "stage_rows")


def pairs(points: Iterable[tuple[float, dict]], flag: str) -> list[tuple[float, dict]]:
    """(time with `flag` on / time with it off, the params with it off) of each two points
    that differ in `flag` alone."""
    by_rest: dict[tuple, dict[bool, tuple[float, dict]]] = {}
    for us, params in points:
        rest = tuple(sorted((k, v) for k, v in params.items() if k != flag))
        by_rest.setdefault(rest, {})[bool(params[flag])] = (us, params)
    return [
        (two[True][0] / two[False][0], two[False][1]) for two in by_rest.values() if len(two) == 2
    ]


def bucket(held: int, edges: list[int]) -> str:
    """The range of `edges` (ascending) that `held` falls in, as text: 'under 8', '8-15',
    '32 or more'."""
    if held < edges[0]:
        return f"under {edges[0]}"
    for lo, hi in zip(edges, edges[1:]):
        if lo <= held < hi:
            return f"{lo}-{hi - 1}"
    return f"{edges[-1]} or more"


def cell_table(row: dict, flag: str, edges: list[int]) -> list[tuple[str, float, int]]:
    """(bucket, geomean of its ratios, pairs) of one sweep line, buckets in `edges`' order."""
    pattern, dt, shape = parse_cell(row["cell"])
    _, segment, _ = one_normalization(pattern, DataType(dt), shape, PROFILES["sm_90"])
    base = normalization.default_params(segment, PROFILES["sm_90"])
    groups: dict[str, list[float]] = {}
    for ratio, params in pairs(row["first"], flag):
        held = normalization.held_elements(segment, with_values(base, params))
        groups.setdefault(bucket(held, edges), []).append(ratio)
    order = [bucket(e - 1, edges) for e in edges] + [bucket(edges[-1], edges)]
    return [(b, statistics.geometric_mean(groups[b]), len(groups[b])) for b in order if b in groups]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", type=pathlib.Path, help="layout_sweep.py's JSON lines")
    ap.add_argument("--flag", default="whole_chunks", help=f"one of {', '.join(FLAGS)}")
    ap.add_argument("--edges", type=int, nargs="+", default=[8, 16, 24, 32])
    args = ap.parse_args(argv)
    if args.flag not in FLAGS:
        raise SystemExit(f"--flag {args.flag}: one of {', '.join(FLAGS)}")
    if any(e < 1 for e in args.edges) or sorted(set(args.edges)) != args.edges:
        raise SystemExit(f"--edges {args.edges}: ascending, distinct, 1 or more")
    try:
        rows = read_sweep(args.file)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    for row in rows:
        try:
            table = cell_table(row, args.flag, args.edges)
        except ValueError as e:
            raise SystemExit(f"{row['cell']}: {e}") from None
        print(f"{row['cell']}: {args.flag} on / off, by elements a thread holds")
        for name, g, n in table:
            print(f"  {name:>12}  {g:.3f}  ({n} pairs)")


if __name__ == "__main__":
    main()
