"""The repeat call of one input signature as straight-line Python: the checks that it is that
signature, the allocations and the launches, generated once (as Triton's and
torch.compile's launchers are), so that a cache-hit call does no work the signature already
decided: no key tuple built and hashed, no loop over buffers, no dispatch on kinds.

`specialize(launcher, key, inputs)` returns `hot(inputs) -> outputs | None`; None (a miss)
sends the caller down the general path. Only the common case is specialized: torch tensors
in, every kernel's arguments pointers alone and a split reduction's workspace (no run-time
scalars or gathers), every result a whole new array. Anything else gets None and keeps the general path.
`hot_source` (pure: the source from the signature and the launches) is what the CPU tests
read and run against stand-ins for the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tunefuse.errors import ExecutionError


@dataclass(frozen=True)
class HotKernel:
    """What the source needs of one launch: its pointer arguments' buffers (in argument
    order), its geometry, and whether it takes a workspace (a split reduction)."""

    pointer_buffers: tuple[int, ...]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    workspace: bool = False


def hot_source(
    key: Sequence[tuple],
    input_buffers: Sequence[tuple[int, int]],
    allocations: Sequence[tuple[int, int | None]],
    kernels: Sequence[HotKernel],
    results: Sequence[int],
) -> str:
    """`def hot(inputs)` for torch inputs of fast key `key` (per input: dtype, shape, strides,
    pointer mod 16, device); `input_buffers`: (buffer, input position); `allocations`:
    (buffer, the input whose empty_like it is, or None: `make<j>`); `results`: the buffers
    returned. Names it expects bound: T<k>, D<k>, S<k>, R<k> (each input's type, dtype, shape,
    strides), enter, leave, current_stream, index, stream_cache, streams, lock, launch,
    failed, empty_like, make<j>, c<n>_<c> (kernel n's pointer cells), F<n>, P<n>, k<n>, and
    for a kernel with a workspace arrays, w<n> (its cell) and W<n> (its SplitWorkspaces)."""
    lines = ["def hot(inputs):", f"    if len(inputs) != {len(key)}:", "        return None"]
    names = [f"x{k}" for k in range(len(key))]
    lines.append(f"    {', '.join(names)}{',' if len(names) == 1 else ''} = inputs")
    for k, (_, _, _, residue, device) in enumerate(key):
        lines += [
            f"    if type(x{k}) is not T{k} or not x{k}.is_cuda:",
            "        return None",
            f"    p{k} = x{k}.data_ptr()",
            f"    if (x{k}.dtype is not D{k} or x{k}.shape != S{k} or x{k}.stride() != R{k}"
            f" or p{k} & 15 != {residue} or x{k}.get_device() != {device}):",
            "        return None",
        ]
    lines += [
        "    token = enter()",
        "    try:",
        "        found = stream_cache.get(current_stream(index))",
        "        stream, handle = found if found is not None else streams()",
    ]
    pointer = {bid: f"p{pos}" for bid, pos in input_buffers}
    for j, (bid, like) in enumerate(allocations):
        if like is not None:  # empty_like of an input: called straight
            lines += [f"        o{j} = empty_like(x{like})", f"        q{j} = o{j}.data_ptr()"]
        else:
            lines.append(f"        o{j}, q{j} = make{j}(inputs, stream)")
        pointer[bid] = f"q{j}"
    if any(k.workspace for k in kernels):
        lines.append("        keep = []")
    if kernels:  # (none where every kernel's space is empty)
        lines.append("        with lock:")
    for n, k in enumerate(kernels):
        lines += [
            f"            c{n}_{c}.value = {pointer[b]}" for c, b in enumerate(k.pointer_buffers)
        ]
        if k.workspace:
            lines.append(f"            w{n}.value = W{n}.pointer(arrays, stream, handle, keep)")
        geometry = ", ".join(str(v) for v in (*k.grid, *k.block, k.shared))
        lines += [
            f"            (err,) = launch(F{n}, {geometry}, handle, P{n}, 0)",
            "            if err:",
            f"                failed(k{n}, err)",
        ]
    lines += ["    finally:", "        if token is not None:", "            leave(token)"]
    made = {bid: j for j, (bid, _) in enumerate(allocations)}
    lines.append(f"    return [{', '.join(f'o{made[b]}' for b in results)}]")
    return "\n".join(lines)


def specialize(launcher, key: tuple, inputs: Sequence[object]) -> Callable | None:  # noqa: ANN001
    """`launcher`'s run on inputs of fast key `key` (executor._torch_key's), generated; None
    where the call is not of the kind specialized."""
    if launcher.arrays.name != "torch" or launcher.takes_scalars or launcher.gathers:
        return None
    if len(key) != len(inputs) or any(len(part) != 5 for part in key):  # a scalar input
        return None
    plan = launcher.device_plan(inputs)
    if plan.whole_results is None:
        return None
    env: dict[str, object] = {
        "enter": launcher.rt.enter,
        "leave": launcher.rt.leave,
        "current_stream": launcher.arrays.current_stream,
        "index": launcher.rt.index,
        "stream_cache": launcher.stream_cache,
        "streams": launcher.streams,
        "lock": launcher.lock,
        "launch": launcher.cu_launch,
        "failed": _failed,
        "arrays": launcher.arrays,
    }
    for k, (dtype, shape, strides, _, _) in enumerate(key):
        env.update({f"T{k}": type(inputs[k]), f"D{k}": dtype, f"S{k}": tuple(shape)})
        env[f"R{k}"] = tuple(strides)
    allocations = []
    for j, (bid, make) in enumerate(plan.allocations):
        like = getattr(make, "like", None)
        if like is not None:
            env["empty_like"] = make.empty_like
        env[f"make{j}"] = make
        allocations.append((bid, like))
    kernels = []
    for n, k in enumerate(launcher.kernels):
        env.update({f"k{n}": k, f"F{n}": k.func, f"P{n}": k.params})
        env.update({f"c{n}_{c}": cell for c, (cell, _) in enumerate(k.pointers)})
        if k.workspace is not None:
            env[f"w{n}"], env[f"W{n}"] = k.workspace
        pointers = tuple(b for _, b in k.pointers)
        kernels.append(HotKernel(pointers, k.grid, k.block, k.shared, k.workspace is not None))
    source = hot_source(key, plan.input_pointers, allocations, kernels, plan.whole_results)
    name = f"<tunefuse hot path {launcher.exe.fusion.fusion_id[:8]}>"
    exec(compile(source, name, "exec"), env)  # noqa: S102 - our own generated source
    hot = env["hot"]
    hot.source = source  # type: ignore[attr-defined]
    return hot  # type: ignore[return-value]


def _failed(kernel, err: object) -> None:  # noqa: ANN001
    raise ExecutionError(f"launch of {kernel.name} ({kernel.segment}) failed: {err!r}")
