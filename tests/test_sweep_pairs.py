"""`benchmarks/sweep_pairs.py` without a GPU: the pairs of a layout sweep that differ in one
flag, grouped by the elements a thread holds, and the arguments it refuses by name."""

import dataclasses
import json
import pathlib
import re
import sys

import pytest

sys.path.append(str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))

from layout_sweep import layout_points, one_normalization  # noqa: E402
from sweep_pairs import bucket, main, pairs  # noqa: E402

from tunefuse import DataType  # noqa: E402
from tunefuse.device_info import PROFILES  # noqa: E402
from tunefuse.schedulers import normalization  # noqa: E402

CELL = "column_layernorm:bfloat16:23x350001"
EDGES = [8, 16, 24, 32]


def _sweep_line(tmp_path: pathlib.Path) -> tuple[pathlib.Path, dict]:
    """A layout_sweep line for CELL whose first times are made up: 1 us off, and on 0.5 where
    a thread holds 24 elements or more, else 2. Returns the file and the held count of each
    layout without the flag."""
    device = PROFILES["sm_90"]
    _, seg, _ = one_normalization("column_layernorm", DataType.BFloat16, (23, 350001), device)
    first, held = [], {}
    for p in layout_points(seg, device):
        n = normalization.held_elements(seg, p)
        us = 1.0 if not p.whole_chunks else (0.5 if n >= 24 else 2.0)
        first.append((us, dataclasses.asdict(p)))
        if not p.whole_chunks:
            held[json.dumps(dataclasses.asdict(p), sort_keys=True)] = n
    path = tmp_path / "sweep.jsonl"
    path.write_text(json.dumps({"cell": CELL, "torch_compile_us": 1.0, "first": first}) + "\n")
    return path, held


def test_pairs_differ_in_the_flag_alone():
    a = {"threads_r": 2, "whole_chunks": False, "vector": 1}
    b = {**a, "whole_chunks": True}
    c = {**a, "threads_r": 4, "whole_chunks": True}  # no partner: dropped
    assert pairs([(2.0, a), (1.0, b), (5.0, c)], "whole_chunks") == [(0.5, a)]


@pytest.mark.parametrize(
    "held, text",
    [
        (3, "under 8"),
        (8, "8-15"),
        (23, "16-23"),
        (24, "24-31"),
        (32, "32 or more"),
        (99, "32 or more"),
    ],
)
def test_buckets_name_their_range(held, text):
    assert bucket(held, [8, 16, 24, 32]) == text


def test_each_bucket_holds_the_pairs_of_its_held_elements(tmp_path, capsys):
    """Made-up times of 0.5 on / off at 24 held elements or more and 2 under: each bucket's
    geomean is its made-up ratio, and its count the layouts whose held elements fall in it."""
    path, held = _sweep_line(tmp_path)
    main([str(path)])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{CELL}: whole_chunks on / off, by elements a thread holds"
    counts: dict[str, int] = {}
    for n in held.values():
        counts[bucket(n, EDGES)] = counts.get(bucket(n, EDGES), 0) + 1
    table = {}
    for line in out[1:]:
        found = re.fullmatch(r"\s+(.+?)\s{2}([\d.]+)\s{2}\((\d+) pairs\)", line)
        assert found, line
        table[found[1]] = (float(found[2]), int(found[3]))
    assert set(table) == set(counts) and len(table) >= 2
    for name, (ratio, n) in table.items():
        assert ratio == pytest.approx(0.5 if name in ("24-31", "32 or more") else 2.0), name
        assert n == counts[name], name


@pytest.mark.parametrize(
    "argv, named",
    [
        (["--flag", "nope"], "--flag nope"),
        (["--edges", "16", "8"], "--edges [16, 8]"),
        (["--edges", "0", "8"], "--edges [0, 8]"),
    ],
)
def test_bad_arguments_are_refused_by_name(tmp_path, argv, named):
    path, _ = _sweep_line(tmp_path)
    with pytest.raises(SystemExit) as e:
        main([str(path), *argv])
    assert named in str(e.value)


def test_a_missing_or_foreign_file_is_refused_by_name(tmp_path):
    with pytest.raises(SystemExit) as e:
        main([str(tmp_path / "none.jsonl")])
    assert "no such file" in str(e.value)
    other = tmp_path / "other.jsonl"
    other.write_text('{"label": "old"}\n')
    with pytest.raises(SystemExit) as e:
        main([str(other)])
    assert "without 'cell' and 'first'" in str(e.value)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n")
    with pytest.raises(SystemExit) as e:
        main([str(broken)])
    assert "not JSON lines" in str(e.value)
