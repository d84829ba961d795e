"""CUDA for a transpose segment: a tile read along the reads' innermost dim, staged in
padded shared memory, written along the writes' innermost dim. A thread writes `vector`
consecutive elements along the write dim and reads `read_vector` (by default as many)
consecutive ones along the read dim (one 16-byte access each side for fp32 at 4). A tile is
`tile` along the write dim and `tile_reads` (by default as many) along the read dim. With
`evict_first`, loads that read each element once are evict-first. A load behind a pad/cat
guard is read only inside its branch (codegen/guards.py)."""

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
from tunefuse.schedulers.transpose import (
    Params,
    block_threads,
    narrow_loads,
    read_lanes,
    tile_extents,
    tiled_dims,
    vectors,
)


def rows_loop(tile: int, rows: int, unrolled: bool, first: str = "threadIdx.y") -> list[str]:
    """The opening of a loop over a thread's rows y of the tile (`first`, + rows, ... below
    `tile`): `unrolled`, a known count of trips (the last one checks y where rows does not
    divide the tile)."""
    if not unrolled:
        return [f"    for (int y = {first}; y < {tile}; y += {rows}) {{"]
    lines = [
        "    #pragma unroll",
        f"    for (int r = 0; r < {-(-tile // rows)}; ++r) {{",
        f"      const int y = {first} + r * {rows};",
    ]
    if tile % rows:
        lines.append(f"      if (y >= {tile}) break;")
    return lines


BANKS = 32  # shared memory banks of 4 bytes


def bank_wavefronts(offsets: list[int], itemsize: int) -> int:
    """Wavefronts a warp's access to shared memory takes, its lanes at these element offsets:
    the most distinct 4-byte words any one bank is asked for."""
    words: dict[int, set[int]] = {}
    for off in offsets:
        word = off * itemsize // 4
        words.setdefault(word % BANKS, set()).add(word)
    return max(len(w) for w in words.values())


def tile_runs_along_writes(p: Params, itemsize: int) -> bool:
    """Whether the tile in shared memory is laid out tile[b][a] (its rows along the writes'
    dim), not tile[a][b]: the layout whose first warp's accesses of both phases take fewer
    bank wavefronts (tile[a][b] where they tie: a square tile). A tile of whole short rows
    (2 elements along the reads, 512 along the writes) read as tile[a][b] at a write vector
    of 8 has 32 lanes 8 rows apart: bf16 [16777216, 8] ran 4.6x slower so."""
    along_a, along_b = tile_extents(p)
    vec, rvec = vectors(p)
    lanes = read_lanes(p)
    warp = range(min(BANKS, block_threads(p)))
    reads = [((t % lanes) * rvec, t // lanes) for t in warp]  # (b, a) of each lane's first
    writes = [((t % (along_a // vec)) * vec, t // (along_a // vec)) for t in warp]  # (a, b)

    def cost(by_writes: bool) -> int:
        pitch = (along_a if by_writes else along_b) + p.padding

        def at(a: int, b: int) -> int:
            return b * pitch + a if by_writes else a * pitch + b

        return sum(
            bank_wavefronts([at(a, b + e) for b, a in reads], itemsize) for e in range(rvec)
        ) + sum(bank_wavefronts([at(a + e, b) for a, b in writes], itemsize) for e in range(vec))

    return cost(True) < cost(False)


def emit_transpose(segment: Segment, name: str, args: list[KernelArg], p: Params) -> str:
    it = index_ctype(segment)
    a, b = tiled_dims(segment)  # type: ignore[misc]
    others = [j for j in range(len(segment.extents)) if j not in (a, b)]
    along_a, along_b = tile_extents(p)
    rows, pad = p.block_rows, p.padding
    vec, rvec = vectors(p)
    threads = block_threads(p)
    lines = [kernel_opening(name, args, threads, min_blocks=p.min_blocks)]
    # The tile in shared memory runs along the reads (tile[a][b]) or along the writes
    # (tile[b][a]), whichever takes fewer bank wavefronts (`tile_runs_along_writes`); along
    # the writes, the write phase reads a vector at once where the padding keeps its rows
    # aligned to it.
    by_writes = tile_runs_along_writes(p, max(st.dtype.itemsize for st in segment.stores))
    for k, st in enumerate(segment.stores):
        dims = f"[{along_b}][{along_a + pad}]" if by_writes else f"[{along_a}][{along_b + pad}]"
        align = "__align__(16) " if by_writes else ""
        lines.append(f"  {align}__shared__ {st.dtype.cuda} tile{k}{dims};")

    def cell(k: int, a_index: str, b_index: str) -> str:
        return f"tile{k}[{b_index}][{a_index}]" if by_writes else f"tile{k}[{a_index}][{b_index}]"

    rest = " * ".join(f"({it})E{j}" for j in others) or f"({it})1"
    lines.append(f"  const {it} rest = {rest};")
    # One grid dim of tiles (a tall input has more rows of tiles than a grid's y could hold),
    # consecutive along a (`along_writes`: the sectors a tile's stores leave part-written are
    # finished by the next tile's while both are in L2) or along b (they read whole rows;
    # the scheduler's READ_ROW_TILES says which).
    (fast, e, fast_tile), (slow, slow_tile) = (
        (("a", a, along_a), ("b", along_b))
        if p.along_writes
        else (("b", b, along_b), ("a", along_a))
    )
    lines.append(f"  const {it} tiles = ((({it})E{e}) + {fast_tile - 1}) / {fast_tile};")
    lines.append(f"  const {it} {fast}0 = (({it})blockIdx.x % tiles) * {fast_tile};")
    lines.append(f"  const {it} {slow}0 = (({it})blockIdx.x / tiles) * {slow_tile};")
    # The read phase's threads: read_lanes(p) a row of the tile, `threads / read_lanes` rows
    # at once; where a row of reads is as wide as a row of writes, thread (x, y) of the block.
    lanes = read_lanes(p)
    if lanes == along_a // vec:
        read_first, read_rows = "threadIdx.y", rows
        lines.append(f"  const int lane = threadIdx.x * {rvec};")
    else:
        read_first, read_rows = "read_row", threads // lanes
        lines.append(f"  const int thread = threadIdx.x + threadIdx.y * {along_a // vec};")
        lines.append(f"  const int lane = (thread % {lanes}) * {rvec};")
        lines.append(f"  const int read_row = thread / {lanes};")
    lines.append(f"  for ({it} z = blockIdx.z; z < rest; z += gridDim.z) {{")
    lines += unravel_lines(others, "z", lambda j: f"E{j}", lambda j: f"i{j}", it, "    ")

    narrow = narrow_loads(segment, rvec)
    guarded = guarded_loads(st.expr for st in segment.stores)  # read inside their branch only
    vector_loads = [
        k
        for k, ld in enumerate(segment.loads)
        if rvec > 1
        and ld.offset.is_affine
        and coeff(ld.offset, segment, b) == 1
        and k not in guarded
    ]
    write_lane = "lane" if read_first == "threadIdx.y" and rvec == vec else "write_lane"

    def phases(checked: bool) -> list[str]:
        """The read phase, the barrier and the write phase of one tile; `checked`: each
        element's indices against the extents (a tile at an edge)."""
        out: list[str] = []
        # Read phase: thread (x, y) takes elements lane .. lane + V - 1 of the tile's rows y,
        # y + rows, ... Where its loads are narrower than 16 bytes (odd extents leave vector 1),
        # as a loop of tile / rows trips, a count the compiler knows: unrolled, every row's loads
        # are in flight before it waits on any (a loop from threadIdx.y has a trip count it does
        # not know: one load in flight a thread). H100: bf16 [777, 111011] 443.9 -> 346.2 us,
        # fp32 [151, 277319] 289.6 -> 228.4; 16-byte loads lost 4% so (bf16 [1024, 131072]
        # 198.5 -> 206.2) and keep the loop from threadIdx.y.
        out += rows_loop(along_a, read_rows, narrow, read_first)
        out.append(f"      const {it} i{b} = b0 + lane;")
        out.append(f"      const {it} i{a} = a0 + y;")
        out.append(f"      if (i{b} < E{b} && i{a} < E{a}) {{" if checked else "      {")
        for k in vector_loads:
            ld = segment.loads[k]
            vt = f"TfVec<{ld.dtype.cuda}, {rvec}>"
            offset = render_affine(ld.offset, "L", k, lambda j: f"i{j}", it)
            out.append(
                f"        const {vt} v{k} = "
                f"{load_text(ld.buffer, offset, p.evict_first and moves_with_every_dim(segment, k), vt)};"
            )

        def var_name(j: int) -> str:
            return f"(i{j} + e)" if j == b and rvec > 1 else f"i{j}"

        def load(k: int) -> str:
            if k in vector_loads:
                return f"v{k}.v[e]"
            ld = segment.loads[k]
            offset = render_affine(ld.offset, "L", k, var_name, it)
            return load_text(ld.buffer, offset, p.evict_first and moves_with_every_dim(segment, k))

        out.append("        #pragma unroll")
        out.append(f"        for (int e = 0; e < {rvec}; ++e) {{")
        r = ExprRenderer(segment, load, var_name, lambda e: "", indent="          ")
        for k, st in enumerate(segment.stores):
            v = r.value(st.expr)
            cast = v if r.dtype(st.expr) is st.dtype else f"tf_cast<{st.dtype.cuda}>({v})"
            r.emit(f"{cell(k, 'y', 'lane + e')} = {cast};")
        out += r.lines
        out += ["        }", "      }", "    }", "    __syncthreads();"]
        # Write phase: thread (x, y) writes elements x * V .. x * V + V - 1 of the output's row
        # y, column x * V + e of the tile's row y (rows y, y + rows, ... as above).
        if write_lane != "lane":
            out.append(f"    const int write_lane = threadIdx.x * {vec};")
        out += rows_loop(along_b, rows, narrow)
        out.append(f"      const {it} i{a} = a0 + {write_lane};")
        out.append(f"      const {it} i{b} = b0 + y;")
        out.append(f"      if (i{b} < E{b} && i{a} < E{a}) {{" if checked else "      {")
        for k, st in enumerate(segment.stores):
            off = render_affine(st.offset, "S", k, lambda j: f"i{j}", it)
            if vec > 1:
                vt = f"TfVec<{st.dtype.cuda}, {vec}>"
                if by_writes and pad % vec == 0:
                    out.append(
                        f"        const {vt} o{k} = "
                        f"*reinterpret_cast<const {vt}*>(&{cell(k, write_lane, 'y')});"
                    )
                else:
                    out.append(f"        {vt} o{k};")
                    out.append("        #pragma unroll")
                    out.append(
                        f"        for (int e = 0; e < {vec}; ++e) "
                        f"o{k}.v[e] = {cell(k, f'{write_lane} + e', 'y')};"
                    )
                out.append(f"        *reinterpret_cast<{vt}*>(&B{st.buffer}[{off}]) = o{k};")
            else:
                out.append(f"        B{st.buffer}[{off}] = {cell(k, 'threadIdx.x', 'y')};")
        out += ["      }", "    }", "    __syncthreads();"]
        return out

    if not p.unswitch:
        lines += phases(True)
    else:
        # A tile wholly inside both extents (every tile but those of the last row and column
        # of tiles) skips the per-element checks: no predicate a load or a store.
        lines.append(f"    if (a0 + {along_a} <= ({it})E{a} && b0 + {along_b} <= ({it})E{b}) {{")
        lines += ["  " + line for line in phases(False)]
        lines.append("    } else {")
        lines += ["  " + line for line in phases(True)]
        lines.append("    }")
    lines += ["  }", "}"]
    return "\n".join(lines)
