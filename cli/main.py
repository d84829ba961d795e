"""The `tunefuse` application: command groups are joined here."""

from __future__ import annotations

from typing import Annotated

import typer

from cli import cache, errors, jobs
from cli.daemon import daemon
from cli.doctor import doctor
from cli.explain import explain
from cli.tune import enqueue, tune

app = typer.Typer(
    help="tunefuse: fusions compiled to CUDA, tuned, cached.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.command("explain")(explain)
app.command("daemon")(daemon)
app.command("doctor")(doctor)
app.add_typer(cache.app, name="cache")
jobs.app.command("enqueue")(enqueue)
app.add_typer(jobs.app, name="jobs")
app.command("tune")(tune)


@app.callback()
def _root(
    verbose: Annotated[
        bool, typer.Option("--verbose", help="On an error, show its traceback too.")
    ] = False,
) -> None:
    """tunefuse: fusions compiled to CUDA with NVRTC, tuned with Optuna, cached in SQL."""
    errors.VERBOSE = verbose


def _guard_commands(typer_app: typer.Typer) -> None:
    """Every command of the tree behind the error boundary (cli/errors.py)."""
    for info in typer_app.registered_commands:
        if info.callback is not None and not getattr(info.callback, "_guarded", False):
            info.callback = errors.boundary(info.callback)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _guard_commands(group.typer_instance)


_guard_commands(app)


def main() -> None:
    import sys

    args = sys.argv[1:]
    if "--json" in args:
        sys.exit(errors.run_json(app, args))
    app()
