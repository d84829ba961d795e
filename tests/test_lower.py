"""Lowering a plan (choose params -> generate -> compile or fetch -> launch geometry) without a
GPU: NVRTC compiles for the device profile, a fetched binary replaces a compile only under
its own kernel name, and the chooser's params and provenance are what the launch plan keeps."""

import numpy as np
import pytest
from fusion_zoo import ZOO, build, inputs_for

from tunefuse import DataType
from tunefuse.codegen import generate
from tunefuse.device_info import H100
from tunefuse.planning.plan import make_plan
from tunefuse.runtime import lower as lower_module
from tunefuse.runtime.lower import by_kernel_name, code_key, lower
from tunefuse.schedulers import params_to_dict, scheduler_for, value_of, with_values

ELF = b"\x7fELF"


default_chooser = lower_module.default_chooser(H100)


@pytest.fixture(scope="module")
def split_plan():
    """softmax of fp32 [2, 2**20] on an H100: two rows cannot fill the GPU, so its max and
    sum (one pass) are a kernel of their own, split across blocks through a workspace, and
    the outputs another."""
    fd = build(ZOO["softmax"], DataType.Float)
    inputs = inputs_for(fd, 2, 1 << 20, np.random.default_rng(0))
    return make_plan(fd.fusion, inputs, device=H100)


def test_every_segment_is_lowered_to_a_compiled_kernel_of_its_own(split_plan):
    lowered = lower(split_plan, H100, default_chooser)
    kernels = lowered.launch.kernels
    assert len(split_plan.segments) >= 2
    assert len(kernels) == len(lowered.binaries) == len(split_plan.segments)
    assert any(k.workspace is not None for k in kernels)
    dtypes = {b.id: b.dtype for b in split_plan.buffers}
    for seg, k, b in zip(split_plan.segments, kernels, lowered.binaries):
        src = generate(seg, default_chooser(seg)[0], H100, dtypes)
        assert (k.kernel_name, k.code_key, k.chosen) == (
            src.name,
            code_key(src, "sm_90"),
            "default",
        )
        assert (k.grid, k.block, k.shared_bytes) == (
            tuple(src.grid),
            tuple(src.block),
            src.shared_bytes,
        )
        assert b.kernel_name == src.name and b.cubin.startswith(ELF) and b.compiled
    assert [key for key, _ in lowered.compiled] == [k.code_key for k in kernels]


def test_a_fetched_binary_is_used_under_its_own_name_only(split_plan):
    first = lower(split_plan, H100, default_chooser)
    names = {k.code_key: k.kernel_name for k in first.launch.kernels}
    cubins = {k.code_key: b.cubin for k, b in zip(first.launch.kernels, first.binaries)}
    stale = b"not a cubin"

    def fetch(code_keys, sources):  # noqa: ANN001, ANN202
        assert list(code_keys) == [k.code_key for k in first.launch.kernels]
        found = {key: (stale, names[key]) for key in code_keys}
        wrong = code_keys[0]
        found[wrong] = (stale, names[wrong] + "_other")  # another kernel's binary
        return found

    again = lower(split_plan, H100, default_chooser, fetch)
    assert again.launch == first.launch
    assert [b.compiled for b in again.binaries] == [True] + [False] * (len(cubins) - 1)
    assert again.binaries[0].cubin == cubins[first.launch.kernels[0].code_key]
    assert all(b.cubin == stale for b in again.binaries[1:])
    assert [key for key, _ in again.compiled] == [first.launch.kernels[0].code_key]


def test_binaries_compiled_elsewhere_are_found_by_kernel_name(split_plan):
    first = lower(split_plan, H100, default_chooser)
    by_name = {b.kernel_name: b.cubin for b in first.binaries}
    again = lower(split_plan, H100, default_chooser, by_kernel_name(by_name))
    assert not again.compiled
    assert [b.cubin for b in again.binaries] == [b.cubin for b in first.binaries]


def test_the_choosers_params_and_provenance_are_what_the_launch_plan_keeps():
    fd = build(ZOO["softmax"], DataType.Float)
    plan = make_plan(fd.fusion, inputs_for(fd, 64, 4096, np.random.default_rng(1)), device=H100)
    (seg,) = plan.segments
    default = scheduler_for(seg.scheduler).default_params(seg, H100)
    # another valid point of the space: twice the default's threads a row
    threads = value_of(default, "threads_r")
    other = with_values(default, {"threads_r": threads * 2})
    assert scheduler_for(seg.scheduler).is_valid(seg, H100, other) is None
    lowered = lower(plan, H100, lambda s: (other, "source"))
    (k,) = lowered.launch.kernels
    assert k.chosen == "source" and k.params == params_to_dict(other)
    assert k.kernel_name != lower(plan, H100, default_chooser).launch.kernels[0].kernel_name
