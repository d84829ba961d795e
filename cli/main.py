"""The `tunefuse` application: command groups are joined here."""

from __future__ import annotations

import typer

from cli import cache, jobs
from cli.daemon import daemon
from cli.doctor import doctor
from cli.explain import explain
from cli.tune import enqueue, tune

app = typer.Typer(help="tunefuse: fusions compiled to CUDA, tuned, cached.", no_args_is_help=True)
app.command("explain")(explain)
app.command("daemon")(daemon)
app.command("doctor")(doctor)
app.add_typer(cache.app, name="cache")
jobs.app.command("enqueue")(enqueue)
app.add_typer(jobs.app, name="jobs")
app.command("tune")(tune)


@app.callback()
def _root() -> None:
    """tunefuse: fusions compiled to CUDA with NVRTC, tuned with Optuna, cached in SQL."""


def main() -> None:
    app()
