"""`tunefuse cache ...`: look into and manage the persistent cache."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from cli.common import CacheOption, JsonOption, console, emit, fail, open_store

app = typer.Typer(help="Inspect and prune the cache of tuned kernels.", no_args_is_help=True)


def _record_dict(r) -> dict:  # noqa: ANN001 - a TunedRecord
    speedup = (r.default_us / r.median_us) if r.default_us and r.median_us else None
    return {
        "id": r.id,
        "kernel_key": r.kernel_key,
        "shape_key": r.shape_key,
        "scheduler": r.scheduler,
        "params": r.params,
        "median_us": r.median_us,
        "spread_us": r.spread_us,
        "default_us": r.default_us,
        "speedup": speedup,
        "trials": r.trials,
        "hits": r.hits,
        "fusion_id": r.fusion_id,
        "code_key": r.code_key,
        "tuned_at": r.tuned_at,
        "last_used_at": r.last_used_at,
        "env": {
            "compute_capability": r.env.compute_capability,
            "device_name": r.env.device_name,
            "nvrtc_version": r.env.nvrtc_version,
            "driver_version": r.env.driver_version,
            "codegen_version": r.env.codegen_version,
            "key": r.env.key,
        },
    }


def _current_env():  # noqa: ANN202
    try:
        from tunefuse.runtime.device import runtime

        return runtime(0).env
    except Exception as e:  # noqa: BLE001
        fail(f"--stale needs the current GPU's env: {e}", 2)


@app.command("ls")
def ls(
    cache: CacheOption = None,
    fusion: Annotated[str | None, typer.Option(help="Only this fusion (id prefix).")] = None,
    scheduler: Annotated[str | None, typer.Option(help="Only this scheduler.")] = None,
    env: Annotated[str | None, typer.Option(help="Only this env key (prefix).")] = None,
    stale: Annotated[
        bool, typer.Option("--stale", help="Only records of another env than this GPU's.")
    ] = False,
    sort: Annotated[str, typer.Option(help="hits, speedup, age or size.")] = "hits",
    as_json: JsonOption = False,
) -> None:
    """List tuned records."""
    if sort not in ("hits", "speedup", "age", "size"):
        fail(f"--sort must be hits, speedup, age or size, not {sort!r}", 2)
    store = open_store(cache)
    records = [_record_dict(r) for r in store.records()]
    if fusion:
        records = [r for r in records if (r["fusion_id"] or "").startswith(fusion)]
    if scheduler:
        records = [r for r in records if r["scheduler"] == scheduler]
    if env:
        records = [r for r in records if r["env"]["key"].startswith(env)]
    if stale:
        here = _current_env().key
        records = [r for r in records if r["env"]["key"] != here]
    binaries = store.binary_states()
    for r in records:
        # "missing": no binary under the record's code key; "quarantined": never served.
        r["size"], quarantined = binaries.get(r["code_key"], (0, None))
        r["binary"] = {None: "missing", True: "quarantined", False: "ok"}[quarantined]
    key = {
        "hits": lambda r: -r["hits"],
        "speedup": lambda r: -(r["speedup"] or 0),
        "age": lambda r: r["tuned_at"],
        "size": lambda r: -r["size"],
    }[sort]
    records.sort(key=key)
    table = Table(
        "id",
        "scheduler",
        "kernel",
        "shape",
        "µs",
        "default µs",
        "speedup",
        "trials",
        "hits",
        "device",
    )
    for r in records:
        binary = "" if r["binary"] == "ok" else f" [red]binary {r['binary']}[/red]"
        table.add_row(
            str(r["id"]),
            r["scheduler"],
            r["kernel_key"][:12] + binary,
            r["shape_key"],
            f"{r['median_us'] or 0:.1f}",
            f"{r['default_us'] or 0:.1f}",
            f"{r['speedup']:.2f}x" if r["speedup"] else "-",
            str(r["trials"]),
            str(r["hits"]),
            r["env"]["device_name"],
        )
    emit(records, as_json, table)


@app.command("show")
def show(
    record_id: Annotated[int, typer.Argument(help="Record id (from cache ls).")],
    cache: CacheOption = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Draw the tuning history (trial vs µs, default and best marked) to this PNG.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """One record: params, timings, speedup over default, trials, env, tuning history and the
    CUDA C++ its binary was compiled from."""
    store = open_store(cache)
    match = [r for r in store.records() if r.id == record_id]
    if not match:
        fail(f"no record {record_id}")
    record = match[0]
    data = _record_dict(record)
    data["history"] = [list(h) for h in record.history]
    data["source"] = store.get_source(record.code_key)
    if plot is not None:
        if not record.history:
            fail(f"record {record_id} has no tuning history to plot (it was stored without one)")
        from cli.plot import plot_history

        try:
            plot_history(record, plot)
        except ImportError:
            fail("--plot needs matplotlib: pip install 'tunefuse[plot]'", 2)
        data["plot"] = str(plot)
    if as_json:
        emit(data, True)
        return
    for key, value in data.items():
        if key not in ("source", "history"):
            console.print(f"{key}: {json.dumps(value, default=str)}", highlight=False)
    completed = [us for _, us, state in record.history if state == "COMPLETE" and us is not None]
    if record.history:
        console.print(
            f"history: {len(record.history)} trials, {len(record.history) - len(completed)} failed"
            + (f", best {min(completed):.1f} µs" if completed else ""),
            highlight=False,
        )
    if data["source"] is None:
        console.print("source: not kept for this binary", highlight=False)
    else:
        from rich.syntax import Syntax

        console.print(Syntax(data["source"], "cuda", line_numbers=False, word_wrap=False))


@app.command("stats")
def stats(cache: CacheOption = None, as_json: JsonOption = False) -> None:
    """Entries, binaries, bytes, hit counts, jobs, launch plans."""
    st = open_store(cache).stats()
    data = {
        "records": st.records,
        "binaries": st.binaries,
        "binary_bytes": st.binary_bytes,
        "hits": st.hits,
        "quarantined": st.quarantined,
        "jobs": st.jobs,
        "launch_plans": st.launch_plans,
    }
    emit(data, as_json, text="\n".join(f"{k}: {v}" for k, v in data.items()))


@app.command("prune")
def prune(
    cache: CacheOption = None,
    older_than: Annotated[
        float | None, typer.Option(help="Records tuned more than this many days ago.")
    ] = None,
    unused_for: Annotated[
        float | None, typer.Option(help="Records not used for this many days.")
    ] = None,
    stale: Annotated[
        bool, typer.Option("--stale", help="Records of another env than this GPU's.")
    ] = False,
    max_bytes: Annotated[
        int | None, typer.Option(help="Least recently used first until binaries fit.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would go; delete nothing.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Delete records (and binaries nothing needs) by age, last use, stale env, size cap."""
    if older_than is None and unused_for is None and not stale and max_bytes is None:
        fail("say what to prune: --older-than, --unused-for, --stale or --max-bytes", 2)
    older, unused = _days("--older-than", older_than), _days("--unused-for", unused_for)
    if max_bytes is not None and max_bytes < 0:
        fail(f"--max-bytes must be a size in bytes, 0 or more, not {max_bytes}", 2)
    from cache_db.store import CacheError

    store = open_store(cache)
    try:
        plan = store.plan_prune(
            older_than=older,
            unused_for=unused,
            stale_env=_current_env() if stale else None,
            max_bytes=max_bytes,
        )
    except CacheError as e:
        fail(str(e), 2)
    what = plan.result
    counts = f"{len(what['records'])} records, {len(what['binaries'])} binaries and {what['launch_plans']} launch plans"
    if dry_run:
        emit(what, as_json, text=f"would delete {counts}")
        return
    if not yes and not typer.confirm(f"delete {counts}?"):
        raise typer.Exit(1)
    store.apply_prune(plan)  # what was shown is what goes (each row re-checked as it is deleted)
    emit(what, as_json, text=f"deleted {counts}")


MAX_DAYS = 100 * 366


def _days(option: str, value: float | None) -> dt.timedelta | None:
    """A number of days as a timedelta; a negative, infinite, NaN or absurd number is a usage
    error (exit 2) before the cache is touched: `--older-than -5` would prune everything."""
    if value is None:
        return None
    if not math.isfinite(value) or not 0 <= value <= MAX_DAYS:
        fail(f"{option} must be a number of days from 0 to {MAX_DAYS}, not {value}", 2)
    return dt.timedelta(days=value)


@app.command("export")
def export(
    path: Annotated[Path, typer.Argument(help="JSON lines file to write.")],
    cache: CacheOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write the cache as JSON lines (binaries base64, with their sha256)."""
    n = open_store(cache).export(path)
    # A header line names the format; then a line an item (fusion, binary or record).
    emit(
        {"items": n, "lines": n + 1, "path": str(path)},
        as_json,
        text=f"exported {n} items ({n + 1} lines with the header) to {path}",
    )


@app.command("import")
def import_(
    path: Annotated[Path, typer.Argument(help="JSON lines file from cache export.")],
    cache: CacheOption = None,
    as_json: JsonOption = False,
) -> None:
    """Read an export; every line is validated before anything is written."""
    from cache_db.store import CacheError

    if not path.is_file():
        fail(f"{path} does not exist", 2)
    try:
        n = open_store(cache).import_(path)
    except CacheError as e:
        fail(f"import refused: {e}")
    emit({"items": n}, as_json, text=f"imported {n} items")


@app.command("verify")
def verify(cache: CacheOption = None, as_json: JsonOption = False) -> None:
    """Recompute every binary's sha256, quarantine mismatches; list records that lookups
    skip as malformed (exit 1 if either)."""
    store = open_store(cache)
    bad = store.verify()
    malformed = store.malformed_records()
    lines = [f"{len(bad)} corrupt binaries quarantined" if bad else "all binaries ok"]
    lines += [f"record {m['id']} is skipped: {m['why']}" for m in malformed]
    emit({"quarantined": bad, "malformed_records": malformed}, as_json, text="\n".join(lines))
    if bad or malformed:
        raise typer.Exit(1)


@app.command("vacuum")
def vacuum(cache: CacheOption = None) -> None:
    """Give the space of deleted rows back to the file system."""
    open_store(cache).vacuum()
    console.print("vacuumed")
