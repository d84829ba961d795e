"""GPU: the training fusions of tests/training_fusions.py (layernorm's backward, cross-entropy,
GroupNorm, implicit broadcasts of lower ranks) on their default plans, against the
reference, from torch tensors and from host arrays."""

from __future__ import annotations

import numpy as np
import pytest
from fusion_zoo import build
from test_gpu_execute import to_device, to_host, torch_or_skip
from training_fusions import CASES

from tunefuse import DataType, reference

pytestmark = pytest.mark.gpu

TOLERANCE = {DataType.Float: 1e-4, DataType.BFloat16: 2e-2}


@pytest.mark.parametrize("dtype", [DataType.Float, DataType.BFloat16], ids=lambda d: d.value)
@pytest.mark.parametrize("name", sorted(CASES))
def test_training_fusion_computes_what_the_reference_computes(name, dtype, rng):
    torch_or_skip()
    define, _, make = CASES[name]
    fd = build(define, dtype)
    inputs = make(dtype, rng)
    expected = reference.run(fd.fusion, inputs)
    for convert in (to_device, lambda xs: xs):
        got = [to_host(t) for t in fd.execute(convert(inputs))]
        for g, e in zip(got, expected, strict=True):
            e64 = np.asarray(e, np.float64)
            tol = TOLERANCE[dtype] * max(1.0, float(np.abs(e64).max()))
            np.testing.assert_allclose(
                np.asarray(g, np.float64), e64, rtol=TOLERANCE[dtype], atol=tol
            )
