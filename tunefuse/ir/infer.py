"""Per-op type and shape inference, and the builder that appends checked nodes to a fusion.

Every node goes through `FusionBuilder.add`, whether it comes from the frontend or from
JSON: the same rule validates it and computes its outputs' dtypes and extents.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tunefuse.errors import DefinitionError, ShapeError
from tunefuse.ir.dtypes import DataType, promote_types, refuse_float8
from tunefuse.ir.elementwise import ELEMENTWISE, elementwise_types
from tunefuse.ir.fusion import (
    Extent,
    Fusion,
    Node,
    OutputSpec,
    ScalarType,
    Sym,
    TensorType,
    ValueType,
)
from tunefuse.ir.ops import (
    BroadcastAttrs,
    BroadcastInDimAttrs,
    CastAttrs,
    ConstantAttrs,
    Dim,
    DimAttrs,
    DimsAttrs,
    FullAttrs,
    GroupOp,
    OpKind,
    PadAttrs,
    PermuteAttrs,
    ReductionAttrs,
    ScalarRef,
    ShapeAttrs,
    SliceAttrs,
    TensorInputAttrs,
    attrs_class,
)
from tunefuse.ir.shapes import (
    analyze_reshape,
    broadcast_extents,
    normalize_dim,
    normalize_dims,
    resolve_reshape_sizes,
)


@dataclass(frozen=True)
class InferContext:
    """What a rule sees: the node's description for errors, its operands, and how to read
    a shape entry (an int, or a scalar operand's symbolic value)."""

    op: OpKind
    attrs: object
    inputs: tuple[int, ...]
    types: tuple[ValueType, ...]
    scalar_extents: tuple[Extent | None, ...]
    first_output: int

    @property
    def where(self) -> str:
        return f"{self.op.value} (defining {self.out_name(0)})"

    def out_name(self, k: int) -> str:
        return f"value {self.first_output + k}"

    def name(self, k: int) -> str:
        vt = self.types[k]
        return ("T" if isinstance(vt, TensorType) else "S") + str(self.inputs[k])

    def tensor(self, k: int) -> TensorType:
        vt = self.types[k]
        if not isinstance(vt, TensorType):
            raise DefinitionError(f"{self.where}: operand {k} ({self.name(k)}) must be a tensor")
        return vt

    def scalar(self, k: int, *, integral: bool = False) -> ScalarType:
        vt = self.types[k]
        if not isinstance(vt, ScalarType):
            raise DefinitionError(f"{self.where}: operand {k} ({self.name(k)}) must be a scalar")
        if integral and not vt.dtype.is_integral:
            raise DefinitionError(
                f"{self.where}: operand {k} ({self.name(k)}) must be an integer scalar, "
                f"got {vt.dtype.value}"
            )
        return vt

    def arity(self, *counts: int) -> None:
        if len(self.types) not in counts:
            want = " or ".join(str(c) for c in counts)
            raise DefinitionError(f"{self.where}: takes {want} operands, got {len(self.types)}")

    def dim_extent(self, entry: Dim, position: int) -> Extent:
        """The extent a shape entry stands for: an int as is, a ScalarRef its scalar's value."""
        if isinstance(entry, ScalarRef):
            if not 0 <= entry.index < len(self.types):
                raise DefinitionError(
                    f"{self.where}: shape entry {position} refers to a missing operand"
                )
            self.scalar(entry.index, integral=True)
            value = self.scalar_extents[entry.index]
            assert value is not None
            return value
        if not isinstance(entry, int) or isinstance(entry, bool):
            raise DefinitionError(
                f"{self.where}: shape entry {position} must be an int, got {entry!r}"
            )
        return entry

    def normalized_dims(self, dims: tuple[int, ...], rank: int) -> tuple[int, ...]:
        """`dims` checked in range and already normalized (sorted, non-negative, unique),
        as the frontend stores them; JSON that differs is refused, not silently fixed."""
        norm = normalize_dims(self.where, dims, rank)
        if norm != tuple(dims):
            raise DefinitionError(
                f"{self.where}: dims {list(dims)} are not normalized ({list(norm)})"
            )
        return norm

    def normalized_dim(self, dim: int, rank: int, *, insert: bool = False) -> int:
        norm = normalize_dim(self.where, dim, rank, insert=insert)
        if norm != dim:
            raise DefinitionError(f"{self.where}: dim {dim} is not normalized ({norm})")
        return norm

    def shape_extents(self, shape: Sequence[Dim], *, allow_minus_one: bool) -> tuple[Extent, ...]:
        out = []
        for i, entry in enumerate(shape):
            e = self.dim_extent(entry, i)
            if isinstance(e, int) and (e < -1 or (e == -1 and not allow_minus_one)):
                raise ShapeError(f"{self.where}: dim {i} of the shape is {e}")
            out.append(e)
        return tuple(out)


Rule = Callable[[InferContext], list[ValueType]]

MAX_RANK = 16  # tensors of more dims are refused by name (PyTorch's own kernels stop at 25)
INT64_MAX = 2**63 - 1


def _check_extents(op: OpKind, shape: tuple[Extent, ...]) -> None:
    """Every tensor a fusion defines: at most MAX_RANK dims, each extent an int64 (from a
    definition or from JSON, where nothing else bounds them)."""
    if len(shape) > MAX_RANK:
        raise ShapeError(
            f"{op.value}: rank {len(shape)} is more than tunefuse's limit of {MAX_RANK} dims"
        )
    for d, e in enumerate(shape):
        if isinstance(e, int) and not -1 <= e <= INT64_MAX:
            raise ShapeError(f"{op.value}: dim {d} has extent {e}, beyond int64")


def _define_tensor(ctx: InferContext) -> list[ValueType]:
    a: TensorInputAttrs = ctx.attrs  # type: ignore[assignment]
    ctx.arity(0)
    rank = len(a.shape)
    for d, s in enumerate(a.shape):
        if not isinstance(s, int) or isinstance(s, bool) or s < -1:
            raise ShapeError(f"define_tensor: dim {d} has size {s!r}; use -1 (symbolic) or >= 0")
    if len(a.contiguity) != rank:
        raise DefinitionError(
            f"define_tensor: contiguity has {len(a.contiguity)} entries for rank {rank}"
        )
    for d, c in enumerate(a.contiguity):
        # None: a broadcast dim, of size 1 or (nvFuser's expanded broadcast) of any size with
        # stride 0, which binding checks.
        if c is not None and not isinstance(c, bool):
            raise DefinitionError(f"define_tensor: contiguity of dim {d} must be bool or None")
    if a.stride_order is not None and sorted(a.stride_order) != list(range(rank)):
        raise DefinitionError(
            f"define_tensor: stride_order {list(a.stride_order)} is not a permutation of 0..{rank - 1}"
        )
    shape = tuple(Sym(f"T{ctx.first_output}.{d}") if s == -1 else s for d, s in enumerate(a.shape))
    return [TensorType(a.dtype, shape)]


def _define_scalar(ctx: InferContext) -> list[ValueType]:
    ctx.arity(0)
    return [ScalarType(ctx.attrs.dtype)]  # type: ignore[attr-defined]


def _constant(ctx: InferContext) -> list[ValueType]:
    a: ConstantAttrs = ctx.attrs  # type: ignore[assignment]
    ctx.arity(0)
    ok = (
        (a.dtype.is_bool and isinstance(a.value, bool))
        or (a.dtype.is_integral and isinstance(a.value, int) and not isinstance(a.value, bool))
        or (a.dtype.is_floating and isinstance(a.value, float))
    )
    if not ok:
        raise DefinitionError(f"constant: value {a.value!r} does not fit dtype {a.dtype.value}")
    return [ScalarType(a.dtype)]


def _elementwise(ctx: InferContext) -> list[ValueType]:
    rule = ELEMENTWISE[ctx.op]
    ctx.arity(rule.arity)
    if ctx.op is OpKind.ADDCMUL:
        ctx.scalar(3)
    tensor_dtypes = [t.dtype if isinstance(t, TensorType) else None for t in ctx.types]
    scalar_dtypes = [t.dtype if isinstance(t, ScalarType) else None for t in ctx.types]
    types = elementwise_types(ctx.op, tensor_dtypes, scalar_dtypes)
    if ctx.op is OpKind.WHERE and ctx.types[0].dtype is not DataType.Bool:
        raise DefinitionError(
            f"{ctx.where}: the condition {ctx.name(0)} must be Bool, got {ctx.types[0].dtype.value}"
        )
    tensors = [k for k, t in enumerate(ctx.types) if isinstance(t, TensorType)]
    if not tensors:
        return [ScalarType(types.result)]
    shape = broadcast_extents(
        ctx.where, [ctx.tensor(k).shape for k in tensors], [ctx.name(k) for k in tensors]
    )
    return [TensorType(types.result, shape)]


def _cast(ctx: InferContext) -> list[ValueType]:
    ctx.arity(1)
    a: CastAttrs = ctx.attrs  # type: ignore[assignment]
    vt = ctx.types[0]
    if isinstance(vt, TensorType):
        return [TensorType(a.dtype, vt.shape)]
    if a.dtype.is_float8 or vt.dtype.is_float8:  # type: ignore[union-attr]
        refuse_float8(a.dtype if a.dtype.is_float8 else vt.dtype, f"{ctx.where}: a scalar")  # type: ignore[union-attr]
    return [ScalarType(a.dtype)]


def reduction_result_dtype(op: OpKind, dtype: DataType, where: str) -> DataType:
    if dtype.is_float8:
        refuse_float8(dtype, f"{where} reduces it")
    if op in (OpKind.SUM, OpKind.PROD):
        return DataType.Int if not dtype.is_floating else dtype
    if op in (OpKind.MEAN, OpKind.VAR, OpKind.VAR_MEAN) and not dtype.is_floating:
        raise DefinitionError(
            f"{where}: needs a floating-point input, got {dtype.value}; cast it first"
        )
    return dtype


def _reduction(ctx: InferContext) -> list[ValueType]:
    ctx.arity(1)
    a: ReductionAttrs = ctx.attrs  # type: ignore[assignment]
    t = ctx.tensor(0)
    dims = ctx.normalized_dims(a.dims, t.rank)
    if not dims:
        raise DefinitionError(f"{ctx.where}: reduces no dim")
    if a.correction < 0:
        raise DefinitionError(f"{ctx.where}: correction must be >= 0, got {a.correction}")
    dtype = a.dtype or reduction_result_dtype(ctx.op, t.dtype, ctx.where)
    shape = tuple((1 if a.keepdim else None) if d in dims else e for d, e in enumerate(t.shape))
    out = TensorType(dtype, tuple(e for e in shape if e is not None))
    return [out, out] if ctx.op is OpKind.VAR_MEAN else [out]


def _check_extent_fits(
    ctx: InferContext, source: Extent, target: Extent, in_dim: int, out_dim: int
) -> None:
    if isinstance(source, int) and isinstance(target, int) and source not in (1, target):
        raise ShapeError(
            f"{ctx.where}: dim {in_dim} of {ctx.name(0)} has extent {source}, which cannot "
            f"broadcast to extent {target} at output dim {out_dim}"
        )


def _broadcast_in_dim(ctx: InferContext) -> list[ValueType]:
    a: BroadcastInDimAttrs = ctx.attrs  # type: ignore[assignment]
    t = ctx.tensor(0)
    shape = ctx.shape_extents(a.shape, allow_minus_one=False)
    if len(a.broadcast_dims) != t.rank:
        raise ShapeError(
            f"{ctx.where}: broadcast_dims has {len(a.broadcast_dims)} entries for input rank {t.rank}"
        )
    dims = [normalize_dim(ctx.where, d, len(shape), what="broadcast dim") for d in a.broadcast_dims]
    if list(a.broadcast_dims) != dims or any(x >= y for x, y in zip(dims, dims[1:])):
        raise ShapeError(
            f"{ctx.where}: broadcast_dims {list(a.broadcast_dims)} must be increasing and non-negative"
        )
    for in_dim, out_dim in enumerate(dims):
        _check_extent_fits(ctx, t.shape[in_dim], shape[out_dim], in_dim, out_dim)
    # A symbolic output extent taken from the input keeps the input's symbol.
    return [TensorType(t.dtype, shape)]


def _broadcast(ctx: InferContext) -> list[ValueType]:
    ctx.arity(1)
    a: BroadcastAttrs = ctx.attrs  # type: ignore[assignment]
    t = ctx.tensor(0)
    kept = [i for i, b in enumerate(a.is_broadcast_dim) if not b]
    if len(kept) != t.rank:
        raise ShapeError(
            f"{ctx.where}: is_broadcast_dim keeps {len(kept)} dims but {ctx.name(0)} has rank {t.rank}"
        )
    source = iter(t.shape)
    return [TensorType(t.dtype, tuple(1 if b else next(source) for b in a.is_broadcast_dim))]


def _expand(ctx: InferContext) -> list[ValueType]:
    a: ShapeAttrs = ctx.attrs  # type: ignore[assignment]
    t = ctx.tensor(0)
    shape = ctx.shape_extents(a.shape, allow_minus_one=True)
    if len(shape) != t.rank:
        raise ShapeError(
            f"{ctx.where}: shape has {len(shape)} dims but {ctx.name(0)} has rank {t.rank}"
        )
    out = []
    for d, (src, dst) in enumerate(zip(t.shape, shape)):
        if dst == -1:
            out.append(src)
            continue
        _check_extent_fits(ctx, src, dst, d, d)
        out.append(dst)
    return [TensorType(t.dtype, tuple(out))]


def _reshape(ctx: InferContext) -> list[ValueType]:
    a: ShapeAttrs = ctx.attrs  # type: ignore[assignment]
    t = ctx.tensor(0)
    new_shape = ctx.shape_extents(a.shape, allow_minus_one=True)
    shape = resolve_reshape_sizes(ctx.where, t.shape, new_shape, unknown=f"T{ctx.first_output}")
    if all(isinstance(e, int) for e in t.shape) and all(isinstance(e, int) for e in shape):
        analyze_reshape(t.shape, shape)  # type: ignore[arg-type]  # static: decompose now
    return [TensorType(t.dtype, shape)]


def _permute(ctx: InferContext) -> list[ValueType]:
    ctx.arity(1)
    a: PermuteAttrs = ctx.attrs  # type: ignore[assignment]
    t = ctx.tensor(0)
    if sorted(a.dims) != list(range(t.rank)):
        raise ShapeError(
            f"{ctx.where}: dims {list(a.dims)} are not a permutation of 0..{t.rank - 1} "
            f"(rank of {ctx.name(0)})"
        )
    return [TensorType(t.dtype, tuple(t.shape[d] for d in a.dims))]


def _squeeze(ctx: InferContext) -> list[ValueType]:
    ctx.arity(1)
    a: DimsAttrs = ctx.attrs  # type: ignore[assignment]
    t = ctx.tensor(0)
    dims = ctx.normalized_dims(a.dims, t.rank)
    for d in dims:
        e = t.shape[d]
        if isinstance(e, int) and e != 1:
            raise ShapeError(
                f"{ctx.where}: cannot squeeze dim {d} of {ctx.name(0)}: its extent is {e}"
            )
    return [TensorType(t.dtype, tuple(e for d, e in enumerate(t.shape) if d not in dims))]


def _unsqueeze(ctx: InferContext) -> list[ValueType]:
    ctx.arity(1)
    a: DimAttrs = ctx.attrs  # type: ignore[assignment]
    t = ctx.tensor(0)
    dim = ctx.normalized_dim(a.dim, t.rank, insert=True)
    return [TensorType(t.dtype, t.shape[:dim] + (1,) + t.shape[dim:])]


def slice_extent(start: int, stop: Extent, step: int, extent: Extent) -> Extent:
    if isinstance(extent, Sym) or isinstance(stop, Sym):
        return Sym(f"slice({extent},{start},{stop},{step})")
    stop = min(stop, extent)
    start = min(start, stop)
    return -(-(stop - start) // step)


def _slice(ctx: InferContext) -> list[ValueType]:
    ctx.arity(1)
    a: SliceAttrs = ctx.attrs  # type: ignore[assignment]
    t = ctx.tensor(0)
    if not len(a.start_indices) == len(a.end_indices) == len(a.strides) == t.rank:
        raise ShapeError(
            f"{ctx.where}: start_indices, end_indices and strides need {t.rank} entries each "
            f"(rank of {ctx.name(0)})"
        )
    out = []
    for d, (start, stop, step) in enumerate(zip(a.start_indices, a.end_indices, a.strides)):
        if step < 1:
            raise ShapeError(f"{ctx.where}: stride of dim {d} must be >= 1, got {step}")
        if start < 0 or stop < start:
            raise ShapeError(f"{ctx.where}: dim {d} needs 0 <= start <= end, got [{start}, {stop})")
        out.append(slice_extent(start, stop, step, t.shape[d]))
    return [TensorType(t.dtype, tuple(out))]


def _pad(ctx: InferContext) -> list[ValueType]:
    ctx.arity(2)
    a: PadAttrs = ctx.attrs  # type: ignore[assignment]
    t = ctx.tensor(0)
    ctx.scalar(1)
    widths = a.pad_widths
    if len(widths) % 2 or len(widths) > 2 * t.rank:
        raise ShapeError(
            f"{ctx.where}: pad_widths needs an even number of entries, at most {2 * t.rank}; got {len(widths)}"
        )
    shape = list(t.shape)
    for k in range(len(widths) // 2):
        d = t.rank - 1 - k
        left, right = widths[2 * k], widths[2 * k + 1]
        e = shape[d]
        if isinstance(e, int):
            if e + left + right < 0:
                raise ShapeError(
                    f"{ctx.where}: padding dim {d} by ({left}, {right}) leaves a negative extent"
                )
            shape[d] = e + left + right
        else:
            shape[d] = Sym(f"pad({e},{left},{right})") if left or right else e
    return [TensorType(t.dtype, tuple(shape))]


def _cat(ctx: InferContext) -> list[ValueType]:
    a: DimAttrs = ctx.attrs  # type: ignore[assignment]
    if not ctx.types:
        raise DefinitionError(f"{ctx.where}: needs at least one tensor")
    tensors = [ctx.tensor(k) for k in range(len(ctx.types))]
    rank = tensors[0].rank
    dim = ctx.normalized_dim(a.dim, rank)
    for k, t in enumerate(tensors):
        if t.rank != rank:
            raise ShapeError(
                f"{ctx.where}: operand {ctx.name(k)} has rank {t.rank}, expected {rank}"
            )
        for d in range(rank):
            e0, e = tensors[0].shape[d], t.shape[d]
            if d != dim and isinstance(e0, int) and isinstance(e, int) and e0 != e:
                raise ShapeError(
                    f"{ctx.where}: dim {d} of {ctx.name(k)} has extent {e}, {ctx.name(0)} has {e0}"
                )
    extents = [t.shape[dim] for t in tensors]
    total: Extent = (
        sum(extents)
        if all(isinstance(e, int) for e in extents)
        else Sym(f"T{ctx.first_output}.{dim}")
    )  # type: ignore[assignment]
    dtype = promote_types([t.dtype for t in tensors])
    return [TensorType(dtype, tensors[0].shape[:dim] + (total,) + tensors[0].shape[dim + 1 :])]


def _index_operand(ctx: InferContext) -> TensorType:
    index = ctx.tensor(1)
    if not index.dtype.is_integral or index.dtype.is_bool:
        raise DefinitionError(
            f"{ctx.where}: the index {ctx.name(1)} must be an integer tensor, got {index.dtype.value}"
        )
    return index


def _index_select(ctx: InferContext) -> list[ValueType]:
    """numpy's `take` along `dim`: the index's dims replace the table's dim `dim` (a 1-D
    index is torch's index_select; an N-d one an embedding lookup)."""
    ctx.arity(2)
    t = ctx.tensor(0)
    index = _index_operand(ctx)
    dim = ctx.normalized_dim(ctx.attrs.dim, t.rank)  # type: ignore[attr-defined]
    return [TensorType(t.dtype, t.shape[:dim] + index.shape + t.shape[dim + 1 :])]


def _gather(ctx: InferContext) -> list[ValueType]:
    """torch.gather: out[p] = table[p with p[dim] = index[p]]; the output has the index's
    shape, which may not exceed the table's along the other dims."""
    ctx.arity(2)
    t = ctx.tensor(0)
    index = _index_operand(ctx)
    dim = ctx.normalized_dim(ctx.attrs.dim, t.rank)  # type: ignore[attr-defined]
    if index.rank != t.rank:
        raise ShapeError(
            f"{ctx.where}: the index {ctx.name(1)} has rank {index.rank}, the table "
            f"{ctx.name(0)} rank {t.rank}: they must be equal"
        )
    for d, (e_index, e_table) in enumerate(zip(index.shape, t.shape)):
        if d != dim and isinstance(e_index, int) and isinstance(e_table, int) and e_index > e_table:
            raise ShapeError(
                f"{ctx.where}: dim {d} of the index {ctx.name(1)} has extent {e_index}, "
                f"more than the table {ctx.name(0)}'s {e_table}"
            )
    return [TensorType(t.dtype, index.shape)]


def _identity(ctx: InferContext) -> list[ValueType]:
    ctx.arity(1)
    return [ctx.tensor(0)]


def _full(ctx: InferContext) -> list[ValueType]:
    a: FullAttrs = ctx.attrs  # type: ignore[assignment]
    shape = ctx.shape_extents(a.shape, allow_minus_one=False)
    fill = [
        k
        for k in range(len(ctx.types))
        if not any(isinstance(e, ScalarRef) and e.index == k for e in a.shape)
    ]
    if len(fill) != 1:
        raise DefinitionError(f"{ctx.where}: needs exactly one fill value operand")
    ctx.scalar(fill[0])
    return [TensorType(a.dtype, shape)]


def _iota(ctx: InferContext) -> list[ValueType]:
    ctx.arity(3)
    length = ctx.scalar_extents[0]
    ctx.scalar(0, integral=True)
    ctx.scalar(1)
    ctx.scalar(2)
    dtype = ctx.attrs.dtype  # type: ignore[attr-defined]
    if dtype.is_float8:
        refuse_float8(dtype, f"{ctx.where} counts in it")
    if isinstance(length, int) and length < 0:
        raise ShapeError(f"{ctx.where}: length must be >= 0, got {length}")
    return [TensorType(dtype, (length,))]  # type: ignore[arg-type]


def _random(ctx: InferContext) -> list[ValueType]:
    """uniform/normal: (a, b, seed, offset, *shape scalars) -> a floating tensor."""
    a: FullAttrs = ctx.attrs  # type: ignore[assignment]
    if len(ctx.types) < 4:
        raise DefinitionError(
            f"{ctx.where}: needs two parameters, a seed and an offset"
        )  # pragma: no cover
    if not a.dtype.is_floating:
        raise DefinitionError(
            f"{ctx.where}: draws floating values; dtype {a.dtype.value} is not floating"
        )
    if a.dtype.is_float8:
        refuse_float8(a.dtype, f"{ctx.where} draws in it")
    for k in (0, 1):
        if ctx.scalar(k).dtype.is_bool:
            raise DefinitionError(
                f"{ctx.where}: operand {k} ({ctx.name(k)}) must be a number, got bool"
            )
    ctx.scalar(2, integral=True)
    ctx.scalar(3, integral=True)
    return [TensorType(a.dtype, ctx.shape_extents(a.shape, allow_minus_one=False))]


def _rng_state(ctx: InferContext) -> list[ValueType]:
    ctx.arity(0)
    return [ScalarType(DataType.Int), ScalarType(DataType.Int)]


def _size(ctx: InferContext) -> list[ValueType]:
    ctx.arity(1)
    t = ctx.tensor(0)
    ctx.normalized_dim(ctx.attrs.dim, t.rank)  # type: ignore[attr-defined]
    return [ScalarType(DataType.Int)]


RULES: dict[OpKind, Rule] = {
    OpKind.DEFINE_TENSOR: _define_tensor,
    OpKind.DEFINE_SCALAR: _define_scalar,
    OpKind.CONSTANT: _constant,
    **{k: _elementwise for k in ELEMENTWISE},
    OpKind.CAST: _cast,
    **{k: _reduction for k in GroupOp.REDUCTION},
    OpKind.BROADCAST_IN_DIM: _broadcast_in_dim,
    OpKind.BROADCAST: _broadcast,
    OpKind.EXPAND: _expand,
    OpKind.RESHAPE: _reshape,
    OpKind.PERMUTE: _permute,
    OpKind.SQUEEZE: _squeeze,
    OpKind.UNSQUEEZE: _unsqueeze,
    OpKind.SLICE: _slice,
    OpKind.PAD: _pad,
    OpKind.CAT: _cat,
    OpKind.INDEX_SELECT: _index_select,
    OpKind.GATHER: _gather,
    OpKind.SET: _identity,
    OpKind.SEGMENT_SET: _identity,
    OpKind.FULL: _full,
    OpKind.IOTA: _iota,
    OpKind.UNIFORM: _random,
    OpKind.NORMAL: _random,
    OpKind.RNG_STATE: _rng_state,
    OpKind.SIZE: _size,
}
assert set(RULES) == set(OpKind), f"ops without a rule: {set(OpKind) - set(RULES)}"


class FusionBuilder:
    """Appends nodes one at a time, each checked by its rule; `finish()` freezes a Fusion."""

    def __init__(self) -> None:
        self.values: list[ValueType] = []
        self.nodes: list[Node] = []
        self.outputs: list[OutputSpec] = []
        self._producers: dict[int, Node] = {}
        # The symbolic value of each integer scalar: its constant, a tensor extent, or a Sym.
        self.scalar_extents: dict[int, Extent] = {}

    def add(self, op: OpKind, inputs: Sequence[int], attrs: object) -> tuple[int, ...]:
        if not isinstance(attrs, attrs_class(op)):
            raise DefinitionError(
                f"{op.value}: attrs must be {attrs_class(op).__name__}, got {type(attrs).__name__}"
            )
        for k, v in enumerate(inputs):
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < len(self.values):
                raise DefinitionError(f"{op.value}: operand {k} refers to an undefined value {v!r}")
        ctx = InferContext(
            op=op,
            attrs=attrs,
            inputs=tuple(inputs),
            types=tuple(self.values[v] for v in inputs),
            scalar_extents=tuple(self.scalar_extents.get(v) for v in inputs),
            first_output=len(self.values),
        )
        out_types = RULES[op](ctx)
        for vt in out_types:
            if isinstance(vt, TensorType):
                _check_extents(op, vt.shape)
        outputs = tuple(range(len(self.values), len(self.values) + len(out_types)))
        self.values.extend(out_types)
        node = Node(op, tuple(inputs), attrs, outputs)  # type: ignore[arg-type]
        self.nodes.append(node)
        self._producers.update(dict.fromkeys(outputs, node))
        for v, vt in zip(outputs, out_types):
            if isinstance(vt, ScalarType) and vt.dtype.is_integral:
                self.scalar_extents[v] = self._scalar_extent(op, attrs, ctx, v)
        return outputs

    def producer(self, value: int) -> Node:
        """The node that defined `value`."""
        return self._producers[value]

    @staticmethod
    def _scalar_extent(op: OpKind, attrs: object, ctx: InferContext, value: int) -> Extent:
        if op is OpKind.CONSTANT:
            return int(attrs.value)  # type: ignore[attr-defined]
        if op is OpKind.SIZE:
            return ctx.tensor(0).shape[attrs.dim]  # type: ignore[attr-defined]
        if op is OpKind.CAST and ctx.scalar_extents[0] is not None:
            return ctx.scalar_extents[0]
        return Sym(f"S{value}")

    def add_output(
        self,
        value: int,
        alias_input: int | None = None,
        stride_order: tuple[int, ...] | None = None,
    ) -> None:
        if not isinstance(value, int) or not 0 <= value < len(self.values):
            raise DefinitionError(f"add_output: {value!r} is not a value of this fusion")
        vt = self.values[value]
        if not isinstance(vt, TensorType):
            raise DefinitionError(f"add_output: S{value} is a scalar; outputs must be tensors")
        if alias_input is not None:
            producers = {n.outputs[0]: n for n in self.nodes if n.op is OpKind.DEFINE_TENSOR}
            if alias_input not in producers:
                raise DefinitionError(
                    f"add_output: alias_input {alias_input!r} is not a tensor input of this fusion"
                )
            target = self.values[alias_input]
            assert isinstance(target, TensorType)
            if target.dtype is not vt.dtype or target.rank != vt.rank:
                raise DefinitionError(
                    f"add_output: T{value} ({vt.dtype.value}, rank {vt.rank}) cannot be written in "
                    f"place into T{alias_input} ({target.dtype.value}, rank {target.rank})"
                )
            for d, (a, b) in enumerate(zip(vt.shape, target.shape)):
                if isinstance(a, int) and isinstance(b, int) and a != b:
                    raise ShapeError(
                        f"add_output: dim {d} of T{value} has extent {a} but alias_input "
                        f"T{alias_input} has {b}"
                    )
            if any(o.alias_input == alias_input for o in self.outputs):
                raise DefinitionError(f"add_output: T{alias_input} is already written in place")
        if stride_order is not None:
            stride_order = tuple(stride_order)
            if alias_input is not None:
                raise DefinitionError(
                    "add_output: an output written in place has its input's layout; "
                    "stride_order cannot change it"
                )
            if sorted(stride_order) != list(range(vt.rank)) or any(
                type(o) is not int for o in stride_order
            ):
                raise DefinitionError(
                    f"add_output: stride_order {list(stride_order)} of T{value} is not a "
                    f"permutation of 0..{vt.rank - 1}"
                )
            if stride_order == tuple(range(vt.rank - 1, -1, -1)):
                stride_order = None  # row-major: the default, spelled one way
        self.outputs.append(OutputSpec(value, alias_input, stride_order))

    def finish(self) -> Fusion:
        if not self.outputs:
            raise DefinitionError("a fusion needs at least one output (fd.add_output)")
        return Fusion(tuple(self.nodes), tuple(self.values), tuple(self.outputs))
