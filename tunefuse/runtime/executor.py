"""The executor: signature -> plan (cached in memory) -> kernels -> launch.

The repeat call is the hot path: one signature, one dict lookup, one launch per kernel,
with every size and stride argument packed when the plan was made.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunefuse.arrays import Device
from tunefuse.cache import signature_json
from tunefuse.errors import ExecutionError, IndexOutOfRangeError
from tunefuse.planning.kernel_ir import SchedulerKind
from tunefuse.planning.plan import Plan, out_signature, plan_for
from tunefuse.planning.segment import Segment
from tunefuse.planning.signature import FusionInputs, bind_inputs
from tunefuse.reference import index_error_text
from tunefuse.runtime.allocators import arrays_kind
from tunefuse.runtime.device import Runtime, runtime
from tunefuse.runtime.launch_plan import (
    KernelLaunch,
    LaunchPlan,
    LaunchPlanError,
    launch_plan_key,
)
from tunefuse.runtime.launcher import Launcher
from tunefuse.runtime.lower import Binary, Fetcher, Lowered, lower
from tunefuse.runtime.specialized import specialize
from tunefuse.schedulers import params_from_dict, scheduler_for


@dataclass
class LaunchRecipe:
    launch: KernelLaunch
    kernel: object  # the loaded kernel; None when it has nothing to launch (numel 0)
    compile_ms: float
    compiled: bool  # False when the binary came from a cache


@dataclass
class ExecutablePlan:
    """A launch plan with its kernels loaded. `plan` is the Plan it was made from, None
    when it was read back from the persistent cache."""

    fusion: object  # tunefuse.ir.fusion.Fusion
    launch: LaunchPlan
    recipes: list[LaunchRecipe]
    plan: Plan | None = None

    @property
    def buffers(self) -> tuple:
        return self.launch.buffers

    @property
    def outputs(self) -> tuple:
        return self.launch.outputs

    @property
    def fixed_scalars(self) -> tuple:
        return self.launch.fixed_scalars

    @functools.cached_property
    def host_scalar_nodes(self) -> tuple:
        return tuple(self.fusion.nodes[i] for i in self.launch.host_nodes)  # type: ignore[attr-defined]

    @functools.cached_property
    def gathers(self) -> bool:
        """Some kernel reads at data-dependent indices: each run waits to check them."""
        return any(r.launch.index_error is not None and r.launch.numel > 0 for r in self.recipes)

    def check_indices(self, rt: Runtime, stream: object) -> None:
        """Raise IndexOutOfRangeError naming the gather that met an index outside its table
        in this run (its kernels read nothing there)."""
        value = rt.index_error(stream)
        if value is not None:
            node = self.fusion.producer(value)  # type: ignore[attr-defined]
            raise IndexOutOfRangeError(
                f"{index_error_text(self.fusion, node)} (found on the GPU; nothing was "
                "read there, and the outputs of this run are not to be used)"
            )


def load(fusion, lowered: Lowered, rt: Runtime, plan: Plan | None = None) -> ExecutablePlan:  # noqa: ANN001
    """A lowered plan's kernels loaded on `rt`'s GPU: what the launcher runs."""
    recipes = [
        LaunchRecipe(
            k,
            rt.kernel(k.kernel_name, b.cubin, k.shared_bytes) if k.numel > 0 else None,
            b.compile_ms,
            b.compiled,
        )
        for k, b in zip(lowered.launch.kernels, lowered.binaries)
    ]
    return ExecutablePlan(fusion, lowered.launch, recipes, plan)


class Executor:
    """Runs one fusion; keeps its plans by input signature."""

    def __init__(
        self,
        fusion,  # noqa: ANN001
        params_source=None,  # noqa: ANN001
        cache=None,  # noqa: ANN001
        name: str | None = None,
        fetch: Fetcher | None = None,
        device: int | None = None,
    ) -> None:
        """`params_source(segment, device_info)`: params to use where valid (else the
        cache's or the default); `fetch`: binaries to use before the cache's and NVRTC's
        (the tuner's, compiled ahead in a pool). With either, plans are not persisted."""
        self.fusion = fusion
        self.device = device  # the GPU for host (NumPy) inputs; device inputs must be on it
        self.fetch = fetch
        self.cache = cache  # tunefuse.cache.Cache or None
        self.name = name
        self.inputs = FusionInputs(fusion)
        self.plans: dict[tuple, ExecutablePlan] = {}
        self.launchers: dict[tuple, Launcher] = {}  # (plan key, arrays kind) -> launcher
        self.params_source = params_source
        self.lock = threading.Lock()
        self.compiles = 0
        self.restored = 0  # plans read back from the persistent cache
        # The hot path: a key read straight off torch tensors -> the launcher of exactly
        # that key, every check already passed.
        self.fast: dict[tuple, Launcher] = {}
        # Hotter still: the last fast key's call as generated straight-line code
        # (runtime.specialized), tried first; None where that call is not specialized.
        self.hot = None
        self.hot_by_key: dict[tuple, object] = {}
        self._last_key: tuple | None = None

    # -- planning ----------------------------------------------------------------------
    def _persists(self) -> bool:
        """Plans go to (and come from) the cache only when nothing outside it chose params."""
        return self.cache is not None and self.params_source is None and self.fetch is None

    def restore(self, bound, out_sig: tuple, rt: Runtime) -> ExecutablePlan | None:  # noqa: ANN001
        """The launch plan the cache keeps for this signature, if it still holds: every tuned
        record it used is still the cache's, no kernel it chose by default or by a nearby
        shape has a tuned record of its own now, and every binary is there and verified.
        Else None (the caller plans afresh and stores the new plan). Reads only; hits and
        repeats of queued jobs are counted for later."""
        store = self.cache.store if self.cache is not None else None
        if store is None:
            return None
        env = rt.env
        key = launch_plan_key(self.fusion.fusion_id, bound.signature, out_sig, env.key)
        parsed: list[LaunchPlan] = []

        def keys_of(text: str) -> tuple[list[str], list[str]] | None:
            try:
                parsed.append(LaunchPlan.from_json(text, len(self.fusion.nodes)))
            except LaunchPlanError:
                return None  # planned afresh; the new plan replaces it
            return [k.kernel_key for k in parsed[0].kernels], [
                k.code_key for k in parsed[0].kernels if k.numel > 0
            ]

        found = self.cache.guard(lambda: store.launch_plan_reads(key, env, keys_of), None)
        if found is None:
            return None
        _, records, queued, binaries = found
        launch = parsed[0]
        for k in launch.kernels:
            params = records.get((k.kernel_key, k.shape_key))
            if (k.chosen == "record") != (params is not None):
                return None  # tuned since, or its record is gone
            if params is not None and params != k.params:
                kind = SchedulerKind(k.scheduler)
                if params_from_dict(kind, params) != params_from_dict(kind, k.params):
                    return None  # tuned again
        if any(
            binaries.get(k.code_key, (b"", ""))[1] != k.kernel_name
            for k in launch.kernels
            if k.numel > 0
        ):
            return None
        hits, repeats, jobs = self._tuning_bookkeeping(
            [(k.kernel_key, k.shape_key, k.chosen) for k in launch.kernels], queued, bound
        )
        if hits or repeats:
            store.count_later(env, hits=hits, queued=repeats)
        if jobs:
            fusion = (self.fusion.fusion_id, self.fusion.to_json(), self.name)
            self.cache.guard(lambda: store.note_plan(env, fusion=fusion, jobs=jobs), None)
        self.restored += 1
        kept = tuple(
            Binary(
                binaries[k.code_key][0] if k.numel > 0 else b"", k.kernel_name, False, 0.0, "", ""
            )
            for k in launch.kernels
        )
        return load(self.fusion, Lowered(launch, kept), rt)

    def prepare(self, plan: Plan, rt: Runtime, bound=None, out_sig: tuple = ()) -> ExecutablePlan:  # noqa: ANN001
        """Params and a binary for every kernel: tuned ones from the cache, else the nearest
        tuned shape's, else the default heuristic; binaries from the cache, else NVRTC.
        The cache is read twice (records and queued jobs, binaries) and written at most once
        per plan: new binaries, a tuning job for every kernel without tuned params and
        without a job yet, and the launch plan (for the next process). Hits and repeats of
        queued jobs are counted in memory and written with the next write or at exit."""
        store = self.cache.store if self.cache is not None else None
        env = rt.env if store is not None else None
        records, queued = (
            self.cache.guard(
                lambda: store.plan_lookup((s.kernel_key for s in plan.segments), env), ([], set())
            )
            if store is not None
            else ([], set())
        )

        def choose(segment: Segment) -> tuple[object, str]:
            return self.choose_params(segment, rt, records)

        def fetch(code_keys: Sequence[str], sources: Sequence) -> dict:
            found = (
                dict(self.cache.guard(lambda: store.get_binaries(code_keys, env), {}))
                if store is not None
                else {}
            )
            if self.fetch is not None:
                found.update(self.fetch(code_keys, sources))
            return found

        lowered = lower(plan, rt.info, choose, fetch)
        new_binaries = [
            (key, b.cubin, b.kernel_name, rt.info.arch, b.nvrtc_version, b.source)
            for key, b in lowered.compiled
        ]
        self.compiles += len(new_binaries)
        hits, repeats, jobs = self._tuning_bookkeeping(
            [(k.kernel_key, k.shape_key, k.chosen) for k in lowered.launch.kernels],
            queued,
            bound,
        )
        launch_plan = lowered.launch
        stored = None
        if store is not None and bound is not None and self._persists():
            try:
                stored = (
                    launch_plan_key(self.fusion.fusion_id, bound.signature, out_sig, env.key),
                    self.fusion.fusion_id,
                    launch_plan.to_json(),
                )
            except LaunchPlanError:
                stored = (
                    None  # a host scalar JSON cannot hold: this signature is planned per process
                )
        if store is not None and (hits or repeats):
            store.count_later(
                env, hits=hits, queued=repeats
            )  # in memory: written with the next write
        if store is not None and (new_binaries or jobs or stored):
            fusion = (self.fusion.fusion_id, self.fusion.to_json(), self.name) if jobs else None
            self.cache.guard(
                lambda: store.note_plan(
                    env, fusion=fusion, binaries=new_binaries, jobs=jobs, launch_plan=stored
                ),
                None,
            )
        return load(self.fusion, lowered, rt, plan)

    def _tuning_bookkeeping(
        self, kernels: list[tuple[str, str, str]], queued: set[tuple[str, str]], bound
    ) -> tuple[list, list, list]:  # noqa: ANN001
        """What a plan's kernels (kernel_key, shape_key, how their params were chosen) leave
        for the daemon: hits on the tuned records used, repeats of kernels already queued, and
        a tuning job (fusion, segment index, kernel, shape, signature JSON) for every other
        kernel whose params did not come from a record or the caller."""
        hits, repeats, jobs = [], [], []
        signature = None
        for index, (kernel_key, shape_key, how) in enumerate(kernels):
            if how == "record":
                hits.append((kernel_key, shape_key))
            elif how != "source" and bound is not None:
                if (kernel_key, shape_key) in queued:
                    repeats.append((kernel_key, shape_key))
                else:
                    signature = signature or signature_json(bound.signature)
                    jobs.append((self.fusion.fusion_id, index, kernel_key, shape_key, signature))
        return hits, repeats, jobs

    def choose_params(self, segment: Segment, rt: Runtime, records=()) -> tuple[object, str]:  # noqa: ANN001
        """(params, how): an explicit source ("source"), the cache's exact record
        ("record"), else the nearest tuned shape's ("near") or the default heuristic
        ("default"); the last two are worth a tuning job. Invalid params are never used."""
        from cache_db.store import nearest_record

        scheduler = scheduler_for(segment.scheduler)

        def usable(params: object | None) -> bool:
            if params is None:
                return False
            try:
                return scheduler.is_valid(segment, rt.info, params) is None
            except (TypeError, ValueError, AttributeError):
                return False  # a stored value of the wrong type ("4" for a vector): not usable

        if self.params_source is not None:
            params = self.params_source(segment, rt.info)
            if usable(params):
                return params, "source"
        mine = [r for r in records if r.kernel_key == segment.kernel_key]
        exact = next((r for r in mine if r.shape_key == segment.shape_key), None)
        if exact is not None:
            params = _stored_params(segment, exact.params)
            if usable(params):
                return params, "record"
        near = nearest_record(mine, segment.shape_key)
        if near is not None:
            params = _stored_params(segment, near.params)
            if usable(params):
                return params, "near"
        return scheduler.default_params(segment, rt.info), "default"

    # -- running -----------------------------------------------------------------------
    def run(self, inputs: Sequence[object], out: Sequence[object] | None = None) -> list:
        if out is None:
            hot = self.hot
            if hot is not None:
                result = hot(inputs)
                if result is not None:
                    return result
            read = _torch_key(inputs, self.inputs)
            if read is not None:
                key, pointers = read
                fast = self.fast.get(key)
                if fast is not None:
                    self.hot = self._specialized(key, fast, inputs)
                    return fast.run_device(inputs, pointers)
                result, launcher = self._checked(inputs, out)
                self.fast[key] = launcher
                return result
        return self._checked(inputs, out)[0]

    def _specialized(self, key: tuple, launcher: Launcher, inputs: Sequence[object]):  # noqa: ANN202
        """The generated hot path of `key` (made at its second call, kept per key)."""
        if key not in self.hot_by_key:
            self.hot_by_key[key] = specialize(launcher, key, inputs)
        return self.hot_by_key[key]

    def _checked(
        self, inputs: Sequence[object], out: Sequence[object] | None
    ) -> tuple[list, Launcher]:
        """Bind, find or make the plan, launch; the results and the launcher that ran."""
        bound = bind_inputs(self.fusion, inputs, self.inputs)
        out_sig = out_signature(out)
        device_index = device_for(bound, out, self.device)
        key = (bound.signature, out_sig, device_index)
        rt = runtime(device_index)
        kind = arrays_kind(inputs)
        with rt.active():
            launcher = self.launchers.get((key, kind))
            if launcher is None:
                with self.lock:
                    exe = self.plans.get(key)
                    if exe is None and self._persists():
                        exe = self.restore(bound, out_sig, rt)
                    if exe is None:
                        exe = self.prepare(
                            plan_for(self.fusion, bound, out_sig, rt.info), rt, bound, out_sig
                        )
                    self.plans[key] = exe
                    launcher = self.launchers.setdefault((key, kind), Launcher(exe, kind(rt)))
            self._last_key = key
            return launcher.run(bound, inputs, out), launcher


def _stored_params(segment: Segment, stored: object) -> object | None:
    """A record's params as the scheduler's Params, or None when the stored dict does not
    make one (a malformed row costs its own use, never the call)."""
    try:
        return params_from_dict(segment.scheduler, stored) if isinstance(stored, dict) else None
    except (TypeError, ValueError, KeyError):
        return None


def device_info_for(fd, inputs: Sequence[object], device: int | None = None):  # noqa: ANN001, ANN201
    """The DeviceInfo of the GPU `fd.execute(inputs, device=device)` would run on (the
    plan depends on it), or None where no GPU can be used."""
    try:
        bound = bind_inputs(fd.fusion, fd.flat_inputs(inputs), FusionInputs(fd.fusion))
        return runtime(device_for(bound, None, device)).info
    except ExecutionError:
        return None


def device_for(bound, out: Sequence[object] | None, explicit: int | None) -> int:  # noqa: ANN001
    """The GPU a call runs on: the device of its device inputs (and preallocated outputs),
    all one; for host inputs alone, `explicit` (default 0). Arrays on two devices, or on
    another than an `explicit` device, are refused by name."""
    from tunefuse.arrays import describe_array
    from tunefuse.errors import InputMismatchError

    where = {
        f"input T{v}": a.device_index for v, a in bound.arrays.items() if a.device is Device.CUDA
    }
    for k, target in enumerate(out or ()):
        if not isinstance(target, np.ndarray):
            info = describe_array(target, name=f"out[{k}]")
            if info.device is Device.CUDA:
                where[f"out[{k}]"] = info.device_index
    devices = sorted(set(where.values()))
    if len(devices) > 1:
        listed = ", ".join(f"{name} on cuda:{d}" for name, d in where.items())
        raise InputMismatchError(
            f"arrays on more than one GPU ({listed}): a fusion runs on one device"
        )
    if explicit is not None and devices and devices[0] != explicit:
        raise InputMismatchError(
            f"device={explicit} was asked for, but the arrays are on cuda:{devices[0]}"
        )
    if devices:
        return devices[0]
    return explicit if explicit is not None else 0


def execute(
    fd,
    inputs: Sequence[object],
    out: Sequence[object] | None = None,
    cache: Any = None,
    **options: Any,
) -> list:  # noqa: ANN001
    """`fd.execute(inputs, out=None, cache=<default>)`: run the fusion, return its outputs.
    `cache=None` runs without the persistent cache; a `tunefuse.Cache` or a URL picks one."""
    from tunefuse.cache import resolve

    device = options.pop("device", None)
    profile = _flag(options, "profile")
    print_repro = _flag(options, "print_repro")
    capture_debug_output = _flag(options, "capture_debug_output")
    if options:
        unknown = sorted(options)
        raise ExecutionError(f"execute: unknown options {unknown}")
    if device is not None:
        device = _device_index(device)
    if print_repro:  # before running: a run that fails still leaves its repro
        from tunefuse.runtime.call_options import repro_script

        print(repro_script(fd.fusion, inputs))
    resolved = resolve(cache)
    runners = fd._runners
    executor = runners.get((id(resolved), device))
    if executor is None:
        executor = Executor(fd.fusion, cache=resolved, device=device)
        runners[(id(resolved), device)] = executor
        if resolved is not None:
            runners[("keep", id(resolved))] = resolved  # keep the id stable while the runner lives
    fd._runner = executor
    if not (profile or capture_debug_output):
        return executor.run(inputs, out)
    from tunefuse.runtime import call_options

    bound = bind_inputs(executor.fusion, inputs, executor.inputs)
    device_index = device_for(bound, out, executor.device)
    result, wall_us = call_options.synchronized_wall_us(
        device_index, lambda: executor._checked(inputs, out)[0]
    )
    exe = executor.plans[executor._last_key]  # type: ignore[index]
    if profile:
        fd._profile = call_options.FusionProfile(
            device_index, wall_us, call_options.kernels_of(exe), executor.fusion.number
        )
    if capture_debug_output:
        fd._debug_output = call_options.debug_text(exe)
    return result


def _flag(options: dict, name: str) -> bool:
    value = options.pop(name, False)
    if not isinstance(value, bool):
        raise ExecutionError(f"execute: {name} must be True or False, not {value!r}")
    return value


def _device_index(device: object) -> int:
    """`execute(device=...)`: an index, "cuda:N" or a torch.device; refused by name otherwise."""
    if isinstance(device, int) and not isinstance(device, bool) and device >= 0:
        return device
    text = str(device)
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    if text == "cuda":
        return 0
    raise ExecutionError(
        f"execute: device must be a CUDA device index, 'cuda:N' or a torch.device, not {device!r}"
    )


_TORCH_TENSOR_TYPES: set[type] = set()  # torch.Tensor and its subclasses, as they are met


def _torch_key(
    inputs: Sequence[object], fusion_inputs: FusionInputs
) -> tuple[tuple, list[int | None]] | None:
    """What decides the plan, read cheaply off CUDA torch tensors and Python scalars, and
    each input's data pointer (None for a scalar), read once for the key and the launch;
    None when some input is of another kind (the checked path handles those)."""
    parts: list = []
    pointers: list[int | None] = []
    shape_scalars = fusion_inputs.shape_scalar_positions
    for k, x in enumerate(inputs):
        kind = type(x)
        if kind in _TORCH_TENSOR_TYPES or _is_torch_tensor_type(kind):
            if not x.is_cuda:  # type: ignore[attr-defined]
                return None
            ptr = x.data_ptr()  # type: ignore[attr-defined]
            parts.append((x.dtype, x.shape, x.stride(), ptr & 15, x.get_device()))  # type: ignore[attr-defined]
            pointers.append(ptr)
        elif isinstance(x, (bool, int, float)):
            parts.append((kind, x if k in shape_scalars else None))
            pointers.append(None)
        else:
            return None
    return tuple(parts), pointers


def _is_torch_tensor_type(kind: type) -> bool:
    """`kind` is torch.Tensor or a subclass (Parameter, ...): remembered, so the next call
    costs one set lookup. torch is not imported for it."""
    if not any(c.__module__ == "torch" and c.__name__ == "Tensor" for c in kind.__mro__):
        return False
    _TORCH_TENSOR_TYPES.add(kind)
    return True
