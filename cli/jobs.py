"""`tunefuse jobs ...`: the tuning queue."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from cli.common import CacheOption, JsonOption, emit, fail, open_store

app = typer.Typer(help="Look at and steer the tuning-job queue.", no_args_is_help=True)
JOB_STATES = ("queued", "running", "done", "failed", "cancelled")


def _job_dict(j) -> dict:  # noqa: ANN001 - a JobRow
    return {
        "id": j.id,
        "state": j.state,
        "priority": j.priority,
        "attempts": j.attempts,
        "kernel_key": j.kernel_key,
        "shape_key": j.shape_key,
        "fusion_id": j.fusion_id,
        "segment_index": j.segment_index,
        "lease_owner": j.lease_owner,
        "lease_expires_at": j.lease_expires_at,
        "error": j.error,
        "created_at": j.created_at,
        "updated_at": j.updated_at,
    }


@app.command("ls")
def ls(
    cache: CacheOption = None,
    state: Annotated[
        str | None, typer.Option(help="queued, running, done, failed, cancelled.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List jobs (most hits first)."""
    if state is not None and state not in JOB_STATES:
        fail(f"--state must be one of {', '.join(JOB_STATES)}, not {state!r}", 2)
    jobs = sorted(
        (_job_dict(j) for j in open_store(cache).jobs(state)),
        key=lambda j: (-j["priority"], j["id"]),
    )
    table = Table("id", "state", "hits", "attempts", "kernel", "shape", "owner")
    for j in jobs:
        table.add_row(
            str(j["id"]),
            j["state"],
            str(j["priority"]),
            str(j["attempts"]),
            j["kernel_key"][:12],
            j["shape_key"],
            j["lease_owner"] or "",
        )
    emit(jobs, as_json, table)


def _one(cache: str | None, job_id: int):  # noqa: ANN202
    store = open_store(cache)
    match = [j for j in store.jobs() if j.id == job_id]
    if not match:
        fail(f"no job {job_id}")
    return store, match[0]


@app.command("show")
def show(job_id: int, cache: CacheOption = None, as_json: JsonOption = False) -> None:
    """One job, with its last error."""
    _, job = _one(cache, job_id)
    data = _job_dict(job)
    emit(data, as_json, text="\n".join(f"{k}: {v}" for k, v in data.items()))


@app.command("retry")
def retry(job_id: int, cache: CacheOption = None) -> None:
    """Queue a failed or cancelled job again."""
    from cache_db.queue import set_state

    store, job = _one(cache, job_id)
    if job.state in ("queued", "running"):
        fail(f"job {job_id} is already {job.state}: nothing to retry")
    set_state(store, job_id, "queued")
    emit(None, False, text=f"job {job_id} queued")


@app.command("cancel")
def cancel(job_id: int, cache: CacheOption = None) -> None:
    """Cancel a job (a worker holding it loses its lease)."""
    from cache_db.queue import set_state

    store, _ = _one(cache, job_id)
    set_state(store, job_id, "cancelled")
    emit(None, False, text=f"job {job_id} cancelled")
