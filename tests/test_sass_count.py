"""`benchmarks/sass_count.py`'s runs of global loads (`load_runs`), without a disassembler: the
loads a kernel issues together, and the late load that codegen 34 took back into its run."""

import pathlib
import sys

sys.path.append(str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))

from sass_count import LOAD_RUN_GAP, load_runs  # noqa: E402


def test_loads_within_the_gap_are_one_run():
    ops = ["IMAD", "LDG", "IMAD", "LDG", "LDG", "FFMA", "STG"]
    assert load_runs(ops) == [(1, 3)]


def test_a_load_past_the_gap_starts_a_run():
    """Codegen 32's one thread of 27 (sm_90): 26 loads together, the 27th after the compiler
    had computed on them."""
    ops = ["LDG"] * 26 + ["FFMA"] * (LOAD_RUN_GAP + 5) + ["LDG", "STG"]
    assert load_runs(ops) == [(0, 26), (26 + LOAD_RUN_GAP + 5, 1)]


def test_the_gap_is_inclusive_and_a_kernel_without_loads_has_no_runs():
    assert load_runs(["LDG"] + ["IADD3"] * (LOAD_RUN_GAP - 1) + ["LDG"]) == [(0, 2)]
    assert load_runs(["LDG"] + ["IADD3"] * LOAD_RUN_GAP + ["LDG"]) == [(0, 1), (21, 1)]
    assert load_runs(["LDS", "STG", "LDC"]) == []
