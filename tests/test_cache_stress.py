"""The cache under concurrency, on SQLite and PostgreSQL: processes opening a new cache at
the same moment (the migration runs under a real lock; the ones that lose the race find the
schema migrated), and a failed cache tried again later rather than abandoned."""

from __future__ import annotations

import multiprocessing

import pytest

from cache_db.store import CacheStore
from postgres import own_database, postgres_available
from test_cache_store import ENV, record

PROCESSES, ROUNDS = 8, 5


def _open_and_write(url: str, worker: int, start, results) -> None:  # noqa: ANN001
    try:
        start.wait(30)
        store = CacheStore.open(url)
        rec, cubin = record(shape=f"{worker}", cubin=f"w{worker}".encode())
        store.put_record(rec, cubin, "sm_90", "13.5")
        store.close()
        results.put(None)
    except Exception as e:  # noqa: BLE001
        results.put(f"{type(e).__name__}: {e}")


def _race(url: str) -> list[str]:
    ctx = multiprocessing.get_context("fork")
    start, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_open_and_write, args=(url, k, start, results)) for k in range(PROCESSES)]
    for p in procs:
        p.start()
    start.set()
    outcomes = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    return [o for o in outcomes if o is not None]


def test_processes_opening_a_new_sqlite_cache_at_once_all_succeed(tmp_path):
    for round_ in range(ROUNDS):
        url = f"sqlite:///{tmp_path / f'new{round_}.sqlite'}"
        assert _race(url) == []
        assert len(CacheStore.open(url).records()) == PROCESSES


def test_processes_opening_a_new_postgres_cache_at_once_all_succeed():
    if not postgres_available():
        pytest.skip("no PostgreSQL server on 127.0.0.1:5432")
    for _ in range(ROUNDS):
        with own_database() as url:
            assert _race(url) == []
            store = CacheStore.open(url)
            assert len(store.records()) == PROCESSES
            store.close()
            store.engine.dispose()


def test_a_cache_that_failed_is_tried_again_later(tmp_path, monkeypatch):
    import time

    import tunefuse
    from tunefuse.cache import Cache

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache's folder should be")
    url = f"sqlite:///{blocker / 'cache.sqlite'}"
    cache = Cache(url)
    with pytest.warns(RuntimeWarning, match="unusable"):
        assert cache.store is None
    assert cache.disabled
    blocker.unlink()  # the cause goes away
    now = time.monotonic()
    monkeypatch.setattr(time, "monotonic", lambda: now + Cache.RETRY_FIRST_S + 1)
    assert not cache.disabled
    assert cache.store is not None  # opened on the next try
    assert isinstance(cache, tunefuse.Cache)
