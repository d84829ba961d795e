"""The passes over a row that a reduction or normalization kernel makes: one per
accumulator (operands before their users: softmax's max before its sum, or one pass for
both where they run as one, `planning.reductions`), then the output pass. The
normalization scheduler reads them to size a staged row, codegen to emit it."""

from __future__ import annotations

from tunefuse.planning.kernel_ir import ELoad
from tunefuse.planning.reductions import ReductionGroup, post_order, reduction_groups
from tunefuse.planning.segment import Segment


def segment_groups(segment: Segment, online: bool) -> list[ReductionGroup]:
    """The accumulators of `segment`'s reductions, in pass order."""
    return reduction_groups([st.expr for st in segment.stores], online)


def phases_reading(segment: Segment, online: bool) -> dict[int, int]:
    """Load -> how many passes (each accumulator's, then the output pass) read it: what
    decides whether a load is read once (evict-first) and whether a row is kept (in registers
    or shared memory) for the passes after the first."""
    phases = [[group.operand] for group in segment_groups(segment, online)]
    full = [st.expr for st in segment.stores if not st.reduced]
    if full:
        phases.append(full)
    passes: dict[int, int] = {}
    for roots in phases:
        for k in {e.load for e in post_order(roots) if isinstance(e, ELoad)}:
            passes[k] = passes.get(k, 0) + 1
    return passes
