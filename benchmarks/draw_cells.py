"""Fresh cells to judge a change on, without a GPU: seeded draws of judge.py's cells
(`pattern:dtype:shape`), the reduced extent and the size log-uniform within the ranges given,
and, with --against DIR, only those whose plans the change moves (`surface_params.py
--against`), --keep of them at most. Judging on cells drawn after a rule was written, not on
the ones it was designed on, is how a heuristic is checked between the grid's points.

    python3 benchmarks/draw_cells.py --patterns layernorm rmsnorm --dtypes float \\
        --reduced 8 1200 --mbytes 2 64 --count 300 --seed 3002 \\
        [--against xmicro/prev [--sources] --keep 32]

One cell a line on stdout (sorted), ready for `judge.py run --cells-file`. A middle pattern's
innermost extent is log-uniform from 1 to 512, as `patterns.between_shapes` draws it. The same
arguments give the same cells.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import random
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve()
sys.path[:0] = [str(HERE.parent), str(HERE.parents[1])]

from patterns import COLUMN_PATTERNS, MIDDLE_PATTERNS, ROW_PATTERNS, laid_out  # noqa: E402
from surface_params import moved_plans  # noqa: E402

from tunefuse import DataType  # noqa: E402

PATTERNS = (*ROW_PATTERNS, *COLUMN_PATTERNS, *MIDDLE_PATTERNS)


def log_uniform(rng: random.Random, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def draw(
    patterns: list[str],
    dtypes: list[str],
    reduced: tuple[int, int],
    mbytes: tuple[float, float],
    count: int,
    seed: int,
) -> list[str]:
    """`count` cells (duplicates dropped): a pattern and a dtype uniformly, a reduced extent
    in `reduced` and a size in `mbytes` log-uniformly, the outputs the size's elements over
    the reduced (and innermost) extent, at least 1."""
    rng = random.Random(seed)
    cells: list[str] = []
    for _ in range(count):
        pattern, name = rng.choice(patterns), rng.choice(dtypes)
        red = round(log_uniform(rng, *reduced))
        elements = log_uniform(rng, *mbytes) * (1 << 20) / DataType(name).itemsize
        inner = round(log_uniform(rng, 1, 512)) if pattern in MIDDLE_PATTERNS else 1
        shape = laid_out(pattern, max(1, round(elements / (red * inner))), red, inner)
        cell = f"{pattern}:{name}:{'x'.join(map(str, shape))}"
        if cell not in cells:
            cells.append(cell)
    return sorted(cells)


def moved(cells: list[str], against: pathlib.Path, sources: bool = False) -> list[str]:
    """The cells whose plans differ between this checkout and the one at `against`
    (`surface_params.moved_plans` of a cells file); with `sources`, also those whose plans
    are the same but whose generated code is not (a codegen change)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(cells) + "\n")
        listed = pathlib.Path(f.name)
    try:
        extra = ["--sources"] if sources else []
        pairs, _ = moved_plans(["--cells-file", str(listed), *extra], against)
    finally:
        listed.unlink()
    changed = {index for index, _, _ in pairs}
    return [c for i, c in enumerate(cells) if i in changed]


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--patterns", nargs="+", required=True, help=f"of {', '.join(PATTERNS)}")
    ap.add_argument("--dtypes", nargs="+", default=["float", "bfloat16"])
    ap.add_argument("--reduced", nargs=2, type=int, required=True, metavar=("LEAST", "MOST"))
    ap.add_argument("--mbytes", nargs=2, type=float, default=[16, 16], metavar=("LEAST", "MOST"))
    ap.add_argument("--count", type=int, default=100, help="cells drawn (before --against)")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--against", type=pathlib.Path, help="keep the cells a change moves")
    ap.add_argument("--keep", type=int, help="at most this many of them (a seeded sample)")
    ap.add_argument(
        "--sources", action="store_true", help="with --against: a change of code moves a cell"
    )
    args = ap.parse_args(argv)
    unknown = sorted(set(args.patterns) - set(PATTERNS))
    if unknown:
        ap.error(f"--patterns {' '.join(unknown)}: no such pattern (one of {', '.join(PATTERNS)})")
    for name in args.dtypes:
        try:
            DataType(name)
        except ValueError:
            ap.error(f"--dtypes {name}: no such dtype")
    if not 1 <= args.reduced[0] <= args.reduced[1]:
        ap.error(f"--reduced {args.reduced[0]} {args.reduced[1]}: need 1 <= LEAST <= MOST")
    if not 0 < args.mbytes[0] <= args.mbytes[1]:
        ap.error(f"--mbytes {args.mbytes[0]:g} {args.mbytes[1]:g}: need 0 < LEAST <= MOST")
    if args.count < 1:
        ap.error(f"--count {args.count}: at least 1")
    if args.keep is not None and args.keep < 1:
        ap.error(f"--keep {args.keep}: at least 1")
    if args.keep is not None and args.against is None:
        ap.error("--keep samples the moved cells: it needs --against")
    if args.sources and args.against is None:
        ap.error("--sources compares generated code: it needs --against")
    if args.against is not None and not (args.against / "tunefuse").is_dir():
        ap.error(f"--against {args.against}: no tunefuse package there")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    cells = draw(
        args.patterns,
        args.dtypes,
        (args.reduced[0], args.reduced[1]),
        (args.mbytes[0], args.mbytes[1]),
        args.count,
        args.seed,
    )
    if args.against is not None:
        cells = moved(cells, args.against, args.sources)
        if args.keep is not None and len(cells) > args.keep:
            cells = sorted(random.Random(args.seed).sample(cells, args.keep))
        print(f"{len(cells)} cells move", file=sys.stderr)
    print("\n".join(cells))


if __name__ == "__main__":
    main()
