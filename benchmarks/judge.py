"""A heuristic or codegen change judged on surface cells (GPU): the checkout at --against (the
commit before the change, e.g. `git archive HEAD | tar -x -C xmicro/prev`) against this one,
alternated twice, with torch.compile once in between, each cell's default plan checked against
torch. The cells: `benchmarks/surface_params.py --against DIR` lists the ones a change moves.

    python3 benchmarks/judge.py run --against xmicro/prev --out judged.jsonl col:bfloat16:6x18111961 ...
    python3 benchmarks/judge.py run --against xmicro/prev --out judged.jsonl --cells-file cells.txt
    python3 benchmarks/judge.py summary judged.jsonl        (no GPU)

`run` times each pass in a process of its own (old, new, compile, old, new), so that each
imports its own checkout's tunefuse, and appends one JSON line a cell a pass to --out; a pass
that fails or runs past --pass-timeout is reported and the others still run. `summary` prints
each cell's best old and new time, torch.compile's, their ratios, and the geomeans; a cell
whose result disagreed with torch is printed as INCORRECT.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve()
ROOT = HERE.parents[1]
PASSES = (("old", False), ("new", False), ("compile", True), ("old", False), ("new", False))


# the dtypes the judge times: surface.TORCH_DTYPES's keys (surface imports torch; this does not)
JUDGED_DTYPES = ("float", "bfloat16", "half")


def judged_cell(spec: str) -> tuple[str, str, tuple[int, ...]]:
    """`parse_cell`, of a dtype the judge can time (JUDGED_DTYPES); ValueError otherwise."""
    pattern, dtype, shape = parse_cell(spec)
    if dtype not in JUDGED_DTYPES:
        raise ValueError(
            f"cell {spec!r}: the judge times {', '.join(JUDGED_DTYPES)}, not {dtype!r}"
        )
    return pattern, dtype, shape


def parse_cell(spec: str) -> tuple[str, str, tuple[int, ...]]:
    """`pattern:dtype:AxBxC` as (pattern, dtype, shape); ValueError naming what is wrong."""
    parts = spec.split(":")
    if len(parts) != 3:
        raise ValueError(f"cell {spec!r}: expected pattern:dtype:AxB[xC]")
    pattern, dtype, shape = parts
    try:
        dims = tuple(int(n) for n in shape.split("x"))
    except ValueError:
        raise ValueError(
            f"cell {spec!r}: the shape {shape!r} is not integers joined by x"
        ) from None
    if any(n < 1 for n in dims):
        raise ValueError(f"cell {spec!r}: every extent must be at least 1")
    return pattern, dtype, dims


def cell_times(lines: list[str]) -> tuple[dict[str, dict[str, list[float]]], list[str]]:
    """A judge's JSON lines read: each cell's times by label ("old", "new", and "tc" for
    torch.compile), in the order the cells first appear, and an "INCORRECT label cell" line
    for each result that was wrong."""
    times: dict[str, dict[str, list[float]]] = collections.defaultdict(
        lambda: collections.defaultdict(list)
    )
    wrong = []
    for line in lines:
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        times[row["cell"]][row["label"]].append(row["us"])
        if "compile_us" in row:
            times[row["cell"]]["tc"].append(row["compile_us"])
        if not row["correct"]:
            wrong.append(f"INCORRECT {row['label']} {row['cell']}")
    return times, wrong


def summary(lines: list[str]) -> list[str]:
    """The summary of a judge's JSON lines (see the module docstring)."""
    times, out = cell_times(lines)
    ratios: dict[str, list[float]] = collections.defaultdict(list)
    for cell, t in times.items():
        if not t["old"] or not t["new"]:
            out.append(f"{cell}: no {'old' if not t['old'] else 'new'} time")
            continue
        old, new = min(t["old"]), min(t["new"])
        tc = min(t["tc"]) if t["tc"] else math.nan
        ratios["new/old"].append(new / old)
        if t["tc"]:
            ratios["new/tc"].append(new / tc)
            ratios["old/tc"].append(old / tc)
        out.append(
            f"{cell:42s} old {old:7.1f} tc {tc:7.1f} old/tc {old / tc:.3f} | "
            f"new {new:7.1f} /old {new / old:.3f} /tc {new / tc:.3f}"
        )

    def geomean(xs: list[float]) -> float:
        return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else math.nan

    out.append(
        f"geomean new/old {geomean(ratios['new/old']):.3f} over {len(ratios['new/old'])}; "
        f"new/tc {geomean(ratios['new/tc']):.3f} old/tc {geomean(ratios['old/tc']):.3f}"
    )
    return out


def cell_inputs(pattern: str, dt: str, shape: tuple[int, ...]) -> list:
    """A cell's torch inputs on the GPU: x of `shape`, then a weight or bias along dim 1 for
    each of the pattern's row operands (`patterns.ROW_OPERANDS`); normal draws."""
    import torch
    from patterns import ROW_OPERANDS
    from surface import TORCH_DTYPES

    x = torch.randn(*shape, device="cuda").to(TORCH_DTYPES[dt])
    operands = [
        torch.randn(shape[1], device="cuda").to(TORCH_DTYPES[dt])
        for _ in range(ROW_OPERANDS.get(pattern, 0))
    ]
    return [x, *operands]


def time_cells(cells: list[str], label: str, with_compile: bool) -> None:
    """One pass (GPU): each cell's default plan with the tunefuse imported (sys.path), checked
    against torch and timed as benchmarks/run.py times; torch.compile too with_compile."""
    import torch
    from patterns import pattern_fusion
    from run import timed
    from surface import _torch_fn

    from tunefuse import DataType

    torch._dynamo.config.cache_size_limit = 1024
    for spec in cells:
        pattern, dt, shape = parse_cell(spec)
        fd = pattern_fusion(pattern, DataType(dt))
        inputs = cell_inputs(pattern, dt, shape)
        x = inputs[0]
        ours = fd.execute(inputs, cache=None)
        ref = _torch_fn(pattern)(*inputs)
        ref = ref if isinstance(ref, tuple) else (ref,)
        atol = 2e-2 * (x.numel() / max(ours[0].numel(), 1)) ** 0.5
        ok = all(
            torch.allclose(o.float(), r.float(), rtol=2e-2, atol=atol, equal_nan=True)
            for o, r in zip(ours, ref, strict=True)
        )
        row = {
            "label": label,
            "cell": spec,
            "us": timed(lambda: fd.execute(inputs, cache=None)),  # noqa: B023
            "correct": ok,
        }
        if with_compile:
            compiled = torch.compile(_torch_fn(pattern), dynamic=False)
            compiled(*inputs)
            row["compile_us"] = timed(lambda: compiled(*inputs))  # noqa: B023
        print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--against", type=pathlib.Path, required=True)
    run.add_argument("--out", type=pathlib.Path, required=True)
    run.add_argument("--cells-file", type=pathlib.Path)
    run.add_argument("--pass-timeout", type=float, default=300.0)
    run.add_argument("cells", nargs="*")
    one = sub.add_parser("pass")  # one pass, in its own process (what `run` starts)
    one.add_argument("--label", required=True)
    one.add_argument("--compile", action="store_true")
    one.add_argument("cells", nargs="+")
    show = sub.add_parser("summary")
    show.add_argument("file", type=pathlib.Path)
    args = parser.parse_args()
    if args.command == "summary":
        if not args.file.is_file():
            raise SystemExit(f"summary: no file {args.file}")
        print("\n".join(summary(args.file.read_text().splitlines())))
        return
    if args.command == "pass":
        for path in ("benchmarks", "tests"):
            sys.path.insert(0, str(pathlib.Path.cwd() / path))
        sys.path.insert(0, str(pathlib.Path.cwd()))
        time_cells(args.cells, args.label, args.compile)
        return
    if not (args.against / "tunefuse").is_dir():
        raise SystemExit(f"--against {args.against}: no tunefuse package there")
    cells = list(args.cells)
    if args.cells_file is not None:
        if not args.cells_file.is_file():
            raise SystemExit(f"--cells-file {args.cells_file}: no such file")
        cells += [c.strip() for c in args.cells_file.read_text().splitlines() if c.strip()]
    if not cells:
        raise SystemExit("run: no cells (name them, or --cells-file)")
    try:
        for c in cells:
            judged_cell(c)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    roots = {"old": args.against.resolve(), "new": ROOT, "compile": ROOT}
    with args.out.open("a") as out:
        for label, with_compile in PASSES:
            command = [sys.executable, str(HERE), "pass", "--label", label, *cells]
            if with_compile:
                command.insert(-len(cells), "--compile")
            try:
                done = subprocess.run(
                    command,
                    cwd=roots[label],
                    stdout=out,
                    stderr=subprocess.PIPE,
                    text=True,
                    timeout=args.pass_timeout,
                )
            except subprocess.TimeoutExpired:
                print(f"pass {label}: past {args.pass_timeout} s", file=sys.stderr)
                continue
            if done.returncode != 0:
                print(
                    f"pass {label}: exit {done.returncode}\n{done.stderr[-2000:]}", file=sys.stderr
                )
            out.flush()


if __name__ == "__main__":
    main()
