"""The tuning-job queue: claim with a lease, heartbeat, complete, fail with backoff, release.

Claims are serialized by the database: `SELECT ... FOR UPDATE SKIP LOCKED` on PostgreSQL
(many hosts claim at once, none waits on another's row), `BEGIN IMMEDIATE` on SQLite. A job
whose lease expired (its worker was killed, its host died) is claimable again. Completing a
job stores its record in the same transaction that checks the lease is still ours: a worker
that lost its lease stores nothing, so no job is ever recorded twice.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy import and_, or_, select, update

from cache_db.models import JobRow, WorkerRow, utcnow
from cache_db.store import CacheStore, TunedRecord


class LeaseLost(Exception):
    """The job's lease expired and another worker may have it: drop the work."""


@dataclass(frozen=True)
class Job:
    id: int
    fusion_id: str
    segment_index: int
    kernel_key: str
    shape_key: str
    env_key: str
    signature_json: str
    attempts: int
    priority: int


def _job(row: JobRow) -> Job:
    return Job(
        row.id,
        row.fusion_id,
        row.segment_index,
        row.kernel_key,
        row.shape_key,
        row.env_key,
        row.signature_json,
        row.attempts,
        row.priority,
    )


def claim(
    store: CacheStore, owner: str, lease: dt.timedelta, env_key: str | None = None
) -> Job | None:
    """The next job (most hits first, then oldest), leased to `owner`; None when idle."""
    now = utcnow()
    with store.writer() as s, s.begin():
        ready = or_(
            and_(
                JobRow.state == "queued", or_(JobRow.not_before.is_(None), JobRow.not_before <= now)
            ),
            and_(JobRow.state == "running", JobRow.lease_expires_at < now),
        )
        q = select(JobRow).where(ready)
        if env_key is not None:
            q = q.where(JobRow.env_key == env_key)
        q = q.order_by(JobRow.priority.desc(), JobRow.created_at, JobRow.id).limit(1)
        if store.engine.dialect.name == "postgresql":
            q = q.with_for_update(skip_locked=True)
        row = s.execute(q).scalar_one_or_none()
        if row is None:
            return None
        row.state, row.lease_owner, row.lease_expires_at = "running", owner, now + lease
        row.attempts += 1
        row.updated_at = now
        return _job(row)


def _mine(job_id: int, owner: str):  # noqa: ANN202
    return and_(JobRow.id == job_id, JobRow.lease_owner == owner, JobRow.state == "running")


def heartbeat(store: CacheStore, job_id: int, owner: str, lease: dt.timedelta) -> bool:
    """Extend the lease; False when it is no longer ours."""
    now = utcnow()
    with store.writer() as s, s.begin():
        result = s.execute(
            update(JobRow)
            .where(_mine(job_id, owner), JobRow.lease_expires_at >= now)
            .values(lease_expires_at=now + lease, updated_at=now)
        )
        return result.rowcount == 1


def complete(
    store: CacheStore,
    job_id: int,
    owner: str,
    record: TunedRecord | None = None,
    cubin: bytes | None = None,
    arch: str = "",
    nvrtc_version: str = "",
    source: str | None = None,
) -> None:
    """Mark the job done and store its record, in one transaction; LeaseLost if not ours."""
    now = utcnow()
    with store.writer() as s, s.begin():
        result = s.execute(
            update(JobRow)
            .where(_mine(job_id, owner))
            .values(
                state="done", lease_owner=None, lease_expires_at=None, error=None, updated_at=now
            )
        )
        if result.rowcount != 1:
            raise LeaseLost(f"job {job_id} is no longer leased to {owner}")
        if record is not None:
            store._put_record(s, record, cubin, arch, nvrtc_version, source)


def fail(
    store: CacheStore,
    job_id: int,
    owner: str,
    error: str,
    *,
    max_attempts: int,
    backoff: dt.timedelta,
) -> str:
    """Record the error; retry after backoff * 2^(attempts-1), or give up. Returns the state."""
    now = utcnow()
    with store.writer() as s, s.begin():
        row = s.get(JobRow, job_id)
        if row is None or row.lease_owner != owner or row.state != "running":
            return "lost"
        row.error = error[-4000:]
        row.lease_owner = row.lease_expires_at = None
        row.updated_at = now
        if row.attempts >= max_attempts:
            row.state = "failed"
        else:
            row.state = "queued"
            row.not_before = now + backoff * (2 ** (row.attempts - 1))
        return row.state


def release(store: CacheStore, job_id: int, owner: str) -> bool:
    """Give a job back untouched (shutdown): queued again, this attempt not counted."""
    now = utcnow()
    with store.writer() as s, s.begin():
        result = s.execute(
            update(JobRow)
            .where(_mine(job_id, owner))
            .values(
                state="queued",
                lease_owner=None,
                lease_expires_at=None,
                attempts=JobRow.attempts - 1,
                updated_at=now,
            )
        )
        return result.rowcount == 1


def set_state(store: CacheStore, job_id: int, state: str) -> bool:
    """retry (queued) or cancel a job by hand."""
    with store.writer() as s, s.begin():
        values = {
            "state": state,
            "lease_owner": None,
            "lease_expires_at": None,
            "updated_at": utcnow(),
        }
        if state == "queued":
            values.update(attempts=0, not_before=None, error=None)
        return s.execute(update(JobRow).where(JobRow.id == job_id).values(**values)).rowcount == 1


@dataclass(frozen=True)
class WorkerStatus:
    """A daemon worker as it last reported itself."""

    owner: str
    host: str
    pid: int
    device: int
    state: str  # idle, busy, stopped
    job_id: int | None
    jobs_done: int
    started_at: dt.datetime
    last_seen_at: dt.datetime

    def silent_for(self, now: dt.datetime | None = None) -> dt.timedelta:
        return (now or utcnow()) - self.last_seen_at


def report_worker(
    store: CacheStore,
    owner: str,
    host: str,
    pid: int,
    device: int,
    state: str,
    *,
    job_id: int | None = None,
    jobs_done: int = 0,
) -> None:
    """This worker is alive now, in `state`: one row per worker, written in place."""
    now = utcnow()
    with store.writer() as s, s.begin():
        row = s.get(WorkerRow, owner)
        if row is None:
            s.add(
                WorkerRow(
                    owner=owner,
                    host=host,
                    pid=pid,
                    device=device,
                    state=state,
                    job_id=job_id,
                    jobs_done=jobs_done,
                    started_at=now,
                    last_seen_at=now,
                )
            )
        else:
            row.state, row.job_id, row.jobs_done, row.last_seen_at = state, job_id, jobs_done, now


WORKER_TTL = dt.timedelta(days=1)  # a worker row unheard of for this long is forgotten


def forget_workers(store: CacheStore, unheard_for: dt.timedelta = WORKER_TTL) -> int:
    """Delete the rows of workers not heard from for `unheard_for` (gone for good: a host that
    was rebuilt, a container that was removed); returns how many went."""
    cutoff = utcnow() - unheard_for
    with store.writer() as s, s.begin():
        return s.execute(sa.delete(WorkerRow).where(WorkerRow.last_seen_at < cutoff)).rowcount or 0


def workers(store: CacheStore) -> list[WorkerStatus]:
    """Every worker that ever reported, most recently seen first."""
    with store.session() as s:
        rows = s.execute(select(WorkerRow).order_by(WorkerRow.last_seen_at.desc())).scalars().all()
        return [
            WorkerStatus(
                r.owner,
                r.host,
                r.pid,
                r.device,
                r.state,
                r.job_id,
                r.jobs_done,
                r.started_at,
                r.last_seen_at,
            )
            for r in rows
        ]
