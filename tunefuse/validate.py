"""`fd.validate(inputs, reference_outputs=None)`: run a fusion and compare every output with a
reference (given, or tunefuse's NumPy reference of the same definition), within the
tolerance of the output's dtype. A mismatch raises AssertionError naming the output, where
it differs most and by how much, as nvFuser's validate does."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tunefuse.arrays import is_array, to_numpy
from tunefuse.ir.dtypes import from_any_dtype

# Two correct results of one computation may differ by a few ulps of their dtype for each
# reordering (a reduction's summation order): the dtype's tolerance, with this margin.
TOLERANCE_MARGIN = 4


def compare(outputs: Sequence[object], expected: Sequence[object]) -> None:
    """AssertionError at the first output that differs from `expected` beyond its dtype's
    tolerance (NaN where the reference has NaN counts as equal)."""
    if len(outputs) != len(expected):
        raise AssertionError(
            f"validate: the fusion returned {len(outputs)} outputs, the reference has {len(expected)}"
        )
    for k, (got, want) in enumerate(zip(outputs, expected)):
        g, e = _host(got), _host(want)
        if g.shape != e.shape:
            raise AssertionError(
                f"validate: output {k} has shape {list(g.shape)}, the reference {list(e.shape)}"
            )
        dtype = from_any_dtype(g.dtype)
        if dtype is not from_any_dtype(e.dtype):
            raise AssertionError(
                f"validate: output {k} is {dtype.value}, the reference {from_any_dtype(e.dtype).value}"
            )
        if g.size == 0:
            continue
        rtol, atol = (t * TOLERANCE_MARGIN for t in dtype.tolerance)
        if dtype.is_floating:
            g64, e64 = g.astype(np.float64), e.astype(np.float64)
            close = np.isclose(g64, e64, rtol=rtol, atol=atol, equal_nan=True)
            diff = np.where(close, 0.0, np.abs(g64 - e64))
            diff = np.where(np.isnan(diff), np.inf, diff)
        else:  # integers and bools: exactly (int64 beyond 2**53 has no float64 image)
            close = g == e
            diff = (~close).astype(np.int8)
        if not close.all():
            bad = int(np.size(close) - np.count_nonzero(close))
            at = np.unravel_index(int(np.argmax(diff)), g.shape)
            raise AssertionError(
                f"validate: output {k} ({dtype.value} {list(g.shape)}) differs from the reference at {bad} of "
                f"{g.size} elements (rtol {rtol:g}, atol {atol:g}); worst at {list(map(int, at))}: got "
                f"{g[at]!r}, expected {e[at]!r}"
            )


def _host(value: object) -> np.ndarray:
    if is_array(value):
        return np.asarray(to_numpy(value, name="validate"))
    return np.asarray(value)
