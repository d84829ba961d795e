"""The process's random stream for `uniform`/`normal` given no `rng_seed`/`rng_offset`.

As torch's CUDA generator does for nvFuser: one seed, and an offset that every draw advances,
so that two calls (two dropout masks) never see the same numbers while
`tunefuse.manual_seed(s)` makes a program's sequence of calls reproducible. A fusion that
passes its own seed and offset never touches this state.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_seed = 0
_offset = 0


def manual_seed(seed: int) -> None:
    """Restart the stream: the same seed gives the same numbers, call after call."""
    global _seed, _offset
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"manual_seed: the seed must be an int, got {seed!r}")
    with _lock:
        _seed, _offset = seed & 0xFFFFFFFFFFFFFFFF, 0


def initial_seed() -> int:
    return _seed


def next_state() -> tuple[int, int]:
    """(seed, offset) for one op's draw; the next draw gets the next offset (each offset is a
    whole Philox stream: a draw of any size uses one)."""
    global _offset
    with _lock:
        seed, offset = _seed, _offset
        _offset += 1
    return (seed - (1 << 64) if seed >= 1 << 63 else seed), offset  # an Int scalar: int64


def state() -> tuple[int, int]:
    """(seed, next offset): where the stream is."""
    with _lock:
        return _seed, _offset


@contextmanager
def replayed(seed: int = 0, offset: int = 0) -> Iterator[None]:
    """Run with the stream at (seed, offset), then put the caller's stream back: two runs of one
    fusion (a tuning candidate and the default, the GPU and the reference) draw the same
    numbers without moving the user's stream."""
    global _seed, _offset
    with _lock:
        saved = (_seed, _offset)
        _seed, _offset = seed & 0xFFFFFFFFFFFFFFFF, offset
    try:
        yield
    finally:
        with _lock:
            _seed, _offset = saved
