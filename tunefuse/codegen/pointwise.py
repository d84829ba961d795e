"""CUDA for a pointwise segment (and a transpose whose reads and writes agree)."""

from __future__ import annotations

from tunefuse.codegen.expr import ExprRenderer, KernelArg, index_ctype, kernel_signature, render_affine
from tunefuse.schedulers.common import coeff
from tunefuse.schedulers.pointwise import Params
from tunefuse.segment import Segment


def emit_pointwise(segment: Segment, name: str, args: list[KernelArg], p: Params) -> str:
    itype = index_ctype(segment)
    rank = len(segment.extents)
    last = rank - 1
    vec = p.vector
    lines = [kernel_signature(name, args, p.block_size) + " {"]
    numel = " * ".join(f"({itype})E{j}" for j in range(rank))
    lines.append(f"  const {itype} numel = {numel};")
    lines.append(f"  const {itype} groups = numel / {vec};")
    lines.append(f"  const {itype} step = ({itype})gridDim.x * {p.block_size * p.unroll};")
    lines.append(f"  for ({itype} base = ({itype})blockIdx.x * {p.block_size * p.unroll} + threadIdx.x; base < groups; base += step) {{")
    lines.append("    #pragma unroll")
    lines.append(f"    for (int u = 0; u < {p.unroll}; ++u) {{")
    lines.append(f"      const {itype} g = base + ({itype})u * {p.block_size};")
    lines.append("      if (g >= groups) break;")
    lines.append(f"      {itype} rem = g * {vec};")
    for j in reversed(range(1, rank)):
        lines.append(f"      const {itype} i{j} = rem % E{j}; rem /= E{j};")
    lines.append(f"      const {itype} i0 = rem;")
    vector_loads = {
        k for k, ld in enumerate(segment.loads)
        if vec > 1 and ld.offset.is_affine and coeff(ld.offset, segment, last) == 1
    }
    for k in sorted(vector_loads):
        ld = segment.loads[k]
        t = ld.dtype.cuda
        off = render_affine(ld.offset, "L", k, lambda j: f"i{j}", itype)
        lines.append(f"      const TfVec<{t}, {vec}> v{k} = *reinterpret_cast<const TfVec<{t}, {vec}>*>(&B{ld.buffer}[{off}]);")
    for k, st in enumerate(segment.stores):
        lines.append(f"      TfVec<{st.dtype.cuda}, {vec}> o{k};")
    lines.append("      #pragma unroll")
    lines.append(f"      for (int e = 0; e < {vec}; ++e) {{")

    def var_name(j: int) -> str:
        return f"(i{j} + e)" if j == last and vec > 1 else f"i{j}"

    def load(k: int) -> str:
        if k in vector_loads:
            return f"v{k}.v[e]"
        ld = segment.loads[k]
        return f"B{ld.buffer}[{render_affine(ld.offset, 'L', k, var_name, itype)}]"

    r = ExprRenderer(segment, load, var_name, lambda e: "", indent="        ")
    for k, st in enumerate(segment.stores):
        v = r.value(st.expr)
        cast = v if r.dtype(st.expr) is st.dtype else f"tf_cast<{st.dtype.cuda}>({v})"
        r.emit(f"o{k}.v[e] = {cast};")
    lines += r.lines
    lines.append("      }")
    for k, st in enumerate(segment.stores):
        off = render_affine(st.offset, "S", k, lambda j: f"i{j}", itype)
        if vec > 1:
            lines.append(f"      *reinterpret_cast<TfVec<{st.dtype.cuda}, {vec}>*>(&B{st.buffer}[{off}]) = o{k};")
        else:
            lines.append(f"      B{st.buffer}[{off}] = o{k}.v[0];")
    lines += ["    }", "  }", "}"]
    return "\n".join(lines)
