"""Generated kernels run on the host: a plan's kernels, as codegen emits them, compiled with
the C++ compiler against a shim of the CUDA built-ins they use and run there, every thread
of a block a host thread (blocks one after another), so that kernel code can be checked
without a GPU: values against the reference, reads and writes past a buffer's bytes
(AddressSanitizer) and vectors off their alignment (UBSan), with each buffer allocated at
exactly its size.

An emulation, not the GPU: warps are not lock-step (a kernel that needs them to be without a
barrier is not caught), float math is the host's (exp2 for `ex2.approx`), and clusters are not
emulated. It proves the index arithmetic and the synchronisation a kernel asks for; the GPU
tests prove the rest.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from tunefuse.codegen import generate
from tunefuse.device_info import PROFILES
from tunefuse.planning.kernel_ir import BufferKind
from tunefuse.runtime.launch_plan import kernel_launch
from tunefuse.runtime.launcher import scalar_values
from tunefuse.schedulers import scheduler_for

SHIM = r"""
#include <ucontext.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <type_traits>
#include <vector>
using std::isinf; using std::isnan; using std::isfinite; using std::signbit;
using std::abs;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __shared__ static  /* blocks run one after another: a static is the block's */
#define warpSize 32

struct tf_dim3 { unsigned int x, y, z; };
static tf_dim3 threadIdx;
static tf_dim3 blockIdx, blockDim, gridDim;

// Every GPU thread of a block is a fiber (ucontext) on the one host thread: a barrier
// switches to the next fiber until all the barrier's threads have arrived. A thread that has
// left the kernel drops out of the barriers (as an exited GPU thread no longer counts at
// __syncthreads). A barrier that no fiber can pass is a deadlock: reported, and the program
// aborts.
struct TfBarrier { long long gen = 0; int arrived = 0, expected = 0; };
struct TfFiber {
  ucontext_t ctx; char* stack = nullptr; bool done = false; TfBarrier* at = nullptr; long long gen = 0;
};
static std::vector<TfFiber> tf_fibers;
static ucontext_t tf_scheduler;
static int tf_tid = 0;
static TfBarrier tf_block_barrier;
static std::vector<TfBarrier> tf_warp_barriers;
static std::vector<unsigned long long> tf_warp_slots;  // a lane's shuffled value, by thread
// AddressSanitizer follows the switches between the scheduler's stack and the fibers'.
static const void* tf_main_bottom = nullptr;
static size_t tf_main_size = 0;
static const size_t tf_stack = 256 * 1024;
static void tf_to_scheduler(ucontext_t* from, bool finished) {
#if defined(__SANITIZE_ADDRESS__)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(finished ? nullptr : &fake, tf_main_bottom, tf_main_size);
  swapcontext(from, &tf_scheduler);
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  (void)finished;
  swapcontext(from, &tf_scheduler);
#endif
}
static void tf_to_fiber(TfFiber& f) {
#if defined(__SANITIZE_ADDRESS__)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stack, tf_stack);
  swapcontext(&tf_scheduler, &f.ctx);
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  swapcontext(&tf_scheduler, &f.ctx);
#endif
}
static void tf_wait(TfBarrier& b) {
  if (++b.arrived == b.expected) { b.arrived = 0; ++b.gen; return; }
  TfFiber& f = tf_fibers[tf_tid];
  f.at = &b; f.gen = b.gen;
  tf_to_scheduler(&f.ctx, false);
}
static void tf_drop(TfBarrier& b) {
  --b.expected;
  if (b.arrived > 0 && b.arrived == b.expected) { b.arrived = 0; ++b.gen; }
}
static inline void __syncthreads() { tf_wait(tf_block_barrier); }
static inline void __syncwarp(unsigned = 0xffffffffu) { tf_wait(tf_warp_barriers[tf_tid / 32]); }
static inline void __threadfence() {}
template <typename T> static inline T tf_shfl(T v, int src_lane) {
  static_assert(sizeof(T) <= 8, "a shuffle of at most 8 bytes");
  const int warp = tf_tid / 32, lane = tf_tid % 32;
  const int threads = (int)(blockDim.x * blockDim.y * blockDim.z);
  unsigned long long bits = 0; std::memcpy(&bits, &v, sizeof(T));
  tf_warp_slots[tf_tid] = bits;
  tf_wait(tf_warp_barriers[warp]);
  const int src = warp * 32 + src_lane;
  if (src_lane < 0 || src_lane >= 32 || src >= threads) {
    std::fprintf(stderr, "TF_HOST: lane %d shuffles from lane %d, not in its warp\n", lane, src_lane);
    std::abort();
  }
  T r; bits = tf_warp_slots[src]; std::memcpy(&r, &bits, sizeof(T));
  tf_wait(tf_warp_barriers[warp]);
  return r;
}
template <typename T> static inline T __shfl_xor_sync(unsigned, T v, int m) { return tf_shfl(v, (tf_tid % 32) ^ m); }
template <typename T> static inline T __shfl_sync(unsigned, T v, int l) { return tf_shfl(v, l); }
template <typename T> static inline T __shfl_down_sync(unsigned, T v, int d) {
  const int l = tf_tid % 32; return tf_shfl(v, l + d < 32 ? l + d : l);
}
static inline unsigned int atomicInc(unsigned int* p, unsigned int v) {
  const unsigned int old = *p; *p = old >= v ? 0u : old + 1u; return old;
}
template <typename T> static inline T atomicCAS(T* p, T cmp, T v) {
  const T old = *p; if (old == cmp) *p = v; return old;
}
template <typename T> static inline T atomicAdd(T* p, T v) {
  const T old = *p; *p = old + v; return old;
}
struct alignas(16) uint4 { unsigned int x, y, z, w; };
struct alignas(8) uint2 { unsigned int x, y; };
template <typename T> static inline T __ldcs(const T* p) { return *p; }
template <typename T> static inline void __stcs(T* p, T v) { *p = v; }
template <typename To, typename From> static inline To tf_bits(From v) {
  To r; std::memcpy(&r, &v, sizeof(To)); return r;
}
static inline float __int_as_float(int v) { return tf_bits<float>(v); }
static inline float __uint_as_float(unsigned int v) { return tf_bits<float>(v); }
static inline int __float_as_int(float v) { return tf_bits<int>(v); }
static inline unsigned int __float_as_uint(float v) { return tf_bits<unsigned int>(v); }
static inline double __longlong_as_double(long long v) { return tf_bits<double>(v); }
static inline long long __double_as_longlong(double v) { return tf_bits<long long>(v); }
static inline unsigned int __umulhi(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a * b) >> 32);
}
static inline unsigned int __float2uint_rn(float x) { return (unsigned int)std::nearbyintf(x); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline float __fdividef(float a, float b) { return a / b; }

static inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
static inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
template <typename A, typename B> static inline auto min(A a, B b) -> std::common_type_t<A, B> {
  return a < b ? a : b;
}
template <typename A, typename B> static inline auto max(A a, B b) -> std::common_type_t<A, B> {
  return a < b ? b : a;
}

// A launch: blocks one after another, each of blockDim fibers, its static shared arrays
// reused by the next block as a GPU's shared memory is.
static unsigned char* tf_host_smem = nullptr;
static const std::function<void()>* tf_kernel = nullptr;
static void tf_fiber_main() {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(nullptr, &tf_main_bottom, &tf_main_size);
#endif
  (*tf_kernel)();
  tf_drop(tf_block_barrier);
  tf_drop(tf_warp_barriers[tf_tid / 32]);
  tf_fibers[tf_tid].done = true;
  tf_to_scheduler(&tf_fibers[tf_tid].ctx, true);
}
static void tf_launch(tf_dim3 grid, tf_dim3 block, size_t smem, const std::function<void()>& kernel) {
  const int threads = (int)(block.x * block.y * block.z);
  const size_t stack = tf_stack;
  blockDim = block; gridDim = grid; tf_kernel = &kernel;
  std::vector<unsigned char> shared(smem + 16, 0xA5);  // garbage, as a GPU's is
  tf_host_smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(shared.data()) + 15) & ~uintptr_t(15));
  const int warps = (threads + 31) / 32;
  tf_fibers.assign(threads, TfFiber{});
  for (auto& f : tf_fibers) f.stack = (char*)std::malloc(stack);
  tf_warp_barriers.assign(warps, TfBarrier{});
  tf_warp_slots.assign(threads, 0);
  const long long blocks = (long long)grid.x * grid.y * grid.z;
  for (long long b = 0; b < blocks; ++b) {
    blockIdx = {(unsigned)(b % grid.x), (unsigned)((b / grid.x) % grid.y),
                (unsigned)(b / ((long long)grid.x * grid.y))};
    tf_block_barrier = TfBarrier{0, 0, threads};
    for (int w = 0; w < warps; ++w)
      tf_warp_barriers[w] = TfBarrier{0, 0, w == warps - 1 ? threads - 32 * w : 32};
    for (int t = 0; t < threads; ++t) {
      TfFiber& f = tf_fibers[t];
      f.done = false; f.at = nullptr;
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = f.stack; f.ctx.uc_stack.ss_size = stack; f.ctx.uc_link = nullptr;
      makecontext(&f.ctx, tf_fiber_main, 0);
    }
    int left = threads;
    while (left > 0) {
      bool moved = false;
      for (int t = 0; t < threads; ++t) {
        TfFiber& f = tf_fibers[t];
        if (f.done || (f.at != nullptr && f.at->gen == f.gen)) continue;
        f.at = nullptr;
        tf_tid = t;
        threadIdx = {(unsigned)(t % block.x), (unsigned)((t / block.x) % block.y),
                     (unsigned)(t / (block.x * block.y))};
        tf_to_fiber(f);
        moved = true;
        if (f.done) --left;
      }
      if (!moved) {
        std::fprintf(stderr, "TF_HOST: block %lld: a barrier some threads never reach\n", b);
        std::abort();
      }
    }
  }
  for (auto& f : tf_fibers) std::free(f.stack);
}

"""

# The preamble's PTX, spelled for the host (round to nearest even, as cvt.rn).
_HOST_PTX = {
    'asm("{ cvt.f32.f16 %0, %1; }" : "=f"(f) : "h"(h.x)); return f;': (
        "_Float16 v; std::memcpy(&v, &h.x, 2); f = (float)v; return f;"
    ),
    'asm("{ cvt.rn.f16.f32 %0, %1; }" : "=h"(h.x) : "f"(f)); return h;': (
        "_Float16 v = (_Float16)f; std::memcpy(&h.x, &v, 2); return h;"
    ),
    'asm("{ cvt.rn.bf16.f32 %0, %1; }" : "=h"(b.x) : "f"(f)); return b;': (
        "unsigned int u = __float_as_uint(f);"
        " b.x = (u & 0x7fffffffu) > 0x7f800000u ? (unsigned short)((u >> 16) | 0x40u)"
        " : (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); return b;"
    ),
    'asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x * 1.4426950408889634f));': (
        "r = std::exp2(x * 1.4426950408889634f);"
    ),
}
_END_OF_PREAMBLE = "// ---- end of preamble"
_DYNAMIC_SHARED = "extern __shared__ __align__(16) unsigned char tf_smem[];"


class HostKernelError(AssertionError):
    """A kernel the host could not build, or that read or wrote out of bounds, deadlocked
    or shuffled outside its warp (the sanitizer's or the emulation's report attached)."""


def host_source(sources: list[str]) -> str:
    """The kernels' C++ for the host: the shim, the preamble once (its PTX spelled for the
    host), each kernel after it."""
    out = [SHIM]
    for n, src in enumerate(sources):
        head, sep, body = src.partition(_END_OF_PREAMBLE)
        if not sep:
            raise HostKernelError("a kernel source without the preamble's end marker")
        if n == 0:
            for ptx, host in _HOST_PTX.items():
                if ptx not in head:
                    raise HostKernelError(f"the preamble changed: no `{ptx}` to spell for the host")
                head = head.replace(ptx, host)
            if "asm" in re.sub(r"#if defined\(__CUDA_ARCH__\).*?#endif", "", head, flags=re.S):
                raise HostKernelError("the preamble has PTX the host shim does not spell")
            out.append(head)
        body = body.split("\n", 1)[1]
        out.append(body.replace(_DYNAMIC_SHARED, "unsigned char* const tf_smem = tf_host_smem;"))
    return "\n".join(out)


@dataclasses.dataclass(frozen=True)
class HostRun:
    """One set of params for a plan's kernels: what ran and the outputs (every output of
    the plan, in-place ones too, by position)."""

    params: tuple  # of each segment
    outputs: list


def _span(shape: tuple, strides: tuple) -> int:
    """Elements a layout spans (0 when empty)."""
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True))


def _buffer_bytes(b) -> int:  # noqa: ANN001 - a planning Buffer
    return _span(b.shape, b.strides) * b.dtype.itemsize


def run_on_host(fd, inputs: list, param_sets: list, arch: str = "sm_90") -> list[HostRun]:  # noqa: ANN001
    """`fd` planned for `inputs` (contiguous arrays), its kernels generated with each of
    `param_sets` (a function (segment, device) -> params, or None for the defaults), all
    compiled into one host program and run there one set after another."""
    device = PROFILES[arch]
    plan = fd.plan(inputs, device=device)
    return run_plan_on_host(plan, inputs, ["contiguous"] * len(inputs), param_sets, arch)


def run_plan_on_host(
    plan, inputs: list, layouts: list[str], param_sets: list, arch: str = "sm_90"
) -> list[HostRun]:  # noqa: ANN001
    """`plan`'s kernels for `inputs` (arrays in the strides the plan was made for, an
    "offset" layout one element past an alignment, as the fuzzed corpus lays them out;
    numbers for scalar inputs), generated with each of `param_sets` and run on the host."""
    device = PROFILES[arch]
    dtypes = {b.id: b.dtype for b in plan.buffers}
    launches, sources, chosen = [], {}, []
    for choose in param_sets:
        per_set, params = [], []
        for seg in plan.segments:
            sched = scheduler_for(seg.scheduler)
            p = (choose(seg, device) if choose else None) or sched.default_params(seg, device)
            ks = generate(seg, p, device, dtypes)
            sources.setdefault(ks.name, ks.source)
            per_set.append((ks, kernel_launch(seg, ks, p, "host", "host")))
            params.append(p)
        launches.append(per_set)
        chosen.append(tuple(params))
    scalars = _host_scalars(plan, inputs)
    leads = {
        b.id: (1 if layouts[b.input_index] == "offset" else 0)
        for b in plan.buffers
        if b.kind is BufferKind.INPUT
    }
    program = host_source(list(sources.values())) + _main(plan, launches, scalars, leads)
    outputs = _compile_and_run(program, plan, inputs, leads, len(param_sets))
    return [HostRun(p, o) for p, o in zip(chosen, outputs, strict=True)]


def _host_scalars(plan, inputs: list) -> dict:  # noqa: ANN001
    """The scalar values kernels take, as the launcher works them out (`scalar_values`)."""
    fusion = plan.fusion
    call = {vid: inputs[k] for k, vid in enumerate(fusion.inputs) if not fusion.is_tensor(vid)}
    return scalar_values(fusion, dict(plan.fixed_scalars), plan.host_scalar_nodes, call)


def _c_scalar(ctype: str, value: object) -> str:
    """A C literal of `value` for a parameter of `ctype`: floats exact (hex), NaN and the
    infinities spelled by their bits' functions."""
    if isinstance(value, (bool, np.bool_)):
        return f"({ctype})({int(value)})"
    if isinstance(value, (int, np.integer)):
        return f"({ctype})({int(value)}LL)"
    x = float(value)
    if np.isnan(x):
        return f'({ctype})(std::nan(""))'
    if np.isinf(x):
        return f"({ctype})({'-' if x < 0 else ''}HUGE_VAL)"
    return f"({ctype})({x.hex()})"


def _main(plan, launches, scalars: dict, leads: dict) -> str:  # noqa: ANN001
    """main(in, out): the inputs from `in` (again before each set: a set may write one in
    place), garbage in the other buffers, each set's kernels in order, every output's buffer
    appended to `out`."""
    bufs = plan.buffers
    lines = ["int main(int argc, char** argv) {", "  (void)argc;"]
    lines.append(f"  unsigned char* B[{max(len(bufs), 1)}] = {{}};")
    lines.append('  FILE* in = std::fopen(argv[1], "rb"); FILE* out = std::fopen(argv[2], "wb");')
    lines.append("  if (!in || !out) return 2;")
    for b in bufs:
        lead = leads.get(b.id, 0) * b.dtype.itemsize
        size = max(_buffer_bytes(b) + lead, 1)
        lines.append(f"  B[{b.id}] = (unsigned char*)std::malloc({size}) + {lead};")
    for per_set in launches:
        lines.append("  std::rewind(in);")
        for b in bufs:
            lead = leads.get(b.id, 0) * b.dtype.itemsize
            n = _buffer_bytes(b) + lead
            if b.kind is BufferKind.INPUT:
                lines.append(f"  if (std::fread(B[{b.id}] - {lead}, 1, {n}, in) != {n}) return 3;")
            else:
                lines.append(f"  std::memset(B[{b.id}], 0xA5, {max(n, 1)});")
        for ks, kl in per_set:
            if kl.numel == 0:
                continue
            args = []
            pointers = dict(kl.pointer_slots)
            values = {pos: vid for pos, vid, _ in kl.scalar_slots}
            for pos, arg in enumerate(ks.args):
                if pos in pointers:
                    args.append(f"({arg.ctype})B[{pointers[pos]}]")
                elif kl.workspace is not None and pos == kl.workspace[0]:
                    lines.append(f"  void* ws{id(kl)} = std::calloc({max(kl.workspace[1], 1)}, 1);")
                    args.append(f"({arg.ctype})ws{id(kl)}")
                elif pos == kl.index_error:
                    lines.append(f"  int* ie{id(kl)} = (int*)std::calloc(1, sizeof(int));")
                    args.append(f"({arg.ctype})ie{id(kl)}")
                elif kl.static_args[pos] is not None:
                    args.append(f"({arg.ctype})({int(kl.static_args[pos][1])}LL)")
                elif pos in values and values[pos] in scalars:
                    args.append(_c_scalar(arg.ctype, scalars[values[pos]]))
                else:
                    raise HostKernelError(f"{ks.name}: argument {arg.name} has no value")
            g, b = kl.grid, kl.block
            lines.append(
                f"  tf_launch({{{g[0]}u, {g[1]}u, {g[2]}u}}, {{{b[0]}u, {b[1]}u, {b[2]}u}}, "
                f"{kl.shared_bytes}, [&] {{ {ks.name}({', '.join(args)}); }});"
            )
        for o in plan.outputs:
            n = _buffer_bytes(bufs[o.buffer])
            lines.append(f"  std::fwrite(B[{o.buffer}], 1, {n}, out);")
    lines += ["  std::fclose(out);", "  return 0;", "}"]
    return "\n".join(lines) + "\n"


def _input_bytes(b, array, lead: int) -> bytes:  # noqa: ANN001
    """Input buffer `b`'s memory: `array` laid out in the buffer's strides, `lead` elements
    before it."""
    array = np.asarray(array)
    flat = np.zeros(_span(b.shape, b.strides) + lead, dtype=array.dtype)
    if array.size:
        view = np.lib.stride_tricks.as_strided(
            flat[lead:], b.shape, tuple(s * array.itemsize for s in b.strides)
        )
        view[...] = array
    return flat.view(np.uint8).tobytes()


def _compile_and_run(program: str, plan, inputs: list, leads: dict, sets: int) -> list:  # noqa: ANN001
    cxx = shutil.which("g++")
    if cxx is None:
        raise HostKernelError("no host C++ compiler (g++)")
    work = Path(tempfile.mkdtemp(prefix="tf_host_"))
    try:
        digest = hashlib.sha1(program.encode()).hexdigest()[:12]
        src, exe = work / f"k{digest}.cpp", work / f"k{digest}"
        src.write_text(program)
        flags = ["-std=c++20", "-O1", "-w", "-fno-fast-math", "-ffp-contract=off"]
        sanitize = ["-fsanitize=address,alignment", "-fno-sanitize-recover=all"]
        built = subprocess.run(
            [cxx, *flags, *sanitize, "-o", str(exe), str(src)],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if built.returncode:
            raise HostKernelError(f"the host build failed:\n{built.stderr[-4000:]}")
        data = b"".join(
            _input_bytes(b, inputs[b.input_index], leads[b.id])
            for b in plan.buffers
            if b.kind is BufferKind.INPUT
        )
        (work / "in.bin").write_bytes(data)
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:abort_on_error=0")
        ran = subprocess.run(
            [str(exe), str(work / "in.bin"), str(work / "out.bin")],
            capture_output=True,
            text=True,
            timeout=900,
            env=env,
        )
        if ran.returncode:
            raise HostKernelError(f"the host run failed ({ran.returncode}):\n{ran.stderr[-6000:]}")
        raw = (work / "out.bin").read_bytes()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results, at = [], 0
    for _ in range(sets):
        outs = []
        for o in plan.outputs:
            b = plan.buffers[o.buffer]
            n = _buffer_bytes(b)
            flat = np.frombuffer(raw[at : at + n], dtype=b.dtype.numpy)
            at += n
            v = o.view
            outs.append(
                np.lib.stride_tricks.as_strided(
                    flat[v.offset :],
                    shape=v.shape,
                    strides=[s * b.dtype.itemsize for s in v.strides],
                ).copy()
            )
        results.append(outs)
    if at != len(raw):
        raise HostKernelError(f"the host run wrote {len(raw)} bytes of outputs, not {at}")
    return results
