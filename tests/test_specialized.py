"""The generated hot path (runtime.specialized) without a GPU: for every fuzzed plan its source
compiles, and run against stand-ins for torch and the driver it checks the signature, writes
each buffer's pointer into the right argument cell, launches each kernel with its geometry
in order, and returns the new arrays; any input off the signature is a miss, before any
launch. (The GPU half: test_gpu_execute's hot-path test and the corpus's repeat calls.)"""

from __future__ import annotations

import ctypes
import os

import pytest
from fuzz import corpus, named_cases

from tunefuse.device_info import H100
from tunefuse.planning.kernel_ir import BufferKind
from tunefuse.planning.plan import make_plan
from tunefuse.runtime.lower import default_chooser, generate_launches
from tunefuse.runtime.specialized import HotKernel, hot_source

SEED = int(os.environ.get("TUNEFUSE_FUZZ_SEED", "0"))
COUNT = int(os.environ.get("TUNEFUSE_FUZZ_COUNT", "600"))


class StandIn:
    """A CUDA tensor as the hot path reads one."""

    is_cuda = True

    def __init__(self, ptr: int, dtype: str, shape: tuple, strides: tuple, device: int = 0):
        self.ptr, self.dtype, self.shape, self.strides, self.device = (
            ptr,
            dtype,
            shape,
            strides,
            device,
        )

    def data_ptr(self) -> int:
        return self.ptr

    def stride(self) -> tuple:
        return self.strides

    def get_device(self) -> int:
        return self.device


class Workspaces:
    """A split kernel's SplitWorkspaces as the hot path calls it."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def pointer(self, arrays: object, stream: object, handle: object, keep: list) -> int:
        assert (arrays, stream, handle, keep) == ("arrays", "stream", "handle", [])
        return self.ptr


def bind(launch, signature, likes):  # noqa: ANN001, ANN201
    """The source of `launch` for inputs `signature`, run against stand-ins; returns
    (hot, launches, cells, made)."""
    inputs = [b for b in launch.buffers if b.kind is BufferKind.INPUT]
    input_buffers = [(b.id, b.input_index) for b in inputs]
    others = [b for b in launch.buffers if b.kind is not BufferKind.INPUT]
    allocations = [(b.id, likes(b)) for b in others]
    kernels = [k for k in launch.kernels if k.numel]
    hot_kernels = [
        HotKernel(
            tuple(b for _, b in k.pointer_slots),
            k.grid,
            k.block,
            k.shared_bytes,
            k.workspace is not None,
        )
        for k in kernels
    ]
    results = [
        o.buffer
        for o in launch.outputs
        if o.returned and launch.buffers[o.buffer].kind is not BufferKind.INPUT
    ]
    key = [(s.dtype, s.shape, s.strides, s.ptr & 15, s.device) for s in signature]
    source = hot_source(key, input_buffers, allocations, hot_kernels, results)
    launches, made = [], {}
    env = {
        "enter": lambda: None,
        "leave": lambda token: None,
        "current_stream": lambda index: 0,
        "index": 0,
        "stream_cache": {0: ("stream", "handle")},
        "streams": lambda: pytest.fail("the stream was cached"),
        "lock": __import__("threading").Lock(),
        "launch": lambda *args: launches.append(args) or (0,),
        "failed": lambda k, err: pytest.fail(f"{k}: {err}"),
        "arrays": "arrays",
    }

    def empty_like(x):  # noqa: ANN001, ANN202
        out = StandIn(0x7000_0000 + 0x1000 * len(made), x.dtype, x.shape, x.strides)
        made[len(made)] = out
        return out

    env["empty_like"] = empty_like
    for j, (bid, _) in enumerate(allocations):
        env[f"make{j}"] = lambda inputs, stream, j=j: (f"array{j}", 0x9000_0000 + 0x100 * j)
    cells = {}
    for n, k in enumerate(kernels):
        env.update({f"k{n}": k, f"F{n}": f"function{n}", f"P{n}": f"params{n}"})
        for c, _ in enumerate(k.pointer_slots):
            cells[(n, c)] = env[f"c{n}_{c}"] = ctypes.c_uint64(0)
        if k.workspace is not None:
            cells[(n, "workspace")] = env[f"w{n}"] = ctypes.c_uint64(0)
            env[f"W{n}"] = Workspaces(0xA000_0000 + 0x100 * n)
    for k, s in enumerate(signature):
        env.update({f"T{k}": StandIn, f"D{k}": s.dtype, f"S{k}": s.shape, f"R{k}": s.strides})
    exec(compile(source, "<hot>", "exec"), env)  # noqa: S102
    return env["hot"], launches, cells, kernels, allocations, results


def _cases():  # noqa: ANN202
    """The corpus's fusions whose inputs are all tensors (the case the hot path takes)."""
    for case in list(corpus(SEED + 3, COUNT // 4)) + named_cases():
        if "scalar" not in case.layouts:
            yield case


def test_every_fuzzed_plans_hot_path_writes_each_pointer_and_launches_in_order():
    check_hot_paths(list(_cases()), COUNT // 8)


def check_hot_paths(cases: list, at_least: int = 1) -> int:
    """Each case's hot path run against stand-ins, checked; the number of split kernels."""
    checked = split_kernels = 0
    for case in cases:
        plan = make_plan(case.fd.fusion, case.inputs, device=H100)
        _, launch = generate_launches(plan, H100, default_chooser(H100))
        signature = [
            StandIn(0x1000_0000 + 0x10_0000 * k, str(x.dtype), tuple(x.shape), tuple(x.strides))
            for k, x in enumerate(case.inputs)
        ]
        first_like = {}

        def likes(b):  # noqa: ANN001, ANN202 - half the new arrays as empty_like of input 0
            first_like.setdefault(b.id, 0 if b.id % 2 else None)
            return first_like[b.id]

        hot, launches, cells, kernels, allocations, results = bind(launch, signature, likes)
        out = hot(signature)
        assert out is not None and len(out) == len(results), case
        assert [a[0] for a in launches] == [f"function{n}" for n in range(len(kernels))]
        pointers = {}
        for b in launch.buffers:
            if b.kind is BufferKind.INPUT:
                pointers[b.id] = signature[b.input_index].ptr
        likes_made = 0  # empty_like's stand-in numbers its arrays in the order they are made
        for j, (bid, like) in enumerate(allocations):
            if like is not None:
                pointers[bid] = 0x7000_0000 + 0x1000 * likes_made
                likes_made += 1
            else:
                pointers[bid] = 0x9000_0000 + 0x100 * j
        for n, k in enumerate(kernels):
            assert launches[n][1:8] == (*k.grid, *k.block, k.shared_bytes)
            assert launches[n][8:] == ("handle", f"params{n}", 0)
            for c, (_, bid) in enumerate(k.pointer_slots):
                assert cells[(n, c)].value == pointers[bid], (case, n, c)
            if k.workspace is not None:
                assert cells[(n, "workspace")].value == 0xA000_0000 + 0x100 * n, (case, n)
                split_kernels += 1
        checked += 1
        if signature:  # one input off the signature: a miss, nothing launched
            before = len(launches)
            off = list(signature)
            s = off[0]
            off[0] = StandIn(s.ptr + 4, s.dtype, s.shape, s.strides)
            assert hot(off) is None and len(launches) == before
            off[0] = StandIn(s.ptr, s.dtype, (*s.shape, 1), s.strides)
            assert hot(off) is None and len(launches) == before
    assert checked >= at_least, checked
    return split_kernels


def _split_sum_case():  # noqa: ANN202
    """Sums of two rows of 2**18: too few outputs to fill the GPU, so the default splits."""
    import numpy as np
    from fuzz import FuzzCase

    from tunefuse import DataType, FusionDefinition

    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(x, [1]))
    return FuzzCase(-1, fd, [np.ones((2, 2**18), np.float32)], ["sum"], ["contiguous"])


def test_a_split_reductions_hot_path_passes_its_streams_workspace():
    assert check_hot_paths([_split_sum_case()]) == 1


def test_a_plan_with_nothing_to_launch_makes_its_outputs_and_launches_nothing():
    import numpy as np

    from tunefuse import DataType, FusionDefinition

    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.exp(x))
    x = np.ones((0, 5), np.float32)
    _, launch = generate_launches(
        make_plan(fd.fusion, [x], device=H100), H100, default_chooser(H100)
    )
    signature = [StandIn(0x1000, "float32", (0, 5), (5, 1))]
    hot, launches, *_ = bind(launch, signature, lambda b: 0)
    assert len(hot(signature)) == 1 and launches == []
