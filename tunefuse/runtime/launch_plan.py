"""What launching one plan takes, as plain data: the buffers, the outputs, the host's scalars
and, per kernel, its launch geometry, static arguments, the params it was generated from and
the code key of its binary.

The executor builds a LaunchPlan from a Plan and the params it chose; the persistent cache
keeps it as JSON under `launch_plan_key` (fusion, input signature, preallocated outputs,
env), so that a new process runs a signature seen before without planning or generating
code: one read, a check that the tuned records it relied on are still the cache's, and the
binaries. JSON, never pickle: a cache may be a database that many machines share.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tunefuse import keys
from tunefuse.errors import TunefuseError
from tunefuse.ir.dtypes import DataType
from tunefuse.planning.alias import StridedView
from tunefuse.planning.kernel_ir import Buffer, BufferKind

if TYPE_CHECKING:
    from tunefuse.codegen import KernelSource
    from tunefuse.planning.plan import Plan
    from tunefuse.planning.segment import Segment

LAUNCH_PLAN_FORMAT = 3  # bump when the JSON below changes: older plans are then never read

# How a kernel's params were chosen: the cache's tuned record for this exact shape, the
# nearest tuned shape's, the default heuristic, or a caller's params source (never persisted).
CHOSEN = ("record", "near", "default", "source")

_INDEX_TYPES = {"i32": np.int32, "i64": np.int64}
_INDEX_NAMES = {np.int32: "i32", np.int64: "i64"}


class LaunchPlanError(TunefuseError):
    """A stored launch plan that is not one this tunefuse can read (it is then re-planned)."""


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel of a launch plan."""

    segment: str  # the segment's name, for messages
    kernel_key: str
    shape_key: str
    scheduler: str
    params: dict  # params_to_dict of what the kernel was generated from
    chosen: str  # one of CHOSEN
    numel: int  # elements of the segment's space (0: nothing to launch)
    kernel_name: str
    code_key: str  # the binary's key in the cache
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    static_args: tuple[tuple[str, int] | None, ...]  # (index type, value); None: filled per call
    pointer_slots: tuple[tuple[int, int], ...]  # (arg position, buffer id)
    scalar_slots: tuple[
        tuple[int, int, DataType], ...
    ]  # (arg position, fusion value, compute type)
    workspace: tuple[int, int] | None = (
        None  # (arg position, bytes): zeroed memory a split reduction takes
    )
    index_error: int | None = (
        None  # arg position of the device's index-error word (kernels that gather)
    )

    def arg_template(self) -> list:
        """The argument list with every static value typed (numpy ints: exact widths)."""
        return [None if a is None else _INDEX_TYPES[a[0]](a[1]) for a in self.static_args]


@dataclass(frozen=True)
class LaunchPlan:
    buffers: tuple[Buffer, ...]
    outputs: tuple  # tuple[OutputBinding, ...]
    host_nodes: tuple[
        int, ...
    ]  # indices into fusion.nodes: scalar nodes the host evaluates per call
    fixed_scalars: tuple[tuple[int, bool | int | float], ...]
    kernels: tuple[KernelLaunch, ...]

    @staticmethod
    def of(plan: Plan, kernels: Sequence[KernelLaunch]) -> LaunchPlan:
        """The launch plan of `plan` with its segments' kernels (in segment order)."""
        if len(kernels) != len(plan.segments):
            raise LaunchPlanError(f"{len(kernels)} kernels for {len(plan.segments)} segments")
        host_nodes = tuple(plan.fusion.nodes.index(n) for n in plan.host_scalar_nodes)
        return LaunchPlan(
            plan.buffers, plan.outputs, host_nodes, plan.fixed_scalars, tuple(kernels)
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": LAUNCH_PLAN_FORMAT,
                "buffers": [
                    [
                        b.id,
                        b.kind.value,
                        b.dtype.value,
                        list(b.shape),
                        list(b.strides),
                        b.value,
                        b.input_index,
                        b.out_index,
                        b.alignment,
                    ]
                    for b in self.buffers
                ],
                "outputs": [
                    [
                        o.position,
                        o.value,
                        o.buffer,
                        list(o.view.shape),
                        list(o.view.strides),
                        o.view.offset,
                        o.returned,
                    ]
                    for o in self.outputs
                ],
                "host_nodes": list(self.host_nodes),
                "fixed_scalars": [[vid, _scalar_to_json(v)] for vid, v in self.fixed_scalars],
                "kernels": [
                    {
                        "segment": k.segment,
                        "kernel_key": k.kernel_key,
                        "shape_key": k.shape_key,
                        "scheduler": k.scheduler,
                        "params": k.params,
                        "chosen": k.chosen,
                        "numel": k.numel,
                        "kernel_name": k.kernel_name,
                        "code_key": k.code_key,
                        "grid": list(k.grid),
                        "block": list(k.block),
                        "shared_bytes": k.shared_bytes,
                        "static_args": [None if a is None else list(a) for a in k.static_args],
                        "pointer_slots": [list(p) for p in k.pointer_slots],
                        "scalar_slots": [[pos, vid, dt.value] for pos, vid, dt in k.scalar_slots],
                        "workspace": None if k.workspace is None else list(k.workspace),
                        "index_error": k.index_error,
                    }
                    for k in self.kernels
                ],
            },
            sort_keys=True,
            allow_nan=False,
        )

    @staticmethod
    def from_json(text: str, num_nodes: int) -> LaunchPlan:
        """Parse and check a stored plan (`num_nodes`: the fusion's node count, for host
        node indices); anything unexpected raises LaunchPlanError, never a wrong plan."""
        from tunefuse.planning.alias import OutputBinding

        try:
            doc = json.loads(text)
            if not isinstance(doc, dict) or doc.get("format") != LAUNCH_PLAN_FORMAT:
                raise LaunchPlanError(
                    f"launch plan format {doc.get('format') if isinstance(doc, dict) else '?'}"
                    f" is not {LAUNCH_PLAN_FORMAT}"
                )
            buffers = tuple(
                Buffer(
                    _int(i),
                    BufferKind(kind),
                    DataType(dt),
                    _ints(shape),
                    _ints(strides),
                    _int(value),
                    _opt_int(inp),
                    _opt_int(out),
                    _int(align),
                )
                for i, kind, dt, shape, strides, value, inp, out, align in doc["buffers"]
            )
            if any(b.id != k for k, b in enumerate(buffers)):
                raise LaunchPlanError("buffer ids are not 0..n-1")
            outputs = tuple(
                OutputBinding(
                    _int(pos),
                    _int(value),
                    _buffer_id(buf, buffers),
                    StridedView(_ints(shape), _ints(strides), _int(offset)),
                    _bool(ret),
                )
                for pos, value, buf, shape, strides, offset, ret in doc["outputs"]
            )
            host_nodes = _ints(doc["host_nodes"])
            if any(not 0 <= n < num_nodes for n in host_nodes):
                raise LaunchPlanError("a host node index is out of range")
            fixed = tuple((_int(vid), _scalar_from_json(v)) for vid, v in doc["fixed_scalars"])
            kernels = tuple(_kernel_from_json(k, buffers) for k in doc["kernels"])
        except LaunchPlanError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise LaunchPlanError(f"not a launch plan: {type(e).__name__}: {e}") from None
        return LaunchPlan(buffers, outputs, host_nodes, fixed, kernels)


def kernel_launch(
    segment: Segment, source: KernelSource, params: object, chosen: str, code_key: str
) -> KernelLaunch:
    """A segment's kernel as launch data: its static arguments typed, the rest as slots
    filled per call (pointers by buffer, scalars by fusion value)."""
    from tunefuse.codegen.expr import index_value
    from tunefuse.schedulers import params_to_dict

    itype = np.int32 if segment.index_type == "int32" else np.int64
    static: list = []
    pointers: list[tuple[int, int]] = []
    scalars: list[tuple[int, int, DataType]] = []
    workspace = None
    index_error = None
    for pos, arg in enumerate(source.args):
        if arg.kind == "ptr":
            static.append(None)
            pointers.append((pos, arg.ref[0]))
        elif arg.kind == "workspace":
            static.append(None)
            workspace = (pos, source.workspace_bytes)
        elif arg.kind == "index_error":
            static.append(None)
            index_error = pos
        elif arg.kind in ("gather", "divisor"):
            static.append(index_arg(np.int64(index_value(segment, arg.kind, arg.ref))))
        elif arg.kind in ("extent", "offset", "coeff"):
            static.append(index_arg(itype(index_value(segment, arg.kind, arg.ref))))
        else:
            sc = segment.scalars[arg.ref[0]]
            static.append(None)
            scalars.append((pos, sc.value, sc.dtype.compute))
    return KernelLaunch(
        segment.name,
        segment.kernel_key,
        segment.shape_key,
        segment.scheduler.value,
        params_to_dict(params),
        chosen,
        segment.numel,
        source.name,
        code_key,
        tuple(source.grid),
        tuple(source.block),
        source.shared_bytes,  # type: ignore[arg-type]
        tuple(static),
        tuple(pointers),
        tuple(scalars),
        workspace,
        index_error,
    )


def launch_plan_key(fusion_id: str, signature: tuple, out_signature: tuple, env_key: str) -> str:
    """What a launch plan is stored under: everything that decides it but the cache's records
    (those are checked on every read), and the version of the default heuristics."""
    from tunefuse.schedulers import HEURISTICS_VERSION

    parts = [
        LAUNCH_PLAN_FORMAT,
        HEURISTICS_VERSION,
        fusion_id,
        [_signature_item(s) for s in signature],
        [_signature_item(s) for s in out_signature],
        env_key,
    ]
    return keys.launch_plan_key(parts)


def _signature_item(sig: Any) -> list | None:
    if sig is None:
        return None
    if hasattr(sig, "shape"):
        return [
            "tensor",
            sig.dtype.value,
            list(sig.shape),
            list(sig.strides),
            sig.alignment,
            sig.device.value,
        ]
    return [
        "scalar",
        sig.dtype.value,
        _scalar_to_json(sig.value) if sig.value is not None else None,
    ]


def _kernel_from_json(k: dict, buffers: tuple[Buffer, ...]) -> KernelLaunch:
    if k["chosen"] not in CHOSEN[:3]:
        raise LaunchPlanError(f"kernel chosen by {k['chosen']!r}")
    static = tuple(None if a is None else (_index_name(a[0]), _int(a[1])) for a in k["static_args"])
    pointers = tuple((_int(pos), _buffer_id(bid, buffers)) for pos, bid in k["pointer_slots"])
    scalars = tuple((_int(pos), _int(vid), DataType(dt)) for pos, vid, dt in k["scalar_slots"])
    workspace = None
    if k.get("workspace") is not None:
        pos, nbytes = k["workspace"]
        workspace = (_int(pos), _int(nbytes))
        if workspace[1] <= 0:
            raise LaunchPlanError(f"kernel {k['kernel_name']}: workspace of {workspace[1]} bytes")
    index_error = None if k.get("index_error") is None else _int(k["index_error"])
    filled = sorted(
        [p for p, _ in pointers]
        + [p for p, _, _ in scalars]
        + ([workspace[0]] if workspace else [])
        + ([index_error] if index_error is not None else [])
    )
    if filled != [p for p, a in enumerate(static) if a is None]:
        raise LaunchPlanError(
            f"kernel {k['kernel_name']}: argument slots do not match its arguments"
        )
    if not isinstance(k["params"], dict):
        raise LaunchPlanError("params must be an object")
    return KernelLaunch(
        _str(k["segment"]),
        _str(k["kernel_key"]),
        _str(k["shape_key"]),
        _str(k["scheduler"]),
        k["params"],
        k["chosen"],
        _int(k["numel"]),
        _str(k["kernel_name"]),
        _str(k["code_key"]),
        _dims(k["grid"]),
        _dims(k["block"]),
        _int(k["shared_bytes"]),
        static,
        pointers,
        scalars,
        workspace,
        index_error,
    )


def index_arg(value: object) -> tuple[str, int]:
    """A static argument (a numpy int32/int64) as stored."""
    return (_INDEX_NAMES[type(value)], int(value))  # type: ignore[index,call-overload]


def _scalar_to_json(v: object) -> list:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool):
        return ["bool", v]
    if isinstance(v, int):
        return ["int", v]
    if isinstance(v, float):
        return ["float", repr(v)]  # repr round-trips, inf and nan included
    raise LaunchPlanError(f"a host scalar of type {type(v).__name__} cannot be stored")


def _scalar_from_json(item: list) -> bool | int | float:
    kind, v = item
    if kind == "bool" and isinstance(v, bool):
        return v
    if kind == "int" and isinstance(v, int) and not isinstance(v, bool):
        return v
    if kind == "float" and isinstance(v, str):
        return float(v)
    raise LaunchPlanError(f"host scalar {item!r}")


def _int(v: object) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise LaunchPlanError(f"expected an integer, got {v!r}")
    return v


def _opt_int(v: object) -> int | None:
    return None if v is None else _int(v)


def _ints(v: object) -> tuple[int, ...]:
    if not isinstance(v, list):
        raise LaunchPlanError(f"expected a list of integers, got {v!r}")
    return tuple(_int(x) for x in v)


def _dims(v: object) -> tuple[int, int, int]:
    dims = _ints(v)
    if len(dims) != 3 or min(dims) < 0:
        raise LaunchPlanError(f"launch dimensions {v!r}")
    return dims  # type: ignore[return-value]


def _bool(v: object) -> bool:
    if not isinstance(v, bool):
        raise LaunchPlanError(f"expected true or false, got {v!r}")
    return v


def _str(v: object) -> str:
    if not isinstance(v, str):
        raise LaunchPlanError(f"expected a string, got {v!r}")
    return v


def _index_name(v: object) -> str:
    if v not in _INDEX_TYPES:
        raise LaunchPlanError(f"index type {v!r}")
    return v  # type: ignore[return-value]


def _buffer_id(v: object, buffers: tuple[Buffer, ...]) -> int:
    i = _int(v)
    if not 0 <= i < len(buffers):
        raise LaunchPlanError(f"buffer {i} out of range")
    return i
