"""Residency without a GPU: for each surface cell's default kernels, the blocks an SM their
threads allow (what the schedulers size grids and splits for) against what their compiled
registers allow, and the waves of the grid either way. A kernel whose registers hold fewer
blocks than its threads runs more waves than its grid was sized for; a grid of one wave that
becomes 1.3 (a partial second wave) is the costly case (`reduction.one_wave_blocks`).

    python3 benchmarks/occupancy.py [--patterns row col var_mean0 middle] [--mbytes 16 256]
        [--dtypes float bfloat16] [--arch sm_90] [--limited]
    python3 benchmarks/occupancy.py --judged JUDGED.jsonl ... [--limited]

Prints a line a kernel: pattern, dtype, MB, shape, scheduler, registers, spilled bytes
(stack), block threads, grid blocks, blocks an SM by threads / by registers, waves by threads
-> by registers, and min_blocks (the launch bounds' blocks an SM). --limited prints only the
kernels whose registers hold fewer blocks than their threads. --judged takes judge.py's cells
in place of the grid, each line led by the cell's new / torch.compile there, lowest first:
whether the cells that lag torch.compile share a residency. Needs cuobjdump and nvdisasm
from PyPI, as benchmarks/sass_count.py.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from judge import cell_times, parse_cell  # noqa: E402
from patterns import pattern_plan, shapes  # noqa: E402
from sass_count import cuobjdump, resource_usage  # noqa: E402

from tunefuse import DataType  # noqa: E402
from tunefuse.codegen import generate  # noqa: E402
from tunefuse.compiler import compile_kernel  # noqa: E402
from tunefuse.device_info import PROFILES, DeviceInfo  # noqa: E402
from tunefuse.schedulers import scheduler_for  # noqa: E402

REGISTER_UNIT = 256  # registers are allocated a warp at a time in units of 256


def blocks_by_registers(device: DeviceInfo, threads: int, registers: int) -> int:
    """Blocks of `threads` threads of `registers` registers each an SM's registers hold."""
    warps = -(-threads // device.warp_size)
    per_warp = -(-registers * device.warp_size // REGISTER_UNIT) * REGISTER_UNIT
    return device.regs_per_sm // (per_warp * warps)


def kernel_residency(
    pattern: str, dtype: DataType, shape: tuple[int, ...], device: DeviceInfo, arch: str, tool: str
) -> list[tuple[bool, str]]:
    """Each default kernel of a cell: whether its registers hold fewer blocks an SM than its
    threads, and its line (scheduler, registers, stack, block threads, grid blocks, blocks an
    SM by threads / by registers, waves either way, min_blocks)."""
    plan = pattern_plan(pattern, shape, dtype, device)
    dtypes = {b.id: b.dtype for b in plan.buffers}
    out = []
    for seg in plan.segments:
        params = scheduler_for(seg.scheduler).default_params(seg, device)
        src = generate(seg, params, device, dtypes)
        cubin = compile_kernel(src.source, src.name, arch).cubin
        registers, stack, _ = resource_usage(cubin, tool) or (0, 0, 0)
        threads = src.block[0] * src.block[1] * src.block[2]
        blocks = src.grid[0] * src.grid[1] * src.grid[2]
        by_threads = min(device.max_threads_per_sm // threads, device.max_blocks_per_sm)
        by_regs = min(by_threads, blocks_by_registers(device, threads, registers))
        waves = blocks / (device.sm_count * by_threads)
        waves_regs = blocks / (device.sm_count * max(1, by_regs))
        out.append(
            (
                by_regs < by_threads,
                f"{seg.scheduler.value} registers {registers} stack {stack} "
                f"threads {threads} blocks {blocks} an SM {by_threads}/{by_regs} "
                f"waves {waves:.2f} -> {waves_regs:.2f} "
                f"min_blocks {getattr(params, 'min_blocks', '-')}",
            )
        )
    return out


def judged_ratios(paths: list[pathlib.Path]) -> list[tuple[float, str]]:
    """(new / torch.compile, cell) of each cell judged in judge.py's JSON lines at `paths`,
    each side at its best time, a cell judged twice at its later file's; cells without both
    times are left out."""
    ratios: dict[str, float] = {}
    for path in paths:
        if not path.is_file():
            raise SystemExit(f"--judged {path}: no such file")
        times, _ = cell_times(path.read_text().splitlines())
        for cell, t in times.items():
            if t["new"] and t["tc"]:
                ratios[cell] = min(t["new"]) / min(t["tc"])
    return sorted((r, c) for c, r in ratios.items())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--patterns", nargs="+", default=["row", "col", "var_mean0", "middle"])
    parser.add_argument("--mbytes", nargs="+", type=int, default=[16, 256])
    parser.add_argument("--dtypes", nargs="+", default=["float", "bfloat16"])
    parser.add_argument("--arch", default="sm_90", choices=sorted(PROFILES))
    parser.add_argument("--limited", action="store_true")
    parser.add_argument(
        "--judged",
        nargs="+",
        type=pathlib.Path,
        help="judge.py JSON lines: their cells, by new / torch.compile, in place of the grid",
    )
    args = parser.parse_args()
    device = PROFILES[args.arch]
    if args.judged:
        cells = judged_ratios(args.judged)
        if not cells:
            raise SystemExit("--judged: no cell with both a new and a torch.compile time")
        tool = cuobjdump()
        for ratio, cell in cells:
            pattern, dtype_name, shape = parse_cell(cell)
            for limited, line in kernel_residency(
                pattern, DataType.parse(dtype_name), shape, device, args.arch, tool
            ):
                if limited or not args.limited:
                    print(f"new/tc {ratio:.3f} {cell} {line}", flush=True)
        return
    tool = cuobjdump()
    for pattern in args.patterns:
        for dtype_name in args.dtypes:
            dtype = DataType.parse(dtype_name)
            for mbytes in args.mbytes:
                for shape in shapes(pattern, mbytes * 2**20 // dtype.itemsize, 4):
                    for limited, line in kernel_residency(
                        pattern, dtype, shape, device, args.arch, tool
                    ):
                        if limited or not args.limited:
                            print(
                                f"{pattern} {dtype_name} {mbytes} {'x'.join(map(str, shape))} "
                                f"{line}",
                                flush=True,
                            )


if __name__ == "__main__":
    main()
