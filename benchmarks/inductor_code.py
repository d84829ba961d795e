"""Print the Triton kernels torch.compile (Inductor) generates for the benchmark's cases, to
compare their structure (block size, warps, cache hints) with tunefuse's.

    python3 benchmarks/inductor_code.py [bias_gelu] [softmax] [layernorm] ...
"""

import sys

import torch
import torch.nn.functional as F
from torch._inductor.utils import run_and_get_code

R, C = 8192, 4096
CASES = {
    "bias_gelu": (
        lambda x, b: F.gelu(x + b),
        lambda: [torch.randn(R, C, device="cuda"), torch.randn(C, device="cuda")],
    ),
    "softmax": (lambda x: torch.softmax(x, -1), lambda: [torch.randn(R, C, device="cuda")]),
    "layernorm": (
        lambda x, w, b: F.layer_norm(x, (C,), w, b),
        lambda: [
            torch.randn(R, C, device="cuda"),
            torch.randn(C, device="cuda"),
            torch.randn(C, device="cuda"),
        ],
    ),
    "row_sum": (lambda x: x.sum(1), lambda: [torch.randn(R, C, device="cuda")]),
    "row_sum_bf16": (
        lambda x: x.sum(1),
        lambda: [torch.randn(R, C, device="cuda", dtype=torch.bfloat16)],
    ),
    "col_sum": (lambda x: x.sum(0), lambda: [torch.randn(R, C, device="cuda")]),
    "transpose2d": (lambda x: x.t().contiguous(), lambda: [torch.randn(R, C, device="cuda")]),
}
for name in sys.argv[1:] or list(CASES):
    fn, make = CASES[name]
    _, code = run_and_get_code(torch.compile(fn), *make())
    print(f"===== {name}")
    for src in code:
        keep = [
            ln
            for ln in src.splitlines()
            if any(
                k in ln
                for k in (
                    "@triton",
                    "def triton",
                    "tl.load",
                    "tl.store",
                    "XBLOCK",
                    "RBLOCK",
                    "R0_BLOCK",
                    "num_warps",
                    "grid",
                    "size_hints",
                    "triton_meta",
                    "tl.sum",
                    "for ",
                )
            )
        ]
        print("\n".join(keep[:60]))
