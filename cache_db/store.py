"""The cache's API: records, binaries, jobs. Every write is one transaction.

store = CacheStore.open()                       # TUNEFUSE_CACHE_URL or the SQLite default
rec = store.lookup(kernel_key, shape_key, env)  # exact, same env only
near = store.nearest(kernel_key, shape_key, env)
cubin = store.get_binary(code_key)              # verified; a mismatch is quarantined
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import math
import os
import pathlib
import re
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

import sqlalchemy as sa
from sqlalchemy import event, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cache_db import migrate
from cache_db.env import Env  # noqa: F401 - defined there; imported from here by many
from cache_db.models import BinaryRow, FusionRow, JobRow, LaunchPlanRow, RecordRow, utcnow
from tunefuse import keys

ENV_VAR = "TUNEFUSE_CACHE_URL"
EXPORT_FORMAT = "tunefuse.cache.v1"


class CacheError(Exception):
    """The cache could not do what was asked (bad URL, bad import file, ...)."""


def default_cache_url() -> str:
    """TUNEFUSE_CACHE_URL, else a SQLite file in the user cache dir."""
    url = os.environ.get(ENV_VAR)
    if url:
        return url
    import platformdirs

    path = pathlib.Path(platformdirs.user_cache_dir("tunefuse")) / "cache.sqlite"
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


@dataclass(frozen=True)
class TunedRecord:
    kernel_key: str
    shape_key: str
    env: Env
    scheduler: str
    params: dict
    code_key: str
    kernel_name: str = ""
    median_us: float | None = None
    spread_us: float | None = None
    default_us: float | None = None
    trials: int = 0
    fusion_id: str | None = None
    hits: int = 0
    tuned_at: dt.datetime | None = None
    last_used_at: dt.datetime | None = None
    id: int | None = None
    history: tuple[tuple[int, float | None, str], ...] = ()  # (trial, µs or None, state)


@dataclass
class Stats:
    records: int = 0
    binaries: int = 0
    binary_bytes: int = 0
    hits: int = 0
    jobs: dict = field(default_factory=dict)
    stale_records: int = 0
    quarantined: int = 0
    launch_plans: int = 0


def _write_ahead_log(cursor) -> None:  # noqa: ANN001
    """Put the file in WAL mode (it stays so: a property of the file). Switching a new file
    needs it alone for a moment: while another process is opening it too, SQLite answers
    "database is locked" at once, or keeps the old mode, without waiting on its busy handler.
    Tried again with backoff, up to the busy timeout: a file left in rollback mode would make
    readers and writers block each other."""
    import sqlite3
    import time

    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.001
    while True:
        try:
            if str(cursor.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower() in (
                "wal",
                "memory",
            ):
                return
            problem = "the file kept its rollback journal"
        except sqlite3.OperationalError as e:
            if "locked" not in str(e):
                raise
            problem = str(e)
        if time.monotonic() > deadline:
            raise sqlite3.OperationalError(f"could not put the cache in WAL mode: {problem}")
        time.sleep(delay)
        delay = min(2 * delay, 0.05)


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # noqa: ANN001
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    _write_ahead_log(cursor)
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


BUSY_TIMEOUT_MS = 30_000  # how long a SQLite writer waits for another's write lock
LOCK_NOTICE_MS = 1_000  # a writer that waited this long says so (when asked to: the CLI)


def _parse_url(url: str) -> sa.engine.URL:
    """The URL; a plain SQLite file URL (the default cache's) skips SQLAlchemy's URL parser,
    whose regular expression costs a new process ~2 ms to compile."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and len(url) > len(prefix) and not any(c in url for c in "?#%@"):
        return sa.engine.URL.create("sqlite", database=url[len(prefix) :])
    return sa.engine.make_url(url)


def sqlite_file(url: str) -> pathlib.Path | None:
    """The file of a SQLite URL (None for another backend, memory, or a URL that does not parse)."""
    try:
        u = _parse_url(url)
    except Exception:  # noqa: BLE001
        return None
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return pathlib.Path(u.database)


def cannot_write(path: pathlib.Path) -> bool:
    """A SQLite file this process may read but not write (the file, or the folder its
    journal files go in, is read-only)."""
    if not path.exists():
        return False
    folder = path.parent
    return not os.access(path, os.W_OK) or not os.access(folder, os.W_OK | os.X_OK)


def _read_only_sqlite(path: pathlib.Path) -> Engine:
    """A read-only SQLite file: opened `mode=ro`, so nothing can be written through it; where
    the folder is read-only too and the WAL index cannot be made, `immutable=1` (no locks:
    nobody can be writing a file that nobody may write)."""
    import sqlite3
    import urllib.parse

    quoted = urllib.parse.quote(str(path.resolve()))
    shm = path.with_name(path.name + "-shm")
    immutable = not os.access(path.parent, os.W_OK | os.X_OK) and not shm.exists()
    uri = f"file:{quoted}?mode=ro" + ("&immutable=1" if immutable else "")

    def connect() -> sqlite3.Connection:
        connection = sqlite3.connect(
            uri,
            uri=True,
            timeout=BUSY_TIMEOUT_MS / 1000,
            check_same_thread=False,
            isolation_level=None,
        )
        connection.execute("PRAGMA query_only=ON")
        return connection

    return sa.create_engine("sqlite://", creator=connect)


def make_engine(
    url: str, *, read_only: bool = False, on_lock_wait: Callable[[str], None] | None = None
) -> Engine:
    """An engine for `url`. `read_only`: a SQLite file is opened so that nothing can be
    written. `on_lock_wait(what)`: called once when a SQLite write has waited a second for
    another process's write lock and goes on waiting (the CLI says so instead of hanging
    silently)."""
    try:
        u = _parse_url(url)
    except Exception as e:  # noqa: BLE001
        raise CacheError(f"not a database URL: {url!r} ({e})") from None
    if u.get_backend_name() == "sqlite":
        if read_only and u.database and u.database != ":memory:":
            return _read_only_sqlite(pathlib.Path(u.database))
        if u.database and u.database != ":memory:":
            pathlib.Path(u.database).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(
            u, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False}
        )
        event.listen(engine, "connect", _sqlite_pragmas)

        # Writers BEGIN IMMEDIATE: they take the write lock up front (waiting up to the
        # busy timeout), never halfway through a transaction; readers never block in WAL.
        @event.listens_for(engine, "begin")
        def _begin(conn) -> None:  # noqa: ANN001
            if not conn.get_execution_options().get("tunefuse_write"):
                conn.exec_driver_sql("BEGIN")
            elif on_lock_wait is None:
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            else:
                _begin_immediate_telling(
                    conn.connection.driver_connection, on_lock_wait, u.database or url
                )

        @event.listens_for(engine, "connect")
        def _no_autobegin(dbapi_connection, _record) -> None:  # noqa: ANN001
            dbapi_connection.isolation_level = None

        return engine
    if u.get_backend_name() == "postgresql" and u.drivername == "postgresql":
        url = str(u.set(drivername="postgresql+psycopg"))
    return sa.create_engine(url, pool_pre_ping=True)


def _begin_immediate_telling(raw, on_lock_wait: Callable[[str], None], what: str) -> None:  # noqa: ANN001
    """BEGIN IMMEDIATE, waiting as long as ever for the write lock, but saying so once the
    first second has passed."""
    import sqlite3

    raw.execute(f"PRAGMA busy_timeout={LOCK_NOTICE_MS}")
    try:
        raw.execute("BEGIN IMMEDIATE")
        return
    except sqlite3.OperationalError as e:
        if "locked" not in str(e):
            raise
        on_lock_wait(
            f"waiting for the write lock on {what}: another process holds it "
            f"(giving up after {BUSY_TIMEOUT_MS // 1000} s)"
        )
        raw.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS - LOCK_NOTICE_MS}")
        raw.execute("BEGIN IMMEDIATE")
    finally:
        raw.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")


def _record_from_row(row: RecordRow) -> TunedRecord:
    env = Env(
        row.compute_capability,
        row.device_name,
        row.nvrtc_version,
        row.driver_version,
        row.codegen_version,
    )
    return TunedRecord(
        row.kernel_key,
        row.shape_key,
        env,
        row.scheduler,
        json.loads(row.params_json),
        row.code_key,
        "",
        row.median_us,
        row.spread_us,
        row.default_us,
        row.trials,
        row.fusion_id,
        row.hits,
        row.tuned_at,
        row.last_used_at,
        row.id,
        _history_from_json(row.history_json),
    )


def _json_or_none(text: str) -> object | None:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def _readable_records(rows: Iterable[RecordRow]) -> list[TunedRecord]:
    """The rows that read back as records; a malformed one (params not JSON, a history that
    does not parse) is skipped, never fatal to the others (`cache verify` reports it)."""
    records = []
    for row in rows:
        try:
            records.append(_record_from_row(row))
        except (ValueError, TypeError):
            continue
    return records


def _history_from_json(text: str | None) -> tuple[tuple[int, float | None, str], ...]:
    if not text:
        return ()
    return tuple(
        (int(n), None if us is None else float(us), str(state)) for n, us, state in json.loads(text)
    )


def _history_to_json(history: Iterable[tuple[int, float | None, str]]) -> str | None:
    rows = [[int(n), None if us is None else float(us), str(state)] for n, us, state in history]
    return json.dumps(rows) if rows else None


def _shape_distance(a: str, b: str) -> float:
    """How far two shape keys are: log-ratio distance of their extents (rank must match); a
    key that is not extents joined by "x" (a malformed row) is infinitely far."""
    xa, xb = a.split("x"), b.split("x")
    if len(xa) != len(xb) or not all(p.isdigit() for p in xa + xb):
        return math.inf
    return sum(abs(math.log(max(int(p), 1)) - math.log(max(int(q), 1))) for p, q in zip(xa, xb))


def nearest_record(records: Iterable[TunedRecord], shape_key: str) -> TunedRecord | None:
    """Of records of one kernel, the one whose shape is closest (same rank), or None."""
    best = min(records, key=lambda r: _shape_distance(r.shape_key, shape_key), default=None)
    if best is None or math.isinf(_shape_distance(best.shape_key, shape_key)):
        return None
    return best


def _plan_read(sql: str) -> sa.TextClause:
    return sa.text(sql).bindparams(sa.bindparam("keys", expanding=True))


# The reads on every new plan's path, as plain SQL: a fresh process pays no SQL compilation
# for them (~2 ms each the first time as Core expressions), and no expression building after.
_PLAN_RECORDS = _plan_read(
    f"SELECT {', '.join(c.name for c in RecordRow.__table__.columns)} FROM {RecordRow.__tablename__} "
    "WHERE kernel_key IN :keys AND env_key = :env_key AND quarantined = false"
)
_PLAN_JOBS = _plan_read(
    f"SELECT kernel_key, shape_key FROM {JobRow.__tablename__} "
    "WHERE kernel_key IN :keys AND env_key = :env_key"
)
_LAUNCH_PLAN = sa.text(
    f"SELECT plan_json FROM {LaunchPlanRow.__tablename__} WHERE plan_key = :plan_key"
)
_PLAN_BINARIES = _plan_read(
    f"SELECT code_key, cubin, sha256, kernel_name FROM {BinaryRow.__tablename__} "
    "WHERE code_key IN :keys AND quarantined = false AND arch = :arch "
    "AND nvrtc_version = :nvrtc"
)


def _flush_at_exit(ref: weakref.ref) -> None:
    store = ref()
    if store is None:
        return
    try:
        store.flush_counts()
    except Exception as e:  # noqa: BLE001 - counts are hints; exit must not fail over them
        import warnings

        warnings.warn(
            f"tunefuse cache {store.url}: counts not written at exit: {e}",
            RuntimeWarning,
            stacklevel=1,
        )


_HEX64 = re.compile(r"[0-9a-f]{64}")  # code keys, as a launch plan's JSON names them


@dataclass(frozen=True)
class PrunePlan:
    """What a prune deletes: `result` is what it reports (records, binaries, launch plans)."""

    result: dict
    last_used: dict[int, dt.datetime]  # record id -> last use as planned
    binaries: list[str]
    launch_plans: list[str]


class CacheStore:
    """One cache database. Thread-safe; share one per process."""

    def __init__(self, engine: Engine, url: str, *, read_only: bool = False) -> None:
        self.engine = engine
        self.write_engine = engine.execution_options(tunefuse_write=True)
        self.url = url
        # A read-only cache serves lookups; what a call leaves behind (hits, tuning jobs,
        # launch plans, fresh binaries) is not written, and any other write is refused.
        self.read_only = read_only
        # Hits on records and repeats of queued jobs, counted in memory and written with the
        # next write or at exit: a plan whose kernels are all known then costs no write.
        self._later: Counter[tuple[str, str, str, str]] = (
            Counter()
        )  # (table, kernel, shape, env_key)
        self._later_lock = threading.Lock()
        self._exit_hook = False

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        migrate_schema: bool = True,
        read_only: bool | None = None,
        on_lock_wait: Callable[[str], None] | None = None,
    ) -> CacheStore:
        """Open (create, migrate) the cache at `url`. `read_only`: True opens it for reading
        only (a command that only reads); None (the default) does so where the SQLite file
        cannot be written by this process, False never. A read-only cache is not migrated:
        one older than this tunefuse is refused by name."""
        url = url or default_cache_url()
        path = sqlite_file(url)
        if read_only is None:
            read_only = path is not None and cannot_write(path)
        if read_only and path is not None and not path.exists():
            raise CacheError(f"no cache at {path} (opened read-only, so it is not created)")
        engine = make_engine(url, read_only=read_only, on_lock_wait=on_lock_wait)
        if read_only:
            revision = migrate.current_revision(engine)
            if revision != migrate.HEAD:
                raise CacheError(
                    f"the cache {url} is read-only here and at schema revision {revision}, "
                    f"not {migrate.HEAD}: open it once where it can be written to migrate it"
                )
        elif migrate_schema:
            migrate.upgrade(engine)
        return cls(engine, url, read_only=read_only)

    def close(self) -> None:
        self.flush_counts()
        self.engine.dispose()

    def session(self) -> Session:
        """For reading."""
        return Session(self.engine, expire_on_commit=False)

    def writer(self) -> Session:
        """For one unit of writing: `with store.writer() as s, s.begin(): ...`."""
        self._check_writable()
        return Session(self.write_engine, expire_on_commit=False)

    def _check_writable(self) -> None:
        if self.read_only:
            raise CacheError(f"the cache {self.url} is open read-only: it cannot be changed")

    def _insert_ignore(self, s: Session | sa.Connection, model: type, values: dict) -> None:
        """INSERT that leaves an existing row alone: several writers may store the same
        binary or fusion at once (on PostgreSQL they do not wait for one another)."""
        s.execute(self._insert(model).values(**values).on_conflict_do_nothing())

    def _insert(self, model: type):  # noqa: ANN202 - the dialect's INSERT, with ON CONFLICT
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        return insert(model)

    # -- fusions ---------------------------------------------------------------------
    def put_fusion(self, fusion_id: str, canonical_json: str, name: str | None = None) -> None:
        with self.writer() as s, s.begin():
            self._insert_ignore(
                s,
                FusionRow,
                dict(
                    fusion_id=fusion_id,
                    canonical_json=canonical_json,
                    name=name,
                    created_at=utcnow(),
                ),
            )

    def get_fusion_json(self, fusion_id: str) -> str | None:
        with self.session() as s:
            row = s.get(FusionRow, fusion_id)
            return None if row is None else row.canonical_json

    # -- binaries --------------------------------------------------------------------
    def put_binary(
        self,
        code_key: str,
        cubin: bytes,
        kernel_name: str,
        arch: str,
        nvrtc_version: str,
        source: str | None = None,
    ) -> None:
        with self.writer() as s, s.begin():
            self._put_binary(s, code_key, cubin, kernel_name, arch, nvrtc_version, source)

    def _put_binary(
        self,
        s: Session | sa.Connection,
        code_key: str,
        cubin: bytes,
        kernel_name: str,
        arch: str,
        nvrtc_version: str,
        source: str | None = None,
    ) -> None:
        """In the caller's transaction (an ORM session or a Core connection)."""
        digest = keys.binary_digest(cubin)
        now = utcnow()
        self._insert_ignore(
            s,
            BinaryRow,
            dict(
                code_key=code_key,
                sha256=digest,
                cubin=cubin,
                size=len(cubin),
                kernel_name=kernel_name,
                arch=arch,
                nvrtc_version=nvrtc_version,
                quarantined=False,
                created_at=now,
                last_used_at=now,
                source=source,
            ),
        )
        table = BinaryRow.__table__
        row = s.execute(
            select(table.c.quarantined, table.c.sha256, table.c.cubin, table.c.source).where(
                table.c.code_key == code_key
            )
        ).one_or_none()
        if row is None:
            return
        changes: dict = {}
        if row.quarantined or row.sha256 != keys.binary_digest(row.cubin):
            # A quarantined or corrupt copy is replaced by the good one.
            changes.update(cubin=cubin, sha256=digest, size=len(cubin), quarantined=False)
        if row.source is None and source is not None:
            changes["source"] = source
        if changes:
            s.execute(update(table).where(table.c.code_key == code_key).values(**changes))

    def get_source(self, code_key: str) -> str | None:
        """The CUDA C++ a binary was compiled from, where it was kept."""
        with self.session() as s:
            return s.execute(
                select(BinaryRow.source).where(BinaryRow.code_key == code_key)
            ).scalar_one_or_none()

    def get_binary(self, code_key: str) -> tuple[bytes, str] | None:
        """(cubin, kernel name), verified against its sha256; a mismatch quarantines it."""
        with self.session() as s:
            row = s.get(BinaryRow, code_key)
            if row is None or row.quarantined:
                return None
            cubin, digest, name = bytes(row.cubin), row.sha256, row.kernel_name
        if keys.binary_digest(cubin) != digest:
            self.quarantine_binary(code_key)
            return None
        return cubin, name

    def quarantine_binary(self, code_key: str) -> None:
        """Mark a binary (and its records) never to be served again; a read-only cache cannot
        mark it, and its readers skip the bad bytes each time instead."""
        if self.read_only:
            return
        with self.writer() as s, s.begin():
            s.execute(
                update(BinaryRow).where(BinaryRow.code_key == code_key).values(quarantined=True)
            )
            s.execute(
                update(RecordRow).where(RecordRow.code_key == code_key).values(quarantined=True)
            )

    def binary_states(self) -> dict[str, tuple[int, bool]]:
        """code_key -> (size in bytes, quarantined), read without the binaries' bodies."""
        with self.session() as s:
            return {
                k: (n, bool(q))
                for k, n, q in s.execute(
                    select(BinaryRow.code_key, BinaryRow.size, BinaryRow.quarantined)
                ).all()
            }

    def verify(self) -> list[str]:
        """Recompute the sha256 of every binary not yet quarantined; quarantine and return
        the mismatches (one already quarantined is not reported again)."""
        bad = []
        with self.session() as s:
            for code_key, cubin, digest in s.execute(
                select(BinaryRow.code_key, BinaryRow.cubin, BinaryRow.sha256).where(
                    BinaryRow.quarantined.is_(False)
                )
            ):
                if keys.binary_digest(cubin) != digest:
                    bad.append(code_key)
        for code_key in bad:
            self.quarantine_binary(code_key)
        return bad

    def malformed_records(self) -> list[dict]:
        """Records that a lookup skips: params or history that do not parse, params that do
        not fit their scheduler, a shape key that is not extents. Each with why."""
        from tunefuse.planning.kernel_ir import SchedulerKind
        from tunefuse.schedulers import params_from_dict

        bad = []
        with self.session() as s:
            for row in s.execute(select(RecordRow).order_by(RecordRow.id)).scalars():
                why = None
                try:
                    record = _record_from_row(row)
                except (ValueError, TypeError) as e:
                    why = f"does not read back: {e}"
                else:
                    kinds = {k.value: k for k in SchedulerKind}
                    if record.scheduler not in kinds:
                        why = f"unknown scheduler {record.scheduler!r}"
                    elif params_from_dict(kinds[record.scheduler], record.params) is None:
                        why = f"params do not fit the {record.scheduler} scheduler: {record.params}"
                    elif not all(p.isdigit() for p in record.shape_key.split("x")):
                        why = f"shape key {record.shape_key!r} is not extents"
                if why is not None:
                    bad.append({"id": row.id, "kernel_key": row.kernel_key, "why": why})
        return bad

    # -- records ---------------------------------------------------------------------
    def put_record(
        self,
        record: TunedRecord,
        cubin: bytes | None = None,
        arch: str = "",
        nvrtc_version: str = "",
        source: str | None = None,
    ) -> None:
        """Store a record (replacing the same kernel/shape/env) and its binary, atomically."""
        for attempt in range(3):
            try:
                with self.writer() as s, s.begin():
                    self._put_record(s, record, cubin, arch, nvrtc_version, source)
                return
            except IntegrityError:
                if attempt == 2:  # another writer stored the same key meanwhile: try again
                    raise

    def _put_record(
        self,
        s: Session,
        record: TunedRecord,
        cubin: bytes | None = None,
        arch: str = "",
        nvrtc_version: str = "",
        source: str | None = None,
    ) -> None:
        if cubin is not None:
            self._put_binary(
                s, record.code_key, cubin, record.kernel_name, arch, nvrtc_version, source
            )
            s.flush()
        if s.get(BinaryRow, record.code_key) is None:
            raise CacheError(
                f"record for {record.kernel_key[:12]} refers to a missing binary {record.code_key[:12]}"
            )
        row = s.execute(
            select(RecordRow).where(
                RecordRow.kernel_key == record.kernel_key,
                RecordRow.shape_key == record.shape_key,
                RecordRow.env_key == record.env.key,
            )
        ).scalar_one_or_none()
        values = dict(
            kernel_key=record.kernel_key,
            shape_key=record.shape_key,
            env_key=record.env.key,
            compute_capability=record.env.compute_capability,
            device_name=record.env.device_name,
            nvrtc_version=record.env.nvrtc_version,
            driver_version=record.env.driver_version,
            codegen_version=record.env.codegen_version,
            fusion_id=record.fusion_id,
            scheduler=record.scheduler,
            params_json=json.dumps(record.params, sort_keys=True),
            code_key=record.code_key,
            median_us=record.median_us,
            spread_us=record.spread_us,
            default_us=record.default_us,
            trials=record.trials,
            tuned_at=record.tuned_at or utcnow(),
            quarantined=False,
            history_json=_history_to_json(record.history),
        )
        if row is None:
            s.add(RecordRow(**values, hits=record.hits, last_used_at=utcnow()))
        else:
            for k, v in values.items():
                setattr(row, k, v)
        if record.fusion_id is not None and s.get(FusionRow, record.fusion_id) is None:
            raise CacheError(
                f"record refers to unknown fusion {record.fusion_id[:12]}; put_fusion first"
            )

    def lookup(self, kernel_key: str, shape_key: str, env: Env) -> TunedRecord | None:
        with self.session() as s:
            row = s.execute(
                select(RecordRow).where(
                    RecordRow.kernel_key == kernel_key,
                    RecordRow.shape_key == shape_key,
                    RecordRow.env_key == env.key,
                    RecordRow.quarantined.is_(False),
                )
            ).scalar_one_or_none()
            found = _readable_records([row] if row is not None else [])
            return found[0] if found else None

    def nearest(self, kernel_key: str, shape_key: str, env: Env) -> TunedRecord | None:
        """The tuned record of the same kernel (same env) whose shape is closest."""
        return nearest_record(self.records_of_kernels([kernel_key], env), shape_key)

    def records_of_kernels(self, kernel_keys: Iterable[str], env: Env) -> list[TunedRecord]:
        """Every usable record of these kernels in `env`, in one query."""
        return self.plan_lookup(kernel_keys, env)[0]

    def plan_lookup(
        self, kernel_keys: Iterable[str], env: Env
    ) -> tuple[list[TunedRecord], set[tuple[str, str]]]:
        """A new plan's one read: every usable record of these kernels in `env`, and the
        (kernel_key, shape_key) pairs that already have a tuning job."""
        keys = sorted(set(kernel_keys))
        if not keys:
            return [], set()
        with self.engine.connect() as c:
            rows = c.execute(_PLAN_RECORDS, {"keys": keys, "env_key": env.key}).all()
            queued = c.execute(_PLAN_JOBS, {"keys": keys, "env_key": env.key}).all()
        return _readable_records(rows), {(k, s) for k, s in queued}

    def get_binaries(self, code_keys: Iterable[str], env: Env) -> dict[str, tuple[bytes, str]]:
        """Verified binaries by code key, in one query; mismatches are quarantined. Only
        binaries compiled for `env`'s arch by its NVRTC are served: a row under a key this
        machine computes, claiming another arch or compiler, is not what the key says."""
        keys = sorted(set(code_keys))
        if not keys:
            return {}
        with self.engine.connect() as c:
            rows = c.execute(
                _PLAN_BINARIES, {"keys": keys, "arch": env.arch, "nvrtc": env.nvrtc_version}
            ).all()
        return self._verified(rows)

    def _verified(self, rows: Iterable) -> dict[str, tuple[bytes, str]]:
        """(code_key, cubin, sha256, kernel name) rows -> {code_key: (cubin, name)} of those
        whose bytes match their sha256; the others are quarantined."""
        found: dict[str, tuple[bytes, str]] = {}
        for code_key, cubin, digest, name in rows:
            if keys.binary_digest(cubin) == digest:
                found[code_key] = (bytes(cubin), name)
            else:
                self.quarantine_binary(code_key)
        return found

    def launch_plan_reads(
        self, plan_key: str, env: Env, keys_of: Callable[[str], tuple[list[str], list[str]] | None]
    ) -> (
        tuple[str, dict[tuple[str, str], dict], set[tuple[str, str]], dict[str, tuple[bytes, str]]]
        | None
    ):
        """A kept launch plan and what checking it takes, on one connection, as driver SQL (a
        new process's first call of a known signature pays no SQLAlchemy statement set-up):
        the plan JSON under `plan_key` (None if there is none or `keys_of` cannot read it);
        the tuned params {(kernel_key, shape_key): params} and queued (kernel_key, shape_key)
        of the kernel keys `keys_of(text)` names, in `env`; and its verified binaries by code
        key (a mismatch is quarantined and left out)."""
        raw = self.engine.raw_connection()
        try:
            cursor = raw.cursor()
            mark = "?" if self.engine.dialect.paramstyle == "qmark" else "%s"

            def rows(sql: str, *params: object) -> list:
                cursor.execute(sql.replace("?", mark), params)
                return cursor.fetchall()

            def marks(n: int) -> str:
                return ", ".join(["?"] * n)

            found = rows(
                f"SELECT plan_json FROM {LaunchPlanRow.__tablename__} WHERE plan_key = ?", plan_key
            )
            keys = keys_of(found[0][0]) if found else None
            if keys is None:
                return None
            kernel_keys, code_keys = sorted(set(keys[0])), sorted(set(keys[1]))
            records = (
                {
                    (k, sh): params
                    for k, sh, p in rows(
                        f"SELECT kernel_key, shape_key, params_json FROM {RecordRow.__tablename__} WHERE kernel_key IN "
                        f"({marks(len(kernel_keys))}) AND env_key = ? AND quarantined = false",
                        *kernel_keys,
                        env.key,
                    )
                    if (params := _json_or_none(p)) is not None
                }
                if kernel_keys
                else {}
            )
            queued = (
                {
                    (k, sh)
                    for k, sh in rows(
                        f"SELECT kernel_key, shape_key FROM {JobRow.__tablename__} WHERE kernel_key IN "
                        f"({marks(len(kernel_keys))}) AND env_key = ?",
                        *kernel_keys,
                        env.key,
                    )
                }
                if kernel_keys
                else set()
            )
            binary_rows = (
                rows(
                    f"SELECT code_key, cubin, sha256, kernel_name FROM {BinaryRow.__tablename__} WHERE code_key IN "
                    f"({marks(len(code_keys))}) AND quarantined = false AND arch = ? AND nvrtc_version = ?",
                    *code_keys,
                    env.arch,
                    env.nvrtc_version,
                )
                if code_keys
                else []
            )
            cursor.close()
        finally:
            raw.close()
        return found[0][0], records, queued, self._verified(binary_rows)

    def get_launch_plan(self, plan_key: str) -> str | None:
        """The launch plan JSON kept under `plan_key` (tunefuse.runtime.launch_plan), or None."""
        with self.engine.connect() as c:
            return c.execute(_LAUNCH_PLAN, {"plan_key": plan_key}).scalar()

    def note_plan(
        self,
        env: Env,
        *,
        fusion: tuple[str, str, str | None] | None = None,
        binaries: Iterable[tuple[str, bytes, str, str, str, str | None]] = (),
        hits: Iterable[tuple[str, str]] = (),
        jobs: Iterable[tuple[str, int, str, str, str]] = (),
        launch_plan: tuple[str, str, str] | None = None,
    ) -> None:
        """What executing a new plan leaves behind, in one transaction: the fusion, freshly
        compiled binaries (code_key, cubin, name, arch, nvrtc, source), hits on the tuned records
        used (kernel_key, shape_key), a tuning job per untuned kernel (fusion_id,
        segment index, kernel_key, shape_key, signature JSON): new, or one more hit, and the
        launch plan (plan_key, fusion_id, JSON; it replaces one kept under that key).
        Counts left by `count_later` are written in the same transaction. A read-only cache
        keeps none of it."""
        if self.read_only:
            return
        now = utcnow()
        queue = JobRow.__table__
        # A Core connection, not an ORM session: this write is on every new plan's path.
        with self._writing_counts(now, [("hits", k, sh, env.key) for k, sh in hits]) as s:
            if fusion is not None:
                self._insert_ignore(
                    s,
                    FusionRow,
                    dict(
                        fusion_id=fusion[0],
                        canonical_json=fusion[1],
                        name=fusion[2],
                        created_at=now,
                    ),
                )
            for code_key, cubin, name, arch, nvrtc, source in binaries:
                self._put_binary(s, code_key, cubin, name, arch, nvrtc, source)
            if launch_plan is not None:
                plan_key, fusion_id, text = launch_plan
                values = dict(env_key=env.key, fusion_id=fusion_id, plan_json=text, created_at=now)
                s.execute(
                    self._insert(LaunchPlanRow)
                    .values(plan_key=plan_key, **values)
                    .on_conflict_do_update(index_elements=["plan_key"], set_=values)
                )
            for fusion_id, index, kernel_key, shape_key, signature in jobs:
                bumped = s.execute(
                    update(queue)
                    .where(
                        queue.c.kernel_key == kernel_key,
                        queue.c.shape_key == shape_key,
                        queue.c.env_key == env.key,
                    )
                    .values(priority=queue.c.priority + 1, updated_at=now)
                )
                if not bumped.rowcount:
                    self._insert_ignore(
                        s,
                        JobRow,
                        dict(
                            fusion_id=fusion_id,
                            segment_index=index,
                            kernel_key=kernel_key,
                            shape_key=shape_key,
                            env_key=env.key,
                            signature_json=signature,
                            state="queued",
                            priority=1,
                            attempts=0,
                            created_at=now,
                            updated_at=now,
                        ),
                    )

    def count_later(
        self,
        env: Env,
        *,
        hits: Iterable[tuple[str, str]] = (),
        queued: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Count hits on tuned records and repeats of already-queued jobs (kernel_key,
        shape_key) without a write now: they go with the next write, `flush_counts`,
        `close`, or the process's exit. Counts only steer the daemon's order; a process
        killed before its exit loses its own, and nothing else."""
        if self.read_only:
            return
        with self._later_lock:
            self._later.update(("hits", k, s, env.key) for k, s in hits)
            self._later.update(("jobs", k, s, env.key) for k, s in queued)
            if not self._exit_hook:
                self._exit_hook = True
                import atexit

                atexit.register(_flush_at_exit, weakref.ref(self))

    def flush_counts(self) -> None:
        """Write the counts `count_later` kept, in one transaction (nothing to do: no write)."""
        with self._later_lock:
            if not self._later:
                return
        with self._writing_counts(utcnow()):
            pass  # nothing besides the counts: _writing_counts writes them as the block ends

    @contextlib.contextmanager
    def _writing_counts(self, now: dt.datetime, extra: Iterable[tuple[str, str, str, str]] = ()):  # noqa: ANN202
        """A write transaction that also writes the kept counts (and `extra` ones); on a
        failure the kept counts are kept again for the next write."""
        self._check_writable()
        with self._later_lock:
            pending, self._later = self._later, Counter()
        pending.update(extra)
        try:
            with self.write_engine.begin() as s:
                yield s
                self._write_counts(s, pending, now)
        except Exception:
            with self._later_lock:
                self._later.update(pending)
            raise

    @staticmethod
    def _write_counts(s: sa.Connection, pending: Counter, now: dt.datetime) -> None:
        records, queue = RecordRow.__table__, JobRow.__table__
        for (table, kernel_key, shape_key, env_key), n in sorted(pending.items()):
            # A hit counts on its record; a repeated job request raises the job's priority.
            target, values = (
                (records, {"hits": records.c.hits + n, "last_used_at": now})
                if table == "hits"
                else (queue, {"priority": queue.c.priority + n, "updated_at": now})
            )
            s.execute(
                update(target)
                .where(
                    target.c.kernel_key == kernel_key,
                    target.c.shape_key == shape_key,
                    target.c.env_key == env_key,
                )
                .values(**values)
            )

    def records(self) -> list[TunedRecord]:
        with self.session() as s:
            return _readable_records(s.execute(select(RecordRow).order_by(RecordRow.id)).scalars())

    # -- jobs ------------------------------------------------------------------------
    def enqueue(
        self,
        fusion_id: str,
        segment_index: int,
        kernel_key: str,
        shape_key: str,
        env: Env,
        signature_json: str,
    ) -> bool:
        """Queue a tuning job once per (kernel, shape, env); a repeat counts as a hit
        (priority). Returns True when a new job was queued."""
        for _ in range(3):
            try:
                with self.writer() as s, s.begin():
                    bumped = s.execute(
                        update(JobRow)
                        .where(
                            JobRow.kernel_key == kernel_key,
                            JobRow.shape_key == shape_key,
                            JobRow.env_key == env.key,
                        )
                        .values(priority=JobRow.priority + 1, updated_at=utcnow())
                    )
                    if bumped.rowcount:
                        return False
                    s.add(
                        JobRow(
                            fusion_id=fusion_id,
                            segment_index=segment_index,
                            kernel_key=kernel_key,
                            shape_key=shape_key,
                            env_key=env.key,
                            signature_json=signature_json,
                            priority=1,
                        )
                    )
                return True
            except IntegrityError:
                continue  # another process queued it between our update and insert
        return False

    def jobs(self, state: str | None = None) -> list[JobRow]:
        with self.session() as s:
            q = select(JobRow).order_by(JobRow.id)
            if state:
                q = q.where(JobRow.state == state)
            return list(s.execute(q).scalars())

    # -- maintenance -------------------------------------------------------------------
    def stats(self, env: Env | None = None) -> Stats:
        st = Stats()
        with self.session() as s:
            st.records = s.scalar(select(sa.func.count()).select_from(RecordRow)) or 0
            st.binaries = s.scalar(select(sa.func.count()).select_from(BinaryRow)) or 0
            st.binary_bytes = (
                s.scalar(select(sa.func.coalesce(sa.func.sum(BinaryRow.size), 0))) or 0
            )
            st.hits = s.scalar(select(sa.func.coalesce(sa.func.sum(RecordRow.hits), 0))) or 0
            st.quarantined = (
                s.scalar(
                    select(sa.func.count()).select_from(BinaryRow).where(BinaryRow.quarantined)
                )
                or 0
            )
            st.launch_plans = s.scalar(select(sa.func.count()).select_from(LaunchPlanRow)) or 0
            for state, n in s.execute(select(JobRow.state, sa.func.count()).group_by(JobRow.state)):
                st.jobs[state] = n
            if env is not None:
                st.stale_records = (
                    s.scalar(
                        select(sa.func.count())
                        .select_from(RecordRow)
                        .where(RecordRow.env_key != env.key)
                    )
                    or 0
                )
        return st

    PRUNE_BATCH = 500  # rows a delete transaction takes: the write lock is held for short spans

    def prune(
        self,
        *,
        older_than: dt.timedelta | None = None,
        unused_for: dt.timedelta | None = None,
        stale_env: Env | None = None,
        max_bytes: int | None = None,
        dry_run: bool = False,
    ) -> dict:
        """Delete records tuned before `older_than`, unused for `unused_for`, or measured in
        another env than `stale_env`; then, least recently used first, records and binaries
        until the binaries fit in `max_bytes`. A binary goes when no kept record needs it.
        Launch plans of another env, made before either age, or naming a binary that goes,
        go too (the next call of their signature plans again). Returns what went (or, with
        `dry_run`, would go).

        The plan is read without the write lock and without a binary's bytes; the deletes
        run in batches of PRUNE_BATCH rows, each its own short transaction, and each re-checks
        at delete time that its rows still qualify (a record used since its plan stays; a
        binary that a record needs stays), so that a writer beside a prune never waits long
        and never loses what it just stored."""
        plan = self.plan_prune(
            older_than=older_than, unused_for=unused_for, stale_env=stale_env, max_bytes=max_bytes
        )
        if not dry_run:
            self.apply_prune(plan)
        return plan.result

    def plan_prune(
        self,
        *,
        older_than: dt.timedelta | None = None,
        unused_for: dt.timedelta | None = None,
        stale_env: Env | None = None,
        max_bytes: int | None = None,
    ) -> PrunePlan:
        """What prune would delete (`.result`), read in one snapshot without the write lock
        and without a binary's bytes; `apply_prune` deletes it. Negative ages and sizes are
        refused (CacheError) before anything is read."""
        for name, age in (("older_than", older_than), ("unused_for", unused_for)):
            if age is not None and age < dt.timedelta(0):
                raise CacheError(f"prune: {name} must not be negative, got {age}")
        if max_bytes is not None and max_bytes < 0:
            raise CacheError(f"prune: max_bytes must not be negative, got {max_bytes}")
        now = utcnow()
        r_cols = (
            RecordRow.id,
            RecordRow.kernel_key,
            RecordRow.shape_key,
            RecordRow.env_key,
            RecordRow.code_key,
            RecordRow.tuned_at,
            RecordRow.last_used_at,
        )
        with self.session() as s:
            rows = s.execute(select(*r_cols)).all()
            sizes = {
                k: (size, used)
                for k, size, used in s.execute(
                    select(BinaryRow.code_key, BinaryRow.size, BinaryRow.last_used_at)
                ).all()
            }
            plans = s.execute(
                select(
                    LaunchPlanRow.plan_key,
                    LaunchPlanRow.env_key,
                    LaunchPlanRow.created_at,
                    LaunchPlanRow.plan_json,
                )
            ).all()
        doomed: dict[int, str] = {}
        for r in rows:
            if older_than is not None and r.tuned_at < now - older_than:
                doomed[r.id] = "age"
            elif unused_for is not None and r.last_used_at < now - unused_for:
                doomed[r.id] = "unused"
            elif stale_env is not None and r.env_key != stale_env.key:
                doomed[r.id] = "stale env"
        needed = Counter(r.code_key for r in rows if r.id not in doomed)
        gone = {r.code_key for r in rows if r.id in doomed} - set(needed)
        if max_bytes is not None:
            left = sum(size for k, (size, _) in sizes.items() if k not in gone)
            referenced = {r.code_key for r in rows}
            # Least recently used first: binaries no record needs, then records.
            for k, (size, _) in sorted(
                ((k, v) for k, v in sizes.items() if k not in referenced), key=lambda kv: kv[1][1]
            ):
                if left <= max_bytes:
                    break
                gone.add(k)
                left -= size
            for r in sorted((r for r in rows if r.id not in doomed), key=lambda r: r.last_used_at):
                if left <= max_bytes:
                    break
                doomed[r.id] = "size cap"
                needed[r.code_key] -= 1
                if needed[r.code_key] == 0 and r.code_key not in gone:
                    gone.add(r.code_key)
                    left -= sizes.get(r.code_key, (0, None))[0]
        # Launch plans are derived: one goes with its env, its age, or a binary it names.
        dropped = []
        for plan_key, env_key, created_at, text in plans:
            if (
                (stale_env is not None and env_key != stale_env.key)
                or (older_than is not None and created_at < now - older_than)
                or (unused_for is not None and created_at < now - unused_for)
                or (gone and not gone.isdisjoint(_HEX64.findall(text)))
            ):
                dropped.append(plan_key)
        result = {
            "records": [
                {
                    "id": r.id,
                    "kernel_key": r.kernel_key,
                    "shape_key": r.shape_key,
                    "why": doomed[r.id],
                }
                for r in rows
                if r.id in doomed
            ],
            "binaries": sorted(k for k in gone if k in sizes),
            "launch_plans": len(dropped),
        }
        last_used = {r.id: r.last_used_at for r in rows if r.id in doomed}
        return PrunePlan(result, last_used, sorted(k for k in gone if k in sizes), dropped)

    def apply_prune(self, plan: PrunePlan) -> None:
        """Delete what `plan` names, in short batches, each re-checked at delete time."""
        batch = self.PRUNE_BATCH
        ids = sorted(plan.last_used)
        for i in range(0, len(ids), batch):
            chunk = ids[i : i + batch]
            with self.writer() as s, s.begin():
                # A record used (or tuned again) since the plan read it stays.
                for rid in chunk:
                    s.execute(
                        sa.delete(RecordRow).where(
                            RecordRow.id == rid, RecordRow.last_used_at <= plan.last_used[rid]
                        )
                    )
        for i in range(0, len(plan.binaries), batch):
            chunk = plan.binaries[i : i + batch]
            with self.writer() as s, s.begin():
                needed = (
                    select(RecordRow.id).where(RecordRow.code_key == BinaryRow.code_key).exists()
                )
                s.execute(sa.delete(BinaryRow).where(BinaryRow.code_key.in_(chunk), ~needed))
        for i in range(0, len(plan.launch_plans), batch):
            with self.writer() as s, s.begin():
                s.execute(
                    sa.delete(LaunchPlanRow).where(
                        LaunchPlanRow.plan_key.in_(plan.launch_plans[i : i + batch])
                    )
                )

    def vacuum(self) -> None:
        """VACUUM runs outside any transaction: on a raw DBAPI connection in autocommit."""
        self._check_writable()
        raw = self.engine.raw_connection()
        try:
            if self.engine.dialect.name == "postgresql":
                raw.dbapi_connection.autocommit = True  # type: ignore[union-attr]
            cursor = raw.cursor()
            cursor.execute("VACUUM")
            cursor.close()
        finally:
            raw.close()

    # -- export / import -----------------------------------------------------------------
    def export(self, path: str | pathlib.Path) -> int:
        """JSON lines: fusions, binaries (base64, with sha256), records. Returns lines written."""
        n = 0
        with self.session() as s, open(path, "w") as f:
            f.write(json.dumps({"format": EXPORT_FORMAT}) + "\n")
            for row in s.execute(select(FusionRow)).scalars():
                f.write(
                    json.dumps(
                        {
                            "kind": "fusion",
                            "fusion_id": row.fusion_id,
                            "name": row.name,
                            "canonical_json": row.canonical_json,
                        }
                    )
                    + "\n"
                )
                n += 1
            for row in s.execute(
                select(BinaryRow).where(BinaryRow.quarantined.is_(False))
            ).scalars():
                f.write(
                    json.dumps(
                        {
                            "kind": "binary",
                            "code_key": row.code_key,
                            "sha256": row.sha256,
                            "kernel_name": row.kernel_name,
                            "arch": row.arch,
                            "nvrtc_version": row.nvrtc_version,
                            "source": row.source,
                            "cubin": base64.b64encode(row.cubin).decode(),
                        }
                    )
                    + "\n"
                )
                n += 1
            for rec in _readable_records(
                s.execute(select(RecordRow).where(RecordRow.quarantined.is_(False))).scalars()
            ):
                f.write(
                    json.dumps(
                        {
                            "kind": "record",
                            "kernel_key": rec.kernel_key,
                            "shape_key": rec.shape_key,
                            "env": asdict(rec.env),
                            "scheduler": rec.scheduler,
                            "params": rec.params,
                            "code_key": rec.code_key,
                            "median_us": rec.median_us,
                            "spread_us": rec.spread_us,
                            "default_us": rec.default_us,
                            "trials": rec.trials,
                            "fusion_id": rec.fusion_id,
                            "history": [list(h) for h in rec.history],
                        }
                    )
                    + "\n"
                )
                n += 1
        return n

    def import_(self, path: str | pathlib.Path) -> int:
        """Validate every line first (format, every field's type, range and length, binary
        hashes, fusion JSON, the binaries records refer to, each binary's key against its own
        source: cache_db/import_checks.py), compile every binary again from its source (or,
        made by another NVRTC, keep it quarantined), then write all of it in one transaction.
        Anything wrong refuses the whole file, naming the line, and writes nothing."""
        from cache_db.import_checks import ImportRefused, check_binary, check_fusion, check_record
        from tunefuse.compiler import CompileError, compile_kernel, nvrtc_version
        from tunefuse.errors import SerializationError
        from tunefuse.ir.serialize import fusion_from_json

        try:
            lines = pathlib.Path(path).read_bytes().decode("utf-8").splitlines()
        except UnicodeDecodeError as e:
            raise CacheError(f"{path}: not UTF-8 text (byte {e.start})") from None
        except OSError as e:
            raise CacheError(f"{path}: cannot read it ({e.strerror})") from None
        if not lines:
            raise CacheError(f"{path}: empty file")
        local_nvrtc = nvrtc_version()

        def parse(no: int, line: str) -> object:
            try:
                return json.loads(line)
            except json.JSONDecodeError as e:
                raise CacheError(f"{path}:{no}: not JSON ({e})") from None
            except RecursionError:
                raise CacheError(f"{path}:{no}: JSON nested too deeply") from None

        if parse(1, lines[0]) != {"format": EXPORT_FORMAT}:
            raise CacheError(
                f"{path}:1: not a tunefuse cache export (expected format {EXPORT_FORMAT})"
            )
        items = []
        binaries: set[str] = set()
        fusions: set[str] = set()
        for no, line in enumerate(lines[1:], start=2):
            item = parse(no, line)
            kind = item.get("kind") if isinstance(item, dict) else None
            try:
                if kind == "fusion":
                    check_fusion(item)  # type: ignore[arg-type]
                    fusion = fusion_from_json(item["canonical_json"])  # type: ignore[index]
                    if fusion.fusion_id != item["fusion_id"]:  # type: ignore[index]
                        raise CacheError("fusion_id does not match its JSON")
                    fusions.add(item["fusion_id"])  # type: ignore[index]
                elif kind == "binary":
                    check_binary(item)  # type: ignore[arg-type]
                    cubin = base64.b64decode(item["cubin"], validate=True)  # type: ignore[index]
                    if keys.binary_digest(cubin) != item["sha256"]:  # type: ignore[index]
                        raise CacheError(
                            f"binary {item['code_key'][:12]} does not match its sha256"
                        )  # type: ignore[index]
                    if item["nvrtc_version"] == local_nvrtc:  # type: ignore[index]
                        # Bound to its key: the bytes are this machine's compile of the source.
                        cubin = compile_kernel(
                            item["source"], item["kernel_name"], item["arch"]
                        ).cubin  # type: ignore[index]
                        item["quarantined"] = False  # type: ignore[index]
                    else:
                        item["quarantined"] = True  # type: ignore[index]
                    item["cubin_bytes"] = cubin  # type: ignore[index]
                    binaries.add(item["code_key"])  # type: ignore[index]
                elif kind == "record":
                    item["env_value"] = check_record(item, binaries, fusions)  # type: ignore[index]
                    item["history"] = _history_from_json(json.dumps(item.get("history") or []))  # type: ignore[index, union-attr]
                else:
                    raise CacheError(f"unknown kind {str(kind)[:40]!r}")
            except (
                ImportRefused,
                KeyError,
                TypeError,
                ValueError,
                SerializationError,
                RecursionError,
            ) as e:
                raise CacheError(f"{path}:{no}: invalid {kind or 'line'}: {e}") from None
            except CompileError as e:
                raise CacheError(
                    f"{path}:{no}: binary's source does not compile here: {str(e)[:200]}"
                ) from None
            except CacheError as e:
                raise CacheError(f"{path}:{no}: {e}") from None
            items.append(item)
        with self.writer() as s, s.begin():
            for item in items:
                if item["kind"] == "fusion":
                    self._insert_ignore(
                        s,
                        FusionRow,
                        dict(
                            fusion_id=item["fusion_id"],
                            name=item.get("name"),
                            canonical_json=item["canonical_json"],
                            created_at=utcnow(),
                        ),
                    )
                elif item["kind"] == "binary" and not item["quarantined"]:
                    self._put_binary(
                        s,
                        item["code_key"],
                        item["cubin_bytes"],
                        item["kernel_name"],
                        item["arch"],
                        item["nvrtc_version"],
                        item["source"],
                    )
                elif item["kind"] == "binary":
                    cubin, now = item["cubin_bytes"], utcnow()
                    self._insert_ignore(
                        s,
                        BinaryRow,
                        dict(
                            code_key=item["code_key"],
                            sha256=keys.binary_digest(cubin),
                            cubin=cubin,
                            size=len(cubin),
                            kernel_name=item["kernel_name"],
                            arch=item["arch"],
                            nvrtc_version=item["nvrtc_version"],
                            quarantined=True,
                            created_at=now,
                            last_used_at=now,
                            source=item["source"],
                        ),
                    )
            s.flush()
            for item in items:
                if item["kind"] == "record":
                    self._put_record(
                        s,
                        TunedRecord(
                            item["kernel_key"],
                            item["shape_key"],
                            item["env_value"],
                            item["scheduler"],
                            item["params"],
                            item["code_key"],
                            "",
                            item.get("median_us"),
                            item.get("spread_us"),
                            item.get("default_us"),
                            item.get("trials", 0),
                            item.get("fusion_id"),
                            history=item["history"],
                        ),
                    )
        return len(items)


def records_by_env(records: Iterable[TunedRecord]) -> dict[str, list[TunedRecord]]:
    out: dict[str, list[TunedRecord]] = {}
    for r in records:
        out.setdefault(r.env.key, []).append(r)
    return out
