"""Which loads sit behind a guard, and under what condition a kernel may read them.

`pad` and `cat` lower to `EGuard`: `then` where every `lo <= index < hi` holds, else
`other`. A load inside a branch may only be read where that branch is taken: `cat([x2, x1])`
reads x1 at `i - 64`, which lies before the buffer for the lanes that take x2's branch. So a
load that no unguarded path reaches is read only inside its branch (the renderer emits it
there), or, where a whole vector of lanes is known to take the same branch, by one vector
load predicated on the branch's condition at the vector's first lane.

Pure functions over kernel expressions; the emitters (pointwise, reduction, transpose)
decide what to do with the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tunefuse.planning.indexing import Affine, Var
from tunefuse.planning.kernel_ir import EGather, EGuard, ELoad, EOp, Expr

Conditions = tuple[tuple[Affine, int, int], ...]


@dataclass(frozen=True, slots=True)
class GuardStep:
    """One guard on the way to a load: its conditions, and whether the load is in the
    branch where they hold (`then`) or where one fails (`other`)."""

    conditions: Conditions
    taken: bool


Path = tuple[GuardStep, ...]


def guarded_loads(roots: Iterable[Expr]) -> dict[int, frozenset[Path]]:
    """Load index -> every path of guards that reaches it, for the loads that no unguarded
    path reaches. A reduction's result is a leaf (its operand is read by the reduction's own
    loop: pass it as a root of its own)."""
    paths: dict[int, set[Path]] = {}
    unguarded: set[int] = set()
    seen: set[tuple[int, Path]] = set()

    def visit(e: Expr, path: Path) -> None:
        key = (id(e), path)
        if key in seen:
            return
        seen.add(key)
        if isinstance(e, EOp):
            for x in e.operands:
                visit(x, path)
        elif isinstance(e, EGuard):
            visit(e.then, (*path, GuardStep(e.conditions, True)))
            visit(e.other, (*path, GuardStep(e.conditions, False)))
        elif isinstance(e, EGather):
            visit(e.index, path)
        elif isinstance(e, ELoad):
            if path:
                paths.setdefault(e.load, set()).add(path)
            else:
                unguarded.add(e.load)

    for root in roots:
        visit(root, ())
    return {k: frozenset(v) for k, v in paths.items() if k not in unguarded}


def lane_uniform(index: Affine, last: int, last_extent: int, vec: int, lo: int, hi: int) -> bool:
    """True when `lo <= index < hi` has the same truth for the `vec` lanes of a vector
    (innermost index i0 .. i0 + vec - 1, i0 a multiple of vec): the index does not move with
    the innermost dim, or moves one for one with it from a multiple of `vec`, with bounds
    that are multiples of `vec` too."""
    if vec == 1:
        return True
    if not index.is_affine:
        return False
    c = index.coeff(Var(last, last_extent)) if last_extent != 1 else 0
    if c == 0:
        return True
    if c != 1 or index.const % vec or lo % vec or hi % vec:
        return False
    return all(coeff % vec == 0 for atom, coeff in index.terms if atom.k != last)  # type: ignore[union-attr]


def paths_lane_uniform(paths: frozenset[Path], last: int, last_extent: int, vec: int) -> bool:
    return all(
        lane_uniform(idx, last, last_extent, vec, lo, hi)
        for path in paths
        for step in path
        for idx, lo, hi in step.conditions
    )


NO_LOWER_BOUND = -(2**61)  # a cat piece's guard has only an upper bound (lo = -2**62)


def condition_text(conditions: Conditions, render: Callable[[Affine], str]) -> str:
    """C for `every lo <= index < hi`; `render` writes an index as a long long expression."""
    parts = []
    for idx, lo, hi in conditions:
        x = render(idx)
        parts.append(f"({x} < {hi}LL)")
        if lo > NO_LOWER_BOUND:
            parts.append(f"({x} >= {lo}LL)")
    return " && ".join(parts) if parts else "true"


def predicate_text(paths: frozenset[Path], render: Callable[[Affine], str]) -> str:
    """C that is true exactly where some path to a load is taken."""
    alternatives = []
    for path in sorted(paths, key=repr):
        steps = []
        for step in path:
            cond = condition_text(step.conditions, render)
            steps.append(f"({cond})" if step.taken else f"!({cond})")
        alternatives.append("(" + " && ".join(steps) + ")")
    return " || ".join(alternatives)
