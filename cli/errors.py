"""The CLI's error boundary: whatever goes wrong in a command ends in one line on stderr that
names the problem and exit 1 (a refused or failed action; usage errors exit 2 where they are
found), never a traceback; `tunefuse --verbose ...` shows the traceback too."""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from typing import Any

import typer

VERBOSE = False


def describe(e: BaseException) -> str:
    """One line for an exception a command did not expect."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    name = type(e).__name__
    if name == "OperationalError" and "locked" in str(e):
        return ("the cache database is locked by another process (waited for its busy timeout, 30 s); "
                "try again when that process is done")
    if name in ("OperationalError", "DataError", "IntegrityError", "ProgrammingError"):
        return f"the cache database refused: {text[:300]}"
    from tunefuse.errors import TunefuseError

    if isinstance(e, TunefuseError):
        return text[:500]
    return f"{name}: {text[:300]}"


def boundary(command: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(command)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # noqa: BLE001 - the boundary: one line, never a traceback
            if hasattr(e, "exit_code") and hasattr(e, "show"):
                raise  # a usage error of the command line: Typer reports it (exit 2)
            from cli.common import console_err

            if VERBOSE:
                console_err.print(traceback.format_exc(), highlight=False, markup=False)
            console_err.print(f"[red]error:[/red] {describe(e)}"
                              + ("" if VERBOSE else " (tunefuse --verbose ... shows the traceback)"),
                              highlight=False)
            raise typer.Exit(1) from None

    guarded._guarded = True  # type: ignore[attr-defined]
    return guarded
