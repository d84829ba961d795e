"""Counter-based random numbers (Philox4x32-10) for `uniform` and `normal`, on the host.

An element's numbers depend only on (seed, offset, its row-major position in the output), never
on how a kernel tiles or vectorizes it: a fusion with a given seed and offset is reproducible
across schedules, devices and the reference, and tuning cannot change what it draws. The
kernel's copy is `tf_philox` in the CUDA preamble; both follow Salmon et al., "Parallel random
numbers: as easy as 1, 2, 3" (SC'11), the generator torch and nvFuser draw from as well.

Counter: (position low, position high, offset low, offset high); key: (seed low, seed high).
A uniform uses the first word (24 bits for float, two words and 53 bits for double); a normal
is Box-Muller over the first two words (float) or all four (double).
"""

from __future__ import annotations

import numpy as np

from tunefuse.ir.dtypes import DataType

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
_LOW = np.uint64(0xFFFFFFFF)
_ROUNDS = 10


def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = (
        np.asarray(x).astype(np.int64).view(np.uint64)
        if np.asarray(x).dtype != np.uint64
        else np.asarray(x)
    )
    return (x & _LOW).astype(np.uint32), (x >> np.uint64(32)).astype(np.uint32)


def philox(position: np.ndarray, seed: int, offset: int) -> tuple[np.ndarray, ...]:
    """The four 32-bit words Philox4x32-10 gives each position (an int64 array)."""
    c0, c1 = _split(position)
    c2, c3 = (np.broadcast_to(w, c0.shape).copy() for w in _split(np.int64(offset)))
    k0, k1 = (np.uint32(w) for w in _split(np.int64(seed)))
    with np.errstate(over="ignore"):
        for r in range(_ROUNDS):
            p0 = _M0 * c0.astype(np.uint64)
            p1 = _M1 * c2.astype(np.uint64)
            hi0, lo0 = (p0 >> np.uint64(32)).astype(np.uint32), (p0 & _LOW).astype(np.uint32)
            hi1, lo1 = (p1 >> np.uint64(32)).astype(np.uint32), (p1 & _LOW).astype(np.uint32)
            c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
            if r < _ROUNDS - 1:
                k0, k1 = k0 + _W0, k1 + _W1
    return c0, c1, c2, c3


def _unit24(word: np.ndarray) -> np.ndarray:
    """[0, 1) in float32: the word's top 24 bits."""
    return (word >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)


def _unit53(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """[0, 1) in float64: 53 bits of two words."""
    bits = (hi.astype(np.uint64) << np.uint64(21)) ^ (lo.astype(np.uint64) >> np.uint64(11))
    return bits.astype(np.float64) * 2.0**-53


def _unit(words: tuple[np.ndarray, ...], k: int, double: bool) -> np.ndarray:
    """The k-th number in [0, 1) of a position's words: 24 bits of word k, or 53 of words
    2k and 2k + 1."""
    return _unit53(words[2 * k], words[2 * k + 1]) if double else _unit24(words[k])


def _compute(value: object, dtype: DataType) -> np.ndarray:
    return np.asarray(value).astype(dtype.compute.numpy)


def uniform(
    position: np.ndarray, seed: int, offset: int, low: object, high: object, dtype: DataType
) -> np.ndarray:
    """low + (high - low) * u, u in [0, 1), computed in the dtype's compute type and rounded
    to the dtype; a value that rounds to `high` or above there is the largest one below it,
    so the draws lie in [low, high) of the dtype."""
    u = _unit(philox(position, seed, offset), 0, dtype.compute is DataType.Double)
    lo, hi = _compute(low, dtype), _compute(high, dtype)
    return below((lo + (hi - lo) * _compute(u, dtype)).astype(dtype.numpy), hi, dtype)


def below(values: np.ndarray, high: object, dtype: DataType) -> np.ndarray:
    """`values` where they are below `high` rounded to the dtype, else the dtype's largest
    value below it (the kernels' tf_below)."""
    hi = np.asarray(high).astype(dtype.numpy)
    if hi.dtype.itemsize == 2:  # half, bfloat16: one step down the sign-magnitude bits
        bits = int(hi.view(np.uint16))
        step = 0x8001 if bits & 0x7FFF == 0 else bits + 1 if bits & 0x8000 else bits - 1
        largest_below = np.asarray(step, dtype=np.uint16).view(hi.dtype)
    else:
        largest_below = np.nextafter(hi, hi.dtype.type(-np.inf))
    keep = values.astype(np.float64) < hi.astype(np.float64)
    return np.where(keep, values, largest_below).astype(dtype.numpy)


def normal(
    position: np.ndarray, seed: int, offset: int, mean: object, std: object, dtype: DataType
) -> np.ndarray:
    """mean + std * z, z standard normal by Box-Muller: sqrt(-2 log u1) cos(2 pi u2), u1 in (0, 1]."""
    words = philox(position, seed, offset)
    double = dtype.compute is DataType.Double
    one, two_pi = (1.0, 2.0 * np.pi) if double else (np.float32(1.0), np.float32(2.0 * np.pi))
    u1, u2 = one - _unit(words, 0, double), _unit(words, 1, double)
    z = np.sqrt(-2 * one * np.log(u1)) * np.cos(two_pi * u2)
    return (_compute(mean, dtype) + _compute(std, dtype) * _compute(z, dtype)).astype(dtype.numpy)
