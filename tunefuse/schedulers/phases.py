"""The passes over a row that a reduction or normalization kernel makes: one per distinct
accumulator (operands before their users: softmax's max before its sum), then the output
pass. The normalization scheduler reads them to size a staged row, codegen to emit it."""

from __future__ import annotations

from tunefuse.ir.ops import OpKind
from tunefuse.planning.kernel_ir import EGather, EGuard, ELoad, EOp, EReduce, Expr
from tunefuse.planning.segment import Segment


def post_order(roots: list[Expr]) -> list[Expr]:
    """Every subexpression of `roots` once, operands before their users."""
    out: list[Expr] = []
    seen: set[int] = set()

    def visit(e: Expr) -> None:
        if id(e) in seen:
            return
        seen.add(id(e))
        if isinstance(e, EReduce):
            visit(e.operand)
        elif isinstance(e, EOp):
            for x in e.operands:
                visit(x)
        elif isinstance(e, EGuard):
            visit(e.then)
            visit(e.other)
        elif isinstance(e, EGather):
            visit(e.index)
        out.append(e)

    for root in roots:
        visit(root)
    return out


FAMILY = {
    OpKind.SUM: "sum",
    OpKind.MEAN: "sum",
    OpKind.PROD: "prod",
    OpKind.MAX: "max",
    OpKind.MIN: "min",
    OpKind.VAR: "welford",
    OpKind.VAR_MEAN: "welford",
}


def reduction_groups(segment: Segment) -> list[list[EReduce]]:
    """The segment's reductions grouped by the accumulator that computes them (one family,
    one operand, one correction for Welford), in post-order."""
    reduces = [e for e in post_order([st.expr for st in segment.stores]) if isinstance(e, EReduce)]
    groups: dict[tuple, list[EReduce]] = {}
    for r in reduces:
        family = FAMILY[r.op]
        key = (family, id(r.operand), r.correction if family == "welford" else 0)
        groups.setdefault(key, []).append(r)
    return list(groups.values())


def phases_reading(segment: Segment) -> dict[int, int]:
    """Load -> how many passes (each accumulator's, then the output pass) read it: what
    decides whether a load is read once (evict-first) and whether a row is kept (in registers
    or shared memory) for the passes after the first."""
    phases = [[group[0].operand] for group in reduction_groups(segment)]
    full = [st.expr for st in segment.stores if not st.reduced]
    if full:
        phases.append(full)
    passes: dict[int, int] = {}
    for roots in phases:
        for k in {e.load for e in post_order(roots) if isinstance(e, ELoad)}:
            passes[k] = passes.get(k, 0) + 1
    return passes
