"""Runs a Plan on the CPU with NumPy, kernel by kernel, exactly as the GPU would: every
buffer is flat memory, every load and store goes through its offset expression.

It proves that concretization, aliasing, segmentation and index collapsing keep a fusion's
meaning (the tests compare it with `tunefuse.reference.run`), and it is the readable
specification of what each generated kernel must compute.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tunefuse import philox
from tunefuse.arrays import strided_view, to_numpy
from tunefuse.errors import IndexOutOfRangeError
from tunefuse.ir.dtypes import DataType
from tunefuse.ir.elementwise import ELEMENTWISE
from tunefuse.ir.fusion import TensorType
from tunefuse.ir.ops import GroupOp, OpKind
from tunefuse.planning.indexing import Affine, Div, Mod, Var
from tunefuse.planning.kernel_ir import (
    EConst,
    EGather,
    EGuard,
    EIndex,
    ELoad,
    EOp,
    EReduce,
    EScalar,
    Expr,
)
from tunefuse.planning.plan import Plan, make_plan
from tunefuse.planning.segment import Segment
from tunefuse.reference import eval_node, reduce_rows

CHUNK = 1 << 20
# What the interpreter fills buffers with before any kernel writes them (the GPU leaves them
# uninitialized): a value no fuzzed output is likely to hold by chance.
UNWRITTEN = 77


def eval_affine(a: Affine, vars_: dict[int, np.ndarray]) -> np.ndarray:
    total: np.ndarray | int = a.const
    for atom, c in a.terms:
        if isinstance(atom, Var):
            x = vars_[atom.k]
        elif isinstance(atom, Div):
            x = eval_affine(atom.x, vars_) // atom.c
        else:
            assert isinstance(atom, Mod)
            x = eval_affine(atom.x, vars_) % atom.c
        total = total + c * x
    return np.asarray(total, dtype=np.int64)


class LoadOutOfBounds(AssertionError):
    """A segment reads outside a buffer at a position where the read is used: the kernel
    generated from it would touch memory outside its buffers."""


class _SegmentRun:
    def __init__(self, seg: Segment, memory: dict[int, np.ndarray], scalars: list[object]):
        self.seg = seg
        self.memory = memory
        self.scalars = scalars
        self.memo: dict[int, np.ndarray] = {}
        self.vars: dict[int, np.ndarray] = {}
        self.taken: np.ndarray | None = None  # inside a guard's branch: where it is taken

    def eval(self, e: Expr) -> np.ndarray:
        key = id(e)
        if key not in self.memo:
            self.memo[key] = self._eval(e)
        return self.memo[key]

    def _eval(self, e: Expr) -> np.ndarray:
        if isinstance(e, ELoad):
            ld = self.seg.loads[e.load]
            memory = self.memory[ld.buffer]
            offsets = eval_affine(ld.offset, self.vars)
            inside = (offsets >= 0) & (offsets < memory.size)
            used = inside if self.taken is None else inside | ~self.taken
            if not np.all(used):
                raise LoadOutOfBounds(
                    f"{self.seg.name}: load {e.load} of b{ld.buffer} at {ld.offset} reads outside its "
                    f"{memory.size} elements (offsets {int(offsets.min())}..{int(offsets.max())})"
                )
            return memory[np.where(inside, offsets, 0)]
        if isinstance(e, EGather):
            g = self.seg.gathers[e.gather]
            index = self.eval(e.index).astype(np.int64)
            in_range = (index >= 0) & (index < g.extent)
            used = ~in_range if self.taken is None else ~in_range & self.taken
            if np.any(used):
                raise IndexOutOfRangeError(
                    f"{self.seg.name}: T{g.value} reads an index outside [0, {g.extent})"
                )
            memory = self.memory[g.buffer]
            offsets = eval_affine(g.offset, self.vars) + np.where(in_range, index, 0) * g.stride
            inside = (offsets >= 0) & (offsets < memory.size)
            if not np.all(inside | ~in_range | (False if self.taken is None else ~self.taken)):
                raise LoadOutOfBounds(
                    f"{self.seg.name}: gather {e.gather} of b{g.buffer} reads outside its "
                    f"{memory.size} elements"
                )
            return np.where(
                in_range & inside, memory[np.where(in_range & inside, offsets, 0)], 0
            ).astype(g.dtype.numpy)
        if isinstance(e, EScalar):
            return np.asarray(self.scalars[e.arg]).astype(self.seg.scalars[e.arg].dtype.numpy)
        if isinstance(e, EConst):
            return np.asarray(e.value, dtype=e.dtype.numpy)
        if isinstance(e, EIndex):
            return eval_affine(e.index, self.vars)
        if isinstance(e, EOp):
            if e.op is OpKind.CAST:
                return self.eval(e.operands[0]).astype(e.dtype.numpy)
            if e.op in GroupOp.RANDOM:
                position, seed, offset, a, b = (self.eval(x) for x in e.operands)
                draw = philox.uniform if e.op is OpKind.UNIFORM else philox.normal
                return draw(position.astype(np.int64), int(seed), int(offset), a, b, e.dtype)
            rule = ELEMENTWISE[e.op]
            operands = [
                self.eval(x).astype(
                    DataType.Bool.numpy if k < rule.first_promoted else e.operand_dtype.numpy
                )
                for k, x in enumerate(e.operands)
            ]
            return np.asarray(rule.numpy(*operands)).astype(e.dtype.numpy)
        if isinstance(e, EReduce):
            # A row's reduction is the same wherever it is used: inside a guard's branch too,
            # where the variables are masked (a kernel computes it in the row's own phase).
            if self.taken is not None:
                saved = (self.vars, self.taken, self.memo)
                self.vars, self.taken, self.memo = self.row_vars, None, self.row_memo
                try:
                    return self.eval(e)
                finally:
                    self.vars, self.taken, self.memo = saved
            x = np.broadcast_to(self.eval(e.operand), self.full_shape)
            compute = e.dtype.compute if e.dtype.is_floating else DataType.Int
            rows = np.ascontiguousarray(x.astype(compute.numpy))
            result = reduce_rows(e.op, rows, e.correction)[e.output]
            return result.reshape(-1, 1).astype(e.dtype.numpy)
        if isinstance(e, EGuard):
            ok = np.ones((), dtype=bool)
            for index, lo, hi in e.conditions:
                i = eval_affine(index, self.vars)
                ok = ok & (i >= lo) & (i < hi)
            # Evaluate each side only where it is taken (a guarded load may be out of range).
            then = self._masked(e.then, ok)
            other = self._masked(e.other, ~ok)
            return np.where(ok, then, other).astype(e.dtype.numpy)
        raise AssertionError(e)  # pragma: no cover

    def _masked(self, e: Expr, mask: np.ndarray) -> np.ndarray:
        saved, taken = self.vars, self.taken
        self.vars = {
            k: np.where(np.broadcast_to(mask, np.broadcast_shapes(mask.shape, v.shape)), v, 0)
            for k, v in saved.items()
        }
        self.taken = mask if taken is None else mask & taken
        memo, self.memo = self.memo, {}
        try:
            return self.eval(e)
        finally:
            self.vars, self.memo, self.taken = saved, memo, taken

    def run(self) -> None:
        seg = self.seg
        extents = seg.extents
        outer = [k for k in range(len(extents)) if k not in seg.reduce_dims]
        inner = [k for k in range(len(extents)) if k in seg.reduce_dims]
        n_outer = int(np.prod([extents[k] for k in outer])) if outer else 1
        n_inner = int(np.prod([extents[k] for k in inner])) if inner else 1
        if n_outer == 0:
            return
        inner_idx = (
            np.unravel_index(np.arange(n_inner), [extents[k] for k in inner]) if inner else ()
        )
        step = max(1, CHUNK // max(n_inner, 1))
        groups = seg.column_groups
        for part in seg.column_partials:  # row group g sums rows g, g + groups, ...
            self.memory[part.buffer][:] = 0
        for start in range(0, n_outer, step):
            positions = np.arange(start, min(start + step, n_outer))
            outer_idx = np.unravel_index(positions, [extents[k] for k in outer]) if outer else ()
            self.vars = {}
            for k, idx in zip(outer, outer_idx):
                self.vars[k] = idx.reshape(-1, 1)
            for k, idx in zip(inner, inner_idx):
                self.vars[k] = idx.reshape(1, -1)
            self.full_shape = (len(positions), n_inner)
            self.memo = {}
            self.row_vars, self.row_memo = self.vars, self.memo
            for st in seg.stores:
                value = self.eval(st.expr)
                offsets = eval_affine(st.offset, self.vars)
                if st.reduced:
                    shape = (len(positions), 1)
                    value, offsets = np.broadcast_to(value, shape), np.broadcast_to(offsets, shape)
                else:
                    value = np.broadcast_to(value, self.full_shape)
                    offsets = np.broadcast_to(offsets, self.full_shape)
                self.memory[st.buffer][offsets] = value.astype(st.dtype.numpy)
            for part in seg.column_partials:
                value = np.broadcast_to(self.eval(part.operand), self.full_shape)
                sums = self.memory[part.buffer].reshape(groups, n_inner)
                np.add.at(sums, positions % groups, value.astype(part.dtype.numpy))


def _flat_memory(array: np.ndarray, strides: Sequence[int]) -> np.ndarray:
    span = 1 + sum((s - 1) * st for s, st in zip(array.shape, strides)) if array.size else 1
    flat = np.zeros(span, dtype=array.dtype)
    if array.size:
        idx = (
            np.indices(array.shape).reshape(array.ndim, -1) if array.ndim else np.zeros((0, 1), int)
        )
        offsets = sum(i * st for i, st in zip(idx, strides)) if array.ndim else np.zeros(1, int)
        flat[offsets] = array.reshape(-1)
    return flat


def run_plan(
    plan: Plan, inputs: Sequence[object], out: Sequence[np.ndarray | None] | None = None
) -> list[np.ndarray]:
    """Execute `plan` for `inputs` on the CPU; returns the outputs, as `fd.execute` would,
    followed by the in-place outputs' new values. Preallocated `out` arrays are written."""
    f = plan.fusion
    memory: dict[int, np.ndarray] = {}
    host: dict[int, object] = dict(plan.fixed_scalars)
    for position, vid in enumerate(f.inputs):
        if not isinstance(f.values[vid], TensorType):
            host[vid] = inputs[position]
    for buf in plan.buffers:
        if buf.input_index is not None:
            memory[buf.id] = _flat_memory(to_numpy(inputs[buf.input_index]), buf.strides)
        elif buf.out_index is not None:
            memory[buf.id] = _flat_memory(out[buf.out_index], buf.strides)  # type: ignore[index]
        else:  # as on the GPU, what no kernel writes is not zero: a poison shows it
            memory[buf.id] = np.full(max(buf.numel, 1), UNWRITTEN).astype(buf.dtype.numpy)
    for node in plan.host_scalar_nodes:
        env = {v: np.asarray(host[v]) for v in node.inputs}
        for v, r in zip(node.outputs, eval_node(f, node, env)):
            host[v] = r.item()
    with np.errstate(all="ignore"):
        for seg in plan.segments:
            if seg.numel == 0:  # the executor launches no kernel over an empty space
                continue
            scalars = [host[s.value] for s in seg.scalars]
            _SegmentRun(seg, memory, scalars).run()
    results = []
    for binding in plan.outputs:
        buf = plan.buffers[binding.buffer]
        flat = memory[buf.id]
        view = strided_view(flat[binding.view.offset :], binding.view.shape, binding.view.strides)
        result = np.array(view, copy=True)
        if buf.out_index is not None:
            target = out[buf.out_index]  # type: ignore[index]
            target[...] = result
            result = target
        results.append((binding.returned, result))
    return [r for returned, r in results if returned] + [
        r for returned, r in results if not returned
    ]


def run_via_plan(
    fusion, inputs: Sequence[object], out: Sequence[np.ndarray | None] | None = None
) -> list[np.ndarray]:  # noqa: ANN001
    return run_plan(make_plan(fusion, inputs, out), inputs, out)
