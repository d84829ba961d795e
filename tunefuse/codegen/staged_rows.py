"""CUDA for rows staged through shared memory (`schedulers.normalization` `stage_rows`).

A block's trip over its rows copies their elements of each staged input from memory into
shared memory with all of the block's threads, consecutive threads at consecutive vectors
(each warp-wide load one run of memory, however short the rows), and each lane fills its
held registers from there; full-size outputs are written to shared memory and copied out the
same way. Only where the rows lie back to back at run time (each staged access's row stride
is n_red, checked in `declarations`): the kernel keeps the direct reads and writes for other
strides, and `tf_stage` picks one for the whole grid.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tunefuse.codegen.expr import KernelArg, load_text, render_affine
from tunefuse.planning.indexing import Affine, Var


@dataclass(frozen=True)
class StagedAccess:
    """A load ("L") or full-size store ("S") staged in `array`, `width` elements a copy."""

    side: str
    k: int
    buffer: int
    ctype: str
    width: int
    offset: Affine
    stream: bool = False  # a load of data read once: evict-first (`expr.load_text`)

    @property
    def array(self) -> str:
        return f"tf_s{self.side.lower()}{self.k}"

    @property
    def vector_type(self) -> str | None:
        return f"TfVec<{self.ctype}, {self.width}>" if self.width > 1 else None


def staged(side: str, k: int, access, width: int, stream: bool = False) -> StagedAccess:  # noqa: ANN001
    """Load ("L") or store ("S") k of a segment (a Load or Store), staged `width` elements a
    copy."""
    return StagedAccess(side, k, access.buffer, access.dtype.cuda, width, access.offset, stream)


def row_stride(access: StagedAccess, args: Sequence[KernelArg], extent: int) -> str:
    """C for the access's stride between rows (dim 0): its argument, or the literal where
    the kernel has none (a stride of 1)."""
    name = f"{access.side}{access.k}_s0"
    if any(a.name == name for a in args):
        return name
    return str(access.offset.coeff(Var(0, extent)))


def declarations(
    accesses: Sequence[StagedAccess],
    args: Sequence[KernelArg],
    extent: int,
    held: int,
    row_bound: int,
    itype: str,
) -> list[str]:
    """The staged regions (`held` elements each: rows_per_block rows of at most `row_bound`
    elements), the block's flat thread index and `tf_stage`, true where every staged
    access's rows lie back to back and a row fits the region's rows."""
    lines = [f"  __align__(16) __shared__ {a.ctype} {a.array}[{held}];" for a in accesses]
    lines.append("  const int tf_sid = (int)(threadIdx.y * blockDim.x + threadIdx.x);")
    checks = [f"n_red <= ({itype}){row_bound}"]
    checks += [f"({itype})({row_stride(a, args, extent)}) == n_red" for a in accesses]
    lines.append(f"  const bool tf_stage = {' && '.join(checks)};")
    return lines


def _copies(
    accesses: Sequence[StagedAccess],
    indent: str,
    threads: int,
    rows: int,
    held: int,
    itype: str,
    copy: Callable[[StagedAccess, str], str],
) -> list[str]:
    """The block's rows' elements of each access, `copy(access, base)` a width of them at e
    (base: the block's first row's first element in memory)."""
    lines = [
        f"{indent}const {itype} tf_rows = n_out - row_base < ({itype}){rows} "
        f"? n_out - row_base : ({itype}){rows};",
        f"{indent}const {itype} tf_n = tf_rows * n_red;",
    ]
    for a in accesses:
        base = render_affine(a.offset, a.side, a.k, lambda j: "row_base" if j == 0 else "0", itype)
        trips = -(-held // (threads * a.width))
        lines += [
            f"{indent}#pragma unroll",
            f"{indent}for (int u = 0; u < {trips}; ++u) {{",
            f"{indent}  const {itype} e = (({itype})u * {threads} + ({itype})tf_sid) * {a.width};",
            f"{indent}  if (e < tf_n) {copy(a, base)}",
            f"{indent}}}",
        ]
    return lines


def copy_in(
    loads: Sequence[StagedAccess], indent: str, threads: int, rows: int, held: int, itype: str
) -> list[str]:
    """At the top of a trip: once every thread is done with the last trip's staged rows, the
    block's rows of each staged load into its region, then a barrier."""

    def copy(a: StagedAccess, base: str) -> str:
        value = load_text(a.buffer, f"{base} + e", a.stream, a.vector_type)
        if a.vector_type is None:
            return f"{a.array}[e] = {value};"
        return f"*reinterpret_cast<{a.vector_type}*>(&{a.array}[e]) = {value};"

    body = _copies(loads, indent + "  ", threads, rows, held, itype, copy) if loads else []
    barrier = [f"{indent}  __syncthreads();"] if loads else []
    return [
        f"{indent}if (tf_stage) {{",
        f"{indent}  __syncthreads();",
        *body,
        *barrier,
        f"{indent}}}",
    ]


def copy_out(
    stores: Sequence[StagedAccess], indent: str, threads: int, rows: int, held: int, itype: str
) -> list[str]:
    """At the end of a trip: once every lane has written its rows' outputs to shared memory,
    each staged store's region to memory (the next trip's first barrier keeps it from being
    written again before it is read)."""
    if not stores:
        return []

    def copy(a: StagedAccess, base: str) -> str:
        if a.vector_type is None:
            return f"B{a.buffer}[{base} + e] = {a.array}[e];"
        vt = a.vector_type
        return (
            f"*reinterpret_cast<{vt}*>(&B{a.buffer}[{base} + e]) = "
            f"*reinterpret_cast<const {vt}*>(&{a.array}[e]);"
        )

    return [
        f"{indent}if (tf_stage) {{",
        f"{indent}  __syncthreads();",
        *_copies(stores, indent + "  ", threads, rows, held, itype, copy),
        f"{indent}}}",
    ]


def at(itype: str, index: str) -> str:
    """A lane's element `index` of its row (`to` of the block's) in a staged region."""
    return f"({itype})to * n_red + {index}"
