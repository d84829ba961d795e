"""Experiment: hand-written row-sum, column-sum, transpose and bias+GELU kernels (8192 x 4096 fp32), to
learn which structure the emitters should generate. Not part of the benchmark table.

    python3 benchmarks/kernel_variants.py [row] [col] [transpose] [pointwise]

What it taught (H100): evict-first loads (ld.global.cs) of data read once take a row sum
from 55.6 to 49.3 us; under the default policy no thread layout, vector width or
cross-block split of a column sum beat 58 us; with evict-first loads the generated kernel's
layout (32 outputs x 32 threads a block) runs 53.9 us, 16 float4 outputs x 64 threads 53.6,
and no split-K variant (atomics, the zeroing of y timed in) beats 55.4. A bias+GELU with one float4 a thread and as
many blocks as it takes ran 92.9 us, grid-stride loops over 4-16 blocks an SM 99-102 us;
streaming stores (st.global.cs) gained nothing. A deterministic split of the column sum
(partials to a workspace, the last block adds them; nothing zeroed per call) ran 54.8 us at
best against 53.6 unsplit; the row sum with its row length a constant 49.8 against 49.7.
"""

import statistics
import sys

import cupy as cp

R, C = 8192, 4096
FLUSH = cp.empty(256 * 1024 * 1024, dtype=cp.uint8)

ROW = r"""
extern "C" __global__ void __launch_bounds__(TR * ROWS) k(const float* __restrict__ x, float* __restrict__ y, int n_out, int n_red) {
  const int tr = threadIdx.x, to = threadIdx.y;
  for (int row = blockIdx.x * ROWS + to; row - to < n_out; row += gridDim.x * ROWS) {
    float acc = 0.f;
    if (row < n_out) {
      const float* p = x + (long long)row * n_red;
      #pragma unroll UNROLL
      for (int r = tr * 4; r < NRED; r += TR * 4) {  // NRED: n_red, or the extent as a constant
        float4 v = LOAD(reinterpret_cast<const float4*>(p + r));
        acc += v.x + v.y + v.z + v.w;
      }
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (TR > 32) {
      __shared__ float sm[ROWS * (TR / 32 + 1)];
      if ((tr & 31) == 0) sm[to * (TR / 32) + (tr >> 5)] = acc;
      __syncthreads();
      acc = sm[to * (TR / 32)];
      for (int w = 1; w < TR / 32; ++w) acc += sm[to * (TR / 32) + w];
      __syncthreads();
    }
    if (row < n_out && tr == 0) y[row] = acc;
  }
}
"""

COL = r"""
template <int N> struct alignas(4 * N) Vec { float v[N]; };
// STREAM 1: evict-first loads (ld.global.cs), as the generated kernels read data used once.
__device__ __forceinline__ Vec<1> ldv(const Vec<1>* p) {
  Vec<1> r; r.v[0] = STREAM ? __ldcs(reinterpret_cast<const float*>(p)) : *reinterpret_cast<const float*>(p); return r;
}
__device__ __forceinline__ Vec<2> ldv(const Vec<2>* p) {
  const float2 t = STREAM ? __ldcs(reinterpret_cast<const float2*>(p)) : *reinterpret_cast<const float2*>(p);
  Vec<2> r; r.v[0] = t.x; r.v[1] = t.y; return r;
}
__device__ __forceinline__ Vec<4> ldv(const Vec<4>* p) {
  const float4 t = STREAM ? __ldcs(reinterpret_cast<const float4*>(p)) : *reinterpret_cast<const float4*>(p);
  Vec<4> r; r.v[0] = t.x; r.v[1] = t.y; r.v[2] = t.z; r.v[3] = t.w; return r;
}
extern "C" __global__ void __launch_bounds__(TO * TR) k(const float* __restrict__ x, float* __restrict__ y, int n_red, int n_out) {
  const int to = threadIdx.x, tr = threadIdx.y;
  const int col = (blockIdx.x * TO + to) * V;
  const int r_per = (n_red + SPLIT - 1) / SPLIT;
  const int r_lo = blockIdx.y * r_per, r_hi = min(n_red, r_lo + r_per);
  float acc[V];
  for (int v = 0; v < V; ++v) acc[v] = 0.f;
  if (col < n_out) {
    #pragma unroll UNROLL
    for (int r = r_lo + tr; r < r_hi; r += TR) {
      Vec<V> a = ldv(reinterpret_cast<const Vec<V>*>(x + (long long)r * n_out + col));
      for (int v = 0; v < V; ++v) acc[v] += a.v[v];
    }
  }
  __shared__ float sm[TR][TO * V + 1];
  for (int v = 0; v < V; ++v) sm[tr][to * V + v] = acc[v];
  __syncthreads();
  for (int s = TR / 2; s > 0; s >>= 1) {
    if (tr < s) for (int v = 0; v < V; ++v) sm[tr][to * V + v] += sm[tr + s][to * V + v];
    __syncthreads();
  }
  if (tr == 0 && col < n_out) for (int v = 0; v < V; ++v) {
    if (SPLIT == 1) y[col + v] = sm[0][to * V + v]; else atomicAdd(&y[col + v], sm[0][to * V + v]);
  }
}
"""

# A deterministic split: each of SPLIT blocks along y writes its partial sums to ws, the last
# to finish (a counter per column block, reset by that block, so never zeroed per call) adds
# the SPLIT partials in order.
COL_DET = (
    COL[: COL.index("  if (tr == 0 && col < n_out)")].replace(
        "float* __restrict__ y, int n_red, int n_out)",
        "float* __restrict__ y, int n_red, int n_out, float* __restrict__ ws, unsigned* sem)",
    )
    + r"""
  if (tr == 0 && col < n_out) for (int v = 0; v < V; ++v) ws[(long long)blockIdx.y * n_out + col + v] = sm[0][to * V + v];
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (to == 0 && tr == 0) last = atomicAdd(&sem[blockIdx.x], 1u) == SPLIT - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int i = tr * TO + to; i < TO * V; i += TO * TR) {  // the block's TO * V columns
    const int c = blockIdx.x * TO * V + i;
    if (c < n_out) {
      float s = 0.f;
      for (int k = 0; k < SPLIT; ++k) s += __ldcg(&ws[(long long)k * n_out + c]);
      y[c] = s;
    }
  }
  if (to == 0 && tr == 0) sem[blockIdx.x] = 0u;
}
"""
)


TRANSPOSE = r"""
extern "C" __global__ void __launch_bounds__(TX * TY) k(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  // x: rows x cols, y: cols x rows. One TILE x TILE tile a block.
  __shared__ float tile[TILE][TILE + PAD];
  const int c0 = blockIdx.x * TILE, r0 = blockIdx.y * TILE;
  if (V == 1) {
    for (int r = threadIdx.y; r < TILE; r += TY) tile[r][threadIdx.x] = __ldcs(&x[(long long)(r0 + r) * cols + c0 + threadIdx.x]);
    __syncthreads();
    for (int c = threadIdx.y; c < TILE; c += TY) STORE(&y[(long long)(c0 + c) * rows + r0 + threadIdx.x], tile[threadIdx.x][c]);
  } else {
    // TX * 4 == TILE: a thread moves float4s along both sides.
    for (int r = threadIdx.y; r < TILE; r += TY) {
      const float4 v = __ldcs(reinterpret_cast<const float4*>(&x[(long long)(r0 + r) * cols + c0 + 4 * threadIdx.x]));
      tile[r][4 * threadIdx.x] = v.x; tile[r][4 * threadIdx.x + 1] = v.y; tile[r][4 * threadIdx.x + 2] = v.z; tile[r][4 * threadIdx.x + 3] = v.w;
    }
    __syncthreads();
    for (int c = threadIdx.y; c < TILE; c += TY) {
      const float4 v = make_float4(tile[4 * threadIdx.x][c], tile[4 * threadIdx.x + 1][c], tile[4 * threadIdx.x + 2][c], tile[4 * threadIdx.x + 3][c]);
      STORE(reinterpret_cast<float4*>(&y[(long long)(c0 + c) * rows + r0 + 4 * threadIdx.x]), v);
    }
  }
}
"""

POINTWISE = r"""
// y = gelu(x + b[col]) over rows x cols, float4 a thread; grid-stride when GRID > 0, else
// one float4 a thread (as many blocks as it takes).
extern "C" __global__ void __launch_bounds__(BLOCK) k(const float* __restrict__ x, const float* __restrict__ b, float* __restrict__ y, long long n4, int cols4) {
  long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  const long long step = GRID > 0 ? (long long)gridDim.x * BLOCK : n4;
  for (; i < n4; i += step) {
    const float4 v = LOAD(reinterpret_cast<const float4*>(x) + i);
    const float4 c = __ldg(reinterpret_cast<const float4*>(b) + i % cols4);
    float4 o;
    o.x = 0.5f * (v.x + c.x) * (1.f + erff((v.x + c.x) * 0.70710678f));
    o.y = 0.5f * (v.y + c.y) * (1.f + erff((v.y + c.y) * 0.70710678f));
    o.z = 0.5f * (v.z + c.z) * (1.f + erff((v.z + c.z) * 0.70710678f));
    o.w = 0.5f * (v.w + c.w) * (1.f + erff((v.w + c.w) * 0.70710678f));
    STORE(reinterpret_cast<float4*>(y) + i, o);
  }
}
"""

STORE_PLAIN = (
    "template <typename T> __device__ __forceinline__ void st_plain(T* p, T v) { *p = v; }\n"
)


def timed(fn, reps=60):
    for _ in range(5):
        fn()
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(reps):
        FLUSH.fill(0)
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b) * 1000)
    return statistics.median(ts)


def kernel(src, **defs):
    head = "".join(f"#define {k} {v}\n" for k, v in defs.items())
    return cp.RawKernel(head + src, "k", options=("-std=c++17",))


def main():
    x = cp.random.standard_normal((R, C), dtype=cp.float32)
    y = cp.empty(R, cp.float32)
    yc = cp.empty(C, cp.float32)
    b = cp.empty_like(x)
    copy_us = timed(lambda: b.__setitem__(Ellipsis, x))
    read_bytes = x.nbytes
    print(
        f"copy {copy_us:.1f} us = {2 * x.nbytes / copy_us / 1e6:.2f} TB/s; the read alone at that rate: {copy_us / 2:.1f} us"
    )
    print(f"cupy sum(1) {timed(lambda: x.sum(1)):.1f} us; sum(0) {timed(lambda: x.sum(0)):.1f} us")
    want_r, want_c = x.sum(1), x.sum(0)
    sm = cp.cuda.Device().attributes["MultiProcessorCount"]
    if "transpose" in sys.argv:
        transpose(x, copy_us)
    if "pointwise" in sys.argv:
        pointwise(x, copy_us, sm)
    if "row" in sys.argv:
        print("-- row sum: TR ROWS UNROLL LOAD grid")
        for tr, rows, unroll, load, bps in [
            (256, 2, 4, "__ldg", 0),
            (256, 2, 4, "__ldcs", 0),
            (256, 2, 4, "__ldlu", 0),
            (1024, 1, 1, "__ldg", 0),
            (512, 1, 2, "__ldg", 0),
            (128, 4, 8, "__ldg", 0),
            (32, 8, 8, "__ldg", 0),
            (32, 16, 8, "__ldg", 0),
            (64, 8, 8, "__ldg", 0),
            (256, 2, 4, "__ldg", 4),
            (256, 2, 4, "__ldg", 8),
            (128, 4, 8, "__ldg", 8),
            (512, 2, 2, "__ldg", 0),
            (256, 4, 4, "__ldg", 0),
        ]:
            k = kernel(ROW, TR=tr, ROWS=rows, UNROLL=unroll, LOAD=load, NRED="n_red")
            grid = -(-R // rows) if bps == 0 else bps * sm
            run = lambda: k((grid,), (tr, rows), (x, y, cp.int32(R), cp.int32(C)))  # noqa: E731
            run()
            ok = bool(cp.allclose(y, want_r, rtol=1e-3, atol=1e-2))
            us = timed(run)
            print(
                f"  {tr:5d} {rows:3d} {unroll:2d} {load:7s} grid {grid:5d}: {us:6.1f} us  {read_bytes / us / 1e6:.2f} TB/s  ok={ok}"
            )
        row_extent_as_constant(x, y, want_r, read_bytes)
    if "col" not in sys.argv:
        return
    print(
        "-- column sum: TO TR V UNROLL SPLIT STREAM (a split > 1 adds atomics and the zeroing of y, timed)"
    )
    for to, tr, v, unroll, split, stream in [
        (32, 32, 1, 8, 1, 0),
        (32, 32, 1, 8, 1, 1),
        (8, 128, 4, 8, 1, 1),
        (8, 64, 4, 8, 1, 1),
        (4, 128, 4, 8, 1, 1),
        (16, 64, 4, 8, 1, 1),
        (16, 32, 2, 8, 1, 1),
        (32, 32, 4, 4, 1, 1),
        (32, 32, 1, 8, 2, 1),
        (32, 16, 1, 8, 2, 1),
        (32, 32, 1, 8, 4, 1),
        (8, 32, 4, 8, 4, 1),
        (8, 64, 4, 8, 2, 1),
        (16, 32, 4, 8, 4, 1),
        (32, 16, 4, 8, 8, 1),
        (8, 128, 4, 8, 4, 1),
        (16, 64, 4, 4, 2, 1),
        (32, 32, 2, 4, 2, 1),
    ]:
        k = kernel(COL, TO=to, TR=tr, V=v, UNROLL=unroll, SPLIT=split, STREAM=stream)
        grid = (-(-C // (to * v)), split)

        def run(k=k, grid=grid, to=to, tr=tr, split=split):
            if split > 1:
                yc.fill(0)
            k(grid, (to, tr), (x, yc, cp.int32(R), cp.int32(C)))

        run()
        ok = bool(cp.allclose(yc, want_c, rtol=1e-3, atol=1e-2))
        us = timed(run)
        print(
            f"  {to:3d} {tr:4d} {v} {unroll} {split} {stream}: grid {grid}: {us:6.1f} us  "
            f"{read_bytes / us / 1e6:.2f} TB/s  ok={ok}"
        )
    print(
        "-- column sum, deterministic split (partials, the last block adds them; nothing zeroed per call): TO TR V UNROLL SPLIT"
    )
    for to, tr, v, unroll, split in [
        (32, 32, 1, 8, 1),
        (32, 32, 1, 8, 2),
        (32, 16, 1, 8, 2),
        (32, 16, 1, 8, 4),
        (32, 8, 1, 8, 4),
        (16, 64, 4, 8, 2),
        (16, 32, 4, 8, 4),
        (32, 16, 4, 8, 8),
        (32, 8, 4, 8, 16),
        (64, 4, 4, 8, 16),
        (32, 8, 4, 4, 32),
        (128, 2, 4, 8, 32),
        (32, 32, 4, 4, 4),
        (64, 8, 4, 8, 8),
        (8, 64, 4, 8, 2),
    ]:
        k = kernel(COL_DET, TO=to, TR=tr, V=v, UNROLL=unroll, SPLIT=split, STREAM=1)
        grid = (-(-C // (to * v)), split)
        ws = cp.empty(split * C, cp.float32)
        sem = cp.zeros(grid[0], cp.uint32)

        def run(k=k, grid=grid, to=to, tr=tr, ws=ws, sem=sem):
            k(grid, (to, tr), (x, yc, cp.int32(R), cp.int32(C), ws, sem))

        yc.fill(0)
        run()
        ok = bool(cp.allclose(yc, want_c, rtol=1e-3, atol=1e-2))
        us = timed(run)
        run()
        ok = ok and bool(cp.allclose(yc, want_c, rtol=1e-3, atol=1e-2))
        print(
            f"  {to:3d} {tr:4d} {v} {unroll} {split:2d}: grid {grid}: {us:6.1f} us  {read_bytes / us / 1e6:.2f} TB/s  ok={ok}"
        )


def row_extent_as_constant(x, y, want_r, read_bytes):
    """The default row-sum layout with the row length a runtime argument against a constant
    (the loop then has a known trip count), beside torch.compile, alternating, in one harness."""
    import torch

    xt = torch.as_tensor(x, device="cuda")
    compiled = torch.compile(lambda t: t.sum(1))
    compiled(xt)
    runs = {"torch.compile": lambda: compiled(xt)}
    for tr, rows, unroll in [(256, 2, 4), (512, 1, 2), (1024, 1, 1), (256, 2, 1)]:
        for nred in ("n_red", str(C)):
            k = kernel(ROW, TR=tr, ROWS=rows, UNROLL=unroll, LOAD="__ldcs", NRED=nred)
            run = lambda k=k, tr=tr, rows=rows: k(  # noqa: E731
                (-(-R // rows),), (tr, rows), (x, y, cp.int32(R), cp.int32(C))
            )
            run()
            assert bool(cp.allclose(y, want_r, rtol=1e-3, atol=1e-2))
            runs[f"{tr} x {rows} unroll {unroll} n_red={nred}"] = run
    print("-- row sum, extent as an argument or a constant (median of 5 rounds of medians)")
    got = {name: [] for name in runs}
    for _ in range(5):
        for name, run in runs.items():
            got[name].append(timed(run))
    for name, ts in got.items():
        us = statistics.median(ts)
        print(f"  {name:40s} {us:6.1f} us  {read_bytes / us / 1e6:.2f} TB/s")


def pointwise(x, copy_us, sm):
    bias = cp.random.standard_normal(C, dtype=cp.float32)
    out = cp.empty_like(x)
    want = None
    print(f"-- bias + GELU (copy of the same bytes: {copy_us:.1f} us): BLOCK GRID LOAD STORE")
    n4 = x.size // 4
    for block, grid, load, store in [
        (256, 0, "__ldg", "st_plain"),
        (256, 0, "__ldcs", "st_plain"),
        (256, 0, "__ldcs", "__stcs"),
        (256, 0, "__ldg", "__stcs"),
        (512, 0, "__ldcs", "st_plain"),
        (128, 0, "__ldcs", "st_plain"),
        (256, 4, "__ldcs", "st_plain"),
        (256, 8, "__ldcs", "st_plain"),
        (512, 4, "__ldcs", "st_plain"),
        (256, 8, "__ldcs", "__stcs"),
        (1024, 2, "__ldcs", "st_plain"),
        (256, 16, "__ldcs", "st_plain"),
    ]:
        k = cp.RawKernel(
            STORE_PLAIN
            + "".join(
                f"#define {n} {val}\n"
                for n, val in dict(BLOCK=block, GRID=grid, LOAD=load, STORE=store).items()
            )
            + POINTWISE,
            "k",
            options=("-std=c++17",),
        )
        blocks = grid * sm if grid > 0 else -(-n4 // block)
        run = lambda k=k, blocks=blocks, block=block: k(  # noqa: E731
            (blocks,), (block,), (x, bias, out, cp.int64(n4), cp.int32(C // 4))
        )
        run()
        if want is None:
            want = out.copy()
        ok = bool(cp.allclose(out, want, rtol=1e-5, atol=1e-5))
        us = timed(run)
        print(
            f"  {block:4d} {grid:2d} {load:6s} {store:8s}: {us:6.1f} us  {2 * x.nbytes / us / 1e6:.2f} TB/s  ok={ok}"
        )


def transpose(x, copy_us):
    yt = cp.empty((C, R), cp.float32)
    want = x.T.copy()
    print(f"-- transpose (copy of the same bytes: {copy_us:.1f} us): TILE TX TY V PAD STORE")
    for tile, tx, ty, v, pad, store in [
        (64, 64, 16, 1, 1, "st_plain"),
        (64, 64, 16, 1, 1, "__stcs"),
        (32, 32, 8, 1, 1, "st_plain"),
        (64, 16, 16, 4, 1, "st_plain"),
        (64, 16, 16, 4, 1, "__stcs"),
        (64, 16, 32, 4, 1, "st_plain"),
        (64, 16, 16, 4, 4, "st_plain"),
        (32, 8, 32, 4, 1, "st_plain"),
        (32, 8, 16, 4, 1, "st_plain"),
        (64, 16, 8, 4, 1, "st_plain"),
    ]:
        k = cp.RawKernel(
            STORE_PLAIN
            + "".join(
                f"#define {n} {val}\n"
                for n, val in dict(TILE=tile, TX=tx, TY=ty, V=v, PAD=pad, STORE=store).items()
            )
            + TRANSPOSE,
            "k",
            options=("-std=c++17",),
        )
        run = lambda k=k, tile=tile, tx=tx, ty=ty: k(  # noqa: E731
            (C // tile, R // tile), (tx, ty), (x, yt, cp.int32(R), cp.int32(C))
        )
        run()
        ok = bool((yt == want).all())
        us = timed(run)
        print(
            f"  {tile} {tx:3d} {ty:3d} {v} {pad} {store:8s}: {us:6.1f} us  {2 * x.nbytes / us / 1e6:.2f} TB/s  ok={ok}"
        )


if __name__ == "__main__":
    main()
