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

from tunefuse.arrays import Device, framework_of
from tunefuse.cache import signature_json
from tunefuse.codegen import generate
from tunefuse.compiler import compile_kernel
from tunefuse.errors import ExecutionError, IndexOutOfRangeError
from tunefuse.ir.dtypes import DataType, torch_dtype_name
from tunefuse.planning.kernel_ir import BufferKind, SchedulerKind
from tunefuse.planning.plan import Plan, out_signature, plan_for
from tunefuse.planning.segment import Segment
from tunefuse.planning.signature import FusionInputs, bind_inputs
from tunefuse.reference import eval_node, index_error_text
from tunefuse.runtime.device import Runtime, runtime
from tunefuse.runtime.device_array import DeviceArray
from tunefuse.runtime.launch_plan import (
    KernelLaunch,
    LaunchPlan,
    LaunchPlanError,
    kernel_launch,
    launch_plan_key,
)
from tunefuse.runtime.transfer import host_to_device
from tunefuse.schedulers import params_from_dict, scheduler_for

_NP_SCALAR = {
    DataType.Double: np.float64,
    DataType.Float: np.float32,
    DataType.Int: np.int64,
    DataType.Int32: np.int32,
    DataType.Bool: np.bool_,
}


@dataclass
class LaunchRecipe:
    launch: KernelLaunch
    kernel: object
    config: object
    args: list  # static values; None where a pointer or scalar goes
    pointer_slots: list[tuple[int, int]]  # (arg position, buffer id)
    scalar_slots: list[tuple[int, int, Any]]  # (arg position, fusion value id, numpy type)
    compile_ms: float
    compiled: bool  # False when the binary came from a cache


def _recipe(
    launch: KernelLaunch, kernel: object, compile_ms: float = 0.0, compiled: bool = False
) -> LaunchRecipe:
    from cuda.core import LaunchConfig

    config = LaunchConfig(grid=launch.grid, block=launch.block, shmem_size=launch.shared_bytes)
    return LaunchRecipe(
        launch,
        kernel,
        config,
        launch.arg_template(),
        list(launch.pointer_slots),
        [(pos, vid, _NP_SCALAR[dt]) for pos, vid, dt in launch.scalar_slots],
        compile_ms,
        compiled,
    )


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


class Executor:
    """Runs one fusion; keeps its plans by input signature."""

    def __init__(
        self,
        fusion,
        params_source=None,
        cache=None,
        name: str | None = None,  # noqa: ANN001
        precompiled: dict[str, bytes] | None = None,
        device: int | None = None,
    ) -> None:
        self.fusion = fusion
        self.device = device  # the GPU for host (NumPy) inputs; device inputs must be on it
        self.precompiled = precompiled or {}  # kernel name -> cubin compiled elsewhere (tuning)
        self.cache = cache  # tunefuse.cache.Cache or None
        self.name = name
        self.inputs = FusionInputs(fusion)
        self.plans: dict[tuple, ExecutablePlan] = {}
        self.params_source = params_source
        self.lock = threading.Lock()
        self.compiles = 0
        self.restored = 0  # plans read back from the persistent cache
        # The hot path: a key read straight off torch tensors -> a launcher with every
        # check already passed for exactly that key.
        self.fast: dict[tuple, TorchLauncher] = {}
        self._last_key: tuple | None = None

    # -- planning ----------------------------------------------------------------------
    def _persists(self) -> bool:
        """Plans go to (and come from) the cache only when nothing outside it chose params."""
        return self.cache is not None and self.params_source is None and not self.precompiled

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
        recipes = [
            _recipe(
                k,
                rt.kernel(k.kernel_name, binaries[k.code_key][0], k.shared_bytes)
                if k.numel > 0
                else None,
            )
            for k in launch.kernels
        ]
        self.restored += 1
        return ExecutablePlan(self.fusion, launch, recipes)

    def prepare(self, plan: Plan, rt: Runtime, bound=None, out_sig: tuple = ()) -> ExecutablePlan:  # noqa: ANN001
        """Params and a binary for every kernel: tuned ones from the cache, else the nearest
        tuned shape's, else the default heuristic; binaries from the cache, else NVRTC.
        The cache is read twice (records and queued jobs, binaries) and written at most once
        per plan: new binaries, a tuning job for every kernel without tuned params and
        without a job yet, and the launch plan (for the next process). Hits and repeats of
        queued jobs are counted in memory and written with the next write or at exit."""
        from tunefuse.compiler import COMPILE_OPTIONS, CompiledKernel, source_key

        dtypes = {b.id: b.dtype for b in plan.buffers}
        store = self.cache.store if self.cache is not None else None
        env = rt.env if store is not None else None
        records, queued = (
            self.cache.guard(
                lambda: store.plan_lookup((s.kernel_key for s in plan.segments), env), ([], set())
            )
            if store is not None
            else ([], set())
        )
        chosen = [self.choose_params(seg, rt, records) for seg in plan.segments]
        sources = [
            generate(seg, params, rt.info, dtypes)
            for seg, (params, _) in zip(plan.segments, chosen)
        ]
        code_keys = [source_key(src.source, rt.info.arch, COMPILE_OPTIONS) for src in sources]
        binaries = (
            self.cache.guard(lambda: store.get_binaries(code_keys, env), {})
            if store is not None
            else {}
        )
        new_binaries = []
        recipes = []
        for seg, (params, how), source, code_key in zip(plan.segments, chosen, sources, code_keys):
            cached = binaries.get(code_key)
            if source.name in self.precompiled:
                cached = (self.precompiled[source.name], source.name)
            if cached is not None and cached[1] == source.name:
                compiled = CompiledKernel(
                    source.name, rt.info.arch, cached[0], "", COMPILE_OPTIONS, 0.0, ""
                )
                from_cache = True
            else:
                compiled = compile_kernel(source.source, source.name, rt.info.arch)
                self.compiles += 1
                from_cache = False
                new_binaries.append(
                    (
                        code_key,
                        compiled.cubin,
                        source.name,
                        rt.info.arch,
                        compiled.nvrtc_version,
                        source.source,
                    )
                )
            launch = kernel_launch(seg, source, params, how, code_key)
            recipes.append(
                _recipe(
                    launch,
                    rt.kernel(source.name, compiled.cubin, source.shared_bytes),
                    compiled.compile_ms,
                    not from_cache,
                )
            )
        hits, repeats, jobs = self._tuning_bookkeeping(
            [(seg.kernel_key, seg.shape_key, how) for seg, (_, how) in zip(plan.segments, chosen)],
            queued,
            bound,
        )
        launch_plan = LaunchPlan.of(plan, [r.launch for r in recipes])
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
        return ExecutablePlan(self.fusion, launch_plan, recipes, plan)

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
            key = _torch_key(inputs, self.inputs)
            if key is not None:
                fast = self.fast.get(key)
                if fast is not None:
                    return fast(inputs)
                result = self._run_checked(inputs, out)
                exe = self.plans.get(self._last_key)  # type: ignore[arg-type]
                if exe is not None:
                    self.fast[key] = TorchLauncher(exe, inputs, self.inputs)
                return result
        return self._run_checked(inputs, out)

    def _run_checked(self, inputs: Sequence[object], out: Sequence[object] | None) -> list:
        bound = bind_inputs(self.fusion, inputs, self.inputs)
        out_sig = out_signature(out)
        device_index = device_for(bound, out, self.device)
        key = (bound.signature, out_sig, device_index)
        rt = runtime(device_index)
        with rt.active():
            exe = self.plans.get(key)
            if exe is None:
                with self.lock:
                    exe = self.plans.get(key)
                    if exe is None and self._persists():
                        exe = self.restore(bound, out_sig, rt)
                    if exe is None:
                        exe = self.prepare(
                            plan_for(self.fusion, bound, out_sig, rt.info), rt, bound, out_sig
                        )
                    self.plans[key] = exe
            self._last_key = key
            return _launch(exe, bound, inputs, out, rt, device_index)


def _stored_params(segment: Segment, stored: object) -> object | None:
    """A record's params as the scheduler's Params, or None when the stored dict does not
    make one (a malformed row costs its own use, never the call)."""
    try:
        return params_from_dict(segment.scheduler, stored) if isinstance(stored, dict) else None
    except (TypeError, ValueError, KeyError):
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


def torch_dtype(dtype: DataType):  # noqa: ANN201 - a torch.dtype
    """The torch dtype of a tunefuse DataType (torch imported by the caller already)."""
    import torch

    return getattr(torch, torch_dtype_name(dtype))


def _framework(inputs: Sequence[object]) -> str:
    kinds = {framework_of(x) for x in inputs}
    if "torch" in kinds:
        return "torch"
    if "cupy" in kinds:
        return "cupy"
    return "tunefuse"


def _stream_handle(framework: str, device_index: int) -> int | None:
    """The caller's current stream on the device the call runs on."""
    if framework == "torch":
        import torch

        return int(torch.cuda.current_stream(device_index).cuda_stream)
    if framework == "cupy":
        import cupy

        with cupy.cuda.Device(device_index):
            return int(cupy.cuda.get_current_stream().ptr)
    return None


class _Allocation:
    """A buffer's device memory and how to hand it back as an array."""

    def __init__(self, ptr: int, owner: object) -> None:
        self.ptr = ptr
        self.owner = owner


def _allocate(
    framework: str, nbytes: int, dtype: DataType, rt: Runtime, stream: object, device_index: int
) -> _Allocation:
    nbytes = max(nbytes, dtype.itemsize)  # empty tensors still get a valid (typed) pointer
    if framework == "torch":
        import torch

        t = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=f"cuda:{device_index}")
        return _Allocation(int(t.data_ptr()), t)
    if framework == "cupy":
        import cupy

        with cupy.cuda.Device(device_index):
            a = cupy.empty(max(nbytes, 1), dtype=cupy.uint8)
        return _Allocation(int(a.data.ptr), a)
    buf = rt.allocate(nbytes, stream)
    return _Allocation(int(buf.handle), buf)  # type: ignore[attr-defined]


def _as_array(
    framework: str, alloc: _Allocation, dtype: DataType, shape, strides, offset: int, stream
) -> object:  # noqa: ANN001
    if framework == "torch":
        import torch

        tdtype = torch_dtype(dtype)
        base = (
            alloc.owner.view(tdtype)
            if isinstance(alloc.owner, torch.Tensor) and alloc.owner.dtype == torch.uint8
            else alloc.owner
        )
        return torch.as_strided(base, tuple(shape), tuple(strides), offset)
    if framework == "cupy" and dtype is not DataType.BFloat16:
        import cupy

        mem = alloc.owner.data if isinstance(alloc.owner, cupy.ndarray) else alloc.owner
        return cupy.ndarray(
            tuple(shape),
            dtype=dtype.numpy,
            memptr=mem + offset * dtype.itemsize,
            strides=tuple(s * dtype.itemsize for s in strides),
        )
    return DeviceArray(alloc.owner, tuple(shape), dtype, tuple(strides), offset, stream)


def _launch(
    exe: ExecutablePlan,
    bound,
    inputs: Sequence[object],
    out,
    rt: Runtime,  # noqa: ANN001
    device_index: int,
) -> list:
    from cuda.core import launch

    plan = exe
    framework = _framework(inputs)
    stream = rt.stream_for(_stream_handle(framework, device_index))
    stream_handle = int(stream.handle)  # type: ignore[attr-defined]
    host_inputs = all(a.device is Device.CPU for a in bound.arrays.values()) and bool(bound.arrays)
    pointers: dict[int, int] = {}
    allocations: dict[int, _Allocation] = {}
    copy_back: list[tuple[int, np.ndarray]] = []
    for buf in plan.buffers:
        nbytes = buf.numel * buf.dtype.itemsize
        if buf.kind is BufferKind.INPUT:
            info = bound.arrays[buf.value]
            if info.device is Device.CPU:
                alloc = _allocate("tunefuse", nbytes, buf.dtype, rt, stream, device_index)
                host_to_device(np.asarray(inputs[buf.input_index]), alloc.ptr, stream_handle)
                allocations[buf.id] = alloc
                pointers[buf.id] = alloc.ptr
                if any(b.buffer == buf.id and not b.returned for b in plan.outputs):
                    copy_back.append((buf.id, inputs[buf.input_index]))  # type: ignore[arg-type]
            else:
                pointers[buf.id] = info.data_ptr
        elif buf.out_index is not None:
            target = out[buf.out_index]  # type: ignore[index]
            if isinstance(target, np.ndarray):
                alloc = _allocate("tunefuse", nbytes, buf.dtype, rt, stream, device_index)
                allocations[buf.id] = alloc
                pointers[buf.id] = alloc.ptr
                copy_back.append((buf.id, target))
            else:
                from tunefuse.arrays import describe_array

                pointers[buf.id] = describe_array(target).data_ptr
        else:
            kind = framework if buf.kind is BufferKind.OUTPUT else "tunefuse"
            alloc = _allocate(kind, nbytes, buf.dtype, rt, stream, device_index)
            allocations[buf.id] = alloc
            pointers[buf.id] = alloc.ptr
    host = dict(plan.fixed_scalars)
    host.update(bound.scalars)
    for node in plan.host_scalar_nodes:
        env = {v: np.asarray(host[v]) for v in node.inputs}
        for v, r in zip(node.outputs, eval_node(plan.fusion, node, env)):
            host[v] = r.item()
    workspaces: list[_Allocation] = []
    for recipe in exe.recipes:
        if recipe.launch.numel == 0:
            continue
        args = list(recipe.args)
        for pos, buffer_id in recipe.pointer_slots:
            args[pos] = int(pointers[buffer_id])  # a Python int is cuda.core's pointer fast path
        for pos, value, np_type in recipe.scalar_slots:
            args[pos] = np_type(host[value])
        if recipe.launch.workspace is not None:
            pos, nbytes = recipe.launch.workspace
            workspace = _allocate(framework, nbytes, DataType.Int32, rt, stream, device_index)
            rt.zero(workspace.ptr, nbytes, stream)
            workspaces.append(
                workspace
            )  # alive until the launch is queued (frees are stream-ordered)
            args[pos] = workspace.ptr
        if recipe.launch.index_error is not None:
            args[recipe.launch.index_error] = rt.index_error_word
        try:
            launch(stream, recipe.config, recipe.kernel, *args)
        except Exception as e:  # noqa: BLE001
            raise ExecutionError(
                f"launch of {recipe.launch.kernel_name} ({recipe.launch.segment}) failed: {e}"
            ) from e
    if exe.gathers:
        exe.check_indices(rt, stream)
    results = []
    for binding in plan.outputs:
        if not binding.returned:
            continue
        buf = plan.buffers[binding.buffer]
        if buf.out_index is not None:
            results.append(out[buf.out_index])  # type: ignore[index]
            continue
        if buf.kind is BufferKind.INPUT and bound.arrays[buf.value].device is not Device.CPU:
            alloc = _Allocation(pointers[buf.id], inputs[buf.input_index])
            results.append(_alias_of_input(inputs[buf.input_index], binding.view, buf.dtype))
            continue
        alloc = allocations[buf.id]
        fw = framework if buf.kind is BufferKind.OUTPUT else "tunefuse"
        results.append(
            _as_array(
                fw,
                alloc,
                buf.dtype,
                binding.view.shape,
                binding.view.strides,
                binding.view.offset,
                stream,
            )
        )
    if copy_back or host_inputs:
        stream.sync()  # type: ignore[attr-defined]
    for buffer_id, target in copy_back:
        buf = plan.buffers[buffer_id]
        data = DeviceArray(allocations[buffer_id].owner, buf.shape, buf.dtype, buf.strides).numpy()
        target[...] = data
    if host_inputs:
        results = [
            r if isinstance(r, np.ndarray) else r.numpy() if hasattr(r, "numpy") else r
            for r in results
        ]
    return results


def _alias_of_input(array: object, view, dtype: DataType) -> object:  # noqa: ANN001
    """An output that is a view of a device input: a view of the caller's own array."""
    fw = framework_of(array)
    if fw == "torch":
        import torch

        return torch.as_strided(
            array, tuple(view.shape), tuple(view.strides), array.storage_offset() + view.offset
        )  # type: ignore[attr-defined]
    if fw == "cupy" and dtype is not DataType.BFloat16:
        import cupy

        return cupy.ndarray(
            tuple(view.shape),
            dtype=dtype.numpy,
            memptr=array.data + view.offset * dtype.itemsize,  # type: ignore[attr-defined]
            strides=tuple(s * dtype.itemsize for s in view.strides),
        )
    info_ptr = array.__cuda_array_interface__["data"][0]  # type: ignore[attr-defined]
    return DeviceArray(
        _RawOwner(info_ptr, array), tuple(view.shape), dtype, tuple(view.strides), view.offset
    )


class _RawOwner:
    """A raw pointer that keeps its owner alive (for DeviceArray views of foreign memory)."""

    def __init__(self, ptr: int, owner: object) -> None:
        self.handle = ptr
        self.owner = owner


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
        device_index, lambda: executor._run_checked(inputs, out)
    )
    exe = executor.plans[executor._last_key]  # type: ignore[index]
    if profile:
        fd._profile = call_options.FusionProfile(
            device_index, wall_us, call_options.kernels_of(exe)
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


def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    from tunefuse.arrays import contiguous_strides

    return contiguous_strides(tuple(shape))


def _prod(shape: tuple[int, ...]) -> int:
    n = 1
    for e in shape:
        n *= e
    return n


def _torch_key(inputs: Sequence[object], fusion_inputs: FusionInputs) -> tuple | None:
    """What decides the plan, read cheaply off CUDA torch tensors and Python scalars; None
    when some input is of another kind (the checked path handles those)."""
    parts: list = []
    shape_scalars = fusion_inputs.shape_scalar_positions
    for k, x in enumerate(inputs):
        if type(x).__module__ == "torch" or type(x).__name__ in ("Tensor", "Parameter"):
            if not getattr(x, "is_cuda", False):
                return None
            parts.append((x.dtype, x.shape, x.stride(), x.data_ptr() & 15, x.get_device()))
        elif isinstance(x, (bool, int, float)):
            parts.append((type(x), x if k in shape_scalars else None))
        else:
            return None
    return tuple(parts)


class TorchLauncher:
    """The cache-hit path for torch inputs: pointers in, kernels launched, views out."""

    def __init__(
        self, exe: ExecutablePlan, inputs: Sequence[object], fusion_inputs: FusionInputs
    ) -> None:
        import torch

        plan = exe
        self.exe = exe
        self.device_index = (
            inputs[next(i for i, x in enumerate(inputs) if hasattr(x, "is_cuda"))].device.index or 0
        )
        self.rt = runtime(self.device_index)
        self.device = torch.device("cuda", self.device_index)
        from cuda.core import launch

        self.torch, self.launch = torch, launch  # bound once: no import statement per call
        raw = getattr(
            torch._C, "_cuda_getCurrentRawStream", None
        )  # the handle without a Stream object
        self.current_stream = (
            raw if raw is not None else (lambda index: torch.cuda.current_stream(index).cuda_stream)
        )
        position = {vid: k for k, vid in enumerate(plan.fusion.inputs)}
        self.n_buffers = len(plan.buffers)
        self.input_slots = [
            (b.id, b.input_index) for b in plan.buffers if b.kind is BufferKind.INPUT
        ]
        contiguous_outputs = {
            o.buffer: o
            for o in plan.outputs
            if o.returned
            and o.view.offset == 0
            and plan.buffers[o.buffer].kind is not BufferKind.INPUT
            and o.view.strides == _row_major(o.view.shape)
            and _prod(o.view.shape) == plan.buffers[o.buffer].numel
            and sum(1 for p in plan.outputs if p.buffer == o.buffer) == 1
        }
        # A buffer that is exactly one returned output is allocated in that output's shape:
        # as `empty_like` of a contiguous input of that shape and dtype, else `new_empty` of
        # a template of its dtype (each ~1 µs cheaper than torch.empty's keyword parsing).
        self.alloc_slots = []
        for b in plan.buffers:
            if b.kind is BufferKind.INPUT:
                continue
            shape = (
                tuple(contiguous_outputs[b.id].view.shape)
                if b.id in contiguous_outputs
                else (max(b.numel, 1),)
            )
            dtype = torch_dtype(b.dtype)
            like = next(
                (
                    k
                    for k, x in enumerate(inputs)
                    if isinstance(x, torch.Tensor)
                    and x.dtype == dtype
                    and tuple(x.shape) == shape
                    and x.is_contiguous()
                ),
                None,
            )
            if like is not None:
                self.alloc_slots.append((b.id, True, like))
            else:
                self.alloc_slots.append(
                    (b.id, False, (torch.empty(0, dtype=dtype, device=self.device), shape))
                )
        self.scalar_slots = [
            (vid, position[vid]) for vid in plan.fusion.inputs if not plan.fusion.is_tensor(vid)
        ]
        self.fixed = dict(plan.fixed_scalars)
        self.host_nodes = plan.host_scalar_nodes
        self.recipes = [r for r in exe.recipes if r.launch.numel > 0]
        self.results = []
        for binding in plan.outputs:
            if not binding.returned:
                continue
            buf = plan.buffers[binding.buffer]
            if buf.kind is BufferKind.INPUT:
                source = ("input", buf.input_index)
            elif buf.id in contiguous_outputs:
                source = ("whole", buf.id)
            else:
                source = ("buffer", buf.id)
            self.results.append(
                (
                    source,
                    tuple(binding.view.shape),
                    tuple(binding.view.strides),
                    binding.view.offset,
                )
            )

    def __call__(self, inputs: Sequence[object]) -> list:
        token = self.rt.enter()  # this GPU's context current while we launch (no-op when it is)
        try:
            return self._call(inputs)
        finally:
            self.rt.leave(token)

    def _call(self, inputs: Sequence[object]) -> list:
        torch, launch = self.torch, self.launch
        stream = self.rt.stream_for(self.current_stream(self.device_index))
        pointers = [0] * self.n_buffers
        tensors: list = [None] * self.n_buffers
        for bid, pos in self.input_slots:
            pointers[bid] = inputs[pos].data_ptr()  # type: ignore[attr-defined]
        for bid, like, how in self.alloc_slots:
            t = torch.empty_like(inputs[how]) if like else how[0].new_empty(how[1])
            tensors[bid] = t
            pointers[bid] = t.data_ptr()
        host = None
        if self.scalar_slots or self.host_nodes:
            host = dict(self.fixed)
            for vid, pos in self.scalar_slots:
                host[vid] = inputs[pos]
            for node in self.host_nodes:
                env = {v: np.asarray(host[v]) for v in node.inputs}
                for v, r in zip(node.outputs, eval_node(self.exe.fusion, node, env)):
                    host[v] = r.item()
        for recipe in self.recipes:
            args = list(recipe.args)
            for pos, bid in recipe.pointer_slots:
                args[pos] = pointers[
                    bid
                ]  # a Python int: cuda.core passes it as a pointer, unconverted
            for pos, value, np_type in recipe.scalar_slots:
                args[pos] = np_type(host[value])  # type: ignore[index]
            if recipe.launch.workspace is not None:  # a split reduction's counters and partials
                pos, nbytes = recipe.launch.workspace
                workspace = torch.zeros(
                    nbytes, dtype=torch.uint8, device=self.device
                )  # on this stream
                args[pos] = workspace.data_ptr()
            if recipe.launch.index_error is not None:
                args[recipe.launch.index_error] = self.rt.index_error_word
            launch(stream, recipe.config, recipe.kernel, *args)
        if self.exe.gathers:
            self.exe.check_indices(self.rt, stream)
        out = []
        for (kind, ref), shape, strides, offset in self.results:
            if kind == "whole":
                out.append(tensors[ref])
            elif kind == "input":
                base = inputs[ref]
                out.append(torch.as_strided(base, shape, strides, base.storage_offset() + offset))  # type: ignore[attr-defined]
            else:
                out.append(torch.as_strided(tensors[ref], shape, strides, offset))
        return out
