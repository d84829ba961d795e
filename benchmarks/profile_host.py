"""Where the host microseconds of a cache-hit call go: the whole call, then each of its
parts alone in the same loop (no sync inside; the GPU drains at the end), then cProfile.

    python3 benchmarks/profile_host.py [--no-profile]
"""

import cProfile
import pathlib
import pstats
import sys
import time

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fusion_zoo import ZOO, build  # noqa: E402

from tunefuse import DataType  # noqa: E402

N = 5000


def per_call_us(fn) -> float:  # noqa: ANN001
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(N):
            fn()
        best = min(best, (time.perf_counter() - t0) / N * 1e6)
        torch.cuda.synchronize()
    return best


def main() -> None:
    from cuda.core import launch

    fd = build(ZOO["bias_gelu"], DataType.Float)
    xs = [torch.randn(4, 8, device="cuda"), torch.randn(8, device="cuda")]
    fd.execute(xs)
    torch.cuda.synchronize()
    runner = fd._runner
    launcher = next(iter(runner.fast.values()))
    recipe = launcher.recipes[0]
    stream = launcher.rt.stream_for(launcher.current_stream(0))
    pointers = [x.data_ptr() for x in xs] + [torch.empty(32, device="cuda").data_ptr()] * 4
    args = list(recipe.args)
    for pos, bid in recipe.pointer_slots:
        args[pos] = np.uint64(pointers[bid])
    raw = launcher.current_stream
    dev = launcher.device
    int_args = [int(a) if isinstance(a, np.uint64) else a for a in args]
    from tunefuse.runtime.executor import _torch_key

    key = _torch_key(xs, runner.inputs)
    parts = {
        "fd.execute (cache hit)": lambda: fd.execute(xs),
        "runner.run(xs)": lambda: runner.run(xs),
        "_torch_key(xs)": lambda: _torch_key(xs, runner.inputs),
        "runner.fast.get(key)": lambda: runner.fast.get(key),
        "x.shape, x.stride() x2": lambda: (
            xs[0].shape,
            xs[0].stride(),
            xs[1].shape,
            xs[1].stride(),
        ),
        "x.dtype, x.get_device(), is_cuda x2": lambda: (
            xs[0].dtype,
            xs[0].get_device(),
            xs[0].is_cuda,
            xs[1].dtype,
            xs[1].get_device(),
            xs[1].is_cuda,
        ),
        "hash(key)": lambda: hash(key),
        "launcher(xs) (no execute dispatch)": lambda: launcher(xs),
        "current stream handle": lambda: raw(0),
        "rt.stream_for(handle)": lambda: launcher.rt.stream_for(raw(0)),
        "torch.empty(4, 8)": lambda: torch.empty(
            (4, 8), dtype=torch.float32, device=launcher.device
        ),
        "x.data_ptr() x2": lambda: (xs[0].data_ptr(), xs[1].data_ptr()),
        f"cuda.core launch ({len(args)} args)": lambda: launch(
            stream, recipe.config, recipe.kernel, *args
        ),
        "np.uint64 per pointer x3": lambda: (
            np.uint64(pointers[0]),
            np.uint64(pointers[1]),
            np.uint64(pointers[2]),
        ),
        "cuda.core launch, int pointers": lambda: launch(
            stream, recipe.config, recipe.kernel, *int_args
        ),
        "x.new_empty((4, 8))": lambda: xs[0].new_empty((4, 8)),
        "torch.empty((4, 8), dtype=, device=)": lambda: torch.empty(
            (4, 8), dtype=torch.float32, device=dev
        ),
        "torch.empty(4, 8, device=) (default dtype)": lambda: torch.empty(4, 8, device=dev),
        "torch.empty_like(x)": lambda: torch.empty_like(xs[0]),
        "torch.add (eager op)": lambda: torch.add(xs[0], xs[1]),
    }
    for name, fn in parts.items():
        print(f"{name:40s} {per_call_us(fn):6.2f} us", flush=True)
    if "--no-profile" in sys.argv:
        return
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(2000):
        fd.execute(xs)
    profile.disable()
    torch.cuda.synchronize()
    pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
