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


def upgrade(engine: Engine) -> None:
    """Bring the database to the newest revision. A database already there costs one
    query, not an Alembic start-up: opening the cache is on the first call's path."""
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    try:
        with engine.connect() as connection:
            if connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == HEAD:
                return
    except DBAPIError:
        pass  # no alembic_version table yet: a new database
    with engine.begin() as connection:
        upgrade_connection(connection)


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
