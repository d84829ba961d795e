"""Harness helpers as nvFuser's tests/python/utils (own code, same checks)."""

import re

import torch
from nvfuser import DataType, FusionDefinition  # noqa: F401


def _major():
    return torch.cuda.get_device_properties(torch.cuda.current_device()).major


def is_pre_volta():
    return _major() < 7


def is_pre_ampere():
    return _major() < 8


def is_pre_hopper():
    return _major() < 9


def check_captured_python_definition(reference_outputs, fd, inputs, device=None):
    fd_str = fd.__repr__()
    func_name = re.findall("(nvfuser_fusion_id\\d+)", fd_str.split("\n")[1])[0]
    scope = {"FusionDefinition": FusionDefinition, "DataType": DataType}
    exec(fd_str, scope)
    with FusionDefinition() as fd_cap:
        scope[func_name](fd_cap)
    torch.manual_seed(0)
    captured = fd_cap.execute(inputs, device=device)
    return all(
        torch.allclose(r.to(torch.float64), captured[i].to(torch.float64), equal_nan=True)
        for i, r in enumerate(reference_outputs)
    )
