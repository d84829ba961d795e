"""The cache under concurrency, on SQLite and PostgreSQL: processes opening a new cache at
the same moment (the migration runs under a real lock; the ones that lose the race find the
schema migrated), and a failed cache tried again later rather than abandoned."""

from __future__ import annotations

import datetime as dt
import multiprocessing

import pytest
from postgres import own_database, postgres_available
from test_cache_store import ENV, fusion_row, record

from cache_db.store import CacheStore

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
    procs = [
        ctx.Process(target=_open_and_write, args=(url, k, start, results)) for k in range(PROCESSES)
    ]
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


# -- prune at the size of a real cache, beside a writer ------------------------------------

RECORDS_AT_SCALE, BINARIES_AT_SCALE, CUBIN_BYTES = 4_463, 6_176, 13_000  # ~80 MB of binaries


def fill_at_scale(store: CacheStore) -> None:
    """A cache the size the issue measured: 4,463 records, 6,176 binaries (1,713 that no
    record needs), half the records tuned long ago. Written in bulk, in one transaction."""
    import hashlib

    import sqlalchemy as sa

    from cache_db.models import BinaryRow, RecordRow

    now, long_ago = dt.datetime.now(), dt.datetime(2020, 1, 1)
    binaries, records = [], []
    for k in range(BINARIES_AT_SCALE):
        cubin = k.to_bytes(4, "little") * (CUBIN_BYTES // 4)
        binaries.append(
            dict(
                code_key=f"{k:064x}",
                sha256=hashlib.sha256(cubin).hexdigest(),
                cubin=cubin,
                size=len(cubin),
                kernel_name="tf_k",
                arch="sm_90",
                nvrtc_version="13.5",
                quarantined=False,
                created_at=now,
                last_used_at=now,
                source=None,
            )
        )
    env = dict(
        env_key=ENV.key,
        compute_capability=ENV.compute_capability,
        device_name=ENV.device_name,
        nvrtc_version=ENV.nvrtc_version,
        driver_version=ENV.driver_version,
        codegen_version=ENV.codegen_version,
    )
    for k in range(RECORDS_AT_SCALE):
        records.append(
            dict(
                kernel_key=f"{k % 997:064x}",
                shape_key=f"{k}x64",
                scheduler="pointwise",
                params_json='{"block_size": 256, "vector": 4, "unroll": 1, "blocks_per_sm": 8}',
                code_key=f"{k:064x}",
                median_us=1.0,
                trials=40,
                hits=0,
                quarantined=False,
                tuned_at=long_ago if k % 2 else now,
                last_used_at=now,
                **env,
            )
        )
    with store.writer() as s, s.begin():
        for i in range(0, len(binaries), 500):
            s.execute(sa.insert(BinaryRow), binaries[i : i + 500])
        for i in range(0, len(records), 500):
            s.execute(sa.insert(RecordRow), records[i : i + 500])


def _write_beside(url: str, stop, results) -> None:  # noqa: ANN001
    """A tuning process storing records while prune runs: every store must succeed."""
    store = CacheStore.open(url)
    stored, failures, k = [], [], 0
    while not stop.is_set() or k < 20:
        rec, cubin = record(shape=f"beside{k}", cubin=f"beside{k}".encode())
        try:
            store.put_record(rec, cubin, "sm_90", "13.5")
            stored.append(rec.shape_key)
        except Exception as e:  # noqa: BLE001
            failures.append(f"{type(e).__name__}: {e}")
        k += 1
    store.close()
    results.put((stored, failures))


def _prune_at_scale(url: str) -> dict:
    import json
    import time

    import sqlalchemy as sa
    from typer.testing import CliRunner

    from cli.main import app

    store = CacheStore.open(url)
    fill_at_scale(store)
    ctx = multiprocessing.get_context("fork")
    stop, results = ctx.Event(), ctx.Queue()
    writer = ctx.Process(target=_write_beside, args=(url, stop, results))
    writer.start()
    statements: list[str] = []
    sa.event.listen(
        store.engine,
        "before_cursor_execute",
        lambda conn, cursor, sql, *rest: statements.append(sql),
    )
    timings = {}
    try:
        started = time.monotonic()
        dry = CliRunner().invoke(
            app, ["cache", "prune", "--cache", url, "--older-than", "30", "--dry-run", "--json"]
        )
        timings["dry_run_cli_s"] = time.monotonic() - started
        assert dry.exit_code == 0, dry.output
        started = time.monotonic()
        plan = store.plan_prune(older_than=dt.timedelta(days=30))
        store.apply_prune(plan)
        timings["prune_s"] = time.monotonic() - started
    finally:
        stop.set()
        stored, failures = results.get(timeout=120)
        writer.join(timeout=30)
    planned = json.loads(dry.output)
    assert len(planned["records"]) == RECORDS_AT_SCALE // 2
    assert (
        len(planned["binaries"]) == RECORDS_AT_SCALE // 2
    )  # theirs; binaries no record needed stay
    assert failures == []  # the writer was never refused
    assert not [s for s in statements if "cubin" in s.lower()]  # no binary body was read
    shapes = {r.shape_key for r in store.records()}
    assert set(stored) <= shapes and len(shapes) == RECORDS_AT_SCALE - RECORDS_AT_SCALE // 2 + len(
        stored
    )
    timings["writes_beside"] = len(stored)
    store.close()
    store.engine.dispose()
    print(f"prune at scale ({url.split(':')[0]}): {timings}")
    return timings


def test_prune_at_scale_beside_a_writer_sqlite(tmp_path):
    _prune_at_scale(f"sqlite:///{tmp_path / 'big.sqlite'}")


def test_prune_at_scale_beside_a_writer_postgres():
    if not postgres_available():
        pytest.skip("no PostgreSQL server on 127.0.0.1:5432")
    with own_database() as url:
        _prune_at_scale(url)


# -- the queue with workers killed mid-job ---------------------------------------------------

QUEUE_JOBS, QUEUE_WORKERS = 400, 6


def _queue_worker(url: str, seed: int, done_log: str) -> None:
    """Claim jobs with a short lease and finish them; a job it finishes is logged after its
    `complete` commits. The test SIGKILLs these processes at random moments."""
    import random
    import time

    from cache_db import queue

    store = CacheStore.open(url)
    rng = random.Random(seed)
    owner = f"stress-{seed}"
    while True:
        job = queue.claim(store, owner, dt.timedelta(seconds=1))
        if job is None:
            time.sleep(0.05)
            continue
        time.sleep(rng.uniform(0.02, 0.08))  # "tuning": a kill often lands here
        try:
            queue.complete(store, job.id, owner)
        except queue.LeaseLost:
            continue
        with open(done_log, "a") as log:
            log.write(f"{job.id}\n")


def _queue_under_kills(url: str, tmp_path) -> None:
    import random
    import time

    from cache_db import queue

    store = CacheStore.open(url)
    fid = fusion_row(store)
    for i in range(QUEUE_JOBS):
        assert store.enqueue(fid, 0, "q" * 64, f"{i}x1", ENV, "[]")
    done_log = tmp_path / "done.log"
    done_log.touch()
    ctx = multiprocessing.get_context("fork")
    rng, seed, kills = random.Random(0), 0, 0
    workers = []

    def start() -> None:
        nonlocal seed
        seed += 1
        p = ctx.Process(target=_queue_worker, args=(url, seed, str(done_log)), daemon=True)
        p.start()
        workers.append(p)

    for _ in range(QUEUE_WORKERS):
        start()
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            states = {j.state for j in store.jobs()}
            if states == {"done"}:
                break
            time.sleep(rng.uniform(0.05, 0.3))
            victim = workers.pop(rng.randrange(len(workers)))
            victim.kill()  # SIGKILL: no cleanup, a lease left behind
            victim.join()
            kills += 1
            start()
    finally:
        for p in workers:
            p.kill()
            p.join()
    jobs = store.jobs()
    assert {j.state for j in jobs} == {"done"}, [j.state for j in jobs if j.state != "done"][:5]
    finished = [int(line) for line in done_log.read_text().split()]
    # Each job completed exactly once: a lease that outlived its killed worker went to another,
    # and `complete` by an owner who lost the lease is refused.
    assert len(finished) == len(set(finished)) <= QUEUE_JOBS
    reclaimed = sum(j.attempts > 1 for j in jobs)  # leases that outlived a killed worker
    assert kills >= 5 and reclaimed >= 1
    assert queue.claim(store, "late", dt.timedelta(seconds=1)) is None
    store.close()
    print(
        f"queue under kills ({url.split(':')[0]}): {QUEUE_JOBS} jobs, {kills} workers SIGKILLed, "
        f"{reclaimed} jobs claimed again after a kill, {len(finished)} completions logged, none twice"
    )


def test_queue_with_workers_killed_mid_job_sqlite(tmp_path):
    _queue_under_kills(f"sqlite:///{tmp_path / 'queue.sqlite'}", tmp_path)


def test_queue_with_workers_killed_mid_job_postgres(tmp_path):
    if not postgres_available():
        pytest.skip("no PostgreSQL server on 127.0.0.1:5432")
    with own_database() as url:
        _queue_under_kills(url, tmp_path)
