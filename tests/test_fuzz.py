"""The fuzzed corpus on the CPU (CI): every fusion plans, its plan (run by the CPU plan
interpreter, which refuses any load a taken branch reads outside its buffer) agrees with the
reference, and every kernel it generates, at the default params and at a random point of
the search space, compiles with NVRTC for sm_80 and sm_90. The GPU half of the gate (the
same corpus against the reference on a GPU, under compute-sanitizer) is tests/fuzz_corpus.py.

TUNEFUSE_FUZZ_COUNT / TUNEFUSE_FUZZ_SEED widen or move the corpus."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from fuzz import (
    EVERY_OP,
    agree,
    corpus,
    device_plan,
    fuzz_case,
    in_run_order,
    named_cases,
    ops_covered,
    random_params,
)

from tunefuse import DataType, FusionDefinition, reference
from tunefuse.arrays import strides_in_order
from tunefuse.codegen import generate
from tunefuse.codegen.guards import guarded_loads, lane_uniform
from tunefuse.compiler import compile_kernel
from tunefuse.device_info import PROFILES
from tunefuse.ir.ops import GroupOp
from tunefuse.planning.indexing import Affine, Var
from tunefuse.planning.kernel_ir import SchedulerKind
from tunefuse.planning.plan import make_plan
from tunefuse.planning.plan_interpreter import LoadOutOfBounds, run_plan
from tunefuse.planning.segment import Segment
from tunefuse.schedulers import scheduler_for

SEED = int(os.environ.get("TUNEFUSE_FUZZ_SEED", "0"))
COUNT = int(os.environ.get("TUNEFUSE_FUZZ_COUNT", "600"))
COMPILE_COUNT = int(os.environ.get("TUNEFUSE_FUZZ_COMPILE_COUNT", "150"))


def test_the_corpus_is_deterministic_and_reaches_every_op():
    cases = list(corpus(SEED, COUNT)) + named_cases()
    assert not EVERY_OP - ops_covered(cases), sorted(EVERY_OP - ops_covered(cases))
    again = fuzz_case(SEED * 1_000_003 + 5)
    assert str(again.fd) == str(cases[5].fd)
    assert all(np.array_equal(a, b) for a, b in zip(again.inputs, cases[5].inputs))
    layouts = {layout for c in cases for layout in c.layouts}
    assert layouts == {"contiguous", "offset", "permuted", "strided", "expanded", "scalar"}
    # empty extents (fuzz.EMPTY_SHARE of the cases) and extents of one
    assert sum(any(0 in np.shape(x) for x in c.inputs) for c in cases) >= COUNT // 100
    assert any(1 in np.shape(x) for c in cases for x in c.inputs)


def test_every_fuzzed_plan_agrees_with_the_reference_and_stays_in_bounds():
    kernels = _check_plans(list(corpus(SEED, COUNT)) + named_cases())
    assert kernels >= COUNT


def test_every_normalization_split_into_a_kernel_a_pass_agrees_with_the_reference():
    """What a GPU does with rows it can neither hold nor spread over its SMs (plan.py's split
    policy), done to every normalization of the corpus: its reductions' kernels, then the
    rest reading their results, must compute what the one kernel computes."""
    cases = [c for c in corpus(SEED + 1, COUNT) if _normalizations(device_plan(c))]
    splits = []

    def every(seg: Segment) -> str:
        splits.append(seg.name)
        return "split by the test"

    _check_plans(cases, split=every)
    assert len(cases) >= 30 and len(splits) >= len(cases), (len(cases), len(splits))
    for case in cases:  # what stays one kernel is a single pass: a var over a dim of 1
        f = case.fd.fusion
        for seg in _normalizations(device_plan(case, split=every)):
            assert all(f.producer(st.value).op in GroupOp.REDUCTION for st in seg.stores), case


def _normalizations(plan) -> list:  # noqa: ANN001
    return [s for s in plan.segments if s.scheduler is SchedulerKind.NORMALIZATION]


def _check_plans(cases: list, split=None) -> int:  # noqa: ANN001
    """Runs each case's plan (planned as the GPU sees its inputs) on the CPU interpreter
    against the reference; returns the number of kernels."""
    failures = []
    kernels = 0
    for case in cases:
        want = in_run_order(
            case.fd.fusion, reference.run(case.fd.fusion, case.inputs, include_aliased=True)
        )
        plan = device_plan(case, split)  # the inputs' own strides and alignment, as on the GPU
        kernels += len(plan.segments)
        for binding in plan.outputs:  # an output given a stride order is laid out in it
            order = case.fd.fusion.outputs[binding.position].stride_order
            if order is not None and binding.view.strides != strides_in_order(
                binding.view.shape, order
            ):
                failures.append(f"{case}: output {binding.position} not in stride order {order}")
        try:
            got = run_plan(plan, case.inputs)  # the returned outputs, then the in-place ones
        except LoadOutOfBounds as e:
            failures.append(f"{case}: {e}")
            continue
        assert len(got) == len(want)
        for g, w in zip(got, want):
            if not agree(g, w):
                failures.append(f"{case}: differs from the reference")
    assert not failures, "\n".join(failures[:10])
    return kernels


def test_every_fuzzed_plan_writes_into_preallocated_outputs():
    """execute(out=...): each returned output into a buffer of its own layout (row-major, or
    the dims reversed), beside in-place writes; the plan writes every one of them."""
    rng = np.random.default_rng(SEED)
    failures = []
    for case in list(corpus(SEED, COUNT // 2)):
        f = case.fd.fusion
        every = reference.run(f, case.inputs, include_aliased=True)
        returned = [w for w, o in zip(every, f.outputs) if o.alias_input is None]
        out = [
            np.zeros(w.shape[::-1], w.dtype).T
            if w.ndim >= 2 and rng.random() < 0.5
            else np.zeros_like(w)
            for w in returned
        ]
        got = run_plan(make_plan(f, case.inputs, out), case.inputs, out)
        if not all(agree(g, w) for g, w in zip(got, in_run_order(f, every))):
            failures.append(f"{case}: differs from the reference")
        elif not all(agree(o, w) for o, w in zip(out, returned)):
            failures.append(f"{case}: an out= buffer was not written")
    assert not failures, "\n".join(failures[:10])


def _sources(case):  # noqa: ANN001, ANN202
    plan = make_plan(case.fd.fusion, case.inputs)
    dtypes = {b.id: b.dtype for b in plan.buffers}
    for arch in ("sm_80", "sm_90"):
        device = PROFILES[arch]
        for seg in plan.segments:
            sched = scheduler_for(seg.scheduler)
            for params in (
                sched.default_params(seg, device),
                random_params(seg, device, case.seed),
            ):
                if params is not None:
                    assert sched.is_valid(seg, device, params) is None
                    yield arch, generate(seg, params, device, dtypes)


def test_every_fuzzed_kernel_compiles_for_sm80_and_sm90():
    compiled = 0
    for case in list(corpus(SEED + 1, COMPILE_COUNT)) + named_cases():
        for arch, src in _sources(case):
            assert len(compile_kernel(src.source, src.name, arch).cubin) > 0
            compiled += 1
    assert compiled >= 2 * COMPILE_COUNT


# -- the guarded-load pass -----------------------------------------------------------------


def _rope_plan(dim: int = 128, dtype: DataType = DataType.BFloat16):
    from fuzz import rotary_embedding

    fd = FusionDefinition()
    with fd:
        rotary_embedding(fd, 16, 4, dim, dtype)
    inputs = [np.ones(s, dtype.numpy) for s in [(16, 4, dim), (16, dim), (16, dim)]]
    return make_plan(fd.fusion, inputs)


def test_rotary_embedding_reads_each_half_only_where_it_is_used():
    """The issue's crash: both cat branches were vector-loaded before the branch. Now each
    is one vector load predicated on its (lane-uniform) branch, and the plan stays in bounds."""
    plan = _rope_plan()
    (seg,) = plan.segments
    guarded = guarded_loads(st.expr for st in seg.stores)
    assert len(guarded) == 2  # x[..., i + 64] and x[..., i - 64]
    device = PROFILES["sm_90"]
    params = scheduler_for(seg.scheduler).default_params(seg, device)
    assert params.vector == 8
    source = generate(seg, params, device, {b.id: b.dtype for b in plan.buffers}).source
    for k in guarded:
        (load_line,) = [line for line in source.splitlines() if f"v{k} = " in line]
        assert load_line.strip().startswith("if ("), load_line  # predicated, never unconditional
    unguarded = [k for k in range(len(seg.loads)) if k not in guarded]
    for k in unguarded:
        assert re.search(rf"const TfVec<tf_bf16, 8> v{k} = ", source)


def test_a_guard_that_splits_a_vector_reads_lane_by_lane_inside_the_branch():
    """pad(x[6], (4, 2)) in fp32: the 12 outputs take 3 vectors of 4, and the guard's upper
    bound (10) falls inside the last one, so x is read a lane at a time inside the branch,
    while the output is still stored a vector at a time."""
    fd = FusionDefinition()
    with fd:
        x = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        fd.add_output(fd.ops.pad(fd.ops.exp(x), [4, 2], 0.0))
    plan = make_plan(fd.fusion, [np.ones(6, np.float32)])
    (seg,) = plan.segments
    assert set(guarded_loads(st.expr for st in seg.stores)) == {0}
    device = PROFILES["sm_90"]
    params = scheduler_for(seg.scheduler).default_params(seg, device)
    assert params.vector == 4
    source = generate(seg, params, device, {b.id: b.dtype for b in plan.buffers}).source
    assert "TfVec<float, 4> v0" not in source
    body = source.split("for (int e = 0;")[-1]
    assert body.index("if (") < body.index("B0[")  # the load sits inside the branch
    assert "*reinterpret_cast<TfVec<float, 4>*>(&B1[" in source


def test_lane_uniform_conditions():
    i = Var(1, 128)
    j = Var(0, 4)
    at = lambda c, *terms: Affine(tuple(terms), c)  # noqa: E731
    assert lane_uniform(at(0, (i, 1)), 1, 128, 8, -(2**62), 64)
    assert not lane_uniform(at(0, (i, 1)), 1, 128, 8, -(2**62), 60)  # the bound splits a vector
    assert not lane_uniform(at(-3, (i, 1)), 1, 128, 4, 0, 64)  # shifted by 3
    assert lane_uniform(at(-3, (j, 1)), 1, 128, 4, 0, 2)  # moves with another dim only
    assert not lane_uniform(at(0, (i, 1), (j, 6)), 1, 128, 4, 0, 64)  # 6 * j is not a multiple of 4
    assert lane_uniform(at(0, (i, 1)), 1, 128, 1, 0, 63)


def test_the_interpreter_refuses_a_load_out_of_bounds():
    """The CPU oracle itself: a segment that reads before its buffer is an error, not a
    NumPy negative index that wraps around."""
    from dataclasses import replace

    from tunefuse.planning.indexing import add, const

    plan = _rope_plan(dim=8, dtype=DataType.Float)
    seg = plan.segments[0]
    bad = replace(
        seg, loads=tuple(replace(ld, offset=add(ld.offset, const(-3))) for ld in seg.loads)
    )
    inputs = [np.ones(s, np.float32) for s in [(16, 4, 8), (16, 8), (16, 8)]]
    with pytest.raises(LoadOutOfBounds, match="reads outside"):
        run_plan(replace(plan, segments=(bad,)), inputs)
