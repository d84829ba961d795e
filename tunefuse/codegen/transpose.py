"""CUDA for a transpose segment: a tile read along the reads' innermost dim, staged in
padded shared memory, written along the writes' innermost dim. Loads that read each
element once are evict-first."""

from __future__ import annotations

from tunefuse.codegen.expr import (
    ExprRenderer,
    KernelArg,
    index_ctype,
    kernel_signature,
    load_text,
    moves_with_every_dim,
    render_affine,
)
from tunefuse.schedulers.transpose import Params, tiled_dims
from tunefuse.segment import Segment


def emit_transpose(segment: Segment, name: str, args: list[KernelArg], p: Params) -> str:
    it = index_ctype(segment)
    a, b = tiled_dims(segment)  # type: ignore[misc]
    others = [j for j in range(len(segment.extents)) if j not in (a, b)]
    tile, rows, pad = p.tile, p.block_rows, p.padding
    lines = [kernel_signature(name, args, tile * rows) + " {"]
    for k, st in enumerate(segment.stores):
        lines.append(f"  __shared__ {st.dtype.cuda} tile{k}[{tile}][{tile + pad}];")
    rest = " * ".join(f"({it})E{j}" for j in others) or f"({it})1"
    lines.append(f"  const {it} rest = {rest};")
    lines.append(f"  const {it} b0 = ({it})blockIdx.x * {tile};")
    lines.append(f"  const {it} a0 = ({it})blockIdx.y * {tile};")
    lines.append(f"  for ({it} z = blockIdx.z; z < rest; z += gridDim.z) {{")
    if others:
        lines.append(f"    {it} z_rem = z;")
        for j in reversed(others[1:]):
            lines.append(f"    const {it} i{j} = z_rem % E{j}; z_rem /= E{j};")
        lines.append(f"    const {it} i{others[0]} = z_rem;")
    lines.append(f"    for (int y = threadIdx.y; y < {tile}; y += {rows}) {{")
    lines.append(f"      const {it} i{b} = b0 + threadIdx.x;")
    lines.append(f"      const {it} i{a} = a0 + y;")
    lines.append(f"      if (i{b} < E{b} && i{a} < E{a}) {{")

    def load(k: int) -> str:
        ld = segment.loads[k]
        offset = render_affine(ld.offset, "L", k, lambda j: f"i{j}", it)
        return load_text(ld.buffer, offset, moves_with_every_dim(segment, k))

    r = ExprRenderer(segment, load, lambda j: f"i{j}", lambda e: "", indent="        ")
    for k, st in enumerate(segment.stores):
        v = r.value(st.expr)
        cast = v if r.dtype(st.expr) is st.dtype else f"tf_cast<{st.dtype.cuda}>({v})"
        r.emit(f"tile{k}[y][threadIdx.x] = {cast};")
    lines += r.lines
    lines += ["      }", "    }", "    __syncthreads();"]
    lines.append(f"    for (int y = threadIdx.y; y < {tile}; y += {rows}) {{")
    lines.append(f"      const {it} i{a} = a0 + threadIdx.x;")
    lines.append(f"      const {it} i{b} = b0 + y;")
    lines.append(f"      if (i{b} < E{b} && i{a} < E{a}) {{")
    for k, st in enumerate(segment.stores):
        off = render_affine(st.offset, "S", k, lambda j: f"i{j}", it)
        lines.append(f"        B{st.buffer}[{off}] = tile{k}[threadIdx.x][y];")
    lines += ["      }", "    }", "    __syncthreads();", "  }", "}"]
    return "\n".join(lines)
