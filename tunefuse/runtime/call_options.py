"""nvFuser's diagnostic options of `fd.execute`: `print_repro=True` prints a script that
rebuilds the fusion and inputs of the same layout and runs it; `profile=True` times the call
(the device synchronized before and after) and lists the kernels it launched, read back with
`fd.profile()`; `capture_debug_output=True` keeps the plan's description of what ran and
why, read back with `fd.get_debug_output()`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from tunefuse.arrays import describe_array, is_array
from tunefuse.ir.printer import python_literal


@dataclass(frozen=True)
class KernelProfile:
    name: str
    scheduler: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    params: dict
    chosen: str  # where its params came from (default, tuned record, ...)


@dataclass(frozen=True)
class FusionProfile:
    """One profiled `execute`: wall time of the call with the device synchronized before and
    after (launch overhead included), and the kernels of its plan in launch order."""

    device: int
    wall_us: float
    kernels: tuple[KernelProfile, ...]
    fusion_id: int = -1  # the definition's number in this process (nvFuser's fusion id)

    @property
    def segments(self) -> int:
        """nvFuser's name: how many kernels the call launched."""
        return len(self.kernels)

    @property
    def kernel_profiles(self) -> tuple[KernelProfile, ...]:
        """nvFuser's name for `kernels`."""
        return self.kernels


_MAKE_INPUT = '''def make_input(shape, strides, dtype):
    """Random values in the original input's layout (strides in elements)."""
    rng = np.random.default_rng(0)
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(shape, strides)) if all(shape) else 0
    if np.dtype(dtype).kind == "b":
        base = rng.standard_normal(span) > 0
    elif np.dtype(dtype).kind in "iu":
        base = rng.integers(-8, 8, span).astype(dtype)
    else:
        base = rng.standard_normal(span).astype(dtype)
    if any(s < 0 for s in strides):
        return base[:int(np.prod(shape))].reshape(shape)
    return np.lib.stride_tricks.as_strided(base, shape, [s * base.itemsize for s in strides])
'''


def repro_script(fusion, inputs: Sequence[object]) -> str:  # noqa: ANN001 - tunefuse.ir.fusion.Fusion
    """Python that rebuilds `fusion`, makes inputs of the same dtypes, shapes and strides
    (random values, on the host) and executes it."""
    infos = [describe_array(x) if is_array(x) else None for x in inputs]
    lines = [fusion.to_python().rstrip(), "", "import numpy as np"]
    if any(info is not None and info.dtype.value == "bfloat16" for info in infos):
        lines.append("import ml_dtypes")
    lines += ["", "", _MAKE_INPUT, "", "inputs = ["]
    for x, info in zip(inputs, infos):
        if info is not None:
            dtype = (
                "ml_dtypes.bfloat16" if info.dtype.value == "bfloat16" else f"np.{info.dtype.numpy}"
            )
            lines.append(f"    make_input({list(info.shape)}, {list(info.strides)}, {dtype}),")
        else:
            lines.append(f"    {python_literal(x)},")
    lines += ["]", "outputs = fd.execute(inputs)", ""]
    return "\n".join(lines)


def synchronized_wall_us(device: int, call) -> tuple[list, float]:  # noqa: ANN001
    """`call()`'s result and its wall time in µs, the device idle before and after."""
    from tunefuse.runtime.device import runtime

    rt = runtime(device)
    rt.device.sync()
    start = time.perf_counter()
    result = call()
    rt.device.sync()
    return result, (time.perf_counter() - start) * 1e6


def kernels_of(exe) -> tuple[KernelProfile, ...]:  # noqa: ANN001 - an ExecutablePlan
    return tuple(
        KernelProfile(
            r.launch.kernel_name,
            r.launch.scheduler,
            tuple(r.launch.grid),
            tuple(r.launch.block),
            dict(r.launch.params),
            r.launch.chosen,
        )
        for r in exe.recipes
        if r.launch.numel
    )


def debug_text(exe) -> str:  # noqa: ANN001 - an ExecutablePlan
    """The plan's description (what each kernel computes and why it was split so), then each
    kernel launched: name, scheduler, geometry and where its params came from."""
    head = str(exe.plan) if exe.plan is not None else "plan read back from the persistent cache"
    lines = [head.rstrip(), "kernels launched:"]
    for k in kernels_of(exe):
        lines.append(
            f"  {k.name} ({k.scheduler}, params {k.chosen}) grid {list(k.grid)} block {list(k.block)} {k.params}"
        )
    return "\n".join(lines) + "\n"
