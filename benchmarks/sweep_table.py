"""A layout sweep as tables, without a GPU: for each cell of `layout_sweep.py`'s JSON lines,
the best first time of the points at each value of two params (threads a row by outputs a
block row, by default), among the points that match `--where`. How heuristics 61's block
rows were read (`benchmarks/surface/tiny_inner_2026-11-29/`).

    python3 benchmarks/sweep_table.py FILE.jsonl [--rows threads_r] [--cols rows_per_block]
        [--where inner=False vector=1 ...]

First times are one run each: the tables rank layouts, they do not measure them; judge a
rule drawn from them on fresh cells (`judge.py`).
"""

from __future__ import annotations

import argparse
import pathlib
from collections.abc import Iterable

from layout_sweep import read_sweep


def parse_where(terms: list[str], known: set[str]) -> dict[str, object]:
    """`key=value` terms as {key: value} (True, False and integers read as such); ValueError
    naming a term that is not key=value or a key no point has."""
    where: dict[str, object] = {}
    for term in terms:
        key, eq, text = term.partition("=")
        if not eq or not key or not text:
            raise ValueError(f"--where {term!r}: expected key=value")
        if key not in known:
            raise ValueError(
                f"--where {key}: not a param of the sweep ({', '.join(sorted(known))})"
            )
        value: object = {"True": True, "False": False}.get(text, text)
        if isinstance(value, str) and value.lstrip("-").isdigit():
            value = int(value)
        where[key] = value
    return where


def best_by(
    points: Iterable[tuple[float, dict]], rows: str, cols: str, where: dict[str, object]
) -> dict[tuple, float]:
    """{(params[rows], params[cols]): the least time} over the points matching `where`."""
    best: dict[tuple, float] = {}
    for us, params in points:
        if any(params.get(k) != v for k, v in where.items()):
            continue
        key = (params[rows], params[cols])
        best[key] = min(best.get(key, us), us)
    return best


def table(best: dict[tuple, float]) -> list[str]:
    """Text lines: a header of the column values, then a row of times a row value ('-' where
    no point matched)."""
    if not best:
        return ["  (no point matches)"]
    row_values = sorted({r for r, _ in best})
    col_values = sorted({c for _, c in best})
    lines = ["      " + " ".join(f"{c!s:>8}" for c in col_values)]
    for r in row_values:
        cells = (f"{best[(r, c)]:8.1f}" if (r, c) in best else f"{'-':>8}" for c in col_values)
        lines.append(f"{r!s:>5} " + " ".join(cells))
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", type=pathlib.Path, help="layout_sweep.py's JSON lines")
    ap.add_argument("--rows", default="threads_r", help="the param along the table's rows")
    ap.add_argument("--cols", default="rows_per_block", help="the param along its columns")
    ap.add_argument("--where", nargs="*", default=[], help="key=value: only matching points")
    args = ap.parse_args(argv)
    try:
        lines = read_sweep(args.file)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    if not lines:
        raise SystemExit(f"{args.file}: not layout_sweep.py's lines (none in it)")
    known = {k for line in lines for _, params in line["first"] for k in params}
    for name, key in (("--rows", args.rows), ("--cols", args.cols)):
        if key not in known:
            raise SystemExit(f"{name} {key}: not a param of the sweep ({', '.join(sorted(known))})")
    try:
        where = parse_where(args.where, known)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    for line in lines:
        default_us = line["first"][0][0]
        print(
            f"{line['cell']}: torch.compile {line.get('torch_compile_us', float('nan')):.1f} us, "
            f"default {default_us:.1f} us (first time); best first time, {args.rows} down, "
            f"{args.cols} across"
        )
        print("\n".join(table(best_by(line["first"][1:], args.rows, args.cols, where))))


if __name__ == "__main__":
    main()
