"""`tunefuse doctor`: is this set-up able to run, compile, cache and tune?"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console


def doctor(
    cache: Annotated[
        str | None, typer.Option("--cache", help="Cache URL (default as the library).")
    ] = None,
    quick: Annotated[
        bool, typer.Option("--quick", help="Only what a health check needs: cache and driver.")
    ] = False,
    silent_after: Annotated[
        float,
        typer.Option(
            help="A running daemon worker not heard from for this many seconds is reported dead."
        ),
    ] = 120.0,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document: ok, and every check.")
    ] = False,
) -> None:
    """Check the GPU, driver, NVRTC, cuda-python, the cache and the daemon's workers; each
    line ok or what to do. Exit 1 if any line failed."""
    console = Console(soft_wrap=True)
    failures = 0
    checks: list[dict] = []

    def line(ok: bool | None, what: str, detail: str) -> None:
        """ok, FAIL, or (None) a note that needs no action."""
        nonlocal failures
        failures += ok is False
        checks.append(
            {
                "check": what,
                "status": {True: "ok", False: "fail", None: "note"}[ok],
                "detail": detail,
            }
        )
        if not as_json:
            mark = {
                True: "[green]ok[/green]  ",
                False: "[red]FAIL[/red]",
                None: "[blue]note[/blue]",
            }[ok]
            console.print(f"{mark} {what}: {detail}", highlight=False)

    try:
        from cuda.bindings import driver

        err, version = driver.cuDriverGetVersion()
        line(
            int(err) == 0 and version >= 12000,
            "driver",
            f"CUDA {version // 1000}.{version % 1000 // 10}"
            if int(err) == 0
            else f"{err}: install an NVIDIA driver for CUDA 12 or newer",
        )
    except Exception as e:  # noqa: BLE001
        line(False, "driver", f"{e}: install an NVIDIA driver for CUDA 12 or newer")
    if not quick:
        arch = None
        try:
            from tunefuse.runtime.device import runtime

            rt = runtime(0)
            arch = rt.info.arch
            line(True, "GPU", f"{rt.info.name} ({rt.info.arch}, {rt.info.sm_count} SMs)")
        except Exception as e:  # noqa: BLE001
            line(False, "GPU", str(e))
        try:
            from tunefuse.compiler import compile_kernel, nvrtc_version

            # For this machine's GPU (an NVRTC too old for it fails here), else for sm_90.
            compile_kernel('extern "C" __global__ void k() {}', "k", arch or "sm_90")
            line(True, "NVRTC", f"{nvrtc_version()}, compiles for {arch or 'sm_90 (no GPU here)'}")
        except Exception as e:  # noqa: BLE001
            line(False, "NVRTC", f"{e}: pip install nvidia-cuda-nvrtc")
        try:
            import cuda.core

            line(True, "cuda-python", f"cuda.core {cuda.core.__version__}")
        except Exception as e:  # noqa: BLE001
            line(False, "cuda-python", f"{e}: pip install cuda-python cuda-core")
    try:
        from cache_db import migrate
        from cache_db.store import CacheStore

        store = CacheStore.open(cache)
        revision = migrate.current_revision(store.engine)
        stats = store.stats()
        line(
            revision == migrate.HEAD,
            "cache",
            f"{store.url.split('@')[-1]} at revision {revision}, "
            f"{stats.records} records, jobs {stats.jobs or 'none'}"
            + (
                " (read-only here: lookups are served, nothing is written)"
                if store.read_only
                else ""
            ),
        )
    except Exception as e:  # noqa: BLE001
        line(False, "cache", f"{e}: check TUNEFUSE_CACHE_URL or --cache")
    else:
        daemon_lines(store, stats.jobs.get("queued", 0), silent_after, line)
    if as_json:
        print(json.dumps({"ok": not failures, "checks": checks}))
    raise typer.Exit(1 if failures else 0)


def daemon_lines(store, queued: int, silent_after: float, line) -> None:  # noqa: ANN001
    """One line per daemon worker that reported to this cache: alive (seen within
    `silent_after` seconds), stopped cleanly, or silent while it should be running."""
    import datetime as dt
    import socket

    from cache_db.queue import WORKER_TTL, workers

    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    here = socket.gethostname()
    found = workers(store)
    alive = 0
    for w in found:
        silent = w.silent_for(now).total_seconds()
        where = f"{w.owner} (GPU {w.device}), {w.jobs_done} jobs done"
        if w.state == "stopped":
            line(None, "daemon worker", f"{where}: stopped {silent:.0f} s ago")
        elif silent <= silent_after:
            alive += 1
            doing = f"tuning job {w.job_id}" if w.state == "busy" else "idle"
            line(True, "daemon worker", f"{where}: {doing}, last heard {silent:.0f} s ago")
        elif silent > WORKER_TTL.total_seconds():
            # Gone for a day or more: a host rebuilt, a container removed. Not this check's
            # failure; the next daemon to start forgets it.
            line(
                None,
                "daemon worker",
                f"{where}: not heard from for {silent / 3600:.0f} h, forgotten "
                "when a daemon next starts",
            )
        elif w.host != here:
            # A health check judges its own host: another host's silent worker is that host's.
            line(
                None,
                "daemon worker",
                f"{where}: {w.state} but silent for {silent:.0f} s (on {w.host}, "
                "not this host: its own health check reports it)",
            )
        else:
            line(
                False,
                "daemon worker",
                f"{where}: {w.state} but silent for {silent:.0f} s: it died or "
                f"lost the cache; restart `tunefuse daemon` on {w.host}",
            )
    if not alive:
        line(
            None,
            "daemon",
            f"no worker running; {queued} queued tuning jobs wait for `tunefuse daemon`"
            if queued
            else "no worker running (none needed: no queued jobs)",
        )
