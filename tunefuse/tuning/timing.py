"""GPU timing: CUDA events after warm-up, L2 flushed before each repetition, a spin kernel
that keeps the GPU ahead of the host, the median of enough repetitions to pass a minimum
measured time; the spread (interquartile range) is reported with it."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

SPIN_SOURCE = r"""
extern "C" __global__ void tf_spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
}
"""


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

    def time(self, fn: Callable[[], None], *, warmup: int = 3, min_reps: int = 10, max_reps: int = 200,
             min_total_us: float = 20_000.0) -> Timing:
        import numpy as np
        from cuda.core import EventOptions, launch

        for _ in range(warmup):
            fn()
        self.stream.sync()
        times: list[float] = []
        total = 0.0
        options = EventOptions(timing_enabled=True)
        while len(times) < max_reps and (len(times) < min_reps or total < min_total_us):
            self.flush.fill(0, stream=self.stream)
            launch(self.stream, self.spin_config, self.spin, np.int64(200_000))
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
