"""Where the host microseconds of a cache-hit call go: the whole call, then each of its
parts alone (no sync inside a batch; the GPU drains after each), interleaved in rounds;
minimum, median and the median ratio to an eager torch.add of the same round; then cProfile.

    python3 benchmarks/profile_host.py [--no-profile]
"""

import cProfile
import pathlib
import pstats
import statistics
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fusion_zoo import ZOO, build  # noqa: E402

from tunefuse import DataType  # noqa: E402

BATCH = 1000  # calls between synchronizations (fewer than the launch queue holds)
ROUNDS = 15


def batch_us(fn) -> float:  # noqa: ANN001
    """Host microseconds a call over one batch (no sync inside; the GPU drains after)."""
    t0 = time.perf_counter()
    for _ in range(BATCH):
        fn()
    elapsed = (time.perf_counter() - t0) / BATCH * 1e6
    torch.cuda.synchronize()
    return elapsed


def measure(parts: dict) -> dict[str, list[float]]:
    """Each part timed once a round, the parts interleaved, so a slow phase of the host
    touches every part alike (this host's speed drifts by half from one minute to the next)."""
    for fn in parts.values():
        for _ in range(200):
            fn()
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {name: [] for name in parts}
    for _ in range(ROUNDS):
        for name, fn in parts.items():
            times[name].append(batch_us(fn))
    return times


def main() -> None:
    from cuda.core import LaunchConfig, launch

    from tunefuse.runtime.executor import _torch_key

    fd = build(ZOO["bias_gelu"], DataType.Float)
    xs = [torch.randn(4, 8, device="cuda"), torch.randn(8, device="cuda")]
    for _ in range(3):  # the checked path, the fast key, then the generated hot path
        fd.execute(xs)
    torch.cuda.synchronize()
    runner = fd._runner
    assert runner.hot is not None, "the repeat call was not specialized"
    launcher = next(iter(runner.fast.values()))
    packed = launcher.kernels[0]
    stream, handle = launcher.streams()
    out = torch.empty(32, device="cuda")
    pointers = [x.data_ptr() for x in xs] + [out.data_ptr()] * 4
    for cell, bid in packed.pointers:
        cell.value = pointers[bid]
    # the same kernel through cuda.core's launch, which packs its arguments at every call
    recipe = next(r for r in launcher.exe.recipes if r.launch.numel)
    config = LaunchConfig(
        grid=recipe.launch.grid, block=recipe.launch.block, shmem_size=recipe.launch.shared_bytes
    )
    args = recipe.launch.arg_template()
    for pos, bid in recipe.launch.pointer_slots:
        args[pos] = pointers[bid]
    key, input_pointers = _torch_key(xs, runner.inputs)
    compiled = torch.compile(lambda x, b: torch.nn.functional.gelu(x + b, approximate="tanh"))
    compiled(*xs)
    parts = {
        "fd.execute (cache hit)": lambda: fd.execute(xs),
        "runner.run(xs)": lambda: runner.run(xs),
        "runner.hot(xs) (generated)": lambda: runner.hot(xs),
        "launcher.run_device(xs)": lambda: launcher.run_device(xs, input_pointers),
        "_torch_key(xs)": lambda: _torch_key(xs, runner.inputs),
        "runner.fast.get(key)": lambda: runner.fast.get(key),
        "current stream handle": lambda: launcher.arrays.stream_handle(),
        "launcher.streams()": lambda: launcher.streams(),
        "cuda.core Stream.handle": lambda: stream.handle,
        "rt.enter() + rt.leave()": lambda: launcher.rt.leave(launcher.rt.enter()),
        "launcher.enqueue (pointers in cells, launch)": lambda: launcher.enqueue(
            stream, handle, pointers, None
        ),
        f"cuLaunchKernel, packed ({len(packed.cells)} args)": lambda: launcher.cu_launch(
            packed.func, *packed.grid, *packed.block, packed.shared, handle, packed.params, 0
        ),
        f"cuda.core launch ({len(args)} args, packed per call)": lambda: launch(
            stream, config, recipe.kernel, *args
        ),
        "x.data_ptr() x2": lambda: (xs[0].data_ptr(), xs[1].data_ptr()),
        "torch.empty_like(x)": lambda: torch.empty_like(xs[0]),
        "torch.add (eager op)": lambda: torch.add(xs[0], xs[1]),
        "torch eager gelu(x + b) (2 ops)": lambda: torch.nn.functional.gelu(
            xs[0] + xs[1], approximate="tanh"
        ),
        "torch.compile'd gelu(x + b)": lambda: compiled(*xs),
    }
    times = measure(parts)
    eager = times["torch.add (eager op)"]
    print(f"{'part':46s} {'min us':>7s} {'median':>7s} {'/ torch.add':>11s}")
    for name, ts in times.items():
        ratio = statistics.median(t / e for t, e in zip(ts, eager))
        print(f"{name:46s} {min(ts):7.2f} {statistics.median(ts):7.2f} {ratio:11.2f}", flush=True)
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
