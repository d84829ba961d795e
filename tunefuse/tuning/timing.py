"""GPU timing: CUDA events after warm-up, L2 flushed before each repetition, a spin kernel
that keeps the GPU ahead of the host, the median of enough repetitions to pass a minimum
measured time; the spread (interquartile range) is reported with it.

The spin lasts longer than the host takes to enqueue the timed call (three times its
slowest warm-up call, at least 100 µs): with a fixed 200,000-cycle spin (~110 µs) the host
work of a call (binding inputs, allocating outputs) leaked into the events, and the tuner
read bias+GELU 8192x4096 at 99.7 µs, or 144 µs with outputs handed in, where the benchmark
table reads 93 µs."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

SPIN_SOURCE = r"""
extern "C" __global__ void tf_spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
"""


MIN_SPIN_US = 100.0
MAX_SPIN_US = 20_000.0


def spin_us(host_call_us: list[float]) -> float:
    """How long the GPU spins before each timed call: three times the slowest warm-up call's
    host time, so that the call is enqueued before the GPU reaches it."""
    return min(MAX_SPIN_US, max(MIN_SPIN_US, 3.0 * max(host_call_us, default=0.0)))


@dataclass(frozen=True)
class Timing:
    median_us: float
    spread_us: float  # interquartile range
    reps: int


class Timer:
    def __init__(self, rt, flush_bytes: int | None = None) -> None:  # noqa: ANN001 - a Runtime
        from cuda.core import LaunchConfig

        from tunefuse.compiler import compile_kernel

        self.rt = rt
        self.stream = rt.default_stream
        size = flush_bytes or max(2 * rt.info.l2_bytes, 64 * 1024 * 1024)
        self.flush = rt.allocate(size, self.stream)
        compiled = compile_kernel(SPIN_SOURCE, "tf_spin", rt.info.arch)
        self.spin = rt.kernel("tf_spin", compiled.cubin)
        self.spin_config = LaunchConfig(grid=1, block=1)

    def time(
        self,
        fn: Callable[[], None],
        *,
        warmup: int = 3,
        min_reps: int = 10,
        max_reps: int = 200,
        min_total_us: float = 20_000.0,
    ) -> Timing:
        import time

        import numpy as np
        from cuda.core import EventOptions, launch

        host_us = []
        for _ in range(max(1, warmup)):
            t0 = time.perf_counter()
            fn()
            host_us.append((time.perf_counter() - t0) * 1e6)
            self.stream.sync()
        spin_ns = np.uint64(spin_us(host_us) * 1000)
        times: list[float] = []
        total = 0.0
        options = EventOptions(timing_enabled=True)
        while len(times) < max_reps and (len(times) < min_reps or total < min_total_us):
            self.flush.fill(0, stream=self.stream)
            launch(self.stream, self.spin_config, self.spin, spin_ns)
            start = self.stream.record(options=options)
            fn()
            end = self.stream.record(options=options)
            end.sync()
            us = (end - start) * 1000.0
            times.append(us)
            total += us
        times.sort()
        q1, q3 = times[len(times) // 4], times[(3 * len(times)) // 4]
        return Timing(statistics.median(times), q3 - q1, len(times))
