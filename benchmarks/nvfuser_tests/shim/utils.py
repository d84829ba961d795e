"""Harness helpers as nvFuser's tests/python/utils (own code, same checks)."""

import re

import torch
from _arch import is_pre_ampere, is_pre_hopper, is_pre_volta  # noqa: F401
from nvfuser import DataType, FusionDefinition  # noqa: F401


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
