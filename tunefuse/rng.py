"""The process's random stream for `uniform`/`normal` given no `rng_seed`/`rng_offset`.

One seed, and an offset that every draw advances, so that two calls (two dropout masks) never
see the same numbers while seeding makes a program's sequence of calls reproducible. A fusion
that passes its own seed and offset never touches this state.

Where the process has imported torch and initialized its CUDA state, the stream is torch's
CUDA generator of the current device, as it is for nvFuser: `torch.manual_seed(s)` makes the
draws reproducible, a draw takes the generator's seed and advances its offset by 4 (torch's
Philox offsets come in 4s), and its tunefuse offset is torch's offset / 4, so the k-th draw
after `torch.manual_seed(s)` equals a draw given `rng_seed=s, rng_offset=k`. Elsewhere it is
tunefuse's own stream, seeded by `tunefuse.manual_seed`.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_seed = 0
_offset = 0
_replaying = 0  # > 0 inside `replayed`: tunefuse's own stream, whatever torch's is
TORCH_OFFSET_STEP = 4


def _torch_generator():  # noqa: ANN202 - a torch.Generator or None
    """torch's CUDA generator of the current device, where torch is imported and its CUDA
    state initialized (never imported nor initialized here)."""
    torch = sys.modules.get("torch")
    if torch is None or _replaying:
        return None
    try:
        if not torch.cuda.is_initialized():
            return None
        gen = torch.cuda.default_generators[torch.cuda.current_device()]
        gen.get_offset  # noqa: B018 - torch >= 2.1
    except (AttributeError, RuntimeError, IndexError):
        return None
    return gen


def _signed(seed: int) -> int:
    seed &= 0xFFFFFFFFFFFFFFFF
    return seed - (1 << 64) if seed >= 1 << 63 else seed  # an Int scalar: int64


def manual_seed(seed: int) -> None:
    """Restart the stream: the same seed gives the same numbers, call after call (torch's
    CUDA generators are seeded too where torch is imported, since they are the stream there)."""
    global _seed, _offset
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"manual_seed: the seed must be an int, got {seed!r}")
    with _lock:
        _seed, _offset = seed & 0xFFFFFFFFFFFFFFFF, 0
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.cuda.manual_seed_all(seed)


def initial_seed() -> int:
    gen = _torch_generator()
    return gen.initial_seed() if gen is not None else _seed


def next_state() -> tuple[int, int]:
    """(seed, offset) for one op's draw; the next draw gets the next offset (each offset is a
    whole Philox stream: a draw of any size uses one)."""
    global _offset
    with _lock:
        gen = _torch_generator()
        if gen is not None:
            offset = gen.get_offset()
            gen.set_offset(offset + TORCH_OFFSET_STEP)
            return _signed(gen.initial_seed()), offset // TORCH_OFFSET_STEP
        seed, offset = _seed, _offset
        _offset += 1
    return _signed(seed), offset


def state() -> tuple[int, int]:
    """(seed, next offset): where the stream is."""
    with _lock:
        gen = _torch_generator()
        if gen is not None:
            return gen.initial_seed() & 0xFFFFFFFFFFFFFFFF, gen.get_offset() // TORCH_OFFSET_STEP
        return _seed, _offset


@contextmanager
def replayed(seed: int = 0, offset: int = 0) -> Iterator[None]:
    """Run with the stream at (seed, offset), then put the caller's stream back: two runs of one
    fusion (a tuning candidate and the default, the GPU and the reference) draw the same
    numbers without moving the user's stream."""
    global _seed, _offset, _replaying
    with _lock:
        saved = (_seed, _offset)
        _seed, _offset = seed & 0xFFFFFFFFFFFFFFFF, offset
        _replaying += 1
    try:
        yield
    finally:
        with _lock:
            _seed, _offset = saved
            _replaying -= 1
