"""CUDA for a transpose segment: a tile read along the reads' innermost dim, staged in
padded shared memory, written along the writes' innermost dim. With `vector` V a thread
reads V consecutive elements along the read dim and writes V consecutive ones along the
write dim (one 16-byte access each side for fp32 at V = 4). With `evict_first`, loads that
read each element once are evict-first. A load behind a pad/cat guard is read only inside
its branch (codegen/guards.py)."""

from __future__ import annotations

from tunefuse.codegen.expr import (
    ExprRenderer,
    KernelArg,
    index_ctype,
    kernel_opening,
    load_text,
    moves_with_every_dim,
    render_affine,
    unravel_lines,
)
from tunefuse.codegen.guards import guarded_loads
from tunefuse.planning.segment import Segment
from tunefuse.schedulers.common import coeff
from tunefuse.schedulers.transpose import Params, narrow_loads, tiled_dims


def rows_loop(tile: int, rows: int, unrolled: bool) -> list[str]:
    """The opening of a loop over a thread's rows y of the tile (threadIdx.y, + rows, ...):
    `unrolled`, tile / rows trips of known count."""
    if not unrolled:
        return [f"    for (int y = threadIdx.y; y < {tile}; y += {rows}) {{"]
    return [
        "    #pragma unroll",
        f"    for (int r = 0; r < {tile // rows}; ++r) {{",
        f"      const int y = threadIdx.y + r * {rows};",
    ]


def emit_transpose(segment: Segment, name: str, args: list[KernelArg], p: Params) -> str:
    it = index_ctype(segment)
    a, b = tiled_dims(segment)  # type: ignore[misc]
    others = [j for j in range(len(segment.extents)) if j not in (a, b)]
    tile, rows, pad, vec = p.tile, p.block_rows, p.padding, p.vector
    lines = [kernel_opening(name, args, tile // vec * rows)]
    for k, st in enumerate(segment.stores):
        lines.append(f"  __shared__ {st.dtype.cuda} tile{k}[{tile}][{tile + pad}];")
    rest = " * ".join(f"({it})E{j}" for j in others) or f"({it})1"
    lines.append(f"  const {it} rest = {rest};")
    # One grid dim of tiles (a tall input has more rows of tiles than a grid's y could hold),
    # consecutive along a (`along_writes`: the sectors a tile's stores leave part-written are
    # finished by the next tile's while both are in L2) or along b (they read whole rows;
    # the scheduler's READ_ROW_TILES says which).
    (fast, e), slow = (("a", a), "b") if p.along_writes else (("b", b), "a")
    lines.append(f"  const {it} tiles = ((({it})E{e}) + {tile - 1}) / {tile};")
    lines.append(f"  const {it} {fast}0 = (({it})blockIdx.x % tiles) * {tile};")
    lines.append(f"  const {it} {slow}0 = (({it})blockIdx.x / tiles) * {tile};")
    lines.append(f"  const int lane = threadIdx.x * {vec};")
    lines.append(f"  for ({it} z = blockIdx.z; z < rest; z += gridDim.z) {{")
    lines += unravel_lines(others, "z", lambda j: f"E{j}", lambda j: f"i{j}", it, "    ")
    # Read phase: thread (x, y) takes elements lane .. lane + V - 1 of the tile's rows y,
    # y + rows, ... Where its loads are narrower than 16 bytes (odd extents leave vector 1),
    # as a loop of tile / rows trips, a count the compiler knows: unrolled, every row's loads
    # are in flight before it waits on any (a loop from threadIdx.y has a trip count it does
    # not know: one load in flight a thread). H100: bf16 [777, 111011] 443.9 -> 346.2 us,
    # fp32 [151, 277319] 289.6 -> 228.4; 16-byte loads lost 4% so (bf16 [1024, 131072]
    # 198.5 -> 206.2) and keep the loop from threadIdx.y.
    narrow = narrow_loads(segment, vec)
    lines += rows_loop(tile, rows, narrow)
    lines.append(f"      const {it} i{b} = b0 + lane;")
    lines.append(f"      const {it} i{a} = a0 + y;")
    lines.append(f"      if (i{b} < E{b} && i{a} < E{a}) {{")
    guarded = guarded_loads(st.expr for st in segment.stores)  # read inside their branch only
    vector_loads = [
        k
        for k, ld in enumerate(segment.loads)
        if vec > 1
        and ld.offset.is_affine
        and coeff(ld.offset, segment, b) == 1
        and k not in guarded
    ]
    for k in vector_loads:
        ld = segment.loads[k]
        vt = f"TfVec<{ld.dtype.cuda}, {vec}>"
        offset = render_affine(ld.offset, "L", k, lambda j: f"i{j}", it)
        lines.append(
            f"        const {vt} v{k} = "
            f"{load_text(ld.buffer, offset, p.evict_first and moves_with_every_dim(segment, k), vt)};"
        )

    def var_name(j: int) -> str:
        return f"(i{j} + e)" if j == b and vec > 1 else f"i{j}"

    def load(k: int) -> str:
        if k in vector_loads:
            return f"v{k}.v[e]"
        ld = segment.loads[k]
        offset = render_affine(ld.offset, "L", k, var_name, it)
        return load_text(ld.buffer, offset, p.evict_first and moves_with_every_dim(segment, k))

    lines.append("        #pragma unroll")
    lines.append(f"        for (int e = 0; e < {vec}; ++e) {{")
    r = ExprRenderer(segment, load, var_name, lambda e: "", indent="          ")
    for k, st in enumerate(segment.stores):
        v = r.value(st.expr)
        cast = v if r.dtype(st.expr) is st.dtype else f"tf_cast<{st.dtype.cuda}>({v})"
        r.emit(f"tile{k}[y][lane + e] = {cast};")
    lines += r.lines
    lines += ["        }", "      }", "    }", "    __syncthreads();"]
    # Write phase: thread (x, y) writes elements lane .. lane + V - 1 of the output's row y,
    # column lane + e of the tile's row y (rows y, y + rows, ... as above).
    lines += rows_loop(tile, rows, narrow)
    lines.append(f"      const {it} i{a} = a0 + lane;")
    lines.append(f"      const {it} i{b} = b0 + y;")
    lines.append(f"      if (i{b} < E{b} && i{a} < E{a}) {{")
    for k, st in enumerate(segment.stores):
        off = render_affine(st.offset, "S", k, lambda j: f"i{j}", it)
        if vec > 1:
            vt = f"TfVec<{st.dtype.cuda}, {vec}>"
            lines.append(f"        {vt} o{k};")
            lines.append("        #pragma unroll")
            lines.append(
                f"        for (int e = 0; e < {vec}; ++e) o{k}.v[e] = tile{k}[lane + e][y];"
            )
            lines.append(f"        *reinterpret_cast<{vt}*>(&B{st.buffer}[{off}]) = o{k};")
        else:
            lines.append(f"        B{st.buffer}[{off}] = tile{k}[threadIdx.x][y];")
    lines += ["      }", "    }", "    __syncthreads();", "  }", "}"]
    return "\n".join(lines)
