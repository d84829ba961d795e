"""GPU: layernorm's and rmsnorm's backward where the column sums are taken in parts by the
normalization (planning.column_partials), against NumPy, from torch tensors and host arrays;
ragged row counts (a row group walks one row fewer than another)."""

from __future__ import annotations

import numpy as np
import pytest
from fusion_zoo import build
from test_gpu_execute import to_device, to_host, torch_or_skip
from training_fusions import NORM_BACKWARDS

from tunefuse import DataType

pytestmark = pytest.mark.gpu

TOLERANCE = {
    DataType.Float: 1e-4,
    DataType.BFloat16: 2e-2,
    DataType.Half: 5e-3,
    DataType.Double: 1e-4,  # computed in Float, as the definitions cast
}
CASES = NORM_BACKWARDS


@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=lambda d: d.value)
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize(
    "rows, cols",
    [(9001, 1000), (4100, 4096), (1500, 12288), (13001, 768), (70000, 33), (300000, 16)],
)
def test_column_sums_in_parts_compute_the_formula(name, rows, cols, dtype, rng):
    torch_or_skip()
    from tunefuse.runtime.executor import device_info_for

    define, make, formula = CASES[name]
    fd = build(define, dtype)
    inputs = make(rows, cols, dtype, rng)
    plan = fd.plan(inputs, device=device_info_for(fd, to_device(inputs)))
    if not plan.segments[0].column_partials:
        # (layernorm bf16 [300000, 16]: its partial sums would cost over half the reads saved)
        pytest.skip("the column sums are not taken in parts here")
    want = formula(*inputs)
    for convert in (to_device, lambda xs: xs):
        got = [to_host(t) for t in fd.execute(convert(inputs))]
        for g, w in zip(got, want, strict=True):
            tol = TOLERANCE[dtype] * max(1.0, float(np.abs(w).max()))
            np.testing.assert_allclose(
                np.asarray(g, np.float64), w, rtol=TOLERANCE[dtype], atol=tol
            )
