"""A heuristic change measured before it is made (GPU): the default params of a benchmark
case against variants of them, timed alternately with benchmarks/run.py's `timed`.

    python3 benchmarks/ab.py bias_gelu float 8192x4096 evict_first=False [vector=2,unroll=2 ...] [--rounds=5]
    python3 benchmarks/ab.py transpose_with_views float 768x128x64 pointwise.unroll=2
    python3 benchmarks/ab.py transpose2d bfloat16 4x33554432 pointwise.rows=1  (a transpose's own)
    python3 benchmarks/ab.py row_sum float 8192x4096 unroll=2 --torch-compile

--torch-compile adds torch.compile of the case (zoo cases) to the rounds.

CASE is a tests/fusion_zoo.py case (SHAPE rows x cols), a benchmarks/surface.py pattern not in
the zoo (col, var_mean0, middle, row: SHAPE as the surface lays it out) or a fusion of one
input of examples/seed_fusions.py (SHAPE its input's; --fusions=FILE takes another fusion
file's, e.g. benchmarks/padded_vocab.py). Each variant is a comma-separated list of
name=value changes to the default params: values the search space holds, or integers it
does not that `is_valid` accepts; in a plan of several kernels a variant changes the kernels
it is valid for (it says which) and is refused where it is valid for none. The rounds alternate
default, variant 1, variant 2, ...: drift hits them all alike.
"""

from __future__ import annotations

import dataclasses
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

import torch  # noqa: E402
from fusion_zoo import ZOO  # noqa: E402
from patterns import ROW_OPERANDS, SURFACE_ONLY, pattern_fusion  # noqa: E402
from run import timed, torch_of  # noqa: E402
from surface import _torch_fn  # noqa: E402
from sweep import choice, torch_dtype, zoo_case  # noqa: E402

from tunefuse import DataType  # noqa: E402
from tunefuse.errors import DefinitionError  # noqa: E402
from tunefuse.fusion_file import load_fusion_file  # noqa: E402
from tunefuse.planning.plan import make_plan  # noqa: E402
from tunefuse.runtime.device import runtime  # noqa: E402
from tunefuse.runtime.executor import Executor  # noqa: E402
from tunefuse.schedulers import scheduler_for, with_values  # noqa: E402


def spelled(space: dict, kind: str, name: str, text: str, default):  # noqa: ANN001, ANN201
    """The value `text` spells for parameter `name`: a search-space choice, an integer
    outside the space (a peeled vector, which `is_valid` accepts but the space does not
    search yet), or an integer or boolean for a field of the params that the space does not
    search at all (a transpose's `min_blocks`); SystemExit naming the parameter when it is
    none of these."""
    if name not in space and name in {f.name for f in dataclasses.fields(default)}:
        current = getattr(default, name)
        if isinstance(current, bool) and text in ("True", "False"):
            return text == "True"
        if (
            isinstance(current, int)
            and not isinstance(current, bool)
            and text.lstrip("-").isdigit()
        ):
            return int(text)
    if name in space and not any(str(c) == text for c in space[name].choices):
        if text.lstrip("-").isdigit() and all(
            isinstance(c, int) and not isinstance(c, bool) for c in space[name].choices
        ):
            return int(text)
    return choice(space, kind, name, text)


def variant(segment, device, default, spec: str):  # noqa: ANN001, ANN201
    """The default params with the `name=value,...` changes of `spec` that apply to this
    segment's scheduler (values as the search space spells them, or integers it does not
    search that `is_valid` accepts; `pointwise.block_size=128` changes only pointwise
    kernels, a bare name every kernel); None where a change is not valid for this kernel
    (`main` refuses a spec that no kernel of the plan takes)."""
    sched = scheduler_for(segment.scheduler)
    space = sched.search_space(segment, device)
    changes = {}
    for item in spec.split(","):
        name, _, text = item.partition("=")
        kind, dot, bare = name.rpartition(".")
        if dot and kind != segment.scheduler.value:
            if not hasattr(default, kind):
                continue
            bare = name  # a field of nested params: "pointwise.rows" of a transpose
        if not dot and bare not in space and not hasattr(default, bare):
            return None  # a bare name another scheduler's kernels have
        changes[bare] = spelled(space, segment.scheduler.value, bare, text, default)
    params = with_values(default, changes)
    if sched.is_valid(segment, device, params) is not None:
        return None
    return params


def check_names(segments, defaults, spec: str) -> None:  # noqa: ANN001
    """SystemExit when a change of `spec` names a scheduler that no kernel of the plan has
    (nor nested params of one: a transpose's "pointwise")."""
    kinds = {s.scheduler.value for s in segments}
    for item in spec.split(","):
        kind, dot, _ = item.partition("=")[0].rpartition(".")
        if dot and kind not in kinds and not any(hasattr(d, kind) for d in defaults):
            raise SystemExit(f"{item}: the plan has no {kind} kernel (it has {sorted(kinds)})")


def case(name: str, dtype: DataType, shape: tuple[int, ...], fusions: pathlib.Path):  # noqa: ANN201
    """(fusion definition, torch inputs): a fusion_zoo case, or a fusion of one input of the
    fusion file `fusions`."""
    if name in ZOO:
        return zoo_case(name, dtype, *shape)
    if name in SURFACE_ONLY:
        x = torch.randn(*shape, device="cuda").to(torch_dtype(dtype))
        weights = [
            torch.randn(shape[-1], device="cuda").to(torch_dtype(dtype))
            for _ in range(ROW_OPERANDS.get(name, 0))
        ]
        return pattern_fusion(name, dtype), [x, *weights]
    try:
        seeds = {c.name: c for c in load_fusion_file(fusions)}
    except DefinitionError as e:
        raise SystemExit(f"--fusions: {e}") from None
    if name not in seeds:
        raise SystemExit(
            f"{name}: neither a fusion_zoo case {sorted(ZOO)} nor a fusion of {fusions} "
            f"{sorted(seeds)}"
        )
    return seeds[name].build(), [torch.randn(*shape, device="cuda").to(torch_dtype(dtype))]


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    if len(args) < 3 or (len(args) == 3 and "--torch-compile" not in sys.argv[1:]):
        raise SystemExit(__doc__)
    name, dtype_name, shape_text = args[0], args[1], args[2]
    rounds = int(opts.get("rounds", 5))
    fusions = pathlib.Path(opts.get("fusions", ROOT / "examples" / "seed_fusions.py"))
    if "fusions" in opts:  # a file named is read whatever the case: a bad one is refused
        try:
            load_fusion_file(fusions)
        except DefinitionError as e:
            raise SystemExit(f"--fusions: {e}") from None
    shape = tuple(int(n) for n in shape_text.split("x"))
    fd, inputs = case(name, DataType(dtype_name), shape, fusions)
    device = runtime(0).info
    segments = make_plan(fd.fusion, inputs, device=device).segments
    default = tuple(scheduler_for(s.scheduler).default_params(s, device) for s in segments)
    runs = {"default": Executor(fd.fusion, params_source=lambda s, d: None)}
    for spec in args[3:]:
        check_names(segments, default, spec)
        chosen = {}
        changed = []
        for i, (s, own) in enumerate(zip(segments, default, strict=True)):
            params = variant(s, device, own, spec)
            chosen[(s.kernel_key, s.shape_key)] = own if params is None else params
            if params is not None and params != own:
                changed.append(i)
        if not changed:
            raise SystemExit(f"{spec}: no kernel of the plan takes it (valid, and a change)")
        print(f"{spec}: changes kernel(s) {changed} of {len(segments)}")
        runs[spec] = Executor(
            fd.fusion, params_source=lambda s, d, c=chosen: c[(s.kernel_key, s.shape_key)]
        )
    want = runs["default"].run(inputs)[0].float()
    # Another reduction order may round the last bit of the output type differently.
    rtol, atol = (4 * t for t in DataType(dtype_name).tolerance)
    for label, ex in runs.items():
        got = ex.run(inputs)[0].float()
        if not bool(((got - want).abs() <= atol + rtol * want.abs()).all()):
            worst = float((got - want).abs().max())
            raise SystemExit(f"{label}: a different result than the default's (by {worst})")
    calls = {label: (lambda ex=ex: ex.run(inputs)) for label, ex in runs.items()}
    if "--torch-compile" in sys.argv[1:]:
        if name not in ZOO and name not in SURFACE_ONLY:
            raise SystemExit(f"--torch-compile: {name} is neither a fusion_zoo case nor a pattern")
        compiled = torch.compile(torch_of(name) if name in ZOO else _torch_fn(name))
        got = compiled(*inputs)
        got = (got[0] if isinstance(got, tuple) else got).float()  # var_mean: (var, mean)
        if not bool((got - want).abs().max() <= 1e-2 * (1 + want.abs().max())):
            raise SystemExit("torch.compile: a different result than the default's")
        calls["torch.compile"] = lambda: compiled(*inputs)
    times: dict[str, list[float]] = {label: [] for label in calls}
    for _ in range(rounds):
        for label, call in calls.items():
            times[label].append(timed(call))
    print(f"{name} {dtype_name} {shape_text}, default {'; '.join(map(str, default))}")
    for label, ts in times.items():
        print(
            f"  {label:40s} median {statistics.median(ts):7.1f} us of {[round(t, 1) for t in ts]}"
        )


if __name__ == "__main__":
    main()
