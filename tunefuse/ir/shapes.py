"""Shape rules: dims, broadcasting, and the reshape decomposition (nvFuser's analyzeView).

Every function here works on extents that are ints (concrete) or `Sym`s (known only once
inputs are given): definition time calls them with whatever is known, concretization calls
them again with ints only, so the checks are the same code in both places.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

from tunefuse.errors import ShapeError
from tunefuse.ir.fusion import Extent, Sym


def normalize_dim(op: str, dim: int, rank: int, *, what: str = "dim", insert: bool = False) -> int:
    """A dim in [-rank, rank) (or [-rank-1, rank] when inserting), made non-negative."""
    bound = rank + 1 if insert else rank
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise ShapeError(f"{op}: {what} must be an int, got {dim!r}")
    if not -bound <= dim < bound:
        raise ShapeError(f"{op}: {what} {dim} is out of range for rank {rank}")
    return dim + bound if dim < 0 else dim


def normalize_dims(op: str, dims: Sequence[int], rank: int) -> tuple[int, ...]:
    """Sorted, unique, non-negative dims; a repeated dim is an error."""
    out = [normalize_dim(op, d, rank) for d in dims]
    if len(set(out)) != len(out):
        raise ShapeError(f"{op}: dims {list(dims)} repeat a dim")
    return tuple(sorted(out))


def broadcast_extents(
    op: str, shapes: Sequence[tuple[Extent, ...]], operands: Sequence[str]
) -> tuple[Extent, ...]:
    """Extents of an elementwise result. Ranks must match (the IR's broadcasts are explicit;
    the frontend promotes a lower rank with a broadcast op, as nvFuser does); per dim, equal
    extents stay, a 1 broadcasts against anything, two different static extents are an
    error, and a symbolic extent yields to a static one."""
    if not shapes:
        return ()
    rank = len(shapes[0])
    for shape, name in zip(shapes, operands):
        if len(shape) != rank:
            raise ShapeError(
                f"{op}: operand {name} has rank {len(shape)} but {operands[0]} has rank {rank}; "
                "broadcast it explicitly (broadcast_in_dim)"
            )
    result: list[Extent] = []
    for d in range(rank):
        extent: Extent = 1
        owner = operands[0]
        for shape, name in zip(shapes, operands):
            e = shape[d]
            if e == 1:
                continue
            if extent == 1:
                extent, owner = e, name
            elif isinstance(extent, int) and isinstance(e, int) and e != extent:
                raise ShapeError(
                    f"{op}: dim {d} of operand {name} has extent {e} but operand {owner} has {extent}"
                )
            elif isinstance(extent, Sym) and isinstance(e, int):
                extent, owner = e, name
        result.append(extent)
    return tuple(result)


class ViewKind(enum.Enum):
    KEEP = "keep"
    MERGE = "merge"
    SPLIT = "split"
    MERGE_SPLIT = "merge_split"
    SQUEEZE = "squeeze"
    BROADCAST = "broadcast"


@dataclass(frozen=True, slots=True)
class ViewTransform:
    """One step of a reshape: input dims `in_dims` become output dims `out_dims`.
    SQUEEZE has no out dims, BROADCAST no in dims."""

    kind: ViewKind
    in_dims: tuple[int, ...]
    out_dims: tuple[int, ...]

    def __repr__(self) -> str:
        return f"{self.kind.name.title()}({list(self.in_dims)}->{list(self.out_dims)})"


@dataclass(frozen=True, slots=True)
class ReshapeAnalysis:
    """The decomposition of a reshape, in output order; canonical and hashable."""

    in_sizes: tuple[int, ...]
    out_sizes: tuple[int, ...]
    transforms: tuple[ViewTransform, ...]

    @property
    def signature(self) -> tuple[ViewTransform, ...]:
        """What concretization keys on: the transforms, not the sizes."""
        return self.transforms


def resolve_reshape_sizes(
    op: str, in_sizes: Sequence[Extent], new_shape: Sequence[Extent], unknown: str = "?"
) -> tuple[Extent, ...]:
    """Output extents of a reshape: validates -1 (at most one), negative sizes and, when
    everything is static, the element count; infers the -1 where it can, else names it
    `Sym(unknown.i)`."""
    minus_ones = [i for i, s in enumerate(new_shape) if isinstance(s, int) and s == -1]
    if len(minus_ones) > 1:
        raise ShapeError(
            f"{op}: only one dim may be -1, got -1 at dims {minus_ones} of {list(new_shape)}"
        )
    for i, s in enumerate(new_shape):
        if isinstance(s, int) and s < -1:
            raise ShapeError(f"{op}: dim {i} of the new shape is negative ({s})")
    static_in = all(isinstance(s, int) for s in in_sizes)
    known_out = [s for i, s in enumerate(new_shape) if i not in minus_ones]
    static_out = all(isinstance(s, int) for s in known_out)
    if not (static_in and static_out):
        return tuple(
            Sym(f"{unknown}.{i}") if i in minus_ones else s for i, s in enumerate(new_shape)
        )
    numel = math.prod(in_sizes)  # type: ignore[arg-type]
    known = math.prod(known_out)  # type: ignore[arg-type]
    if minus_ones:
        if known == 0:
            raise ShapeError(
                f"{op}: cannot infer the -1 in {list(new_shape)}: the other dims have 0 elements"
            )
        if numel % known:
            raise ShapeError(
                f"{op}: shape {list(new_shape)} is invalid for input of size {numel} "
                f"(sizes {list(in_sizes)})"
            )
        return tuple(numel // known if i in minus_ones else s for i, s in enumerate(new_shape))
    if known != numel:
        raise ShapeError(
            f"{op}: cannot reshape {list(in_sizes)} ({numel} elements) to {list(new_shape)} "
            f"({known} elements)"
        )
    return tuple(new_shape)


def analyze_reshape(in_sizes: Sequence[int], out_sizes: Sequence[int]) -> ReshapeAnalysis:
    """Decompose a reshape of static sizes into keep / merge / split / squeeze / broadcast.

    >>> analyze_reshape([2, 10, 40], [2, 10, 2, 20]).transforms
    (Keep([0]->[0]), Keep([1]->[1]), Split([2]->[2, 3]))

    Exactly one -1 in `out_sizes` is inferred.
    """
    in_sizes = tuple(int(s) for s in in_sizes)
    for i, s in enumerate(in_sizes):
        if s < 0:
            raise ShapeError(f"reshape: input dim {i} has negative size {s}")
    out_sizes = tuple(int(s) for s in resolve_reshape_sizes("reshape", in_sizes, tuple(out_sizes)))  # type: ignore[arg-type]
    n, m = len(in_sizes), len(out_sizes)
    if math.prod(in_sizes) == 0:
        # Empty tensors: no element moves, one group carries every dim.
        kind = _group_kind(n, m)
        return ReshapeAnalysis(
            in_sizes, out_sizes, (ViewTransform(kind, tuple(range(n)), tuple(range(m))),)
        )
    transforms: list[ViewTransform] = []
    i = j = 0
    while i < n or j < m:
        in_one = i < n and in_sizes[i] == 1
        out_one = j < m and out_sizes[j] == 1
        if in_one and out_one:
            transforms.append(ViewTransform(ViewKind.KEEP, (i,), (j,)))
            i, j = i + 1, j + 1
        elif in_one:
            transforms.append(ViewTransform(ViewKind.SQUEEZE, (i,), ()))
            i += 1
        elif out_one:
            transforms.append(ViewTransform(ViewKind.BROADCAST, (), (j,)))
            j += 1
        else:
            group_in, group_out = [i], [j]
            prod_in, prod_out = in_sizes[i], out_sizes[j]
            i, j = i + 1, j + 1
            while prod_in != prod_out:
                if prod_in < prod_out:
                    group_in.append(i)
                    prod_in *= in_sizes[i]
                    i += 1
                else:
                    group_out.append(j)
                    prod_out *= out_sizes[j]
                    j += 1
            kind = _group_kind(len(group_in), len(group_out))
            transforms.append(ViewTransform(kind, tuple(group_in), tuple(group_out)))
    return ReshapeAnalysis(in_sizes, out_sizes, tuple(transforms))


def _group_kind(n_in: int, n_out: int) -> ViewKind:
    if n_in == 1 and n_out == 1:
        return ViewKind.KEEP
    if n_out == 1:
        return ViewKind.MERGE
    if n_in == 1:
        return ViewKind.SPLIT
    return ViewKind.MERGE_SPLIT


def apply_reshape_transforms(array, analysis: ReshapeAnalysis):  # noqa: ANN001 - any ndarray
    """Apply a decomposition step by step to a C-ordered array: squeezes, then each group's
    merge/split from the last group to the first, then broadcasts. Equal to a reshape; the
    property tests check exactly that."""
    squeezed = tuple(t.in_dims[0] for t in analysis.transforms if t.kind is ViewKind.SQUEEZE)
    result = array.reshape(tuple(s for d, s in enumerate(array.shape) if d not in squeezed))
    # Positions of the remaining input dims after squeezing.
    remaining = [d for d in range(len(analysis.in_sizes)) if d not in squeezed]
    groups = [
        t for t in analysis.transforms if t.kind not in (ViewKind.SQUEEZE, ViewKind.BROADCAST)
    ]
    for group in reversed(groups):
        start = remaining.index(group.in_dims[0])
        stop = start + len(group.in_dims)
        new = tuple(analysis.out_sizes[d] for d in group.out_dims)
        result = result.reshape(result.shape[:start] + new + result.shape[stop:])
        remaining[start:stop] = [-1] * len(new)
    for t in analysis.transforms:
        if t.kind is ViewKind.BROADCAST:
            result = result.reshape(
                result.shape[: t.out_dims[0]] + (1,) + result.shape[t.out_dims[0] :]
            )
    return result
