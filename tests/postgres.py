"""A PostgreSQL database of a test's own: created on the server at 127.0.0.1:5432 (database
`test` is only the door in) and dropped afterwards. Tests never touch tables they did not
create: two test runs, or CI beside a developer, share the server safely."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import sqlalchemy as sa

SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432"
ADMIN = f"{SERVER}/test"


def postgres_available() -> bool:
    try:
        with sa.create_engine(ADMIN).connect():
            return True
    except Exception:  # noqa: BLE001
        return False


@contextlib.contextmanager
def own_database() -> Iterator[str]:
    """The URL of a new, empty database, dropped (connections and all) on exit."""
    name = f"tunefuse_test_{uuid.uuid4().hex[:16]}"
    admin = sa.create_engine(ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield f"{SERVER}/{name}"
    finally:
        with admin.connect() as c:
            c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()
