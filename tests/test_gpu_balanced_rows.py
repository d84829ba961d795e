"""GPU: rows held in registers by a whole number of warps that is not a power of two
(schedulers.normalization.balanced_threads: 160 threads for a bf16 backward's row of 2560),
forward and backward normalizations at widths between the powers of two, against the
reference; and tuned params of such counts, which the search space holds."""

from __future__ import annotations

import numpy as np
import pytest
from fusion_zoo import ZOO, build, inputs_for
from test_gpu_execute import check, to_device, to_host, torch_or_skip
from training_fusions import NORM_BACKWARDS

from tunefuse import DataType
from tunefuse.planning.kernel_ir import SchedulerKind
from tunefuse.schedulers import normalization

pytestmark = pytest.mark.gpu

WIDTHS = [768, 1536, 2560, 3000, 5120, 6144, 12288, 20480]
BACKWARD_TOLERANCE = {DataType.Float: 1e-4, DataType.BFloat16: 2e-2}


def _norm_params(fd, inputs):  # noqa: ANN001, ANN202
    from tunefuse.runtime.executor import device_info_for

    device = device_info_for(fd, to_device(inputs))
    plan = fd.plan(inputs, device=device)
    seg = next(s for s in plan.segments if s.scheduler is SchedulerKind.NORMALIZATION)
    return normalization.default_params(seg, device)


@pytest.mark.parametrize("dtype", [DataType.Float, DataType.BFloat16], ids=lambda d: d.value)
@pytest.mark.parametrize("name", ["softmax", "layernorm", "rmsnorm"])
@pytest.mark.parametrize("cols", WIDTHS)
def test_forward_rows_of_any_width(name, dtype, cols, rng):
    torch_or_skip()
    fd = build(ZOO[name], dtype)
    inputs = inputs_for(fd, 67, cols, rng)
    check(fd, inputs, tol_scale=2, at_least=DataType.Float)


@pytest.mark.parametrize("dtype", [DataType.Float, DataType.BFloat16], ids=lambda d: d.value)
@pytest.mark.parametrize("name", sorted(NORM_BACKWARDS))
@pytest.mark.parametrize("cols", WIDTHS)
@pytest.mark.parametrize("rows", [4099, 301])  # column sums in parts, and not
def test_backward_rows_of_any_width(name, dtype, rows, cols, rng):
    torch_or_skip()
    define, make, formula = NORM_BACKWARDS[name]
    fd = build(define, dtype)
    inputs = make(rows, cols, dtype, rng)
    want = formula(*inputs)
    got = [to_host(t) for t in fd.execute(to_device(inputs))]
    tol = BACKWARD_TOLERANCE[dtype]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(
            np.asarray(g, np.float64), w, rtol=tol, atol=tol * max(1.0, float(np.abs(w).max()))
        )


def test_the_widths_run_layouts_of_whole_warps_not_powers_of_two(rng):
    """The backward cases above run what they are meant to: the rows of bf16 backwards (two
    inputs held) take thread counts that are no power of two."""
    torch_or_skip()
    odd = set()
    define, make, _ = NORM_BACKWARDS["layernorm"]
    for cols in WIDTHS:
        fd = build(define, DataType.BFloat16)
        p = _norm_params(fd, make(4099, cols, DataType.BFloat16, rng))
        if p.threads_r & (p.threads_r - 1):
            assert p.threads_r % 32 == 0
            odd.add(cols)
    assert {1536, 2560, 3000, 5120, 6144, 12288} <= odd


@pytest.mark.parametrize("threads", [96, 160, 224, 352])
def test_tuned_thread_counts_of_whole_warps(threads, rng):
    """Params a tuner may pick (any whole number of warps): layernorm fp32 rows of 3000 held
    in registers, and re-read (cache_row off), agree with the reference."""
    torch_or_skip()
    from dataclasses import replace

    from tunefuse.runtime.executor import Executor, device_info_for

    fd = build(ZOO["layernorm"], DataType.Float)
    inputs = inputs_for(fd, 129, 3000, rng)
    device = device_info_for(fd, to_device(inputs))
    plan = fd.plan(inputs, device=device)
    expected = fd.execute(to_device(inputs))
    for cache_row in (True, False):
        base = _norm_params(fd, inputs)
        ept = normalization.vectors_of_share(3000, threads, base.vector)
        p = replace(base, threads_r=threads, elements_per_thread=ept, cache_row=cache_row)
        seg = next(s for s in plan.segments if s.scheduler is SchedulerKind.NORMALIZATION)
        assert normalization.is_valid(seg, device, p) is None
        ex = Executor(
            fd.fusion, params_source=lambda s, d, p=p: p if s.kernel_key == seg.kernel_key else None
        )
        got = ex.run(to_device(inputs))
        launched = next(iter(ex.plans.values())).launch.kernels
        assert any(k.params["threads_r"] == threads for k in launched)
        assert any(k.params["cache_row"] is cache_row for k in launched)
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(to_host(g), to_host(e), rtol=1e-4, atol=1e-4)
