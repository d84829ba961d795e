"""Segmentation: split a concrete fusion into kernels, each runnable by one scheduler.

Every value a kernel needs is computed by evaluating expressions at an index of the
kernel's iteration space; movement ops only rewrite that index (see `indexing`), so a view
anywhere in a fusion never forces a kernel boundary by itself. Boundaries come from what a
single kernel cannot do: reductions over different spaces, a reduction result read at a
different index than it was computed at, outputs of different shapes without a reduction
to tie them, and `segment_set`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property

from tunefuse import keys
from tunefuse.errors import ShapeError
from tunefuse.ir.dtypes import DataType
from tunefuse.ir.elementwise import ELEMENTWISE, elementwise_types
from tunefuse.ir.fusion import ScalarType, TensorType
from tunefuse.ir.ops import GroupOp, OpKind
from tunefuse.ir.shapes import analyze_reshape
from tunefuse.planning.concretize import ConcreteFusion
from tunefuse.planning.indexing import (
    ZERO,
    Affine,
    Index,
    Var,
    add,
    const,
    linearize,
    offset_of,
    source_index,
    var,
)
from tunefuse.planning.kernel_ir import (
    Buffer,
    ColumnPartial,
    EConst,
    EGather,
    EGuard,
    EIndex,
    ELoad,
    EOp,
    EReduce,
    EScalar,
    Expr,
    GatherLoad,
    Load,
    ScalarArg,
    SchedulerKind,
    Store,
)
from tunefuse.planning.reductions import independent_reductions

INT32_MAX = 2**31 - 1
# A kernel's loop indices run past the last element by up to a trip (threads x vector x
# unrolled chunks, at most 1024 x 16 x 8) before the bound test stops them: 32-bit indices
# only where that overshoot still fits.
INDEX_HEADROOM = 1 << 20

# Reductions whose every reduced extent is 1 are the element itself (nvFuser makes them
# squeezes): a sum over a dim of one is a copy, scheduled as pointwise with wide loads rather
# than as a reduction of one element a thread (74% of copy bandwidth on a [2**26, 1] fp32 sum,
# H100). The var of one element is (x - x)**2 / (1 - correction): 0, or NaN (and NaN for a
# non-finite x), elementwise too (layernorm over a dim of 1 was 1.51x torch.compile).
TRIVIAL_WHEN_ONE = frozenset(
    {OpKind.SUM, OpKind.PROD, OpKind.MAX, OpKind.MIN, OpKind.MEAN, OpKind.VAR, OpKind.VAR_MEAN}
)


def is_trivial_reduction(cf: ConcreteFusion, node) -> bool:  # noqa: ANN001
    """A reduction node that reduces nothing: every reduced extent of its input is 1."""
    if node.op not in TRIVIAL_WHEN_ONE or not node.attrs.dims:
        return False
    shape = cf.shape(node.inputs[0])
    return all(shape[d] == 1 for d in node.attrs.dims)


def is_empty_reduction(cf: ConcreteFusion, node) -> bool:  # noqa: ANN001
    """A reduction node over an empty extent: each output element reduces nothing, so it is
    the op's value of an empty set (a constant), and no kernel reduces it. (Its space has no
    element: a kernel over it would not be launched, and the outputs would stay unwritten.)"""
    if node.op not in GroupOp.REDUCTION or not node.attrs.dims:
        return False
    shape = cf.shape(node.inputs[0])
    return any(shape[d] == 0 for d in node.attrs.dims)


def empty_reduction_value(cf: ConcreteFusion, node, value: int) -> EConst:  # noqa: ANN001
    """What `value`, an output of a reduction over an empty extent, holds: as torch, a sum 0,
    a product 1, a mean and a variance NaN; a max or min of nothing is refused by name (it
    has none), as is NaN in an integer type."""
    dtype = cf.fusion.values[value].dtype
    name = f"{node.op.value} T{value}"
    shape = list(cf.shape(node.inputs[0]))
    if 0 in cf.shape(value):  # no output element either: nothing is stored
        return EConst(0, dtype)
    if node.op in (OpKind.MAX, OpKind.MIN):
        raise ShapeError(
            f"{name}: cannot reduce the empty dims {list(node.attrs.dims)} of shape {shape} "
            "(the max or min of nothing has no value)"
        )
    result = {OpKind.SUM: 0, OpKind.PROD: 1}.get(node.op, math.nan)
    if isinstance(result, float) and (dtype.is_integral or dtype.is_bool):
        raise ShapeError(
            f"{name}: the {node.op.value} of the empty dims {list(node.attrs.dims)} of shape "
            f"{shape} is NaN, which {dtype.value} cannot hold"
        )
    return EConst(result, dtype)


@dataclass(frozen=True)
class Segment:
    """One kernel: its scheduler, iteration space (collapsed), loads, stores, scalars."""

    name: str
    scheduler: SchedulerKind
    extents: tuple[int, ...]
    reduce_dims: tuple[int, ...]
    loads: tuple[Load, ...]
    scalars: tuple[ScalarArg, ...]
    stores: tuple[Store, ...]
    index_type: str
    values: tuple[int, ...]  # fusion values this kernel computes
    why: str  # why this segment is separate from the others
    buffer_alignments: tuple[tuple[int, int], ...] = field(default=())  # (buffer id, bytes)
    gathers: tuple[GatherLoad, ...] = ()  # data-dependent reads (EGather)
    # Buffers this kernel reads that a later kernel of its plan reads again and that fit in
    # half the GPU's L2 (planning.plan.mark_read_again): a default that loads them
    # evict-first would send the later kernel to memory for them.
    read_again: frozenset[int] = frozenset()
    # A normalization's column sums taken in parts (planning.column_partials): written at
    # [row group][column], row group g = rows g, g + column_groups, ...
    column_partials: tuple[ColumnPartial, ...] = ()
    column_groups: int = 0

    @property
    def buffer_ids(self) -> tuple[int, ...]:
        """Buffers this kernel touches, in first-use order: its pointer arguments."""
        ids = (
            [ld.buffer for ld in self.loads]
            + [g.buffer for g in self.gathers]
            + [st.buffer for st in self.stores]
            + [c.buffer for c in self.column_partials]
        )
        return tuple(dict.fromkeys(ids))

    @property
    def read_buffers(self) -> frozenset[int]:
        return frozenset(ld.buffer for ld in self.loads) | frozenset(g.buffer for g in self.gathers)

    @property
    def stored_buffers(self) -> frozenset[int]:
        return frozenset(st.buffer for st in self.stores) | frozenset(
            c.buffer for c in self.column_partials
        )

    @property
    def numel(self) -> int:
        n = 1
        for e in self.extents:
            n *= e
        return n

    @cached_property
    def structure(self) -> str:
        """What decides the generated code, sizes and strides left out: the kernel key,
        by which tuned params are kept. The code of a row peeled at a vector also follows
        its length, strides and offsets modulo the vector: kernels are named by their code
        (`codegen.kernel_name`), not by this."""

        def pattern(offset: Affine) -> str:
            if not offset.is_affine:
                return "expr:" + repr(offset)
            return "".join(
                "z"
                if offset.coeff(Var(k, e)) == 0 or e == 1
                else "u"
                if offset.coeff(Var(k, e)) == 1
                else "s"
                for k, e in enumerate(self.extents)
            )

        loads = [(ld.dtype.value, pattern(ld.offset)) for ld in self.loads]
        stores = [
            (st.dtype.value, pattern(st.offset), st.reduced, repr(st.expr)) for st in self.stores
        ]
        scalars = [s.dtype.value for s in self.scalars]
        gathers = [(g.dtype.value, pattern(g.offset)) for g in self.gathers]
        partials = [(c.dtype.value, repr(c.operand)) for c in self.column_partials]
        return repr(
            (
                self.scheduler.value,
                len(self.extents),
                self.reduce_dims,
                loads,
                stores,
                scalars,
                self.index_type,
                self.buffer_alignments,
                *([gathers] if gathers else []),
                *([partials] if partials else []),
            )
        )

    @cached_property
    def kernel_key(self) -> str:
        return keys.kernel_key(self.structure)

    @property
    def shape_key(self) -> str:
        return keys.shape_key(self.extents)


class _Materialize(Exception):
    """The group cannot be one kernel unless `value` is materialized in a buffer first."""

    def __init__(self, value: int, why: str) -> None:
        super().__init__(why)
        self.value = value
        self.why = why


class _SplitByShape(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


@dataclass
class StoreRequest:
    """A value some kernel must write: where, and at which layout."""

    value: int
    buffer: int
    strides: tuple[int, ...]
    why: str
    own_kernel: bool = False  # computed by a kernel of its own (segment_set)


class _SegmentBuilder:
    """Builds one segment's expressions for a group of stored values."""

    def __init__(
        self, cf: ConcreteFusion, materialized: dict[int, Buffer], group: list[StoreRequest]
    ):
        self.cf = cf
        self.f = cf.fusion
        self.materialized = materialized
        self.group = group
        # Values this kernel computes and stores (an input it stores is a copy: it is loaded).
        self.stored_here = {r.value for r in group if not self.f.producer(r.value).op.is_input}
        self.loads: list[Load] = []
        self.load_ids: dict[tuple[int, Affine], int] = {}
        self.gathers: list[GatherLoad] = []
        self.scalars: list[ScalarArg] = []
        self.scalar_ids: dict[int, int] = {}
        self.memo: dict[tuple[int, Index], Expr] = {}
        self.computed: set[int] = set()
        self.space: tuple[int, ...] = ()
        self.reduce_dims: tuple[int, ...] = ()
        self.vars: tuple[Var, ...] = ()
        self.has_full_reduction_use = False

    # -- the cone and the space ------------------------------------------------------------
    def cone_reductions(self, group: list[StoreRequest] | None = None) -> list[int]:
        """The reductions that computing `group` (the whole group by default) takes."""
        seen: set[int] = set()
        order: list[int] = []
        stack = [r.value for r in (self.group if group is None else group)]
        while stack:
            v = stack.pop()
            if v in seen or (v in self.materialized and v not in self.stored_here):
                continue
            seen.add(v)
            node = self.f.producer(v)
            if (
                node.op in GroupOp.REDUCTION
                and not is_trivial_reduction(self.cf, node)
                and not is_empty_reduction(self.cf, node)
                and v not in order
            ):
                # The output reached (var_mean's mean may be read without its var): that is
                # the value to materialize if the reduction needs a kernel of its own.
                order.append(v)
            if node.op is not OpKind.SIZE:  # an extent is known on the host: no data read
                stack.extend(node.inputs)
        producers_order = {o: i for i, n in enumerate(self.f.nodes) for o in n.outputs}
        # Latest first: the reduction nearest the stored values decides the space, and
        # earlier reductions over other spaces are materialized before it.
        return sorted(order, key=lambda v: -producers_order[v])

    def choose_space(self) -> None:
        reductions = self.cone_reductions()
        if not reductions:
            shapes = {self.cf.shape(r.value) for r in self.group}
            if len(shapes) > 1:
                raise _SplitByShape(f"outputs of different shapes {sorted(shapes)}")
            self.space = shapes.pop()
            self.reduce_dims = ()
        else:
            first = self.f.producer(reductions[0])
            self.space = self.cf.shape(first.inputs[0])
            self.reduce_dims = first.attrs.dims  # type: ignore[attr-defined]
            for r in reductions[1:]:
                node = self.f.producer(r)
                if (
                    self.cf.shape(node.inputs[0]) != self.space
                    or node.attrs.dims != self.reduce_dims
                ):  # type: ignore[attr-defined]
                    why = f"{node.op.value} T{r} reduces another space than T{reductions[0]}"
                    if self.shapes_part_the_spaces():
                        # Outputs of each shape need reductions over one space: a kernel
                        # each reads the inputs once apiece (layernorm's backward: dx over
                        # the rows, dw and db over the columns), where a reduction of its own
                        # would read them once more.
                        raise _SplitByShape(why)
                    raise _Materialize(r, why)
            self.vars = tuple(Var(k, e) for k, e in enumerate(self.space))
            reduced = {self.reduced_shape(True), self.reduced_shape(False)}
            for req in self.group:
                shape = self.cf.shape(req.value)
                if (
                    shape != self.space
                    and shape not in reduced
                    and self.space_view(req.value) is None
                ):
                    why = (
                        f"T{req.value} of shape {list(shape)} is neither the reduction's space "
                        f"{list(self.space)} nor its result"
                    )
                    if len({self.cf.shape(r.value) for r in self.group}) == 1:
                        # Nothing to split apart: the reduction gets a kernel of its own.
                        raise _Materialize(reductions[0], why)
                    raise _SplitByShape(why)
        self.vars = tuple(Var(k, e) for k, e in enumerate(self.space))

    def space_view(self, value: int) -> Index | None:
        """The index, in the space's variables, at which to build and store a value of
        another shape that elementwise ops and reshapes make from a value of the reduction's
        space (GroupNorm normalizes [N, G, C/G*H*W], then reshapes, scales and casts to
        [N, C, H, W]): one kernel, not a kernel for its statistics and another for the rest.
        Each reshape on the path is undone; other operands are read at that index. None
        where no such path leads to the space."""
        path = self._reshape_path(value, self.cf.shape(value))
        if not path:
            return None
        index = self.full_index()
        for out in reversed(path):  # from the space's value out: each reshape undone
            src, dst = self.cf.shape(self.f.producer(out).inputs[0]), self.cf.shape(out)
            index = source_index(OpKind.RESHAPE, None, index, dst, src, analyze_reshape(dst, src))
        return index

    def _reshape_path(self, v: int, shape: tuple[int, ...], depth: int = 0) -> list[int]:
        """The reshapes (outermost first) on a path of elementwise ops, casts and reshapes
        from `v` (of `shape`) down to a value of the space; [] where there is none."""
        if depth > 64 or (v in self.materialized and v not in self.stored_here):
            return []
        node = self.f.producer(v)
        if node.op is OpKind.RESHAPE:
            src = node.inputs[0]
            if self.cf.shape(src) == self.space:
                return [v]
            below = self._reshape_path(src, self.cf.shape(src), depth + 1)
            return [v, *below] if below else []
        if node.op is OpKind.CAST or node.op in ELEMENTWISE:
            for u in node.inputs:
                if isinstance(self.f.values[u], TensorType) and self.cf.shape(u) == shape:
                    below = self._reshape_path(u, shape, depth + 1)
                    if below:
                        return below
        return []

    def shapes_part_the_spaces(self) -> bool:
        """Whether the group's outputs of each shape, apart from the others, take reductions
        over exactly one space (one input shape and one set of reduced dims)."""
        parts: dict[tuple[int, ...], list[StoreRequest]] = {}
        for req in self.group:
            parts.setdefault(self.cf.shape(req.value), []).append(req)
        if len(parts) < 2:
            return False
        for part in parts.values():
            spaces = {
                (self.cf.shape(self.f.producer(r).inputs[0]), self.f.producer(r).attrs.dims)
                for r in self.cone_reductions(part)
            }
            if len(spaces) != 1:
                # Several spaces: the part needs a reduction materialized either way; none:
                # its outputs ride along with a reduction of their shape (a normalization
                # stores y and y's column sums from one read), apart they would be re-read.
                return False
        return True

    def reduced_shape(self, keepdim: bool) -> tuple[int, ...]:
        if keepdim:
            return tuple(1 if d in self.reduce_dims else e for d, e in enumerate(self.space))
        return tuple(e for d, e in enumerate(self.space) if d not in self.reduce_dims)

    def full_index(self) -> Index:
        return tuple(var(v) for v in self.vars)

    def outer_index(self, shape: tuple[int, ...]) -> Index:
        """Index of a reduced-shape value at the current outer position."""
        if len(shape) == len(self.space):
            return tuple(
                ZERO if d in self.reduce_dims else var(self.vars[d]) for d in range(len(shape))
            )
        return tuple(var(self.vars[d]) for d in range(len(self.space)) if d not in self.reduce_dims)

    # -- expressions ----------------------------------------------------------------------
    def load(self, value: int, index: Index) -> Expr:
        buf = self.materialized[value]
        offset = offset_of(index, buf.strides)
        key = (buf.id, offset)
        if key not in self.load_ids:
            self.load_ids[key] = len(self.loads)
            self.loads.append(Load(buf.id, buf.dtype, offset))
        return ELoad(self.load_ids[key])

    def scalar(self, value: int) -> Expr:
        node = self.f.producer(value)
        if node.op is OpKind.CONSTANT:
            return EConst(node.attrs.value, node.attrs.dtype)  # type: ignore[attr-defined]
        if value not in self.scalar_ids:
            self.scalar_ids[value] = len(self.scalars)
            self.scalars.append(ScalarArg(value, self.f.values[value].dtype))
        return EScalar(self.scalar_ids[value])

    def build(self, value: int, index: Index) -> Expr:
        if isinstance(self.f.values[value], ScalarType):
            return self.scalar(value)
        key = (value, index)
        if key in self.memo:
            return self.memo[key]
        if value in self.materialized and value not in self.stored_here:
            expr = self.load(value, index)
        else:
            self.computed.add(value)
            expr = self._compute(value, index)
        self.memo[key] = expr
        return expr

    def _operand_index(self, operand: int, index: Index) -> Index:
        shape = self.cf.shape(operand)
        return tuple(ZERO if e == 1 else i for e, i in zip(shape, index))

    def _apply(self, node, dtype: DataType, tensors: dict[int, Expr]) -> Expr:  # noqa: ANN001
        """An elementwise op or cast of `tensors` (its tensor operands' expressions)."""
        types = [self.f.values[v] for v in node.inputs]
        if node.op is OpKind.CAST:
            return EOp(node.op, (tensors[node.inputs[0]],), dtype, types[0].dtype)
        et = elementwise_types(
            node.op,
            [t.dtype if isinstance(t, TensorType) else None for t in types],
            [t.dtype if isinstance(t, ScalarType) else None for t in types],
        )
        operands = tuple(
            tensors[v] if isinstance(t, TensorType) else self.scalar(v)
            for v, t in zip(node.inputs, types)
        )
        return EOp(node.op, operands, dtype, et.operand)

    def _compute(self, value: int, index: Index) -> Expr:
        node = self.f.producer(value)
        op, a = node.op, node.attrs
        dtype: DataType = self.f.values[value].dtype
        if op in ELEMENTWISE or op is OpKind.CAST:
            tensors = {
                v: self.build(v, self._operand_index(v, index))
                for v in node.inputs
                if isinstance(self.f.values[v], TensorType)
            }
            return self._apply(node, dtype, tensors)
        if op in GroupOp.VIEW:
            src = node.inputs[0]
            reshape = self.cf.reshapes.get(value)
            src_index = source_index(
                op, a, index, self.cf.shape(src), self.cf.shape(value), reshape
            )
            return self.build(src, src_index)
        if op in GroupOp.COPY:
            return self.build(node.inputs[0], index)
        if op is OpKind.FULL:
            fill = self.scalar(node.inputs[0])
            return EOp(OpKind.CAST, (fill,), dtype, self.f.values[node.inputs[0]].dtype)
        if op is OpKind.IOTA:
            start, step = (self.scalar(v) for v in node.inputs[1:3])
            compute = dtype.compute
            position = EOp(OpKind.CAST, (EIndex(index[0]),), compute, DataType.Int)
            scaled = EOp(OpKind.MUL, (self._cast(step, compute), position), compute, compute)
            return EOp(OpKind.ADD, (self._cast(start, compute), scaled), dtype, compute)
        if op in GroupOp.RANDOM:
            # The element's row-major position in its own tensor: the numbers never depend on
            # the schedule (tunefuse.philox).
            position = EIndex(linearize(index, self.cf.shape(value)))
            a, b, seed, offset = (self.scalar(v) for v in node.inputs[:4])
            compute = dtype.compute
            return EOp(
                op,
                (position, seed, offset, self._cast(a, compute), self._cast(b, compute)),
                dtype,
                compute,
            )
        if op is OpKind.PAD:
            return self._pad(node, index, dtype)
        if op is OpKind.CAT:
            return self._cat(node, index, dtype)
        if op in GroupOp.INDEXING:
            return self._gather(node, value, index, dtype)
        if op in GroupOp.REDUCTION:
            return self._reduce(node, value, index, dtype)
        raise AssertionError(f"cannot compute {op}")  # pragma: no cover

    def _cast(self, e: Expr, dtype: DataType) -> Expr:
        return EOp(OpKind.CAST, (e,), dtype, dtype)

    def _pad(self, node, index: Index, dtype: DataType) -> Expr:  # noqa: ANN001
        src = node.inputs[0]
        src_shape = self.cf.shape(src)
        rank = len(src_shape)
        widths = node.attrs.pad_widths
        src_index = list(index)
        conditions = []
        for k in range(len(widths) // 2):
            d = rank - 1 - k
            left = widths[2 * k]
            src_index[d] = add(index[d], const(-left))
            if widths[2 * k] > 0 or widths[2 * k + 1] > 0:
                conditions.append((src_index[d], 0, src_shape[d]))
        inner = self.build(src, tuple(src_index))
        fill = EOp(
            OpKind.CAST, (self.scalar(node.inputs[1]),), dtype, self.f.values[node.inputs[1]].dtype
        )
        return EGuard(tuple(conditions), inner, fill, dtype) if conditions else inner

    def _cat(self, node, index: Index, dtype: DataType) -> Expr:  # noqa: ANN001
        dim = node.attrs.dim
        pieces = []
        start = 0
        for v in node.inputs:
            extent = self.cf.shape(v)[dim]
            shifted = list(index)
            shifted[dim] = add(index[dim], const(-start))
            src_dtype = self.f.values[v].dtype
            e = self.build(v, tuple(shifted))
            if src_dtype is not dtype:
                e = EOp(OpKind.CAST, (e,), dtype, src_dtype)
            pieces.append((shifted[dim], extent, e))
            start += extent
        expr = pieces[-1][2]
        for position, extent, e in reversed(pieces[:-1]):
            expr = EGuard(((position, -(2**62), extent),), e, expr, dtype)
        return expr

    def _gather(self, node, value: int, index: Index, dtype: DataType) -> Expr:  # noqa: ANN001
        """index_select reads its index at the output's dims that replaced `dim`; gather at
        the output's own index. The table is read from its buffer (materialized first when
        computed), at the non-gathered dims' position plus the index times its stride."""
        table, index_value = node.inputs
        dim = node.attrs.dim
        table, chain = self._gather_source(table)
        if table not in self.materialized or table in self.stored_here:
            # Read from memory another kernel wrote: never from this kernel's own stores.
            raise _Materialize(
                table, f"{node.op.value} T{value} reads T{table} at data-dependent positions"
            )
        if node.op is OpKind.INDEX_SELECT:
            r = len(self.cf.shape(index_value))
            at = tuple(index[dim : dim + r])
            table_index = (*index[:dim], ZERO, *index[dim + r :])
        else:
            at = tuple(index)
            table_index = (*index[:dim], ZERO, *index[dim + 1 :])
        picked = self.build(index_value, self._operand_index(index_value, at))
        buf = self.materialized[table]
        base = offset_of(table_index, buf.strides)
        self.gathers.append(
            GatherLoad(buf.id, buf.dtype, base, buf.shape[dim], buf.strides[dim], value)
        )
        element: Expr = EGather(len(self.gathers) - 1, picked, buf.dtype)
        for op_node in reversed(chain):
            element = self._apply(
                op_node, self.f.values[op_node.outputs[0]].dtype, {table: element}
            )
            table = op_node.outputs[0]
        return element

    def _gather_source(self, table: int) -> tuple[int, list]:
        """Where a gather of `table` reads memory: `table` itself, or the tensor in memory
        that a chain of elementwise ops of one tensor operand each (a cast, a scale) makes
        it from, with that chain (outermost op first) to apply to the element read.
        Cross-entropy picks a logit of cast(z): read z, not a float copy of it."""
        chain = []
        v = table
        while not (v in self.materialized and v not in self.stored_here):
            node = self.f.producer(v)
            tensors = [u for u in node.inputs if isinstance(self.f.values[u], TensorType)]
            if (
                not (node.op is OpKind.CAST or node.op in ELEMENTWISE)
                or len(set(tensors)) != 1
                or self.cf.shape(tensors[0]) != self.cf.shape(v)
            ):
                return table, []
            chain.append(node)
            v = tensors[0]
        return v, chain

    def _reduce(self, node, value: int, index: Index, dtype: DataType) -> Expr:  # noqa: ANN001
        a = node.attrs
        src = node.inputs[0]
        if is_trivial_reduction(self.cf, node):
            src_index = list(index)
            if len(index) != len(self.cf.shape(src)):  # keepdim=False: the reduced dims are gone
                for d in sorted(a.dims):
                    src_index.insert(d, ZERO)
            element = self.build(src, tuple(src_index))
            src_dtype = self.f.values[src].dtype
            if node.op is OpKind.VAR or (node.op is OpKind.VAR_MEAN and value == node.outputs[0]):
                # As the reference: the squared deviation from itself over max(1 - c, 0),
                # here times its reciprocal (1 or inf: 0 * inf is NaN, as 0 / 0).
                compute = dtype.compute
                x = EOp(OpKind.CAST, (element,), compute, src_dtype)
                d = EOp(OpKind.SUB, (x, x), compute, compute)
                n = 1 - a.correction  # (the square is 0 or NaN: times 1 / n it is exact)
                scale = EConst(1.0 / n if n > 0 else math.inf, compute)
                square = EOp(OpKind.MUL, (d, d), compute, compute)
                return EOp(OpKind.MUL, (square, scale), dtype, compute)
            return EOp(OpKind.CAST, (element,), dtype, src_dtype)
        if is_empty_reduction(self.cf, node):
            return empty_reduction_value(self.cf, node, value)
        if self.cf.shape(src) != self.space or a.dims != self.reduce_dims:
            raise _Materialize(value, f"{node.op.value} T{value} reduces another space")
        expected = self.outer_index(self.cf.shape(value))
        if tuple(index) != expected:
            raise _Materialize(value, f"T{value} is read at another index than it is reduced at")
        operand = self.build(src, self.full_index())
        out = node.outputs.index(value)
        return EReduce(node.op, operand, dtype, a.correction, out, value)


def _collapse(
    segment_extents: tuple[int, ...],
    reduce_dims: tuple[int, ...],
    offsets: list[Affine],
    exprs_have_index: bool,
) -> tuple[list[list[int]], bool]:
    """Groups of adjacent vars that can merge: for every offset, coeff[k] = coeff[k+1] *
    extent[k+1], and both on the same side of the reduction. Extent-1 vars are dropped."""
    rank = len(segment_extents)
    keep = [k for k in range(rank) if segment_extents[k] != 1]
    if not keep:
        return [[0]] if rank else [[]], True
    if exprs_have_index or not all(o.is_affine for o in offsets):
        return [[k] for k in keep] if keep else [[0]], False
    groups: list[list[int]] = [[keep[0]]]
    for k in keep[1:]:
        prev = groups[-1][-1]
        same_side = (prev in reduce_dims) == (k in reduce_dims)
        mergeable = same_side and all(
            o.coeff(Var(prev, segment_extents[prev]))
            == o.coeff(Var(k, segment_extents[k])) * segment_extents[k]
            for o in offsets
        )
        if mergeable:
            groups[-1].append(k)
        else:
            groups.append([k])
    return groups, True


def _rewrite(
    offset: Affine, groups: list[list[int]], extents: tuple[int, ...], new_extents: list[int]
) -> Affine:
    if not offset.is_affine:
        return offset
    terms = []
    for j, group in enumerate(groups):
        if not group:
            continue
        inner = group[-1]
        c = offset.coeff(Var(inner, extents[inner]))
        if c:
            terms.append(
                Affine(((Var(j, new_extents[j]), c),), 0) if new_extents[j] != 1 else const(0)
            )
    return add(const(offset.const), *terms)


def _has_index_expr(e: Expr) -> bool:
    if isinstance(e, (EIndex, EGuard, EGather)):
        return True
    if isinstance(e, EOp):
        return any(_has_index_expr(x) for x in e.operands)
    if isinstance(e, EReduce):
        return _has_index_expr(e.operand)
    return False


def _is_full_use(e: Expr, inside: bool = False) -> bool:
    """True when a reduction result is combined at the full space (normalization)."""
    if isinstance(e, EReduce):
        return inside
    if isinstance(e, EOp):
        return any(_is_full_use(x, inside) for x in e.operands)
    if isinstance(e, EGuard):
        return _is_full_use(e.then, inside) or _is_full_use(e.other, inside)
    if isinstance(e, EGather):
        return _is_full_use(e.index, inside)
    return False


def _classify(
    builder: _SegmentBuilder, stores: list[Store], loads: list[Load], extents: tuple[int, ...]
) -> SchedulerKind:
    if builder.reduce_dims:
        full_store = any(not st.reduced for st in stores)
        if full_store or not independent_reductions([st.expr for st in stores]):
            return SchedulerKind.NORMALIZATION
        return SchedulerKind.REDUCTION
    vars_ = [Var(k, e) for k, e in enumerate(extents)]

    def order(offset: Affine) -> list[int]:
        real = [
            (abs(offset.coeff(v)), v.k) for v in vars_ if offset.coeff(v) != 0 and v.extent != 1
        ]
        return [k for _, k in sorted(real)]

    store_orders = [order(st.offset) for st in stores if st.offset.is_affine]
    for ld in loads:
        if not ld.offset.is_affine:
            continue
        lo = order(ld.offset)
        for so in store_orders:
            common = [k for k in so if k in lo]
            if [k for k in lo if k in common] != common:
                return SchedulerKind.TRANSPOSE
    return SchedulerKind.POINTWISE


def build_segment(
    cf: ConcreteFusion,
    materialized: dict[int, Buffer],
    group: list[StoreRequest],
    name: str,
    all_buffers: list[Buffer] | tuple[Buffer, ...] = (),
) -> Segment:
    b = _SegmentBuilder(cf, materialized, group)
    b.choose_space()
    stores: list[Store] = []
    for req in group:
        shape = cf.shape(req.value)
        view = (
            b.space_view(req.value)
            if b.reduce_dims
            and shape not in (b.space, b.reduced_shape(True), b.reduced_shape(False))
            else None
        )
        if view:  # made from the space's values: built and stored at the space's index
            reduced = False
            index = view
            expr = b.build(req.value, index)
        else:
            reduced = bool(b.reduce_dims) and shape != b.space
            index = b.outer_index(shape) if reduced else b.full_index()
            expr = b.build(req.value, index)
        stores.append(
            Store(
                req.buffer,
                materialized[req.value].dtype
                if req.value in materialized
                else cf.fusion.values[req.value].dtype,
                offset_of(index, req.strides),
                expr,
                req.value,
                reduced,
            )
        )
    exprs_have_index = any(_has_index_expr(st.expr) for st in stores)
    offsets = [ld.offset for ld in b.loads] + [st.offset for st in stores]
    groups, _ = _collapse(b.space, b.reduce_dims, offsets, exprs_have_index)
    if groups == [[]]:
        extents: tuple[int, ...] = ()
        new_loads, new_stores, reduce_dims = b.loads, stores, ()
    else:
        new_extents = [1] * len(groups)
        for j, g in enumerate(groups):
            for k in g:
                new_extents[j] *= b.space[k]
        extents = tuple(new_extents)
        if exprs_have_index or not all(o.is_affine for o in offsets):
            # No collapse: keep the original variables (extent-1 ones included).
            extents = b.space if b.space else (1,)
            new_loads, new_stores = list(b.loads), stores
            reduce_dims = b.reduce_dims
        else:
            new_loads = [
                replace(ld, offset=_rewrite(ld.offset, groups, b.space, new_extents))
                for ld in b.loads
            ]
            new_stores = [
                replace(st, offset=_rewrite(st.offset, groups, b.space, new_extents))
                for st in stores
            ]
            reduce_dims = tuple(j for j, g in enumerate(groups) if g and g[0] in b.reduce_dims)
    index_type = _index_type(extents, [*new_loads, *b.gathers], new_stores, materialized)
    kind = _classify(b, new_stores, new_loads, extents)
    why = "; ".join(dict.fromkeys(r.why for r in group))
    return Segment(
        name=name,
        scheduler=kind,
        extents=extents if extents else (1,),
        reduce_dims=reduce_dims,
        loads=tuple(new_loads),
        scalars=tuple(b.scalars),
        stores=tuple(new_stores),
        index_type=index_type,
        values=tuple(sorted(b.computed)),
        why=why,
        buffer_alignments=tuple(
            sorted(
                {
                    (buf.id, buf.alignment)
                    for buf in [*materialized.values(), *all_buffers]
                    if buf.id in {ld.buffer for ld in new_loads} | {st.buffer for st in new_stores}
                }
            )
        ),
        gathers=tuple(b.gathers),
    )


def _index_type(extents, loads, stores, materialized) -> str:  # noqa: ANN001
    numel = 1
    for e in extents:
        numel *= e
    biggest = max((buf.numel for buf in materialized.values()), default=0)
    if numel > INT32_MAX - INDEX_HEADROOM or biggest > INT32_MAX - INDEX_HEADROOM:
        return "int64"
    for access in [*loads, *stores]:
        lo, hi = access.offset.bounds()
        if isinstance(access, GatherLoad):
            lo, hi = (
                lo + min(0, access.stride * (access.extent - 1)),
                hi + max(0, access.stride * (access.extent - 1)),
            )
        if hi > INT32_MAX or lo < -INT32_MAX:
            return "int64"
    return "int32"
