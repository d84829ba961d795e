"""What every command shares: the --cache option, opening the store, JSON or Rich output."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from cli.errors import console_err, describe, report

CacheOption = Annotated[
    str | None,
    typer.Option("--cache", help="Cache URL (default: TUNEFUSE_CACHE_URL or the SQLite file)."),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print one JSON document for scripts (errors too).")
]

console = Console(soft_wrap=True)


def open_store(url: str | None):  # noqa: ANN201 - cache_db.CacheStore
    """The cache for a command: read-only where this process cannot write it (the commands
    that write then say so by name), and a write that waits on another process's lock says
    what it waits for."""
    from cache_db.store import CacheError, CacheStore

    try:
        return CacheStore.open(
            url, on_lock_wait=lambda what: console_err.print(what, highlight=False)
        )
    except CacheError as e:
        fail(str(e), 2)
    except Exception as e:  # noqa: BLE001
        fail(f"cannot open the cache: {describe(e)}", 2)


def emit(data: Any, as_json: bool, table: Table | None = None, text: str | None = None) -> None:
    if as_json:
        print(json.dumps(data, default=str, indent=None))
    elif table is not None:
        console.print(table)
    elif text is not None:
        console.print(text, highlight=False)


def fail(message: str, code: int = 1) -> None:
    """End the command: one line naming the problem (JSON under --json), exit `code` (1: refused
    or failed, 2: bad usage)."""
    report(message, code)
    raise typer.Exit(code)
