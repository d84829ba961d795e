"""The nvfuser_direct_test fixture as nvFuser's direct conftest (own code, same checks)."""

from copy import deepcopy

import pytest
import torch
from nvfuser_direct import FusionDefinition
from python.direct_utils import check_captured_python_definition
from torch.testing._internal.common_utils import TestCase


class NVFuserTest(TestCase):
    def exec_nvfuser(self, fusion_func, inputs, *, expected_fd_str=None, device=None):
        inputs_captured = deepcopy(inputs)
        with FusionDefinition() as fd:
            fusion_func(fd)
        torch.manual_seed(0)
        out = fd.execute(inputs, device=device)
        assert check_captured_python_definition(out, fd, inputs_captured, device), (
            "printed definition differs"
        )
        assert expected_fd_str is None or expected_fd_str in repr(fd), "expected_fd_str not in repr"
        return out, fd


@pytest.fixture
def nvfuser_direct_test():
    yield NVFuserTest()
