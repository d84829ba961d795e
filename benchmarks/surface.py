"""The performance surface of the schedulers: for each pattern (reductions, normalizations,
pointwise with a broadcast operand, a transpose), a logarithmic grid of shapes at fixed
total bytes, from one huge row to many tiny ones, with the default
heuristics, side by side with torch.compile and copy bandwidth in the same run. Judges a
heuristic between the benchmark's points, not only on them.

    python3 benchmarks/surface.py --out DIR [--patterns row col var_mean0 middle middle_var_mean softmax
        layernorm rmsnorm logsumexp bias_gelu transpose2d] [--mbytes 16 256]
        [--dtypes float bfloat16] [--step 4] [--min-reduced N] [--max-reduced N]
        [--widths 2560 3000 ...] [--no-peers] [--between N [--seed S] [--no-grid]]

--widths replaces a row pattern's grid by rows of those lengths (as many rows as the bytes
give): the widths between the grid's powers of two. --no-peers skips torch.compile (an older
checkout's run beside this one's). --between N adds N seeded cells off the grid a pattern,
dtype and size (`patterns.between_shapes`: odd extents, half to all of the size's bytes, the
middle patterns' innermost extent 1 to 512): a heuristic fitted to the grid's points shows
there. They are marked "(between)" in the table and left out of the heat maps.

Writes DIR/surface.json and DIR/surface.md (a table a pattern: % of copy bandwidth, and the
ratio to torch.compile, per cell), and DIR/surface_<pattern>.png heat maps where matplotlib is
installed. Method as benchmarks/run.py: CUDA events, median of 50 after warm-up, L2 flushed.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import statistics
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

sys.path.insert(0, str(ROOT / "tests"))

from patterns import (  # noqa: E402
    MIDDLE_PATTERNS,
    NORMALIZATIONS,
    POINTWISE,
    ROW_OPERANDS,
    ROW_PATTERNS,
    between_shapes,
    pattern_fusion,
    reduced_extent,
    shapes,
)
from run import copy_bandwidth, timed, torch_of  # noqa: E402

from tunefuse import DataType  # noqa: E402

TORCH_DTYPES = {"float": torch.float32, "bfloat16": torch.bfloat16, "half": torch.float16}


def _column_layernorm(x, w):  # noqa: ANN001, ANN202 - torch tensors
    var, mean = torch.var_mean(x.float(), dim=0, correction=0, keepdim=True)
    return ((x.float() - mean) * torch.rsqrt(var + 1e-5) * w.float()).to(x.dtype)


def _torch_fn(pattern: str):
    """The torch function of a pattern: benchmarks/run.py's for the zoo's normalizations."""
    if pattern == "transpose2d":
        # A copy always, as the fusion's set(): `.contiguous()` of a [1, N] or [N, 1]
        # transpose is the input itself.
        return lambda x: x.t().clone(memory_format=torch.contiguous_format)
    if pattern in NORMALIZATIONS or pattern in POINTWISE:
        return torch_of(pattern)
    return {
        "row": lambda x: x.sum(1),
        "col": lambda x: x.sum(0),
        "middle": lambda x: x.sum(1),
        "middle_var_mean": lambda x: torch.var_mean(x.float(), dim=1, correction=1),
        "middle_softmax": lambda x: torch.softmax(x.float(), dim=1).to(x.dtype),
        "var_mean0": lambda x: torch.var_mean(x.float(), dim=0, correction=1),
        "column_layernorm": _column_layernorm,
    }[pattern]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--patterns", nargs="+", default=["row", "col", "var_mean0", "middle"])
    parser.add_argument("--mbytes", nargs="+", type=int, default=[16, 256])
    parser.add_argument("--dtypes", nargs="+", default=["float", "bfloat16"])
    parser.add_argument("--step", type=int, default=4)
    parser.add_argument(
        "--min-reduced",
        type=int,
        default=1,
        help="only the cells that reduce at least this many elements an output (a rerun of "
        "the cells a change touched)",
    )
    parser.add_argument(
        "--max-reduced",
        type=int,
        default=None,
        help="only the cells that reduce at most this many elements an output",
    )
    parser.add_argument("--widths", nargs="+", type=int, default=None)
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument(
        "--between",
        type=int,
        default=0,
        help="N cells off the grid a pattern, dtype and size (patterns.between_shapes: odd "
        "extents, and middle patterns' innermost extent other than 64), after the grid's",
    )
    parser.add_argument("--seed", type=int, default=0, help="the --between cells' seed")
    parser.add_argument("--no-grid", action="store_true", help="only the --between cells")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch._dynamo.config.cache_size_limit = 1024
    bandwidth = copy_bandwidth()
    cells = []
    for pattern in args.patterns:
        compiled = torch.compile(_torch_fn(pattern), dynamic=False)
        for dtype_name in args.dtypes:
            dtype, tdtype = DataType(dtype_name), TORCH_DTYPES[dtype_name]
            fd = pattern_fusion(pattern, dtype)
            for mbytes in args.mbytes:
                elements = mbytes * (1 << 20) // tdtype.itemsize
                grid = (
                    []
                    if args.no_grid
                    else [(elements // w, w) for w in args.widths]
                    if args.widths and pattern in ROW_PATTERNS
                    else shapes(pattern, elements, args.step)
                )
                between = between_shapes(pattern, elements, args.between, args.seed)
                for shape in grid + between:
                    reduced = reduced_extent(pattern, shape)
                    if reduced < args.min_reduced or (args.max_reduced or reduced) < reduced:
                        continue
                    x = torch.randn(*shape, device="cuda").to(tdtype)
                    # A normalization's weight (and bias), bias_gelu's bias: along the row.
                    inputs = [x] + [
                        torch.randn(shape[1], device="cuda").to(tdtype)
                        for _ in range(ROW_OPERANDS.get(pattern, 0))
                    ]
                    ours = fd.execute(inputs, cache=None)
                    theirs = tuple(ours) if args.no_peers else compiled(*inputs)
                    theirs = theirs if isinstance(theirs, tuple) else (theirs,)
                    ok = all(
                        torch.allclose(
                            a.float(),
                            b.float(),
                            rtol=2e-2,
                            atol=2e-2 * math.sqrt(x.numel() / max(a.numel(), 1)),
                            equal_nan=True,  # the var of one element with correction 1
                        )
                        for a, b in zip(ours, theirs)
                    )
                    moved = sum(t.numel() * t.element_size() for t in [*inputs, *ours])
                    t_ours = timed(lambda inputs=inputs: fd.execute(inputs, cache=None))
                    t_compile = (
                        math.nan
                        if args.no_peers
                        else timed(lambda inputs=inputs: compiled(*inputs))
                    )
                    copy_us = moved / (bandwidth * 1e12) * 1e6
                    cells.append(
                        {
                            "pattern": pattern,
                            "dtype": dtype_name,
                            "mbytes": mbytes,
                            "shape": list(shape),
                            "tunefuse_us": t_ours,
                            "compile_us": t_compile,
                            "limit_us": copy_us,
                            "pct_copy": copy_us / t_ours * 100,
                            "ratio_to_compile": t_ours / t_compile,
                            # no peer to compare with under --no-peers: not checked, not "True"
                            "correct": None if args.no_peers else bool(ok),
                            "between": shape in between and shape not in grid,
                        }
                    )
                    print(json.dumps(cells[-1]), flush=True)
                    del x, inputs, ours, theirs
    ratios = [c["ratio_to_compile"] for c in cells]
    summary = {
        "device": torch.cuda.get_device_name(),
        "copy_tb_s": bandwidth,
        "geomean_ratio_to_compile": math.exp(statistics.fmean(math.log(r) for r in ratios)),
        "worst_ratio_to_compile": max(ratios),
        "cells_16mb_below_80pct_copy": sum(
            1 for c in cells if c["mbytes"] >= 16 and c["pct_copy"] < 80
        ),
        "cells": len(cells),
        "cells_between": sum(1 for c in cells if c["between"]),
    }
    (args.out / "surface.json").write_text(
        json.dumps({"summary": summary, "cells": cells}, indent=1)
    )
    lines = [
        f"Device: {summary['device']}; copy {bandwidth:.2f} TB/s; geomean tunefuse/torch.compile "
        f"{summary['geomean_ratio_to_compile']:.3f}, worst {summary['worst_ratio_to_compile']:.2f}; "
        f"{summary['cells_16mb_below_80pct_copy']} of {len(cells)} cells below 80% of copy",
        "",
    ]
    lines += [
        "| pattern | dtype | MB | shape | tunefuse µs | torch.compile µs | copy µs | % of copy | ratio | correct |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        lines.append(
            f"| {c['pattern']} | {c['dtype']} | {c['mbytes']} | {'x'.join(map(str, c['shape']))}"
            f"{' (between)' if c['between'] else ''} | "
            f"{c['tunefuse_us']:.1f} | {c['compile_us']:.1f} | {c['limit_us']:.1f} | {c['pct_copy']:.0f}% | "
            f"{c['ratio_to_compile']:.2f} | {c['correct']} |"
        )
    (args.out / "surface.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:1]))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    for pattern in args.patterns:
        mine = [c for c in cells if c["pattern"] == pattern and not c["between"]]
        if not mine:
            continue
        rows = sorted({(c["dtype"], c["mbytes"]) for c in mine})
        cols = sorted(
            {
                c["shape"][0]
                if pattern in ROW_PATTERNS
                else c["shape"][-1]
                if pattern not in MIDDLE_PATTERNS
                else c["shape"][0] * 64
                for c in mine
            }
        )
        fig, ax = plt.subplots(figsize=(1 + len(cols), 1 + len(rows) * 0.6))
        grid = [
            [
                next(
                    (
                        c["ratio_to_compile"]
                        for c in mine
                        if (c["dtype"], c["mbytes"]) == r
                        and (
                            c["shape"][0]
                            if pattern in ROW_PATTERNS
                            else c["shape"][-1]
                            if pattern not in MIDDLE_PATTERNS
                            else c["shape"][0] * 64
                        )
                        == k
                    ),
                    float("nan"),
                )
                for k in cols
            ]
            for r in rows
        ]
        image = ax.imshow(grid, cmap="RdYlGn_r", vmin=0.5, vmax=1.5)
        ax.set_xticks(range(len(cols)), [f"{k}" for k in cols], rotation=45)
        ax.set_yticks(range(len(rows)), [f"{d} {m}MB" for d, m in rows])
        ax.set_xlabel("rows" if pattern in POINTWISE else "outputs")
        ax.set_title(f"{pattern}: tunefuse / torch.compile")
        fig.colorbar(image)
        fig.tight_layout()
        fig.savefig(args.out / f"surface_{pattern}.png", dpi=80)


if __name__ == "__main__":
    main()
