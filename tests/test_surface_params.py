"""`benchmarks/surface_params.py --against` compares params by their fields that differ from
the field's default (no GPU): a field that one checkout adds, at its default, moves no cell
(a flat_vector=False in every pointwise Params listed every cell as moved), while any change
of a value still shows. With --sources it compares the kernels' code too (`code_digest`);
--cells-file takes judge.py's cells, and a bad one is named."""

import dataclasses
import pathlib
import re
import subprocess
import sys

import pytest
from benchmark_scripts import run_benchmark

sys.path.append(str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))

from surface_params import non_default  # noqa: E402

from tunefuse import DataType  # noqa: E402
from tunefuse.codegen import generate  # noqa: E402
from tunefuse.device_info import PROFILES  # noqa: E402
from tunefuse.schedulers import pointwise, reduction, transpose  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_fields_at_their_defaults_are_left_out_nested_ones_too():
    assert non_default(pointwise.Params()) == {}
    p = pointwise.Params(vector=8, flat_vector=True)
    assert non_default(p) == {"vector": 8, "flat_vector": True}
    t = transpose.Params(tile=0, pointwise=dataclasses.replace(p, flat_vector=False))
    assert non_default(t) == {"tile": 0, "pointwise": {"vector": 8}}
    assert non_default(transpose.Params(tile=0)) == {"tile": 0}


def test_against_the_same_checkout_moves_nothing():
    done = _surface_params(
        *("--patterns", "bias_gelu", "transpose2d", "--step", "8", "--mbytes", "16"),
        *("--against", str(ROOT)),
    )
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]  # "0 of N cells plan differently"
    assert last.startswith("0 of ") and int(last.split()[2]) > 0


def _surface_params(*argv: str) -> subprocess.CompletedProcess:
    return run_benchmark("surface_params.py", *argv)


def test_a_cells_file_with_sources_against_the_same_checkout_moves_nothing(tmp_path):
    cells = tmp_path / "cells.txt"
    cells.write_text("middle:bfloat16:200000x2x171\n\ncol:float:3x7635945\nrow:bfloat16:999x77\n")
    done = _surface_params("--cells-file", str(cells), "--sources", "--against", str(ROOT))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "0 of 3 cells plan differently"
    listed = _surface_params("--cells-file", str(cells), "--sources")
    lines = listed.stdout.strip().splitlines()
    assert len(lines) == 3 and all(" code " in line for line in lines), lines
    assert lines[0].startswith("middle bfloat16 200000x2x171: reduction Params(")


def test_the_code_digest_leaves_out_the_version_comment_and_the_name():
    """Two versions of the same code have one digest; a change of one line, another."""
    from surface_params import code_digest
    from test_reduction_defaults import pattern_plan

    device = PROFILES["sm_90"]
    plan = pattern_plan("middle", (200000, 2, 171), DataType.BFloat16, device)
    (seg,) = plan.segments
    buffers = {b.id: b.dtype for b in plan.buffers}
    kernel = generate(seg, reduction.default_params(seg, device), device, buffers)
    assert kernel.source.startswith("// tunefuse codegen ")
    other_version = dataclasses.replace(
        kernel,
        name="tf_reduction_0123456789abcdef",
        source=kernel.source.replace(kernel.name, "tf_reduction_0123456789abcdef").replace(
            "// tunefuse codegen ", "// tunefuse codegen 99 ", 1
        ),
    )
    assert code_digest(other_version) == code_digest(kernel)
    changed = dataclasses.replace(kernel, source=kernel.source.replace("+ q", "+ 0 * q", 1))
    assert changed.source != kernel.source
    assert code_digest(changed) != code_digest(kernel)


def test_a_bad_cell_or_cells_file_is_named():
    from surface_params import file_cell

    for spec, why in [
        ("middle:bfloat16:200x3", "middle takes 3 extents, not 2"),
        ("sideways:float:8x8", "no pattern 'sideways'"),
        ("col:float64x:8x8", "no dtype 'float64x'"),
        ("col:float", "expected pattern:dtype:AxB[xC]"),
    ]:
        with pytest.raises(ValueError, match=re.escape(why)):
            file_cell(spec)
    done = _surface_params("--cells-file", "/nonexistent/cells.txt")
    assert (
        done.returncode != 0 and "--cells-file /nonexistent/cells.txt: no such file" in done.stderr
    )
    assert "Traceback" not in done.stderr
