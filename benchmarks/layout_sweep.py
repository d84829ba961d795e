"""Every held layout of a normalization, timed (GPU): which layout wins a cell, and so what a
default heuristic misses there (how heuristics 55's half-warp rows were found:
`benchmarks/surface/half_warp_rows_2026-11-28/`).

    python3 benchmarks/layout_sweep.py --out FILE CELL [CELL ...]
    python3 benchmarks/layout_sweep.py --host CELL ...   (the points and their compiles, no GPU)

CELL is judge.py's pattern:dtype:shape, of a surface pattern whose plan is one normalization
kernel. The points: threads a row (1-512; `--threads`) x block threads (64-512; `--blocks`) x
rows a lane (1, 2; `--rows-a-lane`) x the launch bounds' blocks an SM (none; `--min-blocks`) x
whole_chunks x vector (1-8) [x a strided row's threads along x and along y, `--both-sides`]
(`Grid`), each row held in registers (cache_row) by the fewest elements a
thread that hold it, every point `is_valid` accepts; the default first. All are compiled
first (NVRTC in threads), each is timed once (20 repetitions) and checked against the
default's result, then the default and the best five run in 3 alternating rounds with
torch.compile (`run.timed`, L2 flushed). One JSON line a cell: torch.compile's µs, every
point's first time, the finalists' medians. First times are one run each: a ranking, not a
measurement; the finalists' medians are.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import itertools
import json
import pathlib
import statistics
import sys
from dataclasses import asdict, dataclass, replace

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from judge import parse_cell  # noqa: E402
from patterns import (  # noqa: E402
    COLUMN_PATTERNS,
    MIDDLE_PATTERNS,
    ROW_PATTERNS,
    pattern_fusion,
    planning_inputs,
)

from tunefuse import DataType  # noqa: E402
from tunefuse.codegen import generate  # noqa: E402
from tunefuse.compiler import CompileError, compile_kernel  # noqa: E402
from tunefuse.planning.kernel_ir import SchedulerKind  # noqa: E402
from tunefuse.schedulers import normalization, reduction, with_values  # noqa: E402

THREADS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
BLOCKS = (64, 128, 256, 512)
ROWS_A_LANE = (1, 2)
VECTORS = (1, 2, 4, 8)
MIN_BLOCKS = (0,)
FINALISTS = 5


def one_normalization(pattern: str, dtype: DataType, shape: tuple[int, ...], device):  # noqa: ANN001, ANN201
    """(fusion definition, its one normalization segment, buffer dtypes); ValueError naming
    what the plan has instead."""
    rank = 3 if pattern in MIDDLE_PATTERNS else 2
    if len(shape) != rank:
        raise ValueError(f"{pattern} takes {rank} extents, not {len(shape)}")
    known = (*ROW_PATTERNS, *COLUMN_PATTERNS, *MIDDLE_PATTERNS)
    if pattern not in known:
        raise ValueError(f"{pattern}: not a surface pattern ({', '.join(known)})")
    fd = pattern_fusion(pattern, dtype)
    plan = fd.plan(planning_inputs(fd, shape, dtype), device=device)
    kinds = [s.scheduler.value for s in plan.segments]
    if kinds != [SchedulerKind.NORMALIZATION.value]:
        raise ValueError(f"{pattern} {shape}: the plan is {kinds}, not one normalization kernel")
    return fd, plan.segments[0], {b.id: b.dtype for b in plan.buffers}


def read_sweep(path: pathlib.Path) -> list[dict]:
    """The JSON lines `sweep_cell` wrote to `path`, each with its cell and first times;
    ValueError naming the file where it is missing, not JSON lines, or not this tool's."""
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON lines ({e})") from None
    if any(not isinstance(row, dict) or not {"cell", "first"} <= set(row) for row in rows):
        raise ValueError(f"{path}: not layout_sweep.py's lines (one without 'cell' and 'first')")
    return rows


@dataclass(frozen=True)
class Grid:
    """What a sweep takes the product of: a row's threads, block threads, rows a lane, the
    launch bounds' blocks an SM (registers capped to fit them; 0: none), and the values of
    `inner` (a strided row's threads along x or along y; None: the default's alone). Each
    point also takes whole_chunks either way and every vector."""

    threads_r: tuple[int, ...] = THREADS
    blocks: tuple[int, ...] = BLOCKS
    rows_a_lane: tuple[int, ...] = ROWS_A_LANE
    min_blocks: tuple[int, ...] = MIN_BLOCKS
    sides: tuple[bool, ...] | None = None


def layout_points(segment, device, grid: Grid = Grid()) -> list:  # noqa: ANN001
    """The default, then every valid held layout of `grid` (a row's elements a thread the
    fewest that hold it: whole vectors along a contiguous row, elements along a strided one),
    each once, its weight held from before the row loop where the defaults' rule
    (`normalization.hoists_invariants`) would for that layout."""
    default = normalization.default_params(segment, device)
    _, n_red = reduction.sizes(segment)
    points = [default]
    for threads, block, lanes, whole, vector, inner, least in itertools.product(
        grid.threads_r,
        grid.blocks,
        grid.rows_a_lane,
        (False, True),
        VECTORS,
        grid.sides or (default.inner,),
        grid.min_blocks,
    ):
        if block % threads:
            continue
        if inner:
            ept = normalization.vectors_of_share(n_red, threads, vector)
        else:
            ept = -(-n_red // threads)
        if ept > 64:
            continue
        p = with_values(
            default,
            {
                "threads_r": threads,
                "rows_per_block": block // threads,
                "elements_per_thread": ept,
                "rows_per_lane": lanes,
                "whole_chunks": whole,
                "vector": vector,
                "cache_row": True,
                "shared_row": False,
                "cluster": 1,
                "blocks_per_sm": 0,
                "min_blocks": least,
                "unroll": 1,
                "stage_rows": False,
                "inner": inner,
            },
        )
        p = replace(p, hoist_invariants=normalization.hoists_invariants(segment, device, p))
        if p not in points and normalization.is_valid(segment, device, p) is None:
            points.append(p)
    return points


def compiled(segment, device, dtypes: dict, points: list, threads: int = 16) -> list:  # noqa: ANN001
    """The points whose kernels NVRTC compiles (in `threads` threads; each refusal printed)."""

    def compiles(p) -> bool:  # noqa: ANN001
        src = generate(segment, p, device, dtypes)
        try:
            compile_kernel(src.source, src.name, device.arch)
        except CompileError as e:
            print(f"not compiled: {p}: {e.log[:200]}", flush=True)
            return False
        return True

    # The first alone: NVRTC's bindings are imported on first use, not safely from threads.
    kept = [compiles(p) for p in points[:1]]
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        kept += list(pool.map(compiles, points[1:]))
    return [p for p, ok in zip(points, kept) if ok]


def sweep_cell(spec: str, out: pathlib.Path, grid: Grid = Grid()) -> None:
    """One cell on the GPU: the points timed and checked, the finalists against
    torch.compile; a JSON line appended to `out`, a summary printed."""
    import torch
    from judge import cell_inputs
    from run import timed
    from surface import _torch_fn

    from tunefuse.runtime.device import runtime
    from tunefuse.runtime.executor import Executor

    pattern, dt, shape = parse_cell(spec)
    dtype = DataType(dt)
    device = runtime(0).info
    fd, segment, dtypes = one_normalization(pattern, dtype, shape, device)
    points = compiled(segment, device, dtypes, layout_points(segment, device, grid))
    inputs = cell_inputs(pattern, dt, shape)

    def call_of(p):  # noqa: ANN001, ANN202
        ex = Executor(fd.fusion, params_source=lambda s, d, p=p: p)
        return lambda: ex.run(inputs)

    want = call_of(points[0])()[0].float()
    rtol, atol = (4 * t for t in dtype.tolerance)
    first = []
    for p in points:
        call = call_of(p)
        got = call()[0].float()
        if not bool(((got - want).abs() <= atol + rtol * want.abs()).all()):
            raise SystemExit(f"{spec}: {p} gives another result than the default's")
        first.append((timed(call, reps=20, warmup=3), p))
    ranked = sorted(first, key=lambda r: r[0])
    finalists = [points[0], *[p for _, p in ranked if p != points[0]][:FINALISTS]]
    torch._dynamo.reset()
    peer = torch.compile(_torch_fn(pattern), dynamic=False)
    peer(*inputs)
    calls = {"torch.compile": lambda: peer(*inputs)}
    calls.update({i: call_of(p) for i, p in enumerate(finalists)})
    times = {k: [] for k in calls}
    for _ in range(3):
        for k, c in calls.items():
            times[k].append(timed(c))
    medians = {k: statistics.median(v) for k, v in times.items()}
    with out.open("a") as f:
        row = {
            "cell": spec,
            "torch_compile_us": round(medians["torch.compile"], 2),
            "first": [(round(us, 2), asdict(p)) for us, p in first],
            "final": [(round(medians[i], 2), asdict(p)) for i, p in enumerate(finalists)],
        }
        f.write(json.dumps(row) + "\n")
    print(f"{spec}: {len(points)} points; torch.compile {medians['torch.compile']:.1f} us")
    for i, p in enumerate(finalists):
        print(
            f"  {medians[i]:7.1f} us  threads_r {p.threads_r} rows_per_block {p.rows_per_block} "
            f"elements {p.elements_per_thread} vector {p.vector} rows_per_lane "
            f"{p.rows_per_lane} whole_chunks {p.whole_chunks} inner {p.inner} "
            f"min_blocks {p.min_blocks}"
            f"{'  (default)' if i == 0 else ''}",
            flush=True,
        )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cells", nargs="+", help="pattern:dtype:shape (judge.py's cells)")
    ap.add_argument("--out", type=pathlib.Path, help="JSON lines appended here (GPU)")
    ap.add_argument("--host", action="store_true", help="points and compiles only, sm_90")
    ap.add_argument("--arch", default="sm_90", help="--host: sm_80 or sm_90")
    ap.add_argument(
        "--blocks", type=int, nargs="+", default=list(BLOCKS), help="block threads swept"
    )
    ap.add_argument(
        "--rows-a-lane", type=int, nargs="+", default=list(ROWS_A_LANE), help="rows a lane swept"
    )
    ap.add_argument(
        "--both-sides",
        action="store_true",
        help="strided rows: sweep a row's threads along x (inner) and along y, not the default's",
    )
    ap.add_argument(
        "--min-blocks",
        type=int,
        nargs="+",
        default=list(MIN_BLOCKS),
        help="launch bounds' blocks an SM swept (0: none; registers capped to fit the rest)",
    )
    ap.add_argument(
        "--threads", type=int, nargs="+", default=list(THREADS), help="a row's threads swept"
    )
    args = ap.parse_args(argv)
    for name, values in (
        ("--blocks", args.blocks),
        ("--rows-a-lane", args.rows_a_lane),
        ("--threads", args.threads),
    ):
        if any(v < 1 or v & (v - 1) for v in values):
            raise SystemExit(f"{name} {values}: powers of two, 1 or more")
    if any(v < 0 for v in args.min_blocks):
        raise SystemExit(f"--min-blocks {args.min_blocks}: 0 (none) or more blocks an SM")
    grid = Grid(
        threads_r=tuple(args.threads),
        blocks=tuple(args.blocks),
        rows_a_lane=tuple(args.rows_a_lane),
        min_blocks=tuple(args.min_blocks),
        sides=(False, True) if args.both_sides else None,
    )
    try:
        for spec in args.cells:
            pattern, dt, shape = parse_cell(spec)
            DataType(dt)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    if not args.host and args.out is None:
        raise SystemExit("--out FILE is needed to time on the GPU (or --host)")
    for spec in args.cells:
        if args.host:
            from tunefuse.device_info import PROFILES

            if args.arch not in PROFILES:
                raise SystemExit(f"--arch {args.arch}: one of {sorted(PROFILES)}")
            device = PROFILES[args.arch]
            pattern, dt, shape = parse_cell(spec)
            try:
                _, segment, dtypes = one_normalization(pattern, DataType(dt), shape, device)
            except ValueError as e:
                raise SystemExit(str(e)) from None
            points = layout_points(segment, device, grid)
            kept = compiled(segment, device, dtypes, points)
            print(f"{spec}: {len(points)} points, {len(kept)} compiled for {args.arch}")
        else:
            try:
                sweep_cell(spec, args.out, grid)
            except ValueError as e:
                raise SystemExit(str(e)) from None


if __name__ == "__main__":
    main()
