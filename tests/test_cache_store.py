"""The persistent cache against a real SQLite file and the real PostgreSQL server."""

import datetime as dt
import hashlib
import json
import multiprocessing
import warnings

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st
from postgres import own_database, postgres_available

from cache_db import migrate
from cache_db.models import Base, BinaryRow, RecordRow
from cache_db.store import CacheError, CacheStore, Env, TunedRecord
from tunefuse import Cache, DataType, FusionDefinition

ENV = Env("9.0", "NVIDIA H100 80GB HBM3", "13.5", "13000", "1")
OTHER_ENV = Env("8.0", "NVIDIA A100-SXM4-80GB", "13.5", "13000", "1")


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = CacheStore.open(f"sqlite:///{tmp_path / 'cache.sqlite'}")
        yield s
        s.close()
        return
    if not postgres_available():
        pytest.skip("no PostgreSQL server on 127.0.0.1:5432")
    with own_database() as url:
        s = CacheStore.open(url)
        yield s
        s.close()
        s.engine.dispose()


def fusion_row(store):
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.relu(fd.define_tensor(shape=[-1], dtype=DataType.Float)))
    store.put_fusion(fd.fusion.fusion_id, fd.fusion.to_json(), "relu")
    return fd.fusion.fusion_id


def record(kernel="k" * 64, shape="1024", env=ENV, cubin=b"\x7fELF-cubin", **kw):
    code_key = hashlib.sha256(cubin + env.key.encode() + shape.encode()).hexdigest()
    defaults = dict(
        scheduler="pointwise",
        params={"block_size": 256, "vector": 4, "unroll": 1, "blocks_per_sm": 8},
        code_key=code_key,
        kernel_name="tf_pointwise_x",
        median_us=10.0,
        spread_us=0.2,
        default_us=12.0,
        trials=40,
    )
    defaults.update(kw)
    return TunedRecord(kernel, shape, env, **defaults), cubin


KERNEL_SOURCE = (
    'extern "C" __global__ void tf_pointwise_x(float* p) {{ p[threadIdx.x] = {value}.0f; }}\n'
)


def real_record(shape="1024", value=1, env=ENV, **kw):
    """A record whose binary is a real compile of a real source, stored under the key that
    source, arch and this NVRTC give (what cache import binds a binary to)."""
    from tunefuse.compiler import COMPILE_OPTIONS, compile_kernel, source_key

    source = KERNEL_SOURCE.format(value=value)
    cubin = compile_kernel(source, "tf_pointwise_x", "sm_90").cubin
    kw.setdefault("kernel", "ab" * 32)  # a kernel key is a sha256, as a segment's is
    rec, _ = record(
        shape=shape,
        env=env,
        cubin=cubin,
        code_key=source_key(source, "sm_90", COMPILE_OPTIONS),
        **kw,
    )
    return rec, cubin, source


def put_real(store, shape="1024", value=1, **kw):
    from tunefuse.compiler import nvrtc_version

    rec, cubin, source = real_record(shape, value, **kw)
    store.put_record(rec, cubin, "sm_90", nvrtc_version(), source=source)
    return rec, cubin, source


def test_migrations_give_exactly_the_models_schema(store):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    with store.engine.connect() as c:
        diff = compare_metadata(MigrationContext.configure(c), Base.metadata)
    assert diff == []
    assert migrate.current_revision(store.engine) == migrate.head_revision() == migrate.HEAD


def test_put_lookup_round_trip_and_env_isolation(store):
    rec, cubin = record()
    store.put_record(rec, cubin, "sm_90", "13.5")
    got = store.lookup(rec.kernel_key, rec.shape_key, ENV)
    assert got.params == rec.params and got.median_us == 10.0 and got.trials == 40
    assert store.get_binary(rec.code_key) == (cubin, "tf_pointwise_x")
    assert store.lookup(rec.kernel_key, rec.shape_key, OTHER_ENV) is None  # never another env's
    assert store.nearest(rec.kernel_key, "1000", OTHER_ENV) is None


def test_put_replaces_the_same_key_atomically(store):
    rec, cubin = record()
    store.put_record(rec, cubin, "sm_90", "13.5")
    better, cubin2 = record(median_us=8.0, cubin=b"\x7fELF-better")
    store.put_record(better, cubin2, "sm_90", "13.5")
    assert len(store.records()) == 1
    assert store.lookup(rec.kernel_key, rec.shape_key, ENV).median_us == 8.0
    with pytest.raises(CacheError, match="missing binary"):
        store.put_record(record(shape="7", cubin=b"never stored")[0])
    assert len(store.records()) == 1  # the failed put left nothing behind


def test_nearest_tuned_shape_is_the_warm_start(store):
    for shape in ("1024x1024", "4096x4096", "64x64"):
        rec, cubin = record(shape=shape)
        store.put_record(rec, cubin, "sm_90", "13.5")
    assert store.nearest("k" * 64, "3000x5000", ENV).shape_key == "4096x4096"
    assert store.nearest("k" * 64, "100", ENV) is None  # another rank
    assert store.nearest("z" * 64, "1024x1024", ENV) is None


def test_a_corrupted_binary_is_detected_quarantined_and_never_loaded(store):
    rec, cubin = record()
    store.put_record(rec, cubin, "sm_90", "13.5")
    with store.engine.begin() as c:
        c.execute(sa.update(BinaryRow).values(cubin=b"\x7fELF-tampered"))
    assert store.get_binary(rec.code_key) is None
    assert store.lookup(rec.kernel_key, rec.shape_key, ENV) is None  # its record is quarantined too
    assert store.stats().quarantined == 1
    assert store.verify() == []  # quarantined on read already: not reported (nor failed) again
    other, other_cubin = record(shape="2048", cubin=b"\x7fELF-other")
    store.put_record(other, other_cubin, "sm_90", "13.5")
    with store.engine.begin() as c:
        c.execute(
            sa.update(BinaryRow)
            .where(BinaryRow.code_key == other.code_key)
            .values(cubin=b"\x7fELF-bad")
        )
    assert store.verify() == [other.code_key]
    assert store.verify() == []


def test_enqueue_once_per_kernel_shape_env_and_count_hits(store):
    fid = fusion_row(store)
    assert store.enqueue(fid, 0, "k" * 64, "1024", ENV, "[]") is True
    assert store.enqueue(fid, 0, "k" * 64, "1024", ENV, "[]") is False
    assert store.enqueue(fid, 0, "k" * 64, "1024", OTHER_ENV, "[]") is True
    jobs = store.jobs()
    assert len(jobs) == 2 and sorted(j.priority for j in jobs) == [1, 2]


def test_prune_dry_run_lists_exactly_what_prune_deletes(store):
    old, c1 = record(shape="1")
    stale, c2 = record(shape="2", env=OTHER_ENV)
    fresh, c3 = record(shape="3")
    for r, c in ((old, c1), (stale, c2), (fresh, c3)):
        store.put_record(r, c, "sm_90", "13.5")
    with store.engine.begin() as c:
        c.execute(
            sa.update(RecordRow)
            .where(RecordRow.shape_key == "1")
            .values(tuned_at=dt.datetime(2020, 1, 1), last_used_at=dt.datetime(2020, 1, 1))
        )
    plan = store.prune(older_than=dt.timedelta(days=30), stale_env=ENV, dry_run=True)
    assert sorted(r["shape_key"] for r in plan["records"]) == ["1", "2"]
    assert len(store.records()) == 3  # a dry run deletes nothing
    done = store.prune(older_than=dt.timedelta(days=30), stale_env=ENV)
    assert done == plan
    assert [r.shape_key for r in store.records()] == ["3"]
    assert store.get_binary(fresh.code_key) is not None and store.get_binary(old.code_key) is None


def test_prune_by_size_cap_drops_least_recently_used(store):
    for k in range(4):
        rec, cubin = record(shape=str(k), cubin=bytes([k]) * 100)
        store.put_record(rec, cubin, "sm_90", "13.5")
        with store.engine.begin() as c:
            c.execute(
                sa.update(RecordRow)
                .where(RecordRow.shape_key == str(k))
                .values(last_used_at=dt.datetime(2025, 1, 1 + k))
            )
    result = store.prune(max_bytes=250)
    assert [r["shape_key"] for r in result["records"]] == ["0", "1"]
    assert store.stats().binary_bytes <= 250


def test_prune_refuses_negative_arguments(store):
    from cache_db.store import CacheError

    rec, cubin = record(shape="1")
    store.put_record(rec, cubin, "sm_90", "13.5")
    for kwargs in (
        dict(older_than=dt.timedelta(days=-5)),
        dict(unused_for=dt.timedelta(seconds=-1)),
        dict(max_bytes=-1),
    ):
        with pytest.raises(CacheError, match="must not be negative"):
            store.prune(**kwargs)
    assert len(store.records()) == 1


def test_prune_keeps_a_record_used_after_its_plan(store):
    """The plan is read first; the delete re-checks each row: a record used in between (a
    hit, a re-tune) stays, and so does the binary it needs."""
    rec, cubin = record(shape="1")
    store.put_record(rec, cubin, "sm_90", "13.5")
    with store.engine.begin() as c:
        c.execute(sa.update(RecordRow).values(last_used_at=dt.datetime(2020, 1, 1)))
    plan = store.plan_prune(unused_for=dt.timedelta(days=30))
    assert [r["shape_key"] for r in plan.result["records"]] == ["1"]
    with store.engine.begin() as c:
        c.execute(
            sa.update(RecordRow).values(
                last_used_at=dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
            )
        )
    store.apply_prune(plan)
    assert len(store.records()) == 1 and store.get_binary(rec.code_key) is not None


def test_prune_in_batches_beside_a_writer(store, monkeypatch):
    """Deletes go in short transactions (here 7 rows each): a writer storing records during a
    prune of many is never refused, and loses nothing."""
    import threading

    monkeypatch.setattr(type(store), "PRUNE_BATCH", 7)
    for k in range(60):
        rec, cubin = record(shape=f"old{k}", cubin=bytes([k % 256]) * 20)
        store.put_record(rec, cubin, "sm_90", "13.5")
    with store.engine.begin() as c:
        c.execute(sa.update(RecordRow).values(tuned_at=dt.datetime(2020, 1, 1)))
    errors, written = [], []

    def write() -> None:
        try:
            for k in range(30):
                rec, cubin = record(shape=f"new{k}", cubin=bytes([k]) * 30 + b"new")
                store.put_record(rec, cubin, "sm_90", "13.5")
                written.append(rec.shape_key)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    writer = threading.Thread(target=write)
    writer.start()
    done = store.prune(older_than=dt.timedelta(days=30))
    writer.join()
    assert not errors
    assert len(done["records"]) == 60
    assert sorted(r.shape_key for r in store.records()) == sorted(written)


HISTORY = ((0, 12.0, "COMPLETE"), (1, None, "FAIL"), (2, 10.0, "COMPLETE"))


def test_export_import_round_trip_and_tampering_refused(store, tmp_path):
    fid = fusion_row(store)
    rec, cubin, source = put_real(store, fusion_id=fid, history=HISTORY)
    path = tmp_path / "cache.jsonl"
    assert store.export(path) == 3
    fresh = CacheStore.open(f"sqlite:///{tmp_path / 'other.sqlite'}")
    assert fresh.import_(path) == 3
    assert fresh.lookup(rec.kernel_key, rec.shape_key, ENV).params == rec.params
    assert fresh.lookup(rec.kernel_key, rec.shape_key, ENV).history == HISTORY
    assert (
        fresh.get_binary(rec.code_key)[0] == cubin
    )  # compiled again here: NVRTC gives the same bytes
    assert fresh.get_source(rec.code_key) == source
    lines = path.read_text().splitlines()
    binary = json.loads(lines[2])
    binary["cubin"] = "AAAA" + binary["cubin"][4:]
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join([lines[0], lines[1], json.dumps(binary), lines[3]]) + "\n")
    empty = CacheStore.open(f"sqlite:///{tmp_path / 'empty.sqlite'}")
    with pytest.raises(CacheError, match="does not match its sha256"):
        empty.import_(tampered)
    assert empty.records() == [] and empty.stats().binaries == 0  # nothing half-imported
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"format": "tunefuse.cache.v1"}\n{"kind": "fusion", "fusion_id": "x", "canonical_json": "{}"}\n'
    )
    with pytest.raises(CacheError, match=":2: invalid fusion"):
        empty.import_(bad)
    doc = json.loads(lines[3])
    doc["history"] = [[0, "fast", "COMPLETE"]]
    bad.write_text("\n".join([lines[0], lines[1], lines[2], json.dumps(doc)]) + "\n")
    with pytest.raises(CacheError, match=":4: invalid record"):
        empty.import_(bad)
    assert empty.records() == []


def _export_lines(store, tmp_path):
    fid = fusion_row(store)
    rec, cubin, source = put_real(store, fusion_id=fid)
    path = tmp_path / "cache.jsonl"
    store.export(path)
    return rec, cubin, source, path.read_text().splitlines()


def test_a_planted_binary_is_never_what_an_import_stores(store, tmp_path):
    """A file may carry other bytes under an honest key (its own sha256 made to match): the
    import compiles the source again, so the planted bytes are never stored or loaded."""
    import base64

    rec, cubin, _, lines = _export_lines(store, tmp_path)
    binary = json.loads(lines[2])
    planted = b"\x7fELF" + b"planted code" * 50
    binary.update(
        cubin=base64.b64encode(planted).decode(), sha256=hashlib.sha256(planted).hexdigest()
    )
    path = tmp_path / "planted.jsonl"
    path.write_text("\n".join([lines[0], lines[1], json.dumps(binary), lines[3]]) + "\n")
    fresh = CacheStore.open(f"sqlite:///{tmp_path / 'fresh.sqlite'}")
    fresh.import_(path)
    assert fresh.get_binary(rec.code_key)[0] == cubin != planted


@pytest.mark.parametrize(
    "change, refusal",
    [
        (dict(code_key="ab" * 32), "code key is not the hash of its source"),
        (dict(source="// another kernel"), "code key is not the hash of its source"),
        (dict(source=None), "has no source"),
        (dict(arch="sm_90; rm -rf"), "arch"),
        (dict(kernel_name="x" * 300), "kernel_name is 300 characters"),
    ],
)
def test_import_refuses_a_binary_not_bound_to_its_key(store, tmp_path, change, refusal):
    _, _, _, lines = _export_lines(store, tmp_path)
    binary = json.loads(lines[2])
    binary.update(change)
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([lines[0], lines[1], json.dumps(binary), lines[3]]) + "\n")
    fresh = CacheStore.open(f"sqlite:///{tmp_path / 'fresh.sqlite'}")
    with pytest.raises(CacheError, match=refusal):
        fresh.import_(path)
    assert fresh.stats().binaries == 0 and fresh.records() == []


def test_a_binary_of_another_nvrtc_is_imported_quarantined(store, tmp_path):
    from tunefuse.compiler import COMPILE_OPTIONS, source_key

    rec, _, source, lines = _export_lines(store, tmp_path)
    binary, record_line = json.loads(lines[2]), json.loads(lines[3])
    key = source_key(source, "sm_90", COMPILE_OPTIONS, nvrtc="12.0")
    binary.update(nvrtc_version="12.0", code_key=key)
    record_line.update(code_key=key)
    path = tmp_path / "old.jsonl"
    path.write_text(
        "\n".join([lines[0], lines[1], json.dumps(binary), json.dumps(record_line)]) + "\n"
    )
    fresh = CacheStore.open(f"sqlite:///{tmp_path / 'fresh.sqlite'}")
    assert fresh.import_(path) == 3
    assert fresh.get_binary(key) is None and fresh.stats().quarantined >= 1


@pytest.mark.parametrize(
    "change, refusal",
    [
        (dict(params={"block_size": 256, "vector": "4"}), "do not fit the pointwise scheduler"),
        (dict(params={"block_size": 256, "vector": None}), "do not fit"),
        (dict(shape_key="abc"), "shape_key 'abc' is not well formed"),
        (dict(median_us="fast"), "median_us must be a finite number"),
        (dict(median_us=float("nan")), "median_us must be a finite number"),
        (dict(trials=-3), "trials must be a whole number"),
        (dict(scheduler="quantum"), "scheduler 'quantum' is none of"),
        (
            dict(
                env={
                    "compute_capability": "9.0",
                    "device_name": "x" * 5000,
                    "nvrtc_version": "13.5",
                    "driver_version": "1",
                    "codegen_version": "1",
                }
            ),
            "device_name is 5000 characters",
        ),
    ],
)
def test_import_refuses_a_malformed_record_by_name(store, tmp_path, change, refusal):
    _, _, _, lines = _export_lines(store, tmp_path)
    doc = json.loads(lines[3])
    doc.update(change)
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([lines[0], lines[1], lines[2], json.dumps(doc)]) + "\n")
    fresh = CacheStore.open(f"sqlite:///{tmp_path / 'fresh.sqlite'}")
    with pytest.raises(CacheError, match=refusal):
        fresh.import_(path)
    assert fresh.records() == [] and fresh.stats().binaries == 0


def test_import_refuses_bytes_that_are_not_text_or_json_too_deep(tmp_path):
    fresh = CacheStore.open(f"sqlite:///{tmp_path / 'fresh.sqlite'}")
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"format": "tunefuse.cache.v1"}\n\xff\xfe\x00garbage\n')
    with pytest.raises(CacheError, match="not UTF-8"):
        fresh.import_(path)
    path.write_text('{"format": "tunefuse.cache.v1"}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(CacheError, match=":2: (JSON nested too deeply|invalid line)"):
        fresh.import_(path)


def test_a_malformed_row_is_skipped_never_fatal(store):
    """A bad row in the cache (params not JSON, a vector stored as text, a shape key that is
    not extents) costs its own use: lookups skip it, the other rows serve, verify names it."""
    good, _, _ = put_real(store, shape="64x64")
    bad_json, _, _ = put_real(store, shape="64x128", value=2)
    bad_type, _, _ = put_real(store, shape="128x64", value=3)
    bad_shape, _, _ = put_real(store, shape="32x32", value=4)
    with store.engine.begin() as c:
        c.execute(
            sa.update(RecordRow)
            .where(RecordRow.shape_key == "64x128")
            .values(params_json="{not json")
        )
        c.execute(
            sa.update(RecordRow)
            .where(RecordRow.shape_key == "128x64")
            .values(params_json=json.dumps({"block_size": 256, "vector": "4"}))
        )
        c.execute(
            sa.update(RecordRow).where(RecordRow.shape_key == "32x32").values(shape_key="abc")
        )
    records, _ = store.plan_lookup([good.kernel_key], ENV)
    assert sorted(r.shape_key for r in records) == [
        "128x64",
        "64x64",
        "abc",
    ]  # the non-JSON row skipped
    from cache_db.store import nearest_record

    assert nearest_record([r for r in records if r.shape_key == "abc"], "64x64") is None
    assert store.lookup(bad_json.kernel_key, "64x128", ENV) is None
    assert len(store.records()) == 3
    why = {m["id"]: m["why"] for m in store.malformed_records()}
    assert len(why) == 3 and any("does not read back" in w for w in why.values())
    assert any("do not fit" in w for w in why.values()) and any(
        "not extents" in w for w in why.values()
    )


def _writer(url: str, worker: int, n: int, queue) -> None:  # noqa: ANN001
    try:
        store = CacheStore.open(url)
        fid = fusion_row(store)
        for k in range(n):
            rec, cubin = record(shape=f"{worker}x{k}", cubin=f"{worker}-{k}".encode())
            store.put_record(rec, cubin, "sm_90", "13.5")
            store.enqueue(fid, 0, "j" * 64, str(k % 5), ENV, "[]")
            assert store.lookup(rec.kernel_key, rec.shape_key, ENV) is not None
        queue.put(None)
    except Exception as e:  # noqa: BLE001
        queue.put(repr(e))


def test_eight_processes_share_one_sqlite_file_without_losing_a_write(tmp_path):
    url = f"sqlite:///{tmp_path / 'shared.sqlite'}"
    CacheStore.open(url).close()
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(url, w, 25, queue)) for w in range(8)]
    for p in procs:
        p.start()
    errors = [queue.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert errors == [None] * 8
    store = CacheStore.open(url)
    assert len(store.records()) == 8 * 25
    jobs = store.jobs()
    assert len(jobs) == 5 and sum(j.priority for j in jobs) == 8 * 25


def test_an_unreachable_cache_warns_once_and_gets_out_of_the_way():
    cache = Cache("postgresql+psycopg://nobody@127.0.0.1:9/none?connect_timeout=2")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.store is None
        assert cache.store is None
        assert cache.guard(lambda: 1 / 0, "fallback") == "fallback"
    assert len(caught) == 1 and "running without it" in str(caught[0].message)


def test_a_bad_cache_url_is_a_clear_error():
    with pytest.raises(CacheError, match="not a database URL"):
        CacheStore.open("definitely not a url")


def test_a_plans_reads_and_its_one_write(store):
    """What execution does per plan: two reads (records, binaries), one write."""
    fid = fusion_row(store)
    rec, cubin = record(shape="64x64")
    store.put_record(rec, cubin, "sm_90", "13.5")
    other, other_cubin = record(kernel="m" * 64, shape="8", env=OTHER_ENV)
    store.put_record(other, other_cubin, "sm_90", "13.5")
    found = store.records_of_kernels(["k" * 64, "m" * 64, "z" * 64], ENV)
    assert [(r.kernel_key, r.shape_key) for r in found] == [("k" * 64, "64x64")]  # env isolation
    assert store.get_binaries([rec.code_key, "missing"], ENV) == {
        rec.code_key: (cubin, "tf_pointwise_x")
    }
    store.note_plan(
        ENV,
        fusion=(fid, "ignored: already stored", None),
        binaries=[("new" * 10, b"\x7fELF-new", "tf_new", "sm_90", "13.5", "// tf_new")],
        hits=[("k" * 64, "64x64")],
        jobs=[(fid, 0, "j" * 64, "4", "[]"), (fid, 1, "j" * 64, "5", "[]")],
    )
    store.note_plan(ENV, jobs=[(fid, 0, "j" * 64, "4", "[]")])
    assert store.get_binaries(["new" * 10], ENV)["new" * 10][1] == "tf_new"
    assert store.get_source("new" * 10) == "// tf_new" and store.get_source(rec.code_key) is None
    assert store.lookup("k" * 64, "64x64", ENV).hits == 1
    jobs = {j.shape_key: j.priority for j in store.jobs()}
    assert jobs == {"4": 2, "5": 1}
    records, queued = store.plan_lookup(["k" * 64, "j" * 64], ENV)
    assert [r.shape_key for r in records] == ["64x64"] and queued == {
        ("j" * 64, "4"),
        ("j" * 64, "5"),
    }
    assert store.plan_lookup(["j" * 64], OTHER_ENV) == ([], set())  # jobs are per env too
    with store.engine.begin() as c:
        c.execute(
            sa.update(BinaryRow).where(BinaryRow.code_key == rec.code_key).values(cubin=b"bad")
        )
    assert store.get_binaries([rec.code_key], ENV) == {}  # a corrupt binary is never handed out
    assert store.lookup(rec.kernel_key, rec.shape_key, ENV) is None


def test_daemon_workers_report_in_place(store):
    from cache_db import queue

    queue.report_worker(store, "host:1:0", "host", 1, 0, "idle")
    queue.report_worker(store, "host:1:0", "host", 1, 0, "busy", job_id=7, jobs_done=2)
    queue.report_worker(store, "other:2:1", "other", 2, 1, "stopped", jobs_done=5)
    found = {w.owner: w for w in queue.workers(store)}
    assert set(found) == {"host:1:0", "other:2:1"}
    busy = found["host:1:0"]
    assert (busy.state, busy.job_id, busy.jobs_done, busy.device) == ("busy", 7, 2, 0)
    assert busy.last_seen_at >= busy.started_at
    assert busy.silent_for().total_seconds() < 60


def test_counts_kept_for_later_are_written_with_the_next_write_or_a_flush(store):
    """A plan of known kernels writes nothing: its hits and job repeats wait in memory."""
    fid = fusion_row(store)
    rec, cubin = record(shape="64x64")
    store.put_record(rec, cubin, "sm_90", "13.5")
    store.note_plan(ENV, jobs=[(fid, 0, "j" * 64, "4", "[]")])
    store.count_later(ENV, hits=[("k" * 64, "64x64")] * 3, queued=[("j" * 64, "4")] * 2)
    assert store.lookup("k" * 64, "64x64", ENV).hits == 0  # not written yet
    store.note_plan(ENV, jobs=[(fid, 1, "j" * 64, "5", "[]")])  # the next write takes them along
    assert store.lookup("k" * 64, "64x64", ENV).hits == 3
    assert {j.shape_key: j.priority for j in store.jobs()} == {"4": 3, "5": 1}
    store.count_later(ENV, hits=[("k" * 64, "64x64")], queued=[("j" * 64, "5")])
    store.flush_counts()
    store.flush_counts()  # nothing left: no double count
    assert store.lookup("k" * 64, "64x64", ENV).hits == 4
    assert {j.shape_key: j.priority for j in store.jobs()} == {"4": 3, "5": 2}


def test_counts_kept_for_later_are_written_at_process_exit(tmp_path):
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'cache.sqlite'}"
    store = CacheStore.open(url)
    rec, cubin = record(shape="64x64")
    store.put_record(rec, cubin, "sm_90", "13.5")
    env = json.dumps(
        [
            ENV.compute_capability,
            ENV.device_name,
            ENV.nvrtc_version,
            ENV.driver_version,
            ENV.codegen_version,
        ]
    )
    code = (
        "import json, sys; from cache_db.store import CacheStore, Env; "
        f"s = CacheStore.open({url!r}); s.count_later(Env(*json.loads(sys.argv[1])), "
        "hits=[('k' * 64, '64x64')] * 2)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, env], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert store.lookup("k" * 64, "64x64", ENV).hits == 2
    store.close()


@given(
    st.lists(st.sampled_from(list("abz09_-./ ~+=") + ["é", "dir/"]), min_size=1, max_size=30).map(
        "".join
    ),
    st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_a_sqlite_url_reads_as_sqlalchemy_reads_it(path, absolute):
    from cache_db.store import _parse_url

    url = "sqlite:///" + ("/" if absolute else "") + path
    assert _parse_url(url) == sa.engine.make_url(url)


def test_a_read_only_cache_serves_lookups_and_keeps_nothing(tmp_path):
    """A cache this process cannot write (a shared, read-only file): lookups, binaries and
    launch plans are served; what a call leaves behind (hits, jobs, launch plans, fresh
    binaries) is not written and is no error; any other write is refused by name."""
    url = f"sqlite:///{tmp_path / 'shared.sqlite'}"
    writable = CacheStore.open(url)
    fid = fusion_row(writable)
    rec, cubin = record(shape="64x64")
    writable.put_record(rec, cubin, "sm_90", "13.5")
    writable.note_plan(ENV, launch_plan=("p" * 64, fid, '{"kernels": []}'))
    writable.close()
    before = (tmp_path / "shared.sqlite").read_bytes()

    store = CacheStore.open(url, read_only=True)
    assert store.read_only
    records, _ = store.plan_lookup([rec.kernel_key], ENV)
    assert [r.shape_key for r in records] == ["64x64"]
    assert store.get_binaries([rec.code_key], ENV) == {rec.code_key: (cubin, "tf_pointwise_x")}
    assert store.get_launch_plan("p" * 64) == '{"kernels": []}'
    store.note_plan(
        ENV,
        hits=[(rec.kernel_key, "64x64")],
        jobs=[(fid, 0, "j" * 64, "4", "[]")],
        binaries=[("new" * 10, b"x", "tf_new", "sm_90", "13.5", None)],
    )
    store.count_later(ENV, hits=[(rec.kernel_key, "64x64")])
    store.flush_counts()
    store.quarantine_binary(rec.code_key)
    for write in (
        lambda: store.put_record(rec, cubin, "sm_90", "13.5"),
        store.vacuum,
        lambda: store.enqueue(fid, 0, "j" * 64, "4", ENV, "[]"),
    ):
        with pytest.raises(CacheError, match="read-only"):
            write()
    with pytest.raises(sa.exc.OperationalError, match="readonly"):  # not even by hand
        with store.write_engine.begin() as c:
            c.execute(sa.delete(RecordRow))
    store.close()
    assert (tmp_path / "shared.sqlite").read_bytes() == before
    with pytest.raises(CacheError, match="not created"):
        CacheStore.open(f"sqlite:///{tmp_path / 'absent.sqlite'}", read_only=True)


def test_a_file_this_process_cannot_write_opens_read_only(tmp_path):
    import os

    if os.geteuid() == 0:
        pytest.skip("root writes any file: permissions cannot make one read-only here")
    url = f"sqlite:///{tmp_path / 'shared.sqlite'}"
    CacheStore.open(url).close()
    (tmp_path / "shared.sqlite").chmod(0o444)
    tmp_path.chmod(0o555)
    try:
        store = CacheStore.open(url)
        assert store.read_only and store.records() == []
    finally:
        tmp_path.chmod(0o755)
