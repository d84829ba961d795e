"""What the worker process does for one candidate: run the fusion with the candidate's
params for one kernel (the others at their defaults), check the output against the
default params' output, time it. A crash here kills only the worker."""

from __future__ import annotations

from typing import Any

import numpy as np

from tunefuse import rng


def outputs_agree(got: np.ndarray, want: np.ndarray) -> bool:
    """A candidate's output against the default params': equal up to the rounding that
    another order of summation gives in the output's dtype (a bfloat16 ulp is 0.8%)."""
    from tunefuse.ir.dtypes import from_any_dtype

    if got.shape != want.shape:
        return False
    rtol, atol = from_any_dtype(want.dtype).tolerance
    return bool(
        np.allclose(
            got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True
        )
    )


def _setup(state: dict) -> dict:
    if "executor_inputs" in state:
        return state
    from tunefuse.ir.serialize import fusion_from_json
    from tunefuse.runtime.device import runtime
    from tunefuse.tuning.inputs import make_inputs
    from tunefuse.tuning.timing import Timer

    setup = state["setup"]
    fusion = fusion_from_json(setup["fusion_json"])
    host_inputs = make_inputs(setup["signature_json"], seed=setup.get("seed", 0), fusion=fusion)
    rt = runtime(setup["device"])
    from tunefuse.ir.dtypes import from_any_dtype
    from tunefuse.runtime.device_array import DeviceArray
    from tunefuse.runtime.transfer import host_to_device

    device_inputs = []
    with rt.active():
        stream = rt.default_stream
        for x in host_inputs:
            if isinstance(x, np.ndarray):
                buf = rt.allocate(x.nbytes, stream)
                host_to_device(x, int(buf.handle), int(stream.handle))  # type: ignore[attr-defined]
                device_inputs.append(
                    DeviceArray(buf, x.shape, from_any_dtype(x.dtype), stream=stream)
                )
            else:
                device_inputs.append(x)
        timer = Timer(rt)
    state.update(
        fusion=fusion,
        host_inputs=host_inputs,
        executor_inputs=device_inputs,
        rt=rt,
        timer=timer,
        reference_outputs=None,
    )
    return state


def _repeatable_call(executor: Any, inputs: list, kernel_key: str) -> Any:
    """What the timer repeats: the fusion run into outputs allocated once, so that it times
    the kernels and not the allocator (a stream-ordered pool that releases its memory at each
    synchronization maps fresh pages for every call's outputs). Where outputs cannot be
    handed in (an output that is a view of an input), or the plan with them would not run the
    candidate's kernel, each call allocates its outputs."""
    from tunefuse.errors import TunefuseError

    outs = executor.run(inputs)
    try:
        executor.run(inputs, out=outs)
    except TunefuseError:
        return lambda: executor.run(inputs)
    if not all(
        any(r.launch.kernel_key == kernel_key for r in exe.recipes)
        for exe in executor.plans.values()
    ):
        return lambda: executor.run(inputs)
    return lambda: executor.run(inputs, out=outs)


def _run(state: dict, kernel_key: str, params: Any, cubins: dict[str, bytes]) -> tuple[list, Any]:
    from tunefuse.runtime.executor import Executor
    from tunefuse.runtime.lower import by_kernel_name

    executor = Executor(
        state["fusion"],
        params_source=(
            (lambda seg, dev: params if seg.kernel_key == kernel_key else None)
            if params is not None
            else None
        ),
        fetch=by_kernel_name(cubins),
        device=state["rt"].index,
    )
    with rng.replayed():  # a candidate draws the numbers the default drew (uniform, normal)
        outputs = executor.run(state["executor_inputs"])
    return [o.numpy() if hasattr(o, "numpy") else np.asarray(o) for o in outputs], executor


def measure(request: dict, state: dict) -> dict:
    """request: kernel_key, scheduler, params (dict), cubins ({kernel name: cubin}),
    check_reference (bool). Returns median/spread in µs, or why the candidate is wrong."""
    from tunefuse.planning.kernel_ir import SchedulerKind
    from tunefuse.schedulers import params_from_dict

    state = _setup(state)
    if state["reference_outputs"] is None:
        state["reference_outputs"], _ = _run(state, request["kernel_key"], None, {})
    kind = SchedulerKind(request["scheduler"])
    params = params_from_dict(kind, request["params"])
    if params is None:
        return {"ok": False, "error": f"params do not fit {kind.value}: {request['params']}"}
    outputs, executor = _run(state, request["kernel_key"], params, request.get("cubins", {}))
    for got, want in zip(outputs, state["reference_outputs"]):
        if not outputs_agree(got, want):
            return {"ok": False, "error": "output differs from the default params' output"}
    if request.get("check_reference"):
        from tunefuse import reference

        with rng.replayed():
            expected = reference.run(state["fusion"], state["host_inputs"])
        for got, want in zip(outputs, expected):
            if not np.allclose(
                got.astype(np.float64),
                want.astype(np.float64),
                rtol=2e-2,
                atol=2e-2,
                equal_nan=True,
            ):
                return {"ok": False, "error": "output differs from tunefuse.reference"}
    call = _repeatable_call(executor, state["executor_inputs"], request["kernel_key"])
    with state["rt"].active():
        timing = state["timer"].time(call, min_total_us=request.get("min_total_us", 20_000.0))
    recipe = next(
        r
        for r in next(iter(executor.plans.values())).recipes
        if r.launch.kernel_key == request["kernel_key"]
    )
    return {
        "ok": True,
        "median_us": timing.median_us,
        "spread_us": timing.spread_us,
        "reps": timing.reps,
        "kernel_name": recipe.launch.kernel_name,
    }
