"""The background tuning daemon: one worker process per GPU drains the job queue.

    tunefuse daemon --devices 0,1 --cache postgresql+psycopg://host/db

Each worker claims the next job (most hits first, then oldest), holds its lease by
heartbeat, runs it (rebuild the fusion from its JSON, inputs from the stored signature,
tune the job's kernel), and stores the winner and marks the job done in one transaction.
A failure is retried with backoff, then marked failed. SIGTERM / SIGINT: the current job is
released within a bounded time and the process exits 0. SIGKILL or a host crash: the lease
expires and another worker takes the job.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from tunefuse.errors import StopRequested

log = logging.getLogger("tunefuse.daemon")


@dataclass(frozen=True)
class DaemonSettings:
    cache_url: str | None = None
    devices: tuple[int, ...] = (0,)
    lease_s: float = 60.0
    heartbeat_s: float = 10.0
    poll_min_s: float = 0.5
    poll_max_s: float = 15.0
    max_attempts: int = 3
    backoff_s: float = 30.0
    trials: int = 40
    job_timeout_s: float = 1800.0
    max_jobs: int | None = None  # per worker; None: until stopped
    idle_exit_s: float | None = None  # exit when idle this long (tests, batch runs)
    shutdown_grace_s: float = 20.0
    runner: str = "tunefuse.daemon:tune_job"

    @staticmethod
    def from_env(**overrides: object) -> DaemonSettings:
        """Settings from TUNEFUSE_DAEMON_* environment variables, then flags."""
        env = os.environ
        values: dict = {}
        for name, kind in (
            ("lease_s", float),
            ("heartbeat_s", float),
            ("max_attempts", int),
            ("backoff_s", float),
            ("trials", int),
            ("job_timeout_s", float),
            ("poll_max_s", float),
        ):
            raw = env.get(f"TUNEFUSE_DAEMON_{name.upper()}")
            if raw is not None:
                values[name] = kind(raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return DaemonSettings(**values)


class _JsonLines(logging.Formatter):
    """The daemon's events as they are (JSON already); any other tunefuse log record (a failed
    trial's warning) as an event of its own, so that every stderr line is one JSON object."""

    def format(self, record: logging.LogRecord) -> str:
        if record.name == log.name:
            return record.getMessage()
        return json.dumps(
            {
                "event": "log",
                "ts": round(record.created, 3),
                "level": record.levelname.lower(),
                "logger": record.name,
                "message": record.getMessage(),
            },
            default=str,
        )


def _event_log() -> None:
    """The daemon's log: JSON lines on stderr from tunefuse's loggers, nothing else. The root
    logger is left alone (a basicConfig at INFO let Alembic's "Context impl" lines in)."""
    package = logging.getLogger("tunefuse")
    if not any(getattr(h, "_tunefuse_events", False) for h in package.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(_JsonLines())
        handler._tunefuse_events = True  # type: ignore[attr-defined]
        package.addHandler(handler)
    package.setLevel(logging.INFO)
    package.propagate = False


def event(name: str, **fields: object) -> None:
    """One structured log line per event."""
    log.info(json.dumps({"event": name, "ts": round(time.time(), 3), **fields}, default=str))


@dataclass
class JobContext:
    """What a runner gets besides the job: the store, settings, device, and whether to stop."""

    store: object
    settings: DaemonSettings
    device: int
    stop: threading.Event = field(default_factory=threading.Event)

    def check_stop(self) -> None:
        if self.stop.is_set():
            raise StopRequested()


def tune_job(job, ctx: JobContext):  # noqa: ANN001, ANN201 - the real runner
    """Rebuild the job's fusion and inputs, tune its kernel; (record, cubin, arch, nvrtc)."""
    from cache_db.store import TunedRecord
    from tunefuse.compiler import nvrtc_version
    from tunefuse.frontend import FusionDefinition
    from tunefuse.ir.serialize import fusion_from_json
    from tunefuse.runtime.device import runtime
    from tunefuse.tuning.inputs import make_inputs
    from tunefuse.tuning.tuner import tune

    text = ctx.store.get_fusion_json(job.fusion_id)  # type: ignore[attr-defined]
    if text is None:
        raise RuntimeError(f"fusion {job.fusion_id[:12]} of job {job.id} is not in the cache")
    fd = FusionDefinition.from_fusion(fusion_from_json(text))
    inputs = make_inputs(job.signature_json, fusion=fd.fusion)
    rt = runtime(ctx.device)
    if rt.env.key != job.env_key:
        raise RuntimeError(f"job {job.id} was queued for another env than device {ctx.device}'s")
    report = tune(
        fd,
        inputs,
        trials=ctx.settings.trials,
        timeout=ctx.settings.job_timeout_s,
        cache=None,
        device=ctx.device,
        progress=False,
        only_segment=job.segment_index,
        stop=ctx.stop,
    )
    (seg,) = report.segments
    record = TunedRecord(
        seg.kernel_key,
        seg.shape_key,
        rt.env,
        seg.scheduler,
        seg.params,
        seg.code_key,
        seg.kernel_name,
        seg.best_us,
        seg.spread_us,
        seg.default_us,
        seg.trials,
        job.fusion_id,
        history=tuple(seg.history),
    )
    return record, seg.cubin, rt.info.arch, nvrtc_version(), seg.source


def _resolve(path: str) -> Callable:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def worker_loop(settings: DaemonSettings, device: int) -> int:
    """Drain jobs on one device until stopped (or idle/budget limits); returns jobs done."""
    from cache_db import queue
    from cache_db.store import CacheStore

    _event_log()
    stop = threading.Event()
    current: dict = {}  # the job in hand, for the shutdown watchdog

    def on_signal(signum: int, _frame: object) -> None:
        if stop.is_set():
            return
        stop.set()
        event("stopping", signal=signal.Signals(signum).name, device=device)

        def watchdog() -> None:
            # A runner that does not stop in time: give its job back and leave anyway.
            time.sleep(settings.shutdown_grace_s)
            job_id = current.get("job")
            if job_id is not None:
                queue.release(store, job_id, owner)
                event("released", job=job_id, outcome="released after the grace period")
            os._exit(0)

        threading.Thread(target=watchdog, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    store = CacheStore.open(settings.cache_url)
    runner = _resolve(settings.runner)
    host, pid = socket.gethostname(), os.getpid()
    owner = f"{host}:{pid}:{device}"

    def report(state: str, job_id: int | None = None) -> None:
        """The worker's sign of life for `tunefuse doctor`; a failed write costs a log line."""
        try:
            queue.report_worker(
                store, owner, host, pid, device, state, job_id=job_id, jobs_done=done
            )
        except Exception as e:  # noqa: BLE001 - liveness reports never stop the worker
            event("report_failed", owner=owner, error=str(e)[:200])

    lease = dt.timedelta(seconds=settings.lease_s)
    backoff = dt.timedelta(seconds=settings.backoff_s)
    try:
        forgotten = queue.forget_workers(store)  # rows of workers gone for a day or more
    except Exception as e:  # noqa: BLE001 - housekeeping never stops the worker
        forgotten, _ = 0, event("report_failed", owner=owner, error=str(e)[:200])
    event(
        "worker_started",
        owner=owner,
        device=device,
        cache=store.url.split("@")[-1],
        forgotten=forgotten,
    )
    done, poll, idle_since = 0, settings.poll_min_s, time.monotonic()
    report("idle")
    while not stop.is_set() and (settings.max_jobs is None or done < settings.max_jobs):
        job = queue.claim(store, owner, lease)
        if job is None:
            report("idle")
            if (
                settings.idle_exit_s is not None
                and time.monotonic() - idle_since > settings.idle_exit_s
            ):
                break
            stop.wait(poll)
            poll = min(poll * 2, settings.poll_max_s)  # idle polling backs off
            continue
        poll, idle_since = settings.poll_min_s, time.monotonic()
        event(
            "claimed",
            job=job.id,
            kernel=job.kernel_key[:12],
            shape=job.shape_key,
            attempt=job.attempts,
            owner=owner,
        )
        current["job"] = job.id
        report("busy", job.id)
        ctx = JobContext(store, settings, device, stop)
        lost = threading.Event()
        beating = threading.Event()

        def beat(job_id: int = job.id) -> None:
            while not beating.wait(settings.heartbeat_s):
                if not queue.heartbeat(store, job_id, owner, lease):
                    lost.set()
                    ctx.stop.set()
                    return
                report("busy", job_id)

        heart = threading.Thread(target=beat, daemon=True)
        heart.start()
        try:
            result = runner(job, ctx)
            if lost.is_set():
                raise queue.LeaseLost(f"job {job.id}: lease lost while running")
            # A runner returns (record, cubin, arch, nvrtc[, source]) or None.
            record, cubin, arch, nvrtc, *source = (
                result if result is not None else (None, None, "", "")
            )
            queue.complete(
                store, job.id, owner, record, cubin, arch, nvrtc, source[0] if source else None
            )
            done += 1
            event(
                "done",
                job=job.id,
                kernel=job.kernel_key[:12],
                outcome="stored" if record else "done",
            )
        except StopRequested:
            released = queue.release(store, job.id, owner)
            event(
                "released",
                job=job.id,
                kernel=job.kernel_key[:12],
                outcome="released" if released else "lost",
            )
        except queue.LeaseLost as e:
            event("lease_lost", job=job.id, kernel=job.kernel_key[:12], outcome=str(e))
        except Exception as e:  # noqa: BLE001 - a failed job is recorded, the daemon goes on
            state = queue.fail(
                store,
                job.id,
                owner,
                f"{type(e).__name__}: {e}",
                max_attempts=settings.max_attempts,
                backoff=backoff,
            )
            event(
                "failed", job=job.id, kernel=job.kernel_key[:12], outcome=state, error=str(e)[:300]
            )
        finally:
            current.pop("job", None)
            beating.set()
            heart.join(timeout=5)
    report("stopped")
    event("worker_stopped", owner=owner, jobs=done)
    store.close()
    return done


def _worker_main(settings: DaemonSettings, device: int) -> None:
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    worker_loop(settings, device)


def run_daemon(settings: DaemonSettings) -> int:
    """Foreground process: one worker per device; exits 0 after SIGTERM / SIGINT."""
    _event_log()
    if len(settings.devices) == 1:
        worker_loop(settings, settings.devices[0])
        return 0
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_worker_main, args=(settings, d), name=f"tunefuse-worker-{d}")
        for d in settings.devices
    ]
    for p in procs:
        p.start()
    stopping = threading.Event()

    def forward(signum: int, _frame: object) -> None:
        stopping.set()
        for p in procs:
            if p.is_alive():
                os.kill(p.pid, signal.SIGTERM)  # type: ignore[arg-type]

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for p in procs:
        p.join()
    return 0


def default_settings(**overrides: object) -> DaemonSettings:
    return replace(
        DaemonSettings.from_env(), **{k: v for k, v in overrides.items() if v is not None}
    )
