"""Generated kernels run on the host (tests/host_kernels.py: a fiber a GPU thread, buffers
under AddressSanitizer, vectors under UBSan's alignment check): every peeled-row kernel of
the GPU test against the reference, the zoo's defaults, strided rows in blocks of whole
slabs, and the emulation's own checks (a read past a buffer, a vector off its alignment, a
wrong value) shown to fire."""

import dataclasses
import pathlib
import shutil
import sys

import ml_dtypes
import numpy as np
import pytest
from fusion_zoo import ZOO, build, inputs_for, transpose2d
from fuzz import FuzzCase, agree, corpus, device_plan
from fuzz_corpus import _loosest_tolerance, host_corpus_failures
from host_kernels import HostKernelError, run_on_host, run_plan_on_host
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_gpu_execute import assert_agrees
from test_gpu_peeled_rows import CASES, LAYOUTS, VARIANTS, peel_variant
from test_transpose_defaults import RECTANGULAR_TILES

from tunefuse import DataType, reference
from tunefuse.codegen import reduction as codegen_reduction
from tunefuse.device_info import PROFILES
from tunefuse.planning.indexing import Var
from tunefuse.schedulers import reduction, scheduler_for, transpose

pytestmark = pytest.mark.skipif(
    shutil.which("g++") is None or not sys.platform.startswith("linux"),
    reason="needs g++ on Linux (ucontext fibers, AddressSanitizer)",
)

# Rows enough for a row stride to take each of its places within a vector of 8.
HOST_ROWS = 24


def _changed(kind: str, changes: dict):  # noqa: ANN202
    def choose(seg, device):  # noqa: ANN001, ANN202
        p = scheduler_for(seg.scheduler).default_params(seg, device)
        return dataclasses.replace(p, **changes) if seg.scheduler.value == kind else p

    return choose


@pytest.mark.parametrize("case", range(len(CASES)))
def test_peeled_rows_agree_with_the_reference_on_the_host(case):
    """Every valid peeled variant of the GPU test's case (vectors 2-8, its VARIANTS, each
    layout of a normalization), in one host program, and the default params."""
    kind, dtype = CASES[case][3], CASES[case][1]
    layouts = LAYOUTS if kind == "normalization" else ("reread",)
    sets, names = [None], ["default"]
    base = peel_variant(case, 2, 0, np.random.default_rng(0), rows=HOST_ROWS)
    for layout in layouts:
        for vector in (2, 4, 8):
            for variant in range(len(VARIANTS)):
                v = peel_variant(case, vector, variant, np.random.default_rng(0), layout, HOST_ROWS)
                if v.why is None and reduction.peels(v.segment, vector):
                    sets.append(_changed(kind, v.changes))
                    names.append(f"{layout} vector {vector} {VARIANTS[variant]}")
    runs = run_on_host(base.fd, base.inputs, sets)
    for name, run in zip(names, runs, strict=True):
        try:
            assert_agrees(base.fd, base.inputs, run.outputs, dtype)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None


@pytest.mark.parametrize("dtype", [DataType.Float, DataType.BFloat16], ids=lambda d: d.value)
@pytest.mark.parametrize("name", sorted(ZOO))
def test_the_zoo_agrees_with_the_reference_on_the_host(name, dtype):
    """The zoo's fusions with their default params, rows of odd length."""
    fd = build(ZOO[name], dtype)
    inputs = inputs_for(fd, 37, 203, np.random.default_rng(1))
    (run,) = run_on_host(fd, inputs, [None])
    assert_agrees(fd, inputs, run.outputs, dtype)


# The GPU test's fuzzed corpus (tests/test_gpu_fuzz.py: seed 11, 120 fusions), in parts
# (about 3 minutes in all on 2 cores). Its named cases are larger (the rotary embedding's
# rows): 10 minutes here, so they stay the GPU's.
FUZZ_SEED, FUZZ_COUNT, FUZZ_PARTS = 11, 120, 4


@pytest.mark.parametrize("part", range(FUZZ_PARTS))
def test_the_fuzzed_corpus_agrees_with_the_reference_on_the_host(part):
    """Each fusion of the corpus at its default params and at a random valid point, planned
    as on the GPU (strided, offset, expanded and in-place inputs), every output against the
    reference: what tests/fuzz_corpus.py runs on the GPU under compute-sanitizer, here under
    AddressSanitizer."""
    cases = list(corpus(FUZZ_SEED, FUZZ_COUNT))
    per = -(-len(cases) // FUZZ_PARTS)
    failures = host_corpus_failures(cases[part * per : (part + 1) * per])
    assert not failures, "\n".join(failures)


def _peeled_params(seg, device):  # noqa: ANN001, ANN202
    """A row reduction's or normalization's defaults with its rows peeled at the widest
    vector (one row a lane, no cluster; a held row's elements rounded to whole peeled
    vectors, a re-read or staged row's a vector; stores that lie elsewhere in a vector than
    the row's loads written an element a lane); None where its rows do not peel or the
    peeled params cannot run."""
    if seg.scheduler.value not in ("reduction", "normalization"):
        return None
    vector = reduction.peel_vector(seg, element_stores=True)
    if not reduction.peels(seg, vector):
        return None
    sched = scheduler_for(seg.scheduler)
    p = sched.default_params(seg, device)
    changes = {"vector": vector, "rows_per_lane": 1}
    if seg.scheduler.value == "normalization":
        _, n_red = reduction.sizes(seg)
        held = -(-n_red // (p.threads_r * vector)) * vector
        changes.update(cluster=1, elements_per_thread=held if p.cache_row else vector)
    peeled = dataclasses.replace(p, **changes)
    return peeled if sched.is_valid(seg, device, peeled) is None else None


@pytest.mark.parametrize("seed", [23, 24, 27, 28])
def test_fuzzed_fusions_with_their_rows_peeled_agree_on_the_host(seed):
    """Fusions of the corpus (150 a seed) whose reductions or normalizations can peel
    their rows (odd lengths, offset, strided and expanded inputs, pads, cats, weights and
    outputs that lie elsewhere in a vector), run with every such kernel peeled."""
    device = PROFILES["sm_90"]
    failures, peeled = [], 0
    for case in corpus(seed, 150):
        plan = device_plan(case, device=device)
        if not any(_peeled_params(seg, device) for seg in plan.segments):
            continue
        peeled += 1
        try:
            (run,) = run_plan_on_host(plan, case.inputs, case.layouts, [_peeled_params])
        except HostKernelError as e:
            failures.append(f"{case}: {str(e)[:2000]}")
            continue
        want = reference.run(case.fd.fusion, case.inputs, include_aliased=True)
        loosest = _loosest_tolerance(case.fd.fusion)
        for o, got in zip(plan.outputs, run.outputs, strict=True):
            if not agree(got, want[o.position], loosest):
                failures.append(f"{case}: output {o.position} differs")
                break
    assert peeled >= 5, f"seed {seed}: only {peeled} fusions peel"
    assert not failures, "\n".join(failures)


SLAB_BLOCKS = [
    # (pattern, dtype, shape [A, R, L], changes): strided rows (the innermost dim not
    # reduced) in blocks of whole slabs' outputs, rows_per_block a multiple of L rather than
    # a power of two: each warp reads consecutive addresses. The variants of
    # benchmarks/surface/middle_slabs_probe/slab_probe.sh.txt, owed to the GPU.
    ("middle_softmax", DataType.Float, (5, 300, 6), {"rows_per_block": 6, "threads_r": 64}),
    ("middle_softmax", DataType.Float, (5, 300, 6), {"rows_per_block": 6, "threads_r": 128}),
    ("middle_softmax", DataType.Float, (5, 300, 6), {"rows_per_block": 12, "threads_r": 64}),
    ("middle_softmax", DataType.BFloat16, (9, 26, 17), {"rows_per_block": 17, "threads_r": 32}),
    ("middle_softmax", DataType.BFloat16, (9, 26, 17), {"rows_per_block": 34, "threads_r": 16}),
    ("middle", DataType.BFloat16, (7, 3, 37), {"rows_per_block": 37}),
    ("middle", DataType.BFloat16, (7, 3, 37), {"rows_per_block": 74}),
    ("middle", DataType.Float, (5, 300, 6), {"rows_per_block": 6, "threads_r": 128}),
]


@pytest.mark.parametrize("case", range(len(SLAB_BLOCKS)))
def test_strided_rows_in_blocks_of_whole_slabs_agree_on_the_host(case):
    """Each SLAB_BLOCKS variant (a normalization re-read, staged and held; a reduction as
    it is), planned without a device so that a normalization stays one kernel."""
    _variant_agrees_on_the_host(*SLAB_BLOCKS[case], seed=case)


OUTER_LANES = [
    # (pattern, dtype, shape, changes): strided reductions of one thread a column of a few
    # bytes, rows a lane (`reduction._outer_rows_a_lane`), the last tile of lanes partly empty
    ("middle", DataType.BFloat16, (7, 3, 37), {"threads_r": 1, "rows_per_lane": 2}),
    ("middle", DataType.BFloat16, (9, 2, 5), {"threads_r": 1, "rows_per_lane": 4}),
    ("col", DataType.BFloat16, (2, 1001), {"threads_r": 1, "vector": 1, "rows_per_lane": 4}),
    ("col", DataType.Float, (3, 999), {"threads_r": 1, "vector": 1, "rows_per_lane": 2}),
    ("var_mean0", DataType.Float, (3, 777), {"threads_r": 1, "vector": 1, "rows_per_lane": 2}),
    # up to OUTER_LANE_LOADS (16) loads a lane, and outputs' runs of 3 (fast divisors)
    ("col", DataType.BFloat16, (6, 1001), {"threads_r": 1, "vector": 1, "rows_per_lane": 2}),
    ("col", DataType.BFloat16, (7, 999), {"threads_r": 1, "vector": 1, "rows_per_lane": 2}),
    ("middle", DataType.BFloat16, (9, 3, 3), {"threads_r": 1, "rows_per_lane": 4}),
    ("var_mean0", DataType.BFloat16, (3, 1003), {"threads_r": 1, "vector": 1, "rows_per_lane": 4}),
]


@pytest.mark.parametrize("case", range(len(OUTER_LANES)))
def test_short_columns_rows_a_lane_agree_on_the_host(case):
    """Each OUTER_LANES variant, rows_per_block 64 so that the last tile is partly empty; the
    bf16 ones take their rows adjacent (`codegen.reduction.adjacent_lane_rows`)."""
    from test_tail_groups import _kernel_source

    pattern, dtype, shape, changes = OUTER_LANES[case]
    source = _kernel_source(pattern, dtype, shape, {**changes, "rows_per_block": 64})
    adjacent = f"(int)to * {changes['rows_per_lane']} + q;" in source
    assert adjacent is (dtype is DataType.BFloat16), source
    _variant_agrees_on_the_host(pattern, dtype, shape, {**changes, "rows_per_block": 64}, case)


@given(
    outer=st.integers(1, 9),
    reduced=st.integers(2, 9),
    inner=st.integers(2, 40),
    dtype=st.sampled_from([DataType.BFloat16, DataType.Float]),
    rows_per_lane=st.sampled_from([2, 4, 8]),
    rows_per_block=st.sampled_from([32, 64]),
    unroll=st.sampled_from([1, 2, 4, 8]),
    evict_first=st.booleans(),
)
@settings(max_examples=12, deadline=None, derandomize=True)
def test_fuzzed_strided_rows_a_lane_agree_on_the_host(
    outer, reduced, inner, dtype, rows_per_lane, rows_per_block, unroll, evict_first
):
    """Sums over the middle dim of [A, C, L], one thread a column, rows a lane (adjacent for
    up to 4 bf16 rows, `codegen.reduction.adjacent_lane_rows`; else apart), at drawn params:
    each run agrees and reads nothing past its buffers."""
    shape = (outer, reduced, inner)
    changes = dict(
        threads_r=1,
        vector=1,
        rows_per_lane=rows_per_lane,
        rows_per_block=rows_per_block,
        unroll=unroll,
        evict_first=evict_first,
    )
    seg, p, changes = _strided_lanes("middle", dtype, shape, changes)
    adjacent = dtype is DataType.BFloat16 and rows_per_lane <= 4  # ADJACENT_LANE_BYTES
    assert codegen_reduction.adjacent_lane_rows(seg, p, False) is adjacent
    _variant_agrees_on_the_host("middle", dtype, shape, changes, outer)


def _strided_lanes(pattern: str, dtype: DataType, shape: tuple, changes: dict):  # noqa: ANN202
    """The one segment of a surface `pattern` on `shape`, its default params (sm_90) with
    `changes` in an unsplit outer layout, and those changes; a draw whose params cannot run
    (registers: rows a lane x column) is assumed away."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
    from patterns import pattern_fusion

    changes = {**changes, "inner": False, "split": 1}
    (seg,) = pattern_fusion(pattern, dtype).plan([np.zeros(shape, dtype.numpy)]).segments
    device = PROFILES["sm_90"]
    p = dataclasses.replace(reduction.default_params(seg, device), **changes)
    assume(reduction.is_valid(seg, device, p) is None)
    return seg, p, changes


@given(
    pattern=st.sampled_from(["middle", "middle_var_mean"]),
    outer=st.integers(1, 9),
    reduced=st.integers(1, 9),
    inner_vectors=st.integers(1, 12),
    dtype=st.sampled_from([DataType.BFloat16, DataType.Float]),
    vector=st.sampled_from([2, 4]),
    rows_per_lane=st.sampled_from([2, 4, 8]),
    threads_r=st.sampled_from([1, 2]),
    rows_per_block=st.sampled_from([32, 64]),
    unroll=st.sampled_from([1, 2, 4]),
)
@settings(max_examples=14, deadline=None, derandomize=True)
def test_fuzzed_vectors_along_outputs_rows_a_lane_agree_on_the_host(
    pattern,
    outer,
    reduced,
    inner_vectors,
    dtype,
    vector,
    rows_per_lane,
    threads_r,
    rows_per_block,
    unroll,
):
    """Reductions over the middle dim of [A, C, L] whose lanes take a vector of consecutive
    outputs and rows a lane of them (`rows_per_block` vectors apart), at drawn params: each
    run agrees and reads nothing past its buffers."""
    shape = (outer, reduced, inner_vectors * vector)
    changes = dict(
        threads_r=threads_r,
        vector=vector,
        rows_per_lane=rows_per_lane,
        rows_per_block=rows_per_block,
        unroll=unroll,
        evict_first=False,
    )
    seg, p, changes = _strided_lanes(pattern, dtype, shape, changes)
    assert not codegen_reduction.adjacent_lane_rows(seg, p, False)
    _variant_agrees_on_the_host(pattern, dtype, shape, changes, outer)


HELD_OUTER = [
    # (pattern, dtype, shape, changes): strided normalization rows held in registers
    # (`codegen.reduction.clamped_fill`), a thread's share of the row as the defaults make it
    # or longer than the row (its chunks past the row's end read the row's last element)
    ("middle_softmax", DataType.BFloat16, (3, 26, 17), {"threads_r": 2, "elements_per_thread": 13}),
    ("middle_softmax", DataType.Float, (5, 10, 7), {"threads_r": 1, "elements_per_thread": 16}),
    ("middle_softmax", DataType.Float, (4, 7, 9), {"threads_r": 2, "elements_per_thread": 6}),
    ("middle_softmax", DataType.BFloat16, (6, 33, 5), {"threads_r": 4, "elements_per_thread": 9}),
]


@pytest.mark.parametrize("case", range(len(HELD_OUTER)))
def test_held_strided_rows_agree_on_the_host(case):
    """Each HELD_OUTER variant, rows held one a thread-group (rows_per_block 32: the last tile
    partly empty), agrees and reads nothing past its buffers."""
    pattern, dtype, shape, changes = HELD_OUTER[case]
    held = {"cache_row": True, "shared_row": False, "vector": 1, "rows_per_lane": 1}
    _variant_agrees_on_the_host(
        pattern, dtype, shape, {**changes, **held, "rows_per_block": 32}, case
    )


TAIL_GROUPS = [
    # (pattern, dtype, shape, changes): lanes of under TAIL_GROUP_TRIPS groups of `unroll`
    # chunks, read as whole groups then one tail group of clamped loads (`codegen.reduction.
    # whole_groups_then_tail`): no whole group, a tail past the row's end, lanes with no tail
    ("middle", DataType.BFloat16, (9, 3, 114), {"threads_r": 1, "vector": 2, "unroll": 2}),
    ("middle", DataType.BFloat16, (9, 5, 94), {"threads_r": 1, "vector": 2, "unroll": 4}),
    ("middle", DataType.Float, (7, 11, 19), {"threads_r": 1, "vector": 1, "unroll": 8}),
    ("col", DataType.Float, (30, 37), {"threads_r": 8, "vector": 1, "unroll": 8}),
    ("row", DataType.BFloat16, (37, 80), {"threads_r": 4, "vector": 8, "unroll": 4}),
    ("row", DataType.Float, (37, 200), {"threads_r": 8, "vector": 4, "unroll": 2}),
    ("col", DataType.BFloat16, (19, 45), {"threads_r": 2, "vector": 1, "unroll": 4}),
]


@pytest.mark.parametrize("case", range(len(TAIL_GROUPS)))
def test_tail_groups_agree_on_the_host(case):
    """Each TAIL_GROUPS variant takes the tail group, agrees with the reference and reads
    nothing past its buffers (rows_per_block 32: the last tile partly empty)."""
    from test_tail_groups import takes_tail_group

    pattern, dtype, shape, changes = TAIL_GROUPS[case]
    changes = {**changes, "rows_per_block": 32}
    assert takes_tail_group(pattern, dtype, shape, changes)
    _variant_agrees_on_the_host(pattern, dtype, shape, changes, case)


SLABS = [
    # (dtype, shape of [A, C, L], changes): strided reductions of runs under a warp, a block
    # a slab (`reduction._whole_slabs`): one output a lane, pairs of bf16, 13 pairs a block
    # row, a run of 3 (32 threads a column); split as the defaults split them, and by 3
    (DataType.Float, (9, 300, 7), {}),
    (DataType.BFloat16, (6, 700, 6), {}),
    (DataType.BFloat16, (5, 520, 26), {"split": 3}),
    (DataType.Float, (4, 3001, 3), {"split": 1}),
]


@pytest.mark.parametrize("case", range(len(SLABS)))
def test_a_block_a_slab_agrees_on_the_host(case):
    """Each SLABS case's defaults are a block of one slab's outputs, and agree."""
    dtype, shape, changes = SLABS[case]
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
    from patterns import pattern_fusion

    x = np.zeros(shape, dtype.numpy)
    (seg,) = pattern_fusion("middle", dtype).plan([x]).segments
    p = scheduler_for(seg.scheduler).default_params(seg, PROFILES["sm_90"])
    assert not p.inner and p.rows_per_block * p.vector == shape[2], p
    _variant_agrees_on_the_host("middle", dtype, shape, changes, case)


def _variant_agrees_on_the_host(pattern, dtype, shape, changes, seed) -> None:  # noqa: ANN001
    """A surface pattern's kernel with `changes` to its defaults (a normalization re-read,
    staged and held), planned without a device so that a normalization stays one kernel,
    agrees with the reference on the host."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
    from patterns import pattern_fusion

    fd = pattern_fusion(pattern, dtype)
    x = (np.random.default_rng(seed).standard_normal(shape) * 2 + 1).astype(dtype.numpy)
    plan = fd.plan([x])
    kind = plan.segments[0].scheduler.value
    layouts = (
        [
            {"cache_row": False, "shared_row": False, "elements_per_thread": 1, "vector": 1},
            {"cache_row": False, "shared_row": True, "elements_per_thread": 1, "vector": 1},
            {},
        ]
        if kind == "normalization"
        else [{}]
    )
    sets = []
    for layout in layouts:
        params = {**changes, **layout}

        def choose(seg, device, params=params):  # noqa: ANN001, ANN202
            sched = scheduler_for(seg.scheduler)
            p = dataclasses.replace(sched.default_params(seg, device), **params)
            assert sched.is_valid(seg, device, p) is None, sched.is_valid(seg, device, p)
            return p

        sets.append(choose)
    for run in run_plan_on_host(plan, [x], ["contiguous"], sets):
        assert_agrees(fd, [x], run.outputs, dtype)


def _row_sum_case() -> int:
    return next(k for k, c in enumerate(CASES) if c[2] == (37, 1001))


def _run_peeled(case: int):  # noqa: ANN202
    """The row sums of [37, 1001] floats at vector 4: the last row, 36 * 1001 elements in,
    starts aligned and ends with a tail of one element."""
    v = peel_variant(case, 4, 0, np.random.default_rng(0))
    return v, run_on_host(v.fd, v.inputs, [_changed(CASES[case][3], v.changes)])


def test_the_host_reports_a_read_past_a_buffer(monkeypatch):
    """A peeled row whose last vector runs past the row's end: the last row's reads past
    the input's last byte."""
    emit = codegen_reduction._Emitter.peel_bounds

    def past_the_end(self, indent, begin, end):  # noqa: ANN001, ANN202
        emit(self, indent, begin, end)
        self.w(f"{indent}(void)pb;")
        self.lines[-3] = self.lines[-3].replace(
            f"({end} - pa) / {self.vec}", f"({end} - pa + {self.vec - 1}) / {self.vec}"
        )

    monkeypatch.setattr(codegen_reduction._Emitter, "peel_bounds", past_the_end)
    with pytest.raises(HostKernelError, match="heap-buffer-overflow"):
        _run_peeled(_row_sum_case())


def test_the_host_reports_a_vector_off_its_alignment(monkeypatch):
    emit = codegen_reduction._Emitter.peel_bounds

    def misaligned(self, indent, begin, end):  # noqa: ANN001, ANN202
        at = len(self.lines)
        emit(self, indent, begin, end)
        self.lines[at + 1] = self.lines[at + 1].replace(" ph = ", " ph = 1 + ")

    monkeypatch.setattr(codegen_reduction._Emitter, "peel_bounds", misaligned)
    with pytest.raises(HostKernelError, match="misaligned"):
        _run_peeled(_row_sum_case())


def test_the_host_computes_what_the_kernel_says(monkeypatch):
    """A kernel that drops each row's tail runs cleanly and computes a wrong sum: the
    comparison with the reference is what catches it."""
    emit = codegen_reduction._Emitter.peeled_edges

    def no_tail(self, body, indent, stage):  # noqa: ANN001, ANN202
        at = len(self.lines)
        emit(self, body, indent, stage)
        self.lines[at] = self.lines[at].replace("(pe - pb)", "0")

    monkeypatch.setattr(codegen_reduction._Emitter, "peeled_edges", no_tail)
    v, (run,) = _run_peeled(_row_sum_case())
    with pytest.raises(AssertionError):
        assert_agrees(v.fd, v.inputs, run.outputs, CASES[_row_sum_case()][1])


@pytest.mark.parametrize("case", range(len(RECTANGULAR_TILES)))
def test_rectangular_transpose_tiles_agree_on_the_host(case):
    rows, cols, dtype, changes = RECTANGULAR_TILES[case]
    fd = build(transpose2d, dtype)
    x = (
        np.random.default_rng(case)
        .standard_normal((rows, cols))
        .astype(np.float32 if dtype is DataType.Float else ml_dtypes.bfloat16)
    )
    device = PROFILES["sm_90"]
    (seg,) = fd.plan([x], device=device).segments
    p = dataclasses.replace(scheduler_for(seg.scheduler).default_params(seg, device), **changes)
    assert transpose.is_valid(seg, device, p) is None, transpose.is_valid(seg, device, p)
    (run,) = run_on_host(fd, [x], [_changed("transpose", changes)])
    np.testing.assert_array_equal(np.asarray(run.outputs[0]), x.T)


# Odd rows of 33-255 as `reduction.SCALAR_ROW_TRIPS` lays them (32 lanes of 2 trips of 4
# chunks, 2 rows a lane), and of 33-96 as `reduction.REDUCED_ODD_ROW_LANES` does (16 lanes,
# 8 rows a block, 2 rows a lane)
_TRIPS = dict(threads_r=32, rows_per_block=8, unroll=4, rows_per_lane=2)
_SIXTEEN = dict(threads_r=16, rows_per_block=8, unroll=4, rows_per_lane=2)
ODD_REDUCED_ROWS = [
    ("row_sum", DataType.BFloat16, 203, _TRIPS),
    ("row_sum", DataType.Float, 255, _TRIPS),
    ("row_sum", DataType.Float, 129, _TRIPS),
    ("logsumexp", DataType.Float, 195, _TRIPS),
    ("row_sum", DataType.Float, 33, _SIXTEEN),
    ("row_sum", DataType.BFloat16, 77, _SIXTEEN),
    ("logsumexp", DataType.Float, 75, _SIXTEEN),
    ("logsumexp", DataType.BFloat16, 57, _SIXTEEN),
]


@pytest.mark.parametrize("name, dtype, cols, changes", ODD_REDUCED_ROWS)
def test_odd_rows_in_fewer_lanes_of_two_rows_agree_on_the_host(name, dtype, cols, changes):
    """Each ODD_REDUCED_ROWS layout on 37 rows, too few for the default to take 2 rows a
    lane: the last lane's second row past the last row, and its chunks past the row's end."""
    fd = build(ZOO[name], dtype)
    inputs = inputs_for(fd, 37, cols, np.random.default_rng(cols))
    (run,) = run_on_host(fd, inputs, [_changed("reduction", changes)])
    assert_agrees(fd, inputs, run.outputs, dtype)


# and rows past a warp's vectors that the short rows' lanes or one row a lane hold (bf16
# pairs of 45 vectors in 16 lanes; odd bf16 rows of 151 in 32 lanes, one row a lane)
SHORT_NORM_ROWS = [3, 5, 6, 10, 11, 13, 22, 34, 90, 151]


@pytest.mark.parametrize("cols", SHORT_NORM_ROWS)
@pytest.mark.parametrize("dtype", [DataType.Float, DataType.BFloat16])
@pytest.mark.parametrize("name", ["softmax", "layernorm", "rmsnorm"])
def test_short_normalization_rows_as_the_defaults_lay_them_agree_on_the_host(name, dtype, cols):
    """Short rows laid out as the defaults lay them on 2**21 rows (`normalization.
    scalar_row_lanes`, `fewer_narrow_lanes`, `_narrow_lanes_hold`, `lane_rows_within`: lanes
    of up to 6 elements or 16 bytes, rows a lane of up to 16 bytes) run on 37 rows, the last
    block's lanes and rows a lane past the last row."""
    fd = build(ZOO[name], dtype)
    p = _defaults_of_many_rows(fd, cols, dtype)
    fields = ("threads_r", "rows_per_block", "elements_per_thread", "vector", "rows_per_lane")
    _run_37_rows_as(fd, cols, dtype, "normalization", {f: getattr(p, f) for f in fields})


def _defaults_of_many_rows(fd, cols, dtype):  # noqa: ANN001, ANN202
    """The default params of `fd`'s one kernel on 2**21 rows of `cols` (sm_90)."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
    from patterns import planning_inputs

    device = PROFILES["sm_90"]
    (big,) = fd.plan(planning_inputs(fd, (1 << 21, cols), dtype), device=device).segments
    return scheduler_for(big.scheduler).default_params(big, device)


def _run_37_rows_as(fd, cols, dtype, kind, changes):  # noqa: ANN001, ANN202
    """`fd` on 37 rows of `cols` under `kind`'s params changed by `changes`, on the host:
    agrees with the reference."""
    inputs = inputs_for(fd, 37, cols, np.random.default_rng(cols))
    (run,) = run_on_host(fd, inputs, [_changed(kind, changes)])
    assert_agrees(fd, inputs, run.outputs, dtype)


# row sums of 3-7 vectors within 32 bytes that one lane reads whole (`reduction.
# one_lane_rows`), of 9-31 vectors in lanes of a few (`short_row_of_few_lanes`) and of 33-255
# vectors, which take 2 rows a lane (SHORT_ROW_LANE_ROWS, MIDDLE_ROW_LANE_ROWS)
ROW_SUM_LANES = [
    (DataType.BFloat16, 18),
    (DataType.BFloat16, 46),
    (DataType.Float, 26),
    (DataType.Float, 36),
    (DataType.Float, 40),
    (DataType.BFloat16, 80),  # 16-byte vectors: 4 lanes of 3 (SHORT_ROW_LANE_ELEMENTS)
    (DataType.BFloat16, 104),  # 8 lanes of 2
    (DataType.BFloat16, 168),  # 8 lanes of 3
    (DataType.BFloat16, 248),  # 16 lanes of 2
    (DataType.BFloat16, 6),
    (DataType.BFloat16, 10),
    (DataType.BFloat16, 12),
    (DataType.BFloat16, 14),
    (DataType.Float, 6),
    (DataType.BFloat16, 102),
    (DataType.BFloat16, 300),
    (DataType.Float, 150),
    (DataType.Float, 218),
    (DataType.Float, 956),
]


@pytest.mark.parametrize("dtype, cols", ROW_SUM_LANES)
def test_row_sums_as_the_defaults_lay_them_agree_on_the_host(dtype, cols):
    """Row sums laid out as the defaults lay them on 2**21 rows (one lane a row, or 2 rows a
    lane) run on 37 rows: the last block's lanes and rows a lane past the last row."""
    fd = build(ZOO["row_sum"], dtype)
    p = _defaults_of_many_rows(fd, cols, dtype)
    assert p.rows_per_lane == 2 and (p.threads_r == 1 or cols > 32 or p.unroll == 4), p
    fields = ("threads_r", "rows_per_block", "vector", "unroll", "rows_per_lane")
    _run_37_rows_as(fd, cols, dtype, "reduction", {f: getattr(p, f) for f in fields})


# a logsumexp's rows of 9-31 vectors in lanes of a few vectors (`normalization.
# FEW_LANE_MAX_EXP_SUMS`): the last lane's share partly past its row
LOGSUMEXP_FEW_LANES = [
    (DataType.BFloat16, 18),
    (DataType.BFloat16, 46),
    (DataType.Float, 26),
    (DataType.Float, 36),
    (DataType.BFloat16, 184),
]


@pytest.mark.parametrize("dtype, cols", LOGSUMEXP_FEW_LANES)
def test_logsumexp_rows_as_the_defaults_lay_them_agree_on_the_host(dtype, cols):
    """A logsumexp laid out as the defaults lay it on 2**21 rows (lanes of at most
    SHORT_ROW_LANE_VECTORS vectors) run on 37 rows: the last block's lanes and rows a lane
    past the last row."""
    from tunefuse.schedulers import reduction

    fd = build(ZOO["logsumexp"], dtype)
    p = _defaults_of_many_rows(fd, cols, dtype)
    assert p.threads_r == reduction.few_lanes(-(-cols // p.vector)) and p.vector > 1, p
    fields = ("threads_r", "rows_per_block", "vector", "elements_per_thread", "rows_per_lane")
    _run_37_rows_as(fd, cols, dtype, "normalization", {f: getattr(p, f) for f in fields})


def _rows_apart(define):  # noqa: ANN001, ANN202
    """`define` with its 2-D inputs declared with rows that need not lie back to back."""

    def wrapped(fd, dtype):  # noqa: ANN001, ANN202
        declare = fd.define_tensor

        def define_tensor(shape=None, contiguity=None, dtype=DataType.Float, **kw):  # noqa: ANN001, ANN202
            if shape is not None and len(shape) == 2 and contiguity is None:
                contiguity = [False, True]
            return declare(shape, contiguity, dtype, **kw)

        fd.define_tensor = define_tensor
        define(fd, dtype)

    return wrapped


STAGED_ROWS = [
    # (name, dtype, cols, changes): rows staged through shared memory (`stage_rows`), on 37
    # rows (the last block's tile partly empty): a lane a row of 2-byte vectors, of scalars,
    # and rows over several lanes
    (
        "layernorm",
        DataType.BFloat16,
        22,
        dict(threads_r=1, elements_per_thread=22, rows_per_block=32),
    ),
    (
        "softmax",
        DataType.BFloat16,
        10,
        dict(threads_r=1, elements_per_thread=10, rows_per_block=32),
    ),
    (
        "rmsnorm",
        DataType.Float,
        5,
        dict(threads_r=1, elements_per_thread=5, vector=1, rows_per_block=32),
    ),
    (
        "softmax",
        DataType.Float,
        33,
        dict(threads_r=2, elements_per_thread=17, vector=1, rows_per_block=16),
    ),
    (
        "layernorm",
        DataType.Float,
        64,
        dict(threads_r=4, elements_per_thread=16, vector=4, rows_per_block=8),
    ),
    (
        "rmsnorm",
        DataType.BFloat16,
        36,
        dict(threads_r=2, elements_per_thread=20, vector=4, rows_per_block=16),
    ),
]


@pytest.mark.parametrize("strided", [False, True], ids=["back_to_back", "strided"])
@pytest.mark.parametrize("case", range(len(STAGED_ROWS)))
def test_staged_rows_agree_on_the_host(case, strided):
    """Each STAGED_ROWS layout agrees with the reference and reads and writes nothing past
    its buffers; rows that do not lie back to back (a view of every row's first `cols` of
    wider rows) take the kernel's direct reads."""
    _staged_rows_agree(*STAGED_ROWS[case], rows=37, strided=strided, seed=case)


def test_staged_rows_of_blocks_that_take_several_tiles_agree_on_the_host():
    """A grid of one block an SM over more row tiles than SMs: blocks that take a second
    tile stage it over the first one's staged rows (the barriers between them)."""
    changes = dict(threads_r=1, elements_per_thread=22, rows_per_block=32, blocks_per_sm=1)
    _staged_rows_agree(
        "layernorm", DataType.BFloat16, 22, changes, rows=4500, strided=False, seed=0
    )


def _staged_rows_agree(name, dtype, cols, changes, rows, strided, seed):  # noqa: ANN001, ANN202
    """A zoo case's rows staged with `changes`, run on the host (its plan made for device
    arrays: a strided view keeps its row stride), agree with the reference."""
    fd = build(_rows_apart(ZOO[name]) if strided else ZOO[name], dtype)
    inputs = inputs_for(fd, rows, cols + (4 if strided else 0), np.random.default_rng(cols))
    if strided:
        inputs = [x[:, :cols] if x.ndim == 2 else x[:cols] for x in inputs]
    device = PROFILES["sm_90"]
    layouts = ["contiguous"] * len(inputs)
    plan = device_plan(FuzzCase(seed, fd, inputs, layouts=layouts), device=device)
    (seg,) = plan.segments
    assert (seg.loads[0].offset.coeff(Var(0, rows)) == cols + 4) is strided, seg.loads[0].offset
    sched = scheduler_for(seg.scheduler)
    p = dataclasses.replace(
        sched.default_params(seg, device), **changes, stage_rows=True, rows_per_lane=1
    )
    assert sched.is_valid(seg, device, p) is None, sched.is_valid(seg, device, p)
    (run,) = run_plan_on_host(plan, inputs, layouts, [lambda s, d: p])
    assert_agrees(fd, inputs, run.outputs, dtype)
