"""First-call latency of a fusion in a fresh process: cold (NVRTC) against warm (cache).

    python3 benchmarks/first_call.py            # prints JSON: cold_ms, warm_ms, compiles
As a child: python3 benchmarks/first_call.py --child  (TUNEFUSE_CACHE_URL set by the parent)
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def child() -> None:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests"))
    import torch
    import torch.nn.functional  # noqa: F401 - module imports are process start-up, not the call

    import alembic.command  # noqa: F401
    import cache_db.store  # noqa: F401
    import cuda.core  # noqa: F401
    from fusion_zoo import ZOO, build
    from tunefuse import DataType
    from tunefuse.compiler import STATS

    cases = [build(ZOO[n], DataType.Float) for n in ("softmax", "layernorm", "bias_gelu", "row_sum")]
    inputs = [[torch.randn(1024, 1024, device="cuda") if fd.fusion.values[v].rank == 2
               else torch.randn(1024, device="cuda") for v in fd.fusion.inputs] for fd in cases]
    torch.cuda.current_stream()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for fd, xs in zip(cases, inputs):
        fd.execute(xs)
    torch.cuda.synchronize()
    print(json.dumps({"ms": (time.perf_counter() - start) * 1000, "compiles": STATS.count}))


def measure() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TUNEFUSE_CACHE_URL=f"sqlite:///{tmp}/cache.sqlite")
        runs = []
        for _ in range(2):
            out = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True,
                                 check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {"cold_ms": round(runs[0]["ms"], 1), "cold_compiles": runs[0]["compiles"],
            "warm_ms": round(runs[1]["ms"], 1), "warm_compiles": runs[1]["compiles"],
            "speedup": round(runs[0]["ms"] / runs[1]["ms"], 1)}


if __name__ == "__main__":
    if "--child" in sys.argv:
        child()
    else:
        print(json.dumps(measure()))
