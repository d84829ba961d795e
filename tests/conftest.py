"""Shared fixtures. GPU tests carry `@pytest.mark.gpu` and skip cleanly without a GPU."""

from __future__ import annotations

import functools

import numpy as np
import pytest


@functools.cache
def gpu_available() -> bool:
    try:
        from cuda.core import Device

        Device(0).set_current()
        return True
    except Exception:  # noqa: BLE001 - any failure means no usable GPU
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any("gpu" in item.keywords for item in items) and not gpu_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
