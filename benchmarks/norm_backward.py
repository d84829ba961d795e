"""Layernorm's and rmsnorm's backward (dx, and the column sums dw, db) on a grid of shapes,
fp32 and bf16: tunefuse's defaults against torch.compile and a copy, in one run.

    python3 benchmarks/norm_backward.py [--no-peers] [--tag NAME] [--only layernorm|rmsnorm]
        [--shapes 8192x2560 ...]

One JSON line a case (µs medians, L2 flushed; `run.timed`), the error against torch's
fp32 formula, and the kernels tunefuse ran. Run an older checkout's copy of this script in
the same device call for before/after (`--no-peers` skips torch.compile there).
"""

from __future__ import annotations

import argparse
import json
import sys

sys.path[:0] = [".", "benchmarks", "tests"]

import torch  # noqa: E402
from run import copy_bandwidth, timed  # noqa: E402
from training_fusions import layernorm_backward, rmsnorm_backward  # noqa: E402

from tunefuse import DataType, FusionDefinition  # noqa: E402
from tunefuse.runtime.executor import Executor  # noqa: E402

F = DataType.Float
# Transformer widths and batch x sequence rows, 64-256 MB of dy and x; a few odd widths.
SHAPES = [
    (8192, 4096),
    (32768, 768),
    (16384, 1024),
    (4096, 8192),
    (65536, 512),
    (2048, 12288),
    (10000, 3000),
    (24576, 2560),
]


def torch_layernorm_backward(gy, x, mean, rstd, w):  # noqa: ANN001, ANN201
    g, xf = gy.float(), x.float()
    xhat = (xf - mean[:, None]) * rstd[:, None]
    gw = g * w.float()
    dx = (gw - gw.mean(1, keepdim=True) - xhat * (gw * xhat).mean(1, keepdim=True)) * rstd[:, None]
    return dx.to(gy.dtype), (g * xhat).sum(0).to(gy.dtype), g.sum(0).to(gy.dtype)


def torch_rmsnorm_backward(gy, x, rstd, w):  # noqa: ANN001, ANN201
    g, xf = gy.float(), x.float()
    r = rstd[:, None]
    gw = g * w.float()
    c = (gw * xf).mean(1, keepdim=True)
    return (r * (gw - xf * c * r * r)).to(gy.dtype), (g * xf * r).sum(0).to(gy.dtype)


def inputs(name: str, rows: int, cols: int, dt: DataType) -> list:
    t = torch.float32 if dt is F else torch.bfloat16
    gen = torch.Generator(device="cuda").manual_seed(rows * 7 + cols)

    def r(*s, dtype=t):  # noqa: ANN001, ANN202
        return torch.randn(*s, device="cuda", dtype=dtype, generator=gen)

    rstd = r(rows, dtype=torch.float32).abs() + 0.5
    if name == "layernorm":
        return [r(rows, cols), r(rows, cols), r(rows, dtype=torch.float32) * 0.1, rstd, r(cols)]
    return [r(rows, cols), r(rows, cols), rstd, r(cols)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--tag", default="tunefuse")
    ap.add_argument("--only", default=None)
    ap.add_argument("--shapes", nargs="+", default=None, help="ROWSxCOLS instead of SHAPES")
    ap.add_argument("--dtypes", nargs="+", default=["float", "bfloat16"])
    args = ap.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes] if args.shapes else SHAPES
    bw = copy_bandwidth()
    cases = {
        "layernorm": (layernorm_backward, torch_layernorm_backward),
        "rmsnorm": (rmsnorm_backward, torch_rmsnorm_backward),
    }
    for name, (define, reference) in cases.items():
        if args.only and name != args.only:
            continue
        for rows, cols in shapes:
            for dt in (d for d in (F, DataType.BFloat16) if d.value in args.dtypes):
                ins = inputs(name, rows, cols, dt)
                with FusionDefinition() as fd:
                    define(fd, dt)
                ex = Executor(fd.fusion)
                got = ex.run(ins)
                want = reference(*ins)
                err = max(
                    float((a.float() - b.float()).abs().max() / (b.float().abs().max() + 1e-9))
                    for a, b in zip(got, want)
                )
                us = timed(lambda: ex.run(ins))  # noqa: B023
                moved = sum(t.numel() * t.element_size() for t in [*ins, *got])
                row = {
                    "tag": args.tag,
                    "fusion": f"{name}_backward",
                    "dtype": dt.value,
                    "shape": [rows, cols],
                    "us": round(us, 1),
                    "copy_us": round(moved / (bw * 1e12) * 1e6, 1),
                    "rel_err": err,
                    "kernels": len(next(iter(ex.plans.values())).plan.segments),
                }
                if not args.no_peers:
                    torch._dynamo.reset()
                    compiled = torch.compile(reference, dynamic=False)
                    compiled(*ins)
                    row["torch_compile_us"] = round(timed(lambda: compiled(*ins)), 1)  # noqa: B023
                    row["ratio"] = round(us / row["torch_compile_us"], 3)
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
