"""A seeded generator of random fusions and inputs for them: the memory-safety corpus.

`fuzz_case(seed)` builds one fusion from a pool of tensors by random steps that use every
op of the op table (elementwise, casts, reductions, normalizations, views, slice/pad/cat,
set/segment_set, full/iota/size), on shapes that are odd, of size 1, misaligned for
vectors, and on inputs that are offset views or non-contiguous. The same seed gives the same
case on any machine. Values stay in ranges where the reference and a kernel agree to a few
ulps: ops that jump (floor, comparisons, fmod...) read only the inputs themselves, never a
computed value that rounding could move across a jump.

`large_cases()` are fusions of more than 2**31 elements (int64 indexing), checked at sampled
positions. `tests/fuzz_corpus.py` runs the corpus (on the GPU, under compute-sanitizer).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from tunefuse import DataType, FusionDefinition
from tunefuse.ir.elementwise import ELEMENTWISE
from tunefuse.ir.ops import OpKind

FLOATS = (DataType.Float, DataType.Half, DataType.BFloat16, DataType.Double)
EXTENTS = (1, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 32, 33, 64, 65, 127, 128, 130)
MAX_NUMEL = 1 << 15  # small: the sanitizer slows kernels 10-100x

# Continuous unary ops, each with the transform that keeps its argument in its domain.
SMOOTH_UNARY = {
    "neg": None,
    "abs": None,
    "exp": "small",
    "exp2": "small",
    "expm1": "small",
    "sin": None,
    "cos": None,
    "tanh": None,
    "sigmoid": None,
    "silu": None,
    "gelu": None,
    "erf": None,
    "erfc": None,
    "relu": None,
    "log": "positive",
    "log2": "positive",
    "log1p": "positive",
    "sqrt": "positive",
    "rsqrt": "positive",
    "reciprocal": "positive",
    "tan": "small",
}
# Ops with jumps: applied to inputs only (exact values), never to computed ones.
JUMPY_UNARY = (
    "floor",
    "ceil",
    "round",
    "trunc",
    "sign",
    "isnan",
    "isinf",
    "isfinite",
    "logical_not",
    "signbit",
)
SMOOTH_BINARY = ("add", "sub", "mul", "maximum", "minimum", "div", "truediv", "pow", "atan2")
JUMPY_BINARY = (
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "fmod",
    "nextafter",
)
INTEGER_BINARY = (
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "remainder",
    "fmod",
    "add",
    "mul",
    "div",
    "gcd",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "logical_right_shift",
)
REDUCTIONS = ("sum", "max", "min", "mean", "var", "var_mean", "prod")


@dataclass
class _Value:
    tensor: object
    shape: tuple[int, ...]
    dtype: DataType
    exact: bool  # an input (or a view of one): safe for ops with jumps


@dataclass
class FuzzCase:
    seed: int
    fd: FusionDefinition
    inputs: list[np.ndarray]
    ops: list[str] = field(default_factory=list)
    layouts: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        shapes = [list(np.shape(x)) for x in self.inputs]
        return (
            f"FuzzCase(seed={self.seed}, inputs={shapes}, layouts={self.layouts}, ops={self.ops})"
        )


def _numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


class _Builder:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.fd = FusionDefinition()
        self.pool: list[_Value] = []
        self.inputs: list[np.ndarray] = []
        self.input_values: list[_Value] = []
        self.expanded: set[int] = set()  # ids of the inputs laid out expanded (never written)
        self.ops: list[str] = []
        self.layouts: list[str] = []

    # -- choices -----------------------------------------------------------------------
    def pick(self, seq):  # noqa: ANN001, ANN201
        return seq[int(self.rng.integers(len(seq)))]

    def shape(self, rank: int) -> tuple[int, ...]:
        while True:
            s = tuple(int(self.pick(EXTENTS)) for _ in range(rank))
            if _numel(s) <= MAX_NUMEL:
                return s

    # -- inputs ------------------------------------------------------------------------
    def host_array(
        self, shape: tuple[int, ...], dtype: DataType, index_below: int | None = None
    ) -> np.ndarray:
        """An input laid out as one of: contiguous, an offset view (misaligned for vectors),
        a permuted view (non-contiguous), a strided view (every other element), an expanded
        one (a dim of stride 0, torch's expand: nvFuser's contiguity None). With
        `index_below`, integers in [0, index_below): an index tensor."""
        layout = self.pick(
            ["contiguous", "contiguous", "offset", "permuted", "strided", "expanded"]
        )
        if index_below is not None:
            make = lambda s: self.rng.integers(0, index_below, s).astype(dtype.numpy)  # noqa: E731
        elif dtype.is_floating:
            make = lambda s: self.rng.uniform(-2.0, 2.0, s).astype(dtype.numpy)  # noqa: E731
        elif dtype.is_bool:
            make = lambda s: self.rng.integers(0, 2, s).astype(bool)  # noqa: E731
        else:
            make = lambda s: self.rng.integers(-20, 20, s).astype(dtype.numpy)  # noqa: E731
        if layout == "offset":
            flat = make((_numel(shape) + 1,))
            array = flat[1:].reshape(shape)
        elif layout == "permuted" and len(shape) > 1:
            perm = list(self.rng.permutation(len(shape)))
            base = make(tuple(shape[p] for p in perm))
            array = np.transpose(base, np.argsort(perm))
        elif layout == "strided" and shape and shape[-1] > 0:
            base = make((*shape[:-1], 2 * shape[-1]))
            array = base[..., ::2]
        elif layout == "expanded" and any(e > 1 for e in shape):
            dim = self.pick([d for d, e in enumerate(shape) if e > 1])
            base = make(tuple(1 if d == dim else e for d, e in enumerate(shape)))
            array = np.broadcast_to(base, shape)
        else:
            layout = "contiguous"
            array = make(shape)
        self.layouts.append(layout)
        return array

    def new_input(
        self, shape: tuple[int, ...], dtype: DataType, index_below: int | None = None
    ) -> _Value:
        array = self.host_array(shape, dtype, index_below)
        self.inputs.append(array)
        t = self.fd.from_array(array, static_sizes=bool(self.rng.random() < 0.3))
        v = _Value(t, shape, dtype, True)
        self.pool.append(v)
        self.input_values.append(v)
        if self.layouts[-1] == "expanded":
            self.expanded.add(id(v))
        return v

    def write_in_place(self, computed: list[_Value]) -> None:
        """Write a computed value into an input of its shape and dtype (`alias_input`), and
        half the time return it too (it comes back as that input): the in-place paths,
        issue 2664's races among them, in every fused pattern the fuzzer makes."""
        pairs = [
            (v, x)
            for v in computed
            for x in self.input_values
            if x.shape == v.shape and x.dtype is v.dtype and id(x) not in self.expanded
        ]
        if not pairs:
            return
        v, x = self.pick(pairs)
        self.ops.append("in_place")
        self.fd.add_output(v.tensor, alias_input=x.tensor)
        if self.rng.random() < 0.5:
            self.fd.add_output(v.tensor)

    # -- steps -------------------------------------------------------------------------
    def op(self, name: str, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        self.ops.append(name)
        return getattr(self.fd.ops, name)(*args, **kwargs)

    def domain(self, v: _Value, kind: str | None) -> object:
        if kind == "positive":
            return self.op("add", self.op("abs", v.tensor), 0.5)
        if kind == "small":
            return self.op("mul", self.op("tanh", v.tensor), 1.2)
        return v.tensor

    def float_value(self) -> _Value:
        floats = [v for v in self.pool if v.dtype.is_floating]
        if floats:
            return self.pick(floats)
        v = self.pick(self.pool)
        return self.push(self.op("cast", v.tensor, DataType.Float), v.shape, v.exact)

    def push(self, t: object, shape: tuple[int, ...], exact: bool = False) -> _Value:
        """A new value for the pool: its concrete shape as the generator computed it (checked
        by the reference when the case runs), its dtype as the frontend inferred it."""
        assert t.ndim == len(shape), (t, shape)  # type: ignore[attr-defined]
        v = _Value(t, tuple(shape), t.dtype, exact)  # type: ignore[attr-defined]
        self.pool.append(v)
        return v

    def same_shape(self, v: _Value, floating: bool = True) -> _Value | None:
        options = [
            u for u in self.pool if u.shape == v.shape and (u.dtype.is_floating or not floating)
        ]
        return self.pick(options) if options else None

    def trailing_shape(self, v: _Value) -> _Value | None:
        """A floating value of lower rank whose shape is v's innermost extents: an operand
        nvFuser broadcasts along new outer dims without a broadcast op."""
        options = [
            u
            for u in self.pool
            if u.dtype.is_floating
            and len(u.shape) < len(v.shape)
            and u.shape == v.shape[len(v.shape) - len(u.shape) :]
        ]
        return self.pick(options) if options else None

    def step(self) -> None:
        kind = self.pick(
            [
                "unary",
                "unary",
                "binary",
                "binary",
                "jumpy",
                "where",
                "cast",
                "reduce",
                "normalize",
                "view",
                "view",
                "slice",
                "pad",
                "cat",
                "cat",
                "set",
                "create",
                "scalar",
                "integer",
                "clamp",
                "gather",
                "scan",
                "scatter",
                "linear",
            ]
        )
        getattr(self, f"step_{kind}")()

    def step_scan(self) -> None:
        """cumsum, cummax or cummin along a random dim (a reduction of each prefix: its
        iteration space is the value's times the scanned extent, kept small)."""
        v = self.float_value()
        if not v.shape:
            return None
        dim = int(self.rng.integers(0, len(v.shape)))
        if v.shape[dim] > 64 or _numel(v.shape) * v.shape[dim] > MAX_NUMEL:
            return None
        name = self.pick(["cumsum", "cummax", "cummin"])
        self.push(self.op(name, v.tensor, dim), v.shape)

    def step_unary(self) -> None:
        v = self.float_value()
        name = self.pick(list(SMOOTH_UNARY))
        self.push(self.op(name, self.domain(v, SMOOTH_UNARY[name])), v.shape)

    def step_binary(self) -> None:
        v = self.float_value()
        lower = self.trailing_shape(v) if self.rng.random() < 0.3 else None
        u = lower or self.same_shape(v) or v
        name = self.pick(SMOOTH_BINARY)
        if name in ("div", "truediv"):
            rhs = self.op("add", self.op("abs", u.tensor), 0.5)
            t = self.op(name, v.tensor, rhs)
        elif name == "pow":
            t = self.op(
                "pow",
                self.op("add", self.op("abs", v.tensor), 0.5),
                self.op("mul", self.op("tanh", u.tensor), 2.0),
            )
        else:
            t = self.op(name, v.tensor, u.tensor)
        self.push(t, v.shape)

    def step_jumpy(self) -> None:
        exact = [v for v in self.pool if v.exact and v.dtype.is_floating]
        if not exact:
            return self.step_unary()
        v = self.pick(exact)
        if self.rng.random() < 0.5:
            name = self.pick(JUMPY_UNARY)
            t = self.op(name, v.tensor)
        else:
            u = self.pick([x for x in exact if x.shape == v.shape])
            name = self.pick(JUMPY_BINARY)
            if name == "fmod":
                t = self.op("fmod", v.tensor, self.op("add", self.op("abs", u.tensor), 0.5))
            elif name == "nextafter":  # float and double steps only
                wide = self.pick([DataType.Float, DataType.Double])
                t = self.op(
                    "nextafter", self.op("cast", v.tensor, wide), self.op("cast", u.tensor, wide)
                )
            else:
                t = self.op(name, v.tensor, u.tensor)
        self.push(t, v.shape)

    def step_where(self) -> None:
        exact = [v for v in self.pool if v.exact]
        if not exact:
            return self.step_unary()
        c = self.pick(exact)
        cond = c.tensor if c.dtype.is_bool else self.op("gt", c.tensor, 0.25)
        a = self.same_shape(c) or self.float_value()
        if a.shape != c.shape:
            return self.step_unary()
        b = self.same_shape(c) or a
        self.push(self.op("where", cond, a.tensor, b.tensor), c.shape)

    def step_cast(self) -> None:
        v = self.pick(self.pool)
        if v.exact and v.dtype.is_floating and self.rng.random() < 0.25:
            # Through an 8-bit float and back (fp8 quantization): exact values only, so that
            # the reference and a kernel round the same float to the same code.
            eight = self.pick([DataType.Float8_e4m3fn, DataType.Float8_e5m2])
            back = self.op("cast", self.op("cast", v.tensor, eight), DataType.Float)
            return self.push(back, v.shape, True)
        target = self.pick(FLOATS + (DataType.Int32, DataType.Int, DataType.Bool))
        if not target.is_floating and not v.exact:
            target = self.pick(FLOATS)  # rounding a computed value to an integer may differ by one
        self.push(
            self.op("cast", v.tensor, target),
            v.shape,
            v.exact
            and target.is_floating
            and (target.itemsize >= v.dtype.itemsize)
            and v.dtype.is_floating,
        )

    def step_reduce(self) -> None:
        v = self.float_value()
        if not v.shape:
            return self.step_unary()
        rank = len(v.shape)
        dims = sorted(
            {int(d) for d in self.rng.integers(0, rank, int(self.rng.integers(1, rank + 1)))}
        )
        name = self.pick(REDUCTIONS)
        keep = bool(self.rng.random() < 0.5)
        reduced = (
            tuple(1 if d in dims else e for d, e in enumerate(v.shape))
            if keep
            else tuple(e for d, e in enumerate(v.shape) if d not in dims)
        )
        count = math.prod(v.shape[d] for d in dims)
        if name in ("max", "min") and count == 0:
            name = "sum"
        operand = v.tensor
        if name == "prod":
            if count > 16:
                name = "sum"
            else:
                operand = self.op("add", self.op("sigmoid", v.tensor), 0.5)
        if name in ("var", "var_mean"):
            correction = int(self.rng.integers(0, 2))
            out = self.op(name, operand, dims=dims, correction=correction, keepdim=keep)
            if name == "var_mean":
                var, mean = out
                self.push(mean, reduced)
                out = var
            self.push(out, reduced)
            return
        self.push(self.op(name, operand, dims=dims, keepdim=keep), reduced)

    def step_normalize(self) -> None:
        """x - reduce(x) broadcast back (softmax / layernorm shapes), or logsumexp (log(sum(exp(x
        - max))) + max: one value a row)."""
        v = self.float_value()
        if len(v.shape) < 1:
            return self.step_unary()
        if len(v.shape) >= 2 and self.rng.random() < 0.25:
            return self.step_grouped_normalize(v)
        dim = int(self.rng.integers(0, len(v.shape)))
        name = self.pick(["max", "sum", "mean", "logsumexp"])
        if (
            name in ("max", "logsumexp")
            and v.shape[dim] == 0
            and 0 not in v.shape[:dim] + v.shape[dim + 1 :]
        ):
            name = "sum"  # the max of nothing is refused by name (a ShapeError), as torch's
        r = self.op("max" if name == "logsumexp" else name, v.tensor, dims=[dim], keepdim=True)
        b = self.op(
            "broadcast_in_dim", r, shape=list(v.shape), broadcast_dims=list(range(len(v.shape)))
        )
        y = self.op("sub", v.tensor, b)
        if name == "logsumexp":
            s = self.op("sum", self.op("exp", y), dims=[dim], keepdim=True)
            reduced = tuple(1 if d == dim else e for d, e in enumerate(v.shape))
            return self.push(self.op("add", self.op("log", s), r), reduced)
        if name == "max":
            e = self.op("exp", y)
            s = self.op("sum", e, dims=[dim], keepdim=True)
            y = self.op(
                "div",
                e,
                self.op(
                    "broadcast_in_dim",
                    s,
                    shape=list(v.shape),
                    broadcast_dims=list(range(len(v.shape))),
                ),
            )
        self.push(y, v.shape)

    def step_grouped_normalize(self, v: _Value) -> None:
        """GroupNorm's shape: the inner dims from a random one on merged by a reshape, x minus
        its mean over them, reshaped back to v's shape."""
        d = int(self.rng.integers(0, len(v.shape) - 1))
        merged = (*v.shape[:d], _numel(v.shape[d:]))
        rows = self.op("reshape", v.tensor, new_shape=list(merged))
        mean = self.op("mean", rows, dims=[d], keepdim=True)
        centred = self.op(
            "sub",
            rows,
            self.op(
                "broadcast_in_dim", mean, shape=list(merged), broadcast_dims=list(range(d + 1))
            ),
        )
        self.push(self.op("reshape", centred, new_shape=list(v.shape)), v.shape)

    def step_view(self) -> None:
        v = self.pick(self.pool)
        rank = len(v.shape)
        kind = self.pick(
            [
                "permute",
                "reshape",
                "squeeze",
                "unsqueeze",
                "broadcast_in_dim",
                "expand",
                "broadcast",
            ]
        )
        if kind == "permute" and rank > 1:
            perm = [int(p) for p in self.rng.permutation(rank)]
            self.push(
                self.op("permute", v.tensor, dims=perm), tuple(v.shape[p] for p in perm), v.exact
            )
            return
        if kind == "reshape" and rank >= 1:
            if rank > 1 and self.rng.random() < 0.5:
                d = int(self.rng.integers(0, rank - 1))
                new = (*v.shape[:d], v.shape[d] * v.shape[d + 1], *v.shape[d + 2 :])
            else:
                n = _numel(v.shape)
                divisors = [k for k in range(1, n + 1) if n % k == 0] if n else [0]
                a = int(self.pick(divisors))
                new = (a, n // a) if a else (0,)
            self.push(self.op("reshape", v.tensor, new_shape=list(new)), new, v.exact)
            return
        ones = [d for d, e in enumerate(v.shape) if e == 1]
        if kind == "squeeze" and ones:
            d = int(self.pick(ones))
            new = tuple(e for k, e in enumerate(v.shape) if k != d)
            self.push(self.op("squeeze", v.tensor, dims=[d]), new, v.exact)
            return
        if kind == "unsqueeze" and rank < 4:
            d = int(self.rng.integers(0, rank + 1))
            new = (*v.shape[:d], 1, *v.shape[d:])
            self.push(self.op("unsqueeze", v.tensor, dim=d), new, v.exact)
            return
        if kind in ("expand", "broadcast_in_dim") and ones:
            new = tuple(int(self.pick((2, 3, 8))) if e == 1 else e for e in v.shape)
            if _numel(new) > MAX_NUMEL:
                return None
            if kind == "expand":
                t = self.op("expand", v.tensor, shape=list(new))
            else:
                t = self.op(
                    "broadcast_in_dim", v.tensor, shape=list(new), broadcast_dims=list(range(rank))
                )
            self.push(t, new, v.exact)
            return
        if kind == "broadcast" and rank < 4:
            d = int(self.rng.integers(0, rank + 1))
            flags = [False] * (rank + 1)
            flags[d] = True
            new = (*v.shape[:d], 1, *v.shape[d:])
            self.push(self.op("broadcast", v.tensor, is_broadcast_dim=flags), new, v.exact)
            return
        return None

    def step_slice(self) -> None:
        v = self.pick(self.pool)
        if not v.shape or not any(v.shape):
            return None
        starts, ends, strides, new = [], [], [], []
        for e in v.shape:
            if e > 1 and self.rng.random() < 0.6:
                a = int(self.rng.integers(0, e))
                b = int(self.rng.integers(a, e + 1))
                s = int(self.pick((1, 1, 1, 2, 3)))
            else:
                a, b, s = 0, e, 1
            starts.append(a)
            ends.append(b)
            strides.append(s)
            new.append(-(-(b - a) // s))
        self.push(
            self.op("slice", v.tensor, start_indices=starts, end_indices=ends, strides=strides),
            tuple(new),
            v.exact,
        )

    def step_pad(self) -> None:
        v = self.pick(self.pool)
        if not v.shape:
            return None
        dims = int(self.rng.integers(1, len(v.shape) + 1))
        widths, new = [], list(v.shape)
        for k in range(dims):
            d = len(v.shape) - 1 - k
            left = int(self.rng.integers(-min(v.shape[d], 3), 5))
            right = int(
                self.rng.integers(-min(v.shape[d] + left, 3) if v.shape[d] + left > 0 else 0, 5)
            )
            if v.shape[d] + left + right < 0:
                left = right = 0
            widths += [left, right]
            new[d] = v.shape[d] + left + right
        if _numel(tuple(new)) > MAX_NUMEL:
            return None
        fill = float(self.pick((0.0, 1.5, -3.0))) if v.dtype.is_floating else None
        self.push(self.op("pad", v.tensor, widths, fill), tuple(new), v.exact)

    def step_cat(self) -> None:
        """2-4 pieces along a dim: slices of one value (rotary embedding's halves), or
        values of matching shapes, some negated or cast."""
        v = self.pick(self.pool)
        if not v.shape:
            return None
        dim = int(self.rng.integers(0, len(v.shape)))
        e = v.shape[dim]
        pieces = []
        if e >= 2 and self.rng.random() < 0.6:
            cuts = sorted(
                {int(c) for c in self.rng.integers(0, e + 1, int(self.rng.integers(1, 3)))} | {0, e}
            )
            for a, b in zip(cuts, cuts[1:]):
                starts = [0] * len(v.shape)
                ends = list(v.shape)
                starts[dim], ends[dim] = a, b
                piece = self.op("slice", v.tensor, start_indices=starts, end_indices=ends)
                if v.dtype.is_floating and self.rng.random() < 0.5:
                    piece = self.op("neg", piece)
                pieces.append((piece, b - a))
            order = [int(k) for k in self.rng.permutation(len(pieces))]
            pieces = [pieces[k] for k in order]
        else:
            for _ in range(int(self.rng.integers(2, 4))):
                others = [
                    u
                    for u in self.pool
                    if len(u.shape) == len(v.shape)
                    and u.dtype is v.dtype
                    and all(a == b for k, (a, b) in enumerate(zip(u.shape, v.shape)) if k != dim)
                ]
                u = self.pick(others)
                pieces.append((u.tensor, u.shape[dim]))
        total = sum(n for _, n in pieces)
        new = (*v.shape[:dim], total, *v.shape[dim + 1 :])
        if _numel(new) > MAX_NUMEL:
            return None
        self.push(self.op("cat", [p for p, _ in pieces], dim=dim), new, v.exact)

    def step_gather(self) -> None:
        """index_select (a 1-D or 2-D index), gather or take_along_axis along a random dim of
        a value, the index a new input in range or computed in range from an integer value
        (|x| mod extent)."""
        v = self.pick(self.pool)
        if not v.shape:
            return None
        dim = int(self.rng.integers(0, len(v.shape)))
        e = v.shape[dim]
        if e == 0:
            return None
        name = self.pick(["index_select", "index_select", "gather", "take_along_axis"])
        if name == "index_select":
            index_shape = tuple(
                int(self.pick((1, 2, 3, 5, 8, 17))) for _ in range(int(self.rng.integers(1, 3)))
            )
            out = (*v.shape[:dim], *index_shape, *v.shape[dim + 1 :])
        else:
            index_shape = tuple(
                int(self.pick((1, 2, 3, 5, 9)))
                if k == dim
                else (n if name == "take_along_axis" else int(self.rng.integers(min(n, 1), n + 1)))
                for k, n in enumerate(v.shape)
            )
            out = index_shape
        if _numel(out) > MAX_NUMEL:
            return None
        dtype = self.pick([DataType.Int, DataType.Int32])
        computed = [
            u
            for u in self.pool
            if u.shape == index_shape and u.dtype in (DataType.Int, DataType.Int32)
        ]
        if computed and self.rng.random() < 0.5:
            index = self.op("remainder", self.op("abs", self.pick(computed).tensor), e)
        else:
            index = self.new_input(index_shape, dtype, index_below=e).tensor
        self.push(self.op(name, v.tensor, index, dim), out, v.exact)

    def step_scatter(self) -> None:
        """scatter along a random dim of a float value: an index (in range, repeats allowed:
        the last wins) spanning the value along the other dims, from a tensor of the
        index's extents or a scalar (each output element looks over the index's extent
        along the dim: kept small)."""
        v = self.float_value()
        if not v.shape or 0 in v.shape:
            return None
        dim = int(self.rng.integers(0, len(v.shape)))
        k = int(self.pick((1, 2, 3, 5)))
        if _numel(v.shape) * k > MAX_NUMEL:
            return None
        index_shape = tuple(k if d == dim else n for d, n in enumerate(v.shape))
        index = self.new_input(
            index_shape, self.pick([DataType.Int, DataType.Int32]), index_below=v.shape[dim]
        )
        if self.rng.random() < 0.3:
            src = self.fd.define_scalar(float(self.pick((0.5, -2.0, 7.25))), dtype=DataType.Double)
        else:
            src = self.new_input(index_shape, v.dtype).tensor
        self.push(self.op("scatter", v.tensor, index.tensor, src, dim), v.shape)

    def step_linear(self) -> None:
        """linear of a float value's last dim against a new weight [N, K] (and half the time a
        bias), or matmul by a new [K, N]: a reduction over K of broadcast products."""
        v = self.float_value()
        if not v.shape or 0 in v.shape or v.dtype.is_float8:
            return None
        k, n = v.shape[-1], int(self.pick((1, 3, 8, 33)))
        out = (*v.shape[:-1], n)
        if _numel(out) * k > MAX_NUMEL:
            return None
        if self.rng.random() < 0.5:
            w = self.new_input((n, k), v.dtype)
            bias = self.new_input((n,), v.dtype).tensor if self.rng.random() < 0.5 else None
            args = (v.tensor, w.tensor) if bias is None else (v.tensor, w.tensor, bias)
            self.push(self.op("linear", *args), out)
        else:
            w = self.new_input((k, n), v.dtype)
            self.push(self.op("matmul", v.tensor, w.tensor), out if len(v.shape) > 1 else (n,))

    def step_set(self) -> None:
        v = self.pick(self.pool)
        self.push(self.op(self.pick(["set", "segment_set"]), v.tensor), v.shape, v.exact)

    def step_create(self) -> None:
        v = self.pick(self.pool)
        if not v.shape:
            return None
        roll = self.rng.random()
        if roll < 0.3:
            # Random numbers from a seed and offset of the definition's own (reproducible).
            name = self.pick(["uniform", "normal"])
            dtype = self.pick([DataType.Float, DataType.Double, DataType.BFloat16])
            seed, offset = (int(self.rng.integers(-(2**40), 2**40)) for _ in range(2))
            t = self.op(
                name, -1.5, 2.0, list(v.shape), dtype=dtype, rng_seed=seed, rng_offset=offset
            )
            self.push(
                self.op("mul", t, self.op("cast", v.tensor, dtype)) if v.dtype.is_floating else t,
                v.shape,
            )
        elif roll < 0.65:
            fill = float(self.pick((0.0, 1.0, -2.5)))
            t = self.op(
                "full",
                list(v.shape),
                self.fd.define_scalar(fill, dtype=DataType.Double),
                DataType.Float,
            )
            self.push(
                self.op("add", t, self.op("cast", v.tensor, DataType.Float))
                if v.dtype.is_floating
                else t,
                v.shape,
            )
        else:
            d = len(v.shape) - 1
            n = v.shape[d]
            i = self.op("iota", n, 1, 2, dtype=DataType.Int)
            i = self.op("broadcast_in_dim", i, shape=list(v.shape), broadcast_dims=[d])
            self.push(i, v.shape, True)

    def step_scalar(self) -> None:
        v = self.float_value()
        if self.rng.random() < 0.5 and v.shape:
            size = self.op("size", v.tensor, int(self.rng.integers(0, len(v.shape))))
            self.push(self.op("mul", v.tensor, size), v.shape)
        else:
            value = float(self.pick((0.5, 2.0, -1.25)))
            if self.rng.random() < 0.5:  # a scalar passed at run time (a kernel argument)
                dtype = self.pick([DataType.Double, DataType.Float, DataType.Int])
                s = self.fd.define_scalar(dtype=dtype)
                self.inputs.append(int(value * 4) if dtype is DataType.Int else value)
                self.layouts.append("scalar")
            else:
                s = self.fd.define_scalar(value)
            self.push(self.op(self.pick(["mul", "add", "sub"]), v.tensor, s), v.shape)

    def step_integer(self) -> None:
        ints = [v for v in self.pool if v.dtype in (DataType.Int, DataType.Int32)]
        if not ints:
            v = self.pick([v for v in self.pool if v.exact] or self.pool)
            if not v.exact:
                return self.step_unary()
            t = self.op("cast", v.tensor, DataType.Int32)
            ints = [self.push(t, v.shape, True)]
        v = self.pick(ints)
        u = self.pick([x for x in ints if x.shape == v.shape])
        name = self.pick(INTEGER_BINARY + ("bitwise_not", "abs", "neg"))
        if name in ("bitwise_not", "abs", "neg"):
            t = self.op(name, v.tensor)
        elif name in ("remainder", "fmod"):
            t = self.op(name, v.tensor, self.op("add", self.op("abs", u.tensor), 1))
        elif name.endswith("shift"):  # amounts from -2 to 70: the undefined-in-C ones too
            t = self.op(name, v.tensor, self.op("add", self.op("remainder", u.tensor, 73), -2))
        else:
            t = self.op(name, v.tensor, u.tensor)
        self.push(t, v.shape, True)

    def step_clamp(self) -> None:
        v = self.float_value()
        u = self.same_shape(v) or v
        name = self.pick(["clamp", "lerp", "addcmul"])
        if name == "clamp":
            t = self.op("clamp", v.tensor, -0.5, 0.75)
        elif name == "lerp":
            t = self.op("lerp", v.tensor, u.tensor, self.op("sigmoid", u.tensor))
        else:
            t = self.op("addcmul", v.tensor, u.tensor, v.tensor, 0.5)
        self.push(t, v.shape)


# A share of the cases empties one extent of the first input (and so of every input shaped
# like it): plans of no elements, and reductions of no rows or over nothing. Drawn from a
# stream of its own, so that every other case is what it was (the seeds' corpora stay put).
EMPTY_SHARE = 0.04


def _emptied(shape: tuple[int, ...], seed: int, attempt: int) -> tuple[int, ...]:
    """`shape`, or (EMPTY_SHARE of the cases) `shape` with one extent 0."""
    side = np.random.default_rng([seed, attempt, 0xE4])
    if not shape or side.random() >= EMPTY_SHARE:
        return shape
    d = int(side.integers(len(shape)))
    return shape[:d] + (0,) + shape[d + 1 :]


def fuzz_case(seed: int, max_steps: int = 10) -> FuzzCase:
    """One random fusion with inputs, the same for the same seed. Raises nothing for a
    well-formed definition; a definition the frontend refuses is retried with the next
    sub-seed (the generator's own bookkeeping of shapes is then wrong, not tunefuse)."""
    from tunefuse.errors import TunefuseError

    for attempt in range(20):
        b = _Builder(seed * 1000 + attempt)
        try:
            with b.fd:
                rank = int(b.rng.integers(0, 5)) if b.rng.random() < 0.95 else 0
                shape = _emptied(b.shape(rank), seed, attempt)
                dtype = b.pick(FLOATS)
                b.new_input(shape, dtype)
                for _ in range(int(b.rng.integers(0, 3))):
                    other = tuple(1 if b.rng.random() < 0.2 else e for e in shape)
                    b.new_input(
                        other if b.rng.random() < 0.3 else shape,
                        dtype if b.rng.random() < 0.7 else b.pick(FLOATS),
                    )
                for _ in range(int(b.rng.integers(1, max_steps + 1))):
                    b.step()
                computed = [v for v in b.pool[len(b.inputs) :]]
                outs = computed[-int(b.rng.integers(1, 3)) :] if computed else [b.pool[-1]]
                for v in outs:
                    if len(v.shape) >= 2 and b.rng.random() < 0.2:  # in a memory layout of its own
                        order = [int(k) for k in b.rng.permutation(len(v.shape))]
                        b.ops.append("stride_order")
                        b.fd.add_output(v.tensor, stride_order=order)
                    else:
                        b.fd.add_output(v.tensor)
                if computed and b.rng.random() < 0.25:
                    b.write_in_place(computed)
        except TunefuseError:
            continue
        return FuzzCase(seed, b.fd, b.inputs, b.ops, b.layouts)
    raise AssertionError(f"fuzz seed {seed}: no well-formed fusion in 20 attempts")


def agree(got: np.ndarray, want: np.ndarray, loosest: tuple[float, float] = (0.0, 0.0)) -> bool:
    """Same shape and values within ten times the tolerance of `want`'s dtype (or of
    `loosest`, the least precise floating type of the fusion, where that is looser); NaN equals
    NaN."""
    from tunefuse.ir.dtypes import from_any_dtype

    rtol, atol = (max(a, b) for a, b in zip(from_any_dtype(want.dtype).tolerance, loosest))
    return got.shape == want.shape and bool(
        np.allclose(
            got.astype(np.float64),
            want.astype(np.float64),
            rtol=10 * rtol,
            atol=10 * atol,
            equal_nan=True,
        )
    )


def in_run_order(fusion, outputs: list) -> list:  # noqa: ANN001
    """`reference.run(..., include_aliased=True)`'s outputs (in definition order) in the order a
    run gives them: the returned ones, then the in-place ones."""
    order = [k for k, o in enumerate(fusion.outputs) if o.alias_input is None]
    order += [k for k, o in enumerate(fusion.outputs) if o.alias_input is not None]
    return [outputs[k] for k in order]


def corpus(seed: int, count: int) -> Iterator[FuzzCase]:
    for k in range(count):
        yield fuzz_case(seed * 1_000_003 + k)


def rotary_embedding(fd: FusionDefinition, seq: int, heads: int, dim: int, dtype: DataType) -> None:
    """The issue's rotary embedding: x[S, H, D] as float, halves of the last dim swapped with
    one negated (`cat([-x2, x1])`), times cos/sin[S, D] broadcast over the heads, cast back."""
    x = fd.define_tensor(shape=[-1, -1, -1], dtype=dtype)
    cos = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    sin = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    xf = fd.ops.cast(x, DataType.Float)
    x1 = fd.ops.slice(xf, [0, 0, 0], [seq, heads, dim // 2])
    x2 = fd.ops.slice(xf, [0, 0, dim // 2], [seq, heads, dim])
    rotated = fd.ops.cat([fd.ops.neg(x2), x1], dim=2)
    c = fd.ops.broadcast_in_dim(
        fd.ops.cast(cos, DataType.Float), shape=[seq, heads, dim], broadcast_dims=[0, 2]
    )
    s = fd.ops.broadcast_in_dim(
        fd.ops.cast(sin, DataType.Float), shape=[seq, heads, dim], broadcast_dims=[0, 2]
    )
    fd.add_output(fd.ops.cast(fd.ops.add(fd.ops.mul(xf, c), fd.ops.mul(rotated, s)), dtype))


def named_cases() -> list[FuzzCase]:
    """Hand-written members of the corpus: the rotary embedding (the issue's crash) at sizes
    where each branch's reads run off the row (odd head dims, one row, bf16 and fp32),
    cat/pad patterns at the edges of buffers (empty pieces, negative pads, cat on dim 0),
    strided reductions that store a lane's outputs as vectors, middle softmaxes of short runs
    and of rows held by one or 2 threads, and norm backwards."""
    cases = []
    rng = np.random.default_rng(7)
    for seq, heads, dim, dtype in [
        (8192 // 64, 32, 128, DataType.BFloat16),
        (1, 1, 2, DataType.Float),
        (3, 5, 66, DataType.Half),
        (17, 2, 10, DataType.BFloat16),
        (2, 3, 128, DataType.Float),
    ]:
        fd = FusionDefinition()
        with fd:
            rotary_embedding(fd, seq, heads, dim, dtype)
        inputs = [
            rng.uniform(-1, 1, s).astype(dtype.numpy)
            for s in [(seq, heads, dim), (seq, dim), (seq, dim)]
        ]
        cases.append(FuzzCase(-1, fd, inputs, ["rotary_embedding"], ["contiguous"] * 3))
    for widths in ([3, 5], [-2, 4], [4, -3], [0, 8, 2, 0], [-1, -1, 1, 1]):
        fd = FusionDefinition()
        with fd:
            x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
            fd.add_output(fd.ops.pad(x, widths, 2.0))
        cases.append(
            FuzzCase(
                -1, fd, [rng.uniform(-1, 1, (5, 12)).astype(np.float32)], ["pad"], ["contiguous"]
            )
        )
    for sizes, dim in (([0, 4, 4], 1), ([4, 0], 1), ([8, 8], 0), ([3, 1, 12], 1), ([16, 16], 1)):
        fd = FusionDefinition()
        shapes = [(6, n) if dim == 1 else (n, 6) for n in sizes]
        with fd:
            ts = [fd.define_tensor(shape=[-1, -1], dtype=DataType.Half) for _ in sizes]
            fd.add_output(fd.ops.cat(ts, dim=dim))
        cases.append(
            FuzzCase(
                -1,
                fd,
                [rng.uniform(-1, 1, s).astype(np.float16) for s in shapes],
                ["cat"],
                ["contiguous"] * len(sizes),
            )
        )
    # Strided bf16 reductions whose default takes adjacent rows a lane and stores a lane's
    # outputs as vectors (codegen.reduction.lane_store_widths): fp32 statistics of 2 rows a
    # lane and bf16 sums of 4, output counts that leave the last lane partly empty; the random
    # variant draws other layouts of them.
    for shape, dims, stats in (
        ((3, 300007), [0], True),
        ((20001, 2, 19), [1], True),
        ((20001, 3, 37), [1], False),
    ):
        fd = FusionDefinition()
        with fd:
            x = fd.define_tensor(shape=[-1] * len(shape), dtype=DataType.BFloat16)
            if stats:
                var, mean = fd.ops.var_mean(fd.ops.cast(x, DataType.Float), dims=dims, correction=1)
                fd.add_output(var)
                fd.add_output(mean)
            else:
                fd.add_output(fd.ops.sum(x, dims=dims))
        inputs = [rng.uniform(-1, 1, shape).astype(DataType.BFloat16.numpy)]
        ops = ["var_mean" if stats else "sum"]
        cases.append(FuzzCase(-1, fd, inputs, ops, ["contiguous"]))
    # Softmaxes over the middle dim of runs under a sector whose default takes a block row of
    # fewer outputs than a warp (normalization._short_run_lanes, heuristics 61): 2 threads a
    # row, one row a lane or (threads doubled from 1) 2, the last block row partly empty.
    # Then rows of one thread (6 and 16 chunks) and of 2 threads (13 chunks each) whose
    # default checks only their last chunk (whole_chunks: ONE_THREAD_CHUNKS, TWO_THREAD_ROWS).
    for shape, dtype in (
        ((3001, 24, 5), DataType.Float),
        ((20001, 8, 5), DataType.Float),
        ((4001, 30, 9), DataType.BFloat16),
        ((20001, 6, 3), DataType.BFloat16),
        ((3001, 16, 11), DataType.Float),
        ((2001, 26, 31), DataType.Float),
    ):
        fd = FusionDefinition()
        with fd:
            x = fd.define_tensor(shape=[-1, -1, -1], dtype=dtype)
            xf = fd.ops.cast(x, DataType.Float)
            e = fd.ops.exp(fd.ops.sub(xf, fd.ops.max(xf, dims=[1], keepdim=True)))
            y = fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True))
            fd.add_output(fd.ops.cast(y, dtype))
        inputs = [rng.uniform(-4, 4, shape).astype(dtype.numpy)]
        cases.append(FuzzCase(-1, fd, inputs, ["softmax"], ["contiguous"]))
    # Backward passes whose column sums a GPU plan takes in parts (planning.column_partials):
    # enough rows that every row group walks several; the GPU corpus runs them with random
    # valid params too (any layout the tuner may pick for the fused kernel, any whole number
    # of warps a row among them).
    from training_fusions import NORM_BACKWARDS

    for name, dtype, rows, cols in (
        ("layernorm", DataType.Float, 4500, 1000),
        ("rmsnorm", DataType.BFloat16, 300000, 16),
        ("layernorm", DataType.BFloat16, 70000, 33),
        # rows of whole warps that are no power of two (160 and 96 threads), in parts
        ("layernorm", DataType.BFloat16, 4000, 2560),
        ("rmsnorm", DataType.BFloat16, 6001, 1536),
    ):
        define, make, _ = NORM_BACKWARDS[name]
        fd = FusionDefinition()
        with fd:
            define(fd, dtype)
        inputs = make(rows, cols, dtype, rng)
        cases.append(FuzzCase(-1, fd, inputs, [f"{name}_backward"], ["contiguous"] * len(inputs)))
    return cases


@dataclass
class LargeCase:
    """A fusion of more than 2**31 elements, checked at sampled positions (a reference of the
    whole would take minutes): `make_inputs(torch, device)` makes its inputs on the GPU,
    `expect(host inputs, index)` is the output's value at `index`."""

    name: str
    fd: FusionDefinition
    make_inputs: Callable[..., list]
    expect: Callable[[list[np.ndarray], tuple[int, ...]], float]
    out_shape: tuple[int, ...]


def large_cases() -> list[LargeCase]:
    rows, cols = 2, (1 << 30) + 24  # 2**31 + 48 half elements: 4 GiB in, 4 GiB out
    half = cols // 2
    fd = FusionDefinition()
    with fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Half)
        a = fd.ops.slice(x, [0, 0], [rows, half])
        b = fd.ops.slice(x, [0, half], [rows, cols])
        fd.add_output(fd.ops.cat([fd.ops.neg(b), a], dim=1))

    def cat_expect(inputs: list[np.ndarray], index: tuple[int, ...]) -> float:
        r, c = index
        return (
            float(-inputs[0][r, c + half])
            if c < cols - half
            else float(inputs[0][r, c - (cols - half)])
        )

    fd_pad = FusionDefinition()
    with fd_pad:
        x = fd_pad.define_tensor(shape=[-1], dtype=DataType.Half)
        fd_pad.add_output(fd_pad.ops.pad(fd_pad.ops.mul(x, 2.0), [5, 7], 1.0))
    n = (1 << 31) + 3

    def pad_expect(inputs: list[np.ndarray], index: tuple[int, ...]) -> float:
        (i,) = index
        return float(np.float16(float(inputs[0][i - 5]) * 2.0)) if 5 <= i < n + 5 else 1.0

    return [
        LargeCase(
            "cat of halves, 2 x (2**30 + 24) half",
            fd,
            lambda torch, device: [
                torch.rand((rows, cols), dtype=torch.float16, device=f"cuda:{device}") * 2 - 1
            ],
            cat_expect,
            (rows, cols),
        ),
        LargeCase(
            "pad of 2**31 + 3 half",
            fd_pad,
            lambda torch, device: [
                torch.rand(n, dtype=torch.float16, device=f"cuda:{device}") * 2 - 1
            ],
            pad_expect,
            (n + 12,),
        ),
    ]


def ops_covered(cases: list[FuzzCase]) -> set[str]:
    return {name for c in cases for name in c.ops}


# The ops the corpus must reach (every op of the op table a fusion can write).
# rng_state is no frontend op: uniform/normal make it when given no seed (the fuzzer gives one,
# so that a fusion's GPU run and its reference draw the same numbers).
EVERY_OP = {
    k.value for k in OpKind if not k.is_input and k not in (OpKind.CONSTANT, OpKind.RNG_STATE)
}
ELEMENTWISE_OPS = {k.value for k in ELEMENTWISE}


def random_params(segment, device, seed: int):  # noqa: ANN001, ANN201
    """A valid point of the segment's search space other than the default, drawn with
    `seed` (the same for the same segment and seed), or None when 50 draws found none; for
    half the normalizations whose default rows can be staged (`stage_rows`), those."""
    from tunefuse.schedulers import scheduler_for, with_values

    sched = scheduler_for(segment.scheduler)
    space = sched.search_space(segment, device)
    default = sched.default_params(segment, device)
    rng = np.random.default_rng([seed & 0xFFFFFFFF, int(segment.kernel_key[:8], 16)])
    # Rows staged through shared memory are valid only beside held rows one a lane, which a
    # uniform draw seldom gives: half the normalizations that may stage their default rows do.
    if "stage_rows" in space and rng.random() < 0.5:
        staged = with_values(default, {"stage_rows": True, "rows_per_lane": 1})
        if sched.is_valid(segment, device, staged) is None:
            return staged
    for _ in range(50):
        point = {
            name: dist.choices[int(rng.integers(len(dist.choices)))] for name, dist in space.items()
        }
        params = with_values(default, point)
        if "split" in point and rng.random() < 0.5:
            # Any split, not only the search space's powers of two: uneven shares, shares of
            # a lane or two, and more shares than elements (empty ones) must all be right.
            from tunefuse.schedulers.reduction import MAX_SPLIT, sizes

            params = with_values(
                params, {"split": int(rng.integers(2, min(MAX_SPLIT, 2 * sizes(segment)[1] + 3)))}
            )
        if params != default and sched.is_valid(segment, device, params) is None:
            return params
    return None


def device_plan(case: FuzzCase, split=None, device=None):  # noqa: ANN001, ANN201
    """The plan `fd.execute` makes for the case's inputs on the GPU: each array with its own
    strides and alignment (host arrays are copied contiguous before a kernel reads them), so
    the CPU interpreter runs the strided, offset, expanded and in-place paths the GPU corpus
    runs (a strided input written in place, first seen on the GPU). `split`: the plan's
    split policy (which normalizations become a kernel a pass; default none); `device`: the
    GPU profile planned for (None: none, every normalization one kernel)."""
    from dataclasses import replace

    from tunefuse.arrays import Device, describe_array
    from tunefuse.planning.plan import plan_for
    from tunefuse.planning.signature import TensorSignature, bind_inputs

    bound = bind_inputs(case.fd.fusion, case.inputs)
    signature = []
    for sig, array, layout in zip(bound.signature, case.inputs, case.layouts):
        if isinstance(sig, TensorSignature):
            sig = replace(
                sig,
                strides=describe_array(array).strides,
                device=Device.CUDA,
                alignment=min(array.itemsize, 16) if layout == "offset" else 16,
            )
        signature.append(sig)
    return plan_for(
        case.fd.fusion, replace(bound, signature=tuple(signature)), device=device, split=split
    )
