"""CUDA for a pointwise segment (and a transpose whose reads and writes agree).

Two shapes of kernel, chosen by `Params.split`:
- flat (split 0): one grid-stride loop over the collapsed iteration space; each group of
  `vector` elements is unravelled into every index (a div/mod per dim);
- 2-D (split s >= 1): threads along x cover dims [s, rank) (the inner part, unravelled once a
  thread), a grid-stride loop along y covers dims [0, s) (the outer part). Inner index math,
  inner offsets and the loads that do not move with the outer dims (a bias broadcast along
  rows) are computed once a thread, outside the loop; an iteration only unravels the outer
  index: none at all for s = 1. Block shape: blockDim.x * blockDim.y = block_size, read at
  run time, so that one binary serves every shape.

Rows (`Params.rows` r > 1, flat only, the vector a whole innermost row of `vector` elements):
a group is r rows, r * vector elements, stored at once. Each load is read by the way it walks
the rows (schedulers.pointwise.row_access): across them in one vector, one vector of the row
(a broadcast along the rows), one vector along the rows for each element of a row (a
transposed read), or element by element.

Flat vector (`Params.flat_vector`, flat only): a group is `vector` consecutive elements of
the flat index, which may cross innermost rows (the innermost extent need not divide by the
vector). Dense operands (schedulers.pointwise.dense_offset: every store, and the loads that
walk the space as the stores do) move the group at once; every other load is read element by
element at indices carried from the group's first element (no division an element). The
numel % vector elements past the last whole group run one a thread, in block 0.

With `evict_first`, loads that read each element once are evict-first (`tf_ld_stream`).
A load behind a pad/cat guard is read only where its branch is taken (codegen/guards.py)."""

from __future__ import annotations

from dataclasses import replace

from tunefuse.codegen.expr import (
    ExprRenderer,
    KernelArg,
    index_ctype,
    kernel_opening,
    load_text,
    moves_with_every_dim,
    render_affine,
    render_literal_affine,
    unravel_lines,
)
from tunefuse.codegen.guards import guarded_loads, paths_lane_uniform, predicate_text
from tunefuse.planning.segment import Segment
from tunefuse.schedulers.common import coeff
from tunefuse.schedulers.pointwise import Params, dense_offset, load_walk


def _extent(j: int) -> str:
    return f"E{j}"


def _index(j: int) -> str:
    return f"i{j}"


def emit_pointwise(segment: Segment, name: str, args: list[KernelArg], p: Params) -> str:
    return _PointwiseEmitter(segment, p).emit(name, args)


class _PointwiseEmitter:
    def __init__(self, segment: Segment, p: Params) -> None:
        self.s = segment
        self.p = p
        self.it = index_ctype(segment)
        self.rank = len(segment.extents)
        self.last = self.rank - 1
        self.vec = p.vector
        self.rows = p.rows
        self.group = p.vector * p.rows  # elements a group
        self.outer = list(range(p.split))
        self.inner = list(range(p.split, self.rank))
        # Loads behind a pad/cat guard: read only where their branch is taken. One whose
        # branch is the same for a whole vector of lanes is still one vector load, predicated
        # on the branch at the first lane; any other is read a lane at a time inside its branch.
        self.guarded = guarded_loads(st.expr for st in segment.stores)
        self.vector_loads = {
            k
            for k, ld in enumerate(segment.loads)
            if self.vec > 1
            and ld.offset.is_affine
            and coeff(ld.offset, segment, self.last) == 1
            and (
                k not in self.guarded
                or paths_lane_uniform(
                    self.guarded[k], self.last, segment.extents[self.last], self.vec
                )
            )
        }
        # A vector along the flat index: the dense loads move it at once, others (and any
        # behind a guard) are read element by element at the carried indices.
        self.flat_vector = p.flat_vector and self.vec > 1
        if self.flat_vector:
            self.vector_loads = {
                k
                for k, ld in enumerate(segment.loads)
                if k not in self.guarded and dense_offset(segment, ld.offset)
            }
        # Several rows a group: how each load walks them. A load behind a guard is read
        # element by element, in its branch (each element's guard is its own).
        self.walks: dict[int, str] = {}
        if self.rows > 1:
            self.vector_loads = set()
            for k in range(len(segment.loads)):
                walk = None if k in self.guarded else load_walk(segment, k, p)
                if walk is not None:
                    self.walks[k] = walk
        self.streamed = {
            k
            for k in range(len(segment.loads))
            if p.evict_first and moves_with_every_dim(segment, k)
        }
        stored = segment.stored_buffers
        # 2-D: loads that stay put along the outer dims are read once a thread, before the loop.
        self.hoisted = {
            k
            for k, ld in enumerate(segment.loads)
            if p.split
            and ld.offset.is_affine
            and ld.buffer not in stored
            and k not in self.guarded
            and all(coeff(ld.offset, segment, j) == 0 for j in self.outer)
        }

    # -- offsets ----------------------------------------------------------------------
    def terms(self, offset, side: str, k: int, dims: list[int]) -> list[str]:  # noqa: ANN001
        out = []
        for atom, c in offset.terms:
            if atom.k in dims:
                out.append(f"i{atom.k}" if c == 1 else f"{side}{k}_s{atom.k} * i{atom.k}")
        return out

    def offset(self, offset, side: str, k: int) -> str:  # noqa: ANN001
        """An access's offset at the group's first element. In a 2-D kernel the inner terms
        are a per-thread constant (`<side><k>_in`) computed before the loop."""
        if not (self.p.split and offset.is_affine):
            return render_affine(offset, side, k, _index, self.it)
        return " + ".join(
            [f"{side}{k}_o", *self.terms(offset, side, k, self.outer), f"{side}{k}_in"]
        )

    def inner_offsets(self, indent: str) -> list[str]:
        lines = []
        for side, accesses in (("L", self.s.loads), ("S", self.s.stores)):
            for k, acc in enumerate(accesses):
                if acc.offset.is_affine:
                    terms = self.terms(acc.offset, side, k, self.inner) or [f"({self.it})0"]
                    lines.append(f"{indent}const {self.it} {side}{k}_in = {' + '.join(terms)};")
        return lines

    # -- the body of one group of `vector` elements --------------------------------------
    def var_name(self, j: int) -> str:
        if self.flat_vector:
            return f"c{j}"
        if self.rows > 1 and j == self.last:
            return f"(e % {self.vec})"
        if self.rows > 1 and j == self.last - 1:
            return f"(i{j} + e / {self.vec})"
        return f"(i{j} + e)" if j == self.last and self.vec > 1 else f"i{j}"

    def vector_type(self, dtype) -> str:  # noqa: ANN001
        return f"TfVec<{dtype.cuda}, {self.vec}>"

    def load_lines(self, ks: list[int], indent: str, prefix: str) -> list[str]:
        """Vector loads of `ks` (v<k>, or h<k> when hoisted), and for a hoisted scalar load its
        `vector` elements (h<k>[e])."""
        lines = []
        for k in ks:
            ld = self.s.loads[k]
            if k in self.vector_loads:
                vt = self.vector_type(ld.dtype)
                text = load_text(ld.buffer, self.offset(ld.offset, "L", k), k in self.streamed, vt)
                if k in self.guarded:
                    taken = predicate_text(
                        self.guarded[k], lambda idx: render_literal_affine(idx, _index, "long long")
                    )
                    lines.append(f"{indent}{vt} {prefix}{k}{{}};")
                    lines.append(f"{indent}if ({taken}) {prefix}{k} = {text};")
                else:
                    lines.append(f"{indent}const {vt} {prefix}{k} = {text};")
            elif prefix == "h":
                text = load_text(
                    ld.buffer,
                    render_affine(ld.offset, "L", k, self.var_name, self.it),
                    k in self.streamed,
                )
                lines.append(f"{indent}{ld.dtype.cuda} h{k}[{self.vec}];")
                lines.append(f"{indent}#pragma unroll")
                lines.append(f"{indent}for (int e = 0; e < {self.vec}; ++e) h{k}[e] = {text};")
        return lines

    def row_load_lines(self, indent: str) -> list[str]:
        """Several rows a group: the loads of the rows' walks (`self.walks`), before the
        element loop. The group starts at a row's first element (i<last> is 0)."""
        lines = []
        for k, walk in sorted(self.walks.items()):
            ld = self.s.loads[k]
            stream = k in self.streamed
            if walk in ("span", "row"):
                vt = f"TfVec<{ld.dtype.cuda}, {self.group if walk == 'span' else self.vec}>"
                text = load_text(ld.buffer, self.offset(ld.offset, "L", k), stream, vt)
                lines.append(f"{indent}const {vt} v{k} = {text};")
                continue
            vt = f"TfVec<{ld.dtype.cuda}, {self.rows}>"
            at = render_affine(
                ld.offset, "L", k, lambda j: "c" if j == self.last else f"i{j}", self.it
            )
            lines.append(f"{indent}{vt} v{k}[{self.vec}];")
            lines.append(f"{indent}#pragma unroll")
            lines.append(
                f"{indent}for (int c = 0; c < {self.vec}; ++c) v{k}[c] = {load_text(ld.buffer, at, stream, vt)};"
            )
        return lines

    def group_body(self, indent: str) -> list[str]:
        s = self.s
        lines = self.load_lines(sorted(self.vector_loads - self.hoisted), indent, "v")
        lines += self.row_load_lines(indent)
        for k, st in enumerate(s.stores):
            lines.append(f"{indent}TfVec<{st.dtype.cuda}, {self.group}> o{k};")
        lines.append(f"{indent}#pragma unroll")
        lines.append(f"{indent}for (int e = 0; e < {self.group}; ++e) {{")

        def load(k: int) -> str:
            walk = self.walks.get(k)
            if walk == "span":
                return f"v{k}.v[e]"
            if walk == "row":
                return f"v{k}.v[e % {self.vec}]"
            if walk == "column":
                return f"v{k}[e % {self.vec}].v[e / {self.vec}]"
            if k in self.hoisted:
                return f"h{k}.v[e]" if k in self.vector_loads else f"h{k}[e]"
            if k in self.vector_loads:
                return f"v{k}.v[e]"
            ld = s.loads[k]
            return load_text(
                ld.buffer,
                render_affine(ld.offset, "L", k, self.var_name, self.it),
                k in self.streamed,
            )

        r = ExprRenderer(s, load, self.var_name, lambda e: "", indent=indent + "  ")
        for k, st in enumerate(s.stores):
            v = r.value(st.expr)
            cast = v if r.dtype(st.expr) is st.dtype else f"tf_cast<{st.dtype.cuda}>({v})"
            r.emit(f"o{k}.v[e] = {cast};")
        lines += r.lines
        if self.flat_vector:
            lines.append(f"{indent}  {self.carry(self.last)}")
        lines.append(f"{indent}}}")
        for k, st in enumerate(s.stores):
            off = self.offset(st.offset, "S", k)
            if self.group > 1:
                lines.append(
                    f"{indent}*reinterpret_cast<TfVec<{st.dtype.cuda}, {self.group}>*>(&B{st.buffer}[{off}]) = o{k};"
                )
            else:
                lines.append(f"{indent}B{st.buffer}[{off}] = o{k}.v[0];")
        return lines

    def carry(self, j: int) -> str:
        """C that steps the carried indices c0..c<j> on to the next element (row-major)."""
        if j == 0:
            return "++c0;"
        return f"if (++c{j} == E{j}) {{ c{j} = 0; {self.carry(j - 1)} }}"

    # -- kernels --------------------------------------------------------------------------
    def emit(self, name: str, args: list[KernelArg]) -> str:
        p = self.p
        lines = [kernel_opening(name, args, p.block_size)]
        if p.split == 0:
            lines += self.flat()
        else:
            lines += self.two_d()
        lines.append("}")
        return "\n".join(lines)

    def flat(self) -> list[str]:
        p, it, vec = self.p, self.it, self.vec
        numel = " * ".join(f"({it})E{j}" for j in range(self.rank))
        group = self.group
        lines = [
            f"  const {it} groups = {numel} / {group};",
            f"  const {it} step = ({it})gridDim.x * {p.block_size * p.unroll};",
            f"  for ({it} base = ({it})blockIdx.x * {p.block_size * p.unroll} + threadIdx.x; "
            "base < groups; base += step) {",
            "    #pragma unroll",
            f"    for (int u = 0; u < {p.unroll}; ++u) {{",
            f"      const {it} g = base + ({it})u * {p.block_size};",
            "      if (g >= groups) break;",
        ]
        if self.rows > 1:  # a group starts a row: unravel the row index alone
            lines.append(f"      const {it} first = g * {self.rows};")
            lines += unravel_lines(list(range(self.last)), "first", _extent, _index, it, "      ")
            lines.append(f"      const {it} i{self.last} = 0;")
        else:
            lines.append(f"      const {it} first = g * {vec};")
            lines += unravel_lines(list(range(self.rank)), "first", _extent, _index, it, "      ")
        if self.flat_vector:
            lines += [f"      {it} c{j} = i{j};" for j in range(self.rank)]
        lines += self.group_body("      ")
        lines += ["    }", "  }"]
        if self.flat_vector:
            lines += self.flat_tail(numel)
        return lines

    def flat_tail(self, numel: str) -> list[str]:
        """A flat vector's elements past the last whole group (numel % vector of them): one
        a thread of block 0, the body of a vector of 1."""
        it = self.it
        scalar = _PointwiseEmitter(self.s, replace(self.p, vector=1, unroll=1, flat_vector=False))
        lines = [
            f"  const {it} tail_first = groups * {self.vec};",
            f"  if (blockIdx.x == 0 && ({it})threadIdx.x < {numel} - tail_first) {{",
            f"    const {it} first = tail_first + ({it})threadIdx.x;",
        ]
        lines += unravel_lines(list(range(self.rank)), "first", _extent, _index, it, "    ")
        lines += scalar.group_body("    ")
        lines.append("  }")
        return lines

    def two_d(self) -> list[str]:
        p, it, vec = self.p, self.it, self.vec
        inner = " * ".join(f"({it})E{j}" for j in self.inner)
        outer = " * ".join(f"({it})E{j}" for j in self.outer)
        lines = [
            f"  const {it} inner_groups = {inner} / {vec};",
            f"  const {it} outer = {outer};",
            f"  const {it} g = ({it})blockIdx.x * blockDim.x + threadIdx.x;",
            "  if (g >= inner_groups) return;",
            f"  const {it} first = g * {vec};",
        ]
        lines += unravel_lines(self.inner, "first", _extent, _index, it, "  ")
        lines += self.inner_offsets("  ")
        lines += self.load_lines(sorted(self.hoisted), "  ", "h")
        lines += [
            f"  const {it} step = ({it})gridDim.y * blockDim.y * {p.unroll};",
            f"  for ({it} base = ({it})blockIdx.y * blockDim.y * {p.unroll} + threadIdx.y; "
            "base < outer; base += step) {",
            "    #pragma unroll",
            f"    for (int u = 0; u < {p.unroll}; ++u) {{",
            f"      const {it} o = base + ({it})u * blockDim.y;",
            "      if (o >= outer) break;",
        ]
        lines += unravel_lines(self.outer, "o", _extent, _index, it, "      ")
        lines += self.group_body("      ")
        lines += ["    }", "  }"]
        return lines
