"""The default plan of every surface cell, without a GPU: which kernels each cell runs and
their params. With --against DIR, only the cells whose plans differ between this checkout and
the one at DIR (e.g. `git archive` of the commit before a heuristic change): the cells a
change moves, to time on the GPU before and after.

    python3 benchmarks/surface_params.py [--patterns col var_mean0 middle] [--mbytes 16 256]
        [--dtypes float bfloat16] [--step 4] [--between N --seed S] [--arch sm_90]
        [--cells-file FILE] [--sources] [--against DIR]

(--root DIR, used by --against: plan with the tunefuse package found at DIR.) --against
compares the params by their fields that differ from the field's default (`non_default`), so
that a field one checkout adds, at its default, moves no cell.

--cells-file takes judge.py's cells (`pattern:dtype:AxBxC` a line) in place of the grid: the
cells drawn for a judge, checked to move before the GPU times them. --sources adds each
kernel's generated code (a digest of it, its version comment and name left out), so that
--against lists the cells a codegen change moves too, not only a heuristic's.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--patterns", nargs="+", default=["row", "col", "var_mean0", "middle"])
    parser.add_argument("--mbytes", nargs="+", type=int, default=[16, 256])
    parser.add_argument("--dtypes", nargs="+", default=["float", "bfloat16"])
    parser.add_argument("--step", type=int, default=4)
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--against", type=pathlib.Path)
    parser.add_argument("--between", type=int, default=0, help="as surface.py's --between")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cells-file", type=pathlib.Path)
    parser.add_argument("--sources", action="store_true")
    parser.add_argument("--root", type=pathlib.Path, help=argparse.SUPPRESS)
    parser.add_argument("--canonical", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cells_file is not None and not args.cells_file.is_file():
        raise SystemExit(f"--cells-file {args.cells_file}: no such file")
    if args.against is not None:
        if not (args.against / "tunefuse").is_dir():
            raise SystemExit(f"--against {args.against}: no tunefuse package there")
        rest = [a for a in sys.argv[1:] if a != "--against" and a != str(args.against)]
        moved, planned = moved_plans(rest, args.against)
        for _, a, b in moved:
            print(f"- {a}\n+ {b}")
        print(f"{len(moved)} of {planned} cells plan differently")
        return
    if args.root is not None:
        sys.path.insert(0, str(args.root.resolve()))
    sys.path.insert(1, str(HERE.parent))
    from patterns import pattern_plan

    from tunefuse import DataType
    from tunefuse.codegen import generate
    from tunefuse.device_info import PROFILES
    from tunefuse.schedulers import scheduler_for

    if args.arch not in PROFILES:
        raise SystemExit(f"--arch {args.arch}: one of {sorted(PROFILES)}")
    device = PROFILES[args.arch]
    for pattern, name, label, shape in cells(args):
        dtype = DataType(name)
        plan = pattern_plan(pattern, shape, dtype, device)
        buffers = {b.id: b.dtype for b in plan.buffers}
        kernels = []
        for s in plan.segments:
            p = scheduler_for(s.scheduler).default_params(s, device)
            kernel = f"{s.scheduler.value} {non_default(p) if args.canonical else p}"
            if args.sources:
                kernel += f" code {code_digest(generate(s, p, device, buffers))}"
            kernels.append(kernel)
        print(f"{pattern} {name} {label}{'x'.join(map(str, shape))}: {'; '.join(kernels)}")


def cells(args: argparse.Namespace) -> list[tuple[str, str, str, tuple[int, ...]]]:
    """(pattern, dtype, label, shape) of each cell: the grid (labelled "16 MB "), or the cells
    of --cells-file (no label); SystemExit naming a cell that is not one."""
    from patterns import between_shapes, shapes

    from tunefuse import DataType

    if args.cells_file is None:
        return [
            (pattern, name, f"{mbytes} MB ", shape)
            for pattern in args.patterns
            for name in args.dtypes
            for mbytes in args.mbytes
            for elements in [mbytes * (1 << 20) // DataType(name).itemsize]
            for shape in shapes(pattern, elements, args.step)
            + between_shapes(pattern, elements, args.between, args.seed)
        ]
    out = []
    for line in args.cells_file.read_text().splitlines():
        if line.strip():
            try:
                out.append(file_cell(line.strip()))
            except ValueError as e:
                raise SystemExit(f"--cells-file {args.cells_file}: {e}") from None
    return out


def file_cell(spec: str) -> tuple[str, str, str, tuple[int, ...]]:
    """A judge.py cell (`pattern:dtype:AxBxC`) as cells() gives it; ValueError naming what is
    wrong: the spelling, the dtype, the pattern or the shape's rank."""
    from judge import parse_cell
    from patterns import COLUMN_PATTERNS, MIDDLE_PATTERNS, ROW_PATTERNS, SURFACE_ONLY

    from tunefuse import DataType

    pattern, name, shape = parse_cell(spec)
    try:
        DataType(name)
    except ValueError:
        raise ValueError(f"cell {spec!r}: no dtype {name!r}") from None
    known = {*ROW_PATTERNS, *SURFACE_ONLY, *COLUMN_PATTERNS, *MIDDLE_PATTERNS}
    if pattern not in known:
        raise ValueError(f"cell {spec!r}: no pattern {pattern!r} (one of {sorted(known)})")
    rank = 3 if pattern in MIDDLE_PATTERNS else 2
    if len(shape) != rank:
        raise ValueError(f"cell {spec!r}: {pattern} takes {rank} extents, not {len(shape)}")
    return pattern, name, "", shape


def code_digest(kernel: object) -> str:
    """A digest of a generated kernel's code, without its version comment (the codegen
    version and params) or its name (a digest of the code with that comment): the same code
    under two versions has one digest."""
    import hashlib

    lines = [
        line.replace(kernel.name, "KERNEL")  # type: ignore[attr-defined]
        for line in kernel.source.splitlines()  # type: ignore[attr-defined]
        if not line.startswith("// tunefuse codegen")
    ]
    return hashlib.sha1("\n".join(lines).encode()).hexdigest()[:12]


def non_default(params: object) -> dict:
    """The fields of a Params dataclass whose values differ from the field's default, nested
    Params (a transpose's pointwise kernel) the same way, in field order."""
    import dataclasses

    out = {}
    for field in dataclasses.fields(params):  # type: ignore[arg-type]
        value = getattr(params, field.name)
        if dataclasses.is_dataclass(value):
            inner = non_default(value)
            if inner:
                out[field.name] = inner
        elif value != field.default:
            out[field.name] = value
    return out


def moved_plans(argv: list[str], against: pathlib.Path) -> tuple[list[tuple[int, str, str]], int]:
    """(index, their plan, ours) of each cell `argv` lists whose plan differs between the
    checkout at `against` and this one (each planned in a child of its own), and how many
    cells were planned."""
    ours = plans([*argv, "--canonical"])
    theirs = plans([*argv, "--canonical", "--root", str(against.resolve())])
    return [(i, a, b) for i, (a, b) in enumerate(zip(theirs, ours)) if a != b], len(ours)


def plans(argv: list[str]) -> list[str]:
    """This script's lines for `argv`, run in a child (one tunefuse a process)."""
    done = subprocess.run(
        [sys.executable, str(HERE), *argv], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(done.stderr.strip().splitlines()[-1] if done.stderr else "failed")
    return done.stdout.splitlines()


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # piped into head
        sys.stderr.close()
