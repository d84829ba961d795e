"""The default plan of every surface cell, without a GPU: which kernels each cell runs and
their params. With --against DIR, only the cells whose plans differ between this checkout and
the one at DIR (e.g. `git archive` of the commit before a heuristic change): the cells a
change moves, to time on the GPU before and after.

    python3 benchmarks/surface_params.py [--patterns col var_mean0 middle] [--mbytes 16 256]
        [--dtypes float bfloat16] [--step 4] [--between N --seed S] [--arch sm_90]
        [--against DIR]

(--root DIR, used by --against: plan with the tunefuse package found at DIR.) --against
compares the params by their fields that differ from the field's default (`non_default`), so
that a field one checkout adds, at its default, moves no cell.
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
    parser.add_argument("--root", type=pathlib.Path, help=argparse.SUPPRESS)
    parser.add_argument("--canonical", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.against is not None:
        if not (args.against / "tunefuse").is_dir():
            raise SystemExit(f"--against {args.against}: no tunefuse package there")
        rest = [a for a in sys.argv[1:] if a != "--against" and a != str(args.against)]
        ours = plans([*rest, "--canonical"])
        theirs = plans([*rest, "--canonical", "--root", str(args.against.resolve())])
        moved = [(a, b) for a, b in zip(theirs, ours) if a != b]
        for a, b in moved:
            print(f"- {a}\n+ {b}")
        print(f"{len(moved)} of {len(ours)} cells plan differently")
        return
    if args.root is not None:
        sys.path.insert(0, str(args.root.resolve()))
    sys.path.insert(1, str(HERE.parent))
    from patterns import between_shapes, pattern_fusion, planning_inputs, shapes

    from tunefuse import DataType
    from tunefuse.device_info import PROFILES
    from tunefuse.schedulers import scheduler_for

    if args.arch not in PROFILES:
        raise SystemExit(f"--arch {args.arch}: one of {sorted(PROFILES)}")
    device = PROFILES[args.arch]
    for pattern in args.patterns:
        for name in args.dtypes:
            dtype = DataType(name)
            fd = pattern_fusion(pattern, dtype)
            for mbytes in args.mbytes:
                elements = mbytes * (1 << 20) // dtype.itemsize
                for shape in shapes(pattern, elements, args.step) + between_shapes(
                    pattern, elements, args.between, args.seed
                ):
                    inputs = planning_inputs(fd, shape, dtype)
                    plan = fd.plan(inputs, device=device)
                    params = [
                        scheduler_for(s.scheduler).default_params(s, device) for s in plan.segments
                    ]
                    kernels = "; ".join(
                        f"{s.scheduler.value} {non_default(p) if args.canonical else p}"
                        for s, p in zip(plan.segments, params, strict=True)
                    )
                    print(f"{pattern} {name} {mbytes} MB {'x'.join(map(str, shape))}: {kernels}")


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
