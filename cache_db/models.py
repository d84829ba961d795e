"""SQLAlchemy 2 models of the cache. The Alembic revisions in `migrations/` create exactly
this schema (a test compares them)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


class FusionRow(Base):
    """A fusion definition, as canonical JSON (data, never code)."""

    __tablename__ = "fusions"
    fusion_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    canonical_json: Mapped[str] = mapped_column(Text)
    name: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class BinaryRow(Base):
    """A cubin, stored once under the hash of what produced it (source, arch, NVRTC,
    options) and verified against the sha256 of its bytes on every read."""

    __tablename__ = "binaries"
    code_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64))
    cubin: Mapped[bytes] = mapped_column(LargeBinary)
    size: Mapped[int] = mapped_column(Integer)
    kernel_name: Mapped[str] = mapped_column(String(200))
    arch: Mapped[str] = mapped_column(String(16))
    nvrtc_version: Mapped[str] = mapped_column(String(32))
    quarantined: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    last_used_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    source: Mapped[str | None] = mapped_column(Text)  # the CUDA C++ compiled (None: not kept)


class RecordRow(Base):
    """Tuned params of one kernel for one shape in one env, and the binary they compile to."""

    __tablename__ = "tuned_records"
    __table_args__ = (
        UniqueConstraint("kernel_key", "shape_key", "env_key", name="uq_record"),
        Index("ix_record_kernel_env", "kernel_key", "env_key"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kernel_key: Mapped[str] = mapped_column(String(64))
    shape_key: Mapped[str] = mapped_column(String(200))
    env_key: Mapped[str] = mapped_column(String(64))
    compute_capability: Mapped[str] = mapped_column(String(16))
    device_name: Mapped[str] = mapped_column(String(200))
    nvrtc_version: Mapped[str] = mapped_column(String(32))
    driver_version: Mapped[str] = mapped_column(String(32))
    codegen_version: Mapped[str] = mapped_column(String(32))
    fusion_id: Mapped[str | None] = mapped_column(
        ForeignKey("fusions.fusion_id", ondelete="SET NULL")
    )
    scheduler: Mapped[str] = mapped_column(String(32))
    params_json: Mapped[str] = mapped_column(Text)
    code_key: Mapped[str] = mapped_column(ForeignKey("binaries.code_key"))
    median_us: Mapped[float | None] = mapped_column(Float)
    spread_us: Mapped[float | None] = mapped_column(Float)
    default_us: Mapped[float | None] = mapped_column(Float)
    trials: Mapped[int] = mapped_column(Integer, default=0)
    tuned_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    hits: Mapped[int] = mapped_column(Integer, default=0)
    last_used_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    quarantined: Mapped[bool] = mapped_column(Boolean, default=False)
    # The tuning history, JSON [[trial, microseconds or null, state], ...] (None: not kept).
    history_json: Mapped[str | None] = mapped_column(Text)


class JobRow(Base):
    """A tuning job: the queue the daemon drains, one job per (kernel, shape, env)."""

    __tablename__ = "tuning_jobs"
    __table_args__ = (
        UniqueConstraint("kernel_key", "shape_key", "env_key", name="uq_job"),
        Index("ix_job_claim", "state", "priority", "created_at"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    fusion_id: Mapped[str] = mapped_column(ForeignKey("fusions.fusion_id", ondelete="CASCADE"))
    segment_index: Mapped[int] = mapped_column(Integer)
    kernel_key: Mapped[str] = mapped_column(String(64))
    shape_key: Mapped[str] = mapped_column(String(200))
    env_key: Mapped[str] = mapped_column(String(64))
    signature_json: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16), default="queued")
    priority: Mapped[int] = mapped_column(Integer, default=0)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    not_before: Mapped[dt.datetime | None] = mapped_column(DateTime)  # retry backoff
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class LaunchPlanRow(Base):
    """A fusion's launch plan for one input signature in one env (tunefuse.runtime.launch_plan):
    what a new process needs to run that signature without planning or generating code.
    Derived data: never exported, re-planned whenever it no longer matches the cache."""

    __tablename__ = "launch_plans"
    plan_key: Mapped[str] = mapped_column(
        String(64), primary_key=True
    )  # fusion, signature, outputs, env
    env_key: Mapped[str] = mapped_column(String(64))
    fusion_id: Mapped[str] = mapped_column(String(64))
    plan_json: Mapped[str] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class WorkerRow(Base):
    """A daemon worker's last sign of life: written when it starts, polls, beats and stops,
    so that `tunefuse doctor` can tell a running daemon from a dead one."""

    __tablename__ = "daemon_workers"
    owner: Mapped[str] = mapped_column(String(200), primary_key=True)  # host:pid:device
    host: Mapped[str] = mapped_column(String(200))
    pid: Mapped[int] = mapped_column(Integer)
    device: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))  # idle, busy, stopped
    job_id: Mapped[int | None] = mapped_column(Integer)
    jobs_done: Mapped[int] = mapped_column(Integer, default=0)
    started_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    last_seen_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
