"""`benchmarks/occupancy.py` without a GPU: blocks an SM by registers (allocated a warp at a
time in units of 256), the judged cells it lists (by new / torch.compile, each side at its
best, a cell judged again at its later file's), and, where cuobjdump from PyPI is installed,
the residency of a cell's compiled default kernel."""

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT / "benchmarks"))

from occupancy import blocks_by_registers, judged_ratios, kernel_residency  # noqa: E402

from tunefuse import DataType  # noqa: E402
from tunefuse.device_info import PROFILES  # noqa: E402

SM90 = PROFILES["sm_90"]


def _lines(path: pathlib.Path, rows: list[tuple[str, str, float, float | None]]) -> pathlib.Path:
    text = []
    for label, cell, us, tc in rows:
        row = {"label": label, "cell": cell, "us": us, "correct": True}
        if tc is not None:
            row["compile_us"] = tc
        text.append(json.dumps(row))
    path.write_text("\n".join([*text, "a warning torch printed"]) + "\n")
    return path


def test_blocks_by_registers_count_a_warp_s_registers_in_units_of_256():
    # 80 registers: 2560 a warp; 8 warps a block: 20480; 65536 // 20480 = 3
    assert blocks_by_registers(SM90, 256, 80) == 3
    # 64 registers at 128 threads: 2048 a warp, 4 warps, 8 blocks
    assert blocks_by_registers(SM90, 128, 64) == 8
    # 33 registers round up to 40 a thread (1280 a warp): 65536 // (1280 * 8) = 6
    assert blocks_by_registers(SM90, 256, 33) == 6


def test_judged_cells_by_new_over_torch_compile(tmp_path):
    first = _lines(
        tmp_path / "a.jsonl",
        [
            ("old", "middle:float:3x4x5", 10.0, None),
            ("new", "middle:float:3x4x5", 12.0, None),
            ("compile", "middle:float:3x4x5", 11.0, 10.0),
            ("new", "middle:float:3x4x5", 11.0, None),
            ("new", "col:float:6x7", 4.0, None),
            ("compile", "col:float:6x7", 5.0, 5.0),
            ("new", "row:float:8x9", 3.0, None),  # no torch.compile time: left out
        ],
    )
    again = _lines(
        tmp_path / "b.jsonl",
        [("new", "col:float:6x7", 6.0, None), ("compile", "col:float:6x7", 6.0, 4.0)],
    )
    assert judged_ratios([first]) == [(0.8, "col:float:6x7"), (1.1, "middle:float:3x4x5")]
    assert judged_ratios([first, again]) == [(1.1, "middle:float:3x4x5"), (1.5, "col:float:6x7")]


def test_judged_refuses_a_missing_file_and_a_file_without_cells(tmp_path):
    for args, why in [
        ([str(tmp_path / "none.jsonl")], "no such file"),
        (
            [str(_lines(tmp_path / "old_only.jsonl", [("old", "col:float:6x7", 4.0, None)]))],
            "no cell",
        ),
    ]:
        done = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "occupancy.py"), "--judged", *args],
            capture_output=True,
            text=True,
        )
        assert done.returncode != 0 and why in done.stderr, done.stderr


def test_a_cell_s_default_kernel_residency():
    from sass_count import cuobjdump

    try:
        tool = cuobjdump()
    except SystemExit:
        pytest.skip(
            "cuobjdump not installed (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)"
        )
    ((limited, line),) = kernel_residency(
        "column_layernorm", DataType.Float, (27, 19801), SM90, "sm_90", tool
    )
    assert line.startswith("normalization registers ") and " threads 256 " in line, line
    by_threads, by_registers = map(int, line.split(" an SM ")[1].split()[0].split("/"))
    registers = int(line.split("registers ")[1].split()[0])
    assert by_threads == SM90.max_threads_per_sm // 256
    assert by_registers == min(by_threads, blocks_by_registers(SM90, 256, registers))
    assert limited is (by_registers < by_threads)
