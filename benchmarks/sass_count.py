"""The SASS instructions of a generated kernel, counted without a GPU: a proxy for kernels
bound by instruction issue rather than memory (rows of a few elements, exps, divisions).

    python3 benchmarks/sass_count.py logsumexp bfloat16 67108864x2 [rows_per_lane=8 ...]
        [--arch=sm_80|sm_90] [--print]

CASE is a tests/fusion_zoo.py case (SHAPE rows x cols) or a surface pattern not in the zoo
(row, col, var_mean0, middle: SHAPE as benchmarks/surface.py lays it out, e.g. var_mean0
bfloat16 32768x4096, middle float 64x1024x64); each name=value changes the default
params (ints and True/False). Prints the params, the static instruction count of each kernel
of the plan, its registers, its most frequent opcodes and its global loads' runs (`load_runs`:
loads issued together; a late run is a second trip to memory). Static: a loop body counts once,
so compare variants of one kernel, not kernels of different structure.

Needs NVIDIA's disassembler, which PyPI ships (not a dependency of tunefuse):
`pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm`.
"""

from __future__ import annotations

import collections
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fusion_zoo import ZOO, build  # noqa: E402
from patterns import MIDDLE_PATTERNS, SURFACE_ONLY, pattern_fusion, planning_inputs  # noqa: E402

from tunefuse import DataType  # noqa: E402
from tunefuse.codegen import generate  # noqa: E402
from tunefuse.compiler import compile_kernel  # noqa: E402
from tunefuse.device_info import PROFILES  # noqa: E402
from tunefuse.schedulers import scheduler_for, with_values  # noqa: E402

OPCODE = re.compile(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)")


def cuobjdump() -> str:
    """cuobjdump on PATH, else the one the PyPI wheel installed beside this Python; with
    nvdisasm (which it runs) put on PATH."""
    found = shutil.which("cuobjdump")
    if found is None:
        import site

        for base in site.getsitepackages():
            for candidate in pathlib.Path(base).glob("nvidia/*/bin/cuobjdump"):
                found = str(candidate)
    if found is None:
        raise SystemExit(
            "cuobjdump not found: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm"
        )
    os.environ["PATH"] = f"{pathlib.Path(found).parent}{os.pathsep}{os.environ['PATH']}"
    return found


def opcodes(cubin: bytes, tool: str) -> list[str]:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        run = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True)
    if run.returncode != 0 or "fatal" in run.stderr:
        raise SystemExit(f"{tool} failed: {run.stderr.strip()}")
    return [m.split(".")[0] for m in OPCODE.findall(run.stdout)]


def resource_usage(cubin: bytes, tool: str) -> tuple[int, int, int] | None:
    """(registers a thread, stack bytes, static shared bytes) of the cubin's kernel, as
    cuobjdump reports them; None where it reports none. Registers decide how many blocks an
    SM holds; a stack is registers spilled (or a local array)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        run = subprocess.run([tool, "-res-usage", f.name], capture_output=True, text=True)
    found = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+)", run.stdout)
    return (int(found[1]), int(found[2]), int(found[3])) if found else None


def resources(cubin: bytes, tool: str) -> str:
    usage = resource_usage(cubin, tool)
    return f"{usage[0]} registers, stack {usage[1]}, shared {usage[2]}" if usage else "?"


def parse_value(text: str) -> object:
    if text in ("True", "False"):
        return text == "True"
    try:
        return int(text)
    except ValueError:
        raise SystemExit(f"{text!r}: a value is an int, True or False") from None


# Global loads no more than this many instructions apart are one run: issued together, in flight
# together. A run that starts well after the last is a load issued after the compiler had
# computed on earlier ones, a second trip to memory (codegen 34: one thread a row's guarded last
# load, `benchmarks/surface/pairs_one_thread_2026-11-30/load_groups_codegen32.txt`).
LOAD_RUN_GAP = 20


def load_runs(ops: list[str], gap: int = LOAD_RUN_GAP) -> list[tuple[int, int]]:
    """The runs of global loads (LDG) in a kernel's opcodes: (index of a run's first load,
    loads in the run), a run ending where the next load is more than `gap` instructions on."""
    runs: list[tuple[int, int]] = []
    last = None
    for i, op in enumerate(ops):
        if op != "LDG":
            continue
        if last is not None and i - last <= gap:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((i, 1))
        last = i
    return runs


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    if len(args) < 3 or (args[0] not in ZOO and args[0] not in SURFACE_ONLY):
        raise SystemExit(__doc__ + f"\ncases: {sorted(ZOO)}; patterns: {list(SURFACE_ONLY)}")
    name, dtype = args[0], DataType.parse(args[1])
    try:
        shape = tuple(int(n) for n in args[2].split("x"))
    except ValueError:
        raise SystemExit(f"{args[2]}: a shape is extents joined by x (8192x4096)") from None
    rank = 3 if name in MIDDLE_PATTERNS else 2
    if len(shape) != rank or min(shape) < 1:
        raise SystemExit(f"{args[2]}: {name} takes {rank} positive extents")
    arch = opts.get("arch", "sm_90")
    if arch not in PROFILES:
        raise SystemExit(f"--arch {arch}: one of {sorted(PROFILES)}")
    device = PROFILES[arch]
    changes = dict(a.split("=", 1) for a in args[3:])
    tool = cuobjdump()
    fd = build(ZOO[name], dtype) if name in ZOO else pattern_fusion(name, dtype)
    inputs = planning_inputs(fd, shape, dtype)
    plan = fd.plan(inputs, device=device)
    dtypes = {b.id: b.dtype for b in plan.buffers}
    for seg in plan.segments:
        sched = scheduler_for(seg.scheduler)
        params = sched.default_params(seg, device)
        if changes:
            unknown = sorted(set(changes) - set(sched.search_space(seg, device)))
            if unknown:
                raise SystemExit(
                    f"{seg.name}: no param {unknown} in the {seg.scheduler.value} space"
                )
            params = with_values(params, {k: parse_value(v) for k, v in changes.items()})
        why = sched.is_valid(seg, device, params)
        if why is not None:
            raise SystemExit(f"{seg.name}: {params} is not valid here ({why})")
        src = generate(seg, params, device, dtypes)
        cubin = compile_kernel(src.source, src.name, arch).cubin
        ops = opcodes(cubin, tool)
        common = collections.Counter(ops).most_common(12)
        print(f"{seg.name} ({seg.scheduler.value}) {params}")
        print(
            f"  {resources(cubin, tool)}; {len(ops)} instructions; "
            + ", ".join(f"{op} {n}" for op, n in common)
        )
        runs = load_runs(ops)
        print(
            f"  global loads {sum(n for _, n in runs)} in {len(runs)} runs "
            f"(first instruction, loads): {runs}"
        )
        if "--print" in sys.argv[1:]:
            print(src.source.split("end of preamble", 1)[1])


if __name__ == "__main__":
    main()
