"""Schedulers: for each kind of segment, a frozen Params dataclass, a default heuristic
from device properties and sizes, a validity check, and an Optuna search space."""

from __future__ import annotations

from tunefuse.kernel_ir import SchedulerKind
from tunefuse.schedulers import normalization, pointwise, reduction, transpose

SCHEDULERS = {
    SchedulerKind.POINTWISE: pointwise,
    SchedulerKind.REDUCTION: reduction,
    SchedulerKind.NORMALIZATION: normalization,
    SchedulerKind.TRANSPOSE: transpose,
}


def scheduler_for(kind: SchedulerKind):  # noqa: ANN201 - a scheduler module
    return SCHEDULERS[kind]
