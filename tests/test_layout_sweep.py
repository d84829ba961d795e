"""`benchmarks/layout_sweep.py` without a GPU: its points (the default first, every one valid,
each once, the layouts a heuristic chooses among), their compiles, and the cells it refuses
by name."""

import pathlib
import sys
from dataclasses import replace

import pytest

sys.path.append(str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))

from layout_sweep import Grid, compiled, layout_points, main, one_normalization  # noqa: E402

from tunefuse import DataType  # noqa: E402
from tunefuse.device_info import A100, H100  # noqa: E402
from tunefuse.schedulers import normalization  # noqa: E402


@pytest.mark.parametrize(
    "pattern, dtype, shape",
    [
        ("rmsnorm", DataType.Float, (13679, 188)),
        ("softmax", DataType.BFloat16, (11282, 556)),
        ("column_layernorm", DataType.BFloat16, (23, 350001)),
        ("middle_softmax", DataType.Float, (1400, 19, 287)),
    ],
)
def test_the_points_are_the_default_then_each_valid_held_layout_once(pattern, dtype, shape):
    _, seg, _ = one_normalization(pattern, dtype, shape, H100)
    points = layout_points(seg, H100)
    assert points[0] == normalization.default_params(seg, H100)
    assert len(set(points)) == len(points) > 20
    for p in points:
        assert normalization.is_valid(seg, H100, p) is None, p
    held = points[1:]
    assert all(p.cache_row and p.cluster == 1 and p.inner == points[0].inner for p in held)
    assert {p.threads_r for p in held} >= ({16, 32} if points[0].inner else {1, 2})
    assert {p.whole_chunks for p in held} == {False, True}


def test_blocks_of_a_warp_and_four_rows_a_lane_are_swept_when_asked():
    """torch.compile's layout of layernorm bf16 [41943, 200] (one warp a program, a row over
    its 32 lanes at 8 elements each, 4 rows a lane), outside the grid the sweep takes by
    default; each point's weight held ahead as the defaults' rule would hold it."""
    _, seg, _ = one_normalization("layernorm", DataType.BFloat16, (41943, 200), H100)
    inductor = (32, 1, 4, 8)

    def layouts(points) -> set:  # noqa: ANN001
        return {(p.threads_r, p.rows_per_block, p.rows_per_lane, p.vector) for p in points}

    assert inductor not in layouts(layout_points(seg, H100))
    points = layout_points(seg, H100, Grid(blocks=(32, 64), rows_a_lane=(1, 2, 4)))
    assert inductor in layouts(points)
    for p in points[1:]:
        assert p.hoist_invariants is normalization.hoists_invariants(seg, H100, p), p


def test_a_contiguous_row_s_points_hold_it_in_whole_vectors():
    _, seg, _ = one_normalization("rmsnorm", DataType.Float, (13679, 188), H100)
    for p in layout_points(seg, H100)[1:]:
        assert p.elements_per_thread % p.vector == 0
        assert p.threads_r * p.elements_per_thread >= 188


def test_its_points_compile_for_sm_80():
    _, seg, dtypes = one_normalization("layernorm", DataType.BFloat16, (24385, 344), A100)
    points = layout_points(seg, A100)[:4]
    assert compiled(seg, A100, dtypes, points) == points


@pytest.mark.parametrize(
    "argv, why",
    [
        (["--host", "rmsnorm:float:13679"], "takes 2 extents"),
        (["--host", "col:float:100x100"], "not one normalization kernel"),
        (["--host", "nothing:float:10x10"], "not a surface pattern"),
        (["--host", "rmsnorm:float16:10x10"], "float16"),
        (["--host", "rmsnorm:float:10xN"], "not integers"),
        (["rmsnorm:float:100x188"], "--out FILE"),
        (["--host", "--arch", "sm_70", "rmsnorm:float:100x188"], "sm_70"),
        (["--host", "rmsnorm:float:100x188", "--blocks", "48"], "powers of two"),
        (["--host", "rmsnorm:float:100x188", "--rows-a-lane", "0"], "powers of two"),
        (["--host", "rmsnorm:float:100x188", "--threads", "3"], "powers of two"),
        (["--host", "rmsnorm:float:100x188", "--min-blocks", "-1"], "0 \\(none\\) or more"),
    ],
)
def test_it_refuses_a_cell_it_cannot_sweep_by_name(argv, why):
    with pytest.raises(SystemExit, match=why):
        main(argv)


def test_both_sides_of_a_strided_row_are_swept_when_asked():
    """A middle softmax of a 3-element innermost run defaults to a row's threads along y
    (rows a lane); `sides` adds the layouts with them along x (`inner`), each valid."""
    _, seg, _ = one_normalization("middle_softmax", DataType.BFloat16, (755203, 40, 3), H100)
    default_side = layout_points(seg, H100)
    assert {p.inner for p in default_side} == {False}
    both = layout_points(seg, H100, Grid(blocks=(32, 64), rows_a_lane=(1, 2), sides=(False, True)))
    assert {p.inner for p in both[1:]} == {False, True}
    for p in both:
        assert normalization.is_valid(seg, H100, p) is None, p


def test_a_row_s_threads_and_launch_bounds_are_swept_when_asked():
    """`--threads` narrows a row's threads to those given; `--min-blocks` adds each launch
    bound to every layout (a middle softmax's bf16 pairs, heuristics 75's sweep)."""
    _, seg, _ = one_normalization("middle_softmax", DataType.BFloat16, (8765, 20, 106), H100)
    grid = Grid(threads_r=(1, 2), blocks=(64, 128), min_blocks=(0, 4), sides=(False, True))
    points = layout_points(seg, H100, grid)
    assert {p.threads_r for p in points[1:]} == {1, 2}
    assert {p.min_blocks for p in points[1:]} == {0, 4}
    bare = {replace(p, min_blocks=0) for p in points[1:] if p.min_blocks == 4}
    assert bare <= set(points)  # each bound is a copy of a layout swept without one
    for p in points:
        assert normalization.is_valid(seg, H100, p) is None, p
