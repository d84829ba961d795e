"""Peeled rows without a GPU: which accesses a peeled row reads by vectors
(`schedulers.reduction.peeled_accesses`), which params may peel (`is_valid`), and the
strided loop the codegen emits for them, compiled for the host with the C++ compiler and run
there: every element of every row (or split share) is visited exactly once, whatever the
row's offset, stride and length, and every vector starts at an aligned address. The GPU test
(tests/test_gpu_peeled_rows.py) runs the kernels against the reference."""

import dataclasses
import itertools
import shutil
import subprocess

import pytest
from test_reduction_defaults import H100, planning_view, row_sum_segment

from tunefuse import DataType, FusionDefinition
from tunefuse.codegen.reduction import _Emitter, _StepGroup
from tunefuse.schedulers import normalization, reduction


def _plan_segment(define, shape, dtype):  # noqa: ANN001, ANN202
    with FusionDefinition() as fd:
        define(fd, dtype)
    (seg,) = fd.plan([planning_view(*shape, dtype)]).segments
    return seg


def _softmax(fd, dtype):  # noqa: ANN001, ANN202
    x = fd.define_tensor(shape=[-1, -1], dtype=dtype)
    xf = fd.ops.cast(x, DataType.Float)
    m = fd.ops.max(xf, dims=[1], keepdim=True)
    e = fd.ops.exp(fd.ops.sub(xf, m))
    fd.add_output(fd.ops.cast(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)), dtype))


def test_odd_rows_peel_at_the_widest_vector_of_16_bytes():
    for cols, dtype, vec in [
        (11955, DataType.BFloat16, 8),
        (50257, DataType.Float, 4),
        (1001, DataType.BFloat16, 8),
        (4098, DataType.Float, 4),  # rows of an even length: vector 2 unpeeled, 4 peeled
    ]:
        seg = row_sum_segment(64, cols, dtype)
        assert reduction.reduced_vector(seg) < vec
        assert reduction.peel_vector(seg) == vec
        row = reduction.peeled_accesses(seg, vec)
        assert (row.lead, row.loads) == (0, frozenset({0}))
        assert reduction.peels(seg, vec) and not reduction.peels(seg, 1)


def test_rows_that_take_a_vector_unpeeled_are_not_peeled():
    seg = row_sum_segment(64, 4096, DataType.BFloat16)
    assert reduction.reduced_vector(seg) == 8 == reduction.peel_vector(seg)
    assert not reduction.peels(seg, 8)


def test_a_normalization_reads_by_vectors_only_what_lies_where_its_row_does():
    """softmax of odd rows: its output lies where its input does (dense both). A layernorm's
    weight (the same place in every row) is read an element a lane, the row by vectors."""
    seg = _plan_segment(_softmax, (128, 5003), DataType.BFloat16)
    assert reduction.peel_vector(seg) == 8
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        w = fd.define_tensor(shape=[-1], dtype=DataType.Float)
        mean = fd.ops.mean(x, dims=[1], keepdim=True)
        xc = fd.ops.sub(x, mean)
        var = fd.ops.mean(fd.ops.mul(xc, xc), dims=[1], keepdim=True)
        wb = fd.ops.broadcast_in_dim(w, [x.shape()[0], x.shape()[1]], [1])
        fd.add_output(fd.ops.mul(fd.ops.mul(xc, fd.ops.rsqrt(var)), wb))
    import numpy as np

    plan = fd.plan([planning_view(64, 3001, DataType.Float), np.zeros(3001, np.float32)])
    (seg,) = [s for s in plan.segments if s.scheduler.value == "normalization"]
    row = reduction.peeled_accesses(seg, 4)
    x_load = seg.loads[row.lead]
    assert {seg.loads[k].buffer for k in row.loads} == {x_load.buffer}
    assert len(seg.loads) > len(row.loads)  # the weight: an element a lane
    assert row.stores_by_vector


def test_a_softmax_of_a_sliced_input_writes_its_dense_output_an_element_a_lane():
    """softmax over x[:, 1:] of x [33, 1030] into a dense output: its loads start one element
    past a vector and its stores at 1029 * i, another place of a vector in each row. Peeled,
    the row is read by vectors and written an element a lane: valid params, not searched
    nor chosen by default until timed on the GPU (`reduction.peel_vector`)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.BFloat16)
        xf = fd.ops.cast(fd.ops.slice(x, [0, 1], [33, 1030]), DataType.Float)
        m = fd.ops.max(xf, dims=[1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(xf, m))
        fd.add_output(
            fd.ops.cast(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)), DataType.BFloat16)
        )
    (seg,) = fd.plan([planning_view(33, 1030, DataType.BFloat16)]).segments
    row = reduction.peeled_accesses(seg, 8)
    assert row.loads == {row.lead} and not row.stores and not row.stores_by_vector
    assert reduction.peel_vector(seg) == 1 and reduction.peel_vector(seg, element_stores=True) == 8
    assert reduction.vector_choices(seg) == [1]
    p = normalization.default_params(seg, H100)
    assert p.vector == 1
    reread = dataclasses.replace(
        p, cache_row=False, shared_row=False, cluster=1, vector=8, elements_per_thread=8
    )
    assert normalization.is_valid(seg, H100, reread) is None
    held = dataclasses.replace(reread, cache_row=True, threads_r=64, elements_per_thread=24)
    assert normalization.is_valid(seg, H100, held) is None


def test_no_peel_where_a_row_is_not_the_innermost_dim_alone():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(x, dims=[0]))
    (seg,) = fd.plan([planning_view(1001, 77, DataType.Float)]).segments
    assert reduction.peel_vector(seg) == 1
    assert not reduction.peels(seg, 4)


def test_which_params_may_peel():
    seg = row_sum_segment(4096, 11955, DataType.BFloat16)
    p = reduction.default_params(seg, H100)
    assert p.vector == 8  # peeled by default: `reduction.default_row_vector`
    peeled = dataclasses.replace(p, vector=8, rows_per_lane=1)
    assert reduction.is_valid(seg, H100, peeled) is None
    why = reduction.is_valid(seg, H100, dataclasses.replace(peeled, rows_per_lane=2))
    assert "peeled" in why and "rows_per_lane 1" in why
    assert "at most 8" in reduction.is_valid(seg, H100, dataclasses.replace(p, vector=16))

    nseg = _plan_segment(_softmax, (128, 20011), DataType.Float)
    n = normalization.default_params(nseg, H100)
    reread = dataclasses.replace(
        n, cache_row=False, shared_row=False, cluster=1, vector=4, elements_per_thread=4
    )
    assert normalization.is_valid(nseg, H100, reread) is None
    staged = dataclasses.replace(reread, shared_row=True)
    assert normalization.is_valid(nseg, H100, staged) is None
    held = dataclasses.replace(reread, cache_row=True, threads_r=512, elements_per_thread=40)
    assert normalization.is_valid(nseg, H100, held) is None
    crowded = dataclasses.replace(held, threads_r=1, elements_per_thread=64)
    assert "head and tail" in normalization.is_valid(nseg, H100, crowded)
    why = normalization.is_valid(nseg, H100, dataclasses.replace(reread, cluster=2))
    assert why is not None and "cluster" in why


def test_a_peeled_staged_row_takes_its_whole_vectors_and_one_more():
    """Shared memory: 20011 floats staged at vector 4 take 20016 (a vector more than the
    row's whole vectors), so that each row starts at an aligned place; unpeeled, the row."""
    seg = _plan_segment(_softmax, (128, 20011), DataType.Float)
    assert normalization.staged_row_elements(seg, 1, 20011) == 20011
    assert normalization.staged_row_elements(seg, 4, 20011) == 20016
    assert normalization.shared_row_bytes(seg, 2, 4) == 2 * 20016 * 4
    p = normalization.Params(
        threads_r=512, cache_row=False, shared_row=True, vector=4, elements_per_thread=4
    )
    em = _Emitter(seg, "k", [], p, persistent=True)
    assert em.dynamic_shared_bytes() == 20016 * 4


# -- the emitted loop, run on the host --------------------------------------------------

HARNESS = r"""
#include <cstdio>
#include <vector>
static std::vector<int> seen;
static long long bad = 0;
static int V_ = 1;
static void hit(long long off0, long long r, int v, int vector_chunk) {
  const long long i = r + v;
  if (i < 0 || i >= (long long)seen.size()) { ++bad; return; }
  ++seen[i];
  if (vector_chunk && v == 0 && (off0 + r) % V_ != 0) ++bad;  // a vector off its alignment
}
// A staged row's place of element r + v (r + v + sm): inside the row's region of whole
// vectors and one more (staged_row_elements), a vector's at an aligned place.
static void slot(long long at, int v, int vector_chunk) {
  const long long n = (long long)seen.size();
  if (at < 0 || at >= (n + V_ - 1) / V_ * V_ + V_) ++bad;
  if (vector_chunk && v == 0 && at % V_ != 0) ++bad;
}
// A held row's register of element i for thread tr: below the thread's slots, one element
// each.
static std::vector<int> regs;
static void held(int tr, int at, int slots) {
  if (at < 0 || at >= slots) { ++bad; return; }
  const size_t k = (size_t)tr * slots + at;
  if (regs.size() <= k) regs.resize(k + 1, 0);
  if (regs[k]++) ++bad;
}
typedef void (*Loop)(long long, long long, int, long long, long long, long long, long long);
struct Case { Loop loop; int vector, threads, split; };
"""

DRIVER = r"""
int main() {
  const long long lengths[] = {1, 3, 7, 8, 9, 61, 1000, 4103};
  for (const Case& c : cases) {
    V_ = c.vector;
    for (long long n : lengths)
      for (long long offset : {0LL, 1LL, (long long)c.vector - 1})
        for (long long stride : {n, n + 1, n + c.vector - 1})
          for (long long i0 = 0; i0 < 2 * c.vector + 1; ++i0) {
            seen.assign(n, 0);
            regs.assign(0, 0);
            const long long parts = c.split;
            const long long chunk = (n + parts - 1) / parts;
            const long long share = (chunk + c.vector - 1) / c.vector * c.vector;
            for (long long s = 0; s < parts; ++s) {
              long long b = s * share < n ? s * share : n;
              long long e = b + share < n ? b + share : n;
              for (int tr = 0; tr < c.threads; ++tr) c.loop(b, e, tr, i0, n, offset, stride);
            }
            for (int k : seen) if (k != 1) ++bad;
          }
  }
  std::printf("%lld\n", bad);
  return 0;
}
"""


def _loop_function(name: str, seg, p, group_steps: int | None) -> str:  # noqa: ANN001
    """A host function running the strided loop `element_loop` emits for `p` (its body
    recording each element it visits, and where `p` stages the row its place there) for one
    thread `tr` of row `i0`; r_begin..r_end the share where `p` splits the row
    (`share_bounds`' shares, in whole vectors)."""
    staged = getattr(p, "shared_row", False)
    kept = getattr(p, "cache_row", False)
    em = _Emitter(seg, name, [], p, persistent=staged or kept)
    off0 = "(L0_o + L0_s0 * i0)"

    def body(ind: str, cached: bool, in_vector: bool) -> None:
        chunk = 0 if em.edge else 1
        em.w(f"{ind}hit({off0}, i{em.last}, v, {chunk});")
        if staged:
            em.w(f"{ind}slot({em.staged_at('r0 + v')}, v, {chunk});")
        if kept:
            em.w(f"{ind}held(tr, c * {em.vec} + v, {em.slots});")

    group = None
    if group_steps is not None:
        group = _StepGroup(group_steps, None, body, lambda ind: em.w(f"{ind}(void)0;"))
    em.element_loop(body, "  ", reads=(), group=group)
    it = em.itype
    return (
        f"static void {name}(long long r_begin_, long long r_end_, int tr, long long i0_, "
        "long long n_red_, long long L0_o_, long long L0_s0_) {\n"
        f"  const {it} r_begin = r_begin_, r_end = r_end_, i0 = i0_, n_red = n_red_;\n"
        f"  const {it} L0_o = L0_o_, L0_s0 = L0_s0_;\n"
        "  const bool row_ok = true;\n" + "\n".join(em.lines) + "\n}\n"
    )


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a host C++ compiler")
def test_the_emitted_loop_visits_each_element_once_with_aligned_vectors(tmp_path):
    """Vectors of 2-8, 1-32 threads a row, unrolled or not, a Welford-like group of 2 or 3
    chunks a trip or none, whole rows or 3 shares of one, rows staged in shared memory or
    held in registers (each element in a register of its own);
    rows of 1-4103 elements starting 0 to vector - 1 elements past an alignment, at strides
    that move it from row to row."""
    seg = row_sum_segment(64, 11955, DataType.BFloat16)  # unpeeled vector 1: any vector peels
    functions, cases = [], []
    for k, (vec, threads, unroll, group, split) in enumerate(
        itertools.product((2, 4, 8), (1, 4, 32), (1, 4), (None, 2, 3), (1, 3))
    ):
        p = reduction.Params(threads_r=threads, vector=vec, unroll=unroll, split=split)
        functions.append(_loop_function(f"loop{k}", seg, p, group))
        cases.append(f"{{loop{k}, {vec}, {threads}, {split}}}")
    # staged rows (a softmax's, in shared memory): the same loop, each element's place there
    staged = _plan_segment(_softmax, (64, 20011), DataType.Float)
    for k, (vec, threads) in enumerate(itertools.product((2, 4), (1, 4, 32))):
        p = normalization.Params(
            threads_r=threads,
            cache_row=False,
            shared_row=True,
            vector=vec,
            elements_per_thread=vec,
            unroll=4,
        )
        functions.append(_loop_function(f"staged{k}", staged, p, None))
        cases.append(f"{{staged{k}, {vec}, {threads}, 1}}")
    # held rows (a softmax's, in registers): chunks of whole vectors, the head and tail in
    # registers of their own; enough elements a thread for rows of up to 4103 (more than a
    # GPU's registers hold where the threads are few: here they are array slots)
    narrow = _plan_segment(_softmax, (64, 20011), DataType.BFloat16)
    for k, (vec, threads) in enumerate(itertools.product((2, 4, 8), (1, 4, 32, 128))):
        ept = -(-4103 // (threads * vec)) * vec
        p = normalization.Params(
            threads_r=threads, cache_row=True, vector=vec, elements_per_thread=ept, unroll=1
        )
        functions.append(_loop_function(f"held{k}", narrow, p, None))
        cases.append(f"{{held{k}, {vec}, {threads}, 1}}")
    source = HARNESS + "".join(functions)
    source += "static const Case cases[] = {" + ", ".join(cases) + "};\n" + DRIVER
    src = tmp_path / "loops.cpp"
    src.write_text(source.replace("#pragma unroll", "// unroll"))
    exe = tmp_path / "loops"
    subprocess.run(["g++", "-O1", "-w", "-o", str(exe), str(src)], check=True, timeout=600)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=600)
    assert out.stdout.strip() == "0"


def test_kernels_of_one_structure_are_named_by_their_code():
    """Rows of a multiple of the vector (read unpeeled) and rows of an odd length (peeled)
    share a structure (the kernel key) and may share params, but not code: their kernels
    have two names (one name served both once, and the GPU ran the first one's code for the
    second's rows: a misaligned vector). Rows of one code keep one name whatever their
    count."""
    from tunefuse.codegen import generate

    def kernel(rows: int, cols: int):  # noqa: ANN202
        with FusionDefinition() as fd:
            _softmax(fd, DataType.BFloat16)
        plan = fd.plan([planning_view(rows, cols, DataType.BFloat16)])
        (seg,) = plan.segments
        p = normalization.Params(
            threads_r=512, cache_row=False, shared_row=True, vector=4, elements_per_thread=4
        )
        assert normalization.is_valid(seg, H100, p) is None
        return seg, generate(seg, p, H100, {b.id: b.dtype for b in plan.buffers})

    aligned_seg, aligned = kernel(122, 57812)
    peeled_seg, peeled = kernel(1663, 41015)
    assert aligned_seg.kernel_key == peeled_seg.kernel_key
    assert not reduction.peels(aligned_seg, 4) and reduction.peels(peeled_seg, 4)
    assert aligned.name != peeled.name
    assert kernel(7, 57812)[1].name == aligned.name
    assert kernel(9, 41015)[1].source == peeled.source
