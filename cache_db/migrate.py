"""Alembic, driven from code: the cache migrates itself when opened."""

from __future__ import annotations

import pathlib

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection, Engine

MIGRATIONS = pathlib.Path(__file__).resolve().parent / "migrations"
HEAD = "0004"  # the newest revision in migrations/versions (a test keeps this true)


def alembic_config(url: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if url:
        cfg.set_main_option("sqlalchemy.url", url)
    return cfg


MIGRATION_LOCK = 0x7475_6E65_6675_7365 % 2**62  # PostgreSQL advisory lock id ("tunefuse")


def upgrade(engine: Engine) -> None:
    """Bring the database to the newest revision. A database already there costs one
    query, not an Alembic start-up: opening the cache is on the first call's path.

    Several processes may open a new cache at once: the migration runs under a real lock
    (SQLite: BEGIN IMMEDIATE, which waits for the write lock; PostgreSQL: a transaction
    advisory lock), and the revision is read again under it, so the one that lost the race
    finds the schema migrated and does nothing."""
    if _revision(engine) == HEAD:
        return
    with engine.connect().execution_options(tunefuse_write=True) as connection, connection.begin():
        if connection.dialect.name == "postgresql":
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
        if _revision_in(connection) != HEAD:
            upgrade_connection(connection)


def _revision(engine: Engine) -> str | None:
    from sqlalchemy.exc import DBAPIError

    try:
        with engine.connect() as connection:
            return _revision_in(connection)
    except DBAPIError:
        return None


def _revision_in(connection: Connection) -> str | None:
    """The stored revision, read without an error for a new database (a failed statement
    would abort a PostgreSQL transaction)."""
    from sqlalchemy import inspect, text

    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


def upgrade_connection(connection: Connection) -> None:
    cfg = alembic_config()
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, "head")


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()  # type: ignore[return-value]
