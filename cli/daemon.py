"""`tunefuse daemon`: the background tuning daemon, in the foreground (systemd, Docker)."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import fail


def daemon(
    cache: Annotated[
        str | None,
        typer.Option("--cache", help="Cache URL (default: TUNEFUSE_CACHE_URL or the SQLite file)."),
    ] = None,
    devices: Annotated[
        str | None, typer.Option("--devices", help="GPUs to use, e.g. 0,1 (default: all).")
    ] = None,
    trials: Annotated[int | None, typer.Option("--trials", help="Trials per job.")] = None,
    job_timeout: Annotated[
        float | None, typer.Option("--job-timeout", help="Seconds per job.")
    ] = None,
    max_jobs: Annotated[
        int | None, typer.Option("--max-jobs", help="Stop after this many jobs per GPU.")
    ] = None,
    idle_exit: Annotated[
        float | None, typer.Option("--idle-exit", help="Exit after this many idle seconds.")
    ] = None,
    lease: Annotated[
        float | None, typer.Option("--lease", help="Lease seconds (renewed by heartbeat).")
    ] = None,
    heartbeat: Annotated[
        float | None, typer.Option("--heartbeat", help="Heartbeat seconds.")
    ] = None,
    max_attempts: Annotated[
        int | None, typer.Option("--max-attempts", help="Attempts before a job is failed.")
    ] = None,
    backoff: Annotated[
        float | None, typer.Option("--backoff", help="First retry delay, seconds (doubles).")
    ] = None,
    runner: Annotated[
        str | None, typer.Option("--runner", help="module:function that runs one job.")
    ] = None,
) -> None:
    """Claim tuning jobs from the cache's queue and tune them, one worker per GPU."""
    from tunefuse.daemon import default_settings, run_daemon

    device_list = None
    if devices:
        try:
            device_list = tuple(int(d) for d in devices.split(","))
        except ValueError:
            raise typer.BadParameter(
                f"--devices must be numbers separated by commas, got {devices!r}"
            ) from None
    if runner is None:
        # The real runner tunes on GPUs: none usable is an error, not an idle or empty daemon
        # that a container would report as a success.
        from tunefuse.runtime.device import device_count

        count = device_count()
        if count == 0:
            fail("no usable CUDA GPU here (no driver, or no device): the daemon tunes on GPUs", 1)
        if device_list is None:
            device_list = tuple(range(count))
        missing = [d for d in device_list if not 0 <= d < count]
        if missing:
            fail(
                f"--devices {devices}: there is no GPU {missing[0]} here (the driver sees {count}: "
                f"0..{count - 1})",
                2,
            )
    settings = default_settings(
        cache_url=cache,
        devices=device_list,
        trials=trials,
        job_timeout_s=job_timeout,
        max_jobs=max_jobs,
        idle_exit_s=idle_exit,
        lease_s=lease,
        heartbeat_s=heartbeat,
        max_attempts=max_attempts,
        backoff_s=backoff,
        runner=runner,
    )
    raise typer.Exit(run_daemon(settings))
