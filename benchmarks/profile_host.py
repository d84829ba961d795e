"""Profile the host cost of a cache-hit call (cProfile), to find where the microseconds go.

    python3 benchmarks/profile_host.py
"""

import cProfile
import pathlib
import pstats
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fusion_zoo import ZOO, build  # noqa: E402
from tunefuse import DataType  # noqa: E402

fd = build(ZOO["bias_gelu"], DataType.Float)
xs = [torch.randn(4, 8, device="cuda"), torch.randn(8, device="cuda")]
fd.execute(xs)
torch.cuda.synchronize()
n = 2000
t0 = time.perf_counter()
for _ in range(n):
    fd.execute(xs)
torch.cuda.synchronize()
print(f"cache-hit call: {(time.perf_counter() - t0) / n * 1e6:.1f} us")
profile = cProfile.Profile()
profile.enable()
for _ in range(n):
    fd.execute(xs)
profile.disable()
pstats.Stats(profile).sort_stats("tottime").print_stats(25)
