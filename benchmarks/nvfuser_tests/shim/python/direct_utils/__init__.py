"""Harness helpers as nvFuser's tests/python/direct_utils (own code, same checks)."""

import torch
from _arch import is_pre_ampere, is_pre_blackwell, is_pre_hopper, is_pre_volta  # noqa: F401
from nvfuser_direct import DataType, FusionDefinition  # noqa: F401


def verify_stride_order(output_strides, stride_order):
    sorted_stride = list(output_strides)
    rank = len(output_strides)
    for idx, axis in enumerate(stride_order):
        sorted_stride[rank - 1 - axis] = output_strides[idx]
    assert sorted(sorted_stride, reverse=True) == sorted_stride


def check_captured_python_definition(reference_outputs, fd, inputs, device=None):
    fd_str = fd.__repr__()
    scope = {"FusionDefinition": FusionDefinition, "DataType": DataType}
    exec(fd_str, scope)
    with FusionDefinition() as fd_cap:
        scope["nvfuser_fusion"](fd_cap)
    torch.manual_seed(0)
    captured = fd_cap.execute(inputs, device=device)
    if len(reference_outputs) != len(captured):
        return False
    for r, c in zip(reference_outputs, captured):
        if not r.dtype.is_complex:
            r = r.to(torch.float64)
        if not c.dtype.is_complex:
            c = c.to(torch.float64)
        if not torch.allclose(r, c, equal_nan=True):
            return False
    return True
