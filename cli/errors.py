"""The CLI's error boundary: whatever goes wrong in a command ends in one line that names the
problem and exit 1 (a refused or failed action) or 2 (bad usage), never a traceback;
`tunefuse --verbose ...` shows the traceback too. Under `--json` the error is the one JSON
document on stdout, `{"error": ..., "exit_code": ...}`, so a script reads every outcome the
same way."""

from __future__ import annotations

import functools
import json
import traceback
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console

console_err = Console(stderr=True, soft_wrap=True)  # errors and notices; cli.common re-exports it
VERBOSE = False
JSON_OUTPUT = False  # the running command was given --json


def describe(e: BaseException) -> str:
    """One line for an exception a command did not expect."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    name = type(e).__name__
    if name == "OperationalError" and "locked" in str(e):
        return (
            "the cache database is locked by another process (waited for its busy timeout, 30 s); "
            "try again when that process is done"
        )
    if name == "OperationalError" and "readonly" in str(e):
        return "the cache database is read-only here: this command needs to write to it"
    if name in ("OperationalError", "DataError", "IntegrityError", "ProgrammingError"):
        return f"the cache database refused: {text[:300]}"
    from cache_db.store import CacheError
    from tunefuse.errors import TunefuseError

    if isinstance(e, (TunefuseError, CacheError)):
        return text[:500]
    return f"{name}: {text[:300]}"


def report(message: str, code: int, hint: str = "") -> None:
    """Print an error: JSON on stdout under --json, else a red line on stderr."""
    if JSON_OUTPUT:
        print(json.dumps({"error": message, "exit_code": code}))
        return
    console_err.print(f"[red]error:[/red] {message}{hint}", highlight=False)


def boundary(command: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(command)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        global JSON_OUTPUT
        JSON_OUTPUT = bool(kwargs.get("as_json"))
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # noqa: BLE001 - the boundary: one line, never a traceback
            if hasattr(e, "exit_code") and hasattr(e, "show"):
                raise  # a usage error of the command line: Typer reports it (exit 2)
            if VERBOSE:
                console_err.print(traceback.format_exc(), highlight=False, markup=False)
            report(
                describe(e), 1, "" if VERBOSE else " (tunefuse --verbose ... shows the traceback)"
            )
            raise typer.Exit(1) from None

    guarded._guarded = True  # type: ignore[attr-defined]
    return guarded


def run_json(app: typer.Typer, args: list[str]) -> int:
    """Run the app for a command line that asked for --json: a usage error Typer finds while
    parsing (an unknown option, a bad number) is a JSON document too. Returns the exit code."""
    try:
        result = app(args=args, standalone_mode=False)
    except typer.Abort:
        print(json.dumps({"error": "aborted", "exit_code": 1}))
        return 1
    except Exception as e:
        if not (hasattr(e, "format_message") and hasattr(e, "exit_code")):
            raise  # not a usage error (Click's, vendored or not): the commands' boundary saw it
        print(json.dumps({"error": e.format_message(), "exit_code": e.exit_code}))
        return e.exit_code
    return result if isinstance(result, int) else 0
