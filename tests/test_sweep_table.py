"""`benchmarks/sweep_table.py` without a GPU: a layout sweep's best first time by two params
among the points that match a filter, the table it prints, and the arguments and files it
refuses by name."""

import json
import pathlib
import sys

import pytest

sys.path.append(str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))

from sweep_table import best_by, main, parse_where, table  # noqa: E402


def _point(threads: int, block_row: int, inner: bool, lanes: int) -> dict:
    return {
        "threads_r": threads,
        "rows_per_block": block_row,
        "inner": inner,
        "rows_per_lane": lanes,
    }


POINTS = [
    (300.0, _point(2, 128, False, 2)),  # the default, first
    (110.0, _point(4, 8, False, 2)),
    (100.0, _point(4, 8, False, 1)),
    (140.0, _point(2, 16, False, 1)),
    (90.0, _point(4, 16, True, 1)),
]


def test_the_best_of_each_pair_of_values_among_matching_points():
    assert best_by(POINTS, "threads_r", "rows_per_block", {}) == {
        (2, 128): 300.0,
        (4, 8): 100.0,
        (2, 16): 140.0,
        (4, 16): 90.0,
    }
    outer = best_by(POINTS, "threads_r", "rows_per_block", {"inner": False})
    assert (4, 16) not in outer and outer[(4, 8)] == 100.0
    assert best_by(POINTS, "threads_r", "rows_per_block", {"rows_per_lane": 2}) == {
        (2, 128): 300.0,
        (4, 8): 110.0,
    }


def test_the_table_has_a_row_a_value_and_marks_missing_pairs():
    lines = table(best_by(POINTS, "threads_r", "rows_per_block", {"inner": False}))
    assert lines[0].split() == ["8", "16", "128"]
    assert lines[1].split() == ["2", "-", "140.0", "300.0"]
    assert lines[2].split() == ["4", "100.0", "-", "-"]
    assert table({}) == ["  (no point matches)"]


def test_where_terms_are_read_as_booleans_and_integers():
    known = {"inner", "rows_per_lane"}
    assert parse_where(["inner=False", "rows_per_lane=2"], known) == {
        "inner": False,
        "rows_per_lane": 2,
    }
    with pytest.raises(ValueError, match="expected key=value"):
        parse_where(["inner"], known)
    with pytest.raises(ValueError, match="not a param"):
        parse_where(["vectors=2"], known)


def test_it_prints_a_table_a_cell(tmp_path, capsys):
    path = tmp_path / "sweep.jsonl"
    row = {"cell": "middle_softmax:bfloat16:755203x24x3", "torch_compile_us": 174.3}
    path.write_text(json.dumps({**row, "first": POINTS}) + "\n")
    main([str(path), "--where", "inner=False"])
    out = capsys.readouterr().out
    assert "default 300.0 us" in out and "torch.compile 174.3 us" in out
    assert "90.0" not in out  # the inner point is filtered out
    assert "100.0" in out


@pytest.mark.parametrize(
    "args, content, why",
    [
        (["--rows", "threads"], None, "--rows threads: not a param"),
        (["--where", "inner"], None, "expected key=value"),
        ([], "not json\n", "not JSON lines"),
        ([], '{"cell": "x"}\n', "not layout_sweep.py's lines"),
    ],
)
def test_bad_arguments_and_files_are_refused_by_name(tmp_path, args, content, why):
    path = tmp_path / "sweep.jsonl"
    row = {"cell": "middle_softmax:bfloat16:755203x24x3", "first": POINTS}
    path.write_text(content if content is not None else json.dumps(row) + "\n")
    with pytest.raises(SystemExit, match=why):
        main([str(path), *args])
    with pytest.raises(SystemExit, match="no such file"):
        main([str(tmp_path / "missing.jsonl")])
