"""`fd.segment(inputs)`: a plan's kernels as definitions of their own (CPU: the reference
runs them; the GPU half is in test_gpu_nvfuser_compat.py)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from fuzz import agree, corpus, device_plan

from tunefuse import DataType, FusionDefinition, reference
from tunefuse.errors import ExecutionError
from tunefuse.ir.ops import OpKind
from tunefuse.planning.segment_definitions import segment_definitions

SEED = int(os.environ.get("TUNEFUSE_FUZZ_SEED", "0"))
COUNT = int(os.environ.get("TUNEFUSE_FUZZ_COUNT", "600"))


def run_in_turn(fusion, parts, inputs: list) -> list:  # noqa: ANN001
    """The segments one after another through the reference, as `execute` runs them: every
    output of the original fusion (the in-place ones too), in definition order."""
    values = dict(zip(fusion.inputs, inputs))
    for part in parts:
        args = [values[part.to_original[v]] for v in part.fusion.inputs]
        results = reference.run(part.fusion, args, include_aliased=True)
        for spec, result in zip(part.fusion.outputs, results):
            values[part.to_original[spec.value]] = laid_out(result, spec.stride_order)
    return [values[o.value] for o in fusion.outputs]


def laid_out(array: np.ndarray, stride_order) -> np.ndarray:  # noqa: ANN001
    """`array` in the memory layout `execute` gives an output of that stride order."""
    if stride_order is None:
        return array
    outer_first = sorted(range(array.ndim), key=lambda d: -stride_order[d])
    made = np.ascontiguousarray(np.transpose(array, outer_first))
    return np.transpose(made, np.argsort(outer_first))


def three_kernels() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        b = fd.define_tensor([-1], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(x, [1]))
        y = fd.ops.segment_set(fd.ops.mul(x, x))
        fd.add_output(fd.ops.add(fd.ops.sum(y, [0]), b))
    return fd


def test_each_kernel_is_a_definition_that_reads_what_earlier_ones_hand_on():
    fd = three_kernels()
    xs = [np.random.default_rng(0).random((4, 8), np.float32), np.arange(8, dtype=np.float32)]
    assert fd.plan(xs).num_kernels == 3
    segments = fd.segment(xs)
    assert segments == fd.segments and len(segments) == 3
    maps = fd.segment_index_space_maps

    def role(segment) -> int:  # noqa: ANN001 - the sum of x, the segment_set, the rest
        stored = {maps[segment][o.value] for o in segment.fusion.outputs}
        if fd.fusion.outputs[0].value in stored:
            return 0
        return 1 if any(fd.fusion.producer(v).op is OpKind.SEGMENT_SET for v in stored) else 2

    segments = sorted(segments, key=role)
    assert [role(s) for s in segments] == [0, 1, 2]
    first, second, third = (s.fusion for s in segments)
    # inputs and outputs map to the original's values
    assert [maps[segments[0]][v] for v in first.inputs] == [fd.fusion.inputs[0]]
    assert [maps[segments[0]][o.value] for o in first.outputs] == [fd.fusion.outputs[0].value]
    handed = maps[segments[1]][second.outputs[0].value]  # the segment_set's result
    assert fd.fusion.producer(handed).op is OpKind.SEGMENT_SET
    assert handed in {maps[segments[2]][v] for v in third.inputs}
    assert fd.fusion.inputs[1] in {maps[segments[2]][v] for v in third.inputs}
    # inside its segment the boundary is a plain copy, so the segment is one kernel
    assert OpKind.SEGMENT_SET not in {n.op for n in second.nodes}
    for segment in segments:
        args = [
            xs[fd.fusion.inputs.index(maps[segment][v])]
            if maps[segment][v] in fd.fusion.inputs
            else np.square(xs[0])
            for v in segment.fusion.inputs
        ]
        assert segment.plan(args).num_kernels == 1
        assert "def nvfuser_fusion_id" in str(segment)  # each prints as a definition
    got = run_in_turn(fd.fusion, segment_definitions(fd.plan(xs)), xs)
    want = reference.run(fd.fusion, xs)
    assert all(agree(g, w) for g, w in zip(got, want))


def test_a_fusion_of_one_kernel_is_not_segmented():
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(fd.ops.exp(x), [1]))
    assert fd.segment([np.ones((4, 8), np.float32)]) == [] and fd.segments == []


def test_an_in_place_output_is_written_by_the_last_segment():
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        s = fd.ops.sum(fd.ops.segment_set(fd.ops.mul(x, x)), [1])
        fd.add_output(s)
        fd.add_output(fd.ops.add(x, 1.0), alias_input=x)  # x + 1 written into x
    xs = [np.random.default_rng(1).random((4, 8), np.float32)]
    parts = segment_definitions(fd.plan(xs))
    assert len(parts) == 2
    assert [o.alias_input is not None for o in parts[0].fusion.outputs] == [False]
    last = parts[-1].fusion
    assert any(o.alias_input is not None for o in last.outputs)
    got = run_in_turn(fd.fusion, parts, xs)
    want = reference.run(fd.fusion, xs, include_aliased=True)
    assert all(agree(g, w) for g, w in zip(got, want))


def test_a_segmented_definition_refuses_preallocated_outputs_by_name():
    fd = three_kernels()
    xs = [np.ones((4, 8), np.float32), np.ones(8, np.float32)]
    fd.segment(xs)
    with pytest.raises(ExecutionError, match="segmented definition"):
        fd.execute(xs, out=[np.empty(4, np.float32), np.empty(8, np.float32)])


def test_every_fuzzed_plan_run_segment_by_segment_agrees_with_the_reference():
    """The fuzzed corpus, every normalization split into a kernel a pass (more kernels to
    cut between): its segments run in turn compute what the whole fusion computes."""
    failures, segmented = [], 0

    def every(seg) -> str:  # noqa: ANN001
        return "split by the test"

    for case in corpus(SEED + 7, COUNT // 2):
        parts = segment_definitions(device_plan(case, split=every))
        if not parts:
            continue
        segmented += 1
        want = reference.run(case.fd.fusion, case.inputs, include_aliased=True)
        try:
            got = run_in_turn(case.fd.fusion, parts, case.inputs)
        except Exception as e:  # noqa: BLE001 - reported with the case
            failures.append(f"{case}: {type(e).__name__}: {e}")
            continue
        if not all(agree(g, w) for g, w in zip(got, want)):
            failures.append(f"{case}: differs from the reference")
    assert not failures, "\n".join(failures[:10])
    assert segmented >= COUNT // 20, segmented


def test_inputs_and_outputs_are_the_value_ids_execute_takes_and_returns():
    """nvFuser's `fd.inputs()` / `fd.outputs()`, which its `_execute_segments` maps through
    `segment_index_space_maps`: a segment's are mapped onto the original's."""
    fd = three_kernels()
    assert fd.inputs() == list(fd.fusion.inputs) and len(fd.inputs()) == 2
    assert fd.outputs() == [o.value for o in fd.fusion.outputs]
    xs = [np.ones((4, 8), np.float32), np.ones(8, np.float32)]
    for segment in fd.segment(xs):
        to_original = fd.segment_index_space_maps[segment]
        assert {to_original[v] for v in segment.outputs()} <= set(fd.outputs()) | {
            v for s in fd.segments for v in map(fd.segment_index_space_maps[s].get, s.inputs())
        }
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1], dtype=DataType.Float)
        fd.add_output(fd.ops.abs(x))
        fd.add_output(fd.ops.neg(x), alias_input=x)
    assert len(fd.outputs()) == 1 and fd.outputs()[0] == fd.fusion.outputs[0].value
