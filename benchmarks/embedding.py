"""Embedding lookups and index_select (GPU): tunefuse's embedding_fwd against torch eager,
torch.compile and copy bandwidth in the same run, L2 flushed, medians of CUDA events
(benchmarks/run.py's `timed`). A tunefuse call includes its index check (the device's
index-error word read back after the kernels: the call synchronizes).

    python3 benchmarks/embedding.py [--shapes=VOCABxDIMxTOKENS,...]

"limit" is the time a device copy of the bytes moved (the rows read, the output written,
the indices) takes.
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402, N812
from run import copy_us, timed  # noqa: E402

from tunefuse import DataType, FusionDefinition  # noqa: E402

SHAPES = [(128256, 2048, 4096), (32000, 4096, 8192), (50257, 768, 16384), (1024, 64, 65536)]


def embedding_fd(dtype: DataType) -> FusionDefinition:
    with FusionDefinition() as fd:
        idx = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int)
        weight = fd.define_tensor(shape=[-1, -1], dtype=dtype)
        fd.add_output(fd.ops.embedding_fwd(idx, weight))
    return fd


def main() -> None:
    opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    shapes = (
        [tuple(int(n) for n in s.split("x")) for s in opts["shapes"].split(",")]
        if "shapes" in opts
        else SHAPES
    )
    print(
        "| table | dtype | tokens | tunefuse µs | torch eager µs | torch.compile µs | limit µs | tunefuse / compile |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for vocab, dim, tokens in shapes:
        for dtype, tdtype in ((DataType.BFloat16, torch.bfloat16), (DataType.Float, torch.float32)):
            weight = torch.randn(vocab, dim, device="cuda").to(tdtype)
            idx = torch.randint(0, vocab, (tokens // 8, 8), device="cuda")
            fd = embedding_fd(dtype)
            (got,) = fd.execute([idx, weight])
            want = F.embedding(idx, weight)
            torch.testing.assert_close(got, want, rtol=0, atol=0)
            compiled = torch.compile(lambda i, w: F.embedding(i, w))
            torch.testing.assert_close(compiled(idx, weight), want, rtol=0, atol=0)
            moved = 2 * tokens * dim * weight.element_size() + idx.numel() * 8
            t = timed(lambda: fd.execute([idx, weight]))
            e = timed(lambda: F.embedding(idx, weight))
            c = timed(lambda: compiled(idx, weight))
            limit = copy_us(moved)
            print(
                f"| {vocab}x{dim} | {dtype.value} | {tokens} | {t:.1f} | {e:.1f} | {c:.1f} | {limit:.1f} | "
                f"{t / c:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
