"""The GPU generation checks nvFuser's test helpers offer (`is_pre_hopper()`, ...)."""

import torch


def _major() -> int:
    return torch.cuda.get_device_properties(torch.cuda.current_device()).major


def is_pre_volta() -> bool:
    return _major() < 7


def is_pre_ampere() -> bool:
    return _major() < 8


def is_pre_hopper() -> bool:
    return _major() < 9


def is_pre_blackwell() -> bool:
    return _major() < 10
