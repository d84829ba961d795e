"""Rendering a segment's expressions, offsets and arguments as CUDA C++.

Sizes, strides and offsets are kernel arguments, so one binary serves every shape with the
same kernel_key and params; only a unit stride (the innermost dim of a contiguous operand)
and a zero stride (broadcast) are literal, as the kernel_key records them. A kernel whose
params ask for `static_shape` declares them as constants instead (the arguments stay, unused,
so that its launch is the same): the compiler folds the index arithmetic (a division by a
constant is a multiply and a shift), and the binary serves that shape alone. A dynamic kernel
of 32-bit indices gets that multiply and shift too: the host works out each extent's
`fast_divisor` and passes it beside the extent (F<j>).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from tunefuse.codegen.guards import condition_text
from tunefuse.codegen.math import CUDA_MATH
from tunefuse.ir.dtypes import DataType
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
    expr_dtype,
)
from tunefuse.planning.segment import Segment


@dataclass(frozen=True, slots=True)
class KernelArg:
    """One kernel parameter: its C declaration and where its value comes from."""

    name: str
    ctype: str
    kind: str  # "ptr", "extent", "divisor", "offset", "coeff", "gather", "scalar", "index_error"
    # ptr: (buffer,), extent: (var,), divisor: (var,), offset: (side, k), coeff: (side, k, var),
    # gather: (k, "extent" | "stride"), scalar: (k,), index_error: ()
    ref: tuple
    constant: int | None = None  # a static_shape kernel's value of an extent, offset or coeff


INDEX_KINDS = (
    "extent",
    "divisor",
    "offset",
    "coeff",
    "gather",
)  # arguments whose value the segment's shape decides


def index_value(segment: Segment, kind: str, ref: tuple) -> int:
    """The value an "extent", "offset" or "coeff" argument takes for this segment."""
    if kind == "extent":
        return segment.extents[ref[0]]
    if kind == "divisor":
        return fast_divisor(segment.extents[ref[0]])
    if kind == "gather":
        return getattr(segment.gathers[ref[0]], ref[1])
    accesses = {"L": segment.loads, "S": segment.stores, "G": segment.gathers}[ref[0]]
    offset = accesses[ref[1]].offset
    if kind == "offset":
        return offset.const
    j = ref[2]
    return offset.coeff(Var(j, segment.extents[j]))


def fast_divisor(d: int) -> int:
    """Division by d (1 <= d < 2**31) as a multiply and a shift, packed as (shift << 32) |
    magic: n / d == (umulhi(n, magic) + n) >> shift for every 0 <= n < 2**31, where shift is
    the least with 2**shift >= d and magic = 2**32 * (2**shift - d) // d + 1 (Granlund and
    Montgomery's round-up method; the sum cannot overflow 32 bits as n < 2**31). An extent
    of 0 is never divided by (nothing is unravelled in an empty loop): 0."""
    if d <= 0:
        return 0
    shift = (d - 1).bit_length()
    return (shift << 32) | (((1 << 32) * ((1 << shift) - d)) // d + 1)


def divisor_name(j: int) -> str:
    """The argument holding `fast_divisor` of extent j (a kernel of 32-bit indices)."""
    return f"F{j}"


def index_ctype(segment: Segment) -> str:
    return "int" if segment.index_type == "int32" else "long long"


def _offset_args(segment: Segment, side: str, k: int, offset: Affine) -> list[KernelArg]:
    if not offset.is_affine:
        return []
    itype = index_ctype(segment)
    args = [KernelArg(f"{side}{k}_o", itype, "offset", (side, k))]
    for j, e in enumerate(segment.extents):
        c = offset.coeff(Var(j, e))
        if e != 1 and c not in (0, 1):
            args.append(KernelArg(f"{side}{k}_s{j}", itype, "coeff", (side, k, j)))
    return args


def kernel_args(
    segment: Segment, buffer_dtypes: dict[int, DataType], static_shape: bool = False
) -> list[KernelArg]:
    """The parameters of a segment's kernel, in order; with `static_shape`, the index
    arguments carry their values, which the kernel declares as constants."""
    args = _kernel_args(segment, buffer_dtypes)
    if not static_shape:
        return args
    from dataclasses import replace

    return [
        replace(a, constant=index_value(segment, a.kind, a.ref)) if a.kind in INDEX_KINDS else a
        for a in args
    ]


def _kernel_args(segment: Segment, buffer_dtypes: dict[int, DataType]) -> list[KernelArg]:
    args: list[KernelArg] = []
    stored = segment.stored_buffers
    loaded = {ld.buffer for ld in segment.loads} | {g.buffer for g in segment.gathers}
    for b in segment.buffer_ids:
        t = buffer_dtypes[b].cuda
        if b in stored:
            ctype = f"{t}*" if b in loaded else f"{t}* __restrict__"
        else:
            ctype = f"const {t}* __restrict__"
        args.append(KernelArg(f"B{b}", ctype, "ptr", (b,)))
    itype = index_ctype(segment)
    args += [KernelArg(f"E{j}", itype, "extent", (j,)) for j in range(len(segment.extents))]
    if itype == "int":  # unravel_lines divides by extents 1.. (row-major, the first is not)
        args += [
            KernelArg(divisor_name(j), "long long", "divisor", (j,))
            for j in range(1, len(segment.extents))
        ]
    for k, ld in enumerate(segment.loads):
        args += _offset_args(segment, "L", k, ld.offset)
    for k, st in enumerate(segment.stores):
        args += _offset_args(segment, "S", k, st.offset)
    for k, g in enumerate(segment.gathers):
        args += _offset_args(segment, "G", k, g.offset)
        args += [
            KernelArg(f"G{k}_n", "long long", "gather", (k, "extent")),
            KernelArg(f"G{k}_st", "long long", "gather", (k, "stride")),
        ]
    for k, sc in enumerate(segment.scalars):
        args.append(KernelArg(f"s{k}", sc.dtype.compute.cuda, "scalar", (k,)))
    if segment.gathers:
        args.append(KernelArg("tf_index_error", "int* __restrict__", "index_error", ()))
    return args


def moves_with_every_dim(segment: Segment, k: int) -> bool:
    """True when load k's offset moves with every iteration dim (no broadcast), so that a
    single pass of the kernel reads each of its elements once."""
    offset = segment.loads[k].offset
    return offset.is_affine and all(
        offset.coeff(Var(j, e)) != 0 for j, e in enumerate(segment.extents) if e != 1
    )


def load_text(buffer: int, offset: str, stream: bool, vector_type: str | None = None) -> str:
    """C that loads B<buffer>[offset] (a `vector_type` from there, when given); `stream`
    loads it evict-first (`tf_ld_stream`), for data read once."""
    if vector_type is None:
        return f"tf_ld_stream(&B{buffer}[{offset}])" if stream else f"B{buffer}[{offset}]"
    pointer = f"reinterpret_cast<const {vector_type}*>(&B{buffer}[{offset}])"
    return f"tf_ld_stream({pointer})" if stream else f"*{pointer}"


def render_affine(
    offset: Affine, side: str, k: int, var_name: Callable[[int], str], itype: str
) -> str:
    """C for an offset: arguments for strides and the constant, literals for 1 and 0;
    a non-affine offset (div/mod) renders its numbers literally."""
    if offset.is_affine:
        parts = [f"{side}{k}_o"]
        for atom, c in offset.terms:
            assert isinstance(atom, Var)
            parts.append(
                var_name(atom.k) if c == 1 else f"{side}{k}_s{atom.k} * {var_name(atom.k)}"
            )
        return " + ".join(parts)
    return render_literal_affine(offset, var_name, itype)


def render_literal_affine(a: Affine, var_name: Callable[[int], str], itype: str) -> str:
    parts = [f"({itype}){a.const}"]
    for atom, c in a.terms:
        if isinstance(atom, Var):
            x = var_name(atom.k)
        elif isinstance(atom, Div):
            x = f"(({render_literal_affine(atom.x, var_name, itype)}) / ({itype}){atom.c})"
        else:
            assert isinstance(atom, Mod)
            x = f"(({render_literal_affine(atom.x, var_name, itype)}) % ({itype}){atom.c})"
        parts.append(x if c == 1 else f"({itype}){c} * {x}")
    return " + ".join(parts)


def literal(value: object, dtype: DataType) -> str:
    if dtype.is_bool:
        return "true" if value else "false"
    if dtype.is_integral:
        return f"{int(value)}LL" if dtype is DataType.Int else f"{int(value)}"
    v = float(value)  # type: ignore[arg-type]
    single = dtype is not DataType.Double
    if math.isnan(v):
        text = (
            "__int_as_float(0x7fffffff)" if single else "__longlong_as_double(0x7ff8000000000000LL)"
        )
    elif math.isinf(v):
        if single:
            text = "__int_as_float(0x7f800000)" if v > 0 else "__int_as_float(0xff800000)"
        else:
            text = (
                "__longlong_as_double(0x7ff0000000000000LL)"
                if v > 0
                else "__longlong_as_double(0xfff0000000000000LL)"
            )
    else:
        text = repr(v) + ("f" if single else "")
        if "e" not in text and "." not in text:
            text = text.replace("f", ".0f") if single else text + ".0"
    if dtype.compute is not dtype:  # half, bfloat16, the 8-bit floats: storage structs
        return f"tf_cast<{dtype.cuda}>({text})"
    return text


class ExprRenderer:
    """Emits SSA statements for expressions; each subexpression once per scope."""

    def __init__(
        self,
        segment: Segment,
        load: Callable[[int], str],
        var_name: Callable[[int], str],
        reduce_value: Callable[[EReduce], str],
        indent: str = "  ",
        prefix: str = "t",
    ) -> None:
        self.segment = segment
        self.load = load
        self.var_name = var_name
        self.reduce_value = reduce_value
        self.indent = indent
        self.lines: list[str] = []
        self.memo: dict[int, str] = {}
        self.prefix = prefix
        self.counter = [0]
        # A name holding 1 / divisor when the caller computed it once for many elements
        # (a reduction's result inside its row's loop); None: divide.
        self.reciprocal_of: Callable[[Expr], str | None] = lambda divisor: None
        # A value an earlier pass over the same elements kept in a register: its name, or
        # None to compute it. And where this pass keeps a value for a later one, or None.
        self.kept: Callable[[Expr], str | None] = lambda e: None
        self.keep: Callable[[Expr], str | None] = lambda e: None
        # The exps (by id) that are terms of a row's sum of exp(x - max) and nothing else:
        # spelled tf_exp_sum_term, as the one-pass max-and-sum spells its terms.
        self.sum_terms: frozenset[int] = frozenset()
        # The type a load's text (`load`) has where the caller holds it in another type than
        # the load's own (a 2-byte float held widened to float); None: the load's type.
        self.load_dtype: Callable[[int], DataType | None] = lambda k: None

    def dtype(self, e: Expr) -> DataType:
        if isinstance(e, ELoad):
            held = self.load_dtype(e.load)
            if held is not None:
                return held
        return expr_dtype(e, self.segment.loads, self.segment.scalars)

    def fresh(self) -> str:
        self.counter[0] += 1
        return f"{self.prefix}{self.counter[0]}"

    def emit(self, line: str) -> None:
        self.lines.append(self.indent + line)

    def value(self, e: Expr) -> str:
        key = id(e)
        if key in self.memo:
            return self.memo[key]
        text = self.kept(e)
        if text is None:
            text = self._value(e)
            slot = self.keep(e)
            if slot is not None:
                self.emit(f"{slot} = {text};")
        self.memo[key] = text
        return text

    def _value(self, e: Expr) -> str:
        if isinstance(e, ELoad):
            return self.load(e.load)
        if isinstance(e, EScalar):
            sc = self.segment.scalars[e.arg]
            return (
                f"s{e.arg}"
                if sc.dtype.compute is sc.dtype
                else f"tf_cast<{sc.dtype.cuda}>(s{e.arg})"
            )
        if isinstance(e, EConst):
            return literal(e.value, e.dtype)
        if isinstance(e, EIndex):
            name = self.fresh()
            self.emit(
                f"const long long {name} = (long long)({render_literal_affine(e.index, self.var_name, 'long long')});"
            )
            return name
        if isinstance(e, EReduce):
            return self.reduce_value(e)
        if isinstance(e, EOp):
            return self._op(e)
        if isinstance(e, EGuard):
            return self._guard(e)
        if isinstance(e, EGather):
            return self._gather(e)
        raise AssertionError(e)  # pragma: no cover

    def _gather(self, e: EGather) -> str:
        """Read only at an index inside the table; any other leaves 0 and names the gather's
        value in the index-error word (the first kernel to see one keeps its own)."""
        g = self.segment.gathers[e.gather]
        k = e.gather
        index, name = self.fresh(), self.fresh()
        self.emit(f"const long long {index} = (long long)({self.value(e.index)});")
        base = render_affine(g.offset, "G", k, self.var_name, index_ctype(self.segment))
        self.emit(f"{g.dtype.cuda} {name}{{}};")
        self.emit(
            f"if ({index} >= 0 && {index} < G{k}_n) {name} = B{g.buffer}[(long long)({base}) + {index} * G{k}_st];"
        )
        self.emit(f"else atomicCAS(tf_index_error, 0, {g.value + 1});")
        cast = name if g.dtype is e.dtype else f"tf_cast<{e.dtype.cuda}>({name})"
        return cast

    def _op(self, e: EOp) -> str:
        name = self.fresh()
        if e.op is OpKind.CAST:
            x = self.value(e.operands[0])
            same = self.dtype(e.operands[0]) is e.dtype  # a held half already widened
            self.emit(
                f"const {e.dtype.cuda} {name} = "
                + (f"{x};" if same else f"tf_cast<{e.dtype.cuda}>({x});")
            )
            return name
        if e.op in GroupOp.RANDOM:
            position, seed, offset, a, b = (self.value(x) for x in e.operands)
            compute = e.operand_dtype
            draw = f"tf_{e.op.value}<{compute.cuda}>({position}, {seed}, {offset}, {a}, {b})"
            if e.dtype is not compute:
                draw = f"tf_cast<{e.dtype.cuda}>({draw})"
            if e.op is OpKind.UNIFORM:  # [a, b) in the output's type
                hi = b if e.dtype is compute else f"tf_cast<{e.dtype.cuda}>({b})"
                draw = f"tf_below<{e.dtype.cuda}>({draw}, {hi})"
            self.emit(f"const {e.dtype.cuda} {name} = {draw};")
            return name
        from tunefuse.ir.elementwise import ELEMENTWISE

        rule = ELEMENTWISE[e.op]
        compute = e.operand_dtype.compute
        if e.op in (OpKind.DIV, OpKind.TRUEDIV) and compute.is_floating:
            reciprocal = self.reciprocal_of(e.operands[1])
            if reciprocal is not None:
                x = self.value(e.operands[0])
                x = x if self.dtype(e.operands[0]) is compute else f"tf_cast<{compute.cuda}>({x})"
                self.emit(
                    f"const {e.dtype.cuda} {name} = "
                    + (
                        f"{x} * {reciprocal};"
                        if e.dtype is compute
                        else f"tf_cast<{e.dtype.cuda}>(({compute.cuda})({x} * {reciprocal}));"
                    )
                )
                return name
        operands = []
        for k, x in enumerate(e.operands):
            target = DataType.Bool if k < rule.first_promoted else compute
            v = self.value(x)
            operands.append(v if self.dtype(x) is target else f"tf_cast<{target.cuda}>({v})")
        if e.op is OpKind.EXP and id(e) in self.sum_terms:
            body = f"tf_exp_sum_term({operands[0]})"
        else:
            body = CUDA_MATH[e.op].format(*operands, T=compute.cuda)
        result_t = DataType.Bool if e.dtype.is_bool else compute
        if e.dtype is result_t:
            self.emit(f"const {e.dtype.cuda} {name} = {body};")
        else:
            self.emit(
                f"const {e.dtype.cuda} {name} = tf_cast<{e.dtype.cuda}>(({result_t.cuda})({body}));"
            )
        return name

    def _guard(self, e: EGuard) -> str:
        name = self.fresh()
        conds = condition_text(
            e.conditions, lambda idx: render_literal_affine(idx, self.var_name, "long long")
        )
        self.emit(f"{e.dtype.cuda} {name};")
        self.emit(f"if ({conds}) {{")
        self._branch(e.then, name, e.dtype)
        self.emit("} else {")
        self._branch(e.other, name, e.dtype)
        self.emit("}")
        return name

    def _branch(self, e: Expr, target: str, dtype: DataType) -> None:
        inner = ExprRenderer(
            self.segment,
            self.load,
            self.var_name,
            self.reduce_value,
            self.indent + "  ",
            self.prefix,
        )
        inner.counter = self.counter
        inner.memo = dict(self.memo)
        inner.reciprocal_of = self.reciprocal_of
        inner.sum_terms = self.sum_terms
        v = inner.value(e)
        self.lines += inner.lines
        cast = v if inner.dtype(e) is dtype else f"tf_cast<{dtype.cuda}>({v})"
        self.lines.append(f"{self.indent}  {target} = {cast};")


def kernel_opening(
    name: str, args: list[KernelArg], block: int, cluster: int = 1, min_blocks: int = 0
) -> str:
    """The kernel's signature and opening brace; an argument with a constant is declared
    `constexpr` under its name (the parameter, renamed, goes unused). `cluster` > 1: the
    blocks are launched in clusters of that many along x (compiled in, so any launch API
    launches them so). `min_blocks` > 1: the compiler fits that many blocks on an SM (its
    registers a thread at most 65536 / (block x min_blocks))."""
    params = ",\n    ".join(
        f"{a.ctype} {a.name}{'_' if a.constant is not None else ''}" for a in args
    )
    dims = f"__cluster_dims__({cluster}, 1, 1) " if cluster > 1 else ""
    bounds = f"{block}, {min_blocks}" if min_blocks > 1 else f"{block}"
    lines = [
        f'extern "C" __global__ void {dims}__launch_bounds__({bounds}) {name}(\n    {params}) {{'
    ]
    lines += [
        f"  constexpr {a.ctype} {a.name} = {a.constant};" for a in args if a.constant is not None
    ]
    return "\n".join(lines)


def unravel_lines(
    target_vars: list[int],
    linear: str,
    extents_of: Callable[[int], str],
    var_name: Callable[[int], str],
    itype: str,
    indent: str,
) -> list[str]:
    """C that splits `linear` into the given vars (row-major, last fastest). With 32-bit
    indices a division by an extent argument E<j> is a multiply and a shift by its
    `fast_divisor` (F<j>): an integer division by a value the compiler does not know is a
    few dozen instructions, and a kernel of short outputs' runs (the sum over the middle
    dim of [A, 3, 3]) did little else (H200, bf16 [11869490, 3, 3] 128.8 us, 88.0 with the
    sizes compiled in)."""
    lines = []
    if not target_vars:
        return lines
    rem = f"{linear}_rem"
    lines.append(f"{indent}{itype} {rem} = {linear};")
    for j in reversed(target_vars[1:]):
        e = extents_of(j)
        if itype == "int" and e == f"E{j}":
            q = f"{linear}_q{j}"
            lines.append(
                f"{indent}const int {q} = tf_fast_div({rem}, {divisor_name(j)}); "
                f"const int {var_name(j)} = {rem} - {q} * {e}; {rem} = {q};"
            )
        else:
            lines.append(f"{indent}const {itype} {var_name(j)} = {rem} % {e}; {rem} /= {e};")
    lines.append(f"{indent}const {itype} {var_name(target_vars[0])} = {rem};")
    return lines
