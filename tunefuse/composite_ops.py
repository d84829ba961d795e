"""nvFuser's ops that are other ops put together: `fd.ops` has them through `Ops(CompositeOps)`.

Each is exactly the ops it is written with, so every stage (inference, the reference, codegen,
the printer, JSON) already knows it, and the printed definition shows its parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tunefuse.errors import DefinitionError, NotBuiltError
from tunefuse.ir.dtypes import DataType, promote_types
from tunefuse.ir.fusion import TensorType
from tunefuse.ir.shapes import normalize_dim, normalize_dims

if TYPE_CHECKING:
    from tunefuse.frontend import Operand, Tensor, Value, Vector


# nvFuser ops tunefuse declines: asking for one names the refusal (never a bare AttributeError).
NOT_BUILT = {
    "index_put_accumulate": "data-dependent writes are not built",
    "sdpfa_fwd": "attention is not built: tunefuse generates memory-bound kernels",
    "sdpfa_bwd": "attention is not built: tunefuse generates memory-bound kernels",
    "real": "complex numbers are not built",
    "imag": "complex numbers are not built",
    "view_as_real": "complex numbers are not built",
    "argsort": "sorting is not built",
    "topk": "sorting is not built",
}


class CompositeOps:
    """Mixed into `Ops`; uses its primitive ops through `self`."""

    def __getattr__(self, name: str) -> Any:
        if name in NOT_BUILT:
            raise NotBuiltError(f"fd.ops.{name} is not supported by tunefuse: {NOT_BUILT[name]}")
        raise AttributeError(f"fd.ops has no op {name!r}")

    _fd: Any

    def _tensor(self, value: Value, op: str) -> int: ...  # provided by Ops
    def _rank(self, vid: int) -> int: ...  # provided by Ops

    def _as_tensor(self, vid: int) -> Tensor:
        return self._fd._wrap(vid)

    def embedding_fwd(
        self,
        input: Value,
        weight: Value,
        padding_idx: Operand | None = None,  # noqa: A002
        max_norm: Operand | None = None,
        norm_type: Operand | None = None,
        scale_grad_by_freq: Operand | None = None,
        sparse: Operand | None = None,
    ) -> Tensor:
        """torch.nn.functional.embedding's forward: rows of `weight` picked by `input`.
        With `max_norm`, a row whose `norm_type`-norm (default 2) exceeds it is scaled to
        max_norm / (norm + 1e-7), as torch renormalizes it; `weight` itself is not written
        (torch renormalizes it in place). `padding_idx`, `scale_grad_by_freq` and `sparse`
        only change the backward: accepted, and they do not change the result."""
        for name, operand in (
            ("padding_idx", padding_idx),
            ("scale_grad_by_freq", scale_grad_by_freq),
            ("sparse", sparse),
        ):
            if operand is not None:
                self._fd._value_id(operand, f"embedding_fwd {name}")
        w = self._tensor(weight, "embedding_fwd")
        if self._rank(w) != 2:
            raise DefinitionError(
                f"embedding_fwd: weight T{w} must have rank 2 (rows x embedding dim), "
                f"got rank {self._rank(w)}"
            )
        rows = self.index_select(weight, input, 0)
        if max_norm is None:
            return rows
        dtype = self._fd._builder.values[w].dtype
        wide = (
            rows if dtype in (DataType.Float, DataType.Double) else self.cast(rows, DataType.Float)
        )
        p = norm_type if norm_type is not None else 2.0
        inverse_p = 1.0 / float(p) if isinstance(p, (int, float)) else self.reciprocal(p)
        norm = self.pow(self.sum(self.pow(self.abs(wide), p), [-1], keepdim=True), inverse_p)
        scale = self.where(self.gt(norm, max_norm), self.div(max_norm, self.add(norm, 1e-7)), 1.0)
        scaled = self.mul(wide, scale)
        return scaled if wide is rows else self.cast(scaled, dtype)  # type: ignore[return-value]

    # Scans (torch.cumsum and its kin) as a reduction of each prefix: out[i] = op over j <= i
    # of x[j], the elements after i replaced by op's identity. Exact, and fused like any
    # reduction, but quadratic in the scanned extent: a scan scheduler is the next step.
    def cumsum(self, arg: Value, dim: int) -> Tensor:
        """torch.cumsum: integers and bools are summed in int64."""
        return self._scan("cumsum", arg, dim)

    def cumprod(self, arg: Value, dim: int) -> Tensor:
        """torch.cumprod: integers and bools are multiplied in int64."""
        return self._scan("cumprod", arg, dim)

    def cummax(self, arg: Value, dim: int) -> Tensor:
        """torch.cummax's values (a NaN carries on, as in torch)."""
        return self._scan("cummax", arg, dim)

    def cummin(self, arg: Value, dim: int) -> Tensor:
        """torch.cummin's values."""
        return self._scan("cummin", arg, dim)

    def _scan(self, name: str, arg: Value, dim: int) -> Tensor:
        vid = self._tensor(arg, name)
        rank = self._rank(vid)
        d = normalize_dim(name, dim, rank)
        dtype = self._fd._builder.values[vid].dtype
        x = self._as_tensor(vid)
        if name in ("cumsum", "cumprod") and not dtype.is_floating:
            x, dtype = self.cast(x, DataType.Int), DataType.Int
        shape = list(x.shape())
        n = shape[d]
        # [..., i, j, ...]: x's dim d becomes j; i, the output's position, is new.
        grid = shape[:d] + [n, n] + shape[d + 1 :]
        spread = self.broadcast_in_dim(x, grid, [k if k < d else k + 1 for k in range(rank)])
        i = self.broadcast_in_dim(self.iota(n, 0, 1, DataType.Int), grid, [d])
        j = self.broadcast_in_dim(self.iota(n, 0, 1, DataType.Int), grid, [d + 1])
        identity = self._fd._constant(_scan_identity(name, dtype), dtype)
        prefix = self.where(self.le(j, i), spread, identity)
        reduce = {"cumsum": self.sum, "cumprod": self.prod, "cummax": self.max, "cummin": self.min}[
            name
        ]
        return reduce(prefix, [d + 1])

    def rand_like(
        self, arg: Value, rng_seed: Operand | None = None, rng_offset: Operand | None = None
    ) -> Tensor:
        """uniform(0, 1) of `arg`'s shape and dtype (nvFuser's rand_like)."""
        return self._like("rand_like", self.uniform, arg, rng_seed, rng_offset)

    def randn_like(
        self, arg: Value, rng_seed: Operand | None = None, rng_offset: Operand | None = None
    ) -> Tensor:
        """normal(0, 1) of `arg`'s shape and dtype (nvFuser's randn_like)."""
        return self._like("randn_like", self.normal, arg, rng_seed, rng_offset)

    def _like(
        self, name: str, draw: Any, arg: Value, seed: Operand | None, offset: Operand | None
    ) -> Tensor:
        vid = self._tensor(arg, name)
        dtype = self._fd._builder.values[vid].dtype
        if not dtype.is_floating:
            raise DefinitionError(f"{name}: draws floating values; {arg!r} is {dtype.value}")
        shape = self._as_tensor(vid).shape()
        return draw(0.0, 1.0, shape, dtype=dtype, rng_seed=seed, rng_offset=offset)

    def triu(self, arg: Value, diagonal: Operand = 0) -> Tensor:
        """torch.triu: the elements of the last two dims on and above the `diagonal`-th
        diagonal (0 the main one, > 0 above it, < 0 below it); the others zero."""
        vid = self._tensor(arg, "triu")
        rank = self._rank(vid)
        if rank < 2:
            raise DefinitionError(f"triu: needs a tensor of rank 2 or more, got rank {rank}")
        shape = self._as_tensor(vid).shape()
        rows = self.broadcast_in_dim(self.iota(shape[-2], 0, 1, DataType.Int), shape, [rank - 2])
        cols = self.broadcast_in_dim(self.iota(shape[-1], 0, 1, DataType.Int), shape, [rank - 1])
        keep = self.ge(self.sub(cols, rows), diagonal)
        dtype = self._fd._builder.values[vid].dtype
        return self.where(keep, arg, self._fd._constant(False if dtype.is_bool else 0, dtype))

    def select(self, arg: Value, index: Operand, dim: int) -> Tensor:
        """torch.select: the slice at `index` along `dim`, that dim removed; a negative index
        counts from the end (a constant one at definition where the extent is static, else
        when the fusion runs). An index outside the dim is an IndexOutOfRangeError when the
        fusion runs, as index_select's."""
        vid = self._tensor(arg, "select")
        d = normalize_dim("select", dim, self._rank(vid))
        extent = self._fd._builder.values[vid].shape[d]
        if isinstance(index, int) and index < 0 and isinstance(extent, int):
            index += extent
        position = self.full([1], index, DataType.Int)
        if not (isinstance(index, int) and index >= 0):
            size = self._as_tensor(vid).size(d)
            position = self.where(self.lt(position, 0), self.add(position, size), position)
        return self.squeeze(self.index_select(arg, position, d), [d])

    def scatter(self, arg: Value, index: Value, src: Operand, dim: int) -> Tensor:
        """torch.scatter (nvFuser's scatter): `arg` with out[p] = src[q] where q runs over
        `index`'s positions and p is q with p[dim] = index[q]; `src` a tensor (extents at
        least the index's) or a scalar. Where several q name one p, the last along `dim` wins
        (torch leaves it unspecified; this is its CPU's order, and the reference's). An index
        outside [0, arg.size(dim)) is an IndexOutOfRangeError. The index must span `arg`
        along the other dims (torch allows fewer: refused by the where's shape rule).

        Built without data-dependent writes, so no kernel can store out of bounds: each
        output element looks for the last index naming it (a max over index.size(dim)
        candidates: exact, but the work is arg.size(dim) x index.numel(), as the scans'),
        then gathers src there."""
        vid, ix = self._tensor(arg, "scatter"), self._tensor(index, "scatter")
        rank = self._rank(vid)
        d = normalize_dim("scatter", dim, rank)
        if self._rank(ix) != rank:
            raise DefinitionError(
                f"scatter: the index T{ix} has rank {self._rank(ix)}, {arg!r} rank {rank}: "
                "they must be equal"
            )
        dtype = self._fd._builder.values[vid].dtype
        sid = self._fd._value_id(src, "scatter")
        src_tensor = isinstance(self._fd._builder.values[sid], TensorType)
        if src_tensor:
            src_dtype = self._fd._builder.values[sid].dtype
            if src_dtype is not dtype:
                raise DefinitionError(
                    f"scatter: src {src!r} is {src_dtype.value} and {arg!r} is {dtype.value}: "
                    "they must be of one dtype (as torch.scatter requires); cast src first"
                )
        t, idx = self._as_tensor(vid), self._as_tensor(ix)
        n = t.size(d)
        # Each index checked against arg's extent by a gather of positions (p[dim] at p).
        positions = self.broadcast_in_dim(self.iota(n, 0, 1, DataType.Int), t.shape(), [d])
        named = self.gather(positions, idx, d)
        # [..., p, j, ...]: the output's position p along dim, and the index's j.
        grid = idx.shape()[:d] + [n, idx.size(d)] + idx.shape()[d + 1 :]
        spread = [k if k < d else k + 1 for k in range(rank)]
        hits = self.eq(
            self.broadcast_in_dim(named, grid, spread),
            self.broadcast_in_dim(self.iota(n, 0, 1, DataType.Int), grid, [d]),
        )
        j = self.broadcast_in_dim(self.iota(idx.size(d), 0, 1, DataType.Int), grid, [d + 1])
        last = self.max(self.where(hits, j, self._fd._constant(-1, DataType.Int)), [d + 1])
        hit = self.ge(last, 0)
        if src_tensor:
            at = self.where(hit, last, self._fd._constant(0, DataType.Int))
            value = self.gather(self._fd._wrap(sid), at, d)
        else:
            value = self.cast(self._fd._wrap(sid), dtype)
        return self.where(hit, value, arg)

    def matmul(self, a: Value, b: Value) -> Tensor:
        """torch.matmul of floating tensors: 1-D x 1-D a dot product, 1-D operands taken as a
        row (a) or a column (b) and that dim dropped, leading (batch) dims broadcast.

        A reduction over K of the broadcast products, accumulated in float (double for
        double inputs) and rounded to the operands' type once, as cuBLAS does: exact to the
        summation order, and fused with what reads or feeds it; but every product reads its
        two operands (no tiling, no tensor cores): M x N x K work at memory speed, fit for
        the small and skinny products of a fusion's epilogue, not for a large GEMM."""
        x, y = self._matrix(a, "matmul"), self._matrix(b, "matmul")
        ra, rb = self._rank(x), self._rank(y)
        if ra == 0 or rb == 0:
            raise DefinitionError("matmul: both operands need rank 1 or more (torch.matmul)")
        ta, tb = self._as_tensor(x), self._as_tensor(y)
        if ra == 1:
            ta = self.broadcast_in_dim(ta, [1, ta.size(0)], [1])
        if rb == 1:
            tb = self.broadcast_in_dim(tb, [tb.size(0), 1], [0])
        # b's last two dims swapped: both operands [..., rows, K]
        tb = self.permute(
            tb, [*range(self._rank(tb.id) - 2), self._rank(tb.id) - 1, self._rank(tb.id) - 2]
        )
        out = self._contract(ta, tb, "matmul")
        if rb == 1:
            out = self.squeeze(out, [-1])
        if ra == 1:
            out = self.squeeze(out, [-2 if rb != 1 else -1])
        return out

    def linear(self, input: Value, weight: Value, bias: Value | None = None) -> Tensor:  # noqa: A002
        """torch.nn.functional.linear: input [..., K] times weight [N, K] transposed (a 1-D
        weight [K]: the N dim dropped), plus bias [N] (or a scalar); matmul's reduction over
        K (read its note on cost), the bias added before the one rounding."""
        x, w = self._matrix(input, "linear"), self._matrix(weight, "linear")
        rw = self._rank(w)
        if rw not in (1, 2) or self._rank(x) == 0:
            raise DefinitionError(
                f"linear: weight {weight!r} must have rank 1 or 2 and the input rank 1 or more"
            )
        tw = self._as_tensor(w)
        if rw == 1:
            tw = self.broadcast_in_dim(tw, [1, tw.size(0)], [1])
        tx = self._as_tensor(x)
        if self._rank(x) == 1:
            tx = self.broadcast_in_dim(tx, [1, tx.size(0)], [1])
        out = self._contract(tx, tw, "linear", bias)
        if rw == 1:
            out = self.squeeze(out, [-1])
        if self._rank(x) == 1:
            out = self.squeeze(out, [-2 if rw == 2 else -1])
        return out

    def _matrix(self, value: Value, op: str) -> int:
        vid = self._tensor(value, op)
        dtype = self._fd._builder.values[vid].dtype
        if not dtype.is_floating or dtype.is_float8:
            raise DefinitionError(
                f"{op}: {value!r} is {dtype.value}; {op} takes double, float, half or bfloat16 "
                "tensors (as torch's on a GPU)"
            )
        return vid

    def _contract(self, a: Tensor, b: Tensor, op: str, bias: Value | None = None) -> Tensor:
        """out[..., m, n] = sum_k a[..., m, k] * b[..., n, k] (leading dims broadcast, b's
        possibly fewer), accumulated in the compute type, rounded once to the result type."""
        ra, rb = self._rank(a.id), self._rank(b.id)
        lead = max(ra, rb) - 2
        sa, sb = a.shape(), b.shape()
        va, vb = self._fd._builder.values[a.id], self._fd._builder.values[b.id]
        batch = []
        for d in range(lead):
            da, db = d - (lead - (ra - 2)), d - (lead - (rb - 2))
            ea = va.shape[da] if da >= 0 else 1
            if da >= 0 and not (ea == 1 and db >= 0):
                batch.append(sa[da])
            else:
                batch.append(sb[db])
        m, n, k = sa[ra - 2], sb[rb - 2], sa[ra - 1]
        grid = [*batch, m, n, k]
        dims_a = [lead - (ra - 2) + d for d in range(ra - 2)] + [lead, lead + 2]
        dims_b = [lead - (rb - 2) + d for d in range(rb - 2)] + [lead + 1, lead + 2]
        out_type = promote_types([va.dtype, vb.dtype])
        acc = DataType.Double if out_type is DataType.Double else DataType.Float
        products = self.mul(
            self.broadcast_in_dim(self.cast(a, acc), grid, dims_a),
            self.broadcast_in_dim(self.cast(b, acc), grid, dims_b),
        )
        out = self.sum(products, [lead + 2])
        if bias is not None:
            bid = self._fd._value_id(bias, op)
            if isinstance(self._fd._builder.values[bid], TensorType):
                rbias = self._rank(bid)
                shape = [*batch, m, n]
                out = self.add(
                    out,
                    self.broadcast_in_dim(
                        self.cast(self._fd._wrap(bid), acc),
                        shape,
                        list(range(len(shape) - rbias, len(shape))),
                    ),
                )
            else:
                out = self.add(out, self._fd._wrap(bid))
        return self.cast(out, out_type)

    def shape(self, arg: Value) -> Vector:
        """The extents of `arg` as Int scalars (nvFuser's fd.ops.shape; `arg.shape()`)."""
        return self._as_tensor(self._tensor(arg, "shape")).shape()

    def welford(self, arg: Value, dims: int | Sequence[int]) -> tuple[Tensor, Tensor, Tensor]:
        """nvFuser's welford: (mean, the sum of squared deviations, the count) over `dims`;
        var_sum / n is the biased variance. Computed by var_mean (a Welford reduction)."""
        vid = self._tensor(arg, "welford")
        rank = self._rank(vid)
        reduced = normalize_dims("welford", [dims] if isinstance(dims, int) else list(dims), rank)
        var, mean = self.var_mean(arg, list(reduced), correction=0)
        t = self._as_tensor(vid)
        count: Any = 1
        for d in reduced:
            count = t.size(d) * count
        n = self.full([t.size(d) for d in range(rank) if d not in reduced], count, DataType.Int)
        return mean, self.mul(var, count), n


def _scan_identity(name: str, dtype: DataType) -> object:
    """The value that leaves a scan's reduction unchanged, in `dtype`."""
    if name == "cumsum":
        return 0
    if name == "cumprod":
        return 1
    low = name == "cummax"
    if dtype.is_bool:
        return not low
    if dtype.is_floating:
        return float("-inf") if low else float("inf")
    info = np.iinfo(dtype.numpy)
    return int(info.min) if low else int(info.max)
