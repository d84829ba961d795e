"""A zoo normalization run against the reference: on the host under AddressSanitizer at
given params, and on the GPU through the executor's launches (the layout tests' last step)."""

from __future__ import annotations

import numpy as np
from fusion_zoo import ZOO, build, inputs_for
from test_gpu_execute import assert_agrees

from tunefuse import DataType

HOST_ROWS = 37  # a last block of 5 rows of 8, a partial one of most layouts


def zoo_norm_agrees_on_host(name: str, cols: int, dtype: DataType, params: list) -> None:
    """HOST_ROWS rows of `cols` of the zoo's `name`, run on the host under AddressSanitizer
    at each of `params`, each against the reference."""
    from host_kernels import run_on_host

    fd = build(ZOO[name], dtype)
    inputs = inputs_for(fd, HOST_ROWS, cols, np.random.default_rng(cols))
    for run in run_on_host(fd, inputs, [lambda s, d, p=p: p for p in params]):
        assert_agrees(fd, inputs, run.outputs, dtype)


def zoo_norm_agrees_on_gpu(name: str, rows: int, cols: int, dtype: DataType, **changes) -> list:
    """The zoo's `name` on [rows, cols] run by the executor on the GPU, its normalization
    kernel's default params with `changes`, against the reference; the launches."""
    from test_gpu_split import run_with_reduction_params

    fd = build(ZOO[name], dtype)
    inputs = inputs_for(fd, rows, cols, np.random.default_rng(cols))
    got, launched = run_with_reduction_params(fd, inputs, kind="normalization", **changes)
    assert_agrees(fd, inputs, got, dtype)
    return launched
