"""`benchmarks/surface_params.py --against` compares params by their fields that differ from
the field's default (no GPU): a field that one checkout adds, at its default, moves no cell
(a flat_vector=False in every pointwise Params listed every cell as moved), while any change
of a value still shows."""

import dataclasses
import pathlib
import subprocess
import sys

sys.path.append(str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))

from surface_params import non_default  # noqa: E402

from tunefuse.schedulers import pointwise, transpose  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_fields_at_their_defaults_are_left_out_nested_ones_too():
    assert non_default(pointwise.Params()) == {}
    p = pointwise.Params(vector=8, flat_vector=True)
    assert non_default(p) == {"vector": 8, "flat_vector": True}
    t = transpose.Params(tile=0, pointwise=dataclasses.replace(p, flat_vector=False))
    assert non_default(t) == {"tile": 0, "pointwise": {"vector": 8}}
    assert non_default(transpose.Params(tile=0)) == {"tile": 0}


def test_against_the_same_checkout_moves_nothing():
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "surface_params.py"),
            "--patterns",
            "bias_gelu",
            "transpose2d",
            "--step",
            "8",
            "--mbytes",
            "16",
            "--against",
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    last = done.stdout.strip().splitlines()[-1]  # "0 of N cells plan differently"
    assert last.startswith("0 of ") and int(last.split()[2]) > 0
