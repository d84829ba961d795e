"""The launcher's argument packing, without a GPU: each kernel of a lowered plan gets one
ctypes cell an argument, of the width its source declares, and a `void*[]` pointing at them;
a call writes its pointers and scalars into those cells, and a scalar the kernel's type cannot
hold is an error, never a wrapped value. (Launches are proven by the GPU tests.)"""

import ctypes

import numpy as np
import pytest
from fusion_zoo import ZOO, build, inputs_for

from tunefuse import DataType, FusionDefinition
from tunefuse.device_info import H100
from tunefuse.planning.plan import make_plan
from tunefuse.runtime.launcher import PackedKernel
from tunefuse.runtime.lower import default_chooser, lower

WIDTH = {"i32": ctypes.c_int32, "i64": ctypes.c_int64}


def lowered(fd, inputs):  # noqa: ANN001, ANN201
    plan = make_plan(fd.fusion, inputs, device=H100)
    return lower(plan, H100, default_chooser(H100))


def pointer_array(packed: PackedKernel) -> list[int]:
    n = len(packed.cells)
    return list((ctypes.c_void_p * n).from_address(packed.params))


def test_every_argument_has_a_cell_of_its_declared_width_and_the_array_points_at_them():
    fd = build(ZOO["logsumexp"], DataType.Float)  # split on an H100: workspaces too
    launch = lowered(fd, inputs_for(fd, 2, 1 << 20, np.random.default_rng(0))).launch
    pointers = [0x10000 * (b + 1) for b in range(len(launch.buffers))]
    for k in launch.kernels:
        packed = PackedKernel(k, func=None, index_error_word=0xABC0)
        packed.fill(pointers, {})
        assert pointer_array(packed) == [ctypes.addressof(c) for c in packed.cells]
        for pos, arg in enumerate(k.static_args):
            if arg is not None:
                assert (
                    type(packed.cells[pos]) is WIDTH[arg[0]] and packed.cells[pos].value == arg[1]
                )
        for pos, buffer_id in k.pointer_slots:
            assert packed.cells[pos].value == pointers[buffer_id]
        assert (packed.workspace is not None) == (k.workspace is not None)
        if k.workspace is not None:
            assert packed.workspace[1].nbytes == k.workspace[1] > 0
    assert any(k.workspace is not None for k in launch.kernels)


def scalar_kernel(dtype: DataType):  # noqa: ANN201
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], dtype=dtype)
        s = fd.define_scalar(dtype=dtype)
        fd.add_output(fd.ops.add(x, s))
    (k,) = lowered(fd, [np.zeros(100, dtype.numpy), 3]).launch.kernels
    ((pos, value, _),) = k.scalar_slots
    return k, pos, value


def test_a_run_time_scalar_is_written_in_its_type_and_one_that_does_not_fit_is_refused():
    k, pos, value = scalar_kernel(DataType.Int32)
    packed = PackedKernel(k, func=None)
    packed.fill([1, 2], {value: -7})
    assert type(packed.cells[pos]) is ctypes.c_int32 and packed.cells[pos].value == -7
    with pytest.raises(OverflowError):
        packed.fill([1, 2], {value: 1 << 40})  # a C cast would have written 0
    k, pos, value = scalar_kernel(DataType.Double)
    packed = PackedKernel(k, func=None)
    packed.fill([1, 2], {value: 0.1})
    assert type(packed.cells[pos]) is ctypes.c_double and packed.cells[pos].value == 0.1


# -- a split kernel's workspaces: one a stream, zeroed once; a graph capture's its own -------
class StandInArrays:
    """The arrays a launcher allocates from, recording each zeroed workspace."""

    def __init__(self) -> None:
        self.zeroed_on: list = []

    def zeroed(self, nbytes: int, stream: object):  # noqa: ANN201
        from tunefuse.runtime.allocators import Memory

        self.zeroed_on.append((nbytes, stream))
        return Memory(0x5000_0000 + 0x1000 * len(self.zeroed_on), f"memory on {stream}")


def workspaces(capturing: dict) -> "SplitWorkspaces":  # noqa: F821
    """SplitWorkspaces of 96 bytes whose capture query reads `capturing` (handle -> status,
    or "error")."""
    from tunefuse.runtime.launcher import SplitWorkspaces

    w = SplitWorkspaces(96)
    none = w.not_capturing

    def is_capturing(handle):  # noqa: ANN001, ANN202
        status = capturing.get(handle, none)
        return (1, none) if status == "error" else (0, status)

    w.is_capturing = is_capturing
    return w


def test_a_split_kernel_zeroes_a_workspace_once_a_stream_and_reuses_it():
    arrays, w, keep = StandInArrays(), workspaces({}), []
    first = [w.pointer(arrays, s, f"handle {s}", keep) for s in ("a", "b", "a", "b", "a")]
    assert first[0] == first[2] == first[4] != first[1] == first[3]
    assert arrays.zeroed_on == [(96, "a"), (96, "b")] and keep == []


def test_a_captured_or_unknown_stream_gets_a_fresh_workspace_each_call_kept_for_the_call():
    from cuda.bindings import driver

    active = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE
    arrays, keep = StandInArrays(), []
    w = workspaces({"handle g": active, "handle e": "error"})
    kept = w.pointer(arrays, "s", "handle s", keep)
    captured = [w.pointer(arrays, "g", "handle g", keep) for _ in range(2)]
    failed = w.pointer(arrays, "e", "handle e", keep)
    assert len({kept, *captured, failed}) == 4  # never the kept one, never each other's
    assert list(w.kept) == ["s"] and [m.ptr for m in keep] == [*captured, failed]


def test_past_the_stream_limit_the_oldest_streams_workspace_is_dropped():
    from tunefuse.runtime.launcher import MAX_WORKSPACE_STREAMS

    arrays, w = StandInArrays(), workspaces({})
    for s in range(MAX_WORKSPACE_STREAMS + 2):
        w.pointer(arrays, s, s, [])
    assert list(w.kept) == list(range(2, MAX_WORKSPACE_STREAMS + 2))
    w.pointer(arrays, 0, 0, [])  # made again, zeroed again
    assert arrays.zeroed_on[-1] == (96, 0) and len(arrays.zeroed_on) == MAX_WORKSPACE_STREAMS + 3
