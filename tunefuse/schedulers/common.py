"""Facts about a segment that several schedulers use."""

from __future__ import annotations

from tunefuse.device_info import DeviceInfo
from tunefuse.planning.indexing import Var
from tunefuse.planning.segment import Segment

MAX_VECTOR_BYTES = 16


def innermost(segment: Segment) -> int:
    return len(segment.extents) - 1


def coeff(offset, segment: Segment, j: int) -> int:  # noqa: ANN001
    return offset.coeff(Var(j, segment.extents[j])) if segment.extents[j] != 1 else 0


def vector_fits(
    segment: Segment, offset, dtype, buffer: int, unit: int | tuple[int, ...], vec: int
) -> bool:  # noqa: ANN001
    """True when an access that is unit-stride along dim `unit` can move `vec` consecutive
    elements at once: at most 16 bytes, its constant offset and every other stride divisible
    by `vec`, its pointer aligned to the vector. `unit` may name several dims whose elements
    the vector runs through together (a pointwise group of several short rows)."""
    units = unit if isinstance(unit, tuple) else (unit,)
    return (
        vec * dtype.itemsize <= MAX_VECTOR_BYTES
        and offset.const % vec == 0
        and all(
            coeff(offset, segment, j) % vec == 0
            for j in range(len(segment.extents))
            if j not in units
        )
        and dict(segment.buffer_alignments).get(buffer, 1) >= vec * dtype.itemsize
    )


def widest_vector(
    segment: Segment, accesses, divisible: tuple[int, ...], widths=(2, 4, 8, 16)
) -> int:  # noqa: ANN001
    """The widest of `widths` (in elements, 1 if none) at which every access
    `(offset, dtype, buffer, unit_dim)` moves that many consecutive elements along its unit
    dim at once (`vector_fits`) and every extent of `divisible` divides by it. The one loop
    behind every scheduler's vector width."""
    best = 1
    for vec in widths:
        if any(segment.extents[j] % vec for j in divisible) or not all(
            vector_fits(segment, offset, dtype, buffer, unit, vec)
            for offset, dtype, buffer, unit in accesses
        ):
            break
        best = vec
    return best


def max_vector(segment: Segment) -> int:
    """The widest vector (in elements) every unit-stride access of the innermost dim allows:
    extent divisible, offsets and outer strides divisible, pointers aligned, <= 16 bytes.
    Stores must be affine and unit-stride; a load that is not affine (a statistic of a
    reshaped row, at (i // 9216) + 32*n) is read element by element, as a strided one is."""
    if not segment.extents:
        return 1
    last = innermost(segment)
    if any(
        not st.offset.is_affine or coeff(st.offset, segment, last) != 1 for st in segment.stores
    ):
        return 1
    accesses = [(ld.offset, ld.dtype, ld.buffer) for ld in segment.loads] + [
        (st.offset, st.dtype, st.buffer) for st in segment.stores
    ]
    unit = [
        (off, dtype, buf, last)
        for off, dtype, buf in accesses
        if off.is_affine and coeff(off, segment, last) == 1
    ]
    return widest_vector(segment, unit, (last,))


def stores_only_reduced(segment: Segment) -> bool:
    """Every store of the segment is a reduction result (no full-size output)."""
    return all(st.reduced for st in segment.stores)


def min_blocks_error(min_blocks: int, device: DeviceInfo) -> str | None:
    """Why `min_blocks` (the launch bounds' blocks an SM; 0: none) cannot be asked for."""
    if not 0 <= min_blocks <= device.max_blocks_per_sm:
        return f"min_blocks {min_blocks} (0 to {device.max_blocks_per_sm} blocks an SM)"
    return None


def evict_first_pays(segment: Segment) -> bool:
    """The default of every scheduler's `evict_first`: loads of data read once are
    evict-first (ld.global.cs) only where the kernel writes little (every store a reduction
    result). Measured on H100, 8192 x 4096, evict-first against the default cache policy
    (`benchmarks/ab.py CASE DTYPE 8192 4096 evict_first=False`): row sum 50.0 against 55.6 us,
    column sum 53.8 against 58.0; but where a full-size output is written as the input is
    read, evict-first loads cost 1-2%: bias+GELU 93.6 against 92.6, transpose 98.2 against
    96.9, softmax fp32 94.3 against 93.2, bf16 52.1 against 51.7, layernorm 94.7 against 92.8,
    rmsnorm bf16 49.9 against 49.4. Nor where a later kernel of the plan reads the same data
    while it may still be in L2 (`Segment.read_again`)."""
    return stores_only_reduced(segment) and not segment.read_again


# The code-generation flags every scheduler's Params carries: evict-first loads, and sizes,
# strides and offsets as constants (a binary for one shape).
FLAGS = ("evict_first", "static_shape")


def flags_error(p) -> str | None:  # noqa: ANN001
    """Why one of FLAGS in `p` is not a bool (params may come from a stored JSON), or None."""
    for name in FLAGS:
        if not isinstance(getattr(p, name), bool):
            return f"{name} {getattr(p, name)!r} (True or False)"
    return None


def flag_space() -> dict:
    """FLAGS as Optuna distributions (the tail of every scheduler's search space)."""
    import optuna  # the tuner's dependency: imported only when a search space is asked for

    return {
        "evict_first": optuna.distributions.CategoricalDistribution([True, False]),
        "static_shape": optuna.distributions.CategoricalDistribution([False, True]),
    }


MAX_GRID_X = 2**31 - 1


def grid_cap(device: DeviceInfo, blocks_per_sm: int) -> int:
    """The most blocks a grid-stride kernel is launched with: `blocks_per_sm` waves' worth
    of blocks an SM, or (0) as many as the work needs, each block one pass."""
    return blocks_per_sm * device.sm_count if blocks_per_sm > 0 else MAX_GRID_X


def pow2_at_least(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 << max(0, n - 1).bit_length()


def pow2_at_most(n: int) -> int:
    """The largest power of two <= n (1 for n <= 1)."""
    return 1 << (max(1, n).bit_length() - 1)


def holding_default(space: dict, default: object) -> dict:
    """`space` with each categorical's choices holding the default's own value: a default
    computed from the shape (a split of 3, 24 elements a thread) is then a point the sampler
    can return to and the tuner's first trial, not a value its search drops. Numbers stay
    sorted."""
    import optuna  # the tuner's dependency: imported only when a search space is asked for

    held = {}
    for name, dist in space.items():
        value = default
        for part in name.split("."):
            value = getattr(value, part)
        choices = list(dist.choices)
        if value not in choices:
            choices.append(value)
            if all(isinstance(c, int) and not isinstance(c, bool) for c in choices):
                choices.sort()
            dist = optuna.distributions.CategoricalDistribution(choices)
        held[name] = dist
    return held
