"""`benchmarks/draw_cells.py` without a GPU: seeded draws of judge cells within the ranges
given, the cells a change moves, and arguments it refuses by name."""

import pathlib
import subprocess
import sys

import pytest
from benchmark_scripts import run_benchmark
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT / "benchmarks"))

from draw_cells import draw  # noqa: E402
from judge import parse_cell  # noqa: E402
from patterns import COLUMN_PATTERNS, MIDDLE_PATTERNS  # noqa: E402

from tunefuse import DataType  # noqa: E402


def run(*args: str) -> subprocess.CompletedProcess:
    return run_benchmark("draw_cells.py", *args)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    patterns=st.lists(st.sampled_from(["layernorm", "col", "middle", "softmax"]), min_size=1),
    least=st.integers(1, 2000),
    span=st.integers(1, 64),
    mbytes=st.sampled_from([(1.0, 1.0), (2.0, 64.0), (16.0, 300.0)]),
)
def test_cells_lie_within_the_ranges_and_repeat_for_a_seed(seed, patterns, least, span, mbytes):
    reduced = (least, least * span)
    cells = draw(patterns, ["float", "bfloat16"], reduced, mbytes, 20, seed)
    assert cells == draw(patterns, ["float", "bfloat16"], reduced, mbytes, 20, seed)
    assert cells == sorted(set(cells)) and 1 <= len(cells) <= 20
    for cell in cells:
        pattern, name, shape = parse_cell(cell)
        assert pattern in patterns
        red = shape[0] if pattern in COLUMN_PATTERNS else shape[1]
        assert reduced[0] <= red <= reduced[1], cell
        assert len(shape) == (3 if pattern in MIDDLE_PATTERNS else 2)
        size = DataType(name).itemsize * shape[0] * shape[1] * (shape[2] if len(shape) == 3 else 1)
        # outputs round to the nearest whole one, and at least 1
        one_output = size // (shape[1] if pattern in COLUMN_PATTERNS else shape[0])
        assert size <= mbytes[1] * (1 << 20) + one_output / 2 or size == one_output, cell
        assert size >= mbytes[0] * (1 << 20) - one_output / 2 or size == one_output, cell


def test_another_seed_draws_other_cells():
    a = draw(["rmsnorm"], ["float"], (8, 1200), (2, 64), 30, 1)
    b = draw(["rmsnorm"], ["float"], (8, 1200), (2, 64), 30, 2)
    assert a != b


@pytest.mark.parametrize("sources", [[], ["--sources"]], ids=["plans", "sources"])
def test_a_checkout_against_itself_moves_no_cell(sources):
    """Neither its plans nor (--sources) its generated code differ from its own."""
    out = run(
        *("--patterns", "layernorm", "col", "--reduced", "8", "600", "--count", "12"),
        *("--seed", "5", "--against", str(ROOT), "--keep", "3", *sources),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
    assert "0 cells move" in out.stderr


@pytest.mark.parametrize(
    "args, named",
    [
        (["--patterns", "nope", "--reduced", "1", "8"], "--patterns nope"),
        (["--patterns", "row", "--reduced", "9", "8"], "--reduced 9 8"),
        (["--patterns", "row", "--reduced", "0", "8"], "--reduced 0 8"),
        (["--patterns", "row", "--reduced", "1", "8", "--mbytes", "0", "8"], "--mbytes 0 8"),
        (["--patterns", "row", "--reduced", "1", "8", "--dtypes", "float77"], "--dtypes float77"),
        (["--patterns", "row", "--reduced", "1", "8", "--count", "0"], "--count 0"),
        (["--patterns", "row", "--reduced", "1", "8", "--keep", "3"], "needs --against"),
        (["--patterns", "row", "--reduced", "1", "8", "--sources"], "needs --against"),
        (["--patterns", "row", "--reduced", "1", "8", "--against", "/nonexistent"], "no tunefuse"),
    ],
)
def test_bad_arguments_are_refused_by_name(args, named):
    out = run(*args, "--seed", "1")
    assert out.returncode == 2
    assert named in out.stderr and "Traceback" not in out.stderr
