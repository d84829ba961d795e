"""The launcher: one ExecutablePlan on one framework's arrays, every decision the signature
fixes taken once. A call fills pointers (and any run-time scalars) into argument cells packed
when the launcher was made, allocates its outputs and launches each kernel through
`cuLaunchKernel` with those cells: no per-call argument packing.

Two ways in, one launch loop: `run_device` for the repeat call on device arrays whose every
property the executor's fast key already checked, and `run` for any bound call (host inputs
copied in and back, preallocated outputs)."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence

import numpy as np

from tunefuse.arrays import Device
from tunefuse.errors import ExecutionError
from tunefuse.ir.dtypes import DataType
from tunefuse.planning.kernel_ir import BufferKind
from tunefuse.reference import eval_node
from tunefuse.runtime.allocators import Memory, OwnArrays, arrays_for
from tunefuse.runtime.device import Runtime
from tunefuse.runtime.device_array import DeviceArray
from tunefuse.runtime.launch_plan import KernelLaunch
from tunefuse.runtime.transfer import host_to_device

# A kernel scalar's C type and the numpy type its value is converted through first (so a
# value that does not fit is an OverflowError, never a silent wrap).
_SCALAR_CELLS = {
    DataType.Double: (ctypes.c_double, np.float64),
    DataType.Float: (ctypes.c_float, np.float32),
    DataType.Int: (ctypes.c_int64, np.int64),
    DataType.Int32: (ctypes.c_int32, np.int32),
    DataType.Bool: (ctypes.c_bool, np.bool_),
}
_INDEX_CELLS = {"i32": ctypes.c_int32, "i64": ctypes.c_int64}

# The most streams a split kernel keeps a workspace for; past it, the oldest is dropped (its
# memory freed in its own stream's order) so that a caller making a stream per call does not
# grow memory without end.
MAX_WORKSPACE_STREAMS = 8


def scalar_values(fusion, fixed: dict, host_nodes: Sequence, scalars: dict) -> dict:  # noqa: ANN001
    """The scalar values a plan's kernels take: its `fixed` ones, the call's `scalars`
    (fusion value -> number) and those its `host_nodes` compute from them."""
    host = dict(fixed)
    host.update(scalars)
    for node in host_nodes:
        env = {v: np.asarray(host[v]) for v in node.inputs}
        for v, r in zip(node.outputs, eval_node(fusion, node, env)):
            host[v] = r.item()
    return host


class SplitWorkspaces:
    """A split reduction's workspaces, one per stream, each zeroed once when made.

    The kernel leaves its tile counters at zero (the last block of a tile wraps the counter
    back with `atomicInc`), and every partial is written before it is read, so a launch after
    the first needs no memset. Launches on two streams may run at once and so never share a
    workspace; launches on one stream run in order. A stream being captured into a CUDA graph
    gets a fresh workspace each call: the graph may be replayed on any stream, beside eager
    calls."""

    def __init__(self, nbytes: int) -> None:
        from cuda.bindings import driver

        self.nbytes = nbytes
        self.kept: dict = {}  # cuda.core Stream -> Memory
        self.is_capturing = driver.cuStreamIsCapturing
        self.not_capturing = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE

    def pointer(self, arrays: OwnArrays, stream: object, handle: object, keep: list) -> int:
        """The workspace of a launch on `stream` (`handle`: its CUstream), made and zeroed
        there on first use; `keep` holds a one-call workspace until its launch is queued."""
        err, status = self.is_capturing(handle)
        if err or status != self.not_capturing:
            memory = arrays.zeroed(self.nbytes, stream)
            keep.append(memory)
            return memory.ptr
        memory = self.kept.get(stream)
        if memory is None:
            if len(self.kept) >= MAX_WORKSPACE_STREAMS:
                self.kept.pop(next(iter(self.kept)))
            memory = self.kept[stream] = arrays.zeroed(self.nbytes, stream)
        return memory.ptr


class PackedKernel:
    """One kernel's arguments as ctypes cells and the `void*[]` that points at them, made
    once; the driver copies the cells at each launch. `func`: the loaded kernel as the
    driver's CUfunction; `index_error_word`: the device's word, for kernels that gather."""

    def __init__(self, launch: KernelLaunch, func: object, index_error_word: int = 0) -> None:
        cells: list = [None] * len(launch.static_args)
        for pos, arg in enumerate(launch.static_args):
            if arg is not None:
                cells[pos] = _INDEX_CELLS[arg[0]](arg[1])
        self.pointers = []
        for pos, buffer_id in launch.pointer_slots:
            cells[pos] = ctypes.c_uint64(0)
            self.pointers.append((cells[pos], buffer_id))
        self.scalars = []
        for pos, value, dtype in launch.scalar_slots:
            ctype, np_type = _SCALAR_CELLS[dtype]
            cells[pos] = ctype()
            self.scalars.append((cells[pos], value, np_type))
        self.workspace = None
        if launch.workspace is not None:
            pos, nbytes = launch.workspace
            cells[pos] = ctypes.c_uint64(0)
            self.workspace = (cells[pos], SplitWorkspaces(nbytes))
        if launch.index_error is not None:
            cells[launch.index_error] = ctypes.c_uint64(index_error_word)
        missing = [pos for pos, c in enumerate(cells) if c is None]
        if missing:
            raise ExecutionError(f"{launch.kernel_name}: arguments {missing} have no value")
        self.cells = cells  # alive as long as the pointer array that points at them
        self.array = (ctypes.c_void_p * max(len(cells), 1))(*(ctypes.addressof(c) for c in cells))
        self.params = ctypes.addressof(self.array)
        self.func = func
        self.grid, self.block, self.shared = launch.grid, launch.block, launch.shared_bytes
        # cuLaunchKernel's leading arguments: function, grid, block, dynamic shared bytes
        self.geometry = (func, *launch.grid, *launch.block, launch.shared_bytes)
        self.name, self.segment = launch.kernel_name, launch.segment

    def fill(self, pointers: Sequence[int], host: dict | None) -> None:
        """This call's buffer pointers and run-time scalars into the cells."""
        for cell, buffer_id in self.pointers:
            cell.value = pointers[buffer_id]
        for cell, value, np_type in self.scalars:
            cell.value = np_type(host[value])  # type: ignore[index]


def packed_kernel(launch: KernelLaunch, kernel: object, rt: Runtime) -> PackedKernel:
    """A loaded kernel's launch, packed (a CUkernel is launched as a CUfunction: the driver
    takes either there)."""
    from cuda.bindings import driver

    func = driver.CUfunction(int(kernel.handle))  # type: ignore[attr-defined]
    word = rt.index_error_word if launch.index_error is not None else 0
    return PackedKernel(launch, func, word)


class Launcher:
    """An ExecutablePlan bound to the arrays of one framework on one GPU."""

    def __init__(self, exe, arrays: OwnArrays) -> None:  # noqa: ANN001 - an ExecutablePlan
        from cuda.bindings import driver

        self.exe = exe
        self.arrays = arrays
        self.rt = rt = arrays.rt
        self.own = OwnArrays(rt)
        self.cu_launch = driver.cuLaunchKernel
        self.lock = threading.Lock()  # the cells are shared: one call fills and launches at a time
        self.kernels = [
            packed_kernel(r.launch, r.kernel, rt) for r in exe.recipes if r.launch.numel
        ]
        self.n_buffers = len(exe.buffers)
        self.input_slots = [
            (b.id, b.input_index, b.value) for b in exe.buffers if b.kind is BufferKind.INPUT
        ]
        self.fixed = dict(exe.fixed_scalars)
        self.host_nodes = exe.host_scalar_nodes
        self.scalar_inputs = [
            (vid, k) for k, vid in enumerate(exe.fusion.inputs) if not exe.fusion.is_tensor(vid)
        ]
        # Whether a call must work out the kernels' scalars (inputs, constants and extents,
        # host-computed values): only where some kernel takes one.
        self.takes_scalars = any(k.scalars for k in self.kernels)
        self.returned = [o for o in exe.outputs if o.returned]
        self.gathers = exe.gathers
        self._device_plan = None  # run_device's allocation plan, made at its first call
        self.stream_cache: dict = {}  # the framework's raw stream -> (cuda.core Stream, CUstream)

    # -- the launch loop, shared ----------------------------------------------------------
    def streams(self) -> tuple[object, object]:
        """The call's stream (the framework's current one) as a cuda.core Stream and as the
        driver's CUstream (made once per stream: `Stream.handle` builds a new object)."""
        raw = self.arrays.stream_handle()
        found = self.stream_cache.get(raw)
        if found is None:
            stream = self.rt.stream_for(raw)
            found = self.stream_cache[raw] = (stream, stream.handle)  # type: ignore[attr-defined]
        return found

    def enqueue(self, stream: object, handle: object, pointers: list, host: dict | None) -> None:
        """Every kernel, in order, on `stream` (`handle`: its CUstream; this GPU's context
        current)."""
        keep: list = []  # one-call workspaces, alive until their launch is queued
        launch = self.cu_launch
        with self.lock:
            for k in self.kernels:
                k.fill(pointers, host)
                if k.workspace is not None:
                    cell, workspaces = k.workspace
                    cell.value = workspaces.pointer(self.arrays, stream, handle, keep)
                (err,) = launch(*k.geometry, handle, k.params, 0)
                if err:
                    raise ExecutionError(f"launch of {k.name} ({k.segment}) failed: {err!r}")
        if self.gathers:
            self.exe.check_indices(self.rt, stream)

    def host_scalars(self, scalars: dict) -> dict:
        """The scalar values kernels take: fixed ones, the call's, and the host-evaluated."""
        return scalar_values(self.exe.fusion, self.fixed, self.host_nodes, scalars)

    # -- the repeat call on device arrays -------------------------------------------------
    def run_device(self, inputs: Sequence[object], input_pointers: Sequence[int | None]) -> list:
        """A call whose inputs are all device arrays of this launcher's framework, in the
        layout the plan was made for, with no preallocated outputs (the executor's fast key
        checked all of that and read `input_pointers`, each input's data pointer). The hot
        path: one frame, no work the signature already decided."""
        plan = self._device_plan or self.device_plan(inputs)
        rt = self.rt
        token = rt.enter()
        try:
            stream, handle = self.streams()
            pointers = [0] * self.n_buffers
            for bid, pos in plan.input_pointers:
                pointers[bid] = input_pointers[pos]
            made: list = [None] * self.n_buffers
            for bid, make in plan.allocations:
                made[bid], pointers[bid] = make(inputs, stream)
            host = None
            if self.takes_scalars:
                host = self.host_scalars({vid: inputs[pos] for vid, pos in self.scalar_inputs})
            self.enqueue(stream, handle, pointers, host)
        finally:
            if token is not None:
                rt.leave(token)
        if plan.whole_results is not None:  # every result is a buffer returned as made
            return [made[ref] for ref in plan.whole_results]
        arrays = self.arrays
        out = []
        for kind, ref, view, dtype in plan.results:
            if kind == "whole":
                out.append(made[ref])
            elif kind == "input":
                out.append(arrays.alias(inputs[ref], view, dtype))
            else:
                out.append(
                    arrays.view(made[ref], dtype, view.shape, view.strides, view.offset, stream)
                )
        return out

    def device_plan(self, inputs: Sequence[object]) -> _DevicePlan:
        """run_device's allocation plan (made at the first call, from its inputs)."""
        if self._device_plan is None:
            self._device_plan = _DevicePlan(self, inputs)
        return self._device_plan

    # -- any bound call ---------------------------------------------------------------------
    def run(self, bound, inputs: Sequence[object], out: Sequence[object] | None) -> list:  # noqa: ANN001
        """A call as bound (host inputs copied in, and back where written in place;
        preallocated outputs written where they are); the caller made the context current."""
        exe, arrays, own = self.exe, self.arrays, self.own
        stream, handle = self.streams()
        stream_handle = int(handle)
        host_inputs = bool(bound.arrays) and all(
            a.device is Device.CPU for a in bound.arrays.values()
        )
        pointers = [0] * self.n_buffers
        memory: dict[int, Memory] = {}
        copy_back: list[tuple[int, np.ndarray]] = []
        for buf in exe.buffers:
            nbytes = buf.numel * buf.dtype.itemsize
            if buf.kind is BufferKind.INPUT:
                info = bound.arrays[buf.value]
                if info.device is Device.CPU:
                    memory[buf.id] = own.empty(nbytes, buf.dtype, stream)
                    host_to_device(
                        np.asarray(inputs[buf.input_index]), memory[buf.id].ptr, stream_handle
                    )
                    if any(b.buffer == buf.id and not b.returned for b in exe.outputs):
                        copy_back.append((buf.id, inputs[buf.input_index]))  # type: ignore[arg-type]
                    pointers[buf.id] = memory[buf.id].ptr
                else:
                    pointers[buf.id] = info.data_ptr
            elif buf.out_index is not None:
                target = out[buf.out_index]  # type: ignore[index]
                if isinstance(target, np.ndarray):
                    memory[buf.id] = own.empty(nbytes, buf.dtype, stream)
                    copy_back.append((buf.id, target))
                    pointers[buf.id] = memory[buf.id].ptr
                else:
                    from tunefuse.arrays import describe_array

                    pointers[buf.id] = describe_array(target).data_ptr
            else:
                made = (
                    arrays.empty(nbytes, buf.dtype, stream)
                    if buf.kind is BufferKind.OUTPUT
                    else arrays.scratch(nbytes, stream)
                )
                memory[buf.id] = made
                pointers[buf.id] = made.ptr
        host = self.host_scalars(bound.scalars)
        self.enqueue(stream, handle, pointers, host)
        results = []
        for binding in self.returned:
            buf = exe.buffers[binding.buffer]
            view = binding.view
            if buf.out_index is not None:
                results.append(out[buf.out_index])  # type: ignore[index]
            elif buf.kind is BufferKind.INPUT and bound.arrays[buf.value].device is not Device.CPU:
                array = inputs[buf.input_index]
                results.append(arrays_for([array], self.rt).alias(array, view, buf.dtype))
            else:
                maker = own if buf.kind is BufferKind.INPUT else arrays
                results.append(
                    maker.view(
                        memory[buf.id], buf.dtype, view.shape, view.strides, view.offset, stream
                    )
                )
        if copy_back or host_inputs:
            stream.sync()  # type: ignore[attr-defined]
        for buffer_id, target in copy_back:
            buf = exe.buffers[buffer_id]
            owner = memory[buffer_id].owner
            target[...] = DeviceArray(owner, buf.shape, buf.dtype, buf.strides).numpy()
        if host_inputs:
            results = [arrays.to_host(r) for r in results]
        return results


class _DevicePlan:
    """What `run_device` does per buffer, decided at its first call: where each input's
    pointer is, how each new buffer is made (an output that is exactly one returned array is
    made in its own shape, so it is returned as made), and what each result is."""

    def __init__(self, launcher: Launcher, inputs: Sequence[object]) -> None:
        exe, arrays = launcher.exe, launcher.arrays
        self.input_pointers = [(bid, pos) for bid, pos, _ in launcher.input_slots]
        whole = {
            o.buffer: o
            for o in launcher.returned
            if exe.buffers[o.buffer].kind is not BufferKind.INPUT
            and _is_whole(o.view, exe.buffers[o.buffer])
            and sum(1 for p in exe.outputs if p.buffer == o.buffer) == 1
        }
        self.allocations = []
        for b in exe.buffers:
            if b.kind is BufferKind.INPUT:
                continue
            if b.id in whole:
                make = arrays.maker(tuple(whole[b.id].view.shape), b.dtype, inputs)
            elif b.kind is BufferKind.OUTPUT:
                make = _memory_maker(arrays.empty, b.numel * b.dtype.itemsize, b.dtype)
            else:
                make = _memory_maker(
                    lambda n, dt, s: arrays.scratch(n, s), b.numel * b.dtype.itemsize, b.dtype
                )
            self.allocations.append((b.id, make))
        self.results = []
        for o in launcher.returned:
            buf = exe.buffers[o.buffer]
            if buf.kind is BufferKind.INPUT:
                self.results.append(("input", buf.input_index, o.view, buf.dtype))
            elif buf.id in whole:
                self.results.append(("whole", buf.id, o.view, buf.dtype))
            else:
                self.results.append(("buffer", buf.id, o.view, buf.dtype))
        self.whole_results = (
            [ref for _, ref, _, _ in self.results]
            if all(kind == "whole" for kind, _, _, _ in self.results)
            else None
        )


def _memory_maker(allocate, nbytes: int, dtype: DataType):  # noqa: ANN001, ANN202
    def make(inputs: Sequence[object], stream: object) -> tuple[Memory, int]:
        memory = allocate(nbytes, dtype, stream)
        return memory, memory.ptr

    return make


def _is_whole(view, buf) -> bool:  # noqa: ANN001
    """The view is the whole buffer, row-major from its start."""
    from tunefuse.arrays import contiguous_strides

    n = 1
    for e in view.shape:
        n *= e
    return (
        view.offset == 0
        and tuple(view.strides) == contiguous_strides(tuple(view.shape))
        and (n == buf.numel)
    )
