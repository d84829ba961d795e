"""`benchmarks/judge.py` without a GPU: its cells are checked before any pass starts, and its
summary of a judge's lines (best old and new time, torch.compile's, the geomeans, every
result that disagreed with torch)."""

import json
import math
import pathlib
import subprocess
import sys

import pytest

sys.path.append(str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))

from judge import judged_cell, parse_cell, summary  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _line(label: str, cell: str, us: float, correct: bool = True, tc: float | None = None) -> str:
    row = {"label": label, "cell": cell, "us": us, "correct": correct}
    if tc is not None:
        row["compile_us"] = tc
    return json.dumps(row)


def test_a_cell_is_a_pattern_a_dtype_and_a_shape():
    assert parse_cell("middle:bfloat16:646397x3x37") == ("middle", "bfloat16", (646397, 3, 37))
    for bad, why in [
        ("middle:bfloat16", "pattern:dtype"),
        ("col:float:6xN", "not integers"),
        ("col:float:0x5", "at least 1"),
    ]:
        with pytest.raises(ValueError, match=why):
            parse_cell(bad)


def test_the_judge_refuses_a_dtype_it_cannot_time():
    assert judged_cell("middle:half:6x5x3") == ("middle", "half", (6, 5, 3))
    with pytest.raises(ValueError, match="the judge times float, bfloat16, half, not 'double'"):
        judged_cell("col:double:6x5")


def test_the_summary_takes_each_side_at_its_best_and_the_geomeans():
    lines = [
        _line("old", "a:float:2x3", 10.0),
        _line("new", "a:float:2x3", 8.0),
        _line("compile", "a:float:2x3", 8.5, tc=5.0),
        _line("old", "a:float:2x3", 9.0),
        _line("new", "a:float:2x3", 9.5),
        _line("old", "b:float:4x5", 20.0),
        _line("new", "b:float:4x5", 40.0, correct=False),
        _line("compile", "b:float:4x5", 40.0, tc=20.0),
        "a warning line torch printed",
    ]
    out = summary(lines)
    assert "INCORRECT new b:float:4x5" in out
    a = next(line for line in out if line.startswith("a:float:2x3"))
    assert "old     9.0 tc     5.0" in a and "new     8.0 /old 0.889 /tc 1.600" in a
    new_old = math.sqrt(8.0 / 9.0 * 40.0 / 20.0)
    assert out[-1].startswith(f"geomean new/old {new_old:.3f} over 2;")


def test_a_cell_without_one_side_is_named_not_guessed():
    out = summary([_line("old", "a:float:2x3", 10.0)])
    assert "a:float:2x3: no new time" in out
    assert out[-1].startswith("geomean new/old nan over 0")


def test_a_run_refuses_bad_arguments_before_any_pass(tmp_path):
    judge = ROOT / "benchmarks" / "judge.py"
    for args, why in [
        (
            ["--against", str(tmp_path), "--out", str(tmp_path / "j"), "col:float:2x3"],
            "no tunefuse",
        ),
        (["--against", str(ROOT), "--out", str(tmp_path / "j")], "no cells"),
        (["--against", str(ROOT), "--out", str(tmp_path / "j"), "col:float"], "pattern:dtype"),
    ]:
        done = subprocess.run(
            [sys.executable, str(judge), "run", *args], capture_output=True, text=True, cwd=ROOT
        )
        assert done.returncode != 0 and why in done.stderr, done.stderr
        assert not (tmp_path / "j").exists()
