"""`tunefuse explain FILE.py`: the plan of each declared fusion for its example inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console

from cli.common import fail
from tunefuse.device_info import PROFILES
from tunefuse.errors import TunefuseError
from tunefuse.fusion_file import load_fusion_file


def explain(
    file: Annotated[
        Path, typer.Argument(help="A fusion file declaring FUSIONS (see tunefuse.fusion_file).")
    ],
    only: Annotated[
        str | None, typer.Option("--only", help="Explain only the fusion of this name.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document: a list, a fusion an item.")
    ] = False,
    arch: Annotated[
        str | None,
        typer.Option(
            "--arch",
            help="Plan as a GPU of this architecture does (sm_90: H100, sm_80: A100): a "
            "normalization whose rows it can neither hold nor spread over its SMs is a kernel "
            "a pass. Also prints each kernel's default params and launch geometry there. "
            "Without it, every normalization is one kernel.",
        ),
    ] = None,
) -> None:
    """Print the plan (kernels, schedulers, aliases, keys) of each fusion in FILE."""
    console = Console(soft_wrap=True)
    if arch is not None and arch not in PROFILES:
        fail(f"--arch {arch!r}: one of {', '.join(sorted(PROFILES))}", 2)
    device = PROFILES[arch] if arch is not None else None
    try:
        cases = load_fusion_file(file)
    except TunefuseError as e:
        fail(str(e), 2)
    if only is not None:
        cases = [c for c in cases if c.name == only]
        if not cases:
            fail(f"no fusion named {only!r} in {file}", 2)
    documents = []
    for case in cases:
        try:
            fd = case.build()
            inputs = case.example_inputs(np.random.default_rng(0))
            plan = fd.plan(inputs, device=device)
        except TunefuseError as e:
            fail(f"{case.name}: {e}")
        launches = launches_on(plan, device) if device is not None else None
        if as_json:
            documents.append(
                {
                    "name": case.name,
                    "fusion_id": fd.fusion.fusion_id,
                    "conc_key": plan.conc_key,
                    "num_kernels": plan.num_kernels,
                    "segments": [
                        {
                            "name": s.name,
                            "scheduler": s.scheduler.value,
                            "extents": list(s.extents),
                            "reduce_dims": list(s.reduce_dims),
                            "kernel_key": s.kernel_key,
                            "shape_key": s.shape_key,
                            "index_type": s.index_type,
                            **({"defaults": _launch_json(launches[i])} if launches else {}),
                        }
                        for i, s in enumerate(plan.segments)
                    ],
                    "aliases": len(plan.aliases),
                }
            )
        else:
            console.rule(f"[bold]{case.name}")
            console.print(str(plan), highlight=False, markup=False)
            if launches:
                console.print(f"  defaults on {device.name} (no cache):", highlight=False)
                for k in launches:
                    console.print(f"    {_launch_text(k)}", highlight=False, markup=False)
    if as_json:
        print(json.dumps(documents))


def launches_on(plan, device) -> tuple:  # noqa: ANN001
    """Each kernel as `device` would launch it with the default heuristics."""
    from tunefuse.runtime.lower import default_chooser, generate_launches

    _, launch = generate_launches(plan, device, default_chooser(device))
    return launch.kernels


def _launch_json(k) -> dict:  # noqa: ANN001 - a KernelLaunch
    return {
        "kernel_name": k.kernel_name,
        "params": k.params,
        "grid": list(k.grid),
        "block": list(k.block),
        "shared_bytes": k.shared_bytes,
        "workspace_bytes": k.workspace[1] if k.workspace is not None else 0,
    }


def _launch_text(k) -> str:  # noqa: ANN001 - a KernelLaunch
    params = ", ".join(f"{name}={value}" for name, value in k.params.items())
    grid = "x".join(map(str, k.grid))
    block = "x".join(map(str, k.block))
    extra = f", workspace {k.workspace[1]} B" if k.workspace is not None else ""
    return (
        f"{k.segment}: {k.scheduler} {k.kernel_name} grid {grid} block {block}, shared "
        f"{k.shared_bytes} B{extra}; {params}"
    )
