"""A normalization fusion's kernel and its default params, planned for a device profile
without a GPU: what the tests of the normalization scheduler's defaults look at."""

from __future__ import annotations

from unittest import mock

import numpy as np
from fusion_zoo import ZOO, build, unfilled_inputs

from tunefuse import DataType, FusionDefinition
from tunefuse.device_info import H100, DeviceInfo
from tunefuse.planning.kernel_ir import SchedulerKind
from tunefuse.planning.segment import Segment
from tunefuse.schedulers import normalization


def zoo_norm_plan(name: str, rows: int, cols: int, dtype: DataType, device: DeviceInfo = H100):  # noqa: ANN201
    """The plan of the zoo's `name` on [rows, cols]: one normalization kernel."""
    fd = build(ZOO[name], dtype)
    plan = fd.plan(unfilled_inputs(fd, rows, cols), device=device)
    (seg,) = plan.segments
    assert seg.scheduler is SchedulerKind.NORMALIZATION
    return plan


def zoo_norm_default(
    name: str,
    rows: int,
    cols: int,
    dtype: DataType,
    device: DeviceInfo = H100,
    **constants: object,
) -> tuple[Segment, normalization.Params]:
    """The one normalization kernel of the zoo's `name` on [rows, cols], and its defaults;
    with `constants`, those of `normalization` patched (SHARED_WEIGHT_WAVES=0: the layout
    SHARED_WEIGHT_ROWS starts from)."""
    (seg,) = zoo_norm_plan(name, rows, cols, dtype, device).segments
    if not constants:
        return seg, normalization.default_params(seg, device)
    with mock.patch.multiple(normalization, **constants):
        return seg, normalization.default_params(seg, device)


def column_partials_default(
    name: str, rows: int, cols: int, dtype: DataType, device: DeviceInfo = H100
) -> tuple[Segment, normalization.Params]:
    """The dx kernel of `name`'s backward (layernorm or rmsnorm, `training_fusions`) that
    takes the column sums in parts on [rows, cols], and its defaults."""
    import training_fusions

    fd = FusionDefinition()
    with fd:
        getattr(training_fusions, f"{name}_backward")(fd, dtype)
    make = getattr(training_fusions, f"{name}_backward_inputs")
    plan = fd.plan(make(rows, cols, dtype, np.random.default_rng(0)), device=device)
    (seg,) = [s for s in plan.segments if s.column_partials]
    return seg, normalization.default_params(seg, device)
