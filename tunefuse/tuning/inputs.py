"""Inputs rebuilt from a stored input signature (what a tuning job carries)."""

from __future__ import annotations

import json

import numpy as np

from tunefuse.dtypes import DataType


def make_inputs(signature_json: str, seed: int = 0) -> list:
    """NumPy arrays (contiguous; standard normal, small integers, random bools) and
    scalars (the stored value, or 1 where only the dtype was kept)."""
    rng = np.random.default_rng(seed)
    out: list = []
    for item in json.loads(signature_json):
        dtype = DataType(item["dtype"])
        if item["kind"] == "tensor":
            shape = tuple(item["shape"])
            if dtype.is_floating:
                out.append(rng.standard_normal(shape).astype(dtype.numpy))
            elif dtype.is_bool:
                out.append(rng.integers(0, 2, shape).astype(bool))
            else:
                out.append(rng.integers(-8, 8, shape).astype(dtype.numpy))
        else:
            value = item["value"]
            if value is None:
                value = 1.0 if dtype.is_floating else True if dtype.is_bool else 1
            out.append(value)
    return out
