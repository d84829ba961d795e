"""A kernel's name is unique to its code (`codegen.kernel_name`): the runtime loads kernels by
name and the tuner's compile pool fetches binaries by name, so two codes under one name run
one code for both. The zoo's fusions at rows of every length near a power of two (read by
vectors unpeeled, peeled, or an element at a time) and at each vector their rows allow, with
the defaults and with the widest vector, peeled or not: one name a code, one code a name."""

import dataclasses

import numpy as np
from fusion_zoo import ZOO, build, inputs_for

from tunefuse import DataType
from tunefuse.codegen import generate, kernel_body
from tunefuse.device_info import PROFILES
from tunefuse.schedulers import reduction, scheduler_for

DEVICE = PROFILES["sm_90"]


def _kernels(name: str, dtype: DataType, rows: int, cols: int):  # noqa: ANN202
    """(name, body without its header, params) of each kernel of the zoo case at [rows, cols],
    with its default params and, where its rows run along a vector, the widest vector."""
    fd = build(ZOO[name], dtype)
    plan = fd.plan(inputs_for(fd, rows, cols, np.random.default_rng(0)), device=DEVICE)
    dtypes = {b.id: b.dtype for b in plan.buffers}
    for seg in plan.segments:
        sched = scheduler_for(seg.scheduler)
        default = sched.default_params(seg, DEVICE)
        choices = [default]
        if seg.scheduler.value in ("reduction", "normalization"):
            widest = reduction.widest_vector_choice(seg)
            changes = {"vector": widest, "rows_per_lane": 1}
            if seg.scheduler.value == "normalization":
                changes.update(cache_row=False, cluster=1, elements_per_thread=widest)
            choices.append(dataclasses.replace(default, **changes))
        for params in choices:
            if sched.is_valid(seg, DEVICE, params) is not None:
                continue
            ks = generate(seg, params, DEVICE, dtypes)
            yield ks.name, kernel_body(ks), params


def test_one_name_a_code_and_one_code_a_name():
    by_name: dict[str, str] = {}
    by_code: dict[str, str] = {}
    kernels = 0
    for name in ("softmax", "layernorm", "rmsnorm", "logsumexp", "row_sum"):
        for dtype in (DataType.Float, DataType.BFloat16):
            for cols in (4093, 4094, 4095, 4096, 4097, 4098, 4100, 4104):
                for rows in (3, 64):
                    for kname, code, params in _kernels(name, dtype, rows, cols):
                        kernels += 1
                        assert by_name.setdefault(kname, code) == code, (name, cols, params)
                        assert by_code.setdefault(code, kname) == kname, (name, cols, params)
    assert kernels > 300
    assert len(by_name) > 60  # rows of different alignments did make different code


def test_fuzzed_fusions_name_each_code_once():
    """The fuzzed corpus (odd lengths, offset, strided and expanded inputs, pads, cats),
    planned as on the GPU, with default and random params: one name a code, one code a
    name."""
    from fuzz import corpus, device_plan, random_params

    by_name: dict[str, str] = {}
    by_code: dict[str, str] = {}
    for case in corpus(31, 200):
        plan = device_plan(case, device=DEVICE)
        dtypes = {b.id: b.dtype for b in plan.buffers}
        for seg in plan.segments:
            default = scheduler_for(seg.scheduler).default_params(seg, DEVICE)
            for params in (default, random_params(seg, DEVICE, 31)):
                if params is None:
                    continue
                ks = generate(seg, params, DEVICE, dtypes)
                code = kernel_body(ks)
                assert by_name.setdefault(ks.name, code) == code, (case, params)
                assert by_code.setdefault(code, ks.name) == ks.name, (case, params)
    assert len(by_name) > 100
