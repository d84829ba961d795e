"""What every command shares: the --cache option, opening the store, JSON or Rich output."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

CacheOption = Annotated[str | None, typer.Option("--cache", help="Cache URL (default: TUNEFUSE_CACHE_URL or the SQLite file).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]

console = Console(soft_wrap=True)
console_err = Console(stderr=True, soft_wrap=True)


def open_store(url: str | None):  # noqa: ANN201 - cache_db.CacheStore
    from cache_db.store import CacheError, CacheStore

    try:
        return CacheStore.open(url)
    except CacheError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    except Exception as e:  # noqa: BLE001
        console.print(f"[red]error:[/red] cannot open the cache: {e}")
        raise typer.Exit(2) from None


def emit(data: Any, as_json: bool, table: Table | None = None, text: str | None = None) -> None:
    if as_json:
        print(json.dumps(data, default=str, indent=None))
    elif table is not None:
        console.print(table)
    elif text is not None:
        console.print(text, highlight=False)


def fail(message: str, code: int = 1) -> None:
    console.print(f"[red]error:[/red] {message}")
    raise typer.Exit(code)
