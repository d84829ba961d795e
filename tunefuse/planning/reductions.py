"""Which of a segment's reductions one accumulator computes.

Reductions of one family over one operand share an accumulator (sum and mean; var and
var_mean of one correction). With `online`, a max and the sum of exp(x - max) over the same
x (softmax's and logsumexp's pair) become one accumulator too, MAX_EXP_SUM: a running max
and a sum rescaled whenever the max grows, so that one pass over the row yields both, where
the sum otherwise needs the finished max and a second pass. The reduction scheduler always
forms the pair (its kernels read the row once a pass, so the pair is a pass saved); a
normalization forms it only where its row is read from memory again each pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tunefuse.ir.ops import OpKind
from tunefuse.planning.kernel_ir import EGather, EGuard, EOp, EReduce, Expr, children

FAMILY = {
    OpKind.SUM: "sum",
    OpKind.MEAN: "sum",
    OpKind.PROD: "prod",
    OpKind.MAX: "max",
    OpKind.MIN: "min",
    OpKind.VAR: "welford",
    OpKind.VAR_MEAN: "welford",
}
MAX_EXP_SUM = "max_exp_sum"


@dataclass(frozen=True, slots=True)
class ReductionGroup:
    """Reductions one accumulator computes: `family` (a FAMILY value or MAX_EXP_SUM) over
    `operand` (for MAX_EXP_SUM, the max's operand x), every reduction it yields (a
    MAX_EXP_SUM group: its max reductions, then its sums of exp(x - max))."""

    family: str
    operand: Expr
    reduces: tuple[EReduce, ...]


def post_order(roots: Sequence[Expr]) -> list[Expr]:
    """Every subexpression of `roots` once, operands before their users."""
    out: list[Expr] = []
    seen: set[int] = set()

    def visit(e: Expr) -> None:
        if id(e) in seen:
            return
        seen.add(id(e))
        for x in children(e):
            visit(x)
        out.append(e)

    for root in roots:
        visit(root)
    return out


def contains_reduce(e: Expr) -> bool:
    """True when `e` reads a reduction's result anywhere below it."""
    if isinstance(e, EReduce):
        return True
    if isinstance(e, (EOp, EGuard, EGather)):
        return any(contains_reduce(x) for x in children(e))
    return False


def reduction_groups(roots: Sequence[Expr], online: bool) -> list[ReductionGroup]:
    """The accumulators that compute every reduction below `roots`, operands before their
    users (post-order)."""
    reduces = [e for e in post_order(roots) if isinstance(e, EReduce)]
    by_key: dict[tuple, list[EReduce]] = {}
    for r in reduces:
        family = FAMILY[r.op]
        key = (family, id(r.operand), r.correction if family == "welford" else 0)
        by_key.setdefault(key, []).append(r)
    groups = [ReductionGroup(FAMILY[rs[0].op], rs[0].operand, tuple(rs)) for rs in by_key.values()]
    if not online:
        return groups
    for k, g in enumerate(groups):
        partner = _max_of_exp_sum(g, groups)
        if partner is None:
            continue
        # The pair takes the max's place: it reads nothing the max did not (x holds no
        # reduction), so every group after the max may read either result.
        m = groups.index(partner)
        groups[m] = ReductionGroup(MAX_EXP_SUM, partner.operand, partner.reduces + g.reduces)
        groups[k] = None  # type: ignore[call-overload]
    return [g for g in groups if g is not None]


def _max_of_exp_sum(g: ReductionGroup | None, groups: list) -> ReductionGroup | None:
    """The max group whose x `g` sums exp(x - max) of, when `g` is such a sum, computed
    wholly in one floating type (the two-pass form rounds nothing the running form does not);
    else None."""
    if g is None or g.family != "sum":
        return None
    e = g.operand
    if not (isinstance(e, EOp) and e.op is OpKind.EXP and len(e.operands) == 1):
        return None
    d = e.operands[0]
    if not (isinstance(d, EOp) and d.op is OpKind.SUB and len(d.operands) == 2):
        return None
    x, m = d.operands
    if not isinstance(m, EReduce) or m.op is not OpKind.MAX or contains_reduce(x):
        return None
    t = m.dtype
    if not t.is_floating or t.compute is not t:
        return None
    if any(r.dtype is not t for r in g.reduces) or {e.dtype, e.operand_dtype, d.dtype} != {t}:
        return None
    if d.operand_dtype is not t:
        return None
    for other in groups:
        if other is not None and other.family == "max" and m in other.reduces:
            return other if other.operand == x else None
    return None  # pragma: no cover - every reduction below the roots is in a group


def independent_reductions(roots: Sequence[Expr], online: bool = True) -> bool:
    """No accumulator's operand reads another reduction's result (softmax's sum of exp(x -
    max) is one accumulator with its max, MAX_EXP_SUM, where `online`: a row read from
    memory; a row held in registers takes them as two): each share of a row is then
    complete on its own, and one pass over the row computes every reduction."""
    return not any(contains_reduce(g.operand) for g in reduction_groups(roots, online=online))
