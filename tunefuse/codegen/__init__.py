"""CUDA C++ for a scheduled segment: `generate(segment, params, ...)` -> KernelSource.

Kernels are named after their kernel_key, not their fusion, so that the same kernel in two
fusions is one source and one binary; the plan printout maps segments to kernel names.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunefuse import keys
from tunefuse.codegen.expr import KernelArg, kernel_args
from tunefuse.codegen.pointwise import emit_pointwise
from tunefuse.codegen.preamble import PREAMBLE
from tunefuse.codegen.reduction import emit_reduction
from tunefuse.codegen.transpose import emit_transpose
from tunefuse.device_info import DeviceInfo
from tunefuse.errors import ExecutionError
from tunefuse.ir.dtypes import DataType
from tunefuse.planning.kernel_ir import SchedulerKind
from tunefuse.planning.segment import Segment
from tunefuse.schedulers import scheduler_for
from tunefuse.schedulers.reduction import launch_min_blocks

CODEGEN_VERSION = (
    "34"  # bump when generated code changes: tuned records of another version are not used
)
# 19: a normalization takes a vector of consecutive outputs a lane where the innermost dim is
#     not reduced (each pass's totals kept a lane, full-size outputs stored a vector a time).
# 20: a run of plain accumulators over a row held in registers is one pass, combined across
#     the block with one pair of barriers (layernorm's backward: two sums a row); loads the
#     row loop does not change (a weight) are held from before it; a kernel taking column
#     sums in parts is compiled to fit the blocks an SM its row groups count on.
# 21: a kernel taking column sums in parts whose thread holds one vector of each row input
#     reads the next row's share (and its per-row scalars) before it reduces this one;
#     uniform's draws stay below hi in the output's dtype (tf_below).
# 22: a normalization that re-reads its rows from memory, with evict_first, loads them
#     evict-first in its output pass and stores its full-size outputs evict-first
#     (tf_st_stream).
# 23: a normalization with a vector of outputs a lane combines every lane's totals across
#     the row's threads in one tree, a barrier a level (`lanes_block_reduce`), not a tree a
#     lane; the same combination order, so the same bits.
# 24: a flat pointwise kernel may take its vector along the flat index (`flat_vector`): a
#     group crosses innermost rows, its dense operands move at once, the others are read
#     element by element at carried indices, and the numel % vector left over run in block 0.
#     A transpose tile whose loads are under 16 bytes loops over a thread's rows a known
#     count of times (unrolled: their loads in flight together).
# 25: consecutive transpose tiles run along the writes' innermost dim (they were along the
#     reads'): a tile's stores finish the sectors its neighbour's began while both are in L2.
# 26: a kernel's name is a digest of its code (`kernel_name`), not of its segment's structure
#     and params: rows peeled or not under one structure and params are two kernels.
# 27: a kernel of 32-bit indices divides by its extents through fast divisors computed on the
#     host (F<j>, `expr.fast_divisor`: a multiply-high and a shift); a held row of an outer
#     layout (rows a lane, or a normalization's cache_row) loads with a condition on its last
#     chunk alone (`reduction.clamped_fill`).
# 28: the uncached strided loop takes `unroll` chunks a trip while a whole group lies within the
#     row, then its tail as one group of loads clamped to the row's last chunk, compute behind
#     the row's end (`reduction.whole_groups_then_tail`): nvcc ran a short lane's leftover
#     trips one load at a time.
# 29: a strided reduction of one thread a column takes its rows a lane adjacent where a warp's
#     load of one row each is under a line and a lane's rows span at most 8 bytes
#     (`reduction.adjacent_lane_rows`: 2 or 4 bf16 rows; ADJACENT_LANE_BYTES).
# (29, unchanged: rows a lane of a vector along the outputs, params no earlier version took,
#     are generated since heuristics 51; every kernel of earlier params is the same code.)
# 30: a row's output pass computes the ops of its reductions, scalars and constants alone
#     (a layernorm's rsqrt(var + eps)) once at the row's scope, not an element at a time
#     (`reduction._Emitter.row_invariants`).
# (30, unchanged: a held row's passes with whole_chunks, params no earlier version took, are
#     generated since the fifty-eighth session; every kernel of earlier params is the same code.)
# 31: rows a lane hold one copy of a cached load the rows share (a norm's weight and bias),
#     loaded before the row loop (`reduction._Emitter.hoisted_loads`), where each row of the
#     lane held and loaded its own.
# (31, unchanged: a held row's inputs no row moves loaded before the row loop with one row a
#     lane, `hoist_invariants`, params no earlier version took, are generated since heuristics
#     59; every kernel of earlier params is the same code.)
# 32: a mean or a variance multiplies its total by the reciprocal of the count
#     (`reduction.per_element`), computed once outside the row loop, where each row divided;
#     a held row of 2-byte floats is held as floats, converted once as it is loaded
#     (`reduction._Emitter.widened_loads`), where each pass converted it again; a bf16
#     vector's lanes convert from their 32-bit words (`tf_b2f_lane`); a cast to the type a
#     value has already is a copy.
# 33: adjacent rows a lane keep each reduced output a lane and store them as vectors after
#     the lane's last row, where a lane's rows are consecutive aligned addresses of the output
#     and a warp's store of a row each would span more than a line
#     (`reduction.lane_store_widths`), where each row stored its own. (The version string
#     stayed "32" until 34 found it.)
# 34: a held row of one thread a row along y (`reduction._Emitter.clamped_fill`) loads its last
#     chunk at a clamped index with the others, where a condition on it let the compiler issue
#     it after computing on the rest.


@dataclass(frozen=True)
class KernelSource:
    name: str
    source: str
    args: tuple[KernelArg, ...]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    params: object
    workspace_bytes: int = 0  # device memory, zeroed when made, the launch passes last (WS)


# The name a kernel's body is emitted with, replaced by `kernel_name` once the body is known.
UNNAMED = "tf_kernel_being_named"


def kernel_name(kind: SchedulerKind, body: str) -> str:
    """A name unique to the code: a digest of the body emitted as UNNAMED. The segment's
    structure and the params do not decide the code alone: a row peeled at a vector (the
    params) is read by aligned vectors only where its length, strides and offsets are not
    multiples of it, and two shapes of one structure once shared a name while their code
    differed (the GPU ran the first one's kernel, loaded by that name, for the second:
    a misaligned vector)."""
    return keys.kernel_name(kind.value, body)


def emitted_params(segment: Segment, params: object) -> object:
    """The params of the kernel that is emitted: a transpose with nothing to tile runs as its
    pointwise kernel."""
    if segment.scheduler is SchedulerKind.TRANSPOSE and params.tile == 0:  # type: ignore[attr-defined]
        return params.pointwise  # type: ignore[attr-defined]
    return params


def generate(
    segment: Segment, params: object, device: DeviceInfo, buffer_dtypes: dict[int, DataType]
) -> KernelSource:
    """The kernel for `segment` with `params`; raises when the params cannot run it."""
    scheduler = scheduler_for(segment.scheduler)
    why = scheduler.is_valid(segment, device, params)
    if why is not None:
        raise ExecutionError(f"{segment.name}: params {params} are invalid here: {why}")
    emitted = emitted_params(segment, params)
    args = kernel_args(segment, buffer_dtypes, static_shape=emitted.static_shape)  # type: ignore[attr-defined]
    workspace = 0
    if kind_is_split(segment, params):
        from tunefuse.codegen.reduction import partial_fields
        from tunefuse.schedulers.reduction import workspace_bytes

        workspace = workspace_bytes(
            segment, params, [t.itemsize for _, _, t in partial_fields(segment)]
        )  # type: ignore[arg-type]
        args.append(KernelArg("WS", "unsigned char* __restrict__", "workspace", (workspace,)))
    kind = segment.scheduler
    dynamic_shared = 0
    if kind is SchedulerKind.POINTWISE or emitted is not params:
        body = emit_pointwise(segment, UNNAMED, args, emitted)  # type: ignore[arg-type]
    elif kind is SchedulerKind.TRANSPOSE:
        body = emit_transpose(segment, UNNAMED, args, params)  # type: ignore[arg-type]
    else:
        body, dynamic_shared = emit_reduction(
            segment,
            UNNAMED,
            args,
            params,
            kind is SchedulerKind.NORMALIZATION,
            launch_blocks(segment, device, params),
        )
    name = kernel_name(kind, body)
    body = body.replace(UNNAMED, name)
    grid, block, smem = scheduler.grid(segment, device, params)
    if grid[2] > 65535:
        grid = (grid[0], grid[1], 65535)
    header = f"// tunefuse codegen {CODEGEN_VERSION}: {kind.value} kernel, params {params}\n"
    return KernelSource(
        name,
        header + PREAMBLE + "\n" + body + "\n",
        tuple(args),
        grid,
        block,
        smem + dynamic_shared,
        params,
        workspace,
    )


def launch_blocks(segment: Segment, device: DeviceInfo, params: object) -> int:
    """The blocks an SM a reduction or normalization kernel's launch bounds ask the compiler
    to fit (its second argument; 0 or 1: none): the params' `min_blocks` as far as the
    block's threads allow, else what a kernel taking column sums in parts counts on."""
    layout = params.as_reduction() if segment.scheduler is SchedulerKind.NORMALIZATION else params  # type: ignore[attr-defined]
    return launch_min_blocks(layout, device) or partial_blocks(segment, device, params)  # type: ignore[arg-type]


def code_identity(kernel: KernelSource) -> str:
    """What tells two kernels apart: the generated code and its launch, less what names them
    (the header and the kernel's name carry the params). Two params values can give one
    kernel: a pointwise grid of one block whatever its blocks an SM, `min_blocks` past what
    the block's threads allow. The tuner measures each identity once."""
    return repr(
        (
            kernel_body(kernel),
            kernel.grid,
            kernel.block,
            kernel.shared_bytes,
            kernel.workspace_bytes,
        )
    )


def kernel_body(kernel: KernelSource) -> str:
    """A kernel's code less what names it: the header (it carries the params) and its name."""
    return kernel.source.split("\n", 1)[1].replace(kernel.name, "KERNEL")


def partial_blocks(segment: Segment, device: DeviceInfo, params: object) -> int:
    """The blocks an SM a kernel taking column sums in parts is compiled to fit: as many
    as its row groups (G) put on an SM, and no more than its params' estimate fits (a
    tuner's layout G was not sized for is not squeezed into G's residency); 0 elsewhere."""
    if not segment.column_partials:
        return 0
    from tunefuse.schedulers.normalization import partial_blocks_resident

    waves = segment.column_groups // params.rows_per_block // device.sm_count  # type: ignore[attr-defined]
    return max(1, min(waves, partial_blocks_resident(segment, device, params)))  # type: ignore[arg-type]


def kind_is_split(segment: Segment, params: object) -> bool:
    """A reduction kernel whose rows are split across blocks (it takes a workspace)."""
    return segment.scheduler is SchedulerKind.REDUCTION and getattr(params, "split", 1) > 1
